package dev.ramtrain.bench;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.offload.DeviceProfile;
import dev.ramtrain.trainer.offload.HostAdamW;
import dev.ramtrain.trainer.offload.LayerCost;
import dev.ramtrain.trainer.offload.PlacementPlan;
import dev.ramtrain.trainer.offload.StreamedModel;
import dev.ramtrain.trainer.optim.AdamW;
import java.util.HashSet;
import java.util.List;

/**
 * Streaming machinery overhead on the CPU backend: a training step (forward, backward, AdamW) of a
 * model whose resident footprint is {@code RATIO}× a device budget, streamed as the plan places it,
 * against the same step fully resident, interleaved A B A B (best step of each round).
 *
 * <p>Usage: OffloadBench SPEC BATCH THREADS RATIO ROUNDS
 */
public final class OffloadBench {
  public static void main(String[] args) {
    String spec = args[0];
    int batch = Integer.parseInt(args[1]);
    int threads = Integer.parseInt(args[2]);
    double ratio = Double.parseDouble(args[3]);
    int rounds = Integer.parseInt(args[4]);
    List<LayerCost> costs;
    DeviceProfile profile;
    try (Backend b = new CpuBackend(threads)) {
      costs = LayerCost.measure(() -> ModelSpec.parse(spec), b);
      profile = DeviceProfile.measure(b, "measured cpu backend", 1L << 40);
    }
    long residentBytes =
        PlacementPlan.plan(costs, batch, Long.MAX_VALUE, 2, false, profile).deviceBytes();
    long budget = (long) (residentBytes / ratio);
    PlacementPlan plan = PlacementPlan.plan(costs, batch, budget, 2, false, profile);
    System.out.printf(
        "# %s batch %d, %d threads: resident footprint %,d bytes, budget %,d (1/%.1f); plan: %s,"
            + " streamed %s, device %,d bytes, activation checkpointing %s%n",
        spec,
        batch,
        threads,
        residentBytes,
        budget,
        ratio,
        plan.mode(),
        plan.streamed(),
        plan.deviceBytes(),
        plan.activationCheckpointing());
    System.out.printf(
        "# plan's prediction from the measured profile (%.1f GB/s, %.0f GFLOP/s): resident %.2f ms,"
            + " streamed %.2f ms (compute %.2f, copies %.2f; the optimizer step is not modelled)%n",
        profile.copyBytesPerSecond() / 1e9,
        profile.flopsPerSecond() / 1e9,
        plan.residentStepSeconds() * 1e3,
        plan.streamedStepSeconds() * 1e3,
        plan.computeSeconds() * 1e3,
        plan.copySeconds() * 1e3);
    for (int round = 1; round <= rounds; round++) {
      double resident = resident(spec, batch, threads);
      double streamed = streamed(spec, batch, threads, plan);
      System.out.printf(
          "round %d: resident %.2f ms, streamed %.2f ms per step: %.3fx%n",
          round, resident * 1e3, streamed * 1e3, streamed / resident);
    }
  }

  private static double resident(String spec, int batch, int threads) {
    try (Backend b = new CpuBackend(threads)) {
      Stream s = b.createStream("compute");
      try (Model model = Model.build(spec, ModelSpec.parse(spec), b, s, batch, 1);
          AdamW adamw = new AdamW(b, model.parameters().count(), 0.9f, 0.999f, 1e-8f, 0.01f);
          DeviceBuffer x = b.allocate("x", DType.F32, (long) batch * model.inputSize());
          DeviceBuffer dy = b.allocate("dy", DType.F32, (long) batch * model.outputSize())) {
        b.fill(s, x, 0.1f);
        b.fill(s, dy, 0.01f);
        double best = Double.MAX_VALUE;
        for (int step = 0; step < 8; step++) {
          long t0 = System.nanoTime();
          model.zeroGrad(s);
          model.forward(s, x, batch, true);
          model.backward(s, dy, batch);
          adamw.step(s, model.parameters(), 1e-3f);
          s.synchronize();
          best = step >= 2 ? Math.min(best, (System.nanoTime() - t0) / 1e9) : best;
        }
        return best;
      }
    }
  }

  private static double streamed(String spec, int batch, int threads, PlacementPlan plan) {
    try (Backend b = new CpuBackend(threads)) {
      Stream s = b.createStream("compute");
      try (StreamedModel model =
              new StreamedModel(
                  ModelSpec.parse(spec), new HashSet<>(plan.streamed()), 2, b, s, batch, 1);
          HostAdamW adamw =
              new HostAdamW(b, model.parameterCount(), 0.9f, 0.999f, 1e-8f, 0.01f, threads);
          DeviceBuffer x =
              b.allocate("x", DType.F32, (long) batch * ModelSpec.parse(spec).get(0).inputSize());
          DeviceBuffer dy = b.allocate("dy", DType.F32, (long) batch * outputs(spec))) {
        b.fill(s, x, 0.1f);
        b.fill(s, dy, 0.01f);
        double best = Double.MAX_VALUE;
        for (int step = 0; step < 8; step++) {
          long t0 = System.nanoTime();
          model.zeroGrad(s);
          model.forward(s, x, batch, true);
          model.backward(s, dy, batch);
          model.optimizerStep(s, adamw, 1e-3f);
          s.synchronize();
          best = step >= 2 ? Math.min(best, (System.nanoTime() - t0) / 1e9) : best;
        }
        System.out.printf(
            "  streamed run: peak device memory %,d bytes (the engine keeps every activation:"
                + " no checkpointing yet)%n",
            b.peakAllocatedBytes());
        return best;
      }
    }
  }

  private static int outputs(String spec) {
    var layers = ModelSpec.parse(spec);
    return layers.get(layers.size() - 1).outputSize();
  }
}
