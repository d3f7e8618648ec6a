package dev.ramtrain.trainer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.checkpoint.Safetensors;
import dev.ramtrain.trainer.nn.CrossEntropyLoss;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.nn.Parameters;
import dev.ramtrain.trainer.optim.AdamWSpec;
import dev.ramtrain.trainer.optim.EmaDecay;
import dev.ramtrain.trainer.optim.MovingAverage;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * --ema (timm's model EMA): after three AdamW steps of a CIFAR ResNet (weights and batch-norm
 * running statistics), the average equals its closed form d³·w₀ + (1−d)(d²·w₁ + d·w₂ + w₃) over the
 * weights each step left, computed in double; evaluation sees the average and leaves the weights
 * bit for bit.
 */
class ModelEmaTest {
  private static final String SPEC = "resnet:8-4-3";
  private static final ImageShape SHAPE = new ImageShape(8, 8, 3);
  private static final int BATCH = 4;

  @Test
  void theAverageAfterThreeStepsIsItsClosedForm() {
    float decay = 0.8f;
    try (Backend b = new CpuBackend(2)) {
      Stream s = b.createStream("ema");
      try (Model model = Model.build(SPEC, ModelSpec.parse(SPEC, SHAPE), b, s, BATCH, 5);
          ResidentLearner learner =
              new ResidentLearner(
                  b,
                  model,
                  new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.05f).onDevice(b, model.parameters()),
                  0f);
          CrossEntropyLoss loss = new CrossEntropyLoss(b, BATCH, 3, 0f);
          DeviceBuffer x = b.allocate("x", DType.F32, (long) BATCH * SHAPE.bytes());
          DeviceBuffer labels = b.allocate("labels", DType.I32, BATCH)) {
        learner.averageWeights(new EmaDecay(decay, false), null, s);
        List<float[]> states = new ArrayList<>(); // weights then buffers, after each step
        states.add(state(b, s, model.parameters()));
        Random rng = new Random(9);
        for (int step = 0; step < 3; step++) {
          float[] xs = new float[(int) x.count()];
          for (int i = 0; i < xs.length; i++) {
            xs[i] = (float) rng.nextGaussian();
          }
          DeviceArrays.write(b, s, x, xs);
          try (HostBuffer h = b.allocateHost("labels", 4L * BATCH)) {
            for (int i = 0; i < BATCH; i++) {
              h.asByteBuffer().asIntBuffer().put(i, rng.nextInt(3));
            }
            b.copy(h, 0, labels, 4L * BATCH, s);
            s.synchronize(); // the staging buffer closes next
          }
          learner.beginStep(s, step);
          DeviceBuffer logits = learner.forward(s, x, BATCH, true);
          learner.backwardAndUpdate(s, loss.compute(s, logits, labels, BATCH), BATCH, 1e-2f);
          states.add(state(b, s, model.parameters()));
        }
        float[] averaged = flatten(learner.snapshot(s).averaged());
        double d = 1 - (double) MovingAverage.weightOf(decay);
        double a = 1 - d;
        for (int i = 0; i < averaged.length; i++) {
          double[] w = new double[4];
          double scale = 0;
          for (int k = 0; k < 4; k++) {
            w[k] = states.get(k)[i];
            scale = Math.max(scale, Math.abs(w[k]));
          }
          double expected = d * d * d * w[0] + a * (d * d * w[1] + d * w[2] + w[3]);
          // each of the three fused steps rounds its difference and its result once
          assertEquals(expected, averaged[i], 6 * Math.ulp((float) scale), "element " + i);
        }
        float[] weights = state(b, s, model.parameters());
        float[] seen = learner.withAveragedWeights(s, () -> state(b, s, model.parameters()));
        assertArrayEquals(averaged, seen, "evaluation sees the average");
        assertArrayEquals(weights, state(b, s, model.parameters()), "and the weights after");
        assertArrayEquals(averaged, flatten(learner.snapshot(s).averaged()), "the average too");
      }
    }
  }

  @Test
  void aDecayOutsideZeroToOneIsRefused() {
    var e = assertThrows(IllegalArgumentException.class, () -> MovingAverage.weightOf(1f));
    assertEquals("an EMA decay must be in [0, 1), got 1.0", e.getMessage());
  }

  /** The weights and the buffers, in the slabs' order (the snapshot's). */
  private static float[] state(Backend b, Stream s, Parameters p) {
    float[] v = DeviceArrays.read(b, s, p.values());
    float[] buf = DeviceArrays.read(b, s, p.buffers());
    float[] all = new float[v.length + buf.length];
    System.arraycopy(v, 0, all, 0, v.length);
    System.arraycopy(buf, 0, all, v.length, buf.length);
    return all;
  }

  private static float[] flatten(List<Safetensors.Tensor> tensors) {
    int n = tensors.stream().mapToInt(t -> t.values().length).sum();
    float[] out = new float[n];
    int at = 0;
    for (Safetensors.Tensor t : tensors) {
      System.arraycopy(t.values(), 0, out, at, t.values().length);
      at += t.values().length;
    }
    return out;
  }
}
