package dev.ramtrain.trainer.backend;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.backend.ops.AdamWStep;
import dev.ramtrain.trainer.backend.ops.Add;
import dev.ramtrain.trainer.backend.ops.AddBias;
import dev.ramtrain.trainer.backend.ops.AddChannelBias;
import dev.ramtrain.trainer.backend.ops.BatchNormBackward;
import dev.ramtrain.trainer.backend.ops.BatchNormInference;
import dev.ramtrain.trainer.backend.ops.BatchNormTrain;
import dev.ramtrain.trainer.backend.ops.BlendBatch;
import dev.ramtrain.trainer.backend.ops.ClipGradNorm;
import dev.ramtrain.trainer.backend.ops.Col2im;
import dev.ramtrain.trainer.backend.ops.ColorJitter;
import dev.ramtrain.trainer.backend.ops.ConvWindow;
import dev.ramtrain.trainer.backend.ops.Convert;
import dev.ramtrain.trainer.backend.ops.Convolution;
import dev.ramtrain.trainer.backend.ops.ConvolutionBackward;
import dev.ramtrain.trainer.backend.ops.CutMixBatch;
import dev.ramtrain.trainer.backend.ops.DepthwiseConvolution;
import dev.ramtrain.trainer.backend.ops.DepthwiseConvolutionBackward;
import dev.ramtrain.trainer.backend.ops.DropoutMask;
import dev.ramtrain.trainer.backend.ops.Fill;
import dev.ramtrain.trainer.backend.ops.Gelu;
import dev.ramtrain.trainer.backend.ops.GeluBackward;
import dev.ramtrain.trainer.backend.ops.Gemm;
import dev.ramtrain.trainer.backend.ops.GemmOperand;
import dev.ramtrain.trainer.backend.ops.GemmStridedBatched;
import dev.ramtrain.trainer.backend.ops.Im2col;
import dev.ramtrain.trainer.backend.ops.LayerNormBackward;
import dev.ramtrain.trainer.backend.ops.LayerNormForward;
import dev.ramtrain.trainer.backend.ops.Lerp;
import dev.ramtrain.trainer.backend.ops.MaxPool;
import dev.ramtrain.trainer.backend.ops.MaxPoolBackward;
import dev.ramtrain.trainer.backend.ops.Multiply;
import dev.ramtrain.trainer.backend.ops.NormalizeImages;
import dev.ramtrain.trainer.backend.ops.Relu;
import dev.ramtrain.trainer.backend.ops.ReluBackward;
import dev.ramtrain.trainer.backend.ops.SgdStep;
import dev.ramtrain.trainer.backend.ops.Softmax;
import dev.ramtrain.trainer.backend.ops.SoftmaxBackward;
import dev.ramtrain.trainer.backend.ops.SoftmaxCrossEntropy;
import dev.ramtrain.trainer.backend.ops.StridedCopy;
import dev.ramtrain.trainer.backend.ops.SumChannels;
import dev.ramtrain.trainer.backend.ops.SumRows;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What every backend must do, checked against straightforward double-precision Java. A backend's
 * test class extends this and says how to create it; the CUDA backend will pass the same suite.
 * Every test ends by closing the backend, which fails on any leaked allocation.
 */
public abstract class BackendConformanceTest {
  protected abstract Backend create();

  protected Backend backend;
  protected Stream stream;

  @BeforeEach
  void open() {
    backend = create();
    stream = backend.createStream("main");
  }

  @AfterEach
  void closeChecksLeaks() {
    backend.close();
  }

  // ---- helpers: host arrays in and out through pinned buffers -------------------------------

  protected DeviceBuffer upload(String label, float[] values) {
    DeviceBuffer d = backend.allocate(label, DType.F32, values.length);
    try (HostBuffer h = backend.allocateHost(label + "-staging", 4L * values.length)) {
      h.asByteBuffer().asFloatBuffer().put(values);
      backend.copy(h, 0, d, 4L * values.length, stream);
      stream.synchronize();
    }
    return d;
  }

  protected DeviceBuffer uploadInts(String label, int[] values) {
    DeviceBuffer d = backend.allocate(label, DType.I32, values.length);
    try (HostBuffer h = backend.allocateHost(label + "-staging", 4L * values.length)) {
      h.asByteBuffer().asIntBuffer().put(values);
      backend.copy(h, 0, d, 4L * values.length, stream);
      stream.synchronize();
    }
    return d;
  }

  protected float[] download(DeviceBuffer d) {
    float[] out = new float[(int) d.count()];
    try (HostBuffer h = backend.allocateHost(d.label() + "-readback", d.bytes())) {
      backend.copy(d, h, 0, d.bytes(), stream);
      stream.synchronize();
      h.asByteBuffer().asFloatBuffer().get(out);
    }
    return out;
  }

  protected static float[] random(Random rng, int n) {
    float[] x = new float[n];
    for (int i = 0; i < n; i++) {
      x[i] = (float) rng.nextGaussian();
    }
    return x;
  }

  /**
   * The channel layouts this backend computes in: NCHW (block 1), and its blocked one where it has
   * one ({@link Backend#channelBlock}).
   */
  protected int[] channelBlocks() {
    int block = backend.channelBlock();
    return block == 1 ? new int[] {1} : new int[] {1, block};
  }

  /** NCHW values [n, c, hw] laid out with channels blocked by {@code block}: [n, c/b, hw, b]. */
  protected static float[] blocked(float[] nchw, int n, int c, int hw, int block) {
    float[] out = new float[nchw.length];
    for (int i = 0; i < n; i++) {
      for (int ch = 0; ch < c; ch++) {
        for (int p = 0; p < hw; p++) {
          out[((i * (c / block) + ch / block) * hw + p) * block + ch % block] =
              nchw[(i * c + ch) * hw + p];
        }
      }
    }
    return out;
  }

  /** The inverse of {@link #blocked}. */
  protected static float[] unblocked(float[] blocked, int n, int c, int hw, int block) {
    float[] out = new float[blocked.length];
    for (int i = 0; i < n; i++) {
      for (int ch = 0; ch < c; ch++) {
        for (int p = 0; p < hw; p++) {
          out[(i * c + ch) * hw + p] =
              blocked[((i * (c / block) + ch / block) * hw + p) * block + ch % block];
        }
      }
    }
    return out;
  }

  protected static void assertClose(
      float[] expected, float[] actual, double tolerance, String what) {
    assertEquals(expected.length, actual.length, what + ": length");
    for (int i = 0; i < expected.length; i++) {
      double scale = Math.max(1, Math.abs(expected[i]));
      assertTrue(
          Math.abs(expected[i] - actual[i]) <= tolerance * scale,
          what + "[" + i + "]: expected " + expected[i] + " got " + actual[i]);
    }
  }

  // ---- GEMM -----------------------------------------------------------------------------------

  /** C = alpha op(A) op(B) + beta C, in double, on row-major arrays with strides. */
  static float[] gemmReference(
      boolean ta,
      boolean tb,
      int m,
      int n,
      int k,
      float alpha,
      float[] a,
      int lda,
      float[] b,
      int ldb,
      float beta,
      float[] c,
      int ldc) {
    float[] out = c.clone();
    for (int i = 0; i < m; i++) {
      for (int j = 0; j < n; j++) {
        double sum = 0;
        for (int p = 0; p < k; p++) {
          double av = ta ? a[p * lda + i] : a[i * lda + p];
          double bv = tb ? b[j * ldb + p] : b[p * ldb + j];
          sum += av * bv;
        }
        out[i * ldc + j] = (float) (alpha * sum + beta * c[i * ldc + j]);
      }
    }
    return out;
  }

  /**
   * A host buffer over 2 GiB (an offloaded ViT-H's fp32 masters) is written and read in ranges past
   * its first 2 GiB, and copied to and from the device there; viewed whole it is refused, naming it
   * (on CUDA, memory of the host's allocator, page-locked in place). Its fresh pages are zero and
   * untouched outside the ranges used, so it costs the host almost nothing.
   */
  @Test
  void hostBuffersOverTwoGibibytesAreReadInRangesAndCopiedPastTheirFirstTwo() {
    long bytes = HostBuffer.MAX_VIEW_BYTES + 1 + 4L * 4096;
    int n = 1024;
    float[] values = random(new Random(43), n);
    try (HostBuffer big = backend.allocateHost("big", bytes);
        DeviceBuffer d = backend.allocate("d", DType.F32, n)) {
      long last = bytes / 4 - n; // the last n floats: bytes past 2 GiB
      big.putFloats(last, values, 0, n);
      backend.copy(big, 4 * last, d, 4L * n, stream);
      backend.copy(d, big, 4 * (last - 2 * n), 4L * n, stream);
      stream.synchronize();
      float[] back = new float[n];
      big.getFloats(last - 2 * n, back, 0, n);
      assertArrayEquals(values, back);
      assertEquals(values[5], big.range(4 * (last + 5), 4).getFloat(0));
      IllegalStateException whole = assertThrows(IllegalStateException.class, big::asByteBuffer);
      assertTrue(whole.getMessage().startsWith("big: "), whole.getMessage());
      assertThrows(IndexOutOfBoundsException.class, () -> big.range(bytes - 4, 8));
    }
  }

  @Test
  void gemmMatchesTheReferenceForEveryTransposeAndOddSizes() {
    Random rng = new Random(1);
    int[][] shapes = {{1, 1, 1}, {3, 5, 7}, {17, 13, 31}, {64, 33, 5}, {2, 129, 65}};
    for (int[] s : shapes) {
      for (boolean ta : new boolean[] {false, true}) {
        for (boolean tb : new boolean[] {false, true}) {
          int m = s[0], n = s[1], k = s[2];
          int lda = (ta ? m : k) + 2; // padded rows: strides must be honoured
          int ldb = (tb ? k : n) + 1;
          int ldc = n + 3;
          float[] a = random(rng, (ta ? k : m) * lda);
          float[] b = random(rng, (tb ? n : k) * ldb);
          float[] c = random(rng, m * ldc);
          float[] expected = gemmReference(ta, tb, m, n, k, 0.7f, a, lda, b, ldb, -0.3f, c, ldc);
          try (DeviceBuffer da = upload("a", a);
              DeviceBuffer db = upload("b", b);
              DeviceBuffer dc = upload("c", c)) {
            backend.run(
                stream,
                new Gemm(
                    m,
                    n,
                    k,
                    0.7f,
                    new GemmOperand(da, lda, 0, ta),
                    new GemmOperand(db, ldb, 0, tb),
                    -0.3f,
                    GemmOperand.of(dc, ldc)));
            assertClose(
                expected,
                download(dc),
                1e-4,
                "gemm " + m + "x" + n + "x" + k + " ta=" + ta + " tb=" + tb);
          }
        }
      }
    }
  }

  @Test
  void stridedBatchedGemmPerItemAndSummedIntoOneC() {
    Random rng = new Random(21);
    int m = 5;
    int n = 7;
    int k = 3;
    int count = 4;
    float[] a = random(rng, m * k); // shared: stride 0
    float[] b = random(rng, count * n * k); // each item n x k, used transposed
    float[] c = random(rng, count * m * n);
    float[] expected = c.clone();
    float[] summed = random(rng, m * n);
    float[] expectedSum = new float[m * n];
    for (int i = 0; i < m * n; i++) {
      expectedSum[i] = 0.5f * summed[i];
    }
    for (int item = 0; item < count; item++) {
      float[] bi = java.util.Arrays.copyOfRange(b, item * n * k, (item + 1) * n * k);
      float[] ci = java.util.Arrays.copyOfRange(c, item * m * n, (item + 1) * m * n);
      float[] product = gemmReference(false, true, m, n, k, 2f, a, k, bi, k, 0.25f, ci, n);
      System.arraycopy(product, 0, expected, item * m * n, m * n);
      float[] plain = gemmReference(false, true, m, n, k, 2f, a, k, bi, k, 0f, new float[m * n], n);
      for (int i = 0; i < m * n; i++) {
        expectedSum[i] += plain[i];
      }
    }
    try (DeviceBuffer da = upload("a", a);
        DeviceBuffer db = upload("b", b);
        DeviceBuffer dc = upload("c", c);
        DeviceBuffer ds = upload("sum", summed)) {
      backend.run(
          stream,
          new GemmStridedBatched(
              m,
              n,
              k,
              2f,
              GemmOperand.of(da, k),
              GemmOperand.of(db, k).transposed().strided((long) n * k),
              0.25f,
              GemmOperand.of(dc, n).strided((long) m * n),
              count));
      assertClose(expected, download(dc), 1e-5, "per-item products");
      backend.run(
          stream,
          new GemmStridedBatched(
              m,
              n,
              k,
              2f,
              GemmOperand.of(da, k),
              GemmOperand.of(db, k).transposed().strided((long) n * k),
              0.5f,
              GemmOperand.of(ds, n),
              count));
      assertClose(expectedSum, download(ds), 1e-5, "products summed into one C");
      assertThrows(
          IllegalArgumentException.class,
          () ->
              backend.run(
                  stream,
                  new GemmStridedBatched(
                      m,
                      n,
                      k,
                      1f,
                      GemmOperand.of(da, k),
                      GemmOperand.of(db, k).transposed().strided((long) n * k),
                      0f,
                      GemmOperand.of(dc, n).strided((long) m * n),
                      count + 1)));
    }
  }

