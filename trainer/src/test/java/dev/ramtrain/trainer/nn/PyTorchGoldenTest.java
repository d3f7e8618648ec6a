package dev.ramtrain.trainer.nn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.DeviceArrays;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.CpuEngine;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.checkpoint.Safetensors;
import dev.ramtrain.trainer.optim.AdamW;
import dev.ramtrain.trainer.optim.AdamWSpec;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * The models against PyTorch: goldens written by {@code trainer/src/test/goldens/make_goldens.py}
 * (Debian's torch, timm's module structure and names) hold the weights, an input batch, the logits,
 * the loss, every parameter's gradient after one backward and the losses of three AdamW steps. The
 * model is built from its spec, loaded by name (every key must match, both ways), and run on the
 * backend {@link #create} opens; subclasses run the same checks on other engines.
 *
 * <p>Tolerances, per quantity, relative to the tensor's largest magnitude. The goldens are computed
 * in float64, so they bound ramtrain's float32 error alone. A GEMM over k terms errs by at most
 * k·2^-24 relative (k ≤ 576 here: 3.4e-5), a model chains about a dozen, softmax's exp differs by
 * an ulp: forward values within 1e-4. Backward compounds the forward's error with its own chain of
 * the same length: gradients within 1e-3. Adam's first steps move each parameter by about lr
 * whatever its gradient's size, so a gradient at float32 noise could step either way: the inputs
 * keep every batch norm over at least 16 values a channel, the ResNet's golden steps at lr 1e-4
 * (its third loss moved by 1.8e-4 at 1e-3 in float64 trials with float32-sized gradient noise;
 * make_goldens.py), and the losses and running statistics after the steps stay within the forward's
 * 1e-4. (Measured on both engines: about 5e-7 for the logits, a few 1e-6 for the worst gradient,
 * 1e-7 for the AdamW losses.)
 *
 * <p>Here on the CPU backend's Java engine, the reference; {@link OneDnnPyTorchGoldenTest} runs the
 * same on oneDNN's.
 */
public class PyTorchGoldenTest {
  protected Backend create() {
    return new CpuBackend(2, CpuEngine.JAVA);
  }

  static Map<String, Safetensors.Tensor> golden(String file) {
    try {
      Path path = Path.of(PyTorchGoldenTest.class.getResource("/goldens/" + file).toURI());
      return Safetensors.read(path, new HashMap<>());
    } catch (IOException | URISyntaxException e) {
      throw new IllegalStateException("reading golden " + file, e);
    }
  }

  @Test
  public void tinyVisionTransformerMatchesPyTorch() {
    Map<String, Safetensors.Tensor> g = golden("vit_tiny.safetensors");
    check(g, "vit:4-32-2-4-5", shape -> ModelSpec.parse("vit:4-32-2-4-5", shape), 5);
  }

  /**
   * torchvision's ResNet layout (v1.5 bottlenecks, 7×7/2 stem, 3×3/2 max pooling padded by 1,
   * projection shortcuts) with one bottleneck per stage and a first width of 8, in training mode:
   * batch statistics forward and backward, and the running statistics after the four training
   * forwards (one for the gradients, three for AdamW), within the forward's tolerance.
   */
  @Test
  public void tinyResNetWithBatchNormMatchesPyTorch() {
    Map<String, Safetensors.Tensor> g = golden("resnet_tiny.safetensors");
    ResNet.Config tiny = new ResNet.Config(true, new int[] {1, 1, 1, 1}, 8);
    check(g, "resnet-tiny", shape -> ResNet.layers(tiny, shape, 5, Precision.FP32), 5);
  }

  /**
   * The Fashion-MNIST anchor's CNN at 16 and 32 channels, which the CPU engine holds blocked
   * between its convolutions and poolings (ModelSpec's cnn), the last convolution writing NCHW for
   * the Linear layer's flatten.
   */
  @Test
  public void anchorCnnMatchesPyTorch() {
    Map<String, Safetensors.Tensor> g = golden("cnn_anchor.safetensors");
    check(g, "cnn:c16-p-c32-p-f8-3", shape -> ModelSpec.parse("cnn:c16-p-c32-p-f8-3", shape), 3);
  }

  /**
   * The CIFAR ResNet of the anchor's ResNet-20 with a block a stage (widths 16, 32, 64): batch
   * norm, ReLU fused into it, residual sums, stride-2 and 1×1 shortcuts, channels-last on the CPU
   * engine.
   */
  @Test
  public void cifarResNetMatchesPyTorch() {
    Map<String, Safetensors.Tensor> g = golden("cifar_resnet.safetensors");
    check(g, "resnet:8-16-3", shape -> ModelSpec.parse("resnet:8-16-3", shape), 3);
  }

  /**
   * timm's ConvNeXt layout (patchify stem and LayerNorm2d, depthwise 7×7 convolutions,
   * channels-last LayerNorm and GELU MLP, layer scale, LayerNorm2d and 2×2/2 downsampling, pooled
   * LayerNorm head) with one block per stage and widths 8, 16, 16, 16.
   */
  @Test
  public void tinyConvNeXtMatchesPyTorch() {
    Map<String, Safetensors.Tensor> g = golden("convnext_tiny.safetensors");
    ConvNeXt.Config tiny = new ConvNeXt.Config(new int[] {1, 1, 1, 1}, new int[] {8, 16, 16, 16});
    check(g, "convnext-tiny", shape -> ConvNeXt.layers(tiny, shape, 5, 0f, Precision.FP32), 5);
  }

  private void check(
      Map<String, Safetensors.Tensor> g,
      String spec,
      java.util.function.Function<ImageShape, List<Layer>> layers,
      int classes) {
    long[] inShape = g.get("input").shape(); // [batch, channels, height, width]
    int batch = (int) inShape[0];
    ImageShape shape = new ImageShape((int) inShape[2], (int) inShape[3], (int) inShape[1]);
    try (Backend b = create()) {
      Stream s = b.createStream("golden");
      try (Model model = Model.build(spec, layers.apply(shape), b, s, batch, 1);
          CrossEntropyLoss loss = new CrossEntropyLoss(b, batch, classes, 0f);
          DeviceBuffer x = b.allocate("x", DType.F32, g.get("input").values().length);
          DeviceBuffer labels = b.allocate("labels", DType.I32, batch);
          AdamW adamw =
              new AdamW(b, model.parameters().count(), new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.05f))) {
        TreeSet<String> ours = new TreeSet<>();
        model.parameters().entries().forEach(e -> ours.add(e.spec().name()));
        TreeSet<String> theirs = new TreeSet<>();
        g.keySet().stream()
            .filter(k -> k.startsWith("param/"))
            .forEach(k -> theirs.add(k.substring(6)));
        assertEquals(theirs, ours, "parameter names: ramtrain's against PyTorch's");
        for (String name : ours) {
          Safetensors.Tensor t = g.get("param/" + name);
          DeviceBuffer value = model.parameters().value(name);
          assertEquals(t.values().length, value.count(), name + ": element count");
          DeviceArrays.write(b, s, value, t.values());
        }
        DeviceArrays.write(b, s, x, g.get("input").values());
        float[] labelValues = g.get("labels").values();
        try (HostBuffer h = b.allocateHost("labels", 4L * batch)) {
          for (int i = 0; i < batch; i++) {
            h.asByteBuffer().asIntBuffer().put(i, (int) labelValues[i]);
          }
          b.copy(h, 0, labels, 4L * batch, s);
          s.synchronize();
        }

        model.zeroGrad(s);
        DeviceBuffer logits = model.forward(s, x, batch, true);
        assertNear(g.get("logits").values(), DeviceArrays.read(b, s, logits), 1e-4, "logits");
        DeviceBuffer dlogits = loss.compute(s, logits, labels, batch);
        assertEquals(
            g.get("loss").values()[0],
            mean(DeviceArrays.read(b, s, loss.losses(batch))),
            1e-4 * Math.abs(g.get("loss").values()[0]),
            "loss");
        model.backward(s, dlogits, batch);
        for (String name : ours) {
          assertNear(
              g.get("grad/" + name).values(),
              DeviceArrays.read(b, s, model.parameters().grad(name)),
              1e-3,
              "gradient of " + name);
        }

        float[] expectedLosses = g.get("adamw_losses").values();
        // The golden's learning rate where it records one (make_goldens.py), else its default.
        float lr = g.containsKey("adamw_lr") ? g.get("adamw_lr").values()[0] : 1e-3f;
        for (int step = 0; step < expectedLosses.length; step++) {
          model.zeroGrad(s);
          DeviceBuffer out = model.forward(s, x, batch, true);
          DeviceBuffer d = loss.compute(s, out, labels, batch);
          float got = mean(DeviceArrays.read(b, s, loss.losses(batch)));
          assertEquals(
              expectedLosses[step],
              got,
              1e-4 * Math.abs(expectedLosses[step]),
              "loss before AdamW step " + (step + 1));
          model.backward(s, d, batch);
          adamw.step(s, model.parameters(), lr);
        }
        s.synchronize();
        for (String key : g.keySet()) {
          if (key.startsWith("buffer/")) {
            String name = key.substring(7);
            assertNear(
                g.get(key).values(),
                DeviceArrays.read(b, s, model.parameters().buffer(name)),
                1e-4,
                "running statistic " + name);
          }
        }
      }
    }
  }

  static float mean(float[] values) {
    double sum = 0;
    for (float v : values) {
      sum += v;
    }
    return (float) (sum / values.length);
  }

  /** Every element within {@code tolerance} of the expected tensor's largest magnitude. */
  static void assertNear(float[] expected, float[] actual, double tolerance, String what) {
    assertEquals(expected.length, actual.length, what + ": length");
    double scale = 0;
    for (float e : expected) {
      scale = Math.max(scale, Math.abs(e));
    }
    double worst = 0;
    int at = -1;
    for (int i = 0; i < expected.length; i++) {
      double error = Math.abs(expected[i] - actual[i]);
      if (error > worst) {
        worst = error;
        at = i;
      }
    }
    assertTrue(
        worst <= tolerance * scale,
        what
            + ": element "
            + at
            + " off by "
            + worst
            + " ("
            + (scale == 0 ? "inf" : String.format("%.2e", worst / scale))
            + " of the largest, "
            + scale
            + "), expected "
            + (at < 0 ? "" : expected[at] + " got " + actual[at]));
  }
}
