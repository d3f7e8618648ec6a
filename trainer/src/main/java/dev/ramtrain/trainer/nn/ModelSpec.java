package dev.ramtrain.trainer.nn;

import dev.ramtrain.format.ImageShape;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * Models from a short spec string ({@code ramtrain.train.model}). Activations are flat per sample
 * (NCHW is already the flattened layout), so no Flatten layer is needed between convolutions and
 * Linear layers.
 */
public final class ModelSpec {
  /** Every architecture ramtrain builds by its timm name. */
  private static final java.util.SortedSet<String> TIMM_NAMES =
      new java.util.TreeSet<>(
          Stream.of(VisionTransformer.NAMED, ResNet.NAMED, ConvNeXt.NAMED)
              .flatMap(named -> named.keySet().stream())
              .toList());

  private static final String KNOWN =
      "mlp:IN-HIDDEN-...-OUT, cnn:c32-p-c64-p-f128-CLASSES, resnet:DEPTH[-WIDTH]-CLASSES,"
          + " vit:PATCH-DIM-DEPTH-HEADS-CLASSES, "
          + String.join(", ", TIMM_NAMES)
          + " (a timm name, :CLASSES for other than 1000)";

  private ModelSpec() {}

  /** {@code mlp:784-1024-1024-10}: Linear layers with ReLU between them. */
  public static List<Layer> parse(String spec) {
    return parse(spec, null);
  }

  /**
   * Parses a spec for inputs of {@code shape} (channels, height, width; needed by {@code cnn} and
   * {@code resnet}):
   *
   * <ul>
   *   <li>{@code mlp:IN-H1-...-OUT}: Linear layers with ReLU between them.
   *   <li>{@code cnn:c32-p-c64-p-f128-10}: {@code cN} a 3×3 convolution (padding 1) with ReLU,
   *       {@code cbN} the same with batch norm before the ReLU (and no conv bias), {@code p} 2×2
   *       max pooling, {@code g} global average pooling, {@code d0.5} dropout, {@code fN} a Linear
   *       layer with ReLU, the last number the classes. {@code cnn:c32-p-c64-p-f128-10} is the CNN
   *       of the PyTorch anchor.
   *   <li>{@code resnet:20-10}: the CIFAR ResNet of He et al. (depth 6n+2: a 3×3 stem, three stages
   *       of n basic blocks at widths 16, 32, 64, strides 1, 2, 2, global average pooling, a Linear
   *       classifier); {@code resnet:8-32-10} sets the first stage's width. Shortcuts that change
   *       shape are 1×1 convolutions with batch norm (torchvision's "option B"). Parameter names
   *       follow torchvision's ResNet ({@code layer1.0.conv1.weight}, {@code fc.bias}).
   * </ul>
   */
  public static List<Layer> parse(String spec, ImageShape shape) {
    return parse(spec, shape, Precision.FP32);
  }

  /**
   * As {@link #parse(String, ImageShape)}, its Linear and convolution layers in {@code precision}.
   */
  public static List<Layer> parse(String spec, ImageShape shape, Precision precision) {
    return parse(spec, shape, precision, 0f);
  }