  @Test
  void bf16RoundsToNearestEvenAndWidensExactly() {
    // Golden bit patterns: 1 + 2^-8 is half-way between two bf16 values and rounds to the even
    // one (down); 1 + 3 * 2^-8 is half-way and rounds up to even; pi's dropped bits are below half.
    float[] values = {1f, 1.00390625f, 1.01171875f, (float) Math.PI, -2.5f, 1e-40f, Float.NaN};
    short[] expected = {0x3F80, 0x3F80, 0x3F82, 0x4049, (short) 0xC020, 0x0001, 0};
    for (int i = 0; i < values.length - 1; i++) {
      assertEquals(expected[i], Bf16.fromFloat(values[i]), "bf16 of " + values[i]);
    }
    assertTrue(Float.isNaN(Bf16.toFloat(Bf16.fromFloat(Float.NaN))), "NaN stays NaN");
    Random rng = new Random(31);
    float[] x = random(rng, 40_001);
    try (DeviceBuffer f = upload("f32", x);
        DeviceBuffer h = backend.allocate("bf16", DType.BF16, x.length);
        DeviceBuffer back = backend.allocate("back", DType.F32, x.length)) {
      backend.run(stream, new Convert(f, h));
      backend.run(stream, new Convert(h, back));
      float[] widened = download(back);
      for (int i = 0; i < x.length; i++) {
        assertEquals(Bf16.toFloat(Bf16.fromFloat(x[i])), widened[i], "element " + i);
        assertEquals(x[i], widened[i], Math.abs(x[i]) / 256, "within bf16's half ulp");
      }
      assertThrows(IllegalArgumentException.class, () -> backend.run(stream, new Convert(f, back)));
    }
  }

  @Test
  void gemmWithBf16OperandsAccumulatesInFp32() {
    Random rng = new Random(32);
    int m = 9;
    int n = 11;
    int k = 300; // long enough that bf16 accumulation would be visibly worse than fp32
    float[] a = random(rng, m * k);
    float[] b = random(rng, k * n);
    float[] ra = new float[a.length];
    float[] rb = new float[b.length];
    for (int i = 0; i < a.length; i++) {
      ra[i] = Bf16.toFloat(Bf16.fromFloat(a[i]));
    }
    for (int i = 0; i < b.length; i++) {
      rb[i] = Bf16.toFloat(Bf16.fromFloat(b[i]));
    }
    float[] expected =
        gemmReference(false, false, m, n, k, 1f, ra, k, rb, n, 0f, new float[m * n], n);
    try (DeviceBuffer fa = upload("a", a);
        DeviceBuffer fb = upload("b", b);
        DeviceBuffer ha = backend.allocate("a-bf16", DType.BF16, a.length);
        DeviceBuffer hb = backend.allocate("b-bf16", DType.BF16, b.length);
        DeviceBuffer c = backend.allocate("c", DType.F32, m * n)) {
      backend.run(stream, new Convert(fa, ha));
      backend.run(stream, new Convert(fb, hb));
      backend.run(
          stream,
          new Gemm(
              m, n, k, 1f, GemmOperand.of(ha, k), GemmOperand.of(hb, n), 0f, GemmOperand.of(c, n)));
      assertClose(expected, download(c), 1e-5, "bf16 x bf16");
      backend.run(
          stream,
          new Gemm(
              m, n, k, 1f, GemmOperand.of(ha, k), GemmOperand.of(fb, n), 0f, GemmOperand.of(c, n)));
      float[] mixed =
          gemmReference(false, false, m, n, k, 1f, ra, k, b, n, 0f, new float[m * n], n);
      assertClose(mixed, download(c), 1e-5, "bf16 x f32");
    }
  }

  /** A convolution's GEMMs in bf16: operands rounded, products accumulated in fp32, both modes. */
  @Test
  void stridedBatchedGemmWithBf16Operands() {
    Random rng = new Random(23);
    int m = 6, n = 70, k = 40, count = 3;
    float[] a = random(rng, m * k); // shared weights
    float[] b = random(rng, count * k * n); // per-image columns
    float[] ra = new float[a.length];
    float[] rb = new float[b.length];
    for (int i = 0; i < a.length; i++) {
      ra[i] = Bf16.toFloat(Bf16.fromFloat(a[i]));
    }
    for (int i = 0; i < b.length; i++) {
      rb[i] = Bf16.toFloat(Bf16.fromFloat(b[i]));
    }
    float[] expected = new float[count * m * n];
    float[] expectedSum = new float[m * n];
    for (int item = 0; item < count; item++) {
      float[] bi = java.util.Arrays.copyOfRange(rb, item * k * n, (item + 1) * k * n);
      float[] product =
          gemmReference(false, false, m, n, k, 1f, ra, k, bi, n, 0f, new float[m * n], n);
      System.arraycopy(product, 0, expected, item * m * n, m * n);
      for (int i = 0; i < m * n; i++) {
        expectedSum[i] += product[i];
      }
    }
    try (DeviceBuffer fa = upload("a", a);
        DeviceBuffer fb = upload("b", b);
        DeviceBuffer ha = backend.allocate("a-bf16", DType.BF16, a.length);
        DeviceBuffer hb = backend.allocate("b-bf16", DType.BF16, b.length);
        DeviceBuffer c = backend.allocate("c", DType.F32, (long) count * m * n);
        DeviceBuffer sum = backend.allocate("sum", DType.F32, (long) m * n)) {
      backend.run(stream, new Convert(fa, ha));
      backend.run(stream, new Convert(fb, hb));
      backend.run(
          stream,
          new GemmStridedBatched(
              m,
              n,
              k,
              1f,
              GemmOperand.of(ha, k),
              GemmOperand.of(hb, n).strided((long) k * n),
              0f,
              GemmOperand.of(c, n).strided((long) m * n),
              count));
      assertClose(expected, download(c), 1e-5, "bf16 per item");
      backend.run(
          stream,
          new GemmStridedBatched(
              m,
              n,
              k,
              1f,
              GemmOperand.of(ha, k),
              GemmOperand.of(hb, n).strided((long) k * n),
              0f,
              GemmOperand.of(sum, n),
              count));
      assertClose(expectedSum, download(sum), 1e-5, "bf16 summed into one C");
    }
  }

  @Test
  void gemmOnViewsOfOneSlab() {
    // Parameters live in one slab; layers use views of it.
    Random rng = new Random(2);
    float[] slab = random(rng, 100);
    float[] x = random(rng, 4 * 6);
    try (DeviceBuffer s = upload("slab", slab);
        DeviceBuffer dx = upload("x", x);
        DeviceBuffer y = backend.allocate("y", DType.F32, 4 * 5)) {
      DeviceBuffer w = s.view(37, 5 * 6); // a 5x6 weight at offset 37
      backend.run(
          stream,
          new Gemm(
              4,
              5,
              6,
              1f,
              GemmOperand.of(dx, 6),
              GemmOperand.of(w, 6).transposed(),
              0f,
              GemmOperand.of(y, 5)));
      float[] weight = java.util.Arrays.copyOfRange(slab, 37, 37 + 30);
      assertClose(
          gemmReference(false, true, 4, 5, 6, 1f, x, 6, weight, 6, 0f, new float[20], 5),
          download(y),
          1e-5,
          "gemm on a view");
    }
  }

  @Test
  void gemmRejectsBuffersTooSmallForTheShape() {
    try (DeviceBuffer a = backend.allocate("a", DType.F32, 5);
        DeviceBuffer b = backend.allocate("b", DType.F32, 6);
        DeviceBuffer c = backend.allocate("c", DType.F32, 6)) {
      var e =
          assertThrows(
              IllegalArgumentException.class,
              () ->
                  backend.run(
                      stream,
                      new Gemm(
                          2,
                          3,
                          3,
                          1,
                          GemmOperand.of(a, 3),
                          GemmOperand.of(b, 3),
                          0,
                          GemmOperand.of(c, 3))));
      assertTrue(e.getMessage().contains("a has 5 elements"), e.getMessage());
    }
  }

  // ---- elementwise and reductions
  // ----------------------------------------------------------------

  @Test
  void biasAddAndColumnSums() {
    Random rng = new Random(3);
    int rows = 7, cols = 11;
    float[] y = random(rng, rows * cols);
    float[] bias = random(rng, cols);
    float[] out = random(rng, cols);
    float[] expectedY = y.clone();
    float[] expectedSum = new float[cols];
    for (int c = 0; c < cols; c++) {
      double s = 0;
      for (int r = 0; r < rows; r++) {
        expectedY[r * cols + c] += bias[c];
        s += y[r * cols + c];
      }
      expectedSum[c] = (float) (0.5 * out[c] + s);
    }
    try (DeviceBuffer dy = upload("y", y);
        DeviceBuffer db = upload("bias", bias);
        DeviceBuffer dout = upload("out", out)) {
      backend.run(stream, new SumRows(dy, dout, rows, cols, 0.5f));
      backend.run(stream, new AddBias(dy, db, rows, cols));
      assertClose(expectedSum, download(dout), 1e-5, "sumRows");
      assertClose(expectedY, download(dy), 1e-6, "addBias");
    }
  }

  /**
   * A tall matrix's column sums (the bias gradient of ConvNeXt's first stage: 100,352 rows at batch
   * 32), which every engine sums in double over many lanes and row groups ({@code ColumnSumOrder}):
   * a row dealt to no lane, or to two, moves a total by a whole element, while the double sums of
   * 30,000 floats stay within 30,000 · 2^-53 of the sum of magnitudes, far below a float's half ulp
   * here, so each total is the exact sum rounded once, give or take one ulp where the exact sum
   * lies near a rounding boundary.
   */
  @Test
  void columnSumsOfATallMatrixAreTheExactSumsRoundedOnce() {
    Random rng = new Random(8);
    int rows = 30_000, cols = 5;
    float[] y = random(rng, rows * cols);
    for (int i = 0; i < y.length; i++) {
      y[i] += 0.25f; // sums far from 0, so an ulp is a relative bound
    }
    try (DeviceBuffer dy = upload("y", y);
        DeviceBuffer dout = upload("out", new float[cols])) {
      backend.run(stream, new SumRows(dy, dout, rows, cols, 0f));
      float[] got = download(dout);
      for (int c = 0; c < cols; c++) {
        java.math.BigDecimal exact = java.math.BigDecimal.ZERO;
        for (int r = 0; r < rows; r++) {
          exact = exact.add(new java.math.BigDecimal(y[r * cols + c]));
        }
        float expected = exact.floatValue();
        assertTrue(
            Math.abs(got[c] - expected) <= Math.ulp(expected),
            "column " + c + ": expected " + expected + " got " + got[c]);
      }
    }
  }

  @Test
  void reluOnRandomValuesAndSignedZeros() {
    Random rng = new Random(52);
    float[] x = random(rng, 30_001);
    x[0] = 0f;
    x[1] = -0f;
    x[2] = Float.MIN_VALUE;
    x[3] = -Float.MIN_VALUE;
    float[] dyv = random(rng, x.length);
    float[] expectedY = new float[x.length];
    float[] expectedDx = new float[x.length];
    for (int i = 0; i < x.length; i++) {
      expectedY[i] = x[i] > 0 ? x[i] : 0f;
      expectedDx[i] = x[i] > 0 ? dyv[i] : 0f;
    }
    try (DeviceBuffer dx = upload("x", x);
        DeviceBuffer dy = upload("dy", dyv);
        DeviceBuffer y = backend.allocate("y", DType.F32, x.length);
        DeviceBuffer g = backend.allocate("dx", DType.F32, x.length)) {
      backend.run(stream, new Relu(dx, y));
      backend.run(stream, new ReluBackward(dx, dy, g));
      float[] gotY = download(y);
      float[] gotDx = download(g);
      for (int i = 0; i < x.length; i++) {
        assertEquals(expectedY[i], gotY[i], 0f, "relu(" + x[i] + ")");
        assertEquals(expectedDx[i], gotDx[i], 0f, "relu'(" + x[i] + ")");
      }
    }
  }

  @Test
  void reluForwardAndBackward() {
    float[] x = {-2, -0.5f, 0, 0.5f, 3};
    float[] dy = {1, 2, 3, 4, 5};
    try (DeviceBuffer dx = upload("x", x);
        DeviceBuffer y = backend.allocate("y", DType.F32, 5);
        DeviceBuffer g = upload("dy", dy);
        DeviceBuffer gx = backend.allocate("dx", DType.F32, 5)) {
      backend.run(stream, new Relu(dx, y));
      backend.run(stream, new ReluBackward(dx, g, gx));
      assertArrayEquals(new float[] {0, 0, 0, 0.5f, 3}, download(y));
      assertArrayEquals(new float[] {0, 0, 0, 4, 5}, download(gx));
    }
  }

  @Test
  void geluMatchesKnownValuesAndItsDerivative() {
    // GELU(x) = x * Phi(x); values from the normal CDF: Phi(1) = 0.8413447460685429, Phi(0.5) =
    // 0.6914624612740131.
    float[] x = {-1, 0, 0.5f, 1, 2.5f};
    float[] expected = {-0.15865525f, 0, 0.34573123f, 0.84134475f, 2.4844758f};
    try (DeviceBuffer dx = upload("x", x);
        DeviceBuffer y = backend.allocate("y", DType.F32, 5)) {
      backend.run(stream, new Gelu(dx, y));
      assertClose(expected, download(y), 2e-6, "gelu");
    }
    float h = 1e-3f;
    float[] xs = {-1.3f, -0.2f, 0.4f, 1.7f};
    float[] plus = new float[4];
    float[] minus = new float[4];
    for (int i = 0; i < 4; i++) {
      plus[i] = xs[i] + h;
      minus[i] = xs[i] - h;
    }
    try (DeviceBuffer dx = upload("x", xs);
        DeviceBuffer dp = upload("xp", plus);
        DeviceBuffer dm = upload("xm", minus);
        DeviceBuffer yp = backend.allocate("yp", DType.F32, 4);
        DeviceBuffer ym = backend.allocate("ym", DType.F32, 4);
        DeviceBuffer ones = upload("ones", new float[] {1, 1, 1, 1});
        DeviceBuffer grad = backend.allocate("grad", DType.F32, 4)) {
      backend.run(stream, new Gelu(dp, yp));
      backend.run(stream, new Gelu(dm, ym));
      backend.run(stream, new GeluBackward(dx, ones, grad));
      float[] up = download(yp);
      float[] down = download(ym);
      float[] numeric = new float[4];
      for (int i = 0; i < 4; i++) {
        numeric[i] = (up[i] - down[i]) / (2 * h);
      }
      assertClose(numeric, download(grad), 2e-3, "gelu'");
    }
  }

