package dev.ramtrain.trainer.nn;

import dev.ramtrain.format.ImageShape;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * timm's VisionTransformer as layers, with timm's parameter names and shapes: a patch convolution
 * ({@code patch_embed.proj}), the class token and position embedding, {@code depth} pre-norm blocks
 * ({@code blocks.i.norm1}, {@code .attn.qkv}, {@code .attn.proj}, {@code .norm2}, {@code .mlp.fc1},
 * {@code .mlp.fc2}; GELU, MLP ratio 4, qkv bias, LayerNorm eps 1e-6), the final {@code norm}, the
 * class token pooled ({@code global_pool='token'}) and the {@code head}. Drop path rises linearly
 * over depth from 0 to the given rate, as timm's {@code drop_path_rate}.
 */
public final class VisionTransformer {
  /** The sizes that tell ViTs apart. */
  public record Config(int patch, int dim, int depth, int heads) {
    public Config {
      if (patch < 1 || dim < 1 || depth < 1 || heads < 1 || dim % heads != 0) {
        throw new IllegalArgumentException(
            "a ViT needs a positive patch, width, depth and heads dividing the width, got " + this);
      }
    }
  }

  /** timm's names of the standard sizes (their 224×224 pretrained checkpoints). */
  public static final Map<String, Config> NAMED =
      Map.of(
          "vit_tiny_patch16_224", new Config(16, 192, 12, 3),
          "vit_small_patch16_224", new Config(16, 384, 12, 6),
          "vit_base_patch16_224", new Config(16, 768, 12, 12),
          "vit_large_patch16_224", new Config(16, 1024, 24, 16),
          "vit_huge_patch14_224", new Config(14, 1280, 32, 16));

  private static final float EPS = 1e-6f;

  private VisionTransformer() {}

  public static List<Layer> layers(
      Config config, ImageShape input, int classes, float dropPath, Precision precision) {
    int p = config.patch();
    if (input.height() % p != 0 || input.width() % p != 0) {
      throw new IllegalArgumentException(
          "a ViT with "
              + p
              + "x"
              + p
              + " patches needs an image size divisible by "
              + p
              + ", got "
              + input.height()
              + "x"
              + input.width());
    }
    int dim = config.dim();
    List<Layer> layers = new ArrayList<>();
    Conv2d patches =
        new Conv2d(
            "patch_embed.proj",
            input.channels(),
            input.height(),
            input.width(),
            dim,
            p,
            p,
            0,
            true,
            precision);
    layers.add(patches);
    PatchTokens embed =
        new PatchTokens("embed", dim, patches.outputHeight() * patches.outputWidth());
    layers.add(embed);
    int tokens = embed.tokens();
    for (int i = 0; i < config.depth(); i++) {
      String block = "blocks." + i;
      float rate = config.depth() == 1 ? 0 : dropPath * i / (config.depth() - 1);
      layers.add(
          new Residual(
              block + ".attn_path",
              List.of(
                  LayerNorm.overFeatures(block + ".norm1", tokens, dim, EPS),
                  new Attention(block + ".attn", tokens, dim, config.heads(), precision)),
              rate));
      layers.add(
          new Residual(
              block + ".mlp_path",
              List.of(
                  LayerNorm.overFeatures(block + ".norm2", tokens, dim, EPS),
                  new Linear(block + ".mlp.fc1", dim, 4 * dim, tokens, precision, true),
                  new Activation(block + ".mlp.act", Activation.Kind.GELU, tokens * 4 * dim),
                  new Linear(block + ".mlp.fc2", 4 * dim, dim, tokens, precision, true)),
              rate));
    }
    layers.add(LayerNorm.overFeatures("norm", tokens, dim, EPS));
    layers.add(new ClassTokenPool("pool", tokens, dim));
    layers.add(new Linear("head", dim, classes, 1, precision, true));
    return layers;
  }
}
