package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.trainer.backend.BackendUnavailableException;
import dev.ramtrain.trainer.backend.ops.ConvWindow;
import dev.ramtrain.trainer.backend.ops.GemmStridedBatched;
import java.nio.FloatBuffer;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import java.util.function.Function;
import org.bytedeco.dnnl.dnnl_version_t;
import org.bytedeco.dnnl.engine;
import org.bytedeco.dnnl.global.dnnl;
import org.bytedeco.dnnl.memory;
import org.bytedeco.dnnl.stream;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.Pointer;

/**
 * oneDNN on this backend: per calling thread (each CPU stream's), an engine and stream, the
 * primitives made for each shape of each operation (convolutions, GEMMs, pointwise, normalizations,
 * pooling; made on first use, kept until that stream closes) and the scratch convolutions reorder
 * into. A thread only ever runs primitives it made: OpenMP gives each thread that opens a parallel
 * region a team of its own, and oneDNN's GEMM-based convolutions (the AVX path) crashed executing,
 * on a second stream's thread, primitives made on a first's. The calls run on the stream's own
 * thread, so no hand-off sits between a stream and its arithmetic (handing every call to one engine
 * thread cost 0-4% of a ResNet-20 step); oneDNN splits each over its OpenMP threads. Buffers come
 * as byte-positioned pointers ({@code CpuBuffer.pointer()}): JavaCPP adds a pointer's position to a
 * {@code void*} argument in bytes, whatever its element type.
 */
final class OneDnn implements AutoCloseable {
  /** A convolution's shape and layouts: the key its primitives are kept under. */
  private record Shape(
      ConvWindow window, int outChannels, boolean bias, int inBlock, int outBlock, boolean bf16) {}

  /** A batch norm's shape and layout. */
  private record Normalized(int n, int c, int hw, int block) {}

  /** A pointwise primitive and its shape (elements, or rows and columns). */
  private record Pointwise(String kind, long rows, long cols) {}

  private final boolean bf16Dot;
  private final int channelBlock;
  private final boolean jitPoolsPlainChannels;
  private final Map<Thread, Context> contexts = new ConcurrentHashMap<>();
  private volatile boolean closed;

  private OneDnn() {
    int isa = dnnl.dnnl_get_effective_cpu_isa();
    bf16Dot = (isa & dnnl.dnnl_cpu_isa_avx512_core_bf16) == dnnl.dnnl_cpu_isa_avx512_core_bf16;
    // The blocking oneDNN's convolutions pick (format_tag any) on this ISA: 16 floats (a zmm
    // register) with AVX-512, 8 (a ymm) below it.
    channelBlock = (isa & dnnl.dnnl_cpu_isa_avx512_core) == dnnl.dnnl_cpu_isa_avx512_core ? 16 : 8;
    try (engine probe = new engine(engine.kind.cpu, 0)) {
      jitPoolsPlainChannels = OneDnnMaxPool.jitPoolsPlainChannels(probe);
    }
  }

  /** One thread's engine, stream, primitives and scratch: used by that thread alone. */
  private final class Context implements AutoCloseable {
    final engine eng = new engine(engine.kind.cpu, 0);
    final stream st = new stream(eng);
    final Map<Shape, OneDnnConvolution> convolutions = new HashMap<>();
    final Map<OneDnnMatmul.Shape, BoundPrimitive> matmuls = new HashMap<>();
    final Map<Pointwise, BoundPrimitive> pointwise = new HashMap<>();
    final Map<Pointwise, OneDnnLayerNorm> layerNorms = new HashMap<>();
    final Map<Normalized, OneDnnBatchNorm> batchNorms = new HashMap<>();
    final Map<OneDnnMaxPool.Window, OneDnnMaxPool> maxPools = new HashMap<>();
    final LayoutScratch scratch = new LayoutScratch();

    OneDnnLayerNorm layerNorm(int rows, int size, float eps) {
      return layerNorms.computeIfAbsent(
          new Pointwise("layer-norm " + Float.floatToIntBits(eps), rows, size),
          k -> new OneDnnLayerNorm(eng, rows, size, eps));
    }

    BoundPrimitive matmul(OneDnnMatmul.Shape g) {
      return matmuls.computeIfAbsent(g, s -> OneDnnMatmul.make(eng, s));
    }

    OneDnnBatchNorm batchNorm(int n, int c, int hw, int block) {
      return batchNorms.computeIfAbsent(
          new Normalized(n, c, hw, block),
          k -> new OneDnnBatchNorm(eng, n, c, hw, block, channelBlock));
    }