  // ---- loss -------------------------------------------------------------------------------------

  @Test
  void softmaxCrossEntropyWithSmoothingAndItsGradient() {
    Random rng = new Random(4);
    int rows = 5, classes = 7;
    float smoothing = 0.1f;
    float[] logits = random(rng, rows * classes);
    int[] labels = {0, 6, 3, 3, 1};
    double[] expectedLoss = new double[rows];
    for (int r = 0; r < rows; r++) {
      double max = Double.NEGATIVE_INFINITY;
      for (int c = 0; c < classes; c++) {
        max = Math.max(max, logits[r * classes + c]);
      }
      double sum = 0;
      for (int c = 0; c < classes; c++) {
        sum += Math.exp(logits[r * classes + c] - max);
      }
      for (int c = 0; c < classes; c++) {
        double target = (c == labels[r] ? 1 - smoothing : 0) + smoothing / classes;
        expectedLoss[r] -= target * (logits[r * classes + c] - max - Math.log(sum));
      }
    }
    try (DeviceBuffer dl = upload("logits", logits);
        DeviceBuffer dy = uploadInts("labels", labels);
        DeviceBuffer loss = backend.allocate("loss", DType.F32, rows);
        DeviceBuffer grad = backend.allocate("dlogits", DType.F32, rows * classes)) {
      backend.run(stream, new SoftmaxCrossEntropy(dl, dy, rows, classes, smoothing, loss, grad));
      float[] got = download(loss);
      for (int r = 0; r < rows; r++) {
        assertEquals(expectedLoss[r], got[r], 1e-5, "loss of row " + r);
      }
      // d(mean loss)/d logit by central differences of the reference.
      float[] analytic = download(grad);
      double h = 1e-3;
      for (int i = 0; i < rows * classes; i += 3) {
        float[] p = logits.clone();
        float[] q = logits.clone();
        p[i] += (float) h;
        q[i] -= (float) h;
        double numeric =
            (meanLoss(p, labels, rows, classes, smoothing)
                    - meanLoss(q, labels, rows, classes, smoothing))
                / (2 * h);
        assertEquals(numeric, analytic[i], 2e-4, "dlogits[" + i + "]");
      }
    }
  }

  private static double meanLoss(
      float[] logits, int[] labels, int rows, int classes, float smoothing) {
    double total = 0;
    for (int r = 0; r < rows; r++) {
      double max = Double.NEGATIVE_INFINITY;
      for (int c = 0; c < classes; c++) {
        max = Math.max(max, logits[r * classes + c]);
      }
      double sum = 0;
      for (int c = 0; c < classes; c++) {
        sum += Math.exp(logits[r * classes + c] - max);
      }
      for (int c = 0; c < classes; c++) {
        double target = (c == labels[r] ? 1 - smoothing : 0) + smoothing / classes;
        total -= target * (logits[r * classes + c] - max - Math.log(sum));
      }
    }
    return total / rows;
  }

  /**
   * Mixed targets (mixup/cutmix, timm's mixup_target with label smoothing): row i's target is λ
   * times its smoothed one-hot and 1 - λ times that of row rows - 1 - i; loss against the double
   * reference, the gradient against central differences of it.
   */
  @Test
  void softmaxCrossEntropyOnMixedTargetsAndItsGradient() {
    Random rng = new Random(14);
    int rows = 5, classes = 4;
    float smoothing = 0.1f;
    float lambda = 0.3f;
    float[] logits = random(rng, rows * classes);
    int[] labels = {0, 3, 2, 2, 1};
    try (DeviceBuffer dl = upload("logits", logits);
        DeviceBuffer dy = uploadInts("labels", labels);
        DeviceBuffer loss = backend.allocate("loss", DType.F32, rows);
        DeviceBuffer grad = backend.allocate("dlogits", DType.F32, rows * classes)) {
      backend.run(
          stream, new SoftmaxCrossEntropy(dl, dy, rows, classes, smoothing, lambda, loss, grad));
      float[] got = download(loss);
      for (int r = 0; r < rows; r++) {
        assertEquals(
            mixedLoss(logits, labels, rows, classes, smoothing, lambda, r),
            got[r],
            1e-5,
            "loss of row " + r);
      }
      float[] analytic = download(grad);
      double h = 1e-3;
      for (int i = 0; i < rows * classes; i++) {
        float[] p = logits.clone();
        float[] q = logits.clone();
        p[i] += (float) h;
        q[i] -= (float) h;
        double numeric = 0;
        for (int r = 0; r < rows; r++) {
          numeric +=
              (mixedLoss(p, labels, rows, classes, smoothing, lambda, r)
                      - mixedLoss(q, labels, rows, classes, smoothing, lambda, r))
                  / (2 * h * rows);
        }
        assertEquals(numeric, analytic[i], 2e-4, "dlogits[" + i + "]");
      }
    }
  }

  /** Row r's loss on λ y_r + (1 - λ) y_{rows-1-r}, each y smoothed as timm's one_hot. */
  private static double mixedLoss(
      float[] logits, int[] labels, int rows, int classes, float smoothing, float lambda, int r) {
    double max = Double.NEGATIVE_INFINITY;
    for (int c = 0; c < classes; c++) {
      max = Math.max(max, logits[r * classes + c]);
    }
    double sum = 0;
    for (int c = 0; c < classes; c++) {
      sum += Math.exp(logits[r * classes + c] - max);
    }
    double off = smoothing / (double) classes;
    double on = 1 - smoothing + off;
    double loss = 0;
    for (int c = 0; c < classes; c++) {
      double target =
          lambda * (c == labels[r] ? on : off)
              + (1 - (double) lambda) * (c == labels[rows - 1 - r] ? on : off);
      loss -= target * (logits[r * classes + c] - max - Math.log(sum));
    }
    return loss;
  }

  /** timm's batch mixup: products rounded to fp32, then summed; an odd batch's middle kept. */
  @Test
  void blendBatchMixesEachSampleWithItsMirror() {
    Random rng = new Random(15);
    for (int batch : new int[] {4, 5, 1}) {
      int size = 7;
      float[] x = random(rng, batch * size);
      double lambda = 0.37;
      float lam = (float) lambda;
      float other = (float) (1 - lambda);
      float[] expected = new float[x.length];
      for (int i = 0; i < batch; i++) {
        for (int k = 0; k < size; k++) {
          float own = x[i * size + k] * lam;
          float mirror = x[(batch - 1 - i) * size + k] * other;
          expected[i * size + k] = own + mirror;
        }
      }
      try (DeviceBuffer dx = upload("x", x)) {
        backend.run(stream, BlendBatch.of(dx, batch, size, lambda));
        assertArrayEquals(expected, download(dx), "batch of " + batch);
      }
    }
  }

  /**
   * torchvision's ColorJitter on normalized images, against a double-precision reference on the
   * op's own draws (order and factors from the counter RNG): within 2e-5, the float rounding of
   * values in [0, 1] (a few 6e-8) divided by a std of 0.22, and of the contrast's mean grey.
   */
  @Test
  void colorJitterAdjustsEachImageInItsDrawnOrder() {
    Random rng = new Random(16);
    for (int c : new int[] {3, 1}) {
      int batch = 5, h = 6, w = 7, plane = h * w;
      float[] mean = c == 3 ? new float[] {0.485f, 0.456f, 0.406f} : new float[] {0.5f};
      float[] std = c == 3 ? new float[] {0.229f, 0.224f, 0.225f} : new float[] {0.25f};
      float[] x = new float[batch * c * plane];
      for (int k = 0; k < x.length; k++) {
        int ch = (k / plane) % c;
        x[k] = (rng.nextInt(256) / 255f - mean[ch]) / std[ch];
      }
      double[] expected = new double[x.length];
      for (int i = 0; i < batch; i++) {
        double[] v = new double[c * plane];
        for (int k = 0; k < v.length; k++) {
          v[k] = (double) x[i * c * plane + k] * std[k / plane] + mean[k / plane];
        }
        for (int which : ColorJitter.order(99, i)) {
          if (which == 2 && c == 1) {
            continue;
          }
          double f = ColorJitter.factor(0.4f, 99, i, which);
          double[] grey = new double[plane];
          double greyMean = 0;
          for (int p = 0; p < plane; p++) {
            grey[p] =
                c == 1 ? v[p] : 0.2989 * v[p] + 0.587 * v[plane + p] + 0.114 * v[2 * plane + p];
            greyMean += grey[p] / plane;
          }
          for (int k = 0; k < v.length; k++) {
            double other = which == 0 ? 0 : which == 1 ? greyMean : grey[k % plane];
            v[k] = Math.min(1, Math.max(0, f * v[k] + (1 - f) * other));
          }
        }
        for (int k = 0; k < v.length; k++) {
          expected[i * c * plane + k] = (v[k] - mean[k / plane]) / std[k / plane];
        }
      }
      try (DeviceBuffer dx = upload("x", x)) {
        backend.run(stream, new ColorJitter(dx, batch, c, h, w, mean, std, 0.4f, 0.4f, 0.4f, 99));
        float[] got = download(dx);
        for (int k = 0; k < got.length; k++) {
          assertEquals(expected[k], got[k], 2e-5, c + " channels, element " + k);
        }
      }
    }
  }

  @Test
  void cutMixSwapsTheBoxBetweenMirroredSamples() {
    int batch = 3, c = 2, h = 4, w = 5;
    float[] x = new float[batch * c * h * w];
    for (int i = 0; i < x.length; i++) {
      x[i] = i;
    }
    float[] expected = x.clone();
    int top = 1, bottom = 3, left = 2, right = 5;
    for (int i = 0; i < batch; i++) {
      int j = batch - 1 - i;
      for (int ch = 0; ch < c; ch++) {
        for (int y = top; y < bottom; y++) {
          for (int col = left; col < right; col++) {
            expected[((i * c + ch) * h + y) * w + col] = x[((j * c + ch) * h + y) * w + col];
          }
        }
      }
    }
    try (DeviceBuffer dx = upload("x", x)) {
      backend.run(stream, new CutMixBatch(dx, batch, c, h, w, top, bottom, left, right));
      assertArrayEquals(expected, download(dx));
    }
    assertThrows(
        IllegalArgumentException.class,
        () -> new CutMixBatch(null, batch, c, h, w, 0, 5, 0, 1),
        "a box outside the image");
  }

  @Test
  void aBadLabelFailsAtSynchronizeNamingTheStreamAndRow() {
    try (DeviceBuffer dl = upload("logits", new float[6]);
        DeviceBuffer dy = uploadInts("labels", new int[] {1, 7});
        DeviceBuffer loss = backend.allocate("loss", DType.F32, 2);
        DeviceBuffer grad = backend.allocate("g", DType.F32, 6)) {
      backend.run(stream, new SoftmaxCrossEntropy(dl, dy, 2, 3, 0, loss, grad));
      var e = assertThrows(BackendException.class, () -> stream.synchronize());
      assertTrue(
          e.getMessage().contains("'main'") && e.getMessage().contains("label 7 of row 1"),
          e.getMessage());
    }
  }

  // ---- input normalization
  // ------------------------------------------------------------------------

  @Test
  void uint8HwcBecomesNormalizedNchw() {
    int n = 2, h = 2, w = 3, c = 3;
    byte[] pixels = new byte[n * h * w * c];
    for (int i = 0; i < pixels.length; i++) {
      pixels[i] = (byte) (i * 7);
    }
    float[] mean = {0.485f, 0.456f, 0.406f};
    float[] std = {0.229f, 0.224f, 0.225f};
    float[] expected = new float[pixels.length];
    for (int img = 0; img < n; img++) {
      for (int ch = 0; ch < c; ch++) {
        for (int p = 0; p < h * w; p++) {
          int v = pixels[(img * h * w + p) * c + ch] & 0xFF;
          expected[(img * c + ch) * h * w + p] = (float) ((v / 255.0 - mean[ch]) / std[ch]);
        }
      }
    }
    try (DeviceBuffer u8 = backend.allocate("u8", DType.U8, pixels.length);
        DeviceBuffer out = backend.allocate("x", DType.F32, pixels.length);
        HostBuffer staging = backend.allocateHost("staging", pixels.length)) {
      staging.asByteBuffer().put(pixels);
      backend.copy(staging, 0, u8, pixels.length, stream);
      backend.run(stream, new NormalizeImages(u8, n, h, w, c, mean, std, out));
      assertClose(expected, download(out), 1e-5, "normalize");
    }
  }

  // ---- optimizers
  // ---------------------------------------------------------------------------------

  @Test
  void sgdWithMomentumNesterovAndDecayByHand() {
    float lr = 0.1f, mu = 0.9f, wd = 0.01f;
    float[] p = {1, -2};
    float[] g1 = {0.5f, 0.25f};
    float[] g2 = {-1, 2};
    for (boolean nesterov : new boolean[] {false, true}) {
      float[] ep = p.clone();
      float[] buf = new float[2];
      for (float[] g : new float[][] {g1, g2}) {
        for (int i = 0; i < 2; i++) {
          float d = g[i] + wd * ep[i];
          buf[i] = mu * buf[i] + d;
          ep[i] -= lr * (nesterov ? d + mu * buf[i] : buf[i]);
        }
      }
      try (DeviceBuffer dp = upload("p", p);
          DeviceBuffer db = backend.allocate("buf", DType.F32, 2);
          DeviceBuffer dg1 = upload("g1", g1);
          DeviceBuffer dg2 = upload("g2", g2)) {
        backend.run(stream, new SgdStep(dp, dg1, db, lr, mu, wd, nesterov));
        backend.run(stream, new SgdStep(dp, dg2, db, lr, mu, wd, nesterov));
        assertClose(ep, download(dp), 1e-6, "sgd nesterov=" + nesterov);
      }
    }
  }

