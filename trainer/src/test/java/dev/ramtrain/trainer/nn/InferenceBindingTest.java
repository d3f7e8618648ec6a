package dev.ramtrain.trainer.nn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.DeviceArrays;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import java.util.List;
import java.util.Random;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A model bound for inference computes what the same model bound for training computes when it
 * evaluates, bit for bit (the same operations on the same values: only where activations live
 * differs, so a value overwritten while still to be read shows as different logits), in every
 * architecture's composites; it allocates exactly what {@link Model#inferenceFootprint} says, no
 * gradients, and refuses to train.
 */
class InferenceBindingTest {
  private static final int BATCH = 3;

  @ParameterizedTest
  @CsvSource({
    "mlp:48-16-16-5, 4x4x3, FP32, 0",
    "cnn:cb4-p-d0.5-c8-g-f8-5, 8x8x3, FP32, 0", // in-place ReLUs in batch norm, dropout
    "resnet:8-5, 8x8x3, FP32, 0", // basic blocks, a projection shortcut
    "resnet50:5, 32x32x3, FP32, 0", // bottlenecks
    "resnet:8-5, 8x8x3, BF16, 0",
    "vit:4-16-2-2-5, 8x8x3, FP32, 0", // attention and MLP residuals
    "vit:4-16-2-2-5, 8x8x3, FP32, 0.2", // drop path: training sums into its own buffer
    "vit:4-16-2-2-5, 8x8x3, BF16, 0",
    "convnext_tiny:5, 32x32x3, FP32, 0.1", // depthwise, layer scale, channels-last
  })
  void evaluatesAsTheTrainingBindingDoes(String spec, String image, String precision, float dp) {
    ImageShape shape = ImageShape.parse(image);
    int pixels = shape.height() * shape.width() * shape.channels();
    assertEvaluatesAsTraining(
        spec, () -> ModelSpec.parse(spec, shape, Precision.valueOf(precision), dp), pixels);
  }

  /**
   * An element-wise activation writes over its input bound for inference only where nothing reads
   * that input after it: not at the head of a residual branch, whose input the sum still adds.
   */
  @Test
  void anActivationKeepsAnInputTheResidualStillAdds() {
    Supplier<List<Layer>> layers =
        () ->
            List.of(
                new Linear("stem", 12, 8),
                new Residual(
                    "block",
                    List.of(
                        new Activation("block.act", Activation.Kind.GELU, 8),
                        new Linear("block.fc", 8, 8)),
                    0f),
                new Activation("act", Activation.Kind.GELU, 8),
                new Linear("head", 8, 5));
    assertEvaluatesAsTraining("gelu-first residual", layers, 12);
  }

  private static void assertEvaluatesAsTraining(
      String spec, Supplier<List<Layer>> layers, int pixels) {
    Random rng = new Random(spec.hashCode());
    try (Backend b = new CpuBackend(1)) {
      Stream s = b.createStream("s");
      try (Model trained = Model.build(spec, layers.get(), b, s, BATCH, 7);
          DeviceBuffer x = b.allocate("x", DType.F32, (long) BATCH * pixels)) {
        float[] xs = new float[BATCH * pixels];
        for (int i = 0; i < xs.length; i++) {
          xs[i] = (float) rng.nextGaussian();
        }
        DeviceArrays.write(b, s, x, xs);
        trained.forward(s, x, BATCH, true); // moves batch norm's running statistics off 0 and 1
        float[] expected = DeviceArrays.read(b, s, trained.forward(s, x, BATCH, false));
        DeviceBuffer one = x.view(0, pixels);
        float[] expectedOne = DeviceArrays.read(b, s, trained.forward(s, one, 1, false));

        Model.InferenceFootprint footprint = Model.inferenceFootprint(spec, layers, b, BATCH);
        long before = b.allocatedBytes();
        try (Model inference = Model.buildForInference(spec, layers, b, BATCH)) {
          assertEquals(footprint.totalBytes(), b.allocatedBytes() - before, "plan = allocation");
          assertNull(inference.parameters().grads(), "no gradient slab");
          b.copy(trained.parameters().values(), inference.parameters().values(), s);
          b.copy(trained.parameters().buffers(), inference.parameters().buffers(), s);
          float[] actual = DeviceArrays.read(b, s, inference.forward(s, x, BATCH, false));
          assertArrayEquals(expected, actual, spec + ": logits as the training binding's");
          float[] fewer = DeviceArrays.read(b, s, inference.forward(s, one, 1, false));
          assertArrayEquals(expectedOne, fewer, spec + ": a smaller batch, as training's");
          assertThrows(IllegalStateException.class, () -> inference.forward(s, x, BATCH, true));
          assertThrows(IllegalStateException.class, () -> inference.zeroGrad(s));
        }
        assertEquals(before, b.allocatedBytes(), "closing frees everything");
      }
    }
  }

  /**
   * A ResNet-50 evaluating 224² images holds at most what its first downsampling bottleneck has
   * live at once, as PyTorch under no_grad: the block's input (64 channels at 56², written by max
   * pooling with its indices beside it), its main branch's output, the shortcut's convolution
   * output and the shortcut's batch norm output being written (256 channels at 56², each as large
   * as the stem's 64 at 112²), where the training binding keeps every layer's output.
   */
  @Test
  void aResNet50EvaluatesInWhatItsLargestBlockHoldsAtOnce() {
    ImageShape shape = new ImageShape(224, 224, 3);
    int batch = 2;
    Supplier<List<Layer>> layers = () -> ModelSpec.parse("resnet50", shape);
    try (Backend b = new CpuBackend(1)) {
      Model.InferenceFootprint footprint = Model.inferenceFootprint("resnet50", layers, b, batch);
      long largest = 4L * batch * 256 * 56 * 56;
      long extra = 4 * 4096; // batch norm's saved statistics (256 floats twice), alignment
      assertTrue(
          footprint.activationBytes() <= largest / 2 + 3 * (largest + extra),
          footprint.activationBytes() + " bytes of activations, " + largest + " the largest");
      assertTrue(footprint.activationBytes() >= 3 * largest, "at least what is live at once");
    }
  }
}
