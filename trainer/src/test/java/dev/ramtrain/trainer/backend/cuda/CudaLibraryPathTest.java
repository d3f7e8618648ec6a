package dev.ramtrain.trainer.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.CudaSpec;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code ramtrain.cuda.library-path} finds NVIDIA's libraries in a folder the system does not
 * search (run with the driver alone on LD_LIBRARY_PATH, in a JVM of its own: see {@link
 * CudaWithoutLibrariesTest}); a folder that does not exist, and a file of the right name that is no
 * library, are passed over for the next folder.
 */
class CudaLibraryPathTest {
  @Test
  void theLibrariesLoadFromTheConfiguredFolders(@TempDir Path decoy) throws Exception {
    Files.writeString(decoy.resolve("libcublas.so.13"), "not a library");
    String stubs = System.getProperty("ramtrain.cuda.emulator.dir");
    assumeTrue(
        !Files.exists(
            Path.of(System.getenv().getOrDefault("LD_LIBRARY_PATH", "none"), "libcublas.so.13")),
        "run with the driver alone on LD_LIBRARY_PATH");
    CudaSpec spec =
        new CudaSpec(
            CudaSpec.GemmChoice.CUBLAS,
            CudaSpec.ConvChoice.CUDNN,
            CudaSpec.Tf32.CONVOLUTIONS,
            List.of("/nonexistent/folder", decoy.toString(), stubs));
    try (CudaBackend backend = CudaBackend.open(new BackendSpec(BackendSpec.Kind.CUDA, 1, spec))) {
      String described = backend.describe();
      assertTrue(described.contains("GEMM by cuBLAS 13.1.0"), described);
      assertTrue(described.contains("convolutions by cuDNN 9.19.0"), described);
      CudaWithoutLibrariesTest.convolveOnce(backend);
    }
  }
}
