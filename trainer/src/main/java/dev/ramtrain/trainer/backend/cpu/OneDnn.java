package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.trainer.backend.BackendUnavailableException;
import dev.ramtrain.trainer.backend.ops.ConvWindow;
import java.util.HashMap;
import java.util.Map;
import org.bytedeco.dnnl.dnnl_version_t;
import org.bytedeco.dnnl.engine;
import org.bytedeco.dnnl.global.dnnl;
import org.bytedeco.dnnl.stream;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.Pointer;

/**
 * oneDNN on this backend: its CPU engine and stream, the primitives made for each convolution shape
 * (made on first use, kept until the backend closes), and the scratch they reorder into. Calls run
 * one at a time (the scratch is shared), on the CPU stream's thread that enqueued them; oneDNN
 * splits each over its OpenMP threads.
 */
final class OneDnn implements AutoCloseable {
  /** A convolution's shape: the key its primitives are kept under. */
  private record Shape(ConvWindow window, int outChannels, boolean bias) {}

  private final engine eng;
  private final stream st;
  private final Map<Shape, OneDnnConvolution> convolutions = new HashMap<>();
  private final Map<OneDnnMatmul.Shape, OneDnnMatmul> matmuls = new HashMap<>();
  private final boolean bf16Dot;
  private final LayoutScratch scratch = new LayoutScratch();

  private OneDnn() {
    eng = new engine(engine.kind.cpu, 0);
    st = new stream(eng);
    int isa = dnnl.dnnl_get_effective_cpu_isa();
    bf16Dot = (isa & dnnl.dnnl_cpu_isa_avx512_core_bf16) == dnnl.dnnl_cpu_isa_avx512_core_bf16;
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
   * A bf16 GEMM (A and B bf16, C fp32) as {@link OneDnnMatmul} does it, on this CPU's bf16 dot
   * products; {@code count} of them over strided operands (strides in elements), each product
   * summed into the one C when {@code strideC} is 0, as GemmStridedBatched says.
   */
  synchronized void gemmBf16(
      OneDnnMatmul.Shape g,
      int count,
      Pointer a,
      long strideA,
      Pointer b,
      long strideB,
      Pointer c,
      long strideC) {
    OneDnnMatmul first = matmul(g);
    OneDnnMatmul rest =
        strideC == 0 && count > 1
            ? matmul(
                new OneDnnMatmul.Shape(
                    g.transA(),
                    g.transB(),
                    g.m(),
                    g.n(),
                    g.k(),
                    g.alpha(),
                    g.lda(),
                    g.ldb(),
                    1f,
                    g.ldc()))
            : first;
    for (int i = 0; i < count; i++) {
      (i == 0 ? first : rest)
          .run(st, at(a, 2 * i * strideA), at(b, 2 * i * strideB), at(c, 4 * i * strideC));
    }
  }

  private OneDnnMatmul matmul(OneDnnMatmul.Shape g) {
    return matmuls.computeIfAbsent(g, s -> new OneDnnMatmul(eng, s));
  }

  private static Pointer at(Pointer base, long bytes) {
    return new BytePointer(base).position(base.position() + bytes);
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

  /** "oneDNN 3.11.0": the library's own version, for the startup log. */
  static String version() {
    dnnl_version_t v = dnnl.dnnl_version();
    return "oneDNN " + v.major() + "." + v.minor() + "." + v.patch();
  }

  synchronized void convolution(
      ConvWindow window, int out, Pointer x, Pointer w, Pointer b, Pointer y) {
    primitives(window, out, b != null).forward(st, scratch, x, w, b, y);
  }

  synchronized void convolutionBackward(
      ConvWindow window,
      int out,
      boolean hasBias,
      Pointer x,
      Pointer dy,
      Pointer w,
      Pointer dw,
      Pointer db,
      Pointer dx) {
    primitives(window, out, hasBias).backward(st, scratch, x, dy, w, dw, db, dx);
  }

  /** oneDNN's kernel names for a shape's convolution, made if not yet (for logs and tests). */
  synchronized String implementation(ConvWindow window, int out, boolean bias) {
    return primitives(window, out, bias).implementation();
  }

  private OneDnnConvolution primitives(ConvWindow window, int out, boolean bias) {
    return convolutions.computeIfAbsent(
        new Shape(window, out, bias), s -> new OneDnnConvolution(eng, window, out, bias));
  }

  @Override
  public synchronized void close() {
    convolutions.values().forEach(OneDnnConvolution::close);
    convolutions.clear();
    matmuls.values().forEach(OneDnnMatmul::close);
    matmuls.clear();
    scratch.close();
    st.close();
    eng.close();
  }
}
