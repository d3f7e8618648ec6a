package dev.ramtrain.trainer.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.Learner;
import dev.ramtrain.trainer.LoopSpec;
import dev.ramtrain.trainer.MetricsLog;
import dev.ramtrain.trainer.PatternShards;
import dev.ramtrain.trainer.ResidentLearner;
import dev.ramtrain.trainer.Trainer;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.data.LoaderSpec;
import dev.ramtrain.trainer.data.ShardSet;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.nn.Network;
import dev.ramtrain.trainer.optim.LrSchedule;
import dev.ramtrain.trainer.optim.Sgd;
import dev.ramtrain.trainer.optim.SgdSpec;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The training loop does not wait for a step's loss before it enqueues the step's update: each
 * step's forward (but step 0's, a logged step, which reads its loss at once) is held on the compute
 * stream behind a gate that only the step's own {@code backwardAndUpdate} call opens. A loop that
 * read the loss first would wait forever (the test times out); the pipelined loop reads it one step
 * later and trains every step.
 */
class StepPipeliningTest {
  @TempDir Path tmp;

  /** A learner whose every training forward waits on the stream for its update to be enqueued. */
  private static final class GatedLearner implements Learner {
    private final ResidentLearner inner;
    private CountDownLatch gate = new CountDownLatch(0);
    private long step;
    int updates;

    GatedLearner(ResidentLearner inner) {
      this.inner = inner;
    }

    @Override
    public Network network() {
      return inner.network();
    }

    @Override
    public DeviceBuffer buffers() {
      return inner.buffers();
    }

    @Override
    public DeviceBuffer forward(Stream compute, DeviceBuffer x, int batch, boolean training) {
      if (training && step > 0) {
        CountDownLatch closed = new CountDownLatch(1);
        gate = closed;
        ((CpuStream) compute)
            .enqueue(
                () -> {
                  try {
                    closed.await();
                  } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                  }
                });
      }
      return inner.forward(compute, x, batch, training);
    }

    @Override
    public long parameterCount() {
      return inner.parameterCount();
    }

    @Override
    public void beginStep(Stream compute, long step) {
      this.step = step;
      inner.beginStep(compute, step);
    }

    @Override
    public void continueStep(Stream compute, long dropoutSeed) {
      inner.continueStep(compute, dropoutSeed);
    }

    @Override
    public void accumulate(Stream compute, DeviceBuffer dlogits, int batch) {
      inner.accumulate(compute, dlogits, batch);
    }

    @Override
    public void backwardAndUpdate(Stream compute, DeviceBuffer dlogits, int batch, float lr) {
      inner.backwardAndUpdate(compute, dlogits, batch, lr);
      updates++;
      gate.countDown(); // the step's work may run now that all of it is enqueued
    }

    @Override
    public Map<String, Object> stepMetrics(Stream compute) {
      return inner.stepMetrics(compute);
    }

    @Override
    public Checkpoints.Snapshot snapshot(Stream compute) {
      return inner.snapshot(compute);
    }

    @Override
    public void restore(Checkpoints.Loaded checkpoint, Stream compute) {
      inner.restore(checkpoint, compute);
    }

    @Override
    public void close() {
      inner.close();
    }
  }

  @Test
  void aStepsUpdateIsEnqueuedBeforeItsLossIsRead() throws Exception {
    try (CpuBackend b = new CpuBackend(2);
        ShardSet train = PatternShards.write(tmp.resolve("train.arrow"), 96, 3);
        DataLoader loader =
            new DataLoader(
                b,
                train,
                new LoaderSpec(
                    32,
                    1,
                    2,
                    new LoaderSpec.Sampling(7, true, LoaderSpec.Remainder.DROP),
                    new LoaderSpec.SampleAugmentation(0, false),
                    new LoaderSpec.Rank(0, 1)))) {
      Stream setup = b.createStream("setup");
      Model model = Model.build("mlp:64-16-3", ModelSpec.parse("mlp:64-16-3"), b, setup, 32, 1);
      GatedLearner learner =
          new GatedLearner(
              new ResidentLearner(
                  b,
                  model,
                  new Sgd(b, model.parameters().count(), new SgdSpec(0.9f, 0f, false)),
                  0f));
      LoopSpec options =
          new LoopSpec(
              1,
              0f,
              0f,
              LoopSpec.NanPolicy.STOP,
              new float[] {0.5f},
              new float[] {0.25f},
              1000); // only step 0 logs (and waits for itself)
      try (learner;
          MetricsLog metrics = new MetricsLog(null);
          Trainer trainer =
              new Trainer(
                  b, learner, LrSchedule.constant(0.01), options, PatternShards.SHAPE, metrics)) {
        Trainer.EpochStats stats;
        try {
          stats =
              assertTimeoutPreemptively(
                  Duration.ofSeconds(30), () -> trainer.trainEpoch(loader, 0));
        } finally {
          learner.gate.countDown(); // after a timeout: lets the stream drain, so closing ends
        }
        assertEquals(3, learner.updates);
        assertEquals(96, stats.samples(), "every step's loss was read, one step late");
        assertTrue(Double.isFinite(stats.loss()), "loss " + stats.loss());
      }
    }
  }
}