  @Test
  void adamwTwoStepsByHand() {
    // torch.optim.AdamW, lr 0.01, betas (0.9, 0.999), eps 1e-8, weight decay 0.1; computed in
    // double.
    double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
    double[] p = {0.5, -1.5, 2};
    double[][] grads = {{0.1, -0.2, 0.3}, {0.05, 0.4, -0.6}};
    double[] m = new double[3];
    double[] v = new double[3];
    for (int t = 1; t <= 2; t++) {
      for (int i = 0; i < 3; i++) {
        p[i] *= 1 - lr * wd;
        m[i] = b1 * m[i] + (1 - b1) * grads[t - 1][i];
        v[i] = b2 * v[i] + (1 - b2) * grads[t - 1][i] * grads[t - 1][i];
        double denom = Math.sqrt(v[i]) / Math.sqrt(1 - Math.pow(b2, t)) + eps;
        p[i] -= lr / (1 - Math.pow(b1, t)) * m[i] / denom;
      }
    }
    try (DeviceBuffer dp = upload("p", new float[] {0.5f, -1.5f, 2});
        DeviceBuffer dm = backend.allocate("m", DType.F32, 3);
        DeviceBuffer dv = backend.allocate("v", DType.F32, 3);
        DeviceBuffer g1 = upload("g1", new float[] {0.1f, -0.2f, 0.3f});
        DeviceBuffer g2 = upload("g2", new float[] {0.05f, 0.4f, -0.6f})) {
      backend.run(stream, new AdamWStep(dp, g1, dm, dv, 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 1));
      backend.run(stream, new AdamWStep(dp, g2, dm, dv, 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 2));
      assertClose(
          new float[] {(float) p[0], (float) p[1], (float) p[2]}, download(dp), 1e-6, "adamw");
    }
  }

  @Test
  void gradientNormIsComputedAndClippedOnTheDevice() {
    float[] g = {3, 4, 0, 0, 12}; // norm 13
    try (DeviceBuffer dg = upload("grads", g);
        DeviceBuffer norm = backend.allocate("norm", DType.F32, 1)) {
      backend.run(stream, new ClipGradNorm(dg, 0, norm)); // measure only
      assertEquals(13f, download(norm)[0], 1e-5);
      assertArrayEquals(g, download(dg));
      backend.run(stream, new ClipGradNorm(dg, 6.5f, norm));
      assertEquals(13f, download(norm)[0], 1e-5);
      float coef = 6.5f / (13f + 1e-6f);
      assertClose(new float[] {3 * coef, 4 * coef, 0, 0, 12 * coef}, download(dg), 1e-6, "clipped");
      backend.run(stream, new ClipGradNorm(dg, 100f, norm)); // under the limit: untouched
      assertClose(
          new float[] {3 * coef, 4 * coef, 0, 0, 12 * coef},
          download(dg),
          1e-6,
          "not clipped again");
    }
  }

  // ---- convolution and pooling ------------------------------------------------------------------

  @Test
  void im2colReadsEveryPatchWithZeroPaddingAndCol2imIsItsAdjoint() {
    // {n, c, h, w, k, stride, pad}: odd sizes, strides 1 to 3, padding wider than the stride.
    int[][] shapes = {
      {2, 3, 5, 4, 3, 2, 1},
      {1, 2, 6, 7, 3, 1, 1},
      {2, 1, 4, 4, 1, 1, 0},
      {1, 2, 9, 8, 5, 3, 2},
      {1, 1, 3, 5, 3, 1, 2}
    };
    for (int[] shape : shapes) {
      checkIm2col(shape[0], shape[1], shape[2], shape[3], shape[4], shape[5], shape[6]);
    }
  }

  private void checkIm2col(int n, int c, int h, int w, int k, int stride, int pad) {
    Random rng = new Random(6);
    int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
    int width = c * k * k;
    float[] x = random(rng, n * c * h * w);
    float[] expected = new float[n * oh * ow * width];
    for (int img = 0; img < n; img++) {
      for (int oy = 0; oy < oh; oy++) {
        for (int ox = 0; ox < ow; ox++) {
          for (int ch = 0; ch < c; ch++) {
            for (int ky = 0; ky < k; ky++) {
              for (int kx = 0; kx < k; kx++) {
                int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
                float v =
                    iy < 0 || iy >= h || ix < 0 || ix >= w
                        ? 0
                        : x[((img * c + ch) * h + iy) * w + ix];
                expected[
                        img * width * oh * ow + ((ch * k + ky) * k + kx) * oh * ow + oy * ow + ox] =
                    v;
              }
            }
          }
        }
      }
    }
    float[] y = random(rng, expected.length);
    try (DeviceBuffer dx = upload("x", x);
        DeviceBuffer cols = backend.allocate("cols", DType.F32, expected.length);
        DeviceBuffer dy = upload("y", y);
        DeviceBuffer back = backend.allocate("back", DType.F32, x.length)) {
      backend.run(stream, new Im2col(dx, new ConvWindow(n, c, h, w, k, k, stride, pad), cols));
      float[] got = download(cols);
      assertArrayEquals(expected, got);
      backend.run(stream, new Col2im(dy, new ConvWindow(n, c, h, w, k, k, stride, pad), back));
      float[] adj = download(back);
      double lhs = 0, rhs = 0; // <im2col(x), y> == <x, col2im(y)>
      for (int i = 0; i < got.length; i++) {
        lhs += (double) got[i] * y[i];
      }
      for (int i = 0; i < x.length; i++) {
        rhs += (double) x[i] * adj[i];
      }
      assertEquals(lhs, rhs, 1e-4 * Math.max(1, Math.abs(lhs)));
    }
  }

  @Test
  void convolutionAndItsGradientsAgainstTheDirectSumWithinTheFp32Bound() {
    // {n, c, h, w, out, k, stride, pad}: odd sizes, stride 2 and 3, padding, batch 1, 1x1, a
    // one-channel first layer, ResNet's 7x7 stem, and channel counts an engine blocks by 16.
    int[][] shapes = {
      {2, 3, 5, 4, 2, 3, 2, 1},
      {1, 2, 7, 6, 3, 3, 1, 1},
      {2, 5, 4, 4, 4, 1, 1, 0},
      {1, 2, 9, 8, 3, 5, 3, 2},
      {2, 1, 9, 9, 16, 3, 1, 1},
      {1, 3, 13, 11, 8, 7, 2, 3},
      {3, 16, 9, 9, 32, 3, 1, 1},
      {2, 32, 8, 8, 16, 1, 2, 0}
    };
    for (int[] sh : shapes) {
      for (boolean bias : new boolean[] {true, false}) {
        checkConvolution(
            new ConvWindow(sh[0], sh[1], sh[2], sh[3], sh[5], sh[5], sh[6], sh[7]), sh[4], bias);
      }
    }
  }

  /**
   * One convolution forward and backward against double-precision sums. Whatever the order an
   * engine sums in, an fp32 sum of K products is within γ(K)·Σ|products| of the exact one (γ(K) =
   * K·u/(1−K·u), u = 2⁻²⁴; Higham, Accuracy and Stability, §3.1): the tolerance of each element,
   * with one more term for the bias or for the gradient it is added into.
   */
  private void checkConvolution(ConvWindow win, int out, boolean hasBias) {
    Random rng = new Random(win.hashCode() * 31 + out);
    int n = win.n(), c = win.c(), h = win.h(), w = win.w(), k = win.kh();
    int oh = win.oh(), ow = win.ow();
    float[] x = random(rng, n * c * h * w);
    float[] wt = random(rng, out * c * k * k);
    float[] b = random(rng, out);
    float[] dy = random(rng, n * out * oh * ow);
    float[] dw0 = random(rng, wt.length); // gradients accumulate into what is there
    float[] db0 = random(rng, out);
    double[][] sums = exactSums(win, out, x, wt, dy);
    double[] y = sums[0], yAbs = sums[1], dx = sums[2], dxAbs = sums[3], dw = sums[4];
    double[] dwAbs = sums[5];
    double[] db = new double[out], dbAbs = new double[out];
    for (int yi = 0; yi < dy.length; yi++) {
      int o = yi / (oh * ow) % out;
      db[o] += dy[yi];
      dbAbs[o] += Math.abs(dy[yi]);
      if (hasBias) {
        y[yi] += b[o];
        yAbs[yi] += Math.abs(b[o]);
      }
    }
    for (int i = 0; i < wt.length; i++) {
      dw[i] += dw0[i];
      dwAbs[i] += Math.abs(dw0[i]);
    }
    for (int o = 0; o < out; o++) {
      db[o] += db0[o];
      dbAbs[o] += Math.abs(db0[o]);
    }
    int patch = c * k * k;
    String what = win + " out " + out + (hasBias ? " with bias" : "");
    // Activations as views into one slab at odd offsets, as layers hand them over.
    int atX = 3, atY = atX + x.length + 5, atDy = atY + dy.length + 1, atDx = atDy + dy.length + 7;
    float[] slab = random(rng, atDx + x.length + 2);
    System.arraycopy(x, 0, slab, atX, x.length);
    System.arraycopy(dy, 0, slab, atDy, dy.length);
    try (DeviceBuffer activations = upload("activations", slab);
        DeviceBuffer wd = upload("w", wt);
        DeviceBuffer bd = upload("b", b);
        DeviceBuffer dwd = upload("dw", dw0);
        DeviceBuffer dbd = upload("db", db0);
        DeviceBuffer cols = backend.allocate("cols", DType.F32, win.columnCount())) {
      DeviceBuffer xd = activations.view(atX, x.length);
      DeviceBuffer yd = activations.view(atY, dy.length);
      DeviceBuffer dyd = activations.view(atDy, dy.length);
      DeviceBuffer dxd = activations.view(atDx, x.length);
      backend.run(stream, new Convolution(xd, wd, hasBias ? bd : null, yd, win, out, cols));
      assertWithinSumBound(y, yAbs, patch + 1, download(yd), what + ": y");
      backend.run(
          stream,
          new ConvolutionBackward(xd, dyd, wd, dwd, hasBias ? dbd : null, dxd, win, out, cols));
      assertWithinSumBound(dx, dxAbs, out * k * k, download(dxd), what + ": dx");
      assertWithinSumBound(dw, dwAbs, n * oh * ow + 1, download(dwd), what + ": dw");
      if (hasBias) {
        assertWithinSumBound(db, dbAbs, n * oh * ow + 1, download(dbd), what + ": db");
      } else {
        assertArrayEquals(db0, download(dbd), what + ": db untouched");
      }
      // Without an input gradient: the weight gradient alone, added again.
      float[] before = download(dwd);
      float[] dxBefore = download(dxd);
      backend.run(stream, new ConvolutionBackward(xd, dyd, wd, dwd, null, null, win, out, cols));
      double[] twice = new double[dw.length], twiceAbs = new double[dw.length];
      for (int i = 0; i < dw.length; i++) {
        twice[i] = before[i] + (dw[i] - dw0[i]);
        twiceAbs[i] = Math.abs(before[i]) + (dwAbs[i] - Math.abs(dw0[i]));
      }
      assertWithinSumBound(twice, twiceAbs, n * oh * ow + 1, download(dwd), what + ": dw again");
      assertArrayEquals(dxBefore, download(dxd), what + ": dx untouched without one asked for");
      float[] after = download(activations);
      for (int i = 0; i < slab.length; i++) {
        boolean written = (i >= atY && i < atY + dy.length) || (i >= atDx && i < atDx + x.length);
        if (!written) {
          assertEquals(slab[i], after[i], what + ": slab[" + i + "] outside the outputs");
        }
      }
    }
  }

  /**
   * Where the engine has a blocked channel layout: a convolution reading and writing it computes
   * exactly what the same convolution over NCHW does (the NCHW one is reordered into that layout
   * around the same primitive; reorders are exact), input, output and gradients. Shapes: channels
   * in two blocks, a stride-2 1×1 shortcut, and a stem whose few input channels stay NCHW. On an
   * engine without one, a blocked convolution is refused, naming the engine it needs.
   */
  @Test
  void blockedConvolutionsComputeWhatNchwOnesDo() {
    int block = backend.channelBlock();
    if (block == 1) {
      ConvWindow win = new ConvWindow(1, 16, 3, 3, 3, 3, 1, 1);
      try (DeviceBuffer x = backend.allocate("x", DType.F32, win.inputCount());
          DeviceBuffer w = backend.allocate("w", DType.F32, 16L * 16 * 9);
          DeviceBuffer y = backend.allocate("y", DType.F32, win.outputCount(16));
          DeviceBuffer cols = backend.allocate("cols", DType.F32, win.columnCount())) {
        IllegalArgumentException e =
            assertThrows(
                IllegalArgumentException.class,
                () -> backend.run(stream, new Convolution(x, w, null, y, win, 16, cols, 16, 16)));
        assertTrue(e.getMessage().contains("needs the oneDNN engine"), e.getMessage());
      }
      return;
    }
    // {n, c, h, w, out, k, stride, pad, blocked input}
    int[][] shapes = {
      {2, 2 * block, 7, 6, 2 * block, 3, 1, 1, 1},
      {3, 2 * block, 8, 8, block, 1, 2, 0, 1},
      {2, 3, 9, 9, 2 * block, 3, 2, 1, 0}
    };
    Random rng = new Random(block);
    for (int[] sh : shapes) {
      ConvWindow win = new ConvWindow(sh[0], sh[1], sh[2], sh[3], sh[5], sh[5], sh[6], sh[7]);
      int n = sh[0], c = sh[1], out = sh[4], hw = sh[2] * sh[3], ohw = win.oh() * win.ow();
      int inBlock = sh[8] == 1 ? block : 1;
      float[] x = random(rng, (int) win.inputCount());
      float[] w = random(rng, out * c * sh[5] * sh[5]);
      float[] dy = random(rng, (int) win.outputCount(out));
      float[][] plain = convolve(win, out, 1, 1, x, w, dy);
      float[][] inBlocks =
          convolve(
              win,
              out,
              inBlock,
              block,
              blocked(x, n, c, hw, inBlock),
              w,
              blocked(dy, n, out, ohw, block));
      String what = win + " out " + out + " blocked by " + inBlock + "/" + block;
      assertArrayEquals(plain[0], unblocked(inBlocks[0], n, out, ohw, block), what + ": y");
      assertArrayEquals(plain[1], unblocked(inBlocks[1], n, c, hw, inBlock), what + ": dx");
      assertArrayEquals(plain[2], inBlocks[2], what + ": dw");
    }
  }