    OneDnnMaxPool maxPool(OneDnnMaxPool.Window window) {
      return maxPools.computeIfAbsent(window, w -> new OneDnnMaxPool(eng, w, channelBlock));
    }

    OneDnnConvolution convolution(
        ConvWindow window, int out, boolean bias, int inBlock, int outBlock, boolean bf16) {
      return convolutions.computeIfAbsent(
          new Shape(window, out, bias, inBlock, outBlock, bf16),
          s ->
              new OneDnnConvolution(eng, window, out, bias, inBlock, outBlock, channelBlock, bf16));
    }

    @Override
    public void close() {
      convolutions.values().forEach(OneDnnConvolution::close);
      matmuls.values().forEach(BoundPrimitive::close);
      pointwise.values().forEach(BoundPrimitive::close);
      layerNorms.values().forEach(OneDnnLayerNorm::close);
      batchNorms.values().forEach(OneDnnBatchNorm::close);
      maxPools.values().forEach(OneDnnMaxPool::close);
      scratch.close();
      st.close();
      eng.close();
    }
  }

  /** The channel blocking activations are fastest in here (Backend.channelBlock). */
  int channelBlock() {
    return channelBlock;
  }

  /**
   * The memory layout of [n, c, h, w] with its {@code channels} blocked by {@code block}: 1 is
   * NCHW, {@code channels} itself is channels-last (NHWC), tagged as this CPU's blocked layout when
   * the two are the same bytes ({@code engineBlock} channels: oneDNN picks its blocked kernels for
   * that tag, slower ones for nhwc there), else nhwc.
   */
  static memory.format_tag channelLayout(int block, int channels, int engineBlock) {
    if (block == channels && block > 1) {
      return block == engineBlock ? blocked(block) : memory.format_tag.nhwc;
    }
    return blocked(block);
  }

  /** nChw{block}c, NCHW for block 1. */
  static memory.format_tag blocked(int block) {
    return switch (block) {
      case 1 -> memory.format_tag.nchw;
      case 4 -> memory.format_tag.nChw4c;
      case 8 -> memory.format_tag.nChw8c;
      case 16 -> memory.format_tag.nChw16c;
      default -> throw new IllegalArgumentException("oneDNN has no layout nChw" + block + "c");
    };
  }

  /** Whether max pooling of NCHW activations is faster here than in the Java kernel. */
  boolean poolsPlainChannels() {
    return jitPoolsPlainChannels;
  }

  /**
   * Whether this CPU multiplies bf16 natively (AVX512-BF16, or AMX, whose ISA includes it; oneDNN's
   * ISA limit {@code ONEDNN_MAX_CPU_ISA} counts): only then do bf16 GEMMs run as bf16, elsewhere
   * they widen to fp32 first, as on the Java engine.
   */
  boolean bf16Dot() {
    return bf16Dot;
  }

  /**
   * {@code op}'s GEMMs (a batch of one for a Gemm) by {@link OneDnnMatmul} for {@code shape}, on
   * operands at {@code a}, {@code b} and {@code c} (byte-positioned, strides in elements); each
   * product is summed into the one C when its stride is 0, as GemmStridedBatched says.
   */
  void gemm(OneDnnMatmul.Shape shape, GemmStridedBatched op, Pointer a, Pointer b, Pointer c) {
    inContext(
        ctx -> {
          BoundPrimitive first = ctx.matmul(shape);
          if (shape.count() > 1) { // the whole batch in one primitive
            first.run(ctx.st, a, b, c);
            return;
          }
          BoundPrimitive rest =
              op.sumsIntoOneC() && op.count() > 1 ? ctx.matmul(shape.withBeta(1f)) : first;
          int operandBytes = shape.bf16() ? 2 : 4;
          for (int i = 0; i < op.count(); i++) {
            (i == 0 ? first : rest)
                .run(
                    ctx.st,
                    at(a, operandBytes * i * op.strideA()),
                    at(b, operandBytes * i * op.strideB()),
                    at(c, 4 * i * op.strideC()));
          }
        });
  }

  /** {@code y = gelu(x)}, the exact (erf) GELU, over {@code count} elements. */
  void gelu(long count, Pointer x, Pointer y) {
    runPointwise(new Pointwise("gelu", count, 1), eng -> OneDnnPointwise.gelu(eng, count), x, y);
  }

  void geluBackward(long count, Pointer x, Pointer dy, Pointer dx) {
    runPointwise(
        new Pointwise("gelu-backward", count, 1),
        eng -> OneDnnPointwise.geluBackward(eng, count),
        x,
        dy,
        dx);
  }

