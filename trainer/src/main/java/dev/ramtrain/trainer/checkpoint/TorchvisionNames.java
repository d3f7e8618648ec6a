package dev.ramtrain.trainer.checkpoint;

import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * torchvision's state-dict names for the architectures ramtrain builds, turned into timm's (which
 * ramtrain's layers carry): {@code conv_proj} → {@code patch_embed.proj}, {@code
 * encoder.layers.encoder_layer_N.self_attention.in_proj_weight} → {@code blocks.N.attn.qkv.weight}
 * (the same packed q, k, v rows), and so on. A checkpoint is torchvision's when it holds a key only
 * torchvision writes.
 */
final class TorchvisionNames {
  private record Rule(Pattern from, String to) {}

  private static final String LAYER = "^encoder\\.layers\\.encoder_layer_(\\d+)\\.";

  private static final List<Rule> VIT =
      List.of(
          rule("^class_token$", "cls_token"),
          rule("^conv_proj\\.(weight|bias)$", "patch_embed.proj.$1"),
          rule("^encoder\\.pos_embedding$", "pos_embed"),
          rule(LAYER + "ln_1\\.(weight|bias)$", "blocks.$1.norm1.$2"),
          rule(LAYER + "ln_2\\.(weight|bias)$", "blocks.$1.norm2.$2"),
          rule(LAYER + "self_attention\\.in_proj_weight$", "blocks.$1.attn.qkv.weight"),
          rule(LAYER + "self_attention\\.in_proj_bias$", "blocks.$1.attn.qkv.bias"),
          rule(LAYER + "self_attention\\.out_proj\\.(weight|bias)$", "blocks.$1.attn.proj.$2"),
          // torchvision 0.13 on: mlp.0 and mlp.3; before: mlp.linear_1 and mlp.linear_2
          rule(LAYER + "mlp\\.(?:0|linear_1)\\.(weight|bias)$", "blocks.$1.mlp.fc1.$2"),
          rule(LAYER + "mlp\\.(?:3|linear_2)\\.(weight|bias)$", "blocks.$1.mlp.fc2.$2"),
          rule("^encoder\\.ln\\.(weight|bias)$", "norm.$1"),
          rule("^heads\\.head\\.(weight|bias)$", "head.$1"));

  private TorchvisionNames() {}

  private static Rule rule(String from, String to) {
    return new Rule(Pattern.compile(from), to);
  }

  /** Whether {@code keys} are torchvision's (a ViT's: only torchvision writes conv_proj). */
  static boolean detect(Iterable<String> keys) {
    for (String key : keys) {
      if (key.equals("conv_proj.weight") || key.equals("encoder.pos_embedding")) {
        return true;
      }
    }
    return false;
  }

  /** timm's name for torchvision's {@code key}; a key no rule knows is returned unchanged. */
  static String toTimm(String key) {
    for (Rule r : VIT) {
      Matcher m = r.from().matcher(key);
      if (m.matches()) {
        return m.replaceFirst(r.to());
      }
    }
    return key;
  }

  /** Renames every key of {@code tensors}, keeping their order. */
  static <T> Map<String, T> renamed(Map<String, T> tensors) {
    Map<String, T> out = new java.util.LinkedHashMap<>();
    tensors.forEach((k, v) -> out.put(toTimm(k), v));
    return out;
  }
}
