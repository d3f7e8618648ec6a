package dev.ramtrain.trainer.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.CpuEngine;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.backend.ops.AdamWStep;
import dev.ramtrain.trainer.backend.ops.Add;
import dev.ramtrain.trainer.backend.ops.ClipGradNorm;
import dev.ramtrain.trainer.backend.ops.Col2im;
import dev.ramtrain.trainer.backend.ops.ConvWindow;
import dev.ramtrain.trainer.backend.ops.Convert;
import dev.ramtrain.trainer.backend.ops.DepthwiseConvolution;
import dev.ramtrain.trainer.backend.ops.DepthwiseConvolutionBackward;
import dev.ramtrain.trainer.backend.ops.DropoutMask;
import dev.ramtrain.trainer.backend.ops.Fill;
import dev.ramtrain.trainer.backend.ops.Gelu;
import dev.ramtrain.trainer.backend.ops.GeluBackward;
import dev.ramtrain.trainer.backend.ops.LayerNormBackward;
import dev.ramtrain.trainer.backend.ops.LayerNormForward;
import dev.ramtrain.trainer.backend.ops.Lerp;
import dev.ramtrain.trainer.backend.ops.MaxPool;
import dev.ramtrain.trainer.backend.ops.MaxPoolBackward;
import dev.ramtrain.trainer.backend.ops.Multiply;
import dev.ramtrain.trainer.backend.ops.Relu;
import dev.ramtrain.trainer.backend.ops.ReluBackward;
import dev.ramtrain.trainer.backend.ops.SgdStep;
import dev.ramtrain.trainer.backend.ops.SumRows;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Random;
import java.util.function.BiConsumer;
import org.junit.jupiter.api.Test;

/**
 * Kernels whose results the CUDA backend promises bit for bit equal to the CPU backend's Java
 * engine (its kernels share their operation order; the oneDNN engine's GELU, softmax and layer norm
 * sum in float, in another order, within the conformance suite's bounds): the counter-RNG dropout
 * mask, bf16 rounding, the elementwise activations and their gradients, the optimizer steps,
 * gradient clipping, layer norm, col2im's sums, max pooling and bias gradients. Each runs on both
 * backends from the same random input (with NaNs, infinities, signed zeros and values on bf16
 * rounding ties) and the outputs are compared bit for bit, NaN payloads aside (see {@link
 * #floatBits}).
 */
class CudaMatchesCpuTest {
  private static final int N = 50_000;

  /** An operation on device buffers: inputs first, then outputs, as {@link #sameBits} allocates. */
  private interface Op {
    void run(Backend backend, Stream stream, DeviceBuffer[] buffers);
  }

  private static float[] awkward(long seed, int n) {
    Random rng = new Random(seed);
    float[] x = new float[n];
    for (int i = 0; i < n; i++) {
      x[i] = (float) (rng.nextGaussian() * Math.pow(10, rng.nextInt(7) - 3));
    }
    float[] special = {
      0f,
      -0f,
      Float.NaN,
      Float.POSITIVE_INFINITY,
      Float.NEGATIVE_INFINITY,
      Float.MIN_VALUE,
      Float.intBitsToFloat(0x3F808000), // 1 + 2^-8: a bf16 tie, rounds to even (down)
      Float.intBitsToFloat(0x3F818000), // a tie that rounds up
      Float.intBitsToFloat(0x7F7FFFFF) // rounds to infinity in bf16
    };
    System.arraycopy(special, 0, x, 0, special.length);
    return x;
  }

  /** Runs {@code op} on both backends with {@code inputs} uploaded and {@code outputs} zeroed. */
  private static void sameBits(String what, float[][] inputs, int outputs, Op op) {
    byte[][] cpu;
    byte[][] cuda;
    try (Backend b = new CpuBackend(2, CpuEngine.JAVA)) {
      cpu = runOn(b, inputs, outputs, op);
    }
    try (Backend b = CudaBackend.open(new BackendSpec(BackendSpec.Kind.CUDA, 1))) {
      cuda = runOn(b, inputs, outputs, op);
    }
    for (int i = 0; i < cpu.length; i++) {
      assertArrayEquals(floatBits(cpu[i]), floatBits(cuda[i]), what + ": float of buffer " + i);
    }
  }

