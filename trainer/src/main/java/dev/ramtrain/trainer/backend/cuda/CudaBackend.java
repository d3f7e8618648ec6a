package dev.ramtrain.trainer.backend.cuda;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkRange;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkSameBytes;
import static jcuda.driver.JCudaDriver.cuMemGetInfo;
import static jcuda.driver.JCudaDriver.cuMemcpyDtoDAsync;
import static jcuda.driver.JCudaDriver.cuMemcpyDtoHAsync;
import static jcuda.driver.JCudaDriver.cuMemcpyHtoDAsync;
import static jcuda.driver.JCudaDriver.cuMemsetD8Async;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.BackendUnavailableException;
import dev.ramtrain.trainer.backend.CudaSpec;
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
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The CUDA backend: JCuda's driver API (the own kernels need nothing but the driver's
 * libcuda.so.1), the project's kernels from one fatbin (launched by {@link CudaOperations}), GEMM
 * by cuBLAS or by its own kernels, and convolutions by cuDNN (a table over the own one) or lowered
 * to im2col and GEMM, NVIDIA's libraries where they load ({@link NvidiaLibraries}). Device memory
 * comes from an arena, host staging from pinned memory; every kernel and copy is enqueued on the
 * caller's stream and returns at once. Arguments are checked where each operation's record is made,
 * so every engine rejects the same calls alike.
 */
public final class CudaBackend implements Backend {
  private static final Logger LOG = LoggerFactory.getLogger(CudaBackend.class);

  private final CudaProbe.Gpu device;
  private final CudaContext context;
  private final DeviceArena arena = new DeviceArena(this::drainStreams);
  private final MemoryLedger host = new MemoryLedger();
  private final CudaKernels kernels;
  private final GemmEngine gemm;
  private final CudnnConvolutions convolutions; // null: im2col and GEMM
  private final OperationTable<CudaStream> operations;
  private final CudaStream setup;
  private final List<CudaStream> streams = new ArrayList<>();
  private final Map<CudaEvent, String> liveEvents = new ConcurrentHashMap<>();
  private boolean released;

  /**
   * Opens the device {@code spec} names, or fails naming what is missing (driver, device, cuBLAS or
   * cuDNN when insisted on).
   */
  public static CudaBackend open(BackendSpec spec) {
    CudaProbe.Result probe = CudaProbe.result(spec.device());
    if (!probe.available()) {
      throw new BackendUnavailableException("backend cuda: " + probe.unavailable());
    }
    return new CudaBackend(probe.device(), spec.cuda());
  }

