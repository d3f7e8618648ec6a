package dev.ramtrain.bench;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.backend.CpuEngine;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.nn.Precision;
import java.util.Locale;

/**
 * Resident training steps of a named model on the CPU backend at its image size: the median step
 * after two warm-up steps, as samples per second, for {@code benchmarks/models.sh} to set beside
 * PyTorch's (models_torch.py) with the same batch and threads; the process's peak RSS comes from
 * GNU time around it.
 *
 * <p>Usage: ModelBench SPEC HEIGHT WIDTH BATCH THREADS STEPS [fp32|bf16 [java|onednn|auto]]
 */
public final class ModelBench {
  public static void main(String[] args) {
    String spec = args[0];
    ImageShape image = new ImageShape(Integer.parseInt(args[1]), Integer.parseInt(args[2]), 3);
    int batch = Integer.parseInt(args[3]);
    int threads = Integer.parseInt(args[4]);
    int steps = Integer.parseInt(args[5]);
    Precision precision =
        Precision.valueOf((args.length > 6 ? args[6] : "fp32").toUpperCase(Locale.ROOT));
    CpuEngine engine =
        CpuEngine.valueOf((args.length > 7 ? args[7] : "auto").toUpperCase(Locale.ROOT));
    TrainingSteps.Run run =
        TrainingSteps.run(
            () -> new CpuBackend(threads, engine),
            spec,
            image,
            precision,
            batch,
            threads,
            null,
            steps);
    System.out.printf(
        "ramtrain %s %s (%s engine) batch %d threads %d: median step %.2f s, %.2f samples/s,"
            + " losses %s%n",
        spec,
        precision,
        engine,
        batch,
        threads,
        run.medianStepSeconds(),
        batch / run.medianStepSeconds(),
        java.util.Arrays.toString(run.losses()));
  }
}
