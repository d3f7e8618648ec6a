package dev.ramtrain.bench;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.offload.Bf16Copies;
import dev.ramtrain.trainer.offload.HostAdamW;
import dev.ramtrain.trainer.offload.HostBandwidth;
import dev.ramtrain.trainer.offload.HostThreads;
import dev.ramtrain.trainer.offload.OffloadSpec;
import dev.ramtrain.trainer.optim.AdamWSpec;
import dev.ramtrain.trainer.optim.ParamGroups;
import java.nio.FloatBuffer;

/**
 * The host optimizer step, per parameter: {@link HostAdamW} over one fp32 slab of pinned host
 * memory, as the offloaded trainer runs it, with fp32 or bf16 moments, with and without writing the
 * bf16 copy of the weights in the same pass; beside it a STREAM triad over as many bytes on the
 * same threads, the machine's streaming bandwidth. Side by side with benchmarks/adamw_torch.py
 * (torch.optim.AdamW on CPU tensors).
 *
 * <p>Usage: AdamWBench PARAMETERS THREADS STEPS
 */
public final class AdamWBench {
  private static final int WARMUP = 3;

  public static void main(String[] args) {
    int n = Integer.parseInt(args[0]);
    int threads = Integer.parseInt(args[1]);
    int steps = Integer.parseInt(args[2]);
    try (Backend backend = new CpuBackend(threads);
        HostThreads pool = new HostThreads(threads)) {
      System.out.printf(
          "{\"impl\": \"triad\", \"params\": %d, \"threads\": %d, \"gb_per_s\": %.2f}%n",
          n, threads, HostBandwidth.triad(backend, pool, n, steps) / 1e9);
      for (OffloadSpec.OptimizerState state : OffloadSpec.OptimizerState.values()) {
        for (boolean copy : new boolean[] {false, true}) {
          double best = bestStep(backend, pool, n, steps, state, copy);
          int bytes = 4 + 4 + 2 * 2 * state.bytesPerValue() + 4 + (copy ? 2 : 0);
          System.out.printf(
              "{\"impl\": \"ramtrain\", \"state\": \"%s\", \"bf16_copy\": %b, \"params\": %d,"
                  + " \"threads\": %d, \"best_step_s\": %.5f, \"ns_per_param\": %.3f,"
                  + " \"bytes_per_param\": %d, \"gb_per_s\": %.2f}%n",
              state.name().toLowerCase(java.util.Locale.ROOT),
              copy,
              n,
              threads,
              best,
              best * 1e9 / n,
              bytes,
              (double) bytes * n / best / 1e9);
        }
      }
    }
  }

  /** The best of {@code steps} AdamW steps over {@code n} parameters, after warm-ups. */
  private static double bestStep(
      Backend backend,
      HostThreads pool,
      int n,
      int steps,
      OffloadSpec.OptimizerState state,
      boolean copy) {
    try (HostBuffer p = backend.allocateHost("param", 4L * n);
        HostBuffer g = backend.allocateHost("grad", 4L * n);
        HostBuffer bf16 = backend.allocateHost("param-bf16", 2L * n);
        HostAdamW adamw =
            new HostAdamW(
                backend,
                p,
                g,
                new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.01f),
                ParamGroups.uniform(n),
                pool,
                state,
                copy ? wholeCopy(bf16) : Bf16Copies.NONE,
                0,
                1)) {
      FloatBuffer fp = p.asByteBuffer().asFloatBuffer();
      FloatBuffer fg = g.asByteBuffer().asFloatBuffer();
      for (int i = 0; i < n; i++) {
        fp.put(i, 0.5f);
        fg.put(i, 0.01f * ((i % 7) - 3));
      }
      double best = Double.MAX_VALUE;
      for (int step = 1; step <= steps + WARMUP; step++) {
        long t0 = System.nanoTime();
        adamw.beginStep(1e-3f).update(0, n);
        if (step > WARMUP) {
          best = Math.min(best, (System.nanoTime() - t0) / 1e9);
        }
      }
      return best;
    }
  }

  /** A bf16 copy of every element. */
  private static Bf16Copies wholeCopy(HostBuffer bf16) {
    return new Bf16Copies() {
      @Override
      public void forEachRun(int from, int to, Run run) {
        run.accept(from, to, from);
      }

      @Override
      public long address() {
        return bf16.address();
      }
    };
  }
}
