package dev.ramtrain.trainer.backend.cpu;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkConversion;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkCount;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkGemm;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkGemmStridedBatched;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkRange;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkSameBytes;
import static dev.ramtrain.trainer.backend.ArgumentChecks.convOut;
import static org.bytedeco.openblas.global.openblas_nolapack.CblasNoTrans;
import static org.bytedeco.openblas.global.openblas_nolapack.CblasRowMajor;
import static org.bytedeco.openblas.global.openblas_nolapack.CblasTrans;
import static org.bytedeco.openblas.global.openblas_nolapack.cblas_sgemm;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.HostMemory;
import dev.ramtrain.trainer.backend.MemoryLedger;
import dev.ramtrain.trainer.backend.Stream;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ForkJoinPool;
import org.apache.arrow.memory.util.MemoryUtil;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.openblas.global.openblas_nolapack;

/**
 * The CPU backend: "device" memory is native host memory, streams are single-thread executors, GEMM
 * is native OpenBLAS and the other kernels are Java loops split across cores. It is the reference
 * the CUDA backend is checked against, and what runs where there is no GPU.
 */
public final class CpuBackend implements Backend {
  private final CpuMemory device = new CpuMemory();
  private final CpuMemory host = new CpuMemory();
  private final List<CpuStream> streams = new ArrayList<>();
  private final Map<CpuEvent, String> liveEvents = new ConcurrentHashMap<>();
  private final ForkJoinPool pool;
  private final CpuKernels kernels;
  private final SimulatedBus bus;

  /** A backend using {@code threads} cores for kernels and GEMM. */
  public CpuBackend(int threads) {
    this(threads, SimulatedBus.NONE);
  }

  /**
   * A backend whose host-device copies also take the time {@code bus} says (an idle wait, not
   * work): how tests check that stream ordering rather than timing makes results right, and how
   * benchmarks show overlap as a GPU's bus would.
   */
  public CpuBackend(int threads, SimulatedBus bus) {
    this.bus = bus;
    if (threads < 1) {
      throw new IllegalArgumentException("threads must be >= 1, got " + threads);
    }
    this.pool = new ForkJoinPool(threads);
    this.kernels = new CpuKernels(new Parallel(pool));
    openblas_nolapack.blas_set_num_threads(threads);
  }

