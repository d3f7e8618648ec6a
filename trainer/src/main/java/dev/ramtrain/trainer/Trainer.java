package dev.ramtrain.trainer;

import dev.ramtrain.console.ProgressLine;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.checkpoint.CheckpointSink;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.data.Batch;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.dist.DataParallel;
import dev.ramtrain.trainer.nn.CrossEntropyLoss;
import dev.ramtrain.trainer.optim.LrSchedule;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.LongConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The training loop. Follow one batch: the loader leaves uint8 images in a pinned staging slot;
 * {@link #stage} copies them to a device input slot on the copy stream; {@link #step} waits for
 * that copy on the compute stream, normalizes on the device (uint8 → float NCHW), runs forward, the
 * loss, and the learner's backward and update (resident: clipping and one optimizer call over the
 * parameter slab; offloaded: layer by layer on the host while backward goes on). Two device input
 * slots let the next batch's copy overlap this batch's compute, and the loss of a step is read
 * while the next one runs, so the device does not idle waiting for the host.
 */
public final class Trainer implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(Trainer.class);

  private final Backend backend;
  private final ImageShape shape; // the model's input images
  private final Learner learner;
  private final LrSchedule schedule;
  private final LoopSpec options;
  private final MetricsLog metrics;
  private final Stream compute;
  private final CrossEntropyLoss loss;
  private final DeviceInputs inputs;
  private final ProgressLine progress = new ProgressLine();
  private final DataParallel ranks;
  private long globalStep;
  private int skippedSteps;
  private final SampleRate rate = new SampleRate(); // what step records show as samples/s
  private CheckpointSink checkpoints; // null: no checkpoints (or another rank saves them)
  private int checkpointEvery; // steps between checkpoints within an epoch; 0: at epoch ends only
  private LongConsumer afterEachStep = steps -> {};
  private InFlight inFlight; // the step whose loss is still on its way to the host
  private final StepLosses stepLosses = new StepLosses();
  private final BestEpoch best;

  public Trainer(
      Backend backend,
      Learner learner,
      LrSchedule schedule,
      LoopSpec options,
      ImageShape shape,
      MetricsLog metrics) {
    this(backend, learner, schedule, options, shape, metrics, DataParallel.single());
  }

  /**
   * One rank of a data-parallel job: {@code learner} averages gradients over {@code ranks}, the
   * loaders give this rank its share of every global batch, epoch figures and evaluations are
   * summed over the ranks, and only rank 0 writes metrics, checkpoints and progress.
   */
  public Trainer(
      Backend backend,
      Learner learner,
      LrSchedule schedule,
      LoopSpec options,
      ImageShape shape,
      MetricsLog metrics,
      DataParallel ranks) {
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
    this.shape = shape;
    this.learner = learner;
    this.schedule = schedule;
    this.options = options;
    this.metrics = metrics;
    this.ranks = ranks;
    this.best = new BestEpoch(options.best());
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
      double loss,
      double accuracy,
      long samples,
      double seconds,
      double stallSeconds,
      double loaderSamplesPerSecond,
      double resizeMillisPerSample,
      double decodeMillisPerSample,
      long replacedSamples) {}

  /**
   * Trains {@code epochs} epochs from {@code firstEpoch} (epochs done so far), evaluating on {@code
   * val} after each. Epochs are counted from 0 here and shown from 1 wherever a person reads them
   * (metrics, progress, summaries, checkpoint names): epoch 1 is the one after which {@code
   * epoch-0001} is saved.
   */
  public void fit(DataLoader train, DataLoader val, int firstEpoch) {
    if (best.shouldStop() && firstEpoch < options.epochs()) {
      // Resumed from the checkpoint of a run that stopped early, with the same patience.
      LOG.info(
          "this run stopped early after epoch {} ({} last improved after epoch {}): nothing to"
              + " train; raise ramtrain.train.early-stop-patience to go on",
          firstEpoch,
          best.rule().metric().key(),
          best.bestEpoch());
      return;
    }
    // A run resumed from a checkpoint taken within an epoch goes on from the batch after it.
    int stepsPerEpoch = options.stepsPerEpoch(train.batchesPerEpoch());
    long stepsIntoEpoch = globalStep - (long) firstEpoch * stepsPerEpoch;
    int firstBatch =
        stepsIntoEpoch > 0 && stepsIntoEpoch < stepsPerEpoch
            ? (int) stepsIntoEpoch * options.accumulate()
            : 0;
    for (int epoch = firstEpoch; epoch < options.epochs(); epoch++) {
      EpochStats stats = trainEpoch(train, epoch, epoch == firstEpoch ? firstBatch : 0);
      EvalResult eval = evaluate(val);
      // With --ema the average is evaluated too, and judges the best epoch, as timm's does.
      EvalResult averaged = learner.averaging() ? evaluateAverage(val) : null;
      // the same on every rank: evaluations are summed
      boolean improved = best.offer(epoch + 1, averaged != null ? averaged : eval);
      Map<String, Object> record = new LinkedHashMap<>();
      record.put("type", "epoch");
      record.put("epoch", epoch + 1);
      record.put("step", globalStep); // steps done: the checkpoint after this epoch resumes here
      stepLosses.drainInto(record); // the epoch's steps after its last step record
      record.put("train_loss", stats.loss());
      record.put("train_acc", stats.accuracy());
      record.put("val_loss", eval.loss());
      record.put("val_acc", eval.accuracy());
      if (averaged != null) {
        record.put("val_loss_ema", averaged.loss());
        record.put("val_acc_ema", averaged.accuracy());
      }
      record.put("samples_per_s", stats.samples() / stats.seconds());
      record.put("seconds", stats.seconds());
      record.put("data_stall_pct", 100 * stats.stallSeconds() / stats.seconds());
      // The loader's own rate (its workers' samples over their busy time) and a crop's cost:
      // whether it can keep up, whatever the model's speed.
      record.put("loader_samples_per_s", stats.loaderSamplesPerSecond());
      record.put("loader_resize_ms", stats.resizeMillisPerSample());
      record.put("loader_decode_ms", stats.decodeMillisPerSample()); // JPEG rows, 0 without
      record.put("bad_samples_skipped", stats.replacedSamples());
      record.put("best_epoch", best.bestEpoch());
      record.put("skipped_steps", skippedSteps);
      record.put("peak_device_bytes", backend.peakAllocatedBytes());
      if (ranks.worldSize() > 1) {
        record.put("world_size", ranks.worldSize());
      }
      Checkpoints.Snapshot snapshot = snapshotIfSaved();
      if (!ranks.leader()) {
        if (best.shouldStop()) {
          break;
        }
        continue; // rank 0 reports the epoch and saves the checkpoint
      }
      metrics.write(record);
      progress.finish( // first: the checkpoint's log line goes below it, not after it
          String.format(
              "epoch %d/%d: train loss %.4f acc %.4f, val loss %.4f acc %.4f%s, %,.0f samples/s, data stall %.1f%% (loader %,.0f/s%s)%s",
              epoch + 1,
              options.epochs(),
              stats.loss(),
              stats.accuracy(),
              eval.loss(),
              eval.accuracy(),
              averaged == null
                  ? ""
                  : String.format(" (ema %.4f acc %.4f)", averaged.loss(), averaged.accuracy()),
              stats.samples() / stats.seconds(),
              100 * stats.stallSeconds() / stats.seconds(),
              stats.loaderSamplesPerSecond(),
              stats.decodeMillisPerSample() > 0
                  ? String.format(
                      ", decode %.2f ms + crop %.2f ms a sample",
                      stats.decodeMillisPerSample(), stats.resizeMillisPerSample())
                  : "",
              stats.replacedSamples() > 0
                  ? String.format(", %,d bad samples skipped", stats.replacedSamples())
                  : ""));
      String saved = save(snapshot, epoch + 1, true);
      if (improved && saved != null) {
        markBest(saved);
      }
      if (best.shouldStop()) {
        LOG.info(
            "early stop after epoch {}: {} has not improved by more than {} for {} epochs; the"
                + " best was {} after epoch {}",
            epoch + 1,
            best.rule().metric().key(),
            best.rule().minDelta(),
            best.epochsSinceBest(),
            String.format("%.4f", best.best()),
            best.bestEpoch());
        break;
      }
    }
  }

  private void markBest(String name) {
    try {
      checkpoints.markBest(name);
    } catch (IOException e) {
      throw new UncheckedIOException(
          "cannot name " + name + " the best checkpoint: " + e.getMessage(), e);
    }
  }

  /** Continues from a resumed checkpoint's record of the best epoch so far (its state.json). */
  public void resumeBest(Map<String, Object> checkpointState) {
    best.resume(checkpointState);
  }

  /** The best epoch so far by the run's metric (0: none yet), and its value. */
  public BestEpoch best() {
    return best;
  }

  public EpochStats trainEpoch(DataLoader train, int epoch) {
    return trainEpoch(train, epoch, 0);
  }

  /** Epoch {@code epoch} from batch {@code firstBatch} on (a run resumed within the epoch). */
  public EpochStats trainEpoch(DataLoader train, int epoch, int firstBatch) {
    if (ranks.worldSize() > 1 && !train.sameBatchesOnEveryRank()) {
      // Every step is a collective: a rank with one batch more would wait for the others forever.
      throw new IllegalArgumentException(
          "data-parallel training needs the same number of batches on every rank: remainder"
              + " drop or pad, not keep");
    }
    if (train.batchesPerStep() != options.accumulate()) {
      // The loader applies the remainder rule to whole steps; a step of another size would leave
      // an epoch's last step short or long.
      throw new IllegalArgumentException(
          "the loader makes steps of "
              + train.batchesPerStep()
              + " batches, the loop accumulates "
              + options.accumulate());
    }
    long start = System.nanoTime();
    rate.restart(start);
    long stallBefore = train.stallNanos();
    DataLoader.Work workBefore = train.work();
    EpochTotals totals = new EpochTotals();
    long[] firstStep = {0, 0}; // when the epoch's first step was enqueued, and its batch number
    try (DataLoader.Epoch batches = train.epoch(epoch, firstBatch)) {
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
        MicroBatch micro = MicroBatch.of(current.index(), train, options.accumulate());
        boolean stepped = step(current.size(), currentSlot, epoch, stallNanos, totals, micro);
        if (firstStep[0] == 0) {
          firstStep[0] = System.nanoTime();
          firstStep[1] = current.index() + 1;
        }
        if (stepped) {
          afterEachStep.accept(globalStep);
        }
        if (stepped && checkpointEvery > 0 && globalStep % checkpointEvery == 0 && next != null) {
          settle(totals); // a step whose loss is not finite is never saved
          save(snapshotIfSaved(), epoch, false); // only rank 0 has a sink
        }
        double meanLoss = totals.lossSum / Math.max(1, totals.samples);
        double accuracy = (double) totals.correct / Math.max(1, totals.samples);
        long seen = totals.samples;
        int batchNumber = current.index() + 1;
        if (seen == 0 || !ranks.leader()) {
          continue; // the epoch's first loss is still on its way, or another rank shows it
        }
        progress.update(
            () ->
                progressText(
                    epoch,
                    batchNumber,
                    train.batchesPerEpoch(),
                    meanLoss,
                    accuracy,
                    seen,
                    start,
                    firstStep));
      }
      settle(totals); // the last step's loss, before evaluation and the checkpoint
      if (ranks.leader() && totals.samples > 0) {
        int last = train.batchesPerEpoch();
        double meanLoss = totals.lossSum / totals.samples;
        double accuracy = (double) totals.correct / totals.samples;
        progress.draw(
            progressText(epoch, last, last, meanLoss, accuracy, totals.samples, start, firstStep)
                + "  evaluating");
      }
    }
    double seconds = (System.nanoTime() - start) / 1e9;
    double[] all = ranks.sum(totals.lossSum, totals.correct, totals.samples);
    DataLoader.Work work = train.work();
    return new EpochStats(
        all[0] / all[2],
        all[1] / all[2],
        (long) all[2],
        seconds,
        (train.stallNanos() - stallBefore) / 1e9,
        work.samplesPerSecondSince(workBefore),
        work.resizeMillisPerSampleSince(workBefore),
        work.decodeMillisPerSampleSince(workBefore),
        work.replaced() - workBefore.replaced());
  }

  private String progressText(
      int epoch,
      int batch,
      int batches,
      double loss,
      double accuracy,
      long samples,
      long start,
      long[] firstStep) {
    long now = System.nanoTime();
    double seconds = Math.max(1e-3, (now - start) / 1e9);
    long batchesLeft = (long) (options.epochs() - epoch - 1) * batches + batches - batch;
    return String.format(
        "epoch %d/%d  step %d/%d  loss %.4f  acc %.4f  %,.0f samples/s  ETA %s",
        epoch + 1,
        options.epochs(),
        batch,
        batches,
        loss,
        accuracy,
        samples / seconds,
        eta(now, firstStep[0], (int) firstStep[1], batch, batchesLeft));
  }

  /**
   * The time left for {@code batchesLeft} batches at the pace of the steps since the epoch's first
   * (enqueued at {@code firstNanos}, batch {@code firstBatch}): the first step carries the warm-up
   * (compilation, first allocations) and would make the first estimate many times too long. "-"
   * until two steps after it have been timed.
   */
  static String eta(long nowNanos, long firstNanos, int firstBatch, int batch, long batchesLeft) {
    int timed = batch - firstBatch;
    if (firstNanos == 0 || timed < 2) {
      return "-";
    }
    double perBatch = (nowNanos - firstNanos) / 1e9 / timed;
    return ProgressLine.format(Duration.ofSeconds((long) (perBatch * batchesLeft)));
  }

  /** Loss and hits of the epoch's steps whose readback has been collected. */
  private final class EpochTotals {
    double lossSum;
    long correct;
    long samples;

    void add(DeviceInputs.Readback rb, int n, long step) {
      lossSum += rb.lossSum();
      correct += rb.correct();
      samples += n;
      stepLosses.add(step, rb, n);
    }
  }

  /**
   * Where a batch stands in its optimizer step under gradient accumulation: its place among the
   * {@code count} batches of the step (fewer than asked at the end of an epoch) and the samples of
   * them all, over which the step's gradient is the mean.
   */
  private record MicroBatch(int index, int count, long stepSamples) {
    static MicroBatch of(int batch, DataLoader train, int accumulate) {
      int first = batch - batch % accumulate;
      int count = Math.min(accumulate, train.batchesPerEpoch() - first);
      long samples = 0;
      for (int b = first; b < first + count; b++) {
        samples += train.batchSize(b);
      }
      return new MicroBatch(batch - first, count, samples);
    }

    boolean last() {
      return index == count - 1;
    }
  }

  /** A step whose loss and predictions are still on their way to the host. */
  private record InFlight(DeviceInputs.PendingReadback readback, int epoch, long step) {}

  /**
   * One step. Usually its loss is read one step later ({@link #settle}): the host enqueues step k +
   * 1 while the device still runs step k, and never waits for a step's end. Two kinds of step read
   * their loss at once, before the update: with {@code nan-policy=skip} (skipping must be decided
   * before the update is applied) and every {@code log-every}-th step (its metrics wait for the
   * step anyway). A non-finite loss read late stops the run as one read at once would; the update
   * of that step and of the next have then run, and no checkpoint follows.
   */
  private boolean step(
      int n, int slot, int epoch, long stallNanos, EpochTotals totals, MicroBatch micro) {
    long stepStart = System.nanoTime();
    rate.add(n);
    DeviceBuffer x = inputs.normalized(slot, n);
    DeviceBuffer y = inputs.labels(slot, n);
    // Every micro-batch of the step draws its own mask, numbered across the ranks as their batches
    // are across the global batch: one process accumulating N batches draws the masks N ranks do.
    // One rank without accumulation: seeded by the step, as it always was.
    long dropoutSeed =
        (globalStep * ranks.worldSize() + ranks.rank()) * options.accumulate() + micro.index();
    if (micro.index() == 0) {
      learner.beginStep(compute, dropoutSeed);
    } else {
      learner.continueStep(compute, dropoutSeed);
    }
    // Colour jitter and mixup/cutmix on the device, in place (timm's order); the loss's targets
    // mixed alike. Drawn from the batch number the dropout masks use.
    float mix =
        options
            .batchAugmentation()
            .apply(backend, compute, x, n, shape, options.mean(), options.std(), dropoutSeed);
    DeviceBuffer logits = learner.forward(compute, x, n, true);
    DeviceBuffer dlogits = loss.compute(compute, logits, y, n, micro.stepSamples(), mix);
    if (!micro.last()) {
      accumulate(n, slot, epoch, logits, y, dlogits, totals);
      return false;
    }
    float lr = (float) schedule.lr(globalStep);
    boolean logStep = globalStep % options.logEvery() == 0;
    if (options.nanPolicy() == LoopSpec.NanPolicy.STOP && !logStep) {
      DeviceInputs.PendingReadback pending = inputs.readLater(loss.losses(n), logits, y, n);
      // The slot is free for the next copy once the readback has read its labels, not before.
      inputs.consumed(slot);
      learner.backwardAndUpdate(compute, dlogits, n, lr);
      settle(totals);
      inFlight = new InFlight(pending, epoch, globalStep);
      globalStep++;
      return true;
    }
    settle(totals); // steps are accounted in order
    DeviceInputs.Readback rb = inputs.read(loss.losses(n), logits, y, n);
    inputs.consumed(slot);
    // Data parallel, every rank skips or stops together: the ranks' sum is non-finite if any is.
    double stepLoss = ranks.worldSize() == 1 ? rb.lossSum() : ranks.sum(rb.lossSum())[0];
    if (!Double.isFinite(stepLoss)) {
      if (options.nanPolicy() == LoopSpec.NanPolicy.STOP) {
        throw diverged(epoch, globalStep, stepLoss);
      }
      skippedSteps++;
      stepLosses.skipped(globalStep);
      progress.clear();
      LOG.warn("loss is {} at epoch {} step {}: step skipped", stepLoss, epoch + 1, globalStep);
      globalStep++;
      return true;
    }
    learner.backwardAndUpdate(compute, dlogits, n, lr);
    totals.add(rb, n, globalStep);
    if (logStep) {
      Map<String, Object> learnerMetrics = learner.stepMetrics(compute); // waits for the step
      Map<String, Object> record = new LinkedHashMap<>();
      record.put("type", "step");
      record.put("epoch", epoch + 1);
      record.put("step", globalStep);
      record.put("loss", rb.lossSum() / n);
      record.put("acc", (double) rb.correct() / n);
      stepLosses.drainInto(record); // every step since the previous record: nothing sampled away
      record.put("lr", lr);
      double stepSeconds = (System.nanoTime() - stepStart) / 1e9;
      record.put("step_ms", stepSeconds * 1e3);
      record.put("samples_per_s", rate.take(System.nanoTime())); // every step so far is done
      record.put("data_stall_ms", stallNanos / 1e6);
      record.put("peak_device_bytes", backend.peakAllocatedBytes());
      Runtime jvm = Runtime.getRuntime();
      record.put("heap_used_bytes", jvm.totalMemory() - jvm.freeMemory());
      record.putAll(learnerMetrics);
      if (ranks.leader()) {
        metrics.write(record); // rank 0's own step
      }
    }
    globalStep++;
    return true;
  }

  /**
   * A micro-batch before the last of its step: backward adds its share to the gradients, no update.
   * Its loss is read later as a step's is; under {@code nan-policy=skip} it is read at once, and a
   * non-finite one is left out of the step (its gradient is not added).
   */
  private void accumulate(
      int n,
      int slot,
      int epoch,
      DeviceBuffer logits,
      DeviceBuffer y,
      DeviceBuffer dlogits,
      EpochTotals totals) {
    if (options.nanPolicy() == LoopSpec.NanPolicy.STOP) {
      DeviceInputs.PendingReadback pending = inputs.readLater(loss.losses(n), logits, y, n);
      inputs.consumed(slot);
      learner.accumulate(compute, dlogits, n);
      settle(totals);
      inFlight = new InFlight(pending, epoch, globalStep);
      return;
    }
    settle(totals);
    DeviceInputs.Readback rb = inputs.read(loss.losses(n), logits, y, n);
    inputs.consumed(slot);
    double microLoss = ranks.worldSize() == 1 ? rb.lossSum() : ranks.sum(rb.lossSum())[0];
    if (!Double.isFinite(microLoss)) {
      progress.clear();
      LOG.warn(
          "loss is {} at epoch {} step {}: a micro-batch left out of the step",
          microLoss,
          epoch + 1,
          globalStep);
      return;
    }
    learner.accumulate(compute, dlogits, n);
    totals.add(rb, n, globalStep);
  }

  /** Collects the step in flight, if any: its loss into {@code totals}, or the run stops. */
  private void settle(EpochTotals totals) {
    if (inFlight == null) {
      return;
    }
    InFlight step = inFlight;
    inFlight = null;
    DeviceInputs.Readback rb = inputs.collect(step.readback());
    if (!Double.isFinite(rb.lossSum())) {
      throw diverged(step.epoch(), step.step(), rb.lossSum());
    }
    totals.add(rb, step.readback().n(), step.step());
  }

  private TrainingDivergedException diverged(int epoch, long step, double lossSum) {
    return new TrainingDivergedException(
        String.format(
            "loss is %s at epoch %d, step %d (learning rate %.3g); stopping (ramtrain.train.nan-policy=stop;"
                + " 'skip' skips such steps). No checkpoint is written by this run after step %d.",
            lossSum, epoch + 1, step, schedule.lr(step), step - 1));
  }

  /**
   * Loss, accuracy and confusion matrix over every batch of {@code data}, without training. Data
   * parallel, over this rank's share of {@code data}, summed over the ranks (every sample once),
   * with rank 0's buffers on every rank.
   */
  /**
   * {@link #evaluate} with the weights' moving average swapped in (the learner {@link
   * Learner#averaging averages}), as timm evaluates its EMA model; every rank takes part.
   */
  public EvalResult evaluateAverage(DataLoader data) {
    return learner.withAveragedWeights(compute, () -> evaluate(data));
  }

  public EvalResult evaluate(DataLoader data) {
    if (ranks.worldSize() == 1) {
      return Evaluator.evaluate(learner, loss, inputs, data);
    }
    takeLeadersBuffers();
    return EvalResult.sum(Evaluator.evaluate(learner, loss, inputs, data), ranks::sum);
  }

  /**
   * Replaces this rank's buffers (batch norm's running statistics) by rank 0's, as DDP's {@code
   * broadcast_buffers} does before every forward. Each rank's statistics follow its own batches, so
   * they differ by design; only evaluation reads them (training normalizes by the batch's own), so
   * handing them over before each evaluation shows what DDP's per-step broadcast shows: rank 0's
   * statistics in every evaluation and checkpoint, identical on every rank afterwards.
   */
  private void takeLeadersBuffers() {
    DeviceBuffer buffers = learner.buffers();
    if (buffers.count() == 0) {
      return;
    }
    float[] mine = Checkpoints.download(backend, compute, buffers);
    ByteBuffer bytes = ByteBuffer.allocate(4 * mine.length).order(ByteOrder.nativeOrder());
    bytes.asFloatBuffer().put(mine);
    ranks.takeLeaders(bytes);
    float[] leaders = new float[mine.length];
    bytes.asFloatBuffer().get(leaders);
    Checkpoints.upload(backend, compute, buffers, leaders);
  }

  /** Hands a checkpoint to {@code sink} after every epoch. */
  public void checkpointTo(CheckpointSink sink) {
    checkpointTo(sink, 0);
  }

  /**
   * Hands a checkpoint to {@code sink} after every epoch and every {@code everySteps} steps within
   * one (0: epochs only). Data parallel, every rank sets the same cadence and rank 0 alone a sink
   * (the others null): under ZeRO-1 every rank takes part in each snapshot.
   */
  public void checkpointTo(CheckpointSink sink, int everySteps) {
    if (everySteps < 0) {
      throw new IllegalArgumentException("checkpoint cadence " + everySteps + " < 0");
    }
    this.checkpoints = sink;
    this.checkpointEvery = everySteps;
  }

  /**
   * Called with the number of steps done after every training step, on the loop's thread (a failure
   * it throws ends the run as a failed step would).
   */
  public void afterEachStep(LongConsumer listener) {
    this.afterEachStep = listener;
  }

  /**
   * The learner's snapshot when a checkpoint is due here: when this rank saves, and under ZeRO on
   * every share's owner (every rank, or each node's device 0), whose snapshot gathers the shares of
   * the optimizer state.
   */
  private Checkpoints.Snapshot snapshotIfSaved() {
    return checkpoints != null || (ranks.partitionsOptimizerState() && ranks.deviceInNode() == 0)
        ? learner.snapshot(compute).withLoopState(best.state())
        : null;
  }

  /** Saves the checkpoint if this rank saves them; returns its name, or null. */
  private String save(Checkpoints.Snapshot snapshot, int epochsDone, boolean endOfEpoch) {
    if (checkpoints == null) {
      return null;
    }
    String name = Checkpoints.name(epochsDone, globalStep, endOfEpoch);
    try {
      Path saved = checkpoints.save(name, epochsDone, globalStep, snapshot);
      progress.clear(); // a mid-epoch checkpoint's line starts a line of its own
      LOG.info("checkpoint {}", saved);
      return name;
    } catch (IOException e) {
      String which = endOfEpoch ? "of epoch " + epochsDone : "at step " + globalStep;
      throw new UncheckedIOException(
          "cannot write the checkpoint " + which + ": " + e.getMessage(), e);
    }
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
    // After a failed step synchronize raises its error again: both are freed regardless.
    try (DeviceInputs closedInputs = inputs;
        CrossEntropyLoss closedLoss = loss) {
      compute.synchronize();
    }
  }
}