  /**
   * Channels last (a block of all the channels: NHWC, what ResNets keep on oneDNN), where the
   * engine has blocked layouts: y, dx and dw within the fp32 sum bound of the exact NCHW sums
   * (oneDNN's NHWC kernels sum in another order than its blocked ones, so not bit for bit). Shapes:
   * the engine's block on both sides (its blocked kernels), a stride-2 3×3 and a 1×1 shortcut
   * doubling the channels (the strided backward-data past oneDNN's brgemm one), and three blocks of
   * channels (no power of two).
   */
  @Test
  void channelsLastConvolutionsAreWithinTheSumBound() {
    int block = backend.channelBlock();
    if (block == 1) {
      return; // NCHW only: blockedConvolutionsComputeWhatNchwOnesDo checks the refusal
    }
    // {n, c, h, w, out, k, stride, pad}
    int[][] shapes = {
      {2, block, 6, 5, block, 3, 1, 1},
      {2, block, 8, 8, 2 * block, 3, 2, 1},
      {2, block, 8, 8, 2 * block, 1, 2, 0},
      {2, 3 * block, 5, 5, 3 * block, 3, 1, 1}
    };
    Random rng = new Random(block + 1);
    for (int[] sh : shapes) {
      ConvWindow win = new ConvWindow(sh[0], sh[1], sh[2], sh[3], sh[5], sh[5], sh[6], sh[7]);
      int n = sh[0], c = sh[1], out = sh[4], k = sh[5], hw = sh[2] * sh[3];
      int ohw = win.oh() * win.ow();
      float[] x = random(rng, (int) win.inputCount());
      float[] w = random(rng, out * c * k * k);
      float[] dy = random(rng, (int) win.outputCount(out));
      double[][] exact = exactSums(win, out, x, w, dy);
      float[][] last =
          convolve(win, out, c, out, blocked(x, n, c, hw, c), w, blocked(dy, n, out, ohw, out));
      String what = win + " out " + out + " channels last";
      assertWithinSumBound(
          exact[0], exact[1], c * k * k, unblocked(last[0], n, out, ohw, out), what + ": y");
      assertWithinSumBound(
          exact[2], exact[3], out * k * k, unblocked(last[1], n, c, hw, c), what + ": dx");
      assertWithinSumBound(exact[4], exact[5], n * ohw, last[2], what + ": dw");
    }
  }

  /** y, dx and dw (added to zeros) of one convolution in the layouts given. */
  private float[][] convolve(
      ConvWindow win, int out, int inBlock, int outBlock, float[] x, float[] w, float[] dy) {
    try (DeviceBuffer xd = upload("x", x);
        DeviceBuffer wd = upload("w", w);
        DeviceBuffer dyd = upload("dy", dy);
        DeviceBuffer yd = backend.allocate("y", DType.F32, dy.length);
        DeviceBuffer dxd = backend.allocate("dx", DType.F32, x.length);
        DeviceBuffer dwd = upload("dw", new float[w.length]);
        DeviceBuffer cols = backend.allocate("cols", DType.F32, win.columnCount())) {
      backend.run(stream, new Convolution(xd, wd, null, yd, win, out, cols, inBlock, outBlock));
      backend.run(
          stream,
          new ConvolutionBackward(xd, dyd, wd, dwd, null, dxd, win, out, cols, inBlock, outBlock));
      return new float[][] {download(yd), download(dxd), download(dwd)};
    }
  }

  /**
   * A convolution's y, dx and dw over NCHW in double, each with the sum of its products' absolute
   * values (what {@link #assertWithinSumBound} bounds an fp32 sum's error by).
   */
  private static double[][] exactSums(ConvWindow win, int out, float[] x, float[] wt, float[] dy) {
    int n = win.n(), c = win.c(), h = win.h(), w = win.w(), k = win.kh();
    int s = win.stride(), p = win.pad(), oh = win.oh(), ow = win.ow();
    double[] y = new double[dy.length], yAbs = new double[dy.length];
    double[] dx = new double[x.length], dxAbs = new double[x.length];
    double[] dw = new double[wt.length], dwAbs = new double[wt.length];
    for (int i = 0; i < n; i++) {
      for (int o = 0; o < out; o++) {
        for (int oy = 0; oy < oh; oy++) {
          for (int ox = 0; ox < ow; ox++) {
            int yi = ((i * out + o) * oh + oy) * ow + ox;
            for (int ch = 0; ch < c; ch++) {
              for (int ky = 0; ky < k; ky++) {
                for (int kx = 0; kx < k; kx++) {
                  int iy = oy * s - p + ky, ix = ox * s - p + kx;
                  if (iy < 0 || iy >= h || ix < 0 || ix >= w) {
                    continue;
                  }
                  int xi = ((i * c + ch) * h + iy) * w + ix, wi = ((o * c + ch) * k + ky) * k + kx;
                  y[yi] += (double) x[xi] * wt[wi];
                  yAbs[yi] += Math.abs((double) x[xi] * wt[wi]);
                  dx[xi] += (double) dy[yi] * wt[wi];
                  dxAbs[xi] += Math.abs((double) dy[yi] * wt[wi]);
                  dw[wi] += (double) dy[yi] * x[xi];
                  dwAbs[wi] += Math.abs((double) dy[yi] * x[xi]);
                }
              }
            }
          }
        }
      }
    }
    return new double[][] {y, yAbs, dx, dxAbs, dw, dwAbs};
  }

  private static void assertWithinSumBound(
      double[] exact, double[] absSum, int terms, float[] got, String what) {
    double u = Math.scalb(1.0, -24);
    double gamma = terms * u / (1 - terms * u);
    assertEquals(exact.length, got.length, what + ": length");
    for (int i = 0; i < exact.length; i++) {
      // + one rounding of the exact value to fp32, which the stored result also is
      double bound = gamma * absSum[i] + u * Math.abs(exact[i]) + Float.MIN_NORMAL;
      assertTrue(
          Math.abs(got[i] - exact[i]) <= bound,
          what + "[" + i + "]: expected " + exact[i] + " got " + got[i] + " (bound " + bound + ")");
    }
  }

