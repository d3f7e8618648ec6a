package dev.ramtrain.bench;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.backend.cpu.SimulatedBus;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.offload.DeviceProfile;
import dev.ramtrain.trainer.offload.HostProfile;
import dev.ramtrain.trainer.offload.HostUpdateTiming;
import dev.ramtrain.trainer.offload.LayerCost;
import dev.ramtrain.trainer.offload.PlacementPlan;
import dev.ramtrain.trainer.offload.Streaming;
import java.util.ArrayList;
import java.util.List;

/**
 * Streaming machinery overhead on the CPU backend: training steps (forward, cross-entropy,
 * backward, AdamW) of a model whose resident footprint is {@code RATIO}× a device budget, offloaded
 * as the plan places it, against the same steps fully resident, interleaved A B A B per round
 * (median step of each). Both runs see the same batches; their loss curves are printed side by
 * side. {@code BUS_GBPS} > 0 adds a simulated host-device bus of that bandwidth to the offloaded
 * run's copies (idle time, as beside a GPU), to show how much of it the overlap hides; {@code BF16}
 * true streams bf16 weights, {@code DELAYED} true delays the host update one step (then the loss
 * curves differ by bf16 rounding or the delay). Steps as {@link TrainingSteps} runs them.
 *
 * <p>Usage: OffloadBench SPEC BATCH THREADS RATIO ROUNDS STEPS [BUS_GBPS [BF16 [DELAYED]]]
 */
