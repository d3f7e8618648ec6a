package dev.ramtrain.trainer.nn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import dev.ramtrain.trainer.DeviceArrays;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.Bf16;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.backend.cuda.EmulatorFaults;
import java.util.List;
import java.util.Random;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * A bf16 layer computes exactly what its fp32 twin computes on bf16-rounded operands, its output
 * and input gradient rounded to bf16 (torch.autocast's contract for Linear and convolutions), on
 * the CPU backend and the CUDA backend alike; its weight gradient stays fp32.
 */
class MixedPrecisionTest {
  private static final int BATCH = 3;

  private static float[] rounded(float[] values) {
    float[] out = new float[values.length];
    for (int i = 0; i < values.length; i++) {
      out[i] = Bf16.toFloat(Bf16.fromFloat(values[i]));
    }
    return out;
  }

  private static float[] gaussian(long seed, int n) {
    Random rng = new Random(seed);
    float[] x = new float[n];
    for (int i = 0; i < n; i++) {
      x[i] = (float) rng.nextGaussian();
    }
    return x;
  }

  /** Output, weight gradient and input gradient of {@code layer} on {@code x} and {@code dy}. */
  private static float[][] run(Backend b, Layer layer, float[] x, float[] dy, boolean roundWeight) {
    Stream s = b.createStream("test");
    try (Model model = Model.build("layer", List.of(layer), b, s, BATCH, 7);
        DeviceBuffer dx = b.allocate("x", DType.F32, x.length);
        DeviceBuffer ddy = b.allocate("dy", DType.F32, dy.length)) {
      String weightName = layer.parameters().get(0).name();
      if (roundWeight) {
        DeviceBuffer w = model.parameters().value(weightName);
        DeviceArrays.write(b, s, w, rounded(DeviceArrays.read(b, s, w)));
      }
      DeviceArrays.write(b, s, dx, x);
      DeviceArrays.write(b, s, ddy, dy);
      model.zeroGrad(s);
      float[] y = DeviceArrays.read(b, s, model.forward(s, dx, BATCH, true));
      DeviceBuffer in = layer.backward(s, ddy, BATCH, true);
      float[] inGrad = DeviceArrays.read(b, s, in);
      float[] weightGrad = DeviceArrays.read(b, s, model.parameters().grad(weightName));
      return new float[][] {y, weightGrad, inGrad};
    }
  }

  private static void matchesRoundedFp32(
      Supplier<Backend> backend, Supplier<Layer> bf16, Supplier<Layer> fp32, int in, int out) {
    float[] x = gaussian(1, BATCH * in);
    float[] dy = gaussian(2, BATCH * out);
    float[][] half;
    float[][] reference;
    try (Backend b = backend.get()) {
      half = run(b, bf16.get(), x, dy, false);
      reference = run(b, fp32.get(), rounded(x), rounded(dy), true);
    }
    assertArrayEquals(rounded(reference[0]), half[0], "output: rounded fp32 of rounded operands");
    assertArrayEquals(reference[1], half[1], "weight gradient: fp32 of rounded operands");
    assertArrayEquals(rounded(reference[2]), half[2], "input gradient, rounded");
    assertFalse(java.util.Arrays.equals(half[0], run(backend, fp32.get(), x, dy)), "bf16 differs");
  }

  private static float[] run(Supplier<Backend> backend, Layer layer, float[] x, float[] dy) {
    try (Backend b = backend.get()) {
      return run(b, layer, x, dy, false)[0];
    }
  }

  private static void onEveryBackend(java.util.function.Consumer<Supplier<Backend>> check) {
    check.accept(() -> new CpuBackend(2));
    check.accept(
        () ->
            EmulatorFaults.open(
                new BackendSpec(BackendSpec.Kind.CUDA, 1, BackendSpec.Gemm.KERNELS)));
  }

  @Test
  void linear() {
    onEveryBackend(
        backend ->
            matchesRoundedFp32(
                backend,
                () -> new Linear("fc", 40, 9, Precision.BF16),
                () -> new Linear("fc", 40, 9, Precision.FP32),
                40,
                9));
  }

  @Test
  void convolutionAlsoStridedOneByOne() {
    int inputs = 2 * 7 * 6;
    onEveryBackend(
        backend -> {
          matchesRoundedFp32(
              backend,
              () -> new Conv2d("conv", 2, 7, 6, 5, 3, 1, 1, true, Precision.BF16),
              () -> new Conv2d("conv", 2, 7, 6, 5, 3, 1, 1, true, Precision.FP32),
              inputs,
              5 * 7 * 6);
          matchesRoundedFp32( // fewer columns than input values: dx rounds through its own room
              backend,
              () -> new Conv2d("down", 2, 7, 6, 4, 1, 2, 0, false, Precision.BF16),
              () -> new Conv2d("down", 2, 7, 6, 4, 1, 2, 0, false, Precision.FP32),
              inputs,
              4 * 4 * 3);
        });
  }
}
