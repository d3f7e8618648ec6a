package dev.ramtrain.trainer.nn;

import dev.ramtrain.format.ImageShape;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * timm's ConvNeXt with its parameter names: a 4×4/4 patchify stem ({@code stem.0}) and LayerNorm2d
 * ({@code stem.1}); four stages, each but the first opened by a LayerNorm2d and a 2×2/2 convolution
 * ({@code stages.i.downsample.0/1}); blocks of a 7×7 depthwise convolution ({@code conv_dw}), then,
 * channels last, LayerNorm ({@code norm}), a 4× GELU MLP ({@code mlp.fc1}, {@code mlp.fc2}) and
 * layer scale ({@code gamma}), added to the block's input with drop path rising linearly over all
 * blocks; global average pooling, LayerNorm ({@code head.norm}) and the classifier ({@code
 * head.fc}). LayerNorm eps 1e-6 throughout.
 */
public final class ConvNeXt {
  /** Blocks per stage and the stages' widths. */
  public record Config(int[] depths, int[] dims) {
    public Config {
      if (depths.length != 4 || dims.length != 4) {
        throw new IllegalArgumentException("a ConvNeXt has four stages");
      }
      depths = depths.clone();
      dims = dims.clone();
    }
  }

  /** timm's names of the published sizes. */
  public static final Map<String, Config> NAMED =
      Map.of(
          "convnext_tiny", new Config(new int[] {3, 3, 9, 3}, new int[] {96, 192, 384, 768}),
          "convnext_small", new Config(new int[] {3, 3, 27, 3}, new int[] {96, 192, 384, 768}),
          "convnext_base", new Config(new int[] {3, 3, 27, 3}, new int[] {128, 256, 512, 1024}),
          "convnext_large", new Config(new int[] {3, 3, 27, 3}, new int[] {192, 384, 768, 1536}));

  private static final float EPS = 1e-6f;

  private ConvNeXt() {}

  public static List<Layer> layers(
      Config config, ImageShape input, int classes, float dropPath, Precision precision) {
    if (input.height() % 32 != 0 || input.width() % 32 != 0) {
      throw new IllegalArgumentException(
          "a ConvNeXt downsamples by 32: it needs an image size divisible by 32, got "
              + input.height()
              + "x"
              + input.width());
    }
    List<Layer> layers = new ArrayList<>();
    int c = config.dims()[0];
    Conv2d stem =
        new Conv2d(
            "stem.0", input.channels(), input.height(), input.width(), c, 4, 4, 0, true, precision);
    int h = stem.outputHeight();
    int w = stem.outputWidth();
    layers.add(stem);
    layers.add(LayerNorm.overChannels("stem.1", c, h, w, EPS));
    int blocks = 0;
    for (int depth : config.depths()) {
      blocks += depth;
    }
    int block = 0;
    for (int stage = 0; stage < 4; stage++) {
      String prefix = "stages." + stage;
      if (stage > 0) {
        int out = config.dims()[stage];
        layers.add(LayerNorm.overChannels(prefix + ".downsample.0", c, h, w, EPS));
        Conv2d down = new Conv2d(prefix + ".downsample.1", c, h, w, out, 2, 2, 0, true, precision);
        layers.add(down);
        c = out;
        h = down.outputHeight();
        w = down.outputWidth();
      }
      for (int b = 0; b < config.depths()[stage]; b++) {
        String name = prefix + ".blocks." + b;
        float rate = blocks == 1 ? 0 : dropPath * block / (blocks - 1);
        int tokens = h * w;
        layers.add(
            new Residual(
                name,
                List.of(
                    DepthwiseConv2d.channelsLast(name + ".conv_dw", c, h, w, 7),
                    LayerNorm.overFeatures(name + ".norm", tokens, c, EPS),
                    new Linear(name + ".mlp.fc1", c, 4 * c, tokens, precision, true),
                    new Activation(name + ".mlp.act", Activation.Kind.GELU, tokens * 4 * c),
                    new Linear(name + ".mlp.fc2", 4 * c, c, tokens, precision, true),
                    new LayerScale(name + ".scale", name + ".gamma", tokens, c),
                    ChannelsLast.back(name + ".to_first", c, h, w)),
                rate));
        block++;
      }
    }
    layers.add(new GlobalAvgPool("head.global_pool", c, h, w));
    layers.add(LayerNorm.overFeatures("head.norm", 1, c, EPS));
    layers.add(new Linear("head.fc", c, classes, 1, precision, true));
    return layers;
  }
}
