package dev.ramtrain.trainer.offload;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.backend.AdamWMath;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.Bf16;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.nn.ParamSpec;
import dev.ramtrain.trainer.nn.Parameters;
import dev.ramtrain.trainer.optim.AdamWSpec;
import dev.ramtrain.trainer.optim.ParamGroups;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The host AdamW's one-pass kernels: the vectorized library against the Java loops (the same bits,
 * on values that stress the rounding: ties, NaN, infinities, subnormals), the fp32 pass against the
 * resident optimizer's arithmetic, bf16 moments against a plain reference of the rule, and
 * stochastic rounding's promise (unbiased, only the two neighbours, exact values kept).
 */
class HostAdamWTest {
  private static final AdamWSpec SPEC = new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.01f);
  private static final int N = 200_003; // more than three of HostThreads' chunks, and odd
  private static final ParamGroups.Rules RULES = new ParamGroups.Rules(1f, true, "");

  private static Parameters.Entry entry(String name, int[] shape, long offset) {
    return new Parameters.Entry(new ParamSpec(name, shape, ParamSpec.Init.ZEROS, 1), offset);
  }

  @Test
  void theVectorizedKernelsGiveTheJavaLoopsBits() {
    boolean built =
        HostAdamWKernel.class.getResource("linux-x86_64/libramtrain_hostadamw.so") != null;
    assertEquals(built, HostAdamWKernel.vectorized(), "a library built here loads here");
    org.junit.jupiter.api.Assumptions.assumeTrue(built, "the library is not built on this machine");
    int n = 4099;
    SplittableRandom rng = new SplittableRandom(5);
    float[] p = values(rng, n, true);
    float[] g = values(rng, n, true);
    float[] m = values(rng, n, false);
    float[] v = values(rng, n, false);
    for (int i = 0; i < n; i++) {
      v[i] = Math.abs(v[i]); // a second moment is never negative
    }
    assertEquals(HostAdamWKernel.BASELINE, HostAdamWKernel.usableIsa(HostAdamWKernel.BASELINE));
    for (int isa :
        new int[] {HostAdamWKernel.BEST, HostAdamWKernel.AVX2, HostAdamWKernel.BASELINE}) {
      if (HostAdamWKernel.usableIsa(isa) == isa) { // a variant this CPU runs (AVX-512 for BEST)
        compareWithJava(isa, p, g, m, v);
      }
    }
  }

  private static void compareWithJava(int isa, float[] p, float[] g, float[] m, float[] v) {
    int n = p.length;
    for (int step = 1; step <= 3; step++) {
      AdamWMath math = AdamWMath.of(1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step);
      for (boolean copy : new boolean[] {true, false}) {
        try (Slabs fast = new Slabs(p, g, m, v);
            Slabs java = new Slabs(p, g, m, v)) {
          HostAdamWKernel.fp32(fast.p, fast.g, fast.m, fast.v, copy ? fast.out : 0, n, math, isa);
          HostAdamWKernel.fp32Java(java.p, java.g, java.m, java.v, copy ? java.out : 0, n, math);
          fast.assertSame(java, "isa " + isa + ", fp32 moments, copy " + copy + ", step " + step);
        }
      }
      int key = StochasticBits.key(42, step);
      for (boolean copy : new boolean[] {true, false}) {
        try (Slabs fast = Slabs.bf16(p, g, m, v);
            Slabs java = Slabs.bf16(p, g, m, v)) {
          HostAdamWKernel.bf16State(
              fast.p, fast.g, fast.m, fast.v, copy ? fast.out : 0, n, math, key, 1L << 31, isa);
          HostAdamWKernel.bf16StateJava(
              java.p, java.g, java.m, java.v, copy ? java.out : 0, n, math, key, 1L << 31);
          fast.assertSame(java, "isa " + isa + ", bf16 moments, copy " + copy + ", step " + step);
        }
      }
    }
  }

  @Test
  void theFp32PassIsTheResidentArithmeticAndItsCopyRoundsToNearest() {
    SplittableRandom rng = new SplittableRandom(6);
    int n = 1000;
    float[] p = values(rng, n, false);
    float[] g = values(rng, n, false);
    float[] m = new float[n];
    float[] v = new float[n];
    AdamWMath math = AdamWMath.of(1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, 1);
    float[] rp = p.clone();
    float[] rm = m.clone();
    float[] rv = v.clone();
    math.update(
        FloatBuffer.wrap(rp),
        FloatBuffer.wrap(g),
        FloatBuffer.wrap(rm),
        FloatBuffer.wrap(rv),
        0,
        n);
    try (Slabs s = new Slabs(p, g, m, v)) {
      HostAdamWKernel.fp32(s.p, s.g, s.m, s.v, s.out, n, math);
      assertArrayEquals(rp, s.floats(s.p, n), "weights");
      assertArrayEquals(rm, s.floats(s.m, n), "first moment");
      assertArrayEquals(rv, s.floats(s.v, n), "second moment");
      ShortBuffer out = s.shorts(s.out, n);
      for (int i = 0; i < n; i++) {
        assertEquals(Bf16.fromFloat(rp[i]), out.get(i), "copy of weight " + i);
      }
    }
  }

  /**
   * HostAdamW with bf16 moments, groups and bf16 copies, on 1 and 3 threads and as two ZeRO-1
   * shares, against the rule written out element by element: moments widened, updated in fp32,
   * rounded stochastically with the element's bits; weights from the unrounded moments.
   */
  @Test
  void bf16MomentsFollowTheRuleWhateverTheThreadsOrShares() {
    SplittableRandom rng = new SplittableRandom(7);
    float[] p0 = values(rng, N, false);
    float[][] grads = {values(rng, N, false), values(rng, N, false), values(rng, N, false)};
    ParamGroups.Layout layout =
        ParamGroups.Layout.whole(
            List.of(
                entry("a.weight", new int[] {400, 300}, 0),
                entry("a.bias", new int[] {3}, 120_000),
                entry("b.weight", new int[] {N - 120_003}, 120_003)));
    ParamGroups groups = layout.groups(RULES); // the biases and 1-d weights without decay
    assertTrue(groups.within(0, N).size() >= 2, "more than one group");
    long seed = 99;
    // The reference.
    float[] rp = p0.clone();
    short[] rm = new short[N];
    short[] rv = new short[N];
    for (int step = 1; step <= grads.length; step++) {
      int key = StochasticBits.key(seed, step);
      for (ParamGroups.Range r : groups.within(0, N)) {
        AdamWMath a =
            AdamWMath.of(1e-3f * r.lrScale(), 0.9f, 0.999f, 1e-8f, r.decay() ? 0.01f : 0f, step);
        for (int i = (int) r.offset(); i < r.offset() + r.count(); i++) {
          float gi = grads[step - 1][i];
          float mi = 0.9f * Bf16.toFloat(rm[i]) + (1 - 0.9f) * gi;
          float vi = 0.999f * Bf16.toFloat(rv[i]) + (1 - 0.999f) * gi * gi;
          int bits = StochasticBits.of(key, i);
          rm[i] = StochasticBits.round(mi, bits & 0xFFFF);
          rv[i] = StochasticBits.round(vi, bits >>> 16);
          float denom = (float) Math.sqrt(vi) / a.sqrtCorrection() + a.eps();
          rp[i] = rp[i] * a.decay() - a.stepSize() * mi / denom;
        }
      }
    }
    for (int threads : new int[] {1, 3}) {
      float[][] got = train(p0, grads, groups, layout, threads, seed, 0, N);
      assertArrayEquals(rp, got[0], threads + " threads: weights");
      assertArrayEquals(widen(rm), got[1], threads + " threads: first moment");
      assertArrayEquals(widen(rv), got[2], threads + " threads: second moment");
    }
    int cut = 77_777;
    float[][] low = train(p0, grads, groups, layout, 2, seed, 0, cut);
    float[][] high = train(p0, grads, groups, layout, 2, seed, cut, N);
    for (int k = 0; k < 3; k++) {
      float[] joined = new float[N];
      System.arraycopy(low[k], 0, joined, 0, cut);
      System.arraycopy(high[k], 0, joined, cut, N - cut);
      assertArrayEquals(k == 0 ? rp : widen(k == 1 ? rm : rv), joined, "two shares, slab " + k);
    }
  }

  /** Runs HostAdamW with bf16 moments over elements [from, to): weights, m, v widened. */
  private static float[][] train(
      float[] p0,
      float[][] grads,
      ParamGroups groupsOfAll,
      ParamGroups.Layout layout,
      int threads,
      long seed,
      int from,
      int to) {
    int n = to - from;
    try (Backend b = new CpuBackend(1);
        HostBuffer p = b.allocateHost("p", 4L * n);
        HostBuffer g = b.allocateHost("g", 4L * n);
        HostThreads pool = new HostThreads(threads);
        HostAdamW adamw =
            new HostAdamW(
                b,
                p,
                g,
                SPEC,
                layout.share(from, to).groups(RULES),
                pool,
                OffloadSpec.OptimizerState.BF16,
                Bf16Copies.NONE,
                from,
                seed)) {
      p.asByteBuffer().asFloatBuffer().put(p0, from, n);
      for (float[] grad : grads) {
        g.asByteBuffer().asFloatBuffer().put(grad, from, n);
        adamw.beginStep(1e-3f).update(0, n);
      }
      float[][] out = new float[3][n];
      p.asByteBuffer().asFloatBuffer().get(out[0]);
      for (int k = 0; k < 2; k++) {
        ShortBuffer s = adamw.state().get(k).asByteBuffer().asShortBuffer();
        for (int i = 0; i < n; i++) {
          out[k + 1][i] = Bf16.toFloat(s.get(i));
        }
      }
      assertEquals(2, adamw.stateBytesPerValue());
      assertEquals(2L * n, adamw.state().get(0).bytes(), "half the bytes of fp32 moments");
      return out;
    }
  }

  /**
   * Stochastic rounding: between two bf16 neighbours only they come out, with the mean of many
   * roundings the value itself. Each rounding's error lies in [0, ulp) away from the value's lower
   * neighbour, a variance of at most ulp^2 / 4, so the mean of 20,000 is within 5 standard
   * deviations (ulp / 283) of the value; bf16 values, infinities and NaN stay what they are.
   */
  @Test
  void stochasticRoundingIsUnbiasedAndKeepsWhatIsExact() {
    int samples = 20_000;
    for (float x : new float[] {1.00390625f * 1.3f, -3.14159f, 1e-20f, 6.1e4f, 0.1f}) {
      short down = (short) (Float.floatToRawIntBits(x) >>> 16);
      float lower = Bf16.toFloat(down);
      float upper = Bf16.toFloat((short) (down + 1));
      double sum = 0;
      for (int i = 0; i < samples; i++) {
        int r = StochasticBits.of(StochasticBits.key(3, 1), i) & 0xFFFF;
        float y = Bf16.toFloat(StochasticBits.round(x, r));
        assertTrue(y == lower || y == upper, x + " rounded to " + y);
        sum += y;
      }
      double ulp = Math.abs(upper - lower);
      assertEquals(x, sum / samples, 5 * ulp / (2 * Math.sqrt(samples)), "mean rounding of " + x);
    }
    for (float exact : new float[] {1f, -2.5f, 0f, Float.POSITIVE_INFINITY, 3.0e38f}) {
      float bf = Bf16.toFloat(Bf16.fromFloat(exact));
      assertEquals(bf, Bf16.toFloat(StochasticBits.round(bf, 0xFFFF)), "exact " + bf);
    }
    assertTrue(Float.isNaN(Bf16.toFloat(StochasticBits.round(Float.NaN, 0xFFFF))));
    assertTrue(
        Float.isNaN(Bf16.toFloat(StochasticBits.round(Float.intBitsToFloat(0x7FFFFFFF), 0xFFFF))),
        "a NaN whose low bits would carry into the sign stays NaN");
  }

  private static float[] widen(short[] s) {
    float[] f = new float[s.length];
    for (int i = 0; i < s.length; i++) {
      f[i] = Bf16.toFloat(s[i]);
    }
    return f;
  }

  /** Random values; {@code special}: with ties, NaN, infinities and subnormals among them. */
  private static float[] values(SplittableRandom rng, int n, boolean special) {
    float[] x = new float[n];
    for (int i = 0; i < n; i++) {
      x[i] = (float) rng.nextGaussian() * 0.1f;
    }
    if (special) {
      x[1] = Float.NaN;
      x[2] = Float.POSITIVE_INFINITY;
      x[3] = Float.NEGATIVE_INFINITY;
      x[4] = Float.MIN_VALUE;
      x[5] = Float.intBitsToFloat(0x3F808000); // a tie to even when narrowed
      x[6] = Float.intBitsToFloat(0x3F818000);
      x[7] = -0f;
      x[8] = Float.intBitsToFloat(0x7F7FFFFF);
    }
    return x;
  }

  /** Native slabs of a kernel call: weights, gradients, moments (fp32 or bf16) and the copy. */
  private static final class Slabs implements AutoCloseable {
    final ByteBuffer[] buffers = new ByteBuffer[5];
    final long p;
    final long g;
    final long m;
    final long v;
    final long out;
    private final int n;
    private final boolean bf16;

    private Slabs(float[] p, float[] g, float[] m, float[] v, boolean bf16) {
      this.n = p.length;
      this.bf16 = bf16;
      this.p = put(0, p, false);
      this.g = put(1, g, false);
      this.m = put(2, m, bf16);
      this.v = put(3, v, bf16);
      buffers[4] = ByteBuffer.allocateDirect(2 * n).order(ByteOrder.nativeOrder());
      this.out = org.apache.arrow.memory.util.MemoryUtil.getByteBufferAddress(buffers[4]);
    }

    Slabs(float[] p, float[] g, float[] m, float[] v) {
      this(p, g, m, v, false);
    }

    static Slabs bf16(float[] p, float[] g, float[] m, float[] v) {
      return new Slabs(p, g, m, v, true);
    }

    private long put(int k, float[] values, boolean narrow) {
      ByteBuffer b = ByteBuffer.allocateDirect(values.length * (narrow ? 2 : 4));
      b.order(ByteOrder.nativeOrder());
      for (int i = 0; i < values.length; i++) {
        if (narrow) {
          b.putShort(2 * i, Bf16.fromFloat(values[i]));
        } else {
          b.putFloat(4 * i, values[i]);
        }
      }
      buffers[k] = b;
      return org.apache.arrow.memory.util.MemoryUtil.getByteBufferAddress(b);
    }

    float[] floats(long address, int count) {
      float[] f = new float[count];
      buffer(address).asFloatBuffer().get(f);
      return f;
    }

    ShortBuffer shorts(long address, int count) {
      return buffer(address).asShortBuffer();
    }

    private ByteBuffer buffer(long address) {
      for (ByteBuffer b : buffers) {
        if (org.apache.arrow.memory.util.MemoryUtil.getByteBufferAddress(b) == address) {
          return b.duplicate().order(ByteOrder.nativeOrder());
        }
      }
      throw new IllegalArgumentException("not a slab of this call");
    }

    void assertSame(Slabs other, String what) {
      for (int k = 0; k < 5; k++) {
        ByteBuffer a = buffers[k].duplicate();
        ByteBuffer b = other.buffers[k].duplicate();
        for (int i = 0; i < a.capacity(); i++) {
          if (a.get(i) != b.get(i)) {
            int width = k == 4 || (bf16 && (k == 2 || k == 3)) ? 2 : 4;
            throw new AssertionError(
                what + ": slab " + k + " differs at element " + i / width + " of " + n);
          }
        }
      }
    }

    @Override
    public void close() {
      // direct buffers: freed with the objects
    }
  }
}
