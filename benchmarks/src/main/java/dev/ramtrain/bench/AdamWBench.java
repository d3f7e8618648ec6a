package dev.ramtrain.bench;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;

/**
 * The host optimizer step, per parameter: ramtrain's AdamW kernel over one fp32 slab on the CPU
 * backend (host memory), as the offloaded trainer runs it. Side by side with
 * benchmarks/adamw_torch.py (torch.optim.AdamW on CPU tensors).
 *
 * <p>Usage: AdamWBench PARAMETERS THREADS STEPS
 */
public final class AdamWBench {
  public static void main(String[] args) {
    long n = Long.parseLong(args[0]);
    int threads = Integer.parseInt(args[1]);
    int steps = Integer.parseInt(args[2]);
    try (Backend backend = new CpuBackend(threads)) {
      Stream s = backend.createStream("adamw");
      try (DeviceBuffer p = backend.allocate("param", DType.F32, n);
          DeviceBuffer g = backend.allocate("grad", DType.F32, n);
          DeviceBuffer m = backend.allocate("m", DType.F32, n);
          DeviceBuffer v = backend.allocate("v", DType.F32, n)) {
        backend.fill(s, p, 0.5f);
        backend.fill(s, g, 0.01f);
        backend.fill(s, m, 0f);
        backend.fill(s, v, 0f);
        s.synchronize();
        double best = Double.MAX_VALUE;
        for (int step = 1; step <= steps + 3; step++) { // 3 warm-up steps
          long t0 = System.nanoTime();
          backend.adamwStep(s, p, g, m, v, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step);
          s.synchronize();
          if (step > 3) {
            best = Math.min(best, (System.nanoTime() - t0) / 1e9);
          }
        }
        System.out.printf(
            "{\"impl\": \"ramtrain\", \"params\": %d, \"threads\": %d, \"best_step_s\": %.5f,"
                + " \"ns_per_param\": %.3f}%n",
            n, threads, best, best * 1e9 / n);
      }
    }
  }
}
