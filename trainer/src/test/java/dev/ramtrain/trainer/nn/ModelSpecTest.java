package dev.ramtrain.trainer.nn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.etl.shard.ImageShape;
import java.util.List;
import org.junit.jupiter.api.Test;

class ModelSpecTest {
  @Test
  void theAnchorsCnnHasItsShapesAndParameterCount() {
    List<Layer> layers = ModelSpec.parse("cnn:c32-p-c64-p-f128-10", new ImageShape(28, 28, 1));
    assertEquals(784, layers.get(0).inputSize());
    assertEquals(10, layers.get(layers.size() - 1).outputSize());
    long params =
        layers.stream().flatMap(l -> l.parameters().stream()).mapToLong(ParamSpec::count).sum();
    // PyTorch: conv1 320 + conv2 18,496 + fc1 401,536 + fc2 1,290 = 421,642
    assertEquals(421_642, params);
    assertTrue(
        layers.stream().anyMatch(l -> l.name().equals("fc1") && l.inputSize() == 64 * 7 * 7));
  }

  @Test
  void mlpAndBadSpecs() {
    assertEquals(5, ModelSpec.parse("mlp:784-1024-1024-10").size());
    var e = assertThrows(IllegalArgumentException.class, () -> ModelSpec.parse("transformer:12"));
    assertTrue(e.getMessage().contains("known: mlp"), e.getMessage());
    e =
        assertThrows(
            IllegalArgumentException.class,
            () -> ModelSpec.parse("cnn:c32-x-10", new ImageShape(8, 8, 1)));
    assertTrue(e.getMessage().contains("'x'"), e.getMessage());
  }
}
