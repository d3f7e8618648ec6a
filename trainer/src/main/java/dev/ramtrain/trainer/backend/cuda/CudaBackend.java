package dev.ramtrain.trainer.backend.cuda;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkConversion;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkCount;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkGemm;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkGemmStridedBatched;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkRange;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkSameBytes;
import static dev.ramtrain.trainer.backend.ArgumentChecks.convOut;
import static jcuda.driver.JCudaDriver.cuMemGetInfo;
import static jcuda.driver.JCudaDriver.cuMemHostAlloc;
import static jcuda.driver.JCudaDriver.cuMemcpyDtoDAsync;
import static jcuda.driver.JCudaDriver.cuMemcpyDtoHAsync;
import static jcuda.driver.JCudaDriver.cuMemcpyHtoDAsync;
import static jcuda.driver.JCudaDriver.cuMemsetD8Async;

import dev.ramtrain.trainer.backend.AdamWMath;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.BackendUnavailableException;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.GradClipMath;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.MemoryLedger;
import dev.ramtrain.trainer.backend.Stream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import jcuda.Pointer;
import jcuda.driver.JCudaDriver;
import org.apache.arrow.memory.util.MemoryUtil;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The CUDA backend: JCuda's driver API (no runtime API, so the driver's libcuda.so.1 is the only
 * CUDA library it needs), the project's kernels from one fatbin, and GEMM by cuBLAS or by its own
 * kernels. Device memory comes from an arena, host staging from pinned memory; every kernel and
 * copy is enqueued on the caller's stream and returns at once. Argument checks are the CPU
 * backend's ({@code ArgumentChecks}), so both reject the same calls with the same messages.
 */
public final class CudaBackend implements Backend {
  private static final Logger LOG = LoggerFactory.getLogger(CudaBackend.class);

  private final CudaProbe.Device device;
  private final CudaContext context;
  private final DeviceArena arena = new DeviceArena();
  private final MemoryLedger host = new MemoryLedger();
  private final CudaKernels kernels;
  private final GemmEngine gemm;
  private final CudaStream setup;
  private final List<CudaStream> streams = new ArrayList<>();
  private final Map<CudaEvent, String> liveEvents = new ConcurrentHashMap<>();
  private boolean released;

  /**
   * Opens the device {@code spec} names, or fails naming what is missing (driver, device, cuBLAS
   * when insisted on).
   */
  public static CudaBackend open(BackendSpec spec) {
    CudaProbe.Result probe = CudaProbe.result(spec.device());
    if (!probe.available()) {
      throw new BackendUnavailableException("backend cuda: " + probe.unavailable());
    }
    return new CudaBackend(probe.device(), spec.gemm());
  }

