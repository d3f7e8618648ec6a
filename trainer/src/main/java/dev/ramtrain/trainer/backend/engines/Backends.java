package dev.ramtrain.trainer.backend.engines;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.backend.cpu.CpuMemoryLimit;
import dev.ramtrain.trainer.backend.cpu.SimulatedBus;
import dev.ramtrain.trainer.backend.cuda.CudaBackend;
import dev.ramtrain.trainer.backend.cuda.CudaProbe;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one place a backend is chosen: every command (train, evaluate, predict, plan, the Spark
 * trainer task) opens its backend here, so a new backend is one more case in {@link #open}.
 */
public final class Backends {
  private static final Logger LOG = LoggerFactory.getLogger(Backends.class);

  private Backends() {}

  /**
   * Opens the backend {@code spec} asks for. {@code cuda} fails, naming what is missing, when no
   * GPU can be used; {@code auto} then falls back to the CPU backend, logging why once.
   */
  public static Backend open(BackendSpec spec) {
    return switch (spec.kind()) {
      case CPU -> cpu(spec);
      case CUDA -> CudaBackend.open(spec);
      case AUTO -> {
        CudaProbe.Result gpu = CudaProbe.result(spec.device());
        if (gpu.available()) {
          yield CudaBackend.open(spec);
        }
        LOG.info("backend auto: {}; using the cpu backend", gpu.unavailable());
        yield cpu(spec);
      }
    };
  }

  private static CpuBackend cpu(BackendSpec spec) {
    return new CpuBackend(
        spec.threads(), SimulatedBus.NONE, spec.cpuEngine(), CpuMemoryLimit.of(spec.cpuMemory()));
  }
}
