package dev.ramtrain.trainer.data;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.ShardBatch;
import dev.ramtrain.format.ShardReader;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.util.MemoryUtil;

/** Per-channel mean and standard deviation of pixels in [0, 1], measured on a split's shards. */
public record Normalization(float[] mean, float[] std) {

  /** The normalization a checkpoint's state recorded (lists "mean" and "std"). */
  public static Normalization fromState(Map<String, Object> state) {
    return new Normalization(floats(state.get("mean")), floats(state.get("std")));
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
    ImageShape shape = shards.shape();
    int c = shape.channels();
    double[] moments = new double[2 * c + 1];
    int samples = 0;
    ByteBuffer decoded = jpeg == null ? null : ByteBuffer.allocateDirect(shape.bytes());
    outer:
    for (ShardReader reader : shards.readers()) {
      for (int b = 0; b < reader.batchCount(); b++) {
        try (ShardBatch batch = reader.batch(b)) {
          for (int r = 0; r < batch.rowCount(); r++) {
            if (samples++ >= maxSamples) {
              break outer;
            }
            long address = batch.imageAddress(r);
            if (batch.isJpeg(r)) {
              if (jpeg == null) {
                throw new IllegalArgumentException(
                    reader.name() + " holds JPEG rows: measuring it needs a JPEG decoder");
              }
              address = MemoryUtil.getByteBufferAddress(decoded);
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
              if (why != null) {
                continue;
              }
            }
            for (int i = 0; i < shape.bytes(); i++) {
              double v = (MemoryUtil.getByte(address + i) & 0xFF) / 255.0;
              moments[i % c] += v;
              moments[c + i % c] += v * v;
            }
            moments[2 * c] += shape.height() * shape.width();
          }
        }
      }
    }
    return moments;
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
