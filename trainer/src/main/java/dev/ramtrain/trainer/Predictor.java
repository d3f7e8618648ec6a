package dev.ramtrain.trainer;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.nn.Model;
import java.nio.FloatBuffer;

/**
 * Class probabilities for uint8 HWC images, the way training saw them: the images cross to the
 * device as uint8, are normalized there with the training run's mean and std, and go through the
 * model in evaluation mode (batch norm on running statistics, no dropout).
 */
public final class Predictor implements AutoCloseable {
  private final Backend backend;
  private final Stream stream;
  private final Model model;
  private final ImageShape shape;
  private final float[] mean;
  private final float[] std;
  private final HostBuffer staging;
  private final HostBuffer logitsHost;
  private final DeviceBuffer pixels;
  private final DeviceBuffer input;

  public Predictor(
      Backend backend, Stream stream, Model model, ImageShape shape, float[] mean, float[] std) {
    if (shape.bytes() != model.inputSize()) {
      throw new IllegalArgumentException(
          "model " + model.spec() + " takes " + model.inputSize() + " inputs, not " + shape);
    }
    if (mean.length != shape.channels() || std.length != shape.channels()) {
      throw new IllegalArgumentException(
          "normalization has " + mean.length + " channels, images have " + shape.channels());
    }
    this.backend = backend;
    this.stream = stream;
    this.model = model;
    this.shape = shape;
    this.mean = mean.clone();
    this.std = std.clone();
    long bytes = (long) model.maxBatch() * shape.bytes();
    this.staging = backend.allocateHost("predict.staging", bytes);
    this.logitsHost = backend.allocateHost("predict.logits", 4L * model.maxBatch() * classes());
    this.pixels = backend.allocate("predict.u8", DType.U8, bytes);
    this.input = backend.allocate("predict.f32", DType.F32, bytes);
  }

  public int classes() {
    return model.outputSize();
  }

  public int maxBatch() {
    return model.maxBatch();
  }

  /** Pinned memory for up to {@link #maxBatch} images, back to back, that the next call reads. */
  public HostBuffer staging() {
    return staging;
  }

  /** Softmax probabilities [n][classes] of the first n staged images. */
  public float[][] probabilities(int n) {
    if (n < 1 || n > maxBatch()) {
      throw new IllegalArgumentException("batch " + n + " outside [1, " + maxBatch() + "]");
    }
    long bytes = (long) n * shape.bytes();
    backend.copy(staging, 0, pixels.view(0, bytes), bytes, stream);
    DeviceBuffer x = input.view(0, bytes);
    backend.normalizeImages(
        stream,
        pixels.view(0, bytes),
        n,
        shape.height(),
        shape.width(),
        shape.channels(),
        mean,
        std,
        x);
    DeviceBuffer logits = model.forward(stream, x, n, false);
    int classes = classes();
    backend.copy(logits, logitsHost, 0, 4L * n * classes, stream);
    stream.synchronize();
    FloatBuffer f = logitsHost.asByteBuffer().asFloatBuffer();
    float[][] out = new float[n][classes];
    for (int i = 0; i < n; i++) {
      double max = Double.NEGATIVE_INFINITY;
      for (int c = 0; c < classes; c++) {
        max = Math.max(max, f.get(i * classes + c));
      }
      double sum = 0;
      for (int c = 0; c < classes; c++) {
        sum += Math.exp(f.get(i * classes + c) - max);
      }
      for (int c = 0; c < classes; c++) {
        out[i][c] = (float) (Math.exp(f.get(i * classes + c) - max) / sum);
      }
    }
    return out;
  }

  @Override
  public void close() {
    stream.synchronize();
    staging.close();
    logitsHost.close();
    pixels.close();
    input.close();
  }
}