  /**
   * As above, with stochastic depth {@code dropPath} (timm's drop_path_rate: the last block's rate,
   * rising linearly from 0 over depth) for the architectures that have it (ViTs, ConvNeXts); a rate
   * for another is refused.
   */
  public static List<Layer> parse(
      String spec, ImageShape shape, Precision precision, float dropPath) {
    String[] kindAndArgs = spec.split(":", 2);
    String kind = kindAndArgs[0];
    boolean stochasticDepth =
        ConvNeXt.NAMED.containsKey(kind)
            || VisionTransformer.NAMED.containsKey(kind)
            || kind.equals("vit");
    if (dropPath > 0 && !stochasticDepth) {
      throw new IllegalArgumentException(
          "has no stochastic depth, and ramtrain.train.drop-path = "
              + dropPath
              + " asks for it (the ViTs and ConvNeXts have it); leave it at 0");
    }
    ResNet.Config resnet = ResNet.NAMED.get(kind);
    if (resnet != null) {
      if (shape == null) {
        throw new IllegalArgumentException(spec + ": a ResNet needs the input image shape");
      }
      int classes = kindAndArgs.length == 2 ? number(spec, kindAndArgs[1]) : 1000;
      return ResNet.layers(resnet, shape, classes, precision);
    }
    ConvNeXt.Config convnext = ConvNeXt.NAMED.get(kind);
    if (convnext != null) {
      if (shape == null) {
        throw new IllegalArgumentException(spec + ": a ConvNeXt needs the input image shape");
      }
      int classes = kindAndArgs.length == 2 ? number(spec, kindAndArgs[1]) : 1000;
      return ConvNeXt.layers(convnext, shape, classes, dropPath, precision);
    }
    VisionTransformer.Config named = VisionTransformer.NAMED.get(kind);
    if (named != null || (kind.equals("vit") && kindAndArgs.length == 2)) {
      if (shape == null) {
        throw new IllegalArgumentException(spec + ": a ViT needs the input image shape");
      }
      return vit(
          spec, named, kindAndArgs.length == 2 ? kindAndArgs[1] : null, shape, precision, dropPath);
    }
    if (kindAndArgs.length == 2 && kind.equals("mlp")) {
      return mlp(spec, kindAndArgs[1], precision);
    }
    if (kindAndArgs.length == 2 && (kind.equals("cnn") || kind.equals("resnet"))) {
      if (shape == null) {
        throw new IllegalArgumentException(spec + ": a " + kind + " needs the input image shape");
      }
      return kind.equals("cnn")
          ? cnn(spec, kindAndArgs[1], shape, precision)
          : resnet(spec, kindAndArgs[1], shape, precision);
    }
    throw new IllegalArgumentException(
        "unknown model spec '" + spec + "'" + suggestion(kind) + "; known: " + KNOWN);
  }

  private static List<Layer> cnn(String spec, String body, ImageShape shape, Precision precision) {
    String[] tokens = body.split("-");
    List<Layer> layers = new ArrayList<>();
    int c = shape.channels();
    int h = shape.height();
    int w = shape.width();
    int flat = -1; // features once flattened
    int convs = 0;
    int pools = 0;
    int fcs = 0;
    int dropouts = 0;
    // The convolutions, poolings and batch norms between the first convolution's output and the
    // last one's input hold their activations in the engine's blocked layout: no reorder around
    // each convolution, oneDNN's pooling (the anchor CNN's step 16-49% faster, RESULTS.md). The
    // last convolution writes NCHW, what a Linear layer flattens, unless global pooling reads it.
    ChannelLayout tower = ChannelLayout.ENGINE;
    int lastConv = -1;
    boolean globalPool = false;
    for (int i = 0; i < tokens.length; i++) {
      if (tokens[i].strip().matches("cb?\\d+")) {
        lastConv = i;
      }
      globalPool |= tokens[i].strip().equals("g");
    }
    ChannelLayout layout = ChannelLayout.NCHW;
    for (int i = 0; i < tokens.length; i++) {
      String t = tokens[i].strip();
      boolean last = i == tokens.length - 1;
      if (t.matches("cb?\\d+") && flat < 0) {
        boolean norm = t.startsWith("cb");
        int out = number(spec, t.substring(norm ? 2 : 1));
        String name = "conv" + ++convs;
        ChannelLayout outLayout = i < lastConv || globalPool ? tower : ChannelLayout.NCHW;
        Conv2d conv = new Conv2d(name, c, h, w, out, 3, 1, 1, !norm, precision, layout, outLayout);
        layout = outLayout;
        layers.add(conv);
        h = conv.outputHeight();
        w = conv.outputWidth();
        c = out;
        if (norm) {
          layers.add(new BatchNorm2d("bn" + convs, c, h, w, layout));
        }
        if (i + 1 < tokens.length && tokens[i + 1].strip().equals("p")) {
          // ReLU commutes with max pooling (the max of ReLUs is the ReLU of the max, and the
          // gradient reaches the same winner), so pooling first runs the ReLU on a quarter of the
          // values: the same model, less memory traffic.
          MaxPool2d pool = new MaxPool2d("pool" + ++pools, c, h, w, 2, 2, 0, layout);
          layers.add(pool);
          h = pool.outputHeight();
          w = pool.outputWidth();
          i++;
        }
        layers.add(new Activation(name + ".relu", Activation.Kind.RELU, c * h * w));
      } else if (t.equals("p") && flat < 0) {
        MaxPool2d pool = new MaxPool2d("pool" + ++pools, c, h, w, 2, 2, 0, layout);
        layers.add(pool);
        h = pool.outputHeight();
        w = pool.outputWidth();
      } else if (t.equals("g") && flat < 0) {
        layers.add(new GlobalAvgPool("avgpool", c, h, w, layout));
        flat = c;
      } else if (t.matches("d0?\\.\\d+") && !last) {
        int size = flat < 0 ? c * h * w : flat;
        layers.add(new Dropout("dropout" + ++dropouts, size, Float.parseFloat(t.substring(1))));
      } else if (t.startsWith("f") || last) {
        int in = flat < 0 ? c * h * w : flat;
        int out = number(spec, t.startsWith("f") ? t.substring(1) : t);
        layers.add(new Linear("fc" + ++fcs, in, out, precision));
        if (!last) {
          layers.add(new Activation("fc" + fcs + ".relu", Activation.Kind.RELU, out));
        }
        flat = out;
      } else {
        throw new IllegalArgumentException(
            spec
                + ": '"
                + t
                + "' is not cN, cbN, p, g, dP or fN (convolutions and pooling come before g and fN)");
      }
    }
    return layers;
  }

