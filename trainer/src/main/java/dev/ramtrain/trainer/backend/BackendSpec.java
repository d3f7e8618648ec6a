package dev.ramtrain.trainer.backend;

import java.io.Serializable;

/**
 * Which backend a run asks for ({@code ramtrain.train.backend}), the host cores it may use, the
 * CUDA engine's choices ({@code ramtrain.cuda.*}) and which GPU: {@code device}, the CUDA ordinal
 * among the GPUs the process sees (0 but for a Spark task assigned another GPU); on the CPU who
 * convolves ({@code ramtrain.cpu.engine}) and how much memory its "device" may take ({@code
 * ramtrain.cpu.memory}, bytes; 0 for the default, see {@code CpuMemoryLimit}).
 */
public record BackendSpec(
    Kind kind, int threads, CudaSpec cuda, int device, CpuEngine cpuEngine, long cpuMemory)
    implements Serializable {

  /** {@code auto}: CUDA when a usable GPU is found, else the CPU backend. */
  public enum Kind {
    CPU,
    CUDA,
    AUTO
  }

  public BackendSpec {
    if (threads < 1) {
      throw new IllegalArgumentException("threads must be >= 1, got " + threads);
    }
    if (kind == null || cuda == null || cpuEngine == null) {
      throw new IllegalArgumentException("kind, cuda and cpuEngine must be given");
    }
    if (device < 0) {
      throw new IllegalArgumentException("device must be >= 0, got " + device);
    }
    if (cpuMemory < 0) {
      throw new IllegalArgumentException("cpuMemory must be >= 0, got " + cpuMemory);
    }
  }

  /** On CUDA device {@code device}, the cpu backend's memory by default. */
  public BackendSpec(Kind kind, int threads, CudaSpec cuda, int device, CpuEngine cpuEngine) {
    this(kind, threads, cuda, device, cpuEngine, 0);
  }

  /** {@code kind} with {@code threads} host cores, {@code cuda} and {@code cpuEngine}, device 0. */
  public BackendSpec(Kind kind, int threads, CudaSpec cuda, CpuEngine cpuEngine) {
    this(kind, threads, cuda, 0, cpuEngine);
  }

  /** {@code kind} with {@code threads} host cores and {@code cuda}, on device 0. */
  public BackendSpec(Kind kind, int threads, CudaSpec cuda) {
    this(kind, threads, cuda, CpuEngine.AUTO);
  }

  /** {@code kind} with {@code threads} host cores and the defaults. */
  public BackendSpec(Kind kind, int threads) {
    this(kind, threads, CudaSpec.defaults());
  }

  /** The same on CUDA device {@code ordinal}. */
  public BackendSpec onDevice(int ordinal) {
    return new BackendSpec(kind, threads, cuda, ordinal, cpuEngine, cpuMemory);
  }

  /** The same with the cpu backend's memory limited to {@code bytes} (0: the default). */
  /** This backend on {@code count} host threads. */
  public BackendSpec withThreads(int count) {
    return new BackendSpec(kind, count, cuda, device, cpuEngine, cpuMemory);
  }

  public BackendSpec withCpuMemory(long bytes) {
    return new BackendSpec(kind, threads, cuda, device, cpuEngine, bytes);
  }
}
