package dev.ramtrain.trainer;

import dev.ramtrain.etl.progress.ProgressLine;
import dev.ramtrain.etl.shard.ImageShape;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.data.Batch;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.nn.CrossEntropyLoss;
import dev.ramtrain.trainer.optim.LrSchedule;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The training loop. Follow one batch: the loader leaves uint8 images in a pinned staging slot;
 * {@link #stage} copies them to a device input slot on the copy stream; {@link #step} waits for
 * that copy on the compute stream, normalizes on the device (uint8 → float NCHW), runs forward, the
 * loss, and the learner's backward and update (resident: clipping and one optimizer call over the
 * parameter slab; offloaded: layer by layer on the host while backward goes on). Two device input
 * slots let the next batch's copy overlap this batch's compute.
 */
public final class Trainer implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(Trainer.class);

  private final Backend backend;
  private final Learner learner;
  private final LrSchedule schedule;
  private final TrainOptions options;
  private final MetricsLog metrics;
  private final Stream compute;
  private final CrossEntropyLoss loss;
  private final DeviceInputs inputs;
  private final ProgressLine progress = new ProgressLine();
  private long globalStep;
  private int skippedSteps;
  private Path checkpointRun; // null: no checkpoints
  private Map<String, Object> checkpointInfo = Map.of();

  public Trainer(
      Backend backend,
      Learner learner,
      LrSchedule schedule,
      TrainOptions options,
      ImageShape shape,
      MetricsLog metrics) {
    if (shape.bytes() != learner.inputSize()) {
      throw new IllegalArgumentException(
          "model "
              + learner.spec()
              + " takes "
              + learner.inputSize()
              + " inputs, images are "
              + shape
              + " = "
              + shape.bytes());
    }
    this.backend = backend;
    this.learner = learner;
    this.schedule = schedule;
    this.options = options;
    this.metrics = metrics;
    int classes = learner.outputSize();
    int batch = learner.maxBatch();
    this.compute = backend.createStream("compute");
    // First: it checks the normalization against the images before any memory is allocated.
    this.inputs =
        new DeviceInputs(backend, compute, shape, batch, classes, options.mean(), options.std());
    this.loss = new CrossEntropyLoss(backend, batch, classes, options.labelSmoothing());
  }

  /** Statistics of one pass over the training batches. */
  public record EpochStats(
      double loss, double accuracy, long samples, double seconds, double stallSeconds) {}

  /** Trains {@code epochs} epochs from {@code firstEpoch}, evaluating on {@code val} after each. */
  public void fit(DataLoader train, DataLoader val, int firstEpoch) {
    for (int epoch = firstEpoch; epoch < options.epochs(); epoch++) {
      EpochStats stats = trainEpoch(train, epoch);
      EvalResult eval = evaluate(val);
      Map<String, Object> record = new LinkedHashMap<>();
      record.put("type", "epoch");
      record.put("epoch", epoch);
      record.put("train_loss", stats.loss());
      record.put("train_acc", stats.accuracy());
      record.put("val_loss", eval.loss());
      record.put("val_acc", eval.accuracy());
      record.put("samples_per_s", stats.samples() / stats.seconds());
      record.put("data_stall_pct", 100 * stats.stallSeconds() / stats.seconds());
      record.put("skipped_steps", skippedSteps);
      record.put("peak_device_bytes", backend.peakAllocatedBytes());
      metrics.write(record);
      if (checkpointRun != null) {
        try {
          Path saved =
              Checkpoints.save(
                  checkpointRun, epoch + 1, globalStep, learner.snapshot(compute), checkpointInfo);
          LOG.info("checkpoint {}", saved);
        } catch (IOException e) {
          throw new UncheckedIOException("cannot write a checkpoint under " + checkpointRun, e);
        }
      }
      progress.finish(
          String.format(
              "epoch %d: train loss %.4f acc %.4f, val loss %.4f acc %.4f, %.0f samples/s, data stall %.1f%%",
              epoch,
              stats.loss(),
              stats.accuracy(),
              eval.loss(),
              eval.accuracy(),
              stats.samples() / stats.seconds(),
              100 * stats.stallSeconds() / stats.seconds()));
    }
  }

  public EpochStats trainEpoch(DataLoader train, int epoch) {
    long start = System.nanoTime();
    long stallBefore = train.stallNanos();
    double lossSum = 0;
    long correct = 0;
    long samples = 0;
    try (DataLoader.Epoch batches = train.epoch(epoch)) {
      Batch next = batches.next();
      int slot = 0;
      if (next != null) {
        inputs.stage(next, slot);
      }
      while (next != null) {
        Batch current = next;
        int currentSlot = slot;
        inputs.releaseWhenCopied(current, currentSlot); // its copy ran during the previous step
        long stallBeforeNext = train.stallNanos();
        next = batches.next();
        long stallNanos = train.stallNanos() - stallBeforeNext;
        if (next != null) {
          slot = (slot + 1) % DeviceInputs.SLOTS;
          inputs.stage(next, slot); // the copy stream copies it while the step below computes
        }
        StepResult r = step(current.size(), currentSlot, epoch, stallNanos);
        lossSum += r.lossSum();
        correct += r.correct();
        samples += current.size();
        double meanLoss = lossSum / samples;
        double accuracy = (double) correct / samples;
        long seen = samples;
        int batchNumber = current.index() + 1;
        progress.update(
            () ->
                progressText(
                    epoch, batchNumber, train.batchesPerEpoch(), meanLoss, accuracy, seen, start));
      }
    }
    double seconds = (System.nanoTime() - start) / 1e9;
    return new EpochStats(
        lossSum / samples,
        (double) correct / samples,
        samples,
        seconds,
        (train.stallNanos() - stallBefore) / 1e9);
  }

  private String progressText(
      int epoch, int batch, int batches, double loss, double accuracy, long samples, long start) {
    double seconds = Math.max(1e-3, (System.nanoTime() - start) / 1e9);
    double perBatch = seconds / batch;
    long remaining =
        (long) (perBatch * ((long) (options.epochs() - epoch - 1) * batches + batches - batch));
    return String.format(
        "epoch %d/%d  step %d/%d  loss %.4f  acc %.4f  %,.0f samples/s  ETA %s",
        epoch + 1,
        options.epochs(),
        batch,
        batches,
        loss,
        accuracy,
        samples / seconds,
        ProgressLine.format(Duration.ofSeconds(remaining)));
  }

  private record StepResult(double lossSum, long correct) {}

  private StepResult step(int n, int slot, int epoch, long stallNanos) {
    long stepStart = System.nanoTime();
    DeviceBuffer x = inputs.normalized(slot, n);
    DeviceBuffer y = inputs.labels(slot, n);
    learner.beginStep(compute, globalStep);
    DeviceBuffer logits = learner.forward(compute, x, n, true);
    DeviceBuffer dlogits = loss.compute(compute, logits, y, n);
    inputs.consumed(slot); // the device input slot is free for the next copy
    DeviceInputs.Readback rb = inputs.read(loss.losses(n), logits, y, n);
    if (!Double.isFinite(rb.lossSum())) {
      if (options.nanPolicy() == TrainOptions.NanPolicy.STOP) {
        throw new TrainingDivergedException(
            String.format(
                "loss is %s at epoch %d, step %d (learning rate %.3g); stopping (ramtrain.train.nan-policy=stop;"
                    + " 'skip' skips such steps). No checkpoint is written by this run after step %d.",
                rb.lossSum(), epoch, globalStep, schedule.lr(globalStep), globalStep - 1));
      }
      skippedSteps++;
      LOG.warn("loss is {} at epoch {} step {}: step skipped", rb.lossSum(), epoch, globalStep);
      globalStep++;
      return new StepResult(0, 0);
    }
    float lr = (float) schedule.lr(globalStep);
    learner.backwardAndUpdate(compute, dlogits, n, lr);
    if (globalStep % options.logEvery() == 0) {
      Map<String, Object> learnerMetrics = learner.stepMetrics(compute); // waits for the step
      Map<String, Object> record = new LinkedHashMap<>();
      record.put("type", "step");
      record.put("epoch", epoch);
      record.put("step", globalStep);
      record.put("loss", rb.lossSum() / n);
      record.put("acc", (double) rb.correct() / n);
      record.put("lr", lr);
      double stepSeconds = (System.nanoTime() - stepStart) / 1e9;
      record.put("step_ms", stepSeconds * 1e3);
      record.put("samples_per_s", n / stepSeconds);
      record.put("data_stall_ms", stallNanos / 1e6);
      record.put("peak_device_bytes", backend.peakAllocatedBytes());
      record.putAll(learnerMetrics);
      metrics.write(record);
    }
    globalStep++;
    return new StepResult(rb.lossSum(), rb.correct());
  }

  /** Loss, accuracy and confusion matrix over every batch of {@code data}, without training. */
  public EvalResult evaluate(DataLoader data) {
    return Evaluator.evaluate(learner, loss, inputs, data);
  }

  /** Writes a checkpoint under {@code runDir} after every epoch, with {@code info} in its state. */
  public void checkpointTo(Path runDir, Map<String, Object> info) {
    this.checkpointRun = runDir;
    this.checkpointInfo = Map.copyOf(info);
  }

  /** Continues a resumed run at {@code step} (the learning-rate schedule's position). */
  public void resumeAt(long step) {
    this.globalStep = step;
  }

  public int skippedSteps() {
    return skippedSteps;
  }

  public long globalStep() {
    return globalStep;
  }

  @Override
  public void close() {
    compute.synchronize();
    inputs.close();
    loss.close();
  }
}
