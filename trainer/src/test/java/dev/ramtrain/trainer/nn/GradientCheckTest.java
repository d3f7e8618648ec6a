package dev.ramtrain.trainer.nn;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.DeviceArrays;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Finite-difference checks: the gradient backward writes into the slab for every parameter must
 * match central differences of the mean cross-entropy loss, computed through forward alone.
 */
class GradientCheckTest {

  static double meanLoss(
      Backend b,
      Stream s,
      Model model,
      CrossEntropyLoss loss,
      DeviceBuffer x,
      DeviceBuffer labels,
      int batch) {
    DeviceBuffer logits = model.forward(s, x, batch, true);
    loss.compute(s, logits, labels, batch);
    double sum = 0;
    for (float l : DeviceArrays.read(b, s, loss.losses(batch))) {
      sum += l;
    }
    return sum / batch;
  }

  /** Checks every parameter's gradient; {@code h} is the finite-difference step. */
  static void check(List<Layer> layers, double h, double tolerance) {
    check(layers, h, tolerance, false);
  }

  /**
   * As above; with {@code kinked} (ReLU or max pooling inside), parameters whose one-sided slopes
   * disagree are counted instead of compared: a kink sits within ±h of them.
   */
  static void check(List<Layer> layers, double h, double tolerance, boolean kinked) {
    check(layers, h, tolerance, kinked, 0);
  }

  /**
   * As above, every parameter first moved by {@code jitter} standard normal: weights initialized
   * near zero (a transformer's 0.02) leave attention uniform and its gradients too small to check.
   */
  static void check(List<Layer> layers, double h, double tolerance, boolean kinked, double jitter) {
    Random rng = new Random(11);
    int batch = 6;
    try (Backend b = new CpuBackend(2)) {
      Stream s = b.createStream("check");
      int in = layers.get(0).inputSize();
      int classes = layers.get(layers.size() - 1).outputSize();
      try (Model model = Model.build("check", layers, b, s, batch, 5);
          CrossEntropyLoss loss = new CrossEntropyLoss(b, batch, classes, 0.1f);
          DeviceBuffer x = b.allocate("x", DType.F32, (long) batch * in);
          DeviceBuffer labels = b.allocate("labels", DType.I32, batch)) {
        float[] xs = new float[batch * in];
        for (int i = 0; i < xs.length; i++) {
          xs[i] = (float) rng.nextGaussian();
        }
        DeviceArrays.write(b, s, x, xs);
        try (HostBuffer hl = b.allocateHost("labels", 4L * batch)) {
          for (int i = 0; i < batch; i++) {
            hl.asByteBuffer().asIntBuffer().put(i, rng.nextInt(classes));
          }
          b.copy(hl, 0, labels, 4L * batch, s);
          s.synchronize();
        }
        if (jitter > 0) {
          float[] moved = DeviceArrays.read(b, s, model.parameters().values());
          for (int i = 0; i < moved.length; i++) {
            moved[i] += (float) (jitter * rng.nextGaussian());
          }
          DeviceArrays.write(b, s, model.parameters().values(), moved);
        }
        model.zeroGrad(s);
        DeviceBuffer logits = model.forward(s, x, batch, true);
        model.backward(s, loss.compute(s, logits, labels, batch), batch);
        float[] analytic = DeviceArrays.read(b, s, model.parameters().grads());
        float[] theta = DeviceArrays.read(b, s, model.parameters().values());
        int worst = -1;
        double worstError = 0;
        String worstValues = "";
        int kinks = 0;
        double base = meanLoss(b, s, model, loss, x, labels, batch);
        for (int i = 0; i < theta.length; i++) {
          float saved = theta[i];
          theta[i] = (float) (saved + h);
          DeviceArrays.write(b, s, model.parameters().values(), theta);
          double up = meanLoss(b, s, model, loss, x, labels, batch);
          theta[i] = (float) (saved - h);
          DeviceArrays.write(b, s, model.parameters().values(), theta);
          double down = meanLoss(b, s, model, loss, x, labels, batch);
          theta[i] = saved;
          double numeric = (up - down) / (2 * h);
          // A ReLU or max-pool kink inside [θ-h, θ+h] makes the one-sided slopes disagree; the
          // central difference is then meaningless for this parameter, so it is counted, not
          // compared (the count is bounded below).
          double right = (up - base) / h;
          double left = (base - down) / h;
          if (kinked
              && Math.abs(right - left)
                  > tolerance * Math.max(1e-2, Math.abs(right) + Math.abs(left))) {
            kinks++;
            continue;
          }
          double error =
              Math.abs(numeric - analytic[i])
                  / Math.max(1e-2, Math.abs(numeric) + Math.abs(analytic[i]));
          if (error > worstError) {
            worstError = error;
            worst = i;
            worstValues = "numeric " + numeric + ", analytic " + analytic[i];
          }
        }
        DeviceArrays.write(b, s, model.parameters().values(), theta);
        assertTrue(
            kinks <= theta.length / 20,
            kinks + " of " + theta.length + " parameters sit at a kink: too many to be chance");
        assertTrue(
            worstError < tolerance,
            "worst relative gradient error "
                + worstError
                + " at parameter "
                + worst
                + ": "
                + worstValues);
      }
    }
  }

