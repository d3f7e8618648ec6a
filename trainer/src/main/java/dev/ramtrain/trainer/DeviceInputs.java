package dev.ramtrain.trainer;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.NormalizeImages;
import dev.ramtrain.trainer.data.Batch;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

/**
 * The device side of input batches: two slots of uint8 images and labels, filled from pinned
 * staging on a copy stream while the compute stream works on the other slot, normalized on the
 * device, and the host readback of a batch's losses, logits and labels: enqueued on the compute
 * stream right after the loss into one of two pinned buffers, and read when the host asks, so the
 * training loop can read step k's loss while the device runs step k + 1.
 */
public final class DeviceInputs implements AutoCloseable {
  public static final int SLOTS = 2;

  private final Backend backend;
  private final Stream compute;
  private final Stream copy;
  private final ImageShape shape;
  private final int classes;
  private final float[] mean;
  private final float[] std;
  private final DeviceBuffer[] pixels = new DeviceBuffer[SLOTS];
  private final DeviceBuffer[] labels = new DeviceBuffer[SLOTS];
  private final Event[] copied = new Event[SLOTS];
  private final Event[] consumed = new Event[SLOTS];
  private final DeviceBuffer input;
  private final HostBuffer[] readback = new HostBuffer[SLOTS];
  private final Event[] readDone = new Event[SLOTS];
  private int nextReadback;

  public DeviceInputs(
      Backend backend,
      Stream compute,
      ImageShape shape,
      int maxBatch,
      int classes,
      float[] mean,
      float[] std) {
    if (mean.length != shape.channels() || std.length != shape.channels()) {
      throw new IllegalArgumentException(
          "normalization has " + mean.length + " channels, images have " + shape.channels());
    }
    this.backend = backend;
    this.compute = compute;
    this.copy = backend.createStream("copy-in");
    this.shape = shape;
    this.classes = classes;
    this.mean = mean.clone();
    this.std = std.clone();
    for (int s = 0; s < SLOTS; s++) {
      pixels[s] = backend.allocate("input.u8." + s, DType.U8, (long) maxBatch * shape.bytes());
      labels[s] = backend.allocate("input.labels." + s, DType.I32, maxBatch);
      copied[s] = backend.createEvent("input.copied." + s);
      consumed[s] = backend.createEvent("input.consumed." + s);
    }
    this.input = backend.allocate("input.f32", DType.F32, (long) maxBatch * shape.bytes());
    for (int s = 0; s < SLOTS; s++) {
      readback[s] = backend.allocateHost("readback." + s, 4L * maxBatch * (classes + 2));
      readDone[s] = backend.createEvent("readback.done." + s);
    }
  }

  /** Enqueues the copy of a staged batch into device slot {@code slot}, after its last use. */
  public void stage(Batch batch, int slot) {
    stage(batch.pixels(), batch.labels(), batch.size(), slot);
  }

  /**
   * Enqueues the copy of {@code n} images and labels from pinned {@code pixelStaging} and {@code
   * labelStaging} into device slot {@code slot}, after its last use.
   */
  public void stage(HostBuffer pixelStaging, HostBuffer labelStaging, int n, int slot) {
    long bytes = (long) n * shape.bytes();
    copy.waitFor(consumed[slot]);
    backend.copy(pixelStaging, 0, pixels[slot].view(0, bytes), bytes, copy);
    backend.copy(labelStaging, 0, labels[slot].view(0, n), 4L * n, copy);
    copied[slot].record(copy);
  }

  /** Hands a batch's staging slot back to the loader once its copy to the device has run. */
  public void releaseWhenCopied(Batch batch, int slot) {
    copied[slot].synchronize();
    batch.release();
  }

  /** Once slot {@code slot}'s copy has landed: its n uint8 images as normalized float NCHW. */
  public DeviceBuffer normalized(int slot, int n) {
    compute.waitFor(copied[slot]);
    DeviceBuffer x = input.view(0, (long) n * shape.bytes());
    backend.run(
        compute,
        new NormalizeImages(
            pixels[slot].view(0, (long) n * shape.bytes()),
            n,
            shape.height(),
            shape.width(),
            shape.channels(),
            mean,
            std,
            x));
    return x;
  }

  /** The stream the inputs are normalized on, where the model runs. */
  public Stream computeStream() {
    return compute;
  }

  public DeviceBuffer labels(int slot, int n) {
    return labels[slot].view(0, n);
  }

