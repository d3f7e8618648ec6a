package dev.ramtrain.trainer.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendConformanceTest;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.CudaSpec;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.ConvWindow;
import dev.ramtrain.trainer.backend.ops.Convolution;
import dev.ramtrain.trainer.backend.ops.ConvolutionBackward;
import dev.ramtrain.trainer.backend.ops.Fill;
import dev.ramtrain.trainer.backend.ops.Gemm;
import dev.ramtrain.trainer.backend.ops.GemmOperand;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

/**
 * The conformance suite on the CUDA backend with GEMM by cuBLAS and convolutions by cuDNN (both
 * insisted on; emulated over OpenBLAS by libcublas.so.13 and libcudnn_*.so.9 stubs whose algorithm
 * rankings trap an engine that ignores workspace limits or determinism).
 */
class CudaBackendLibrariesTest extends BackendConformanceTest {
  /** Both libraries, TF32 off: the suite's fp32 bounds hold on a real GPU too (lent.sh). */
  static final CudaSpec LIBRARIES =
      CudaSpec.defaults()
          .withGemm(CudaSpec.GemmChoice.CUBLAS)
          .withConv(CudaSpec.ConvChoice.CUDNN)
          .withTf32(CudaSpec.Tf32.OFF);

  @Override
  protected Backend create() {
    return CudaBackend.open(new BackendSpec(BackendSpec.Kind.CUDA, 1, LIBRARIES));
  }

  /**
   * ramtrain.cuda.tf32 reaches the libraries: 1 + 2⁻²⁰ has no TF32 form (10 mantissa bits) and
   * rounds to 1, so four products of it with 1 sum to 4 exactly where TF32 is used and to 4 + 2⁻¹⁸
   * in fp32. The GEMM rounds only under {@code all}, the convolution under {@code convolutions} and
   * {@code all}. On the emulator, which rounds as the tensor cores do, exactly so; on a GPU the
   * library may still pick a kernel without tensor cores for so small a product, so there only
   * "fp32 where TF32 is off" is required.
   */
  @Test
  void tf32RoundsOperandsOnlyWhereTheSettingAllowsIt() {
    float odd = 1f + 0x1p-20f;
    float exact = 4 * odd;
    for (CudaSpec.Tf32 tf32 : CudaSpec.Tf32.values()) {
      try (CudaBackend b =
              CudaBackend.open(
                  new BackendSpec(BackendSpec.Kind.CUDA, 1, LIBRARIES.withTf32(tf32)));
          Stream s = b.createStream("tf32")) {
        boolean emulated = b.describe().contains("emulator");
        float gemm = product(b, s, odd, false);
        float conv = product(b, s, odd, true);
        check(tf32.matmul(), emulated, exact, gemm, "GEMM under tf32=" + tf32);
        check(tf32.convolutions(), emulated, exact, conv, "convolution under tf32=" + tf32);
      }
    }
  }

  private static void check(
      boolean allowed, boolean emulated, float exact, float actual, String what) {
    if (!allowed) {
      assertEquals(exact, actual, 0f, what + ": fp32");
    } else if (emulated) {
      assertEquals(4f, actual, 0f, what + ": TF32 operands");
    } else {
      assertTrue(actual == 4f || actual == exact, what + ": TF32 or fp32, got " + actual);
    }
  }

  /**
   * Four products of {@code value} with 1: a 1×4 by 4×1 GEMM, or a 1×1 convolution of 4 channels.
   */
  private static float product(CudaBackend b, Stream s, float value, boolean convolution) {
    try (DeviceBuffer x = b.allocate("x", DType.F32, 4);
        DeviceBuffer w = b.allocate("w", DType.F32, 4);
        DeviceBuffer y = b.allocate("y", DType.F32, 1);
        DeviceBuffer cols = b.allocate("cols", DType.F32, 4);
        HostBuffer out = b.allocateHost("out", 4)) {
      b.run(s, new Fill(x, value));
      b.run(s, new Fill(w, 1f));
      if (convolution) {
        b.run(s, new Convolution(x, w, null, y, new ConvWindow(1, 4, 1, 1, 1, 1, 1, 0), 1, cols));
      } else {
        b.run(
            s,
            new Gemm(
                1, 1, 4, 1f, GemmOperand.of(x, 4), GemmOperand.of(w, 1), 0f, GemmOperand.of(y, 1)));
      }
      b.copy(y, out, 0, 4, s);
      s.synchronize();
      return out.asByteBuffer().order(ByteOrder.nativeOrder()).getFloat(0);
    }
  }

  /**
   * A convolution's three directions run on execution plans of cuDNN's graph API, built once per
   * shape (on the emulator, past engines that need too much workspace, are not deterministic or use
   * tensor cores with TF32 off), not on the legacy calls, which cost a GPU's host hundreds of
   * microseconds each.
   */
  @Test
  void convolutionsRunOnExecutionPlansNotLegacyCalls() {
    ConvWindow window = new ConvWindow(2, 3, 6, 5, 3, 3, 1, 1);
    int out = 4;
    try (CudaBackend b = CudaBackend.open(new BackendSpec(BackendSpec.Kind.CUDA, 1, LIBRARIES));
        Stream s = b.createStream("plans");
        DeviceBuffer x = b.allocate("x", DType.F32, window.inputCount());
        DeviceBuffer w = b.allocate("w", DType.F32, (long) out * 3 * 3 * 3);
        DeviceBuffer dw = b.allocate("dw", DType.F32, (long) out * 3 * 3 * 3);
        DeviceBuffer y = b.allocate("y", DType.F32, window.outputCount(out));
        DeviceBuffer dx = b.allocate("dx", DType.F32, window.inputCount());
        DeviceBuffer cols = b.allocate("cols", DType.F32, window.columnCount())) {
      b.run(s, new Fill(x, 0.5f));
      b.run(s, new Fill(w, 0.25f));
      for (int step = 0; step < 2; step++) {
        b.run(s, new Convolution(x, w, null, y, window, out, cols));
        b.run(s, new ConvolutionBackward(x, y, w, dw, null, dx, window, out, cols));
      }
      s.synchronize();
      assertEquals(0, b.convolutions().legacyCalls());
    }
  }

  @Test
  void theLibrariesRunTheGemmsAndConvolutions() {
    try (CudaBackend backend =
        CudaBackend.open(new BackendSpec(BackendSpec.Kind.CUDA, 1, LIBRARIES))) {
      String described = backend.describe();
      assertTrue(described.contains("GEMM by cuBLAS 13."), described);
      assertTrue(described.contains("convolutions by cuDNN 9."), described);
    }
  }
}
