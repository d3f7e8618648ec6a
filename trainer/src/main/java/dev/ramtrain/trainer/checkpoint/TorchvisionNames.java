package dev.ramtrain.trainer.checkpoint;

import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * torchvision's state-dict names for the architectures ramtrain builds, turned into timm's (which
 * ramtrain's layers carry): for a ViT {@code conv_proj} → {@code patch_embed.proj}, {@code
 * encoder.layers.encoder_layer_N.self_attention.in_proj_weight} → {@code blocks.N.attn.qkv.weight}
 * (the same packed q, k, v rows); for a ConvNeXt {@code features.0.*} → {@code stem.*}, {@code
 * features.2k+1.j.block.0/2/3/5} → {@code stages.k.blocks.j.conv_dw/norm/mlp.fc1/mlp.fc2}, {@code
 * layer_scale} [C, 1, 1] → {@code gamma} [C], {@code features.2k.0/1} → {@code
 * stages.k.downsample.0/1}, {@code classifier.0/2} → {@code head.norm/fc}. ResNets share timm's
 * names. A checkpoint is torchvision's when it holds a key only torchvision writes.
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

  private static final Pattern CN_STEM = Pattern.compile("^features\\.0\\.([01])\\.(weight|bias)$");
  private static final Pattern CN_SCALE =
      Pattern.compile("^features\\.(\\d+)\\.(\\d+)\\.layer_scale$");
  private static final Pattern CN_BLOCK =
      Pattern.compile("^features\\.(\\d+)\\.(\\d+)\\.block\\.([0235])\\.(weight|bias)$");
  private static final Pattern CN_DOWNSAMPLE =
      Pattern.compile("^features\\.([246])\\.([01])\\.(weight|bias)$");
  private static final Pattern CN_HEAD = Pattern.compile("^classifier\\.([02])\\.(weight|bias)$");
  private static final String[] CN_PARTS = {"conv_dw", null, "norm", "mlp.fc1", null, "mlp.fc2"};

  private TorchvisionNames() {}

  private static Rule rule(String from, String to) {
    return new Rule(Pattern.compile(from), to);
  }

  /**
   * Whether {@code keys} are torchvision's: a ViT's conv_proj or a ConvNeXt's layer_scale, which
   * only torchvision writes.
   */
  static boolean detect(Iterable<String> keys) {
    for (String key : keys) {
      if (key.equals("conv_proj.weight")
          || key.equals("encoder.pos_embedding")
          || CN_SCALE.matcher(key).matches()) {
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
    return convNeXt(key);
  }

  /** torchvision's ConvNeXt: its features are stem, stage, downsample, stage, …, the head last. */
  private static String convNeXt(String key) {
    Matcher m = CN_STEM.matcher(key);
    if (m.matches()) {
      return "stem." + m.group(1) + "." + m.group(2);
    }
    m = CN_SCALE.matcher(key);
    if (m.matches() && Integer.parseInt(m.group(1)) % 2 == 1) {
      return block(m.group(1), m.group(2)) + ".gamma";
    }
    m = CN_BLOCK.matcher(key);
    if (m.matches() && Integer.parseInt(m.group(1)) % 2 == 1) {
      String part = CN_PARTS[Integer.parseInt(m.group(3))];
      return block(m.group(1), m.group(2)) + "." + part + "." + m.group(4);
    }
    m = CN_DOWNSAMPLE.matcher(key);
    if (m.matches()) {
      int stage = Integer.parseInt(m.group(1)) / 2;
      return "stages." + stage + ".downsample." + m.group(2) + "." + m.group(3);
    }
    m = CN_HEAD.matcher(key);
    if (m.matches()) {
      return "head." + (m.group(1).equals("0") ? "norm" : "fc") + "." + m.group(2);
    }
    return key;
  }

  private static String block(String feature, String index) {
    return "stages." + (Integer.parseInt(feature) - 1) / 2 + ".blocks." + index;
  }

  /**
   * timm's shape for a renamed tensor: torchvision keeps ConvNeXt's layer scale as [C, 1, 1], timm
   * as [C]; every other shape is the same.
   */
  static long[] timmShape(String timmName, long[] shape) {
    boolean squeezable = shape.length == 3 && shape[1] == 1 && shape[2] == 1;
    return timmName.endsWith(".gamma") && squeezable ? new long[] {shape[0]} : shape;
  }
}