  private CudaBackend(CudaProbe.Gpu device, CudaSpec cuda) {
    this.device = device;
    this.context = new CudaContext(device.handle());
    CudaKernels loaded = null;
    GemmEngine engine = null;
    CudnnConvolutions convolving = null;
    try {
      loaded = new CudaKernels(context);
      engine = chooseGemm(cuda, loaded);
      convolving = chooseConvolutions(cuda);
      this.setup = new CudaStream("cuda.setup", context, scratch("cuda.setup"));
    } catch (RuntimeException | LinkageError e) {
      if (convolving != null) {
        convolving.close();
      }
      if (engine != null) {
        engine.close();
      }
      if (loaded != null) {
        loaded.close();
      }
      arena.close();
      context.close();
      throw e;
    }
    this.kernels = loaded;
    this.gemm = engine;
    this.convolutions = convolving;
    OperationTable<CudaStream> own = CudaOperations.table(loaded, engine);
    this.operations = convolving == null ? own : convolving.over(own);
    LOG.info("cuda backend on {}", describe());
    try {
      OwnGemmCheck.verify(this, new KernelGemm(loaded), setup, device.describe());
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  private GemmEngine chooseGemm(CudaSpec cuda, CudaKernels loaded) {
    if (cuda.gemm() == CudaSpec.GemmChoice.KERNELS) {
      return new KernelGemm(loaded);
    }
    NvidiaLibraries.Availability cublas = NvidiaLibraries.cublas(cuda.libraryPath());
    if (cublas.loaded()) {
      return new CublasGemm(
          context, new KernelGemm(loaded), cublas.version(), cuda.tf32().matmul());
    }
    fallBack(
        cublas,
        "cuBLAS",
        cuda.gemm() == CudaSpec.GemmChoice.CUBLAS,
        "gemm=cublas",
        "GEMM by ramtrain's own kernels");
    return new KernelGemm(loaded);
  }

  /** cuDNN's convolutions, or null where the engine lowers them to im2col and GEMM. */
  CudnnConvolutions convolutions() {
    return convolutions;
  }

  /** cuDNN's convolutions, or null for im2col and GEMM. */
  private CudnnConvolutions chooseConvolutions(CudaSpec cuda) {
    if (cuda.conv() == CudaSpec.ConvChoice.KERNELS) {
      return null;
    }
    NvidiaLibraries.Availability cudnn = NvidiaLibraries.cudnn(cuda.libraryPath());
    if (cudnn.loaded()) {
      return new CudnnConvolutions(context, cudnn.version(), cuda.tf32().convolutions());
    }
    fallBack(
        cudnn,
        "cuDNN 9",
        cuda.conv() == CudaSpec.ConvChoice.CUDNN,
        "conv=cudnn",
        "convolutions by im2col and GEMM");
    return null;
  }

  /**
   * A library that did not load: the start fails where {@code insisted} ({@code
   * ramtrain.cuda.<setting>}), else one warning says what runs instead, what is missing and how to
   * get it.
   */
  private static void fallBack(
      NvidiaLibraries.Availability library,
      String name,
      boolean insisted,
      String setting,
      String instead) {
    String why = name + " could not be loaded (" + library.missing() + ")";
    if (insisted) {
      throw new BackendUnavailableException(
          "backend cuda: ramtrain.cuda."
              + setting
              + " but "
              + why
              + "; "
              + NvidiaLibraries.HOW_TO_GET);
    }
    LOG.warn("cuda: {}, several times slower, as {}; {}", instead, why, NvidiaLibraries.HOW_TO_GET);
  }

  @Override
  public String name() {
    return "cuda";
  }

  /** The direct kernels: one pass over the input where im2col would write 49 copies of it. */
  @Override
  public boolean convolvesDepthwise() {
    return true;
  }

  @Override
  public boolean batchesAcrossImages() {
    return true;
  }

  /** The device, who multiplies matrices and who convolves, for logs and benchmarks. */
  public String describe() {
    return device.describe()
        + ", GEMM by "
        + gemm.describe()
        + ", convolutions by "
        + (convolutions == null ? "im2col and GEMM" : convolutions.describe());
  }

  // ---- memory, streams, events ---------------------------------------------------------------

  /** Allocations are zeroed, as the CPU backend's are (layers rely on fresh gradients being 0). */
  @Override
  public DeviceBuffer allocate(String label, DType dtype, long count) {
    if (count < 0) {
      throw new IllegalArgumentException(label + ": negative element count " + count);
    }
    long bytes = count * dtype.bytes();
    DeviceArena.Block block = arena.take(label, bytes, context);
    CudaBuffer buffer = new CudaBuffer(label, dtype, count, block, 0, true);
    if (bytes > 0) {
      context.bind();
      CudaCalls.check(
          cuMemsetD8Async(buffer.pointer(), (byte) 0, bytes, setup.handle()),
          () -> "zeroing " + label + " (" + bytes + " bytes)");
      setup.synchronize();
    }
    return buffer;
  }

  @Override
  public long streamBytes() {
    return CudaStream.SCRATCH_BYTES;
  }

  /** A device buffer of {@code count} F32 that is the backend's own (a stream's scratch). */
  private CudaBuffer scratch(String streamLabel) {
    return new CudaBuffer(
        "stream '" + streamLabel + "' scratch",
        DType.F32,
        CudaStream.SCRATCH_BYTES / Float.BYTES,
        arena.take("stream '" + streamLabel + "' scratch", CudaStream.SCRATCH_BYTES, context),
        0,
        true);
  }

  @Override
  public HostBuffer allocateHost(String label, long bytes) {
    if (bytes < 0) {
      throw new IllegalArgumentException(label + ": negative byte count " + bytes);
    }
    context.bind();
    CudaHostBuffer buffer = CudaHostBuffer.allocate(label, bytes, host, context);
    host.opened(buffer, label, bytes);
    return buffer;
  }

  @Override
  public synchronized Stream createStream(String label) {
    CudaStream stream = new CudaStream(label, context, scratch(label));
    streams.add(stream);
    return stream;
  }

  @Override
  public Event createEvent(String label) {
    CudaEvent event = new CudaEvent(label, context, liveEvents::remove);
    liveEvents.put(event, label);
    return event;
  }

  /** Grows the arena to hold {@code bytes} more without a driver call (the planner's budget). */
  @Override
  public void reserve(long bytes) {
    arena.reserve(bytes, context);
  }

  @Override
  public long allocatedBytes() {
    return arena.ledger().allocated();
  }

  @Override
  public long peakAllocatedBytes() {
    return arena.ledger().peak();
  }

  @Override
  public void resetPeakAllocatedBytes() {
    arena.ledger().resetPeak();
  }

  @Override
  public long allocatedHostBytes() {
    return host.allocated();
  }

  @Override
  public long hostAllocations() {
    return host.count();
  }

  /** What the driver reports free, plus what the arena holds unused. */
  @Override
  public long freeMemoryBytes() {
    context.bind();
    long[] free = new long[1];
    long[] total = new long[1];
    CudaCalls.check(cuMemGetInfo(free, total), "reading free device memory");
    return free[0] + arena.freeBytes();
  }

  // ---- copies ----------------------------------------------------------------------------------

  @Override
  public void copy(HostBuffer src, long srcByte, DeviceBuffer dst, long bytes, Stream stream) {
    checkRange(src.label(), srcByte, bytes, src.bytes());
    checkRange(dst.label(), 0, bytes, dst.bytes());
    if (bytes == 0) {
      return;
    }
    CudaStream s = on(stream);
    CudaCalls.check(
        cuMemcpyHtoDAsync(cuda(dst).pointer(), pinned(src).at(srcByte), bytes, s.handle()),
        () -> copyFailure(src.label(), dst.label(), bytes, s));
  }

  @Override
  public void copy(DeviceBuffer src, HostBuffer dst, long dstByte, long bytes, Stream stream) {
    checkRange(src.label(), 0, bytes, src.bytes());
    checkRange(dst.label(), dstByte, bytes, dst.bytes());
    if (bytes == 0) {
      return;
    }
    CudaStream s = on(stream);
    CudaCalls.check(
        cuMemcpyDtoHAsync(pinned(dst).at(dstByte), cuda(src).pointer(), bytes, s.handle()),
        () -> copyFailure(src.label(), dst.label(), bytes, s));
  }

  @Override
  public void copy(DeviceBuffer src, DeviceBuffer dst, Stream stream) {
    checkSameBytes(src, dst);
    if (src.bytes() == 0) {
      return;
    }
    CudaStream s = on(stream);
    CudaCalls.check(
        cuMemcpyDtoDAsync(cuda(dst).pointer(), cuda(src).pointer(), src.bytes(), s.handle()),
        () -> copyFailure(src.label(), dst.label(), src.bytes(), s));
  }

  private static String copyFailure(String from, String to, long bytes, CudaStream stream) {
    return "copying "
        + bytes
        + " bytes from "
        + from
        + " to "
        + to
        + " on '"
        + stream.label()
        + "'";
  }

  // ---- operations ------------------------------------------------------------------------------

  @Override
  public void run(Stream stream, Operation op) {
    operations.run(op, on(stream));
  }

  /**
   * Drains and destroys the streams, gives the device memory and the context back to the driver,
   * then reports anything still open. A leaked buffer's memory is gone with the arena (its owner
   * may still close it, which only settles the account); the context is never kept, so a context
   * broken by a fault does not outlive the backend that met it.
   */
  @Override
  public synchronized void close() {
    if (!released) {
      released = true;
      context.bind();
      try {
        streams.forEach(CudaStream::close);
        streams.clear();
        setup.close();
        if (convolutions != null) {
          convolutions.close();
        }
        gemm.close();
        kernels.close();
      } finally {
        arena.close();
        context.close();
      }
    }
    MemoryLedger.requireNothingOpen("cuda", arena.ledger(), host, liveEvents.values());
  }

  /**
   * Waits for the work enqueued on every stream so far, as cudaFree waits for the device: the arena
   * hands a freed block to the next allocation at once, and work still running on it would write
   * the new owner's memory (a run cancelled mid-step closes its buffers while streams still work).
   * Once the backend is closed the arena's memory is gone and there is nothing to wait for.
   */
  private void drainStreams() {
    List<CudaStream> open;
    synchronized (this) {
      if (released) {
        return;
      }
      open = new ArrayList<>(streams);
      if (setup != null) { // null while the constructor still builds the backend
        open.add(setup);
      }
    }
    open.forEach(CudaStream::drain);
  }

  private static CudaStream on(Stream stream) {
    return (CudaStream) stream;
  }

  private static CudaBuffer cuda(DeviceBuffer buffer) {
    return CudaOperations.cuda(buffer);
  }

  private static CudaHostBuffer pinned(HostBuffer buffer) {
    return (CudaHostBuffer) buffer;
  }
}
