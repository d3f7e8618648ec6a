package dev.ramtrain.trainer.backend.cpu;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkRange;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkSameBytes;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendUnavailableException;
import dev.ramtrain.trainer.backend.ByteSize;
import dev.ramtrain.trainer.backend.CpuEngine;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.MemoryLedger;
import dev.ramtrain.trainer.backend.Operation;
import dev.ramtrain.trainer.backend.OperationTable;
import dev.ramtrain.trainer.backend.Stream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ForkJoinPool;
import org.apache.arrow.memory.util.MemoryUtil;
import org.bytedeco.openblas.global.openblas_nolapack;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The CPU backend: "device" memory is native host memory, streams are single-thread executors, and
 * the operations are {@link JavaOperations} and {@link OneDnnOperations} (GEMM by native OpenBLAS,
 * the other kernels Java loops split across cores). It is the reference the CUDA backend is checked
 * against, and what runs where there is no GPU.
 */
public final class CpuBackend implements Backend {
  private static final Logger LOG = LoggerFactory.getLogger(CpuBackend.class);
  private final CpuMemory device;
  private final CpuMemory host = new CpuMemory(this::drainStreams, null);
  private final List<CpuStream> streams = new ArrayList<>();
  private final Map<CpuEvent, String> liveEvents = new ConcurrentHashMap<>();
  private final ForkJoinPool pool;
  private final OperationTable<CpuStream> operations;
  private final SimulatedBus bus;
  private final OneDnn oneDnn; // null: convolutions by the Java kernels
  private final int oneDnnThreads; // what each stream limits its OpenMP teams to; 0: left as is

  /** A backend using {@code threads} cores for kernels and GEMM, on the automatic engine. */
  public CpuBackend(int threads) {
    this(threads, SimulatedBus.NONE);
  }

  /** A backend using {@code threads} cores on the {@code engine} asked for. */
  public CpuBackend(int threads, CpuEngine engine) {
    this(threads, SimulatedBus.NONE, engine);
  }

  /**
   * A backend whose host-device copies also take the time {@code bus} says (an idle wait, not
   * work): how tests check that stream ordering rather than timing makes results right, and how
   * benchmarks show overlap as a GPU's bus would.
   */
  public CpuBackend(int threads, SimulatedBus bus) {
    this(threads, bus, CpuEngine.AUTO);
  }

  /** The same with {@code bus} on the {@code engine} asked for. */
  public CpuBackend(int threads, SimulatedBus bus, CpuEngine engine) {
    this(threads, bus, engine, CpuMemoryLimit.of(0));
  }

  /** The same, its device memory within {@code limit}. */
  public CpuBackend(int threads, SimulatedBus bus, CpuEngine engine, CpuMemoryLimit limit) {
    this.bus = bus;
    if (threads < 1) {
      throw new IllegalArgumentException("threads must be >= 1, got " + threads);
    }
    this.device = new CpuMemory(this::drainStreams, limit);
    LOG.info("cpu backend: {} of memory ({})", ByteSize.of(limit.bytes()), limit.source());
    this.oneDnn = openEngine(engine, threads);
    this.oneDnnThreads = oneDnn != null && ompFromEnvironment() == null ? threads : 0;
    this.pool = new ForkJoinPool(threads);
    Parallel parallel = new Parallel(pool);
    CpuKernels kernels = new CpuKernels(parallel);
    OperationTable<CpuStream> java =
        JavaOperations.table(
            kernels,
            new NormKernels(parallel),
            new CopyKernels(parallel),
            new DepthwiseKernels(parallel));
    this.operations = oneDnn == null ? java : OneDnnOperations.table(oneDnn, kernels, java);
    if (oneDnn == null) {
      // OpenBLAS only multiplies on the Java engine: on oneDNN's its idle workers, which spin,
      // would take the cores oneDNN's OpenMP threads and the Java pool work on.
      openblas_nolapack.blas_set_num_threads(threads);
    }
  }

  /**
   * oneDNN when {@code engine} asks for it and it loads; null for the Java kernels. Its OpenMP
   * threads are {@code threads} a stream unless the environment's {@code OMP_NUM_THREADS} says
   * otherwise (then that many, for the whole process).
   */
  private static OneDnn openEngine(CpuEngine engine, int threads) {
    if (engine == CpuEngine.JAVA) {
      return null;
    }
    try {
      OneDnn opened = OneDnn.open();
      String omp = ompFromEnvironment();
      String limit = omp == null ? OpenMpThreads.limitThisThread(threads) : null;
      LOG.info(
          "cpu backend: convolutions and GEMM by {} on {}",
          OneDnn.version(),
          omp != null
              ? "OMP_NUM_THREADS=" + omp
              : limit == null
                  ? threads + (threads == 1 ? " thread" : " threads") + " a stream"
                  : "every core (OMP_NUM_THREADS unset; " + limit + ")");
      return opened;
    } catch (BackendUnavailableException e) {
      if (engine == CpuEngine.ONEDNN) {
        throw new BackendUnavailableException("ramtrain.cpu.engine=onednn but " + e.getMessage());
      }
      LOG.info("cpu backend: {}; convolutions by the Java kernels", e.getMessage());
      return null;
    }
  }

  private static String ompFromEnvironment() {
    String omp = System.getenv("OMP_NUM_THREADS");
    return omp == null || omp.isBlank() ? null : omp;
  }

  @Override
  public String name() {
    return "cpu";
  }

  /** Who computes convolutions: "onednn" or "java". */
  public String engine() {
    return oneDnn == null ? "java" : "onednn";
  }