  /**
   * A buffer's floats as bits, every NaN as one NaN: NVIDIA GPUs return the canonical NaN
   * 0x7FFFFFFF from arithmetic on a NaN (seen on an H200: max pooling's 0 + NaN, ReLU), where x86,
   * and so the CPU backend and the emulator, keep the operand's payload. Which NaN carries no
   * meaning; that it is a NaN does, and every other bit is compared.
   */
  private static int[] floatBits(byte[] bytes) {
    int[] bits = new int[bytes.length / Float.BYTES];
    ByteBuffer.wrap(bytes).order(ByteOrder.nativeOrder()).asIntBuffer().get(bits);
    for (int i = 0; i < bits.length; i++) {
      if (Float.isNaN(Float.intBitsToFloat(bits[i]))) {
        bits[i] = Float.floatToIntBits(Float.NaN);
      }
    }
    return bits;
  }

  private static byte[][] runOn(Backend b, float[][] inputs, int outputs, Op op) {
    Stream s = b.createStream("main");
    int n = inputs[0].length;
    DeviceBuffer[] buffers = new DeviceBuffer[inputs.length + outputs];
    try (HostBuffer staging = b.allocateHost("staging", 4L * n)) {
      for (int i = 0; i < buffers.length; i++) {
        buffers[i] = b.allocate("buffer" + i, DType.F32, n);
        if (i < inputs.length) {
          staging.asByteBuffer().asFloatBuffer().put(inputs[i]);
          b.copy(staging, 0, buffers[i], 4L * n, s);
          s.synchronize();
        }
      }
      op.run(b, s, buffers);
      byte[][] out = new byte[buffers.length][];
      for (int i = 0; i < buffers.length; i++) {
        b.copy(buffers[i], staging, 0, buffers[i].bytes(), s);
        s.synchronize();
        out[i] = new byte[(int) buffers[i].bytes()];
        ByteBuffer bytes = staging.asByteBuffer();
        bytes.get(out[i]);
      }
      return out;
    } finally {
      for (DeviceBuffer buffer : buffers) {
        if (buffer != null) {
          buffer.close();
        }
      }
    }
  }

  @Test
  void dropoutMaskFromTheCounterRng() {
    sameBits(
        "dropout",
        new float[][] {new float[N]},
        0,
        (b, s, x) -> b.run(s, new DropoutMask(0.3f, 0x5EEDL, x[0])));
  }

  @Test
  void bf16RoundingAndWidening() {
    sameBits(
        "bf16",
        new float[][] {awkward(1, N)},
        1,
        (b, s, x) -> {
          try (DeviceBuffer half = b.allocate("half", DType.BF16, N)) {
            b.run(s, new Convert(x[0], half));
            b.run(s, new Convert(half, x[1]));
            s.synchronize();
          }
        });
  }

  @Test
  void activationsAndTheirGradients() {
    float[][] in = {awkward(2, N), awkward(3, N)};
    BiConsumer<String, Op> check = (what, op) -> sameBits(what, in, 1, op);
    check.accept("relu", (b, s, x) -> b.run(s, new Relu(x[0], x[2])));
    check.accept("relu backward", (b, s, x) -> b.run(s, new ReluBackward(x[0], x[1], x[2])));
    check.accept("gelu", (b, s, x) -> b.run(s, new Gelu(x[0], x[2])));
    check.accept("gelu backward", (b, s, x) -> b.run(s, new GeluBackward(x[0], x[1], x[2])));
    check.accept("add", (b, s, x) -> b.run(s, new Add(x[0], x[1], x[2])));
    check.accept("multiply", (b, s, x) -> b.run(s, new Multiply(x[0], x[1], x[2])));
    check.accept(
        "lerp",
        (b, s, x) -> {
          b.copy(x[0], x[2], s);
          b.run(s, new Lerp(x[2], x[1], 0.0002f));
        });
  }

