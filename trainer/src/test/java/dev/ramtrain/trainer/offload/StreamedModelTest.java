package dev.ramtrain.trainer.offload;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.DeviceArrays;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.Bf16;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelBlueprint;
import dev.ramtrain.trainer.nn.ModelSpec;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * Streaming layers through the ring changes where weights live, not what is computed: logits and
 * every gradient must equal a resident model's bit for bit, for every choice of streamed layers and
 * ring depth, over several steps (slots reused across steps).
 */
class StreamedModelTest {

  /**
   * A layer whose host range would pass 2 GiB of fp32 (23,200² + 23,200 = 538,263,200 parameters,
   * just over the 536,870,911 one buffer view indexes) is refused as the layout is made, before any
   * slab is allocated, naming the key, the layer and the count; a model whose slabs pass 2 GiB in
   * smaller layers is laid out (ViT-H/14: 632 M parameters, its largest layer 12.6 M).
   */
  @Test
  void aLayerOverTwoGibibytesIsRefusedBeforeAllocatingAndAModelOverItIsLaidOut() {
    String spec = "mlp:23200-23200";
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () -> new HostLayout(spec, ModelSpec.parse(spec), Set.of("fc1")));
    assertTrue(e.getMessage().startsWith("ramtrain.train.model: " + spec), e.getMessage());
    assertTrue(e.getMessage().contains("layer 'fc1' has 538,263,200 parameters"), e.getMessage());

