package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Fill;
import dev.ramtrain.trainer.backend.ops.Multiply;
import dev.ramtrain.trainer.backend.ops.SoftmaxCrossEntropy;

/** Softmax cross-entropy with label smoothing: per-sample losses and dL/dlogits of the mean. */
public final class CrossEntropyLoss implements AutoCloseable {
  private final Backend backend;
  private final int classes;
  private final float smoothing;
  private final DeviceBuffer losses;
  private final DeviceBuffer dlogits;
  private final DeviceBuffer scale; // batch / meanOver, element by element, for accumulation

  public CrossEntropyLoss(Backend backend, int maxBatch, int classes, float smoothing) {
    if (smoothing < 0 || smoothing >= 1) {
      throw new IllegalArgumentException("label smoothing must be in [0, 1), got " + smoothing);
    }
    this.backend = backend;
    this.classes = classes;
    this.smoothing = smoothing;
    this.losses = backend.allocate("loss", DType.F32, maxBatch);
    this.dlogits = backend.allocate("dlogits", DType.F32, (long) maxBatch * classes);
    this.scale = backend.allocate("dlogits.scale", DType.F32, (long) maxBatch * classes);
  }

  /** Enqueues the loss of {@code batch} rows; returns dL/dlogits (valid until the next call). */
  public DeviceBuffer compute(Stream stream, DeviceBuffer logits, DeviceBuffer labels, int batch) {
    return compute(stream, logits, labels, batch, batch);
  }

  /**
   * The same, with dL/dlogits of the loss summed over these rows and divided by {@code meanOver} (≥
   * {@code batch}) instead of {@code batch}: a micro-batch's share of the gradient of the mean over
   * a larger batch (gradient accumulation, as PyTorch's loss / accumulation steps).
   */
  public DeviceBuffer compute(
      Stream stream, DeviceBuffer logits, DeviceBuffer labels, int batch, long meanOver) {
    return compute(stream, logits, labels, batch, meanOver, 1f);
  }

  /**
   * The same on mixed targets: row i's is {@code mix} of its own and 1 - {@code mix} of row batch -
   * 1 - i's, the sample mixup or cutmix mixed it with (1: each row's own).
   */
  public DeviceBuffer compute(
      Stream stream,
      DeviceBuffer logits,
      DeviceBuffer labels,
      int batch,
      long meanOver,
      float mix) {
    DeviceBuffer g = dlogits.view(0, (long) batch * classes);
    backend.run(
        stream,
        new SoftmaxCrossEntropy(
            logits, labels, batch, classes, smoothing, mix, losses.view(0, batch), g));
    if (meanOver != batch) {
      DeviceBuffer share = scale.view(0, (long) batch * classes);
      backend.run(stream, new Fill(share, (float) ((double) batch / meanOver)));
      backend.run(stream, new Multiply(g, share, g));
    }
    return g;
  }

  /** Per-sample losses of the last {@link #compute}, on the device. */
  public DeviceBuffer losses(int batch) {
    return losses.view(0, batch);
  }

  @Override
  public void close() {
    losses.close();
    dlogits.close();
    scale.close();
  }
}