  /** fp32 to bf16 or back over {@code count} elements, as OneDnnPointwise.convert. */
  void convert(long count, boolean narrowing, Pointer src, Pointer dst) {
    runPointwise(
        new Pointwise(narrowing ? "to-bf16" : "from-bf16", count, 1),
        eng -> OneDnnPointwise.convert(eng, count, narrowing),
        src,
        dst);
  }

  /** {@code y[r, c] += bias[c]} over [rows, cols]. */
  void addBias(int rows, int cols, Pointer y, Pointer bias) {
    runPointwise(
        new Pointwise("add-bias", rows, cols),
        eng -> OneDnnPointwise.addBias(eng, rows, cols),
        y,
        bias,
        y);
  }

  /** {@code y = relu(x)} over {@code count} elements. */
  void relu(long count, Pointer x, Pointer y) {
    runPointwise(new Pointwise("relu", count, 1), eng -> OneDnnPointwise.relu(eng, count), x, y);
  }

  void reluBackward(long count, Pointer x, Pointer dy, Pointer dx) {
    runPointwise(
        new Pointwise("relu-backward", count, 1),
        eng -> OneDnnPointwise.reluBackward(eng, count),
        x,
        dy,
        dx);
  }

  /** {@code out = a + b} over {@code count} elements. */
  void add(long count, Pointer a, Pointer b, Pointer out) {
    runPointwise(new Pointwise("add", count, 1), eng -> OneDnnPointwise.add(eng, count), a, b, out);
  }

  void softmax(int rows, int cols, Pointer x, Pointer y) {
    runPointwise(
        new Pointwise("softmax", rows, cols),
        eng -> OneDnnPointwise.softmax(eng, rows, cols),
        x,
        y);
  }

  void softmaxBackward(int rows, int cols, Pointer y, Pointer dy, Pointer dx) {
    runPointwise(
        new Pointwise("softmax-backward", rows, cols),
        eng -> OneDnnPointwise.softmaxBackward(eng, rows, cols),
        y,
        dy,
        dx);
  }

  /** Layer normalization over the last dimension of [rows, size], as {@link OneDnnLayerNorm}. */
  void layerNorm(
      int rows,
      int size,
      float eps,
      Pointer x,
      Pointer gamma,
      Pointer beta,
      Pointer y,
      Pointer mean,
      FloatBuffer invStd) {
    inContext(
        ctx -> ctx.layerNorm(rows, size, eps).forward(ctx.st, x, gamma, beta, y, mean, invStd));
  }

  /** Its backward from the saved mean and inverse deviation (no epsilon: see OneDnnLayerNorm). */
  void layerNormBackward(
      int rows,
      int size,
      Pointer x,
      Pointer dy,
      Pointer gamma,
      Pointer mean,
      FloatBuffer invStd,
      Pointer dx,
      FloatBuffer dgamma,
      FloatBuffer dbeta) {
    inContext(
        ctx ->
            ctx.layerNorm(rows, size, 0f)
                .backward(ctx.st, x, dy, gamma, mean, invStd, dx, dgamma, dbeta));
  }

  /** The pointwise primitive for {@code key} (made by {@code make} on first use), run on args. */
  private void runPointwise(Pointwise key, Function<engine, BoundPrimitive> make, Pointer... args) {
    inContext(
        ctx -> ctx.pointwise.computeIfAbsent(key, k -> make.apply(ctx.eng)).run(ctx.st, args));
  }

  private static Pointer at(Pointer base, long bytes) {
    return new BytePointer(base).position(base.position() + bytes);
  }

  /** Runs {@code work} with this thread's context (made on its first call). */
  private void inContext(Consumer<Context> work) {
    work.accept(context());
  }

  private <T> T fromContext(Function<Context, T> work) {
    return work.apply(context());
  }

  private Context context() {
    if (closed) {
      throw new IllegalStateException("oneDNN is closed");
    }
    return contexts.computeIfAbsent(Thread.currentThread(), t -> new Context());
  }

  /** How many threads hold a context now. */
  int threadContexts() {
    return contexts.size();
  }

  /** Closes this thread's context, if it has one: its stream is closing (CpuStream). */
  void releaseThisThread() {
    Context ctx = contexts.remove(Thread.currentThread());
    if (ctx != null) {
      ctx.close();
    }
  }

  /** oneDNN, or an exception saying why its natives do not load here. */
  static OneDnn open() {
    try {
      Loader.load(dnnl.class);
    } catch (LinkageError e) { // UnsatisfiedLinkError, or NoClassDefFoundError after one
      throw new BackendUnavailableException(
          "oneDNN's natives do not load on " + Loader.getPlatform() + " (" + e.getMessage() + ")");
    }
    return new OneDnn();
  }

