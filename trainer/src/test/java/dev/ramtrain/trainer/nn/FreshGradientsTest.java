package dev.ramtrain.trainer.nn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.DeviceArrays;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * zeroGrad leaves the gradients of layers that write fresh ones (Linear) to their next backward and
 * fills the rest: whatever the slab held before, a backward after zeroGrad gives the same
 * gradients, and one more backward without zeroGrad adds to them.
 */
class FreshGradientsTest {
  @Test
  void aBackwardAfterZeroGradWritesEveryGradientAndTheNextOneAdds() {
    int batch = 4;
    ImageShape shape = new ImageShape(6, 6, 1);
    Random rng = new Random(3);
    try (Backend b = new CpuBackend(1)) {
      Stream s = b.createStream("s");
      // conv + batch norm (filled), then two Linear layers (written fresh)
      try (Model model =
              Model.build(
                  "cnn:cb4-p-f8-3", ModelSpec.parse("cnn:cb4-p-f8-3", shape), b, s, batch, 5);
          CrossEntropyLoss loss = new CrossEntropyLoss(b, batch, 3, 0f);
          DeviceBuffer x = b.allocate("x", DType.F32, (long) batch * 36);
          DeviceBuffer labels = b.allocate("labels", DType.I32, batch)) {
        float[] xs = new float[batch * 36];
        for (int i = 0; i < xs.length; i++) {
          xs[i] = (float) rng.nextGaussian();
        }
        DeviceArrays.write(b, s, x, xs);
        try (HostBuffer hl = b.allocateHost("labels", 4L * batch)) {
          hl.asByteBuffer().asIntBuffer().put(new int[] {0, 2, 1, 2});
          b.copy(hl, 0, labels, 4L * batch, s);
          s.synchronize();
        }
        float[] poison = new float[(int) model.parameters().grads().count()];
        Arrays.fill(poison, Float.NaN);
        DeviceArrays.write(b, s, model.parameters().grads(), poison);
        float[] first = gradients(b, s, model, loss, x, labels, batch, true);
        for (float g : first) {
          assertTrue(Float.isFinite(g), "every gradient element written or zeroed");
        }
        float[] again = gradients(b, s, model, loss, x, labels, batch, true);
        assertArrayEquals(first, again, "zeroGrad then backward: the same, whatever was there");
        float[] twice = gradients(b, s, model, loss, x, labels, batch, false);
        for (int i = 0; i < twice.length; i++) { // the second backward added (batch norm's
          // training statistics are the same: the same batch), doubling exactly
          assertEquals(2 * first[i], twice[i], 1e-6 * Math.max(1, Math.abs(first[i])), "at " + i);
        }
      }
    }
  }

  private static float[] gradients(
      Backend b,
      Stream s,
      Model model,
      CrossEntropyLoss loss,
      DeviceBuffer x,
      DeviceBuffer labels,
      int batch,
      boolean zero) {
    if (zero) {
      model.zeroGrad(s);
    }
    DeviceBuffer logits = model.forward(s, x, batch, true);
    model.backward(s, loss.compute(s, logits, labels, batch), batch);
    return DeviceArrays.read(b, s, model.parameters().grads());
  }
}
