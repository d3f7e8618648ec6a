package dev.ramtrain.trainer.backend.cuda;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendSpec;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Opens a CUDA backend on an emulated device with faults (src/test/native/README.md): the emulator
 * reads them from the file the tests' RAMTRAIN_CUDA_EMULATOR_FAULTS names when the context is
 * created, so the file exists only while the backend opens.
 */
public final class EmulatorFaults {
  private EmulatorFaults() {}

  /** A backend whose device has {@code faults} ("key=value" lines); none for a healthy one. */
  public static Backend open(BackendSpec spec, String... faults) {
    Path file = Path.of(System.getProperty("ramtrain.cuda.emulator.faults"));
    try {
      Files.write(file, List.of(faults));
      try {
        return CudaBackend.open(spec);
      } finally {
        Files.deleteIfExists(file);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Runs {@code probe} while the emulated driver reports {@code faults}. */
  static CudaProbe.Result probeWith(String... faults) {
    Path file = Path.of(System.getProperty("ramtrain.cuda.emulator.faults"));
    try {
      Files.write(file, List.of(faults));
      try {
        return CudaProbe.probe();
      } finally {
        Files.deleteIfExists(file);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