public final class OffloadBench {
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
    // clipping at this norm: the offloaded run's serial and speculative host updates side by side
    float clip = args.length > 9 ? Float.parseFloat(args[9]) : 0f;
    List<LayerCost> costs;
    DeviceProfile profile;
    HostProfile host;
    try (Backend b = new CpuBackend(threads)) {
      costs = LayerCost.measure(() -> ModelSpec.parse(spec), b);
      costs = LayerCost.timed(costs, () -> ModelSpec.parse(spec), b, batch, threads);
      profile = DeviceProfile.measure(b, "measured cpu backend", 1L << 40);
      host = HostProfile.measure(b, threads);
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
        "# plan's prediction from each layer's measured time and the measured copy rate (%.1f GB/s;"
            + " the 1024^3 GEMM peak is %.0f GFLOP/s): resident %.2f ms,"
            + " streamed %.2f ms (compute %.2f, copies %.2f)%n",
        profile.copyBytesPerSecond() / 1e9,
        profile.flopsPerSecond() / 1e9,
        plan.residentStepSeconds() * 1e3,
        plan.streamedStepSeconds() * 1e3,
        plan.computeSeconds() * 1e3,
        plan.copySeconds() * 1e3);
    StringBuilder byTiming = new StringBuilder();
    for (HostUpdateTiming t : HostUpdateTiming.values()) {
      PlacementPlan p = planned(costs, batch, budget, bf16, profile, host, t);
      byTiming.append(
          String.format(
              " %s %.2f ms (host %.2f, exposed %.2f);",
              t.label(),
              p.streamedStepSeconds() * 1e3,
              p.hostSeconds() * 1e3,
              p.exposedHostSeconds() * 1e3));
    }
    System.out.printf(
        "# the plan's streamed step by host update, on %.1f GB/s of host memory:%s%n",
        host.bandwidthBytesPerSecond() / 1e9, byTiming);
    SimulatedBus bus = busGbps > 0 ? new SimulatedBus(busGbps * 1e9, 0, 0) : SimulatedBus.NONE;
    if (clip > 0) {
      clipped(
          spec,
          batch,
          threads,
          rounds,
          steps,
          Streaming.of(plan, false, 2),
          Streaming.of(plan, true, 2),
          bus,
          clip);
      return;
    }
    for (int round = 1; round <= rounds; round++) {
      TrainingSteps.Run resident =
          TrainingSteps.run(() -> new CpuBackend(threads), spec, batch, threads, null, steps);
      TrainingSteps.Run streamed =
          TrainingSteps.run(
              () -> new CpuBackend(threads, bus),
              spec,
              batch,
              threads,
              Streaming.of(plan, delayed, 2),
              steps);
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

  /**
   * Clipped at {@code norm}: resident, offloaded with the serial host update (after backward), with
   * the speculative one (as gradients land) and with the delayed one ({@code delayed}: beside the
   * next forward, one step stale from step 2), A B C D per round; the host update's exposed time
   * per step beside each step, and the loss curves.
   */
  private static void clipped(
      String spec,
      int batch,
      int threads,
      int rounds,
      int steps,
      Streaming how,
      Streaming delayed,
      SimulatedBus bus,
      float norm) {
    for (int round = 1; round <= rounds; round++) {
      TrainingSteps.Run resident =
          clippedRun(() -> new CpuBackend(threads), spec, batch, threads, null, norm, false, steps);
      TrainingSteps.Run serial =
          clippedRun(
              () -> new CpuBackend(threads, bus), spec, batch, threads, how, norm, false, steps);
      TrainingSteps.Run speculative =
          clippedRun(
              () -> new CpuBackend(threads, bus), spec, batch, threads, how, norm, true, steps);
      TrainingSteps.Run late =
          clippedRun(
              () -> new CpuBackend(threads, bus),
              spec,
              batch,
              threads,
              delayed,
              norm,
              false,
              steps);
      System.out.printf(
          "round %d, clip-norm %s: resident %.2f ms; offloaded serial %.2f ms (%.3fx, host update"
              + " exposed %s ms), speculative %.2f ms (%.3fx, exposed %s ms, redone %s); losses"
              + " equal: %s, %s%n",
          round,
          norm,
          resident.medianStepSeconds() * 1e3,
          serial.medianStepSeconds() * 1e3,
          serial.medianStepSeconds() / resident.medianStepSeconds(),
          serial.lastMetrics().get("optimizer_exposed_ms"),
          speculative.medianStepSeconds() * 1e3,
          speculative.medianStepSeconds() / resident.medianStepSeconds(),
          speculative.lastMetrics().get("optimizer_exposed_ms"),
          speculative.lastMetrics().get("clip_redone"),
          java.util.Arrays.equals(resident.losses(), serial.losses()),
          java.util.Arrays.equals(serial.losses(), speculative.losses()));
      System.out.printf(
          "  delayed (from step 2) %.2f ms (%.3fx, exposed %s ms)%n",
          late.medianStepSeconds() * 1e3,
          late.medianStepSeconds() / resident.medianStepSeconds(),
          late.lastMetrics().get("optimizer_exposed_ms"));
      if (round == 1) {
        System.out.println("  loss per step, serial: " + format(serial.losses()));
        System.out.println("  loss per step, speculative: " + format(speculative.losses()));
        System.out.println("  loss per step, delayed: " + format(late.losses()));
      }
    }
  }

  /** The plan's placement for {@code costs}, its predictions with the host update as {@code t}. */
  private static PlacementPlan planned(
      List<LayerCost> costs,
      int batch,
      long budget,
      boolean bf16,
      DeviceProfile profile,
      HostProfile host,
      HostUpdateTiming t) {
    return PlacementPlan.plan(
        costs, batch, budget, 2, bf16, profile, false, 8, PlacementPlan.Zero.NONE, host, t);
  }

  private static TrainingSteps.Run clippedRun(
      java.util.function.Supplier<dev.ramtrain.trainer.backend.Backend> backend,
      String spec,
      int batch,
      int threads,
      Streaming how,
      float norm,
      boolean speculative,
      int steps) {
    return TrainingSteps.run(
        backend,
        spec,
        TrainingSteps.IMAGE,
        dev.ramtrain.trainer.nn.Precision.FP32,
        batch,
        threads,
        how,
        new TrainingSteps.Clip(norm, speculative),
        steps,
        step -> {});
  }

  private static String format(double[] losses) {
    List<String> out = new ArrayList<>();
    for (double l : losses) {
      out.add(String.format("%.5f", l));
    }
    return String.join(" ", out);
  }
}