  /** oneDNN's channel blocking for its ISA (16 with AVX-512, else 8); 1 on the Java kernels. */
  @Override
  public int channelBlock() {
    return oneDnn == null ? 1 : oneDnn.channelBlock();
  }

  /** On oneDNN over blocked channels (its batch norm's workspace); the Java kernels do not fuse. */
  @Override
  public long normReluMaskBytes(int n, int c, int hw, int channelBlock) {
    return oneDnn == null || channelBlock == 1
        ? 0
        : oneDnn.normReluMaskBytes(n, c, hw, channelBlock);
  }

  /** On oneDNN: bf16 kernels where the CPU has AVX512-BF16 or AMX, operands widened elsewhere. */
  @Override
  public boolean convolvesInBf16() {
    return oneDnn != null;
  }

  @Override
  public boolean convolvesWithoutColumns() {
    return oneDnn != null; // oneDNN convolves itself; the Java kernels lower to im2col
  }

  @Override
  public boolean sharesHostCores() {
    return true;
  }

  @Override
  public DeviceBuffer allocate(String label, DType dtype, long count) {
    if (count < 0) {
      throw new IllegalArgumentException(label + ": negative element count " + count);
    }
    return new CpuBuffer(
        label, dtype, count, device.allocate(label, count * dtype.bytes()), 0, true);
  }

  @Override
  public HostBuffer allocateHost(String label, long bytes) {
    return new CpuHostBuffer(label, bytes, host.allocate(label, bytes));
  }

  /**
   * Threads holding oneDNN primitives now (0 on the Java engine): each open stream that used it.
   */
  int oneDnnThreads() {
    return oneDnn == null ? 0 : oneDnn.threadContexts();
  }

  @Override
  public synchronized Stream createStream(String label) {
    CpuStream stream = new CpuStream(label, oneDnn == null ? () -> {} : oneDnn::releaseThisThread);
    if (oneDnnThreads > 0) { // first on the stream's thread: its oneDNN teams' size
      stream.enqueue(() -> OpenMpThreads.limitThisThread(oneDnnThreads));
    }
    streams.add(stream);
    return stream;
  }

  @Override
  public Event createEvent(String label) {
    CpuEvent event = new CpuEvent(liveEvents::remove);
    liveEvents.put(event, label);
    return event;
  }

  @Override
  public long allocatedBytes() {
    return device.ledger().allocated();
  }

  @Override
  public long peakAllocatedBytes() {
    return device.ledger().peak();
  }

  @Override
  public void resetPeakAllocatedBytes() {
    device.ledger().resetPeak();
  }

  @Override
  public long allocatedHostBytes() {
    return host.ledger().allocated();
  }

  @Override
  public long largestAllocationBytes() {
    return Integer.MAX_VALUE; // CpuMemory.Allocation: Java buffers index with ints
  }

  /**
   * The CPU backend's device is host memory: what its limit ({@link CpuMemoryLimit}) still leaves,
   * the number the plan and the allocator share.
   */
  @Override
  public long freeMemoryBytes() {
    return device.freeBytes();
  }

  @Override
  public long hostAllocations() {
    return host.ledger().count();
  }

  @Override
  public void copy(HostBuffer src, long srcByte, DeviceBuffer dst, long bytes, Stream stream) {
    checkRange(src.label(), srcByte, bytes, src.bytes());
    checkRange(dst.label(), 0, bytes, dst.bytes());
    busCopy(stream, src.address() + srcByte, cpu(dst).address(), bytes);
  }

  @Override
  public void copy(DeviceBuffer src, HostBuffer dst, long dstByte, long bytes, Stream stream) {
    checkRange(src.label(), 0, bytes, src.bytes());
    checkRange(dst.label(), dstByte, bytes, dst.bytes());
    busCopy(stream, cpu(src).address(), dst.address() + dstByte, bytes);
  }

  /** A host-device copy: the bus's time first (the data lands late, as over a slow bus). */
  private void busCopy(Stream stream, long from, long to, long bytes) {
    long busNanos = bus.nanosFor(bytes);
    on(stream)
        .enqueue(
            () -> {
              SimulatedBus.idle(busNanos);
              MemoryUtil.copyMemory(from, to, bytes);
            });
  }

  @Override
  public void copy(DeviceBuffer src, DeviceBuffer dst, Stream stream) {
    checkSameBytes(src, dst);
    CpuBuffer s = cpu(src);
    CpuBuffer d = cpu(dst);
    on(stream).enqueue(() -> MemoryUtil.copyMemory(s.address(), d.address(), s.bytes()));
  }

  @Override
  public void run(Stream stream, Operation op) {
    operations.run(op, on(stream));
  }

  @Override
  public synchronized void close() {
    streams.forEach(CpuStream::close);
    streams.clear();
    pool.shutdown();
    if (oneDnn != null) {
      oneDnn.close(); // after the streams: no call of it is still running
    }
    MemoryLedger.requireNothingOpen("cpu", device.ledger(), host.ledger(), liveEvents.values());
  }

  /**
   * Waits for the work enqueued on every stream so far, as CUDA's frees wait for the device's: a
   * block freed under an operation still writing it corrupts the native heap (glibc aborts).
   */
  private void drainStreams() {
    List<CpuStream> open;
    synchronized (this) {
      open = List.copyOf(streams);
    }
    open.forEach(CpuStream::drain);
  }

  private static CpuStream on(Stream stream) {
    return (CpuStream) stream;
  }

  /** The CPU buffer behind {@code buffer}, checked to be open now, in the caller's thread. */
  static CpuBuffer cpu(DeviceBuffer buffer) {
    CpuBuffer b = (CpuBuffer) buffer;
    b.requireLive();
    return b;
  }
}