  private CudaBackend(CudaProbe.Device device, BackendSpec.Gemm gemmChoice) {
    this.device = device;
    this.context = new CudaContext(device.handle());
    CudaKernels loaded = null;
    GemmEngine engine = null;
    try {
      loaded = new CudaKernels(context);
      engine = chooseGemm(gemmChoice, loaded);
      this.setup = new CudaStream("cuda.setup", context, scratch("cuda.setup"));
    } catch (RuntimeException | LinkageError e) {
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
    try {
      OwnGemmCheck.verify(this, new KernelGemm(loaded), setup, device.describe());
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  private GemmEngine chooseGemm(BackendSpec.Gemm choice, CudaKernels loaded) {
    if (choice == BackendSpec.Gemm.KERNELS) {
      LOG.info(
          "cuda backend on {}: GEMM by {} (ramtrain.cuda.gemm=kernels)",
          device.describe(),
          "ramtrain's own kernels");
      return new KernelGemm(loaded);
    }
    try {
      GemmEngine cublas = new CublasGemm(context, new KernelGemm(loaded));
      LOG.info("cuda backend on {}: GEMM by {}", device.describe(), cublas.describe());
      return cublas;
    } catch (LinkageError | RuntimeException e) {
      String why = "libcublas.so.12 could not be used (" + CudaProbe.whyNotLoaded(e) + ")";
      if (choice == BackendSpec.Gemm.CUBLAS) {
        throw new BackendUnavailableException("backend cuda: ramtrain.cuda.gemm=cublas but " + why);
      }
      LOG.info("cuda backend on {}: GEMM by ramtrain's own kernels, as {}", device.describe(), why);
      return new KernelGemm(loaded);
    }
  }

  @Override
  public String name() {
    return "cuda";
  }

  /** The device and who multiplies matrices, for logs and benchmarks. */
  public String describe() {
    return device.describe() + ", GEMM by " + gemm.describe();
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

  /** A device buffer of {@code count} F32 that is the backend's own (a stream's scratch). */
  private CudaBuffer scratch(String streamLabel) {
    return new CudaBuffer(
        "stream '" + streamLabel + "' scratch",
        DType.F32,
        256,
        arena.take("stream '" + streamLabel + "' scratch", 1024, context),
        0,
        true);
  }

  @Override
  public HostBuffer allocateHost(String label, long bytes) {
    if (bytes < 0) {
      throw new IllegalArgumentException(label + ": negative byte count " + bytes);
    }
    context.bind();
    Pointer memory = new Pointer();
    CudaCalls.check(
        cuMemHostAlloc(memory, Math.max(1, bytes), JCudaDriver.CU_MEMHOSTALLOC_PORTABLE),
        () -> "allocating " + bytes + " bytes of pinned host memory for " + label);
    CudaHostBuffer buffer = new CudaHostBuffer(label, bytes, memory, host, context);
    MemoryUtil.setMemory(buffer.address(), Math.max(1, bytes), (byte) 0);
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

  // ---- math ------------------------------------------------------------------------------------

  @Override
  public void gemm(
      Stream stream,
      boolean transA,
      boolean transB,
      int m,
      int n,
      int k,
      float alpha,
      DeviceBuffer a,
      int lda,
      DeviceBuffer b,
      int ldb,
      float beta,
      DeviceBuffer c,
      int ldc) {
    checkGemm(transA, transB, m, n, k, a, lda, b, ldb, c, ldc);
    CudaBuffer ca = floatOrBf16(a);
    CudaBuffer cb = floatOrBf16(b);
    CudaBuffer cc = cuda(c);
    cc.requireType(DType.F32);
    gemm.gemm(on(stream), transA, transB, m, n, k, alpha, ca, lda, cb, ldb, beta, cc, ldc);
  }

  @Override
  public void gemmStridedBatched(
      Stream stream,
      boolean transA,
      boolean transB,
      int m,
      int n,
      int k,
      float alpha,
      DeviceBuffer a,
      int lda,
      long strideA,
      DeviceBuffer b,
      int ldb,
      long strideB,
      float beta,
      DeviceBuffer c,
      int ldc,
      long strideC,
      int count) {
    checkGemmStridedBatched(
        transA, transB, m, n, k, a, lda, strideA, b, ldb, strideB, c, ldc, strideC, count);
    gemm.gemmStridedBatched(
        on(stream),
        transA,
        transB,
        m,
        n,
        k,
        alpha,
        floatOrBf16(a),
        lda,
        strideA,
        floatOrBf16(b),
        ldb,
        strideB,
        beta,
        f32(c),
        ldc,
        strideC,
        count);
  }

  @Override
  public void fill(Stream stream, DeviceBuffer x, float value) {
    kernels.launchOver(
        Kernel.FILL,
        on(stream),
        x.count(),
        new KernelArgs().buffer(f32(x)).i64(x.count()).f32(value));
  }

  @Override
  public void convert(Stream stream, DeviceBuffer src, DeviceBuffer dst) {
    Kernel kernel = checkConversion(src, dst) ? Kernel.TO_BF16 : Kernel.FROM_BF16;
    kernels.launchOver(
        kernel,
        on(stream),
        src.count(),
        new KernelArgs().buffer(cuda(src)).buffer(cuda(dst)).i64(src.count()));
  }

  @Override
  public void addBias(Stream stream, DeviceBuffer y, DeviceBuffer bias, int rows, int cols) {
    checkCount(y, (long) rows * cols);
    checkCount(bias, cols);
    kernels.launchOver(
        Kernel.ADD_BIAS,
        on(stream),
        (long) rows * cols,
        new KernelArgs().buffer(f32(y)).buffer(f32(bias)).i32(rows).i32(cols));
  }

  @Override
  public void sumRows(
      Stream stream, DeviceBuffer x, DeviceBuffer out, int rows, int cols, float beta) {
    checkCount(x, (long) rows * cols);
    checkCount(out, cols);
    kernels.launchOver(
        Kernel.SUM_ROWS,
        on(stream),
        cols,
        new KernelArgs().buffer(f32(x)).buffer(f32(out)).i32(rows).i32(cols).f32(beta));
  }

  @Override
  public void relu(Stream stream, DeviceBuffer x, DeviceBuffer y) {
    checkCount(y, x.count());
    unary(Kernel.RELU, stream, x, y);
  }

  @Override
  public void reluBackward(Stream stream, DeviceBuffer x, DeviceBuffer dy, DeviceBuffer dx) {
    checkCount(dy, x.count());
    checkCount(dx, x.count());
    binary(Kernel.RELU_BACKWARD, stream, x, dy, dx);
  }

  @Override
  public void gelu(Stream stream, DeviceBuffer x, DeviceBuffer y) {
    checkCount(y, x.count());
    unary(Kernel.GELU, stream, x, y);
  }

  @Override
  public void geluBackward(Stream stream, DeviceBuffer x, DeviceBuffer dy, DeviceBuffer dx) {
    checkCount(dy, x.count());
    checkCount(dx, x.count());
    binary(Kernel.GELU_BACKWARD, stream, x, dy, dx);
  }

  private void unary(Kernel kernel, Stream stream, DeviceBuffer x, DeviceBuffer y) {
    kernels.launchOver(
        kernel,
        on(stream),
        x.count(),
        new KernelArgs().buffer(f32(x)).buffer(f32(y)).i64(x.count()));
  }

  /** An elementwise kernel of two inputs and one output, all of {@code out}'s length. */
  private void binary(
      Kernel kernel, Stream stream, DeviceBuffer a, DeviceBuffer b, DeviceBuffer out) {
    kernels.launchOver(
        kernel,
        on(stream),
        out.count(),
        new KernelArgs().buffer(f32(a)).buffer(f32(b)).buffer(f32(out)).i64(out.count()));
  }

  @Override
  public void softmaxCrossEntropy(
      Stream stream,
      DeviceBuffer logits,
      DeviceBuffer labels,
      int rows,
      int classes,
      float smoothing,
      DeviceBuffer loss,
      DeviceBuffer dlogits) {
    checkCount(logits, (long) rows * classes);
    checkCount(labels, rows);
    checkCount(loss, rows);
    checkCount(dlogits, (long) rows * classes);
    CudaBuffer cy = cuda(labels);
    cy.requireType(DType.I32);
    CudaStream s = on(stream);
    kernels.launchOver(
        Kernel.SOFTMAX_XENT,
        s,
        rows,
        new KernelArgs()
            .buffer(f32(logits))
            .buffer(cy)
            .i32(rows)
            .i32(classes)
            .f32(smoothing)
            .buffer(f32(loss))
            .buffer(f32(dlogits))
            .pointer(s.statusWord()));
  }

  @Override
  public void normalizeImages(
      Stream stream,
      DeviceBuffer u8,
      int n,
      int h,
      int w,
      int c,
      float[] mean,
      float[] std,
      DeviceBuffer out) {
    if (mean.length != c || std.length != c) {
      throw new IllegalArgumentException("mean and std need " + c + " values, one per channel");
    }
    if (c > 4) {
      throw new IllegalArgumentException(
          "the cuda backend normalizes images of up to 4 channels, got " + c);
    }
    checkCount(u8, (long) n * h * w * c);
    checkCount(out, (long) n * h * w * c);
    CudaBuffer cu = cuda(u8);
    cu.requireType(DType.U8);
    // The CPU backend's per-channel constants, computed the same way: x * scale - shift.
    float[] affine = new float[8];
    for (int ch = 0; ch < c; ch++) {
      affine[ch] = 1f / (255f * std[ch]);
      affine[4 + ch] = mean[ch] / std[ch];
    }
    kernels.launchOver(
        Kernel.NORMALIZE_IMAGES,
        on(stream),
        (long) n * h * w * c,
        new KernelArgs().buffer(cu).i32(n).i32(h).i32(w).i32(c).floats(affine).buffer(f32(out)));
  }

  @Override
  public void sgdStep(
      Stream stream,
      DeviceBuffer param,
      DeviceBuffer grad,
      DeviceBuffer momentum,
      float lr,
      float mu,
      float weightDecay,
      boolean nesterov) {
    checkCount(grad, param.count());
    checkCount(momentum, param.count());
    kernels.launchOver(
        Kernel.SGD_STEP,
        on(stream),
        param.count(),
        new KernelArgs()
            .buffer(f32(param))
            .buffer(f32(grad))
            .buffer(f32(momentum))
            .i64(param.count())
            .f32(lr)
            .f32(mu)
            .f32(weightDecay)
            .i32(nesterov));
  }

  @Override
  public void adamwStep(
      Stream stream,
      DeviceBuffer param,
      DeviceBuffer grad,
      DeviceBuffer m,
      DeviceBuffer v,
      float lr,
      float beta1,
      float beta2,
      float eps,
      float weightDecay,
      int step) {
    if (step < 1) {
      throw new IllegalArgumentException("AdamW steps count from 1, got " + step);
    }
    checkCount(grad, param.count());
    checkCount(m, param.count());
    checkCount(v, param.count());
    AdamWMath math = AdamWMath.of(lr, beta1, beta2, eps, weightDecay, step);
    kernels.launchOver(
        Kernel.ADAMW_STEP,
        on(stream),
        param.count(),
        new KernelArgs()
            .buffer(f32(param))
            .buffer(f32(grad))
            .buffer(f32(m))
            .buffer(f32(v))
            .i64(param.count())
            .f32(math.beta1())
            .f32(math.beta2())
            .f32(math.eps())
            .f32(math.decay())
            .f32(math.stepSize())
            .f32(math.sqrtCorrection()));
  }

  @Override
  public void im2col(
      Stream stream,
      DeviceBuffer x,
      int n,
      int c,
      int h,
      int w,
      int kh,
      int kw,
      int stride,
      int pad,
      DeviceBuffer cols) {
    int oh = convOut(h, kh, stride, pad);
    int ow = convOut(w, kw, stride, pad);
    checkCount(x, (long) n * c * h * w);
    checkCount(cols, (long) n * oh * ow * c * kh * kw);
    kernels.launchOver(
        Kernel.IM2COL,
        on(stream),
        cols.count(),
        convArgs(f32(x), n, c, h, w, kh, kw, stride, pad, oh, ow).buffer(f32(cols)));
  }

  @Override
  public void col2im(
      Stream stream,
      DeviceBuffer cols,
      int n,
      int c,
      int h,
      int w,
      int kh,
      int kw,
      int stride,
      int pad,
      DeviceBuffer dx) {
    int oh = convOut(h, kh, stride, pad);
    int ow = convOut(w, kw, stride, pad);
    checkCount(cols, (long) n * oh * ow * c * kh * kw);
    checkCount(dx, (long) n * c * h * w);
    kernels.launchOver(
        Kernel.COL2IM,
        on(stream),
        dx.count(),
        convArgs(f32(cols), n, c, h, w, kh, kw, stride, pad, oh, ow).buffer(f32(dx)));
  }

  private static KernelArgs convArgs(
      CudaBuffer in,
      int n,
      int c,
      int h,
      int w,
      int kh,
      int kw,
      int stride,
      int pad,
      int oh,
      int ow) {
    return new KernelArgs()
        .buffer(in)
        .i32(n)
        .i32(c)
        .i32(h)
        .i32(w)
        .i32(kh)
        .i32(kw)
        .i32(stride)
        .i32(pad)
        .i32(oh)
        .i32(ow);
  }

  @Override
  public void addChannelBias(
      Stream stream, DeviceBuffer y, DeviceBuffer bias, int n, int c, int hw) {
    checkCount(y, (long) n * c * hw);
    checkCount(bias, c);
    kernels.launchOver(
        Kernel.ADD_CHANNEL_BIAS,
        on(stream),
        y.count(),
        new KernelArgs().buffer(f32(y)).buffer(f32(bias)).i32(n).i32(c).i32(hw));
  }

  @Override
  public void sumChannels(Stream stream, DeviceBuffer dy, DeviceBuffer out, int n, int c, int hw) {
    checkCount(dy, (long) n * c * hw);
    checkCount(out, c);
    perChannel(
        Kernel.SUM_CHANNELS,
        stream,
        c,
        new KernelArgs().buffer(f32(dy)).buffer(f32(out)).i32(n).i32(c).i32(hw));
  }

  /** A block of CudaKernels.BLOCK threads per channel (the block-reduction kernels). */
  private void perChannel(Kernel kernel, Stream stream, int channels, KernelArgs args) {
    if (channels > 0) {
      kernels.launch(kernel, on(stream), channels, 1, 1, CudaKernels.BLOCK, 1, args);
    }
  }

  @Override
  public void maxPool(
      Stream stream,
      DeviceBuffer x,
      int n,
      int c,
      int h,
      int w,
      int k,
      int stride,
      DeviceBuffer y,
      DeviceBuffer argmax) {
    int oh = convOut(h, k, stride, 0);
    int ow = convOut(w, k, stride, 0);
    checkCount(x, (long) n * c * h * w);
    checkCount(y, (long) n * c * oh * ow);
    checkCount(argmax, (long) n * c * oh * ow);
    CudaBuffer ca = cuda(argmax);
    ca.requireType(DType.I32);
    kernels.launchOver(
        Kernel.MAX_POOL,
        on(stream),
        y.count(),
        new KernelArgs()
            .buffer(f32(x))
            .i32(n)
            .i32(c)
            .i32(h)
            .i32(w)
            .i32(k)
            .i32(stride)
            .i32(oh)
            .i32(ow)
            .buffer(f32(y))
            .buffer(ca));
  }

  @Override
  public void maxPoolBackward(
      Stream stream,
      DeviceBuffer dy,
      DeviceBuffer argmax,
      int n,
      int c,
      int h,
      int w,
      int oh,
      int ow,
      DeviceBuffer dx) {
    checkCount(dy, (long) n * c * oh * ow);
    checkCount(argmax, (long) n * c * oh * ow);
    checkCount(dx, (long) n * c * h * w);
    CudaBuffer ca = cuda(argmax);
    ca.requireType(DType.I32);
    kernels.launchOver(
        Kernel.MAX_POOL_BACKWARD,
        on(stream),
        (long) n * c,
        new KernelArgs()
            .buffer(f32(dy))
            .buffer(ca)
            .i32(n * c)
            .i32(h * w)
            .i32(oh * ow)
            .buffer(f32(dx)));
  }

  /**
   * Three launches and no host round-trip: chunk sums (GradClipMath's chunks) into the stream's
   * scratch, the norm and factor from them in order, then the scaling, which reads the factor on
   * the device.
   */
  @Override
  public void clipGradNorm(Stream stream, DeviceBuffer grads, float maxNorm, DeviceBuffer norm) {
    checkCount(norm, 1);
    CudaBuffer g = f32(grads);
    CudaBuffer out = f32(norm);
    CudaStream s = on(stream);
    int n = Math.toIntExact(grads.count());
    int chunks = GradClipMath.chunks(n);
    long chunkSize = (n + chunks - 1) / chunks;
    var partials = s.scratch().pointer();
    var coef = s.scratch().pointer().withByteOffset(8L * CudaStream.CLIP_CHUNKS);
    if (n > 0) {
      kernels.launch(
          Kernel.CLIP_CHUNK_SQUARES,
          s,
          chunks,
          1,
          1,
          CudaKernels.BLOCK,
          1,
          new KernelArgs().buffer(g).i64(n).i64(chunkSize).pointer(partials));
    } else {
      fill(stream, s.scratch().view(0, 2 * CudaStream.CLIP_CHUNKS), 0f);
    }
    kernels.launch(
        Kernel.CLIP_NORM,
        s,
        1,
        1,
        1,
        1,
        1,
        new KernelArgs().pointer(partials).i32(chunks).f32(maxNorm).buffer(out).pointer(coef));
    kernels.launchOver(Kernel.CLIP_SCALE, s, n, new KernelArgs().buffer(g).i64(n).pointer(coef));
  }

  @Override
  public void add(Stream stream, DeviceBuffer a, DeviceBuffer b, DeviceBuffer out) {
    checkCount(a, out.count());
    checkCount(b, out.count());
    binary(Kernel.ADD, stream, a, b, out);
  }

  @Override
  public void multiply(Stream stream, DeviceBuffer a, DeviceBuffer b, DeviceBuffer out) {
    checkCount(a, out.count());
    checkCount(b, out.count());
    binary(Kernel.MULTIPLY, stream, a, b, out);
  }

  @Override
  public void dropoutMask(Stream stream, float p, long seed, DeviceBuffer mask) {
    if (!(p >= 0 && p < 1)) {
      throw new IllegalArgumentException("dropout probability must be in [0, 1), got " + p);
    }
    float keep = 1 / (1 - p);
    kernels.launchOver(
        Kernel.DROPOUT_MASK,
        on(stream),
        mask.count(),
        new KernelArgs().f32(p).f32(keep).i64(seed).buffer(f32(mask)).i64(mask.count()));
  }

  @Override
  public void batchNormTrain(
      Stream stream,
      DeviceBuffer x,
      int n,
      int c,
      int hw,
      DeviceBuffer gamma,
      DeviceBuffer beta,
      float eps,
      float momentum,
      DeviceBuffer runningMean,
      DeviceBuffer runningVar,
      DeviceBuffer y,
      DeviceBuffer savedMean,
      DeviceBuffer savedInvStd) {
    checkCount(x, (long) n * c * hw);
    checkCount(y, (long) n * c * hw);
    for (DeviceBuffer perChannel :
        List.of(gamma, beta, runningMean, runningVar, savedMean, savedInvStd)) {
      checkCount(perChannel, c);
    }
    perChannel(
        Kernel.BATCHNORM_TRAIN,
        stream,
        c,
        new KernelArgs()
            .buffer(f32(x))
            .i32(n)
            .i32(c)
            .i32(hw)
            .buffer(f32(gamma))
            .buffer(f32(beta))
            .f32(eps)
            .f32(momentum)
            .buffer(f32(runningMean))
            .buffer(f32(runningVar))
            .buffer(f32(y))
            .buffer(f32(savedMean))
            .buffer(f32(savedInvStd)));
  }

  @Override
  public void batchNormInference(
      Stream stream,
      DeviceBuffer x,
      int n,
      int c,
      int hw,
      DeviceBuffer gamma,
      DeviceBuffer beta,
      float eps,
      DeviceBuffer runningMean,
      DeviceBuffer runningVar,
      DeviceBuffer y) {
    checkCount(x, (long) n * c * hw);
    checkCount(y, (long) n * c * hw);
    for (DeviceBuffer perChannel : List.of(gamma, beta, runningMean, runningVar)) {
      checkCount(perChannel, c);
    }
    kernels.launchOver(
        Kernel.BATCHNORM_INFERENCE,
        on(stream),
        x.count(),
        new KernelArgs()
            .buffer(f32(x))
            .i32(n)
            .i32(c)
            .i32(hw)
            .buffer(f32(gamma))
            .buffer(f32(beta))
            .f32(eps)
            .buffer(f32(runningMean))
            .buffer(f32(runningVar))
            .buffer(f32(y)));
  }

  @Override
  public void batchNormBackward(
      Stream stream,
      DeviceBuffer x,
      DeviceBuffer dy,
      int n,
      int c,
      int hw,
      DeviceBuffer gamma,
      DeviceBuffer savedMean,
      DeviceBuffer savedInvStd,
      DeviceBuffer dgamma,
      DeviceBuffer dbeta,
      DeviceBuffer dx) {
    checkCount(x, (long) n * c * hw);
    checkCount(dy, (long) n * c * hw);
    checkCount(dx, (long) n * c * hw);
    for (DeviceBuffer perChannel : List.of(gamma, savedMean, savedInvStd, dgamma, dbeta)) {
      checkCount(perChannel, c);
    }
    perChannel(
        Kernel.BATCHNORM_BACKWARD,
        stream,
        c,
        new KernelArgs()
            .buffer(f32(x))
            .buffer(f32(dy))
            .i32(n)
            .i32(c)
            .i32(hw)
            .buffer(f32(gamma))
            .buffer(f32(savedMean))
            .buffer(f32(savedInvStd))
            .buffer(f32(dgamma))
            .buffer(f32(dbeta))
            .buffer(f32(dx)));
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
        gemm.close();
        kernels.close();
      } finally {
        arena.close();
        context.close();
      }
    }
    MemoryLedger.requireNothingOpen("cuda", arena.ledger(), host, liveEvents.values());
  }

  private static CudaStream on(Stream stream) {
    return (CudaStream) stream;
  }

  /** The CUDA buffer behind {@code buffer}, checked to be open now. */
  private static CudaBuffer cuda(DeviceBuffer buffer) {
    CudaBuffer b = (CudaBuffer) buffer;
    b.requireLive();
    return b;
  }

  private static CudaBuffer f32(DeviceBuffer buffer) {
    CudaBuffer b = (CudaBuffer) buffer;
    b.requireType(DType.F32);
    return b;
  }

  private static CudaBuffer floatOrBf16(DeviceBuffer buffer) {
    CudaBuffer b = cuda(buffer);
    if (b.dtype() != DType.F32 && b.dtype() != DType.BF16) {
      throw new IllegalArgumentException(
          b.label() + " is " + b.dtype() + ", expected F32 or BF16 for a GEMM operand");
    }
    return b;
  }

  private static CudaHostBuffer pinned(HostBuffer buffer) {
    return (CudaHostBuffer) buffer;
  }
}
