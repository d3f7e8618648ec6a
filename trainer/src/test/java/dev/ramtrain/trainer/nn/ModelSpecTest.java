package dev.ramtrain.trainer.nn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
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
  void resnet20HasTorchvisionNamesAndTheParameterCountOfOptionB() {
    List<Layer> layers = ModelSpec.parse("resnet:20-10", new ImageShape(32, 32, 3));
    List<ParamSpec> params = layers.stream().flatMap(l -> l.parameters().stream()).toList();
    // stem 432 + bn 32; stage 1: 3 x (2 x 2,304 + 64); stage 2: 4,608 + 9,216 + 128 + 512 + 64,
    // then 2 x (2 x 9,216 + 128); stage 3: 18,432 + 36,864 + 256 + 2,048 + 128, then
    // 2 x (2 x 36,864 + 256); fc 650.
    assertEquals(272_474, params.stream().mapToLong(ParamSpec::count).sum());
    // Running mean and variance of 21 batch norms over 784 channels in all.
    assertEquals(
        2 * 784,
        layers.stream().flatMap(l -> l.buffers().stream()).mapToLong(ParamSpec::count).sum());
    List<String> names = params.stream().map(ParamSpec::name).toList();
    assertTrue(names.contains("layer3.2.conv2.weight"), names.toString());
    assertTrue(names.contains("layer2.0.downsample.0.weight"), names.toString());
    assertTrue(names.contains("layer2.0.downsample.1.bias"), names.toString());
    assertTrue(names.contains("fc.bias"), names.toString());
    assertEquals(10, layers.get(layers.size() - 1).outputSize());
    var e =
        assertThrows(
            IllegalArgumentException.class,
            () -> ModelSpec.parse("resnet:21-10", new ImageShape(32, 32, 3)));
    assertTrue(e.getMessage().contains("6n+2"), e.getMessage());
  }

  @Test
  void cnnWithBatchNormGlobalPoolingAndDropout() {
    List<Layer> layers = ModelSpec.parse("cnn:cb8-p-cb16-g-d0.5-10", new ImageShape(16, 16, 3));
    List<String> names = layers.stream().map(Layer::name).toList();
    assertEquals(
        List.of(
            "conv1",
            "bn1",
            "pool1", // ReLU after pooling: the same function on a quarter of the values
            "conv1.relu",
            "conv2",
            "bn2",
            "conv2.relu",
            "avgpool",
            "dropout1",
            "fc1"),
        names);
    assertEquals(16, layers.get(7).outputSize());
    assertTrue(
        layers.get(0).parameters().stream().noneMatch(p -> p.name().equals("conv1.bias")),
        "a convolution before batch norm has no bias");
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