    String huge = "vit_huge_patch14_224";
    List<Layer> layers = ModelSpec.parse(huge, new ImageShape(224, 224, 3));
    Set<String> all = new java.util.HashSet<>();
    layers.forEach(l -> all.add(l.name()));
    HostLayout layout = new HostLayout(huge, layers, all);
    assertTrue(4 * layout.parameters() > HostBuffer.MAX_VIEW_BYTES, "over 2 GiB of fp32");
    assertTrue(layout.largestStreamed() <= HostLayout.MAX_LAYER_PARAMETERS);
  }

  /**
   * A model that fails while it is built (here a pretrained tensor of the wrong size, found after
   * the host slabs are allocated) closes what it made: the backend then closes with nothing open,
   * where it used to find the pinned masters and gradients still allocated.
   */
  @Test
  void aModelThatFailsWhileBuildingLeavesNothingAllocated() {
    String spec = "mlp:12-8-3";
    try (Backend b = new CpuBackend(1)) {
      Stream s = b.createStream("compute");
      ModelBlueprint bad =
          new ModelBlueprint(spec, () -> ModelSpec.parse(spec), BATCH, 3)
              .withPretrained(java.util.Map.of("fc1.weight", new float[5]));
      IllegalArgumentException e =
          assertThrows(
              IllegalArgumentException.class,
              () ->
                  new StreamedModel(
                      bad, new Streaming(Set.of("fc1"), 1, false, false, false, 0), b, s));
      assertTrue(e.getMessage().startsWith("fc1.weight: 5 pretrained values"), e.getMessage());
      assertEquals(0, b.allocatedBytes(), "no device memory left allocated");
      assertEquals(0, b.allocatedHostBytes(), "no host memory left allocated");
    }
  }

  private static final int BATCH = 6;

  private record Step(float[] logits, float[] gradients) {}

  private static float[] random(Random rng, int n) {
    float[] x = new float[n];
    for (int i = 0; i < n; i++) {
      x[i] = (float) rng.nextGaussian();
    }
    return x;
  }

  /** Two training steps (forward, backward from fixed dlogits) on a resident model. */
  private static List<Step> resident(String spec, Supplier<List<Layer>> layers) {
    return resident(spec, layers, Set.of());
  }

  /**
   * As {@link #resident}, with the weights of layers {@code bf16} rounded to bf16 first, and their
   * gradients rounded to bf16 after.
   */
  private static List<Step> resident(String spec, Supplier<List<Layer>> layers, Set<String> bf16) {
    try (Backend b = new CpuBackend(2)) {
      Stream s = b.createStream("compute");
      try (Model model = Model.build(spec, layers.get(), b, s, BATCH, 3);
          DeviceBuffer x = b.allocate("x", DType.F32, (long) BATCH * model.inputSize());
          DeviceBuffer dy = b.allocate("dy", DType.F32, (long) BATCH * model.outputSize())) {
        float[] values = DeviceArrays.read(b, s, model.parameters().values());
        for (var e : model.parameters().entries()) {
          if (bf16.contains(e.spec().name().substring(0, e.spec().name().indexOf('.')))) {
            for (long i = e.offset(); i < e.offset() + e.spec().count(); i++) {
              values[(int) i] = Bf16.toFloat(Bf16.fromFloat(values[(int) i]));
            }
          }
        }
        DeviceArrays.write(b, s, model.parameters().values(), values);
        Random rng = new Random(9);
        List<Step> steps = new java.util.ArrayList<>();
        for (int step = 0; step < 2; step++) {
          DeviceArrays.write(b, s, x, random(rng, (int) x.count()));
          DeviceArrays.write(b, s, dy, random(rng, (int) dy.count()));
          model.zeroGrad(s);
          model.beginStep(step);
          float[] logits = DeviceArrays.read(b, s, model.forward(s, x, BATCH, true));
          model.backward(s, dy, BATCH);
          float[] grads = DeviceArrays.read(b, s, model.parameters().grads());
          for (var e : model.parameters().entries()) { // bf16 layers' gradients cross in bf16
            if (bf16.contains(e.spec().name().substring(0, e.spec().name().indexOf('.')))) {
              for (long i = e.offset(); i < e.offset() + e.spec().count(); i++) {
                grads[(int) i] = Bf16.toFloat(Bf16.fromFloat(grads[(int) i]));
              }
            }
          }
          steps.add(new Step(logits, grads));
        }
        return steps;
      }
    }
  }

  private static List<Step> streamed(
      Supplier<List<Layer>> layers, Set<String> streamedNames, int depth) {
    return streamed(layers, streamedNames, depth, false, false);
  }

  private static List<Step> streamed(
      Supplier<List<Layer>> layers,
      Set<String> streamedNames,
      int depth,
      boolean bf16,
      boolean checkpointing) {
    try (Backend b = new CpuBackend(2)) {
      Stream s = b.createStream("compute");
      try (StreamedModel model =
              new StreamedModel(
                  new ModelBlueprint("test", layers, BATCH, 3),
                  new Streaming(streamedNames, depth, bf16, checkpointing, false, 0),
                  b,
                  s);
          DeviceBuffer x = b.allocate("x", DType.F32, (long) BATCH * inputSize(layers));
          DeviceBuffer dy = b.allocate("dy", DType.F32, (long) BATCH * outputSize(layers))) {
        Random rng = new Random(9);
        List<Step> steps = new java.util.ArrayList<>();
        long allocated = -1;
        for (int step = 0; step < 2; step++) {
          DeviceArrays.write(b, s, x, random(rng, (int) x.count()));
          DeviceArrays.write(b, s, dy, random(rng, (int) dy.count()));
          model.beginStep(s, step);
          float[] logits = DeviceArrays.read(b, s, model.forward(s, x, BATCH, true));
          model.backward(s, dy, BATCH, null);
          steps.add(new Step(logits, model.gradients(s)));
          if (allocated >= 0) {
            assertEquals(allocated, b.allocatedBytes(), "no device allocation in a step");
          }
          allocated = b.allocatedBytes();
        }
        return steps;
      }
    }
  }

  private static int inputSize(Supplier<List<Layer>> layers) {
    return layers.get().get(0).inputSize();
  }

  private static int outputSize(Supplier<List<Layer>> layers) {
    List<Layer> l = layers.get();
    return l.get(l.size() - 1).outputSize();
  }

  private static void assertSame(List<Step> expected, List<Step> actual, String what) {
    for (int step = 0; step < expected.size(); step++) {
      assertArrayEquals(expected.get(step).logits(), actual.get(step).logits(), what + " logits");
      assertArrayEquals(
          expected.get(step).gradients(), actual.get(step).gradients(), what + " gradients");
    }
  }

  @Test
  void streamedMlpMatchesResidentForEveryPlacementAndDepth() {
    String spec = "mlp:12-16-16-16-16-5";
    Supplier<List<Layer>> layers = () -> ModelSpec.parse(spec);
    List<Step> expected = resident(spec, layers);
    List<Set<String>> placements =
        List.of(
            Set.of(),
            Set.of("fc1", "fc2", "fc3", "fc4", "fc5"),
            Set.of("fc2"),
            Set.of("fc1", "fc3", "fc5"),
            Set.of("fc4", "fc5"));
    for (Set<String> placement : placements) {
      for (int depth = 1; depth <= 3; depth++) {
        assertSame(expected, streamed(layers, placement, depth), placement + " at depth " + depth);
      }
    }
  }

  /**
   * bf16 slots compute exactly what a resident model computes with those layers' weights rounded to
   * bf16 (widened into fp32 on the device before use), their gradients rounded to bf16 on the way
   * back (widened on the host).
   */
  @Test
  void bf16SlotsComputeWithTheBf16RoundedWeights() {
    String spec = "mlp:12-16-16-16-16-5";
    Supplier<List<Layer>> layers = () -> ModelSpec.parse(spec);
    for (Set<String> placement :
        List.of(Set.of("fc2", "fc4"), Set.of("fc1", "fc2", "fc3", "fc5"))) {
      List<Step> expected = resident(spec, layers, placement);
      for (int depth = 1; depth <= 2; depth++) {
        assertSame(expected, streamed(layers, placement, depth, true, false), "bf16 " + placement);
      }
    }
  }

  @Test
  void aCheckpointedResNetMatchesResident() {
    String spec = "resnet:8-4-3";
    ImageShape shape = new ImageShape(8, 8, 3);
    Supplier<List<Layer>> layers = () -> ModelSpec.parse(spec, shape);
    List<Step> expected = resident(spec, layers);
    List<String> names = layers.get().stream().map(Layer::name).toList();
    assertSame(
        expected,
        streamed(layers, Set.of(names.get(0), names.get(2)), 2, false, true),
        "checkpointed " + names);
  }

  @Test
  void streamedCnnWithBatchNormAndDropoutMatchesResident() {
    String spec = "cnn:cb4-p-c6-p-d0.25-f10-3";
    ImageShape shape = new ImageShape(8, 8, 1);
    Supplier<List<Layer>> layers = () -> ModelSpec.parse(spec, shape);
    List<Step> expected = resident(spec, layers);
    assertSame(expected, streamed(layers, Set.of("conv2", "fc2"), 1), "conv2+fc2 depth 1");
    assertSame(
        expected,
        streamed(layers, Set.of("conv2", "fc2"), 1, false, true),
        "activation checkpointing, conv2+fc2 depth 1");
    assertSame(
        expected, streamed(layers, Set.of(), 1, false, true), "activation checkpointing alone");
    assertSame(expected, streamed(layers, Set.of("conv1", "conv2", "fc1", "fc2"), 2), "all d2");
  }
}
