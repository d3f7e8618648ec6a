package dev.ramtrain.trainer.data;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.ShardBatch;
import dev.ramtrain.format.ShardReader;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.memory.util.MemoryUtil;

/** Per-channel mean and standard deviation of pixels in [0, 1], measured on a split's shards. */
public record Normalization(float[] mean, float[] std) {

  /** The normalization a checkpoint's state recorded (lists "mean" and "std"). */
  public static Normalization fromState(Map<String, Object> state) {
    return fromState(state, "the checkpoint's state.json");
  }

  /**
   * The same, read from {@code where} (named in the error): a std that is not positive and finite
   * in every channel, or a mean that is not finite, would turn every input into NaN or infinity (a
   * resumed run trained into all-NaN weights and exited 0), so it is refused.
   */
  public static Normalization fromState(Map<String, Object> state, Object where) {
    Normalization n = new Normalization(floats(state.get("mean")), floats(state.get("std")));
    for (int c = 0; c < n.std.length; c++) {
      if (!(n.std[c] > 0) || Float.isInfinite(n.std[c])) {
        throw unreadable(
            where
                + ": normalization std "
                + java.util.Arrays.toString(n.std)
                + " is not positive and finite in channel "
                + c
                + "; not a state ramtrain writes");
      }
    }
    for (float m : n.mean) {
      if (!Float.isFinite(m)) {
        throw unreadable(
            where
                + ": normalization mean "
                + java.util.Arrays.toString(n.mean)
                + " is not finite; not a state ramtrain writes");
      }
    }
    return n;
  }

  private static UncheckedIOException unreadable(String message) {
    return new UncheckedIOException(message, new IOException(message));
  }

  private static float[] floats(Object list) {
    List<?> values = (List<?>) list;
    float[] out = new float[values.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = ((Number) values.get(i)).floatValue();
    }
    return out;
  }

  /** Measures over the first {@code maxSamples} samples (in shard order: deterministic). */
  public static Normalization measure(ShardSet shards, int maxSamples) {
    return measure(shards, maxSamples, null);
  }

  /** The same, JPEG rows decoded by {@code jpeg} (null where the shards hold none). */
  public static Normalization measure(ShardSet shards, int maxSamples, JpegDecoder jpeg) {
    return fromMoments(moments(shards, maxSamples, jpeg));
  }

  public static double[] moments(ShardSet shards, int maxSamples) {
    return moments(shards, maxSamples, null);
  }

  /**
   * Per channel, the sum of pixel values and of their squares over the first {@code maxSamples}
   * samples, then the pixel count per channel: {@code [sum_0..sum_c-1, squares_0..squares_c-1,
   * pixels]}. Moments of disjoint samples add up, so ranks that hold different shards can agree on
   * one normalization. JPEG rows are decoded whole by {@code jpeg}; one that does not decode is
   * left out (the loader reports it, as {@code bad-sample} says).
   */
  public static double[] moments(ShardSet shards, int maxSamples, JpegDecoder jpeg) {
    Moments moments = new Moments(shards.shape(), maxSamples, jpeg);
    if (!shards.windowed()) {
      for (ShardReader reader : shards.readers()) {
        if (!moments.add(reader)) {
          break;
        }
      }
      return moments.values;
    }
    // Shards read one at a time into one buffer: measuring takes a shard's memory, not the set's.
    ShardSource source = shards.source();
    long largest = 0;
    for (int s = 0; s < source.count(); s++) {
      largest = Math.max(largest, source.bytes(s));
    }
    try (BufferAllocator allocator = new RootAllocator();
        ArrowBuf buffer = allocator.buffer(largest)) {
      for (int s = 0; s < source.count(); s++) {
        try (ShardReader reader = source.read(s, buffer.nioBuffer(0, (int) source.bytes(s)))) {
          if (!moments.add(reader)) {
            break;
          }
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e.getMessage(), e);
    }
    return moments.values;
  }

  /** Sums of the first samples' pixels and squares, shard after shard. */
  private static final class Moments {
    private final ImageShape shape;
    private final int maxSamples;
    private final JpegDecoder jpeg;
    private final double[] values;
    private final ByteBuffer decoded;
    private int samples;

    Moments(ImageShape shape, int maxSamples, JpegDecoder jpeg) {
      this.shape = shape;
      this.maxSamples = maxSamples;
      this.jpeg = jpeg;
      this.values = new double[2 * shape.channels() + 1];
      this.decoded = jpeg == null ? null : ByteBuffer.allocateDirect(shape.bytes());
    }

    /** Adds the reader's samples; false once {@code maxSamples} have been seen. */
    boolean add(ShardReader reader) {
      int c = shape.channels();
      for (int b = 0; b < reader.batchCount(); b++) {
        try (ShardBatch batch = reader.batch(b)) {
          for (int r = 0; r < batch.rowCount(); r++) {
            if (samples++ >= maxSamples) {
              return false;
            }
            long address = batch.isJpeg(r) ? decode(reader, batch, r) : batch.imageAddress(r);
            if (address == 0) {
              continue;
            }
            for (int i = 0; i < shape.bytes(); i++) {
              double v = (MemoryUtil.getByte(address + i) & 0xFF) / 255.0;
              values[i % c] += v;
              values[c + i % c] += v * v;
            }
            values[2 * c] += shape.height() * shape.width();
          }
        }
      }
      return true;
    }

    /** Row {@code r}'s JPEG decoded whole: its pixels' address, or 0 when it does not decode. */
    private long decode(ShardReader reader, ShardBatch batch, int r) {
      if (jpeg == null) {
        throw new IllegalArgumentException(
            reader.name() + " holds JPEG rows: measuring it needs a JPEG decoder");
      }
      long address = MemoryUtil.getByteBufferAddress(decoded);
      String why =
          jpeg.decode(
              batch.imageAddress(r),
              batch.imageLength(r),
              shape,
              1,
              0,
              0,
              shape.width(),
              shape.height(),
              address);
      return why == null ? address : 0;
    }
  }

  /** The normalization of {@link #moments} (summed over ranks or not). */
  public static Normalization fromMoments(double[] moments) {
    int c = (moments.length - 1) / 2;
    double pixels = moments[2 * c];
    if (pixels == 0) {
      throw new IllegalArgumentException("no samples to measure normalization on");
    }
    float[] mean = new float[c];
    float[] std = new float[c];
    for (int k = 0; k < c; k++) {
      double m = moments[k] / pixels;
      mean[k] = (float) m;
      std[k] = (float) Math.max(1e-3, Math.sqrt(Math.max(0, moments[c + k] / pixels - m * m)));
    }
    return new Normalization(mean, std);
  }
}