  /** Marks slot {@code slot} free for the next copy once the compute stream has used it. */
  public void consumed(int slot) {
    consumed[slot].record(compute);
  }

  /**
   * A batch's loss sum and predictions, on the host; {@code confidence} (each prediction's softmax
   * probability) only when asked for, else null.
   */
  public record Readback(
      double lossSum, long correct, int[] truth, int[] predictions, float[] confidence) {}

  /** A readback enqueued by {@link #readLater}: which buffer, how many rows. */
  public record PendingReadback(int buffer, int n) {}

  /** Brings losses, logits and labels to the host (a synchronization point): sum, argmax, hits. */
  public Readback read(DeviceBuffer losses, DeviceBuffer logits, DeviceBuffer truthLabels, int n) {
    return collect(readLater(losses, logits, truthLabels, n), false);
  }

  /** As {@link #read}, with each prediction's softmax probability (for evaluation's mistakes). */
  public Readback readWithConfidence(
      DeviceBuffer losses, DeviceBuffer logits, DeviceBuffer truthLabels, int n) {
    return collect(readLater(losses, logits, truthLabels, n), true);
  }

  public ImageShape shape() {
    return shape;
  }

  /**
   * Enqueues the copies of losses, logits and labels to the host behind the work that computed
   * them, without waiting. At most {@link #SLOTS} may be pending: collect one before enqueueing a
   * third.
   */
  public PendingReadback readLater(
      DeviceBuffer losses, DeviceBuffer logits, DeviceBuffer truthLabels, int n) {
    int buffer = nextReadback;
    nextReadback = (nextReadback + 1) % SLOTS;
    HostBuffer host = readback[buffer];
    long logitsAt = 4L * n;
    long labelsAt = logitsAt + 4L * n * classes;
    backend.copy(losses, host, 0, 4L * n, compute);
    backend.copy(logits, host, logitsAt, 4L * n * classes, compute);
    backend.copy(truthLabels, host, labelsAt, 4L * n, compute);
    readDone[buffer].record(compute);
    return new PendingReadback(buffer, n);
  }

  /** Waits for {@code pending}'s copies (not for later work), then sums, argmaxes and counts. */
  public Readback collect(PendingReadback pending) {
    return collect(pending, false);
  }

  private Readback collect(PendingReadback pending, boolean withConfidence) {
    int n = pending.n();
    HostBuffer host = readback[pending.buffer()];
    long labelsAt = 4L * n + 4L * n * classes;
    readDone[pending.buffer()].synchronize();
    compute.checkFailures(); // a bad label of this batch, found by the loss kernel
    FloatBuffer f = host.asByteBuffer().asFloatBuffer();
    int[] truth = new int[n];
    host.asByteBuffer()
        .position((int) labelsAt)
        .slice()
        .order(ByteOrder.nativeOrder())
        .asIntBuffer()
        .get(truth);
    double sum = 0;
    for (int i = 0; i < n; i++) {
      sum += f.get(i);
    }
    int[] predictions = new int[n];
    long correct = 0;
    for (int i = 0; i < n; i++) {
      int row = n + i * classes;
      int best = 0;
      for (int c = 1; c < classes; c++) {
        if (f.get(row + c) > f.get(row + best)) {
          best = c;
        }
      }
      predictions[i] = best;
      correct += best == truth[i] ? 1 : 0;
    }
    return new Readback(
        sum, correct, truth, predictions, withConfidence ? confidences(f, n, predictions) : null);
  }

  /** softmax(logits)[predicted] = 1 / Σ_c exp(l_c − l_predicted), which cannot overflow. */
  private float[] confidences(FloatBuffer f, int n, int[] predictions) {
    float[] confidence = new float[n];
    for (int i = 0; i < n; i++) {
      int row = n + i * classes;
      double top = f.get(row + predictions[i]);
      double denominator = 0;
      for (int c = 0; c < classes; c++) {
        denominator += Math.exp(f.get(row + c) - top);
      }
      confidence[i] = (float) (1 / denominator);
    }
    return confidence;
  }

  @Override
  public void close() {
    try {
      copy.synchronize(); // after a failed step this raises its error again: free regardless
    } finally {
      for (int s = 0; s < SLOTS; s++) {
        pixels[s].close();
        labels[s].close();
        copied[s].close();
        consumed[s].close();
      }
      input.close();
      for (int s = 0; s < SLOTS; s++) {
        readback[s].close();
        readDone[s].close();
      }
    }
  }
}
