package dev.ramtrain.trainer.offload;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.DeviceArrays;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.checkpoint.Safetensors;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.nn.Precision;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.function.Supplier;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A model evaluated with its weights streamed from the host gives the resident inference model's
 * logits bit for bit, through a ring shallower than the model (slots reloaded mid-pass) and a
 * second pass (slots reloaded again), every layer streamed or the largest that fit a budget kept on
 * the device ({@link InferencePlacement}); it allocates on the device what the placement says, and
 * refuses to train.
 */
public class StreamedInferenceTest {
  private static final int BATCH = 3;

  /** The backend the suite runs on: the CPU's; the CUDA suite's emulates a device. */
  protected Backend open() {
    return new CpuBackend(1);
  }

  @ParameterizedTest
  @CsvSource({
    "resnet:8-5, 8x8x3, 2", // batch norm's buffers stay resident
    "vit:4-16-2-2-5, 8x8x3, 1",
    "convnext_tiny:5, 32x32x3, 3",
  })
  public void evaluatesAsTheResidentModelDoes(String spec, String image, int depth) {
    ImageShape shape = ImageShape.parse(image);
    int pixels = shape.height() * shape.width() * shape.channels();
    Supplier<List<Layer>> layers = () -> ModelSpec.parse(spec, shape, Precision.FP32, 0f);
    Random rng = new Random(spec.hashCode());
    try (Backend b = open()) {
      Stream s = b.createStream("s");
      Checkpoints.Loaded weights;
      float[] xs = new float[BATCH * pixels];
      for (int i = 0; i < xs.length; i++) {
        xs[i] = (float) rng.nextGaussian();
      }
      try (Model trained = Model.build(spec, layers.get(), b, s, BATCH, 11);
          DeviceBuffer x = b.allocate("x", DType.F32, xs.length)) {
        DeviceArrays.write(b, s, x, xs);
        trained.forward(s, x, BATCH, true); // running statistics off their start
        Map<String, Safetensors.Tensor> tensors = new LinkedHashMap<>();
        for (Safetensors.Tensor t :
            Checkpoints.tensors(
                trained.parameters().entries(),
                DeviceArrays.read(b, s, trained.parameters().values()))) {
          tensors.put(t.name(), t);
        }
        for (Safetensors.Tensor t :
            Checkpoints.tensors(
                trained.parameters().bufferEntries(),
                DeviceArrays.read(b, s, trained.parameters().buffers()))) {
          tensors.put(t.name(), t);
        }
        weights =
            new Checkpoints.Loaded(Path.of("test"), Map.of("model", spec), tensors, List.of());
      }
      float[] expected;
      try (InferenceNetwork resident =
              InferenceNetwork.resident(Model.buildForInference(spec, layers, b, BATCH), b);
          DeviceBuffer x = b.allocate("x", DType.F32, xs.length)) {
        resident.restore(weights, s);
        DeviceArrays.write(b, s, x, xs);
        expected = DeviceArrays.read(b, s, resident.forward(s, x, BATCH, false));
      }
      Model.InferenceFootprint footprint = Model.inferenceFootprint(spec, layers, b, BATCH);
      Set<String> every = new LinkedHashSet<>();
      layers.get().stream()
          .filter(l -> !l.parameters().isEmpty())
          .forEach(l -> every.add(l.name()));
      InferencePlacement all = InferencePlacement.of(footprint, layers.get(), every, depth, b);
      // Half the weights' bytes beyond streaming everything: the largest layers that fit stay.
      long between = all.deviceBytes() + footprint.parameterBytes() / 2;
      InferencePlacement mixed =
          InferencePlacement.streamed(footprint, layers.get(), depth, b, between);
      assertTrue(
          !mixed.streamed().isEmpty() && mixed.streamed().size() < every.size(),
          "some layers resident, some streamed: " + mixed.streamed());
      assertTrue(mixed.deviceBytes() <= between, "within the budget");
      long before = b.allocatedBytes();
      for (InferencePlacement placement : List.of(all, mixed)) {
        try (StreamedInference streamed =
                new StreamedInference(spec, layers, placement.streamed(), depth, b, BATCH);
            DeviceBuffer x = b.allocate("x", DType.F32, xs.length)) {
          assertEquals(
              placement.deviceBytes() + x.bytes(),
              b.allocatedBytes() - before,
              "plan = allocation");
          streamed.restore(weights, s);
          DeviceArrays.write(b, s, x, xs);
          for (int pass = 0; pass < 2; pass++) {
            float[] actual = DeviceArrays.read(b, s, streamed.forward(s, x, BATCH, false));
            assertArrayEquals(
                expected, actual, spec + ": " + placement.streamed() + ", pass " + pass);
          }
          assertThrows(IllegalStateException.class, () -> streamed.forward(s, x, BATCH, true));
        }
      }
      assertEquals(before, b.allocatedBytes(), "closing frees everything");
    }
  }
}