  private static List<Layer> resnet(
      String spec, String body, ImageShape shape, Precision precision) {
    String[] parts = body.split("-");
    if (parts.length < 2 || parts.length > 3) {
      throw new IllegalArgumentException(spec + ": expected resnet:DEPTH[-WIDTH]-CLASSES");
    }
    int depth = number(spec, parts[0]);
    int width = parts.length == 3 ? number(spec, parts[1]) : 16;
    int classes = number(spec, parts[parts.length - 1]);
    if (depth < 8 || (depth - 2) % 6 != 0) {
      throw new IllegalArgumentException(
          spec + ": ResNet depth must be 6n+2 with n >= 1 (8, 14, 20, 32, 44, 56, 110)");
    }
    int blocks = (depth - 2) / 6;
    List<Layer> layers = new ArrayList<>();
    // Channels last: oneDNN's NHWC kernels are the faster on these narrow networks (ChannelLayout)
    ChannelLayout inner = ChannelLayout.CHANNELS_LAST;
    Conv2d stem =
        new Conv2d(
            "conv1",
            shape.channels(),
            shape.height(),
            shape.width(),
            width,
            3,
            1,
            1,
            false,
            precision,
            ChannelLayout.NCHW,
            inner);
    int c = width;
    int h = stem.outputHeight();
    int w = stem.outputWidth();
    layers.add(stem);
    layers.add(BatchNorm2d.withRelu("bn1", c, h, w, inner));
    for (int stage = 1; stage <= 3; stage++) {
      int out = width << (stage - 1);
      for (int b = 0; b < blocks; b++) {
        int stride = stage > 1 && b == 0 ? 2 : 1;
        String name = "layer" + stage + "." + b;
        Conv2d conv1 = ResNet.conv(name + ".conv1", c, h, w, out, 3, stride, 1, precision, inner);
        int oh = conv1.outputHeight();
        int ow = conv1.outputWidth();
        List<Layer> main =
            List.of(
                conv1,
                BatchNorm2d.withRelu(name + ".bn1", out, oh, ow, inner),
                ResNet.conv(name + ".conv2", out, oh, ow, out, 3, 1, 1, precision, inner),
                new BatchNorm2d(name + ".bn2", out, oh, ow, inner));
        List<Layer> shortcut = List.of();
        if (stride != 1 || out != c) {
          shortcut =
              List.of(
                  ResNet.conv(name + ".downsample.0", c, h, w, out, 1, stride, 0, precision, inner),
                  new BatchNorm2d(name + ".downsample.1", out, oh, ow, inner));
        }
        layers.add(new ResidualBlock(name, main, shortcut));
        c = out;
        h = oh;
        w = ow;
      }
    }
    layers.add(new GlobalAvgPool("avgpool", c, h, w, inner));
    layers.add(new Linear("fc", c, classes, precision));
    return layers;
  }