  @Test
  void geluMlp() {
    check(
        List.of(
            new Linear("fc1", 5, 7),
            new Activation("act", Activation.Kind.GELU, 7),
            new Linear("fc2", 7, 4)),
        1e-2,
        2e-2);
  }

  @Test
  void convolutionPoolingAndLinear() {
    // conv (stride 2, padding 1) -> GELU -> conv (3x3, padding 1) -> 2x2 max pool -> linear
    Conv2d first = new Conv2d("conv1", 2, 7, 6, 3, 3, 2, 1);
    Conv2d second = new Conv2d("conv2", 3, first.outputHeight(), first.outputWidth(), 4, 3, 1, 1);
    MaxPool2d pool = new MaxPool2d("pool", 4, second.outputHeight(), second.outputWidth(), 2, 2);
    check(
        List.of(
            first,
            new Activation("act", Activation.Kind.GELU, first.outputSize()),
            second,
            pool,
            new Linear("fc", pool.outputSize(), 3)),
        1e-3,
        3e-2,
        true);
  }

  @Test
  void reluMlpFromSpec() {
    // Small steps keep pre-activations from crossing ReLU's kink.
    check(ModelSpec.parse("mlp:6-9-8-3"), 2e-3, 3e-2, true);
  }

  @Test
  void batchNormResidualBlocksGlobalPoolingAndDropout() {
    // Every parameter sits before at least one of the new layers, so their input gradients are
    // checked too: stem conv -> BN -> GELU -> projection block -> identity block -> avg pool ->
    // dropout -> linear.
    Conv2d stem = new Conv2d("stem", 2, 6, 6, 3, 3, 1, 1);
    ResidualBlock down =
        new ResidualBlock(
            "down",
            List.of(
                new Conv2d("down.conv1", 3, 6, 6, 4, 3, 2, 1, false),
                new BatchNorm2d("down.bn1", 4, 3, 3),
                new Activation("down.act", Activation.Kind.GELU, 36),
                new Conv2d("down.conv2", 4, 3, 3, 4, 3, 1, 1, false),
                new BatchNorm2d("down.bn2", 4, 3, 3)),
            List.of(
                new Conv2d("down.proj", 3, 6, 6, 4, 1, 2, 0, false),
                new BatchNorm2d("down.proj.bn", 4, 3, 3)));
    ResidualBlock same =
        new ResidualBlock(
            "same",
            List.of(
                new Conv2d("same.conv", 4, 3, 3, 4, 3, 1, 1, true),
                new BatchNorm2d("same.bn", 4, 3, 3)),
            List.of());
    check(
        List.of(
            stem,
            new BatchNorm2d("stem.bn", 3, 6, 6),
            new Activation("stem.act", Activation.Kind.GELU, stem.outputSize()),
            down,
            same,
            new GlobalAvgPool("avgpool", 4, 3, 3),
            new Dropout("dropout", 4, 0.25f),
            new Linear("fc", 4, 3)),
        1e-3,
        3e-2,
        true);
  }

