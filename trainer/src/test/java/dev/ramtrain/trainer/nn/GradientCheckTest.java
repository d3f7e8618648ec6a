package dev.ramtrain.trainer.nn;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.DeviceArrays;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Finite-difference checks: the gradient backward writes into the slab for every parameter must
 * match central differences of the mean cross-entropy loss, computed through forward alone.
 */
class GradientCheckTest {

  static double meanLoss(
      Backend b,
      Stream s,
      Model model,
      CrossEntropyLoss loss,
      DeviceBuffer x,
      DeviceBuffer labels,
      int batch) {
    DeviceBuffer logits = model.forward(s, x, batch, true);
    loss.compute(s, logits, labels, batch);
    double sum = 0;
    for (float l : DeviceArrays.read(b, s, loss.losses(batch))) {
      sum += l;
    }
    return sum / batch;
  }

  /** Checks every parameter's gradient; {@code h} is the finite-difference step. */
  static void check(List<Layer> layers, double h, double tolerance) {
    Random rng = new Random(11);
    int batch = 6;
    try (Backend b = new CpuBackend(2)) {
      Stream s = b.createStream("check");
      int in = layers.get(0).inputSize();
      int classes = layers.get(layers.size() - 1).outputSize();
      try (Model model = Model.build("check", layers, b, s, batch, 5);
          CrossEntropyLoss loss = new CrossEntropyLoss(b, batch, classes, 0.1f);
          DeviceBuffer x = b.allocate("x", DType.F32, (long) batch * in);
          DeviceBuffer labels = b.allocate("labels", DType.I32, batch)) {
        float[] xs = new float[batch * in];
        for (int i = 0; i < xs.length; i++) {
          xs[i] = (float) rng.nextGaussian();
        }
        DeviceArrays.write(b, s, x, xs);
        try (HostBuffer hl = b.allocateHost("labels", 4L * batch)) {
          for (int i = 0; i < batch; i++) {
            hl.asByteBuffer().asIntBuffer().put(i, rng.nextInt(classes));
          }
          b.copy(hl, 0, labels, 4L * batch, s);
          s.synchronize();
        }
        model.zeroGrad(s);
        DeviceBuffer logits = model.forward(s, x, batch, true);
        model.backward(s, loss.compute(s, logits, labels, batch), batch);
        float[] analytic = DeviceArrays.read(b, s, model.parameters().grads());
        float[] theta = DeviceArrays.read(b, s, model.parameters().values());
        int worst = -1;
        double worstError = 0;
        String worstValues = "";
        for (int i = 0; i < theta.length; i++) {
          float saved = theta[i];
          theta[i] = (float) (saved + h);
          DeviceArrays.write(b, s, model.parameters().values(), theta);
          double up = meanLoss(b, s, model, loss, x, labels, batch);
          theta[i] = (float) (saved - h);
          DeviceArrays.write(b, s, model.parameters().values(), theta);
          double down = meanLoss(b, s, model, loss, x, labels, batch);
          theta[i] = saved;
          double numeric = (up - down) / (2 * h);
          double error =
              Math.abs(numeric - analytic[i])
                  / Math.max(1e-2, Math.abs(numeric) + Math.abs(analytic[i]));
          if (error > worstError) {
            worstError = error;
            worst = i;
            worstValues = "numeric " + numeric + ", analytic " + analytic[i];
          }
        }
        DeviceArrays.write(b, s, model.parameters().values(), theta);
        assertTrue(
            worstError < tolerance,
            "worst relative gradient error "
                + worstError
                + " at parameter "
                + worst
                + ": "
                + worstValues);
      }
    }
  }

  @Test
  void geluMlp() {
    check(
        List.of(
            new Linear("fc1", 5, 7),
            new Activation("act", Activation.Kind.GELU, 7),
            new Linear("fc2", 7, 4)),
        1e-2,
        2e-2);
  }

  @Test
  void convolutionPoolingAndLinear() {
    // conv (stride 2, padding 1) -> GELU -> conv (3x3, padding 1) -> 2x2 max pool -> linear
    Conv2d first = new Conv2d("conv1", 2, 7, 6, 3, 3, 2, 1);
    Conv2d second = new Conv2d("conv2", 3, first.outputHeight(), first.outputWidth(), 4, 3, 1, 1);
    MaxPool2d pool = new MaxPool2d("pool", 4, second.outputHeight(), second.outputWidth(), 2, 2);
    check(
        List.of(
            first,
            new Activation("act", Activation.Kind.GELU, first.outputSize()),
            second,
            pool,
            new Linear("fc", pool.outputSize(), 3)),
        1e-3, // max pooling has kinks where window entries tie: a small step rarely crosses one
        3e-2);
  }

  @Test
  void reluMlpFromSpec() {
    // Small steps keep pre-activations from crossing ReLU's kink.
    check(ModelSpec.parse("mlp:6-9-8-3"), 2e-3, 3e-2);
  }
}
