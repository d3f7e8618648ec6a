package dev.ramtrain.trainer.nn;

import dev.ramtrain.format.ImageShape;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The ImageNet ResNets of torchvision and timm (v1.5: the stride on the 3×3 convolution), with
 * their parameter and buffer names ({@code conv1}, {@code bn1}, {@code layer1.0.conv1} …, {@code
 * layer2.0.downsample.0/1}, {@code fc}): a 7×7/2 stem convolution, batch norm, ReLU and 3×3/2 max
 * pooling padded by 1, four stages of basic blocks (two 3×3 convolutions) or bottlenecks (1×1, 3×3,
 * 1×1 with 4× expansion) whose first block strides 2 from the second stage on, a projection
 * shortcut where the shape changes, global average pooling and the classifier.
 */
public final class ResNet {
  /** Block kind, blocks per stage, and the first stage's width (64 in the published models). */
  public record Config(boolean bottleneck, int[] blocks, int width) {
    public Config {
      if (blocks.length != 4 || width < 1) {
        throw new IllegalArgumentException("a ResNet has four stages and a positive width");
      }
      blocks = blocks.clone();
    }
  }

  /** timm's (and torchvision's) names of the standard depths. */
  public static final Map<String, Config> NAMED =
      Map.of(
          "resnet18", new Config(false, new int[] {2, 2, 2, 2}, 64),
          "resnet34", new Config(false, new int[] {3, 4, 6, 3}, 64),
          "resnet50", new Config(true, new int[] {3, 4, 6, 3}, 64),
          "resnet101", new Config(true, new int[] {3, 4, 23, 3}, 64),
          "resnet152", new Config(true, new int[] {3, 8, 36, 3}, 64));

  private ResNet() {}

  public static List<Layer> layers(
      Config config, ImageShape input, int classes, Precision precision) {
    List<Layer> layers = new ArrayList<>();
    int width = config.width();
    ChannelLayout inner = INNER;
    Conv2d stem =
        new Conv2d(
            "conv1",
            input.channels(),
            input.height(),
            input.width(),
            width,
            7,
            2,
            3,
            false,
            precision,
            ChannelLayout.NCHW,
            inner);
    layers.add(stem);
    layers.add(BatchNorm2d.withRelu("bn1", width, stem.outputHeight(), stem.outputWidth(), inner));
    MaxPool2d pool =
        new MaxPool2d("maxpool", width, stem.outputHeight(), stem.outputWidth(), 3, 2, 1, inner);
    layers.add(pool);
    int c = width;
    int h = pool.outputHeight();
    int w = pool.outputWidth();
    int expansion = config.bottleneck() ? 4 : 1;
    for (int stage = 0; stage < 4; stage++) {
      int planes = width << stage;
      for (int b = 0; b < config.blocks()[stage]; b++) {
        int stride = stage > 0 && b == 0 ? 2 : 1;
        String name = "layer" + (stage + 1) + "." + b;
        List<Layer> main =
            config.bottleneck()
                ? bottleneck(name, c, h, w, planes, stride, precision)
                : basic(name, c, h, w, planes, stride, precision);
        Conv2d last = (Conv2d) main.get(main.size() - 2);
        int oh = last.outputHeight();
        int ow = last.outputWidth();
        List<Layer> shortcut = List.of();
        if (stride != 1 || c != planes * expansion) {
          shortcut =
              List.of(
                  conv(
                      name + ".downsample.0",
                      c,
                      h,
                      w,
                      planes * expansion,
                      1,
                      stride,
                      0,
                      precision,
                      inner),
                  new BatchNorm2d(name + ".downsample.1", planes * expansion, oh, ow, inner));
        }
        layers.add(new ResidualBlock(name, main, shortcut));
        c = planes * expansion;
        h = oh;
        w = ow;
      }
    }
    layers.add(new GlobalAvgPool("avgpool", c, h, w, inner));
    layers.add(new Linear("fc", c, classes, precision));
    return layers;
  }

  /**
   * The layout of the activations between the stem's input and the pooled features: the engine's
   * blocked one (only convolutions, batch norms, poolings, ReLUs and sums read them).
   */
  static final ChannelLayout INNER = ChannelLayout.ENGINE;

  private static List<Layer> basic(
      String name, int c, int h, int w, int planes, int stride, Precision precision) {
    Conv2d conv1 = conv(name + ".conv1", c, h, w, planes, 3, stride, 1, precision, INNER);
    int oh = conv1.outputHeight();
    int ow = conv1.outputWidth();
    return List.of(
        conv1,
        BatchNorm2d.withRelu(name + ".bn1", planes, oh, ow, INNER),
        conv(name + ".conv2", planes, oh, ow, planes, 3, 1, 1, precision, INNER),
        new BatchNorm2d(name + ".bn2", planes, oh, ow, INNER));
  }

  private static List<Layer> bottleneck(
      String name, int c, int h, int w, int planes, int stride, Precision precision) {
    Conv2d conv1 = conv(name + ".conv1", c, h, w, planes, 1, 1, 0, precision, INNER);
    Conv2d conv2 = conv(name + ".conv2", planes, h, w, planes, 3, stride, 1, precision, INNER);
    int oh = conv2.outputHeight();
    int ow = conv2.outputWidth();
    return List.of(
        conv1,
        BatchNorm2d.withRelu(name + ".bn1", planes, h, w, INNER),
        conv2,
        BatchNorm2d.withRelu(name + ".bn2", planes, oh, ow, INNER),
        conv(name + ".conv3", planes, oh, ow, 4 * planes, 1, 1, 0, precision, INNER),
        new BatchNorm2d(name + ".bn3", 4 * planes, oh, ow, INNER));
  }

  /** A block's convolution: no bias (batch norm follows), the inner layout on both sides. */
  static Conv2d conv(
      String name,
      int c,
      int h,
      int w,
      int out,
      int k,
      int stride,
      int pad,
      Precision precision,
      ChannelLayout inner) {
    return new Conv2d(name, c, h, w, out, k, stride, pad, false, precision, inner, inner);
  }
}
