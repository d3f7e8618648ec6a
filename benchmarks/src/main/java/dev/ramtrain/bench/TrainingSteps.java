package dev.ramtrain.bench;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.Learner;
import dev.ramtrain.trainer.ResidentLearner;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Fill;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.nn.CrossEntropyLoss;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelBlueprint;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.nn.Precision;
import dev.ramtrain.trainer.offload.HostAdamW;
import dev.ramtrain.trainer.offload.OffloadedLearner;
import dev.ramtrain.trainer.offload.Streaming;
import dev.ramtrain.trainer.optim.AdamW;
import dev.ramtrain.trainer.optim.AdamWSpec;
import java.util.Arrays;
import java.util.Map;
import java.util.Random;
import java.util.function.IntConsumer;
import java.util.function.Supplier;

/**
 * Training steps (forward, cross-entropy, backward, AdamW) of a model on fixed batches, resident or
 * offloaded, on any backend: what the offload and GPU benchmarks time. A step's time is from its
 * start to the next one's; its loss is read once its update is enqueued (the trainer reads it a
 * step later still), so the host never stalls the device in the middle of a step.
 */
final class TrainingSteps {
  /** The input of cnn: and resnet: specs (mlp: specs say their own): CIFAR-sized RGB. */
  static final ImageShape IMAGE = new ImageShape(32, 32, 3);

  /**
   * The median step (the first two left out: warm-up), each step's loss, the last step's metrics,
   * the most device memory the backend held at once (its arena's peak: on a GPU what
   * torch.cuda.max_memory_allocated reports for PyTorch), and the median time the host spent
   * issuing a step's work (from its start until everything is enqueued: on a GPU, the launch
   * overhead a CUDA graph would remove, hidden while it stays below the device's time).
   */
  record Run(
      double medianStepSeconds,
      double[] losses,
      Map<String, Object> lastMetrics,
      long devicePeakBytes,
      double medianHostSeconds) {}

  private TrainingSteps() {}

  /** {@code how} null: resident. */
  static Run run(
      Supplier<Backend> backend, String spec, int batch, int threads, Streaming how, int steps) {
    return run(backend, spec, IMAGE, batch, threads, how, steps);
  }

  /** The same for images of {@code image} (224×224 ImageNet models). */
  static Run run(
      Supplier<Backend> backend,
      String spec,
      ImageShape image,
      int batch,
      int threads,
      Streaming how,
      int steps) {
    return run(backend, spec, image, Precision.FP32, batch, threads, how, steps);
  }

  /** The same in {@code precision} (bf16: autocast's Linear and convolution layers). */
  static Run run(
      Supplier<Backend> backend,
      String spec,
      ImageShape image,
      Precision precision,
      int batch,
      int threads,
      Streaming how,
      int steps) {
    return run(backend, spec, image, precision, batch, threads, how, Clip.NONE, steps, step -> {});
  }

  /**
   * Gradient clipping at {@code norm} (0: none), the offloaded host update {@code speculative}
   * ({@code ramtrain.offload.clip-update}) or serial.
   */
  record Clip(float norm, boolean speculative) {
    static final Clip NONE = new Clip(0, false);
  }

  /**
   * The same, the gradients clipped as {@code clip} says, telling {@code beforeStep} each step's
   * number as it starts.
   */
  static Run run(
      Supplier<Backend> backend,
      String spec,
      ImageShape image,
      Precision precision,
      int batch,
      int threads,
      Streaming how,
      Clip clip,
      int steps,
      IntConsumer beforeStep) {
    try (Backend b = backend.get()) {
      Stream s = b.createStream("compute");
      try (Learner learner = learner(spec, image, precision, batch, threads, how, clip, b, s);
          CrossEntropyLoss loss = new CrossEntropyLoss(b, batch, learner.outputSize(), 0f);
          DeviceBuffer x = b.allocate("x", DType.F32, (long) batch * learner.inputSize());
          DeviceBuffer labels = b.allocate("labels", DType.I32, batch);
          HostBuffer staging = b.allocateHost("labels", 4L * batch)) {
        Random rng = new Random(5);
        for (int i = 0; i < batch; i++) {
          staging.asByteBuffer().asIntBuffer().put(i, rng.nextInt(learner.outputSize()));
        }
        b.copy(staging, 0, labels, 4L * batch, s);
        long[] starts = new long[steps + 1];
        double[] host = new double[steps];
        double[] losses = new double[steps];
        Map<String, Object> metrics = Map.of();
        for (int step = 0; step < steps; step++) {
          beforeStep.accept(step);
          starts[step] = System.nanoTime();
          b.run(s, new Fill(x, 0.1f + 0.01f * (step % 7)));
          learner.beginStep(s, step);
          DeviceBuffer logits = learner.forward(s, x, batch, true);
          DeviceBuffer dlogits = loss.compute(s, logits, labels, batch);
          learner.backwardAndUpdate(s, dlogits, batch, 1e-3f);
          host[step] = (System.nanoTime() - starts[step]) / 1e9;
          if (step == steps - 1) {
            metrics = learner.stepMetrics(s); // waits for the step and its update
          }
          double sum = 0;
          for (float l : Checkpoints.download(b, s, loss.losses(batch))) { // synchronizes
            sum += l;
          }
          losses[step] = sum / batch;
        }
        starts[steps] = System.nanoTime();
        double[] times = new double[steps];
        for (int step = 0; step < steps; step++) {
          times[step] = (starts[step + 1] - starts[step]) / 1e9;
        }
        return new Run(median(times), losses, metrics, b.peakAllocatedBytes(), median(host));
      }
    }
  }

  /** The median of {@code values} after the first two (warm-up). */
  private static double median(double[] values) {
    double[] measured = Arrays.copyOfRange(values, Math.min(2, values.length - 1), values.length);
    Arrays.sort(measured);
    return measured[measured.length / 2];
  }

  private static Learner learner(
      String spec,
      ImageShape image,
      Precision precision,
      int batch,
      int threads,
      Streaming how,
      Clip clip,
      Backend b,
      Stream s) {
    if (how == null) {
      Model model = Model.build(spec, ModelSpec.parse(spec, image, precision), b, s, batch, 1);
      AdamW adamw =
          new AdamW(b, model.parameters().count(), new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.01f));
      return new ResidentLearner(b, model, adamw, clip.norm());
    }
    return OffloadedLearner.build(
        new ModelBlueprint(spec, () -> ModelSpec.parse(spec, image, precision), batch, 1),
        how,
        (slab, pool) ->
            new HostAdamW(
                b,
                slab.masters(),
                slab.gradients(),
                new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.01f),
                pool),
        threads,
        clip.norm(),
        clip.speculative(),
        b,
        s,
        dev.ramtrain.trainer.dist.DataParallel.single());
  }
}
