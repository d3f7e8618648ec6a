package dev.ramtrain.bench;

import dev.ramtrain.trainer.Learner;
import dev.ramtrain.trainer.ResidentLearner;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.backend.cpu.SimulatedBus;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.nn.CrossEntropyLoss;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelConfig;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.offload.DeviceProfile;
import dev.ramtrain.trainer.offload.HostAdamW;
import dev.ramtrain.trainer.offload.LayerCost;
import dev.ramtrain.trainer.offload.OffloadedLearner;
import dev.ramtrain.trainer.offload.PlacementPlan;
import dev.ramtrain.trainer.offload.Streaming;
import dev.ramtrain.trainer.optim.AdamW;
import dev.ramtrain.trainer.optim.AdamWSpec;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * Streaming machinery overhead on the CPU backend: training steps (forward, cross-entropy,
 * backward, AdamW) of a model whose resident footprint is {@code RATIO}× a device budget, offloaded
 * as the plan places it, against the same steps fully resident, interleaved A B A B per round
 * (median step of each). Both runs see the same batches; their loss curves are printed side by
 * side. {@code BUS_GBPS} > 0 adds a simulated host-device bus of that bandwidth to the offloaded
 * run's copies (idle time, as beside a GPU), to show how much of it the overlap hides; {@code BF16}
 * true streams bf16 weights, {@code DELAYED} true delays the host update one step (then the loss
 * curves differ by bf16 rounding or the delay). A step's time is from its start to the next one's,
 * as in training (the loss is read after forward, as the trainer does for its NaN check).
 *
 * <p>Usage: OffloadBench SPEC BATCH THREADS RATIO ROUNDS STEPS [BUS_GBPS [BF16 [DELAYED]]]
 */
public final class OffloadBench {
  private record Run(double medianStepSeconds, double[] losses, Map<String, Object> lastMetrics) {}

  public static void main(String[] args) {
    String spec = args[0];
    int batch = Integer.parseInt(args[1]);
    int threads = Integer.parseInt(args[2]);
    double ratio = Double.parseDouble(args[3]);
    int rounds = Integer.parseInt(args[4]);
    int steps = Integer.parseInt(args[5]);
    double busGbps = args.length > 6 ? Double.parseDouble(args[6]) : 0;
    boolean bf16 = args.length > 7 && Boolean.parseBoolean(args[7]);
    boolean delayed = args.length > 8 && Boolean.parseBoolean(args[8]);
    List<LayerCost> costs;
    DeviceProfile profile;
    try (Backend b = new CpuBackend(threads)) {
      costs = LayerCost.measure(() -> ModelSpec.parse(spec), b);
      profile = DeviceProfile.measure(b, "measured cpu backend", 1L << 40);
    }
    long residentBytes =
        PlacementPlan.plan(costs, batch, Long.MAX_VALUE, 2, false, profile).deviceBytes();
    long budget = (long) (residentBytes / ratio);
    PlacementPlan plan = PlacementPlan.plan(costs, batch, budget, 2, bf16, profile);
    System.out.printf(
        "# %s batch %d, %d threads: resident footprint %,d bytes, budget %,d (1/%.1f); plan: %s,"
            + " streamed %s (bf16 %s), device %,d bytes, activation checkpointing %s%n",
        spec,
        batch,
        threads,
        residentBytes,
        budget,
        ratio,
        plan.mode(),
        plan.streamed(),
        plan.bf16Weights(),
        plan.deviceBytes(),
        plan.activationCheckpointing());
    System.out.printf(
        "# plan's prediction from the measured profile (%.1f GB/s, %.0f GFLOP/s): resident %.2f ms,"
            + " streamed %.2f ms (compute %.2f, copies %.2f)%n",
        profile.copyBytesPerSecond() / 1e9,
        profile.flopsPerSecond() / 1e9,
        plan.residentStepSeconds() * 1e3,
        plan.streamedStepSeconds() * 1e3,
        plan.computeSeconds() * 1e3,
        plan.copySeconds() * 1e3);
    SimulatedBus bus = busGbps > 0 ? new SimulatedBus(busGbps * 1e9, 0, 0) : SimulatedBus.NONE;
    for (int round = 1; round <= rounds; round++) {
      Run resident = run(spec, batch, threads, null, SimulatedBus.NONE, steps);
      Run streamed = run(spec, batch, threads, Streaming.of(plan, delayed, 2), bus, steps);
      System.out.printf(
          "round %d: resident %.2f ms, offloaded %.2f ms per step (median): %.3fx; losses equal: %s%n",
          round,
          resident.medianStepSeconds() * 1e3,
          streamed.medianStepSeconds() * 1e3,
          streamed.medianStepSeconds() / resident.medianStepSeconds(),
          java.util.Arrays.equals(resident.losses(), streamed.losses()));
      System.out.println("  offloaded, last step: " + streamed.lastMetrics());
      if (round == 1) {
        System.out.println("  loss per step, resident: " + format(resident.losses()));
        System.out.println("  loss per step, offloaded: " + format(streamed.losses()));
      }
    }
  }

  private static String format(double[] losses) {
    List<String> out = new ArrayList<>();
    for (double l : losses) {
      out.add(String.format("%.5f", l));
    }
    return String.join(" ", out);
  }

  /** {@code how} null: resident. */
  private static Run run(
      String spec, int batch, int threads, Streaming how, SimulatedBus bus, int steps) {
    try (Backend b = new CpuBackend(threads, bus)) {
      Stream s = b.createStream("compute");
      try (Learner learner = learner(spec, batch, threads, how, b, s);
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
        double[] losses = new double[steps];
        Map<String, Object> metrics = Map.of();
        for (int step = 0; step < steps; step++) {
          starts[step] = System.nanoTime();
          b.fill(s, x, 0.1f + 0.01f * (step % 7));
          learner.beginStep(s, step);
          DeviceBuffer logits = learner.forward(s, x, batch, true);
          DeviceBuffer dlogits = loss.compute(s, logits, labels, batch);
          double sum = 0;
          for (float l : Checkpoints.download(b, s, loss.losses(batch))) { // synchronizes
            sum += l;
          }
          losses[step] = sum / batch;
          learner.backwardAndUpdate(s, dlogits, batch, 1e-3f);
          if (step == steps - 1) {
            metrics = learner.stepMetrics(s); // waits for the step and its update
          }
        }
        starts[steps] = System.nanoTime();
        double[] times = new double[steps];
        for (int step = 0; step < steps; step++) {
          times[step] = (starts[step + 1] - starts[step]) / 1e9;
        }
        double[] measured = java.util.Arrays.copyOfRange(times, Math.min(2, steps - 1), steps);
        java.util.Arrays.sort(measured);
        return new Run(measured[measured.length / 2], losses, metrics);
      }
    }
  }

  private static Learner learner(
      String spec, int batch, int threads, Streaming how, Backend b, Stream s) {
    if (how == null) {
      Model model = Model.build(spec, ModelSpec.parse(spec), b, s, batch, 1);
      AdamW adamw =
          new AdamW(b, model.parameters().count(), new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.01f));
      return new ResidentLearner(b, model, adamw, 0f);
    }
    return OffloadedLearner.build(
        new ModelConfig(spec, () -> ModelSpec.parse(spec), batch, 1),
        how,
        (masters, grads, pool) ->
            new HostAdamW(b, masters, grads, new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.01f), pool),
        threads,
        0f,
        b,
        s);
  }
}