  /**
   * Layer norm sums in double in the same order on both engines and rounds once: the same bits,
   * forward and backward, over features (inner 1) and over the channels of NCHW (inner 49), with
   * the parameter gradients summed in one row group of lanes (at most 512 groups) and in several.
   */
  @Test
  void layerNormForwardAndBackward() {
    Random rng = new Random(6);
    float[][] in = new float[3][N];
    for (float[] values : in) {
      for (int i = 0; i < N; i++) {
        values[i] = (float) (rng.nextGaussian() * 2 + 0.5);
      }
    }
    for (int[] shape : new int[][] {{60, 768, 1}, {4, 96, 49}, {1500, 32, 1}, {5, 8, 700}}) {
      int outer = shape[0];
      int size = shape[1];
      int inner = shape[2];
      long count = (long) outer * size * inner;
      long groups = (long) outer * inner;
      sameBits(
          "layer norm " + outer + "x" + size + "x" + inner,
          in,
          3,
          (b, s, x) -> {
            // x, dy, gamma|beta; then y, stats (mean | 1/std), dgamma|dbeta|dx
            DeviceBuffer gamma = x[2].view(0, size);
            DeviceBuffer beta = x[2].view(size, size);
            DeviceBuffer mean = x[4].view(0, groups);
            DeviceBuffer invStd = x[4].view(groups, groups);
            b.run(
                s,
                new LayerNormForward(
                    x[0].view(0, count),
                    outer,
                    size,
                    inner,
                    gamma,
                    beta,
                    1e-6f,
                    x[3].view(0, count),
                    mean,
                    invStd));
            b.run(
                s,
                new LayerNormBackward(
                    x[0].view(0, count),
                    x[1].view(0, count),
                    outer,
                    size,
                    inner,
                    gamma,
                    mean,
                    invStd,
                    x[5].view(0, size),
                    x[5].view(size, size),
                    x[5].view(2L * size, count)));
          });
    }
  }

  @Test
  void optimizerStepsAndClipping() {
    Random rng = new Random(4);
    float[][] state = new float[4][N];
    for (float[] slab : state) {
      for (int i = 0; i < N; i++) {
        slab[i] = (float) rng.nextGaussian();
      }
    }
    for (int i = 0; i < N; i++) {
      state[3][i] = Math.abs(state[3][i]); // AdamW's second moment
    }
    sameBits(
        "adamw",
        state,
        0,
        (b, s, x) -> {
          for (int step = 1; step <= 3; step++) {
            b.run(
                s, new AdamWStep(x[0], x[1], x[2], x[3], 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step));
          }
        });
    sameBits(
        "sgd nesterov",
        state,
        0,
        (b, s, x) -> b.run(s, new SgdStep(x[0], x[1], x[2], 0.05f, 0.9f, 1e-4f, true)));
    sameBits("clip", state, 1, (b, s, x) -> b.run(s, new ClipGradNorm(x[1], 10f, x[4].view(0, 1))));
  }

  /**
   * The direct depthwise convolution's output and input gradient (taps summed in row order in fp32
   * on both); its weight gradient sums in double in another order, checked within bounds by the
   * conformance suite, and is cleared here before the comparison.
   */
  @Test
  void depthwiseConvolutionAndItsInputGradient() {
    int n = 2, c = 5, h = 9, w = 11, k = 7, size = n * c * h * w;
    sameBits(
        "depthwise forward",
        new float[][] {awkward(11, N), awkward(12, N)},
        1,
        (b, s, x) ->
            b.run(
                s,
                new DepthwiseConvolution(
                    x[0].view(0, size),
                    x[1].view(0, c * k * k),
                    x[2].view(0, size),
                    n,
                    c,
                    h,
                    w,
                    k)));
    sameBits(
        "depthwise input gradient",
        new float[][] {awkward(13, N), awkward(14, N), awkward(15, N)},
        2,
        (b, s, x) -> {
          b.run(
              s,
              new DepthwiseConvolutionBackward(
                  x[0].view(0, size),
                  x[1].view(0, size),
                  x[2].view(0, c * k * k),
                  x[3].view(0, c * k * k),
                  x[4].view(0, size),
                  n,
                  c,
                  h,
                  w,
                  k));
          b.run(s, new Fill(x[3], 0f));
        });
  }