  /** "oneDNN 3.11.0 (avx512_core_bf16)": the library's version and the ISA it runs, for the log. */
  static String version() {
    dnnl_version_t v = dnnl.dnnl_version();
    return "oneDNN "
        + v.major()
        + "."
        + v.minor()
        + "."
        + v.patch()
        + " ("
        + dnnl.get_effective_cpu_isa() // its toString: name() is null on JavaCPP 1.5.13's enums
        + ")";
  }

  /** Batch normalization in training over channels blocked by {@code block}, as OneDnnBatchNorm. */
  void batchNormTrain(
      int n,
      int c,
      int hw,
      int block,
      float eps,
      float momentum,
      Pointer x,
      Pointer gamma,
      Pointer beta,
      Pointer y,
      Pointer reluMask,
      CpuBuffer savedMean,
      FloatBuffer savedInvStd,
      FloatBuffer runningMean,
      FloatBuffer runningVar) {
    inContext(
        ctx -> {
          ctx.batchNorm(n, c, hw, block)
              .train(
                  ctx.st,
                  eps,
                  x,
                  gamma,
                  beta,
                  y,
                  reluMask,
                  savedMean.pointer(),
                  savedMean.floats(),
                  savedInvStd,
                  momentum,
                  runningMean,
                  runningVar);
        });
  }

  void batchNormInference(
      int n,
      int c,
      int hw,
      int block,
      float eps,
      Pointer x,
      Pointer gamma,
      Pointer beta,
      Pointer runningMean,
      Pointer runningVar,
      Pointer y) {
    inContext(
        ctx ->
            ctx.batchNorm(n, c, hw, block)
                .inference(ctx.st, eps, x, gamma, beta, runningMean, runningVar, y));
  }

  /** Its backward from the saved mean and inverse deviation (epsilon 0: see OneDnnBatchNorm). */
  void batchNormBackward(
      int n,
      int c,
      int hw,
      int block,
      Pointer x,
      Pointer dy,
      Pointer reluMask,
      Pointer gamma,
      Pointer mean,
      FloatBuffer invStd,
      Pointer dx,
      FloatBuffer dgamma,
      FloatBuffer dbeta) {
    inContext(
        ctx ->
            ctx.batchNorm(n, c, hw, block)
                .backward(ctx.st, x, dy, reluMask, gamma, mean, invStd, dx, dgamma, dbeta));
  }

  /** Bytes of the mask batch norm with a fused ReLU keeps for its backward (its workspace). */
  long normReluMaskBytes(int n, int c, int hw, int block) {
    return fromContext(ctx -> ctx.batchNorm(n, c, hw, block).reluMaskBytes());
  }

  /** Max pooling, the winners in {@code argmax} (OneDnnMaxPool). */
  void maxPool(OneDnnMaxPool.Window window, Pointer x, Pointer y, Pointer argmax) {
    inContext(ctx -> ctx.maxPool(window).forward(ctx.st, x, y, argmax));
  }

  void maxPoolBackward(OneDnnMaxPool.Window window, Pointer dy, Pointer argmax, Pointer dx) {
    inContext(ctx -> ctx.maxPool(window).backward(ctx.st, dy, argmax, dx));
  }

  /** A convolution; {@code bf16}: x and w are bf16 (the CPU must multiply bf16: bf16Dot). */
  void convolution(
      ConvWindow window,
      int out,
      int inBlock,
      int outBlock,
      boolean bf16,
      Pointer x,
      Pointer w,
      Pointer b,
      Pointer y) {
    inContext(
        ctx ->
            ctx.convolution(window, out, b != null, inBlock, outBlock, bf16)
                .forward(ctx.st, ctx.scratch, x, w, b, y));
  }

  void convolutionBackward(
      ConvWindow window,
      int out,
      int inBlock,
      int outBlock,
      boolean bf16,
      boolean hasBias,
      Pointer x,
      Pointer dy,
      Pointer w,
      Pointer dw,
      Pointer db,
      Pointer dx) {
    inContext(
        ctx ->
            ctx.convolution(window, out, hasBias, inBlock, outBlock, bf16)
                .backward(ctx.st, ctx.scratch, x, dy, w, dw, db, dx));
  }

  /** Closes every thread's context: the backend's streams have closed, no call is running. */
  @Override
  public void close() {
    closed = true; // closing twice is a no-op, as for the backend
    contexts.values().forEach(Context::close);
    contexts.clear();
  }
}
