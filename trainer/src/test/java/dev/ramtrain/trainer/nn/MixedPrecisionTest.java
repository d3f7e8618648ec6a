package dev.ramtrain.trainer.nn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.DeviceArrays;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.Bf16;
import dev.ramtrain.trainer.backend.CpuEngine;
import dev.ramtrain.trainer.backend.CudaSpec;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.backend.cuda.EmulatorFaults;
import java.util.List;
import java.util.Random;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;

/**
 * A bf16 layer computes exactly what its fp32 twin computes on bf16-rounded operands, its output
 * and input gradient rounded to bf16 (torch.autocast's contract for Linear and convolutions), on
 * the CPU backend and the CUDA backend alike; its weight gradient stays fp32. On oneDNN, whose bf16
 * kernels sum in another order than its fp32 ones, within the bound that order allows.
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
    return run(b, layer, x, dy, roundWeight ? MixedPrecisionTest::rounded : null, w -> w);
  }

  /** The same with {@code weight} and {@code bias} applied to the initial parameters. */
  private static float[][] run(
      Backend b,
      Layer layer,
      float[] x,
      float[] dy,
      UnaryOperator<float[]> weight,
      UnaryOperator<float[]> bias) {
    Stream s = b.createStream("test");
    try (Model model = Model.build("layer", List.of(layer), b, s, BATCH, 7);
        DeviceBuffer dx = b.allocate("x", DType.F32, x.length);
        DeviceBuffer ddy = b.allocate("dy", DType.F32, dy.length)) {
      String weightName = layer.parameters().get(0).name();
      for (ParamSpec p : layer.parameters()) {
        UnaryOperator<float[]> f = p.name().equals(weightName) ? weight : bias;
        if (f != null) {
          DeviceBuffer w = model.parameters().value(p.name());
          DeviceArrays.write(b, s, w, f.apply(DeviceArrays.read(b, s, w)));
        }
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

  /**
   * Where the bf16 and fp32 layers run the same arithmetic (the Java engine, CUDA), the bf16 layer
   * equals its fp32 twin on rounded operands bit for bit. oneDNN multiplies bf16 with other kernels
   * than fp32, in another order: the products are the same (a product of two bf16 values is exact
   * in fp32), so the sums differ by at most γ(K)·Σ|products| (K products each; the twin run on
   * absolute values gives Σ|products|), and a rounded result by one bf16 step more.
   */
  private static void matchesRoundedFp32(
      Engine engine, Supplier<Layer> bf16, Supplier<Layer> fp32, int in, int out, int terms) {
    float[] x = gaussian(1, BATCH * in);
    float[] dy = gaussian(2, BATCH * out);
    float[][] half;
    float[][] reference;
    float[][] magnitudes;
    try (Backend b = engine.backend().get()) {
      half = run(b, bf16.get(), x, dy, false);
      reference = run(b, fp32.get(), rounded(x), rounded(dy), true);
      magnitudes =
          engine.exact()
              ? null
              : run(
                  b,
                  fp32.get(),
                  abs(rounded(x)),
                  abs(rounded(dy)),
                  w -> abs(rounded(w)),
                  MixedPrecisionTest::abs);
    }
    if (engine.exact()) {
      assertArrayEquals(rounded(reference[0]), half[0], "output: rounded fp32 of rounded operands");
      assertArrayEquals(reference[1], half[1], "weight gradient: fp32 of rounded operands");
      assertArrayEquals(rounded(reference[2]), half[2], "input gradient, rounded");
    } else {
      withinSumBound(reference[0], magnitudes[0], terms, half[0], true, "output");
      withinSumBound(reference[1], magnitudes[1], BATCH * out, half[1], false, "weight gradient");
      withinSumBound(reference[2], magnitudes[2], terms, half[2], true, "input gradient");
    }
    assertFalse(
        java.util.Arrays.equals(half[0], run(engine.backend(), fp32.get(), x, dy)), "bf16 differs");
  }

  private static void withinSumBound(
      float[] exact, float[] absSum, int terms, float[] got, boolean rounded, String what) {
    double u = Math.scalb(1.0, -24);
    double gamma = terms * u / (1 - terms * u);
    for (int i = 0; i < exact.length; i++) {
      double bound = gamma * Math.abs(absSum[i]) + Float.MIN_NORMAL;
      if (rounded) { // and one bf16 step (2^-8 relative) either side of the rounding
        bound += Math.scalb(Math.abs(exact[i]) + bound, -8);
      }
      double error = Math.abs(got[i] - exact[i]);
      assertTrue(error <= bound, what + "[" + i + "]: " + got[i] + " vs " + exact[i]);
      if (rounded) { // autocast's output and input gradient are bf16 values
        assertEquals(Bf16.toFloat(Bf16.fromFloat(got[i])), got[i], what + "[" + i + "] is bf16");
      }
    }
  }

  private static float[] abs(float[] values) {
    float[] out = new float[values.length];
    for (int i = 0; i < values.length; i++) {
      out[i] = Math.abs(values[i]);
    }
    return out;
  }

  private static float[] run(Supplier<Backend> backend, Layer layer, float[] x, float[] dy) {
    try (Backend b = backend.get()) {
      return run(b, layer, x, dy, false)[0];
    }
  }

  /** A backend to check, and whether its bf16 and fp32 layers share their arithmetic. */
  private record Engine(Supplier<Backend> backend, boolean exact) {}

  private static void onEveryBackend(java.util.function.Consumer<Engine> check) {
    check.accept(new Engine(() -> new CpuBackend(2, CpuEngine.JAVA), true));
    check.accept(new Engine(() -> new CpuBackend(2, CpuEngine.ONEDNN), false));
    check.accept(
        new Engine(
            () ->
                EmulatorFaults.open(
                    new BackendSpec(BackendSpec.Kind.CUDA, 1, CudaSpec.ownKernels())),
            true));
    check.accept( // cuBLAS and cuDNN: another summation order than the own kernels
        new Engine(
            () ->
                EmulatorFaults.open(new BackendSpec(BackendSpec.Kind.CUDA, 1, CudaSpec.defaults())),
            false));
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
                9,
                41)); // an output: 40 products and the bias
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
              5 * 7 * 6,
              5 * 3 * 3 + 1); // an output: 2·3·3 products and the bias; an input: 5·3·3
          // channels blocked between layers on engines that block them (oneDNN: nChw16c), as
          // ResNets run: both twins read and write that layout, compared element for element
          ChannelLayout blocked = ChannelLayout.ENGINE;
          matchesRoundedFp32(
              backend,
              () ->
                  new Conv2d(
                      "block", 16, 5, 4, 16, 3, 1, 1, false, Precision.BF16, blocked, blocked),
              () ->
                  new Conv2d(
                      "block", 16, 5, 4, 16, 3, 1, 1, false, Precision.FP32, blocked, blocked),
              16 * 5 * 4,
              16 * 5 * 4,
              16 * 3 * 3);
          matchesRoundedFp32( // fewer columns than input values: dx rounds through its own room
              backend,
              () -> new Conv2d("down", 2, 7, 6, 4, 1, 2, 0, false, Precision.BF16),
              () -> new Conv2d("down", 2, 7, 6, 4, 1, 2, 0, false, Precision.FP32),
              inputs,
              4 * 4 * 3,
              4);
        });
  }
}
