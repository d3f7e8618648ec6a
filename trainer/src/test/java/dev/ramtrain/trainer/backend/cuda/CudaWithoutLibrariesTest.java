package dev.ramtrain.trainer.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.BackendUnavailableException;
import dev.ramtrain.trainer.backend.CudaSpec;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.ConvWindow;
import dev.ramtrain.trainer.backend.ops.Convolution;
import dev.ramtrain.trainer.backend.ops.Fill;
import java.nio.ByteOrder;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The CUDA backend where the driver loads and NVIDIA's libraries do not (its own surefire
 * execution, with the emulated driver alone on LD_LIBRARY_PATH): {@code auto} falls back to the own
 * kernels, {@code cublas} and {@code cudnn} fail at start naming what is missing and how to get it,
 * and {@code ramtrain.cuda.library-path} finds the libraries in a folder the system does not
 * search. One test, in that order: once loaded, a library stays loaded in the JVM.
 */
class CudaWithoutLibrariesTest {
  private static BackendSpec cuda(CudaSpec spec) {
    return new BackendSpec(BackendSpec.Kind.CUDA, 1, spec);
  }

  @Test
  void missingLibrariesFallBackOrFailNamingThem() {
    assumeFalse(
        NvidiaLibraries.cublas(List.of()).loaded(), "this machine's own cuBLAS is on the path");
    try (CudaBackend backend = CudaBackend.open(cuda(CudaSpec.defaults()))) {
      String described = backend.describe();
      assertTrue(described.contains("GEMM by ramtrain's own GEMM kernels"), described);
      assertTrue(described.contains("convolutions by im2col and GEMM"), described);
      convolveOnce(backend); // the fallback convolves
    }

    var gemm =
        assertThrows(
            BackendUnavailableException.class,
            () -> CudaBackend.open(cuda(CudaSpec.defaults().withGemm(CudaSpec.GemmChoice.CUBLAS))));
    assertTrue(gemm.getMessage().contains("ramtrain.cuda.gemm=cublas"), gemm.getMessage());
    assertTrue(gemm.getMessage().contains("libcublas"), gemm.getMessage());
    assertTrue(gemm.getMessage().contains("pip install torch"), gemm.getMessage());
    assertEquals(1, gemm.getMessage().lines().count(), "one line");

    var conv =
        assertThrows(
            BackendUnavailableException.class,
            () -> CudaBackend.open(cuda(CudaSpec.defaults().withConv(CudaSpec.ConvChoice.CUDNN))));
    assertTrue(conv.getMessage().contains("ramtrain.cuda.conv=cudnn"), conv.getMessage());
    assertTrue(conv.getMessage().contains("cuDNN 9 could not be loaded"), conv.getMessage());
  }

  static void convolveOnce(CudaBackend backend) {
    ConvWindow win = new ConvWindow(2, 3, 6, 6, 3, 3, 1, 1);
    try (Stream stream = backend.createStream("test");
        DeviceBuffer x = backend.allocate("x", DType.F32, win.inputCount());
        DeviceBuffer w = backend.allocate("w", DType.F32, 4L * 3 * 3 * 3);
        DeviceBuffer y = backend.allocate("y", DType.F32, win.outputCount(4));
        DeviceBuffer cols = backend.allocate("cols", DType.F32, win.columnCount())) {
      backend.run(stream, new Fill(x, 1f));
      backend.run(stream, new Fill(w, 0.5f));
      backend.run(stream, new Convolution(x, w, null, y, win, 4, cols));
      float[] out = new float[(int) y.count()];
      try (HostBuffer h = backend.allocateHost("y readback", y.bytes())) {
        backend.copy(y, h, 0, y.bytes(), stream);
        stream.synchronize();
        h.asByteBuffer().order(ByteOrder.nativeOrder()).asFloatBuffer().get(out);
      }
      assertEquals(27 * 0.5f, out[win.ow() + 1], "an inner output sums 27 products of 0.5");
      assertEquals(12 * 0.5f, out[0], "a corner sums the 12 inside the padding");
    }
  }
}
