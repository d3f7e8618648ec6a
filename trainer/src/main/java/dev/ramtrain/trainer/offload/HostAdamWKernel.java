package dev.ramtrain.trainer.offload;

import dev.ramtrain.files.BundledLibrary;
import dev.ramtrain.trainer.backend.AdamWMath;
import dev.ramtrain.trainer.backend.Bf16;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;
import org.apache.arrow.memory.util.MemoryUtil;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The host AdamW's passes: fp32 or bf16 moments (stochastically rounded), optionally writing the
 * device-bound bf16 copy of the weights it updates. Each reads gradient, weights and moments once
 * and writes weights, moments and the copy in the same pass. Through buffers the JIT's loops stay
 * short of the memory's speed (the fp32 pass 1.44 ns a parameter on 2 AVX-512 cores, 0.69 here with
 * the copy; bf16 work goes scalar, 3.6 ns an element against 0.45 in cache), so a small JNI library
 * of the trainer's own runs them vectorized ({@code src/main/native/host_adamw.c}); where it is not
 * built the Java loops here give the same bits. The arithmetic is {@link AdamWMath}'s, so fp32
 * moments give the resident optimizer's weights bit for bit.
 */
final class HostAdamWKernel {
  private static final Logger LOG = LoggerFactory.getLogger(HostAdamWKernel.class);
  private static final String LIBRARY = "linux-x86_64/libramtrain_hostadamw.so";
  private static final String UNAVAILABLE = load(); // null once the library is loaded

  /** The library's variants, by instruction set (host_adamw.c's ISA_*); a call takes one. */
  static final int BEST = 0;

  static final int AVX2 = 1;
  static final int BASELINE = 2;

  private HostAdamWKernel() {}

  /** Whether the vectorized library runs the passes (else the Java loops). */
  static boolean vectorized() {
    return UNAVAILABLE == null;
  }

  /**
   * AdamW with fp32 moments over {@code n} elements at the addresses given, writing the updated
   * weights' bf16 rounding to {@code bf16} unless it is 0.
   */
  static void fp32(long p, long g, long m, long v, long bf16, int n, AdamWMath a) {
    fp32(p, g, m, v, bf16, n, a, BEST);
  }

  /** As above, the library's variant for {@code isa} (or the best below it the CPU runs). */
  static void fp32(long p, long g, long m, long v, long bf16, int n, AdamWMath a, int isa) {
    if (UNAVAILABLE == null) {
      fp32Native(
          p,
          g,
          m,
          v,
          bf16,
          n,
          a.beta1(),
          a.beta2(),
          a.eps(),
          a.decay(),
          a.stepSize(),
          a.sqrtCorrection(),
          isa);
    } else {
      fp32Java(p, g, m, v, bf16, n, a);
    }
  }

  /**
   * AdamW with bf16 moments (stochastically rounded with {@code key}'s random bits of elements
   * {@code index}, {@code index + 1}, ...) over {@code n} elements; the weights' bf16 rounding to
   * {@code bf16} unless it is 0.
   */
  static void bf16State(
      long p, long g, long m, long v, long bf16, int n, AdamWMath a, int key, long index) {
    bf16State(p, g, m, v, bf16, n, a, key, index, BEST);
  }

  /** As above, the library's variant for {@code isa} (or the best below it the CPU runs). */
  static void bf16State(
      long p, long g, long m, long v, long bf16, int n, AdamWMath a, int key, long index, int isa) {
    if (UNAVAILABLE == null) {
      bf16StateNative(
          p,
          g,
          m,
          v,
          bf16,
          n,
          a.beta1(),
          a.beta2(),
          a.eps(),
          a.decay(),
          a.stepSize(),
          a.sqrtCorrection(),
          key,
          index,
          isa);
    } else {
      bf16StateJava(p, g, m, v, bf16, n, a, key, index);
    }
  }