  /**
   * Convolutions, batch norms, max pooling, a projection block's sum and global pooling with their
   * activations in the engine's channel layout, as ResNets run: on oneDNN 16 channels are one or
   * two blocks (nChw16c or nChw8c) from the stem's output to the pooled features, so every blocked
   * operation's backward, and the stem reading NCHW and writing blocks, is checked against central
   * differences (1×1 convolutions keep the parameters few). The same channels last (the CIFAR
   * ResNets' layout): 16 and then 32 channels in NHWC, a stride-2 shortcut between them.
   */
  @ParameterizedTest
  @EnumSource(
      value = ChannelLayout.class,
      names = {"ENGINE", "CHANNELS_LAST"})
  void channelBlockedConvolutionsBatchNormPoolingAndResidualSums(ChannelLayout blocked) {
    Conv2d stem =
        new Conv2d("stem", 2, 6, 6, 16, 3, 1, 1, true, Precision.FP32, ChannelLayout.NCHW, blocked);
    MaxPool2d pool = new MaxPool2d("pool", 16, 6, 6, 3, 2, 1, blocked);
    ResidualBlock down =
        new ResidualBlock(
            "down",
            List.of(
                new Conv2d(
                    "down.conv1", 16, 3, 3, 32, 1, 2, 0, false, Precision.FP32, blocked, blocked),
                new BatchNorm2d("down.bn1", 32, 2, 2, blocked),
                new Activation("down.act", Activation.Kind.GELU, 128),
                new Conv2d(
                    "down.conv2", 32, 2, 2, 32, 1, 1, 0, false, Precision.FP32, blocked, blocked),
                new BatchNorm2d("down.bn2", 32, 2, 2, blocked)),
            List.of(
                new Conv2d(
                    "down.proj", 16, 3, 3, 32, 1, 2, 0, false, Precision.FP32, blocked, blocked),
                new BatchNorm2d("down.proj.bn", 32, 2, 2, blocked)));
    check(
        List.of(
            stem,
            new BatchNorm2d("stem.bn", 16, 6, 6, blocked),
            new Activation("stem.act", Activation.Kind.GELU, stem.outputSize()),
            pool,
            down,
            new GlobalAvgPool("avgpool", 32, 2, 2, blocked),
            new Linear("fc", 32, 3)),
        1e-3,
        3e-2,
        true);
  }

  /**
   * A two-block ViT (patch convolution, class token and position embedding, pre-norm attention and
   * GELU MLP residuals with drop path, final norm, class-token pooling, head): every parameter's
   * gradient against central differences. Drop path draws per-sample masks from the step seed, the
   * same for every forward of the check, so the loss stays a smooth function of the weights; a
   * ConvNeXt-style LayerNorm2d over the patch grid is checked on the way.
   */
  @Test
  void visionTransformerBlocksWithDropPathAndLayerNorm2d() {
    dev.ramtrain.format.ImageShape shape = new dev.ramtrain.format.ImageShape(8, 8, 3);
    java.util.ArrayList<Layer> layers =
        new java.util.ArrayList<>(
            VisionTransformer.layers(
                new VisionTransformer.Config(4, 8, 2, 2), shape, 3, 0.3f, Precision.FP32));
    layers.add(1, LayerNorm.overChannels("patch_norm", 8, 2, 2, 1e-6f));
    for (Layer layer : layers) {
      layer.beginStep(12345); // one set of drop-path masks for every forward
    }
    check(layers, 1e-3, 3e-2, false, 0.5);
  }

  /**
   * A ConvNeXt with one block per stage (depthwise 7×7 convolution, channels-last LayerNorm, GELU
   * MLP, layer scale, drop path; LayerNorm2d stem and downsampling; pooled LayerNorm head), weights
   * jittered so layer scale's 1e-6 start does not hide the blocks. Its loss is larger and deeper
   * than the others': at h = 1e-3 float32 rounding of the loss (about 1e-6 of it, over 2h) already
   * reaches 4e-4 of a gradient, at 3e-4 it dominates; h = 3e-3 keeps it an order below the
   * tolerance, and the curvature's h² term as small.
   */
  @Test
  void convNeXtBlocksWithDepthwiseConvolutionAndLayerScale() {
    List<Layer> layers =
        ConvNeXt.layers(
            new ConvNeXt.Config(new int[] {1, 1, 1, 1}, new int[] {4, 8, 8, 8}),
            new dev.ramtrain.format.ImageShape(32, 32, 3),
            3,
            0.2f,
            Precision.FP32);
    for (Layer layer : layers) {
      layer.beginStep(777);
    }
    check(layers, 3e-3, 3e-2, false, 0.5);
  }

  /**
   * ConvNeXt's own layers alone, where their gradients are large enough for the check to see a
   * wrong factor (in the whole model they fall under the error's 1e-2 floor): a depthwise 7×7
   * convolution wider than its input writing channels last, layer scale, the permute back.
   */
  @Test
  void depthwiseConvolutionPermutesAndLayerScale() {
    check(
        List.of(
            DepthwiseConv2d.channelsLast("dw", 3, 6, 5, 7),
            new LayerScale("scale", "scale.gamma", 30, 3),
            ChannelsLast.back("to_first", 3, 6, 5),
            new Activation("act", Activation.Kind.GELU, 90),
            new Linear("fc", 90, 3)),
        1e-3,
        3e-2,
        false,
        0.5);
  }
}
