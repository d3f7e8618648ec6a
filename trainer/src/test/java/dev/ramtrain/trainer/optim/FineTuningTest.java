package dev.ramtrain.trainer.optim;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.DeviceArrays;
import dev.ramtrain.trainer.ResidentLearner;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.nn.CrossEntropyLoss;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.nn.Parameters;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Frozen parameters stay bit-for-bit what they were: a linear probe trains the head alone. */
class FineTuningTest {
  @Test
  void aLinearProbeLeavesEveryOtherParameterBitUnchanged() {
    String spec = "vit:4-16-2-2-3";
    int batch = 4;
    ImageShape shape = new ImageShape(8, 8, 3);
    Random rng = new Random(3);
    try (Backend b = new CpuBackend(2)) {
      Stream s = b.createStream("probe");
      try (Model model = Model.build(spec, ModelSpec.parse(spec, shape), b, s, batch, 7);
          CrossEntropyLoss loss = new CrossEntropyLoss(b, batch, 3, 0f);
          DeviceBuffer x = b.allocate("x", DType.F32, (long) batch * shape.bytes());
          DeviceBuffer labels = b.allocate("labels", DType.I32, batch);
          Optimizer adamw =
              new AdamWSpec(
                      0.9f, 0.999f, 1e-8f, 0.05f, new ParamGroups.Rules(1f, true, "(?!head\\.).*"))
                  .onDevice(b, model.parameters())) {
        float[] before = DeviceArrays.read(b, s, model.parameters().values());
        for (int step = 0; step < 3; step++) {
          float[] xs = new float[(int) x.count()];
          for (int i = 0; i < xs.length; i++) {
            xs[i] = (float) rng.nextGaussian();
          }
          DeviceArrays.write(b, s, x, xs);
          try (HostBuffer h = b.allocateHost("labels", 4L * batch)) {
            for (int i = 0; i < batch; i++) {
              h.asByteBuffer().asIntBuffer().put(i, rng.nextInt(3));
            }
            b.copy(h, 0, labels, 4L * batch, s);
            s.synchronize(); // the staging buffer closes next
          }
          model.zeroGrad(s);
          DeviceBuffer logits = model.forward(s, x, batch, true);
          model.backward(s, loss.compute(s, logits, labels, batch), batch);
          adamw.step(s, model.parameters(), 1e-2f);
          s.synchronize();
        }
        float[] after = DeviceArrays.read(b, s, model.parameters().values());
        for (Parameters.Entry e : model.parameters().entries()) {
          int from = (int) e.offset();
          int to = from + (int) e.spec().count();
          float[] was = Arrays.copyOfRange(before, from, to);
          float[] is = Arrays.copyOfRange(after, from, to);
          if (e.spec().name().startsWith("head.")) {
            assertTrue(!Arrays.equals(was, is), e.spec().name() + " trained");
          } else {
            assertArrayEquals(was, is, e.spec().name() + " frozen");
          }
        }
      }
    }
  }

  /**
   * Clipping measures the trained parameters' gradients only, as timm's does (a frozen parameter
   * has none there): after a clipped step the frozen ones' gradients are zero and the rest's norm
   * is the clipping norm.
   */
  @Test
  void clippingLeavesTheFrozenParametersGradientsOut() {
    String spec = "vit:4-16-2-2-3";
    int batch = 4;
    ImageShape shape = new ImageShape(8, 8, 3);
    float clip = 1e-3f; // far below the gradient's norm: the step clips
    try (Backend b = new CpuBackend(2)) {
      Stream s = b.createStream("probe");
      Model model = Model.build(spec, ModelSpec.parse(spec, shape), b, s, batch, 7);
      Optimizer adamw =
          new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.05f, new ParamGroups.Rules(1f, true, "blocks\\..*"))
              .onDevice(b, model.parameters());
      try (ResidentLearner learner = new ResidentLearner(b, model, adamw, clip);
          CrossEntropyLoss loss = new CrossEntropyLoss(b, batch, 3, 0f);
          DeviceBuffer x = b.allocate("x", DType.F32, (long) batch * shape.bytes());
          DeviceBuffer labels = b.allocate("labels", DType.I32, batch)) {
        Random rng = new Random(4);
        float[] xs = new float[(int) x.count()];
        for (int i = 0; i < xs.length; i++) {
          xs[i] = (float) rng.nextGaussian();
        }
        DeviceArrays.write(b, s, x, xs);
        learner.beginStep(s, 0);
        DeviceBuffer logits = learner.forward(s, x, batch, true);
        learner.backwardAndUpdate(s, loss.compute(s, logits, labels, batch), batch, 1e-2f);
        float[] grads = DeviceArrays.read(b, s, model.parameters().grads());
        double sum = 0;
        for (Parameters.Entry e : model.parameters().entries()) {
          for (long i = e.offset(); i < e.offset() + e.spec().count(); i++) {
            if (e.spec().name().startsWith("blocks.")) {
              assertEquals(0f, grads[(int) i], e.spec().name() + " frozen: no gradient");
            } else {
              sum += (double) grads[(int) i] * grads[(int) i];
            }
          }
        }
        assertEquals(clip, Math.sqrt(sum), 1e-3 * clip, "the trained parameters' norm");
      }
    }
  }
}
