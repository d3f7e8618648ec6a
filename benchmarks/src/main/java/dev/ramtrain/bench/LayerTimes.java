package dev.ramtrain.bench;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelSpec;
import java.util.List;

/**
 * Where a training step's time goes: forward and backward time per layer of a model spec on the CPU
 * backend (synchronizing after every layer), averaged over iterations after warm-up.
 *
 * <p>Usage: LayerTimes SPEC HEIGHT WIDTH CHANNELS BATCH THREADS ITERATIONS
 */
public final class LayerTimes {
  public static void main(String[] args) {
    String spec = args[0];
    ImageShape shape =
        new ImageShape(
            Integer.parseInt(args[1]), Integer.parseInt(args[2]), Integer.parseInt(args[3]));
    int batch = Integer.parseInt(args[4]);
    int threads = Integer.parseInt(args[5]);
    int iterations = Integer.parseInt(args[6]);
    List<Layer> layers = ModelSpec.parse(spec, shape);
    try (Backend backend = new CpuBackend(threads)) {
      Stream s = backend.createStream("bench");
      try (Model model = Model.build(spec, layers, backend, s, batch, 1);
          DeviceBuffer x = backend.allocate("x", DType.F32, (long) batch * model.inputSize());
          DeviceBuffer dy = backend.allocate("dy", DType.F32, (long) batch * model.outputSize())) {
        // Random data: constant inputs make every data-dependent branch predictable and hide
        // what real activations cost (ReLU and max pooling were 5-50x slower on real data).
        gaussian(backend, s, x, 7);
        gaussian(backend, s, dy, 8);
        long[] forward = new long[layers.size()];
        long[] backward = new long[layers.size()];
        for (int it = -2; it < iterations; it++) { // two warm-up passes
          DeviceBuffer h = x;
          for (int i = 0; i < layers.size(); i++) {
            long t0 = System.nanoTime();
            h = layers.get(i).forward(s, h, batch, true);
            s.synchronize();
            if (it >= 0) {
              forward[i] += System.nanoTime() - t0;
            }
          }
          DeviceBuffer g = dy;
          for (int i = layers.size() - 1; i >= 0; i--) {
            long t0 = System.nanoTime();
            g = layers.get(i).backward(s, g, batch, i > 0);
            s.synchronize();
            if (it >= 0) {
              backward[i] += System.nanoTime() - t0;
            }
          }
        }
        double total = 0;
        for (int i = 0; i < layers.size(); i++) {
          total += forward[i] + backward[i];
        }
        System.out.printf(
            "# %s, batch %d, %d threads, %d iterations: ms per step%n",
            spec, batch, threads, iterations);
        for (int i = 0; i < layers.size(); i++) {
          System.out.printf(
              "%-14s fwd %8.2f  bwd %8.2f  (%4.1f%%)%n",
              layers.get(i).name(),
              forward[i] / 1e6 / iterations,
              backward[i] / 1e6 / iterations,
              100 * (forward[i] + backward[i]) / total);
        }
        System.out.printf(
            "total          %8.2f ms per step = %,.0f samples/s%n",
            total / 1e6 / iterations, batch / (total / 1e9 / iterations));
      }
    }
  }

  private static void gaussian(Backend backend, Stream s, DeviceBuffer d, long seed) {
    java.util.SplittableRandom rng = new java.util.SplittableRandom(seed);
    try (HostBuffer h = backend.allocateHost("random", d.bytes())) {
      java.nio.FloatBuffer f = h.asByteBuffer().asFloatBuffer();
      for (int i = 0; i < d.count(); i++) {
        f.put(i, (float) (rng.nextDouble() * 2 - 1));
      }
      backend.copy(h, 0, d, d.bytes(), s);
      s.synchronize();
    }
  }
}
