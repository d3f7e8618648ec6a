package dev.ramtrain.trainer.nn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.DeviceArrays;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.optim.AdamW;
import dev.ramtrain.trainer.optim.AdamWSpec;
import dev.ramtrain.trainer.optim.LrSchedule;
import dev.ramtrain.trainer.optim.Optimizer;
import dev.ramtrain.trainer.optim.Sgd;
import dev.ramtrain.trainer.optim.SgdSpec;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** End to end on the engine: an MLP learns three Gaussian blobs, the same way on every run. */
class MlpTrainingTest {
  record Result(float[] weights, double firstLoss, double lastLoss, double accuracy) {}

  static Result train(boolean adamw, long seed) {
    int n = 192;
    int batch = 32;
    int in = 8;
    Random rng = new Random(seed);
    float[][] centres = new float[3][in];
    for (float[] c : centres) {
      for (int d = 0; d < in; d++) {
        c[d] = (float) (rng.nextGaussian() * 3); // separable: the test is about learning
      }
    }
    float[] xs = new float[n * in];
    int[] ys = new int[n];
    for (int i = 0; i < n; i++) {
      ys[i] = i % 3;
      for (int d = 0; d < in; d++) {
        xs[i * in + d] = centres[ys[i]][d] + (float) rng.nextGaussian();
      }
    }
    try (Backend b = new CpuBackend(2)) {
      Stream s = b.createStream("train");
      try (Model model =
              Model.build("mlp:8-32-3", ModelSpec.parse("mlp:8-32-3"), b, s, batch, seed);
          CrossEntropyLoss loss = new CrossEntropyLoss(b, batch, 3, 0f);
          Optimizer opt =
              adamw
                  ? new AdamW(
                      b, model.parameters().count(), new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.01f))
                  : new Sgd(b, model.parameters().count(), new SgdSpec(0.9f, 1e-4f, true));
          DeviceBuffer x = b.allocate("x", DType.F32, (long) n * in);
          DeviceBuffer labels = b.allocate("labels", DType.I32, n);
          HostBuffer staging = b.allocateHost("staging", 4L * n * in)) {
        staging.asByteBuffer().asFloatBuffer().put(xs);
        b.copy(staging, 0, x, 4L * n * in, s);
        s.synchronize(); // the copy is asynchronous: the staging buffer is reused only after it ran
        staging.asByteBuffer().asIntBuffer().put(ys);
        b.copy(staging, 0, labels, 4L * n, s);
        LrSchedule lr = LrSchedule.cosine(adamw ? 0.01 : 0.05, 10, 240, 0);
        double first = 0;
        double last = 0;
        for (int step = 0; step < 240; step++) {
          int start = (step % (n / batch)) * batch;
          DeviceBuffer xb = x.view((long) start * in, (long) batch * in);
          DeviceBuffer yb = labels.view(start, batch);
          model.zeroGrad(s);
          DeviceBuffer logits = model.forward(s, xb, batch, true);
          model.backward(s, loss.compute(s, logits, yb, batch), batch);
          opt.step(s, model.parameters(), (float) lr.lr(step));
          if (step == 0 || step == 239) {
            double mean = 0;
            for (float l : DeviceArrays.read(b, s, loss.losses(batch))) {
              mean += l / batch;
            }
            if (step == 0) {
              first = mean;
            } else {
              last = mean;
            }
          }
        }
        int correct = 0;
        for (int start = 0; start < n; start += batch) {
          float[] logits =
              DeviceArrays.read(
                  b,
                  s,
                  model.forward(s, x.view((long) start * in, (long) batch * in), batch, false));
          for (int r = 0; r < batch; r++) {
            int best = 0;
            for (int c = 1; c < 3; c++) {
              if (logits[r * 3 + c] > logits[r * 3 + best]) {
                best = c;
              }
            }
            correct += best == ys[start + r] ? 1 : 0;
          }
        }
        return new Result(
            DeviceArrays.read(b, s, model.parameters().values()),
            first,
            last,
            (double) correct / n);
      }
    }
  }

  @Test
  void adamwLearnsAndIsReproducible() {
    Result a = train(true, 3);
    assertTrue(a.lastLoss() < a.firstLoss() / 5, "loss " + a.firstLoss() + " -> " + a.lastLoss());
    assertTrue(a.accuracy() > 0.95, "accuracy " + a.accuracy());
    assertArrayEquals(a.weights(), train(true, 3).weights(), "same seed, bit-identical weights");
  }

  @Test
  void nesterovSgdLearns() {
    Result r = train(false, 4);
    assertTrue(r.lastLoss() < r.firstLoss() / 5, "loss " + r.firstLoss() + " -> " + r.lastLoss());
    assertTrue(r.accuracy() > 0.95, "accuracy " + r.accuracy());
  }
}