  @Override
  public String name() {
    return "cpu";
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

  @Override
  public synchronized Stream createStream(String label) {
    CpuStream stream = new CpuStream(label);
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

  /** The CPU backend's device is host memory: what the host can still give. */
  @Override
  public long freeMemoryBytes() {
    return HostMemory.availableBytes();
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
    CpuBuffer ca = cpu(a);
    CpuBuffer cb = cpu(b);
    CpuBuffer cc = cpu(c);
    cc.requireType(DType.F32);
    on(stream)
        .enqueue(
            () -> {
              // bf16 operands are widened exactly to fp32 scratch, then multiplied in fp32: the
              // result equals an fp32-accumulating bf16 GEMM up to summation order.
              try (FloatPointer wideA = widened(ca);
                  FloatPointer wideB = widened(cb)) {
                cblas_sgemm(
                    CblasRowMajor,
                    transA ? CblasTrans : CblasNoTrans,
                    transB ? CblasTrans : CblasNoTrans,
                    m,
                    n,
                    k,
                    alpha,
                    wideA != null ? wideA : ca.floatPointer(),
                    lda,
                    wideB != null ? wideB : cb.floatPointer(),
                    ldb,
                    beta,
                    cc.floatPointer(),
                    ldc);
              }
            });
  }

  /** An fp32 copy of a BF16 buffer (the caller closes it), or null for an F32 buffer. */
  private FloatPointer widened(CpuBuffer x) {
    if (x.dtype() != DType.BF16) {
      return null;
    }
    FloatPointer wide = new FloatPointer(Math.max(1, x.count()));
    kernels.fromBf16(
        x.shorts(), wide.asByteBuffer().order(ByteOrder.nativeOrder()).asFloatBuffer());
    return wide;
  }

  @Override
  public void convert(Stream stream, DeviceBuffer src, DeviceBuffer dst) {
    boolean narrowing = checkConversion(src, dst);
    CpuBuffer s = cpu(src);
    CpuBuffer d = cpu(dst);
    if (narrowing) {
      on(stream).enqueue(() -> kernels.toBf16(s.floats(), d.shorts()));
    } else {
      on(stream).enqueue(() -> kernels.fromBf16(s.shorts(), d.floats()));
    }
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
    CpuBuffer ca = cpu(a);
    CpuBuffer cb = cpu(b);
    CpuBuffer cc = cpu(c);
    BatchedGemm g =
        new BatchedGemm(
            transA ? CblasTrans : CblasNoTrans,
            transB ? CblasTrans : CblasNoTrans,
            m,
            n,
            k,
            alpha,
            lda,
            strideA,
            ldb,
            strideB,
            beta,
            ldc,
            strideC,
            count);
    cc.requireType(DType.F32);
    on(stream)
        .enqueue(
            () -> {
              try (FloatPointer wideA = widened(ca);
                  FloatPointer wideB = widened(cb)) {
                g.run(
                    wideA != null ? wideA : ca.floatPointer(),
                    wideB != null ? wideB : cb.floatPointer(),
                    cc.floatPointer());
              }
            });
  }

  @Override
  public void fill(Stream stream, DeviceBuffer x, float value) {
    CpuBuffer cx = cpu(x);
    on(stream).enqueue(() -> kernels.fill(cx.floats(), value));
  }

  @Override
  public void addBias(Stream stream, DeviceBuffer y, DeviceBuffer bias, int rows, int cols) {
    checkCount(y, (long) rows * cols);
    checkCount(bias, cols);
    CpuBuffer cy = cpu(y);
    CpuBuffer cbias = cpu(bias);
    on(stream).enqueue(() -> kernels.addBias(cy.floats(), cbias.floats(), rows, cols));
  }

  @Override
  public void sumRows(
      Stream stream, DeviceBuffer x, DeviceBuffer out, int rows, int cols, float beta) {
    checkCount(x, (long) rows * cols);
    checkCount(out, cols);
    CpuBuffer cx = cpu(x);
    CpuBuffer cout = cpu(out);
    on(stream).enqueue(() -> kernels.sumRows(cx.floats(), cout.floats(), rows, cols, beta));
  }

  @Override
  public void relu(Stream stream, DeviceBuffer x, DeviceBuffer y) {
    checkCount(y, x.count());
    CpuBuffer cx = cpu(x);
    CpuBuffer cy = cpu(y);
    on(stream).enqueue(() -> kernels.relu(cx.floats(), cy.floats()));
  }

  @Override
  public void reluBackward(Stream stream, DeviceBuffer x, DeviceBuffer dy, DeviceBuffer dx) {
    checkCount(dy, x.count());
    checkCount(dx, x.count());
    CpuBuffer cx = cpu(x);
    CpuBuffer cdy = cpu(dy);
    CpuBuffer cdx = cpu(dx);
    on(stream).enqueue(() -> kernels.reluBackward(cx.floats(), cdy.floats(), cdx.floats()));
  }

  @Override
  public void gelu(Stream stream, DeviceBuffer x, DeviceBuffer y) {
    checkCount(y, x.count());
    CpuBuffer cx = cpu(x);
    CpuBuffer cy = cpu(y);
    on(stream).enqueue(() -> kernels.gelu(cx.floats(), cy.floats()));
  }

  @Override
  public void geluBackward(Stream stream, DeviceBuffer x, DeviceBuffer dy, DeviceBuffer dx) {
    checkCount(dy, x.count());
    checkCount(dx, x.count());
    CpuBuffer cx = cpu(x);
    CpuBuffer cdy = cpu(dy);
    CpuBuffer cdx = cpu(dx);
    on(stream).enqueue(() -> kernels.geluBackward(cx.floats(), cdy.floats(), cdx.floats()));
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
    CpuBuffer cl = cpu(logits);
    CpuBuffer cy = cpu(labels);
    CpuBuffer closs = cpu(loss);
    CpuBuffer cd = cpu(dlogits);
    on(stream)
        .enqueue(
            () ->
                kernels.softmaxCrossEntropy(
                    cl.floats(), cy.ints(), rows, classes, smoothing, closs.floats(), cd.floats()));
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
    checkCount(u8, (long) n * h * w * c);
    checkCount(out, (long) n * h * w * c);
    CpuBuffer cu = cpu(u8);
    cu.requireType(DType.U8);
    CpuBuffer co = cpu(out);
    float[] m = mean.clone();
    float[] s = std.clone();
    on(stream)
        .enqueue(() -> kernels.normalizeImages(cu.byteBuffer(), n, h, w, c, m, s, co.floats()));
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
    CpuBuffer p = cpu(param);
    CpuBuffer g = cpu(grad);
    CpuBuffer b = cpu(momentum);
    on(stream)
        .enqueue(
            () ->
                kernels.sgdStep(p.floats(), g.floats(), b.floats(), lr, mu, weightDecay, nesterov));
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
    CpuBuffer p = cpu(param);
    CpuBuffer g = cpu(grad);
    CpuBuffer cm = cpu(m);
    CpuBuffer cv = cpu(v);
    on(stream)
        .enqueue(
            () ->
                kernels.adamwStep(
                    p.floats(),
                    g.floats(),
                    cm.floats(),
                    cv.floats(),
                    lr,
                    beta1,
                    beta2,
                    eps,
                    weightDecay,
                    step));
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
    CpuBuffer cx = cpu(x);
    CpuBuffer cc = cpu(cols);
    on(stream)
        .enqueue(() -> kernels.im2col(cx.floats(), n, c, h, w, kh, kw, stride, pad, cc.floats()));
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
    CpuBuffer cc = cpu(cols);
    CpuBuffer cd = cpu(dx);
    on(stream)
        .enqueue(() -> kernels.col2im(cc.floats(), n, c, h, w, kh, kw, stride, pad, cd.floats()));
  }

  @Override
  public void addChannelBias(
      Stream stream, DeviceBuffer y, DeviceBuffer bias, int n, int c, int hw) {
    checkCount(y, (long) n * c * hw);
    checkCount(bias, c);
    CpuBuffer cy = cpu(y);
    CpuBuffer cb = cpu(bias);
    on(stream).enqueue(() -> kernels.addChannelBias(cy.floats(), cb.floats(), n, c, hw));
  }

  @Override
  public void sumChannels(Stream stream, DeviceBuffer dy, DeviceBuffer out, int n, int c, int hw) {
    checkCount(dy, (long) n * c * hw);
    checkCount(out, c);
    CpuBuffer cd = cpu(dy);
    CpuBuffer co = cpu(out);
    on(stream).enqueue(() -> kernels.sumChannels(cd.floats(), co.floats(), n, c, hw));
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
    CpuBuffer cx = cpu(x);
    CpuBuffer cy = cpu(y);
    CpuBuffer ca = cpu(argmax);
    ca.requireType(DType.I32);
    on(stream)
        .enqueue(() -> kernels.maxPool(cx.floats(), n, c, h, w, k, stride, cy.floats(), ca.ints()));
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
    CpuBuffer cdy = cpu(dy);
    CpuBuffer ca = cpu(argmax);
    CpuBuffer cdx = cpu(dx);
    on(stream)
        .enqueue(
            () ->
                kernels.maxPoolBackward(cdy.floats(), ca.ints(), n, c, h, w, oh, ow, cdx.floats()));
  }

  @Override
  public void clipGradNorm(Stream stream, DeviceBuffer grads, float maxNorm, DeviceBuffer norm) {
    checkCount(norm, 1);
    CpuBuffer g = cpu(grads);
    CpuBuffer n = cpu(norm);
    on(stream).enqueue(() -> kernels.clipGradNorm(g.floats(), maxNorm, n.floats()));
  }

  @Override
  public void add(Stream stream, DeviceBuffer a, DeviceBuffer b, DeviceBuffer out) {
    checkCount(a, out.count());
    checkCount(b, out.count());
    CpuBuffer ca = cpu(a);
    CpuBuffer cb = cpu(b);
    CpuBuffer co = cpu(out);
    on(stream).enqueue(() -> kernels.add(ca.floats(), cb.floats(), co.floats()));
  }

  @Override
  public void multiply(Stream stream, DeviceBuffer a, DeviceBuffer b, DeviceBuffer out) {
    checkCount(a, out.count());
    checkCount(b, out.count());
    CpuBuffer ca = cpu(a);
    CpuBuffer cb = cpu(b);
    CpuBuffer co = cpu(out);
    on(stream).enqueue(() -> kernels.multiply(ca.floats(), cb.floats(), co.floats()));
  }

  @Override
  public void dropoutMask(Stream stream, float p, long seed, DeviceBuffer mask) {
    if (!(p >= 0 && p < 1)) {
      throw new IllegalArgumentException("dropout probability must be in [0, 1), got " + p);
    }
    CpuBuffer cm = cpu(mask);
    on(stream).enqueue(() -> kernels.dropoutMask(p, seed, cm.floats()));
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
    CpuBuffer cx = cpu(x);
    CpuBuffer cg = cpu(gamma);
    CpuBuffer cb = cpu(beta);
    CpuBuffer rm = cpu(runningMean);
    CpuBuffer rv = cpu(runningVar);
    CpuBuffer cy = cpu(y);
    CpuBuffer sm = cpu(savedMean);
    CpuBuffer si = cpu(savedInvStd);
    on(stream)
        .enqueue(
            () ->
                kernels.batchNormTrain(
                    cx.floats(),
                    n,
                    c,
                    hw,
                    cg.floats(),
                    cb.floats(),
                    eps,
                    momentum,
                    rm.floats(),
                    rv.floats(),
                    cy.floats(),
                    sm.floats(),
                    si.floats()));
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
    CpuBuffer cx = cpu(x);
    CpuBuffer cg = cpu(gamma);
    CpuBuffer cb = cpu(beta);
    CpuBuffer rm = cpu(runningMean);
    CpuBuffer rv = cpu(runningVar);
    CpuBuffer cy = cpu(y);
    on(stream)
        .enqueue(
            () ->
                kernels.batchNormInference(
                    cx.floats(),
                    n,
                    c,
                    hw,
                    cg.floats(),
                    cb.floats(),
                    eps,
                    rm.floats(),
                    rv.floats(),
                    cy.floats()));
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
    CpuBuffer cx = cpu(x);
    CpuBuffer cdy = cpu(dy);
    CpuBuffer cg = cpu(gamma);
    CpuBuffer sm = cpu(savedMean);
    CpuBuffer si = cpu(savedInvStd);
    CpuBuffer dg = cpu(dgamma);
    CpuBuffer db = cpu(dbeta);
    CpuBuffer cdx = cpu(dx);
    on(stream)
        .enqueue(
            () ->
                kernels.batchNormBackward(
                    cx.floats(),
                    cdy.floats(),
                    n,
                    c,
                    hw,
                    cg.floats(),
                    sm.floats(),
                    si.floats(),
                    dg.floats(),
                    db.floats(),
                    cdx.floats()));
  }

  @Override
  public synchronized void close() {
    streams.forEach(CpuStream::close);
    streams.clear();
    pool.shutdown();
    MemoryLedger.requireNothingOpen("cpu", device.ledger(), host.ledger(), liveEvents.values());
  }

  private static CpuStream on(Stream stream) {
    return (CpuStream) stream;
  }

  /** The CPU buffer behind {@code buffer}, checked to be open now, in the caller's thread. */
  private static CpuBuffer cpu(DeviceBuffer buffer) {
    CpuBuffer b = (CpuBuffer) buffer;
    b.requireLive();
    return b;
  }
}