  @Test
  void convolutionAdjointPoolingAndBiasGradients() {
    int n = 2, c = 3, h = 10, w = 9, k = 3, stride = 2, pad = 1;
    int oh = (h + 2 * pad - k) / stride + 1;
    int ow = (w + 2 * pad - k) / stride + 1;
    int cols = n * c * k * k * oh * ow;
    float[] big = awkward(5, N);
    sameBits(
        "col2im",
        new float[][] {big},
        1,
        (b, s, x) ->
            b.run(
                s,
                new Col2im(
                    x[0].view(0, cols),
                    new ConvWindow(n, c, h, w, k, k, stride, pad),
                    x[1].view(0, n * c * h * w))));
    // One row group of lanes (500 rows), several (4,000: 8) and the most (48,000: 64), over
    // finite values (awkward's first ones hold NaN and infinities, which would hide a total).
    float[] finite = Arrays.copyOfRange(big, 16, 16 + N);
    for (int[] shape : new int[][] {{500, 100}, {4_000, 12}, {48_000, 1}}) {
      int rows = shape[0];
      int columns = shape[1];
      sameBits(
          "sum rows " + rows + "x" + columns,
          new float[][] {finite},
          1,
          (b, s, x) ->
              b.run(
                  s,
                  new SumRows(
                      x[0].view(0, (long) rows * columns),
                      x[1].view(0, columns),
                      rows,
                      columns,
                      0.5f)));
    }
    sameBits(
        "max pool forward and backward",
        new float[][] {awkward(6, N), awkward(7, N)},
        2,
        (b, s, x) -> {
          try (DeviceBuffer argmax = b.allocate("argmax", DType.I32, n * c * 5 * 4)) {
            b.run(
                s,
                new MaxPool(
                    x[0].view(0, n * c * h * w),
                    n,
                    c,
                    h,
                    w,
                    2,
                    2,
                    x[2].view(0, n * c * 20),
                    argmax));
            b.run(
                s,
                new MaxPoolBackward(
                    x[1].view(0, n * c * 20),
                    argmax,
                    n,
                    c,
                    h,
                    w,
                    2,
                    2,
                    0,
                    x[3].view(0, n * c * h * w)));
            s.synchronize();
          }
        });
    // ResNet's stem pooling, 3x3/2 padded by 1: windows overlap, so an input that wins several
    // adds their gradients, in output order on both engines.
    int oh3 = (h + 2 - 3) / 2 + 1;
    int ow3 = (w + 2 - 3) / 2 + 1;
    sameBits(
        "overlapping max pool backward",
        new float[][] {awkward(8, N), awkward(9, N)},
        2,
        (b, s, x) -> {
          try (DeviceBuffer argmax = b.allocate("argmax", DType.I32, n * c * oh3 * ow3)) {
            b.run(
                s,
                new MaxPool(
                    x[0].view(0, n * c * h * w),
                    n,
                    c,
                    h,
                    w,
                    3,
                    2,
                    1,
                    x[2].view(0, n * c * oh3 * ow3),
                    argmax));
            b.run(
                s,
                new MaxPoolBackward(
                    x[1].view(0, n * c * oh3 * ow3),
                    argmax,
                    n,
                    c,
                    h,
                    w,
                    3,
                    2,
                    1,
                    x[3].view(0, n * c * h * w)));
            s.synchronize();
          }
        });
  }
}
