package dev.ramtrain.trainer.backend;

import java.io.Serializable;

/**
 * Which backend a run asks for ({@code ramtrain.train.backend}), the host cores it may use, on CUDA
 * who multiplies matrices ({@code ramtrain.cuda.gemm}) and which GPU: {@code device}, the CUDA
 * ordinal among the GPUs the process sees (0 but for a Spark task assigned another GPU); on the CPU
 * who convolves ({@code ramtrain.cpu.engine}).
 */
public record BackendSpec(Kind kind, int threads, GemmChoice gemm, int device, CpuEngine cpuEngine)
    implements Serializable {

  /** {@code auto}: CUDA when a usable GPU is found, else the CPU backend. */
  public enum Kind {
    CPU,
    CUDA,
    AUTO
  }

  /**
   * The CUDA backend's GEMM: {@code auto} is cuBLAS when libcublas.so.12 loads and the backend's
   * own kernels otherwise (a machine with only a driver); the other two insist.
   */
  public enum GemmChoice {
    AUTO,
    CUBLAS,
    KERNELS
  }

  public BackendSpec {
    if (threads < 1) {
      throw new IllegalArgumentException("threads must be >= 1, got " + threads);
    }
    if (kind == null || gemm == null || cpuEngine == null) {
      throw new IllegalArgumentException("kind, gemm and cpuEngine must be given");
    }
    if (device < 0) {
      throw new IllegalArgumentException("device must be >= 0, got " + device);
    }
  }

  /** {@code kind} with {@code threads} host cores, {@code gemm} and {@code cpuEngine}, device 0. */
  public BackendSpec(Kind kind, int threads, GemmChoice gemm, CpuEngine cpuEngine) {
    this(kind, threads, gemm, 0, cpuEngine);
  }

  /** {@code kind} with {@code threads} host cores and {@code gemm}, on device 0. */
  public BackendSpec(Kind kind, int threads, GemmChoice gemm) {
    this(kind, threads, gemm, CpuEngine.AUTO);
  }

  /** {@code kind} with {@code threads} host cores and the automatic GEMM choice. */
  public BackendSpec(Kind kind, int threads) {
    this(kind, threads, GemmChoice.AUTO);
  }

  /** The same on CUDA device {@code ordinal}. */
  public BackendSpec onDevice(int ordinal) {
    return new BackendSpec(kind, threads, gemm, ordinal, cpuEngine);
  }
}