  @Test
  void channelBiasAndChannelSums() {
    float[] y = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}; // 2 images, 2 channels, 3 positions
    try (DeviceBuffer dy = upload("y", y);
        DeviceBuffer b = upload("bias", new float[] {10, 20});
        DeviceBuffer sums = upload("sums", new float[] {1, 1})) {
      backend.run(stream, new SumChannels(dy, sums, 2, 2, 3));
      backend.run(stream, new AddChannelBias(dy, b, 2, 2, 3));
      assertArrayEquals(
          new float[] {1 + 1 + 2 + 3 + 7 + 8 + 9, 1 + 4 + 5 + 6 + 10 + 11 + 12}, download(sums));
      assertArrayEquals(new float[] {11, 12, 13, 24, 25, 26, 17, 18, 19, 30, 31, 32}, download(dy));
    }
  }

  @Test
  void maxPoolMatchesTheReferenceOnRandomPlanes() {
    // {n, c, h, w, k, stride, pad}: the 2x2/2 fast path (odd sizes drop the last row and
    // column), the general loop, and ResNet's stem pooling (3x3/2 padded by 1: padding never wins,
    // even over negative values).
    // With a blocked layout as well where the engine has one (c a multiple of the block).
    int[][] shapes = {
      {3, 4, 9, 7, 2, 2, 0}, {2, 3, 8, 8, 2, 2, 0}, {2, 2, 7, 9, 3, 2, 0}, {2, 3, 9, 8, 3, 2, 1}
    };
    Random rng = new Random(51);
    for (int block : channelBlocks()) {
      for (int[] s : shapes) {
        checkMaxPool(rng, block, s[0], block == 1 ? s[1] : 2 * block, s[2], s[3], s[4], s[5], s[6]);
      }
    }
  }

  private void checkMaxPool(
      Random rng, int block, int n, int c, int h, int w, int k, int stride, int pad) {
    String shape = java.util.Arrays.toString(new int[] {n, c, h, w, k, stride, pad, block});
    {
      int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
      float[] x = random(rng, n * c * h * w);
      for (int i = 0; i < x.length; i += 7) {
        x[i] = x[i + 1 < x.length ? i + 1 : i]; // some ties
      }
      float[] expected = new float[n * c * oh * ow];
      int[] winner = new int[expected.length];
      for (int plane = 0; plane < n * c; plane++) {
        for (int oy = 0; oy < oh; oy++) {
          for (int ox = 0; ox < ow; ox++) {
            int at = -1;
            for (int ky = 0; ky < k; ky++) {
              for (int kx = 0; kx < k; kx++) {
                int iy = oy * stride - pad + ky;
                int ix = ox * stride - pad + kx;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) {
                  continue;
                }
                int i = iy * w + ix;
                if (at < 0 || x[plane * h * w + i] > x[plane * h * w + at]) {
                  at = i;
                }
              }
            }
            expected[(plane * oh + oy) * ow + ox] = x[plane * h * w + at];
            winner[(plane * oh + oy) * ow + ox] = at;
          }
        }
      }
      float[] dy = random(rng, expected.length);
      float[] expectedDx = new float[x.length];
      for (int o = 0; o < expected.length; o++) {
        expectedDx[(o / (oh * ow)) * h * w + winner[o]] += dy[o];
      }
      try (DeviceBuffer dx = upload("x", blocked(x, n, c, h * w, block));
          DeviceBuffer y = backend.allocate("y", DType.F32, expected.length);
          DeviceBuffer arg = backend.allocate("argmax", DType.I32, expected.length);
          DeviceBuffer g = upload("dy", blocked(dy, n, c, oh * ow, block));
          DeviceBuffer back = backend.allocate("dx", DType.F32, x.length)) {
        backend.run(stream, new MaxPool(dx, n, c, h, w, k, stride, pad, y, arg, block));
        assertArrayEquals(expected, unblocked(download(y), n, c, oh * ow, block), shape);
        backend.run(stream, new MaxPoolBackward(g, arg, n, c, h, w, k, stride, pad, back, block));
        assertClose(
            expectedDx,
            unblocked(download(back), n, c, h * w, block),
            1e-6,
            "pool gradient " + shape);
      }
    }
  }

  @Test
  void maxPoolPicksWinnersAndRoutesGradientsToThem() {
    // One 4x4 plane, 2x2 windows.
    float[] x = {1, 5, 2, 0, 3, 4, 8, 1, 0, 0, 9, 9, 7, 0, 1, 2};
    try (DeviceBuffer dx = upload("x", x);
        DeviceBuffer y = backend.allocate("y", DType.F32, 4);
        DeviceBuffer arg = backend.allocate("argmax", DType.I32, 4);
        DeviceBuffer dy = upload("dy", new float[] {10, 20, 30, 40});
        DeviceBuffer g = backend.allocate("dx", DType.F32, 16)) {
      backend.run(stream, new MaxPool(dx, 1, 1, 4, 4, 2, 2, y, arg));
      assertArrayEquals(new float[] {5, 8, 7, 9}, download(y));
      backend.run(stream, new MaxPoolBackward(dy, arg, 1, 1, 4, 4, 2, 2, 0, g));
      float[] expected = new float[16];
      expected[1] = 10;
      expected[6] = 20;
      expected[12] = 30;
      expected[10] = 40; // ties go to the first maximum, as the reference scan order
      assertArrayEquals(expected, download(g));
    }
  }

  @Test
  void addAndMultiplyElementwiseInPlace() {
    Random rng = new Random(11);
    float[] a = random(rng, 40_001);
    float[] b = random(rng, 40_001);
    float[] sum = new float[a.length];
    float[] product = new float[a.length];
    for (int i = 0; i < a.length; i++) {
      sum[i] = a[i] + b[i];
      product[i] = sum[i] * b[i];
    }
    try (DeviceBuffer da = upload("a", a);
        DeviceBuffer db = upload("b", b)) {
      backend.run(stream, new Add(da, db, da));
      assertArrayEquals(sum, download(da));
      backend.run(stream, new Multiply(da, db, da));
      assertArrayEquals(product, download(da));
    }
  }

  @Test
  void dropoutMaskIsTheCounterRngsAndKeepsAboutOneMinusP() {
    int n = 50_003;
    float p = 0.3f;
    try (DeviceBuffer mask = backend.allocate("mask", DType.F32, n)) {
      backend.run(stream, new DropoutMask(p, 42, mask));
      float[] m = download(mask);
      int kept = 0;
      for (int i = 0; i < n; i++) {
        float expected = CounterRng.uniform(42, i) < p ? 0f : 1 / (1 - p);
        assertEquals(expected, m[i], "mask[" + i + "]");
        kept += m[i] != 0 ? 1 : 0;
      }
      assertEquals(1 - p, (double) kept / n, 0.01);
      backend.run(stream, new DropoutMask(p, 43, mask));
      float[] other = download(mask);
      assertTrue(!java.util.Arrays.equals(m, other), "another seed draws another mask");
      assertThrows(
          IllegalArgumentException.class, () -> backend.run(stream, new DropoutMask(1f, 1, mask)));
    }
  }

  /** Batch normalization of NCHW x by the batch statistics, in double. */
  private static double[][] batchNormReference(float[] x, int n, int c, int hw) {
    double[] mean = new double[c];
    double[] var = new double[c];
    for (int ch = 0; ch < c; ch++) {
      for (int i = 0; i < n; i++) {
        for (int p = 0; p < hw; p++) {
          mean[ch] += x[(i * c + ch) * hw + p];
        }
      }
      mean[ch] /= n * hw;
      for (int i = 0; i < n; i++) {
        for (int p = 0; p < hw; p++) {
          double d = x[(i * c + ch) * hw + p] - mean[ch];
          var[ch] += d * d;
        }
      }
      var[ch] /= n * hw;
    }
    return new double[][] {mean, var};
  }

  /**
   * Batch norm over NCHW and, where the engine has one, its blocked layout (two blocks of
   * channels). Tolerances: the Java kernels sum in double; oneDNN sums the m = n·hw = 21 values of
   * a channel in fp32, each statistic then within γ(21) ≈ 1.3e-6 relative of the exact one, and
   * |x̂| ≤ 4 here amplifies that to well under the 1e-5 (forward) and 1e-4 (backward, two such
   * sums) allowed.
   */
  @Test
  void batchNormTrainingNormalizesByBatchStatisticsAndMovesRunningOnes() {
    for (int block : channelBlocks()) {
      checkBatchNormTraining(block == 1 ? 5 : 2 * block, 3, 7, block);
    }
  }

  /**
   * Batch norm training over {@code n} images of {@code hw} positions: see the tolerances above.
   */
  protected void checkBatchNormTraining(int c, int n, int hw, int block) {
    Random rng = new Random(12);
    float[] x = random(rng, n * c * hw);
    for (int i = 0; i < x.length; i++) {
      x[i] = x[i] * 3 + 2; // a mean and scale far from the identity
    }
    float[] gamma = random(rng, c);
    float[] beta = random(rng, c);
    float[] runMean = random(rng, c);
    float[] runVar = new float[c];
    for (int ch = 0; ch < c; ch++) {
      runVar[ch] = ch + 1;
    }
    double[][] stats = batchNormReference(x, n, c, hw);
    float eps = 1e-5f;
    float momentum = 0.1f;
    float[] expectedY = new float[x.length];
    float[] expectedMean = new float[c];
    float[] expectedVar = new float[c];
    for (int ch = 0; ch < c; ch++) {
      double invStd = 1 / Math.sqrt(stats[1][ch] + eps);
      for (int i = 0; i < n; i++) {
        for (int p = 0; p < hw; p++) {
          int at = (i * c + ch) * hw + p;
          expectedY[at] = (float) ((x[at] - stats[0][ch]) * invStd * gamma[ch] + beta[ch]);
        }
      }
      int m = n * hw;
      expectedMean[ch] = (float) (0.9 * runMean[ch] + 0.1 * stats[0][ch]);
      expectedVar[ch] = (float) (0.9 * runVar[ch] + 0.1 * stats[1][ch] * m / (m - 1));
    }
    try (DeviceBuffer dx = upload("x", blocked(x, n, c, hw, block));
        DeviceBuffer dg = upload("gamma", gamma);
        DeviceBuffer db = upload("beta", beta);
        DeviceBuffer rm = upload("running-mean", runMean);
        DeviceBuffer rv = upload("running-var", runVar);
        DeviceBuffer y = backend.allocate("y", DType.F32, x.length);
        DeviceBuffer sm = backend.allocate("saved-mean", DType.F32, c);
        DeviceBuffer si = backend.allocate("saved-inv-std", DType.F32, c)) {
      backend.run(
          stream,
          new BatchNormTrain(dx, n, c, hw, dg, db, eps, momentum, rm, rv, y, sm, si, block, null));
      String layout = " (channels blocked by " + block + ")";
      assertClose(expectedY, unblocked(download(y), n, c, hw, block), 1e-5, "y" + layout);
      assertClose(expectedMean, download(rm), 1e-5, "running mean" + layout);
      assertClose(expectedVar, download(rv), 1e-5, "running var" + layout);
      float[] saved = download(sm);
      for (int ch = 0; ch < c; ch++) {
        assertEquals(stats[0][ch], saved[ch], 1e-5);
      }
      // Evaluation mode with the running statistics.
      backend.run(stream, new BatchNormInference(dx, n, c, hw, dg, db, eps, rm, rv, y, block));
      float[] eval = unblocked(download(y), n, c, hw, block);
      for (int at = 0; at < x.length; at++) {
        int ch = (at / hw) % c;
        double want =
            (x[at] - expectedMean[ch]) / Math.sqrt(expectedVar[ch] + eps) * gamma[ch] + beta[ch];
        assertEquals(want, eval[at], 1e-4 * Math.max(1, Math.abs(want)), "eval y[" + at + "]");
      }
    }
  }

  @Test
  void batchNormBackwardMatchesTheClosedForm() {
    for (int block : channelBlocks()) {
      checkBatchNormBackward(block == 1 ? 3 : 2 * block, 4, 5, block);
    }
  }

  /** Batch norm's backward over {@code n} images of {@code hw} positions. */
  protected void checkBatchNormBackward(int c, int n, int hw, int block) {
    Random rng = new Random(13);
    float[] x = random(rng, n * c * hw);
    float[] dyv = random(rng, n * c * hw);
    float[] gamma = random(rng, c);
    float eps = 1e-5f;
    double[][] stats = batchNormReference(x, n, c, hw);
    int m = n * hw;
    float[] expectedDx = new float[x.length];
    float[] expectedDgamma = new float[c]; // accumulated onto ones and twos
    float[] expectedDbeta = new float[c];
    java.util.Arrays.fill(expectedDgamma, 1);
    java.util.Arrays.fill(expectedDbeta, 2);
    for (int ch = 0; ch < c; ch++) {
      double invStd = 1 / Math.sqrt(stats[1][ch] + eps);
      double sumDy = 0;
      double sumDyXhat = 0;
      for (int i = 0; i < n; i++) {
        for (int p = 0; p < hw; p++) {
          int at = (i * c + ch) * hw + p;
          sumDy += dyv[at];
          sumDyXhat += dyv[at] * (x[at] - stats[0][ch]) * invStd;
        }
      }
      expectedDgamma[ch] += (float) sumDyXhat;
      expectedDbeta[ch] += (float) sumDy;
      for (int i = 0; i < n; i++) {
        for (int p = 0; p < hw; p++) {
          int at = (i * c + ch) * hw + p;
          double xhat = (x[at] - stats[0][ch]) * invStd;
          expectedDx[at] =
              (float) (gamma[ch] * invStd / m * (m * dyv[at] - sumDy - xhat * sumDyXhat));
        }
      }
    }
    float[] ones = new float[c];
    float[] twos = new float[c];
    java.util.Arrays.fill(ones, 1);
    java.util.Arrays.fill(twos, 2);
    try (DeviceBuffer dx = upload("x", blocked(x, n, c, hw, block));
        DeviceBuffer dy = upload("dy", blocked(dyv, n, c, hw, block));
        DeviceBuffer dg = upload("gamma", gamma);
        DeviceBuffer db = upload("beta", new float[c]);
        DeviceBuffer rm = upload("running-mean", new float[c]);
        DeviceBuffer rv = upload("running-var", ones);
        DeviceBuffer y = backend.allocate("y", DType.F32, x.length);
        DeviceBuffer sm = backend.allocate("saved-mean", DType.F32, c);
        DeviceBuffer si = backend.allocate("saved-inv-std", DType.F32, c);
        DeviceBuffer gGamma = upload("dgamma", ones);
        DeviceBuffer gBeta = upload("dbeta", twos);
        DeviceBuffer gx = backend.allocate("dx", DType.F32, x.length)) {
      backend.run(
          stream,
          new BatchNormTrain(dx, n, c, hw, dg, db, eps, 0.1f, rm, rv, y, sm, si, block, null));
      backend.run(
          stream,
          new BatchNormBackward(dx, dy, n, c, hw, dg, sm, si, gGamma, gBeta, gx, block, null));
      String layout = " (channels blocked by " + block + ")";
      assertClose(expectedDx, unblocked(download(gx), n, c, hw, block), 1e-4, "dx" + layout);
      assertClose(expectedDgamma, download(gGamma), 1e-4, "dgamma" + layout);
      assertClose(expectedDbeta, download(gBeta), 1e-4, "dbeta" + layout);
    }
  }

  /**
   * Batch norm with a fused ReLU, where the engine fuses them ({@link Backend#normReluMaskBytes}):
   * what batch norm, an in-place ReLU and the ReLU's backward before batch norm's compute. Forward
   * bit for bit (y and the running statistics: the same normalized value rounded, then max(·, 0));
   * the gradients within the bound {@link #batchNormBackwardMatchesTheClosedForm} derives for each
   * against the exact ones (the fused kernel masks dy inside its sums, which oneDNN's SSE4.1 kernel
   * orders differently; on AVX2 and AVX-512 they agreed as numbers). Odd sizes, so the mask's bits
   * do not fill whole bytes. A mask too small for the engine's is refused naming it; an engine that
   * does not fuse refuses any mask.
   */
  @Test
  void batchNormWithAFusedReluComputesWhatBatchNormThenReluDo() {
    for (int block : channelBlocks()) {
      int n = 3;
      int c = block == 1 ? 3 : 2 * block;
      int hw = 5;
      long maskBytes = backend.normReluMaskBytes(n, c, hw, block);
      Random rng = new Random(14);
      float[] x = random(rng, n * c * hw);
      float[] dyv = random(rng, n * c * hw);
      float[][] unfused = batchNormRelu(block, n, c, hw, x, dyv, null);
      String layout = " (channels blocked by " + block + ")";
      if (maskBytes == 0) {
        try (DeviceBuffer mask = backend.allocate("relu-mask", DType.U8, 64)) {
          IllegalArgumentException e =
              assertThrows(
                  IllegalArgumentException.class,
                  () -> batchNormRelu(block, n, c, hw, x, dyv, mask),
                  "a mask on an engine that does not fuse" + layout);
          assertTrue(e.getMessage().contains("fuses"), e.getMessage());
        }
        continue;
      }
      try (DeviceBuffer mask = backend.allocate("relu-mask", DType.U8, maskBytes)) {
        float[][] fused = batchNormRelu(block, n, c, hw, x, dyv, mask);
        String[] what = {"y", "running mean", "running var", "dx", "dgamma", "dbeta"};
        for (int i = 0; i < 3; i++) { // forward: the same arithmetic
          assertArrayEquals(unfused[i], fused[i], what[i] + " fused" + layout);
        }
        for (int i = 3; i < what.length; i++) { // backward: its sums in another order
          assertClose(unfused[i], fused[i], 1e-4, what[i] + " fused" + layout);
        }
        int positive = 0;
        for (float v : fused[0]) {
          positive += v > 0 ? 1 : 0;
        }
        assertTrue(positive > 0 && positive < x.length, "the ReLU cuts some values" + layout);
      }
      try (DeviceBuffer small = backend.allocate("small-mask", DType.U8, maskBytes - 1)) {
        IllegalArgumentException e =
            assertThrows(
                IllegalArgumentException.class,
                () -> batchNormRelu(block, n, c, hw, x, dyv, small),
                "a mask a byte short" + layout);
        assertTrue(e.getMessage().contains("small-mask"), e.getMessage());
      }
    }
  }

  /**
   * relu(batch norm(x)) and its gradients, fused with {@code mask} or (null) as three operations:
   * y, running mean, running var, dx, dgamma, dbeta, unblocked.
   */
  private float[][] batchNormRelu(
      int block, int n, int c, int hw, float[] x, float[] dyv, DeviceBuffer mask) {
    float[] ones = new float[c];
    java.util.Arrays.fill(ones, 1);
    Random rng = new Random(15);
    try (DeviceBuffer dx = upload("x", blocked(x, n, c, hw, block));
        DeviceBuffer dy = upload("dy", blocked(dyv, n, c, hw, block));
        DeviceBuffer dg = upload("gamma", random(rng, c));
        DeviceBuffer db = upload("beta", random(rng, c));
        DeviceBuffer rm = upload("running-mean", new float[c]);
        DeviceBuffer rv = upload("running-var", ones);
        DeviceBuffer y = backend.allocate("y", DType.F32, x.length);
        DeviceBuffer sm = backend.allocate("saved-mean", DType.F32, c);
        DeviceBuffer si = backend.allocate("saved-inv-std", DType.F32, c);
        DeviceBuffer gGamma = upload("dgamma", ones);
        DeviceBuffer gBeta = upload("dbeta", ones);
        DeviceBuffer g = backend.allocate("relu-dx", DType.F32, x.length);
        DeviceBuffer gx = backend.allocate("dx", DType.F32, x.length)) {
      backend.run(
          stream,
          new BatchNormTrain(dx, n, c, hw, dg, db, 1e-5f, 0.1f, rm, rv, y, sm, si, block, mask));
      DeviceBuffer bnGrad = dy;
      if (mask == null) {
        backend.run(stream, new Relu(y, y));
        backend.run(stream, new ReluBackward(y, dy, g));
        bnGrad = g;
      }
      backend.run(
          stream,
          new BatchNormBackward(dx, bnGrad, n, c, hw, dg, sm, si, gGamma, gBeta, gx, block, mask));
      return new float[][] {
        unblocked(download(y), n, c, hw, block),
        download(rm),
        download(rv),
        unblocked(download(gx), n, c, hw, block),
        download(gGamma),
        download(gBeta)
      };
    }
  }

  // ---- layer norm and softmax (transformers, ConvNeXt) ------------------------------------------

  /** Layer norm of x read as [outer, size, inner] in double: y, then the mean and 1/std. */
  static double[][] layerNormReference(
      double[] x, int outer, int size, int inner, float[] gamma, float[] beta, float eps) {
    double[] y = new double[x.length];
    double[] mean = new double[outer * inner];
    double[] invStd = new double[outer * inner];
    for (int o = 0; o < outer; o++) {
      for (int i = 0; i < inner; i++) {
        int g = o * inner + i;
        for (int j = 0; j < size; j++) {
          mean[g] += x[(o * size + j) * inner + i] / size;
        }
        double var = 0;
        for (int j = 0; j < size; j++) {
          double d = x[(o * size + j) * inner + i] - mean[g];
          var += d * d / size;
        }
        invStd[g] = 1 / Math.sqrt(var + eps);
        for (int j = 0; j < size; j++) {
          int at = (o * size + j) * inner + i;
          y[at] = (x[at] - mean[g]) * invStd[g] * gamma[j] + beta[j];
        }
      }
    }
    return new double[][] {y, mean, invStd};
  }

  /**
   * Layer norm over the last dimension (inner 1) and over the channels of NCHW (inner h·w): the
   * output and saved statistics against double precision, and the backward pass against central
   * differences of the double forward pass (so the expected gradients owe nothing to the closed
   * form the engines use). Tolerance: the engines compute in double and round once to float, but
   * backward reads the mean and 1/std saved as float (relative error 2^-24); 1e-5 relative is two
   * orders above both, and far below any wrong term (O(1)).
   */
  @Test
  void layerNormOverFeaturesAndOverChannelsWithItsGradients() {
    for (int[] shape : new int[][] {{6, 7, 1}, {3, 5, 4}}) {
      int outer = shape[0];
      int size = shape[1];
      int inner = shape[2];
      int count = outer * size * inner;
      Random rng = new Random(31 + inner);
      float[] x = random(rng, count);
      for (int i = 0; i < count; i++) {
        x[i] = 3 + 2 * x[i]; // an offset mean, as activations have
      }
      float[] dyv = random(rng, count);
      float[] gamma = random(rng, size);
      float[] beta = random(rng, size);
      float eps = 1e-6f;
      double[] xd = new double[count];
      for (int i = 0; i < count; i++) {
        xd[i] = x[i];
      }
      double[][] ref = layerNormReference(xd, outer, size, inner, gamma, beta, eps);
      // gradients of L = Σ dy·y by central differences in double
      double[] expectedDx = new double[count];
      double h = 1e-6;
      for (int i = 0; i < count; i++) {
        double[] plus = xd.clone();
        double[] minus = xd.clone();
        plus[i] += h;
        minus[i] -= h;
        double[] yp = layerNormReference(plus, outer, size, inner, gamma, beta, eps)[0];
        double[] ym = layerNormReference(minus, outer, size, inner, gamma, beta, eps)[0];
        for (int k = 0; k < count; k++) {
          expectedDx[i] += dyv[k] * (yp[k] - ym[k]) / (2 * h);
        }
      }
      float[] expectedDgamma = new float[size];
      float[] expectedDbeta = new float[size];
      for (int o = 0; o < outer; o++) {
        for (int j = 0; j < size; j++) {
          for (int i = 0; i < inner; i++) {
            int at = (o * size + j) * inner + i;
            int g = o * inner + i;
            expectedDgamma[j] += (float) (dyv[at] * (xd[at] - ref[1][g]) * ref[2][g]);
            expectedDbeta[j] += dyv[at];
          }
        }
      }
      for (int j = 0; j < size; j++) { // accumulated onto what is there
        expectedDgamma[j] += 1;
        expectedDbeta[j] += 2;
      }
      String what = "layer norm [" + outer + ", " + size + ", " + inner + "] ";
      try (DeviceBuffer dX = upload("x", x);
          DeviceBuffer dDy = upload("dy", dyv);
          DeviceBuffer dGamma = upload("gamma", gamma);
          DeviceBuffer dBeta = upload("beta", beta);
          DeviceBuffer y = backend.allocate("y", DType.F32, count);
          DeviceBuffer mean = backend.allocate("mean", DType.F32, outer * inner);
          DeviceBuffer invStd = backend.allocate("inv-std", DType.F32, outer * inner);
          DeviceBuffer gGamma = upload("dgamma", filled(size, 1));
          DeviceBuffer gBeta = upload("dbeta", filled(size, 2));
          DeviceBuffer dx = backend.allocate("dx", DType.F32, count)) {
        backend.run(
            stream,
            new LayerNormForward(dX, outer, size, inner, dGamma, dBeta, eps, y, mean, invStd));
        backend.run(
            stream,
            new LayerNormBackward(
                dX, dDy, outer, size, inner, dGamma, mean, invStd, gGamma, gBeta, dx));
        assertClose(toFloats(ref[0]), download(y), 1e-5, what + "y");
        assertClose(toFloats(ref[1]), download(mean), 1e-5, what + "mean");
        assertClose(toFloats(ref[2]), download(invStd), 1e-5, what + "1/std");
        // the differences carry ~1e-10 / h of rounding: 1e-4 relative is their bound
        assertClose(toFloats(expectedDx), download(dx), 1e-4, what + "dx");
        assertClose(expectedDgamma, download(gGamma), 1e-5, what + "dgamma");
        assertClose(expectedDbeta, download(gBeta), 1e-5, what + "dbeta");
      }
    }
  }

  /**
   * Row softmax on scores with a large common offset (overflow without the max subtraction) and its
   * backward against the Jacobian {@code diag(y) - y yᵀ} applied in double, both in place.
   */
  @Test
  void softmaxRowsAndItsBackwardInPlace() {
    int rows = 5;
    int cols = 197; // a ViT-B/16 attention row at 224 px
    Random rng = new Random(41);
    float[] x = random(rng, rows * cols);
    for (int i = 0; i < x.length; i++) {
      x[i] = 3 * x[i] + (i / cols) * 100f;
    }
    float[] dyv = random(rng, rows * cols);
    float[] expectedY = new float[x.length];
    float[] expectedDx = new float[x.length];
    for (int r = 0; r < rows; r++) {
      double max = Double.NEGATIVE_INFINITY;
      for (int c = 0; c < cols; c++) {
        max = Math.max(max, x[r * cols + c]);
      }
      double sum = 0;
      for (int c = 0; c < cols; c++) {
        sum += Math.exp(x[r * cols + c] - max);
      }
      double[] y = new double[cols];
      for (int c = 0; c < cols; c++) {
        y[c] = Math.exp(x[r * cols + c] - max) / sum;
        expectedY[r * cols + c] = (float) y[c];
      }
      for (int i = 0; i < cols; i++) {
        double dx = 0;
        for (int j = 0; j < cols; j++) {
          dx += ((i == j ? y[i] : 0) - y[i] * y[j]) * dyv[r * cols + j];
        }
        expectedDx[r * cols + i] = (float) dx;
      }
    }
    try (DeviceBuffer scores = upload("scores", x);
        DeviceBuffer grad = upload("dprobs", dyv)) {
      backend.run(stream, new Softmax(scores, rows, cols, scores));
      float[] probs = download(scores);
      // exp in double, rounded once: a few ulps of float at most (1e-6 relative to max(1, |y|))
      assertClose(expectedY, probs, 1e-6, "softmax");
      backend.run(stream, new SoftmaxBackward(scores, grad, rows, cols, grad));
      assertClose(expectedDx, download(grad), 1e-6, "softmax backward");
    }
  }

  /**
   * A patch embedding's [batch, channels, positions] into [batch, 1 + positions, channels] one row
   * down (a transpose into a slice), a position embedding added to every sample (source stride 0),
   * and its gradient summed over the batch (destination stride 0): float sums in the order the
   * operation defines, so exactly equal.
   */
  @Test
  void stridedCopiesTransposeBroadcastAndSumOverTheBatch() {
    int batch = 3;
    int channels = 5;
    int positions = 4;
    int tokens = positions + 1;
    Random rng = new Random(43);
    float[] patches = random(rng, batch * channels * positions);
    float[] pos = random(rng, tokens * channels);
    float[] expected = new float[batch * tokens * channels];
    float[] summed = new float[tokens * channels];
    for (int b = 0; b < batch; b++) {
      for (int p = 0; p < positions; p++) {
        for (int c = 0; c < channels; c++) {
          expected[(b * tokens + 1 + p) * channels + c] =
              patches[(b * channels + c) * positions + p];
        }
      }
      for (int i = 0; i < tokens * channels; i++) {
        expected[b * tokens * channels + i] += pos[i];
      }
    }
    for (int b = 0; b < batch; b++) {
      for (int i = 0; i < tokens * channels; i++) {
        summed[i] += expected[b * tokens * channels + i];
      }
    }
    try (DeviceBuffer src = upload("patches", patches);
        DeviceBuffer posEmbed = upload("pos-embed", pos);
        DeviceBuffer out = backend.allocate("tokens", DType.F32, expected.length);
        DeviceBuffer sum = backend.allocate("dpos", DType.F32, summed.length)) {
      backend.run(
          stream,
          new StridedCopy(
              src,
              new StridedCopy.Strides((long) channels * positions, 1, positions),
              out.view(channels, expected.length - channels),
              new StridedCopy.Strides((long) tokens * channels, channels, 1),
              batch,
              positions,
              channels,
              false));
      backend.run(
          stream,
          new StridedCopy(
              posEmbed,
              new StridedCopy.Strides(0, channels, 1),
              out,
              StridedCopy.Strides.dense(tokens, channels),
              batch,
              tokens,
              channels,
              true));
      assertArrayEquals(expected, download(out));
      backend.run(
          stream,
          new StridedCopy(
              out,
              StridedCopy.Strides.dense(tokens, channels),
              sum,
              new StridedCopy.Strides(0, channels, 1),
              batch,
              tokens,
              channels,
              true));
      assertArrayEquals(summed, download(sum));
      var outside =
          assertThrows(
              IllegalArgumentException.class,
              () ->
                  new StridedCopy(
                      src,
                      StridedCopy.Strides.dense(channels, positions + 1),
                      out,
                      StridedCopy.Strides.dense(channels, positions + 1),
                      batch,
                      channels,
                      positions + 1,
                      false));
      assertEquals(
          "patches has 60 elements, the strided copy reaches element 74", outside.getMessage());
      var racing =
          assertThrows(
              IllegalArgumentException.class,
              () ->
                  new StridedCopy(
                      out,
                      StridedCopy.Strides.dense(tokens, channels),
                      sum,
                      new StridedCopy.Strides(0, channels, 1),
                      batch,
                      tokens,
                      channels,
                      false));
      assertEquals("dpos: 3 copies onto one destination without accumulate", racing.getMessage());
    }
  }

  /**
   * NCHW planes to channels-last rows and back (ConvNeXt's permutes), at sizes that span several 32
   * × 32 tiles with ragged edges and repeated over two halves of the batch, and a broadcast of one
   * row to many (layer scale's factors): pure copies, so exactly equal.
   */
  @Test
  void stridedCopiesPermuteLayoutsAcrossTilesAndBroadcastRows() {
    int batch = 4;
    int channels = 37;
    int positions = 70;
    int sample = channels * positions;
    float[] planes = random(new Random(45), batch * sample);
    float[] rows = new float[planes.length];
    for (int b = 0; b < batch; b++) {
      for (int c = 0; c < channels; c++) {
        for (int p = 0; p < positions; p++) {
          rows[b * sample + p * channels + c] = planes[b * sample + c * positions + p];
        }
      }
    }
    StridedCopy.Strides planar = new StridedCopy.Strides(sample, 1, positions);
    StridedCopy.Strides channelsLast = new StridedCopy.Strides(sample, channels, 1);
    float[] factors = random(new Random(46), channels);
    float[] broadcast = new float[positions * channels];
    for (int i = 0; i < broadcast.length; i++) {
      broadcast[i] = factors[i % channels];
    }
    try (DeviceBuffer src = upload("planes", planes);
        DeviceBuffer last = backend.allocate("rows", DType.F32, rows.length);
        DeviceBuffer back = backend.allocate("planes again", DType.F32, planes.length);
        DeviceBuffer gamma = upload("gamma", factors);
        DeviceBuffer spread = backend.allocate("factors", DType.F32, broadcast.length)) {
      backend.run(
          stream,
          new StridedCopy(
              src,
              planar,
              last,
              channelsLast,
              batch / 2,
              positions,
              channels,
              false,
              new StridedCopy.Repeat(2, 2L * sample, 2L * sample)));
      assertArrayEquals(rows, download(last));
      backend.run(
          stream,
          new StridedCopy(last, channelsLast, back, planar, batch, positions, channels, false));
      assertArrayEquals(planes, download(back));
      backend.run(
          stream,
          new StridedCopy(
              gamma,
              new StridedCopy.Strides(0, 0, 1),
              spread,
              new StridedCopy.Strides(channels, 0, 1),
              positions,
              1,
              channels,
              false));
      assertArrayEquals(broadcast, download(spread));
    }
  }

  /**
   * Attention's split of [batch, tokens, 3, heads, headDim] rows into [batch, heads, tokens,
   * headDim] blocks (one copy repeated over the images), the inverse back into a fresh buffer, and
   * the refusal of repeats onto one destination: pure copies, so exactly equal.
   */
  @Test
  void repeatedStridedCopySplitsAndJoinsHeads() {
    int batch = 3;
    int tokens = 5;
    int heads = 2;
    int headDim = 4;
    int dim = heads * headDim;
    int width = 3 * dim;
    float[] rows = random(new Random(44), batch * tokens * width);
    float[] expected = new float[batch * tokens * dim];
    for (int b = 0; b < batch; b++) {
      for (int h = 0; h < heads; h++) {
        for (int t = 0; t < tokens; t++) {
          for (int e = 0; e < headDim; e++) {
            expected[((b * heads + h) * tokens + t) * headDim + e] =
                rows[(b * tokens + t) * width + dim + h * headDim + e]; // k's columns
          }
        }
      }
    }
    StridedCopy.Strides rowStrides = new StridedCopy.Strides(headDim, width, 1);
    StridedCopy.Strides blockStrides = new StridedCopy.Strides((long) tokens * headDim, headDim, 1);
    try (DeviceBuffer src = upload("qkv", rows);
        DeviceBuffer blocks = backend.allocate("k", DType.F32, expected.length);
        DeviceBuffer back = upload("rows", new float[rows.length])) {
      DeviceBuffer kColumns = src.view(dim, rows.length - dim);
      backend.run(
          stream,
          new StridedCopy(kColumns, rowStrides, blocks, blockStrides, heads, tokens, headDim, false)
              .repeated(batch, (long) tokens * width, (long) tokens * dim));
      assertArrayEquals(expected, download(blocks));
      DeviceBuffer backColumns = back.view(dim, rows.length - dim);
      backend.run(
          stream,
          new StridedCopy(
                  blocks, blockStrides, backColumns, rowStrides, heads, tokens, headDim, false)
              .repeated(batch, (long) tokens * dim, (long) tokens * width));
      float[] joined = download(back);
      for (int i = 0; i < rows.length; i++) {
        boolean kColumn = i % width >= dim && i % width < 2 * dim;
        assertEquals(kColumn ? rows[i] : 0f, joined[i], "element " + i);
      }
      var beyond =
          assertThrows(
              IllegalArgumentException.class,
              () ->
                  new StridedCopy(
                          kColumns, rowStrides, blocks, blockStrides, heads, tokens, headDim, false)
                      .repeated(batch + 1, (long) tokens * width, (long) tokens * dim));
      assertEquals(
          "qkv[8:360] has 352 elements, the strided copy reaches element 463", beyond.getMessage());
      var racing =
          assertThrows(
              IllegalArgumentException.class,
              () ->
                  new StridedCopy(
                          kColumns, rowStrides, blocks, blockStrides, heads, tokens, headDim, false)
                      .repeated(batch, (long) tokens * width, 0));
      assertEquals("k: 3 repeats onto one destination", racing.getMessage());
    }
  }

  private static float[] filled(int n, float value) {
    float[] out = new float[n];
    Arrays.fill(out, value);
    return out;
  }

  private static float[] toFloats(double[] values) {
    float[] out = new float[values.length];
    for (int i = 0; i < values.length; i++) {
      out[i] = (float) values[i];
    }
    return out;
  }

  // ---- streams, events, memory
  // ---------------------------------------------------------------------

  @Test
  void anEventOrdersWorkAcrossStreams() {
    // Stream "compute" produces C with a large GEMM; "copy" waits for the event, then reads C back.
    int n = 256;
    Random rng = new Random(5);
    float[] a = random(rng, n * n);
    float[] expected = gemmReference(false, false, n, n, n, 1, a, n, a, n, 0, new float[n * n], n);
    Stream compute = backend.createStream("compute");
    Stream copy = backend.createStream("copy");
    try (Event produced = backend.createEvent("produced");
        DeviceBuffer da = upload("a", a);
        DeviceBuffer c = backend.allocate("c", DType.F32, (long) n * n);
        HostBuffer out = backend.allocateHost("out", 4L * n * n)) {
      backend.run(
          compute,
          new Gemm(
              n, n, n, 1, GemmOperand.of(da, n), GemmOperand.of(da, n), 0, GemmOperand.of(c, n)));
      produced.record(compute);
      copy.waitFor(produced);
      backend.copy(c, out, 0, c.bytes(), copy);
      copy.synchronize();
      assertTrue(produced.isDone());
      float[] got = new float[n * n];
      ByteBuffer bytes = out.asByteBuffer();
      bytes.asFloatBuffer().get(got);
      assertClose(expected, got, 1e-3, "C read after the event");
    }
  }

  @Test
  void closingWithLiveMemoryNamesWhatLeaked() {
    Backend other = create();
    DeviceBuffer kept = other.allocate("conv1.weight", DType.F32, 1000);
    HostBuffer staging = other.allocateHost("batch-staging", 64);
    var e = assertThrows(IllegalStateException.class, other::close);
    assertTrue(
        e.getMessage().contains("conv1.weight (4000 bytes)")
            && e.getMessage().contains("batch-staging"),
        e.getMessage());
    kept.close();
    staging.close();
    other.close();
  }

  @Test
  void closingWithAnOpenEventNamesIt() {
    Backend other = create();
    Event loaded = other.createEvent("slot.loaded.3");
    Stream s = other.createStream("s");
    loaded.record(s);
    var e = assertThrows(IllegalStateException.class, other::close);
    assertTrue(e.getMessage().contains("1 open event(s): slot.loaded.3"), e.getMessage());
    loaded.close();
  }

  @Test
  void allocationAccountingAndUseAfterClose() {
    long before = backend.allocatedBytes();
    DeviceBuffer a = backend.allocate("a", DType.F32, 256);
    DeviceBuffer b = backend.allocate("b", DType.BF16, 256);
    assertEquals(before + 1024 + 512, backend.allocatedBytes());
    a.close();
    a.close(); // closing twice is harmless
    b.view(0, 10).close(); // closing a view frees nothing
    assertEquals(before + 512, backend.allocatedBytes());
    assertTrue(backend.peakAllocatedBytes() >= before + 1536);
    b.close();
    assertThrows(RuntimeException.class, () -> backend.run(stream, new Fill(a, 1)));
  }

  /**
   * An exponential moving average by three lerps (decay d, weight 1 − d) equals its closed form,
   * d³·e₀ + (1−d)(d²·w₁ + d·w₂ + w₃), computed in double: within a few float roundings of the
   * values' scale (each fused step rounds once, and the terms are of one magnitude).
   */
  @Test
  void lerpIsAnExponentialMovingAverage() {
    float a = 1 - 0.9f; // the weight, 1 − decay, as the float the operation is given
    float[] e0 = {1f, -2f, 0.5f, 3f, 0f};
    float[][] w = {{2f, 1f, 0f, -1f, 4f}, {0f, -3f, 1f, 2f, 4f}, {1f, 1f, 1f, 1f, 4f}};
    try (DeviceBuffer ema = upload("ema", e0)) {
      for (float[] weights : w) {
        try (DeviceBuffer now = upload("weights", weights)) {
          backend.run(stream, new Lerp(ema, now, a));
          stream.synchronize(); // before the weights' buffer closes
        }
      }
      float[] got = download(ema);
      double d = 1 - (double) a;
      for (int i = 0; i < e0.length; i++) {
        double expected = d * d * d * e0[i] + a * (d * d * w[0][i] + d * w[1][i] + w[2][i]);
        assertEquals(expected, got[i], 4 * Math.ulp(4f), "element " + i);
      }
      assertThrows(IllegalArgumentException.class, () -> new Lerp(ema, ema, 1.5f));
    }
  }

  /**
   * Buffers allocated among many freed holes of different sizes never share memory: each keeps the
   * value written to it. (The CUDA arena's first fit once read a free hole's size after removing it
   * from its tree, which then held another hole's entry, and handed out memory still in use: a
   * model's input overlapped a gradient slot.)
   */
  @Test
  void buffersAllocatedAmongFreedHolesKeepTheirOwnValues() {
    java.util.List<DeviceBuffer> live = new java.util.ArrayList<>();
    java.util.Random rng = new java.util.Random(3);
    try {
      for (int round = 0; round < 6; round++) {
        for (int i = 0; i < 64; i++) {
          live.add(backend.allocate("b" + round + "." + i, DType.F32, 1 + rng.nextInt(300)));
        }
        for (int i = live.size() - 2; i >= 0; i -= 2) { // holes all over, of every size
          live.remove(i).close();
        }
        for (int i = 0; i < 16; i++) { // most skip the small holes: first fit reaches deep
          live.add(backend.allocate("c" + round + "." + i, DType.F32, 1 + rng.nextInt(600)));
        }
      }
      for (int i = 0; i < live.size(); i++) {
        backend.run(stream, new Fill(live.get(i), i));
      }
      for (int i = 0; i < live.size(); i++) {
        float[] values = download(live.get(i));
        for (float v : values) {
          assertEquals(i, v, live.get(i).label() + " holds another buffer's values");
        }
      }
    } finally {
      live.forEach(DeviceBuffer::close);
    }
  }

  /** An operation record the engines do not know: what a half-added operation looks like. */
  private record Unimplemented(DeviceBuffer x) implements Operation {}

  @Test
  void operationsCheckTheirArgumentsWhenMadeAndEnginesNameWhatTheyLack() {
    try (DeviceBuffer f = backend.allocate("activations", DType.F32, 8);
        DeviceBuffer h = backend.allocate("weights.bf16", DType.BF16, 8);
        DeviceBuffer small = backend.allocate("grad", DType.F32, 7)) {
      // in the caller's thread, before any engine sees them: type and length, naming the buffer
      var type = assertThrows(IllegalArgumentException.class, () -> new Relu(f, h));
      assertEquals("weights.bf16 is BF16, expected F32", type.getMessage());
      var count = assertThrows(IllegalArgumentException.class, () -> new Add(f, small, f));
      assertEquals("grad has 7 elements, expected 8", count.getMessage());
      var unknown =
          assertThrows(
              UnsupportedOperationException.class, () -> backend.run(stream, new Unimplemented(f)));
      assertEquals(
          "backend " + backend.name() + " does not implement Unimplemented", unknown.getMessage());
      stream.synchronize(); // nothing was enqueued
    }
  }

  // ---- depthwise convolution ------------------------------------------------------------------

  /**
   * The direct depthwise convolution against a double-precision reference, each element within the
   * bound of fp32 summation in any order (n terms: n·2⁻²⁴ of the terms' absolute sum), with the
   * weight gradient accumulated onto what it held and padding contributing nothing.
   */
  @Test
  void depthwiseConvolutionForwardAndBackwardMatchTheReference() {
    // The last two: more positions than one block of the CUDA weight gradient takes (4,096).
    int[][] shapes = {
      {2, 3, 5, 6, 3}, {1, 2, 9, 8, 7}, {2, 1, 1, 1, 1}, {2, 3, 50, 45, 7}, {1, 2, 70, 70, 5}
    };
    Random rng = new Random(77);
    for (int[] shape : shapes) {
      int n = shape[0], c = shape[1], h = shape[2], w = shape[3], k = shape[4], p = k / 2;
      int size = n * c * h * w;
      float[] x = random(rng, size);
      float[] weight = random(rng, c * k * k);
      float[] dy = random(rng, size); // channels last, as y
      float[] held = random(rng, c * k * k); // what the weight gradient holds before
      double[] y = new double[size], yBound = new double[size];
      double[] dx = new double[size], dxBound = new double[size];
      double[] dw = new double[c * k * k], dwBound = new double[c * k * k];
      for (int i = 0; i < dw.length; i++) {
        dw[i] = held[i];
        dwBound[i] = Math.abs(held[i]);
      }
      for (int img = 0; img < n; img++) {
        for (int ch = 0; ch < c; ch++) {
          for (int py = 0; py < h; py++) {
            for (int px = 0; px < w; px++) {
              int out = ((img * h + py) * w + px) * c + ch;
              for (int ky = 0; ky < k; ky++) {
                for (int kx = 0; kx < k; kx++) {
                  int iy = py + ky - p, ix = px + kx - p;
                  if (iy < 0 || iy >= h || ix < 0 || ix >= w) {
                    continue;
                  }
                  int in = ((img * c + ch) * h + iy) * w + ix;
                  int tap = (ch * k + ky) * k + kx;
                  double product = (double) x[in] * weight[tap];
                  y[out] += product;
                  yBound[out] += Math.abs(product);
                  dx[in] += (double) dy[out] * weight[tap];
                  dxBound[in] += Math.abs((double) dy[out] * weight[tap]);
                  dw[tap] += (double) x[in] * dy[out];
                  dwBound[tap] += Math.abs((double) x[in] * dy[out]);
                }
              }
            }
          }
        }
      }
      try (DeviceBuffer xd = upload("x", x);
          DeviceBuffer wd = upload("w", weight);
          DeviceBuffer yd = upload("y", new float[size]);
          DeviceBuffer dyd = upload("dy", dy);
          DeviceBuffer dwd = upload("dw", held);
          DeviceBuffer dxd = upload("dx", new float[size])) {
        backend.run(stream, new DepthwiseConvolution(xd, wd, yd, n, c, h, w, k));
        backend.run(stream, new DepthwiseConvolutionBackward(xd, dyd, wd, dwd, dxd, n, c, h, w, k));
        String what =
            "depthwise "
                + String.join(
                    "x", java.util.Arrays.stream(shape).mapToObj(String::valueOf).toList());
        int terms = Math.max(k * k, n * h * w) + 2;
        assertWithin(y, yBound, download(yd), terms, what + " forward");
        assertWithin(dx, dxBound, download(dxd), terms, what + " input gradient");
        assertWithin(dw, dwBound, download(dwd), terms, what + " weight gradient");
      }
    }
    assertThrows(
        IllegalArgumentException.class,
        () -> {
          try (DeviceBuffer any = upload("x", new float[16])) {
            backend.run(stream, new DepthwiseConvolution(any, any, any, 1, 1, 4, 4, 2));
          }
        },
        "an even kernel has no centre");
  }

  /** {@code actual} within fp32 rounding of {@code terms} summands of {@code bound}'s size. */
  private static void assertWithin(
      double[] expected, double[] bound, float[] actual, int terms, String what) {
    for (int i = 0; i < expected.length; i++) {
      double allowed = terms * 0x1p-24 * bound[i] + Float.MIN_NORMAL;
      assertTrue(
          Math.abs(expected[i] - actual[i]) <= allowed,
          what
              + "["
              + i
              + "]: expected "
              + expected[i]
              + " got "
              + actual[i]
              + " (bound "
              + allowed
              + ")");
    }
  }
}