  /**
   * The images a timm-named model was pretrained on (224×224 RGB for every name ramtrain knows:
   * {@code vit_huge_patch14_224} too), or empty for the other specs, which take the dataset's.
   */
  public static java.util.Optional<ImageShape> pretrainingInput(String spec) {
    return TIMM_NAMES.contains(spec.split(":", 2)[0])
        ? java.util.Optional.of(new ImageShape(224, 224, 3))
        : java.util.Optional.empty();
  }

  /**
   * {@code spec} with {@code classes} outputs where it leaves the count open: a timm name without
   * {@code :CLASSES} (timm's 1000 otherwise) takes the dataset's classes, as timm's {@code
   * num_classes}; every other spec names its own count and is returned as it is.
   */
  public static String withClasses(String spec, int classes) {
    return TIMM_NAMES.contains(spec) ? spec + ":" + classes : spec;
  }

  /**
   * A timm-named ViT ({@code vit_base_patch16_224}, 1000 classes; {@code vit_base_patch16_224:10}),
   * or {@code vit:PATCH-DIM-DEPTH-HEADS-CLASSES} for other sizes (the tests' tiny ViTs).
   */
  private static List<Layer> vit(
      String spec,
      VisionTransformer.Config named,
      String args,
      ImageShape shape,
      Precision precision,
      float dropPath) {
    if (named != null) {
      int classes = args == null ? 1000 : number(spec, args);
      return VisionTransformer.layers(named, shape, classes, dropPath, precision);
    }
    String[] parts = args.split("-");
    if (parts.length != 5) {
      throw new IllegalArgumentException(spec + ": expected vit:PATCH-DIM-DEPTH-HEADS-CLASSES");
    }
    VisionTransformer.Config config =
        new VisionTransformer.Config(
            number(spec, parts[0]),
            number(spec, parts[1]),
            number(spec, parts[2]),
            number(spec, parts[3]));
    return VisionTransformer.layers(config, shape, number(spec, parts[4]), dropPath, precision);
  }

  /** ", did you mean NAME?" for the named model nearest {@code kind} by edit distance, or "". */
  private static String suggestion(String kind) {
    String best = null;
    int bestDistance = 4; // further than 3 edits is no typo
    for (String name : TIMM_NAMES) {
      int d = editDistance(kind, name);
      if (d < bestDistance) {
        bestDistance = d;
        best = name;
      }
    }
    return best == null ? "" : ", did you mean " + best + "?";
  }

  /** Edits (insert, delete, substitute, swap two neighbours) from {@code a} to {@code b}. */
  private static int editDistance(String a, String b) {
    int[][] d = new int[a.length() + 1][b.length() + 1];
    for (int i = 0; i <= a.length(); i++) {
      d[i][0] = i;
    }
    for (int j = 0; j <= b.length(); j++) {
      d[0][j] = j;
    }
    for (int i = 1; i <= a.length(); i++) {
      for (int j = 1; j <= b.length(); j++) {
        int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
        d[i][j] = Math.min(Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1), d[i - 1][j - 1] + cost);
        if (i > 1
            && j > 1
            && a.charAt(i - 1) == b.charAt(j - 2)
            && a.charAt(i - 2) == b.charAt(j - 1)) {
          d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    return d[a.length()][b.length()];
  }

  private static int number(String spec, String text) {
    try {
      int v = Integer.parseInt(text.strip());
      if (v < 1) {
        throw new NumberFormatException();
      }
      return v;
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(spec + ": '" + text + "' is not a positive layer width");
    }
  }

  private static List<Layer> mlp(String spec, String sizes, Precision precision) {
    String[] parts = sizes.split("-");
    if (parts.length < 2) {
      throw new IllegalArgumentException(spec + ": an MLP needs at least input and output sizes");
    }
    int[] widths = new int[parts.length];
    for (int i = 0; i < parts.length; i++) {
      try {
        widths[i] = Integer.parseInt(parts[i].strip());
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(spec + ": '" + parts[i] + "' is not a layer width");
      }
    }
    List<Layer> layers = new ArrayList<>();
    for (int i = 0; i + 1 < widths.length; i++) {
      layers.add(new Linear("fc" + (i + 1), widths[i], widths[i + 1], precision));
      if (i + 2 < widths.length) {
        layers.add(new Activation("relu" + (i + 1), Activation.Kind.RELU, widths[i + 1]));
      }
    }
    return layers;
  }
}