  /**
   * STREAM's triad {@code a = b + 3 c} over {@code n} floats at the addresses given, vectorized as
   * the update is (the Java loop where the library is not built): what the machine streams.
   */
  static void triad(long a, long b, long c, int n) {
    if (UNAVAILABLE == null) {
      triadNative(a, b, c, n);
      return;
    }
    FloatBuffer x = floats(a, n);
    FloatBuffer y = floats(b, n);
    FloatBuffer z = floats(c, n);
    for (int i = 0; i < n; i++) {
      x.put(i, y.get(i) + 3f * z.get(i));
    }
  }

  /** Widens {@code n} bf16 values at {@code src} into floats at {@code dst} (exactly). */
  static void widen(long src, long dst, int n) {
    if (UNAVAILABLE == null) {
      widenNative(src, dst, n);
      return;
    }
    ShortBuffer from = shorts(src, n);
    FloatBuffer to = floats(dst, n);
    for (int i = 0; i < n; i++) {
      to.put(i, Bf16.toFloat(from.get(i)));
    }
  }

  /** The Java loop of {@link #fp32}: {@link AdamWMath#update}, then each weight rounded. */
  static void fp32Java(long p, long g, long m, long v, long bf16, int n, AdamWMath a) {
    FloatBuffer params = floats(p, n);
    a.update(params, floats(g, n), floats(m, n), floats(v, n), 0, n);
    if (bf16 == 0) {
      return;
    }
    ShortBuffer out = shorts(bf16, n);
    for (int i = 0; i < n; i++) {
      out.put(i, Bf16.fromFloat(params.get(i)));
    }
  }

  /** The Java loop of {@link #bf16State}, element by element as the native one. */
  static void bf16StateJava(
      long p, long g, long m, long v, long bf16, int n, AdamWMath a, int key, long index) {
    FloatBuffer params = floats(p, n);
    FloatBuffer grads = floats(g, n);
    ShortBuffer ms = shorts(m, n);
    ShortBuffer vs = shorts(v, n);
    ShortBuffer out = bf16 == 0 ? null : shorts(bf16, n);
    float c1 = 1 - a.beta1();
    float c2 = 1 - a.beta2();
    for (int i = 0; i < n; i++) {
      float gi = grads.get(i);
      float mi = a.beta1() * Bf16.toFloat(ms.get(i)) + c1 * gi;
      float vi = a.beta2() * Bf16.toFloat(vs.get(i)) + c2 * gi * gi;
      int r = StochasticBits.of(key, index + i);
      ms.put(i, StochasticBits.round(mi, r & 0xFFFF));
      vs.put(i, StochasticBits.round(vi, r >>> 16));
      float denom = (float) Math.sqrt(vi) / a.sqrtCorrection() + a.eps();
      float pi = params.get(i) * a.decay() - a.stepSize() * mi / denom;
      params.put(i, pi);
      if (out != null) {
        out.put(i, Bf16.fromFloat(pi));
      }
    }
  }

  private static FloatBuffer floats(long address, int n) {
    return bytes(address, 4L * n).asFloatBuffer();
  }

  private static ShortBuffer shorts(long address, int n) {
    return bytes(address, 2L * n).asShortBuffer();
  }

  private static ByteBuffer bytes(long address, long length) {
    return MemoryUtil.directBuffer(address, Math.toIntExact(length)).order(ByteOrder.nativeOrder());
  }

  private static native void fp32Native(
      long p,
      long g,
      long m,
      long v,
      long bf16,
      int n,
      float beta1,
      float beta2,
      float eps,
      float decay,
      float stepSize,
      float sqrtCorrection,
      int isa);

  private static native void bf16StateNative(
      long p,
      long g,
      long m,
      long v,
      long bf16,
      int n,
      float beta1,
      float beta2,
      float eps,
      float decay,
      float stepSize,
      float sqrtCorrection,
      int key,
      long index,
      int isa);

  private static native void triadNative(long a, long b, long c, int n);

  private static native void widenNative(long src, long dst, int n);

  /** The variant a call asking for {@code isa} runs on this CPU. */
  static native int usableIsa(int isa);

  private static String load() {
    String why = BundledLibrary.load(HostAdamWKernel.class, LIBRARY);
    if (why != null) {
      LOG.info("the host AdamW's bf16 passes run in Java (slower, same bits): {}", why);
    }
    return why;
  }
}
