package dev.ramtrain.trainer;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.nn.Network;
import java.nio.FloatBuffer;

/**
 * Class probabilities for uint8 HWC images, the way training saw them: the images cross to the
 * device as uint8, are normalized there with the training run's mean and std, and go through the
 * model in evaluation mode (batch norm on running statistics, no dropout).
 */
public final class Predictor implements AutoCloseable {
  private final Backend backend;
  private final Stream stream;
  private final Network model;
  private final DeviceInputs inputs;
  private final HostBuffer staging;
  private final HostBuffer labels; // unused by prediction, but a device input slot carries labels
  private final HostBuffer logitsHost;

  public Predictor(
      Backend backend, Stream stream, Network model, ImageShape shape, float[] mean, float[] std) {
    if (shape.bytes() != model.inputSize()) {
      throw new IllegalArgumentException(
          "model " + model.spec() + " takes " + model.inputSize() + " inputs, not " + shape);
    }
    this.backend = backend;
    this.stream = stream;
    this.model = model;
    // The same device slots, copies and normalization as training and evaluation use.
    this.inputs = new DeviceInputs(backend, stream, shape, model.maxBatch(), classes(), mean, std);
    this.staging = backend.allocateHost("predict.staging", (long) model.maxBatch() * shape.bytes());
    this.labels = backend.allocateHost("predict.labels", 4L * model.maxBatch());
    this.logitsHost = backend.allocateHost("predict.logits", 4L * model.maxBatch() * classes());
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
    inputs.stage(staging, labels, n, 0);
    DeviceBuffer logits = model.forward(stream, inputs.normalized(0, n), n, false);
    inputs.consumed(0);
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
    try (inputs) {
      staging.close();
      labels.close();
      logitsHost.close();
    }
  }
}
