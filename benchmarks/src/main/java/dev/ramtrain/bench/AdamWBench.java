package dev.ramtrain.bench;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.offload.HostAdamW;
import dev.ramtrain.trainer.offload.HostThreads;
import dev.ramtrain.trainer.optim.AdamWSpec;
import java.nio.FloatBuffer;

/**
 * The host optimizer step, per parameter: {@link HostAdamW} over one fp32 slab of pinned host
 * memory, as the offloaded trainer runs it. Side by side with benchmarks/adamw_torch.py
 * (torch.optim.AdamW on CPU tensors).
 *
 * <p>Usage: AdamWBench PARAMETERS THREADS STEPS
 */
public final class AdamWBench {
  public static void main(String[] args) {
    int n = Integer.parseInt(args[0]);
    int threads = Integer.parseInt(args[1]);
    int steps = Integer.parseInt(args[2]);
    try (Backend backend = new CpuBackend(threads)) {
      try (HostBuffer p = backend.allocateHost("param", 4L * n);
          HostBuffer g = backend.allocateHost("grad", 4L * n);
          HostThreads pool = new HostThreads(threads);
          HostAdamW adamw =
              new HostAdamW(backend, p, g, new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.01f), pool)) {
        FloatBuffer fp = p.asByteBuffer().asFloatBuffer();
        FloatBuffer fg = g.asByteBuffer().asFloatBuffer();
        for (int i = 0; i < n; i++) {
          fp.put(i, 0.5f);
          fg.put(i, 0.01f);
        }
        double best = Double.MAX_VALUE;
        for (int step = 1; step <= steps + 3; step++) { // 3 warm-up steps
          long t0 = System.nanoTime();
          adamw.beginStep(1e-3f).update(0, n);
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
