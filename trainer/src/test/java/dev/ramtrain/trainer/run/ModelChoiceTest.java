package dev.ramtrain.trainer.run;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.nn.Precision;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A model that does not fit the dataset is refused with a model that does: the default MLP on a
 * folder of RGB photos names a ResNet, and a wrong class count names the spec with the right one.
 * Each suggestion is checked to fit, for small and large, grey and colour images.
 */
class ModelChoiceTest {
  private static final List<String> THREE = List.of("cat", "dog", "fox");

  @Test
  void theDefaultMlpOnRgbImagesSuggestsAModelThatFits() {
    ModelChoice mlp = new ModelChoice("mlp:784-1024-1024-10", 1, Precision.FP32);
    ConfigException e =
        assertThrows(
            ConfigException.class, () -> mlp.requireFits(ImageShape.parse("32x32x3"), THREE));
    assertTrue(
        e.getMessage().contains("32x32x3 = 3072: --model resnet:20-3 (a CIFAR ResNet-20) fits"),
        e.getMessage());
  }

  @Test
  void everySuggestionFits() {
    for (String size : new String[] {"32x32x3", "28x28x1", "224x224x3", "128x128x1", "64x96x3"}) {
      ImageShape shape = ImageShape.parse(size);
      String suggested = ModelChoice.suggestion(shape, THREE.size());
      String named = suggested.substring("--model ".length(), suggested.indexOf(' ', 8));
      // as a run resolves it: a timm name gets the dataset's class count
      String spec = dev.ramtrain.trainer.nn.ModelSpec.withClasses(named, THREE.size());
      assertDoesNotThrow(
          () -> new ModelChoice(spec, 1, Precision.FP32).requireFits(shape, THREE),
          size + ": " + named);
    }
  }

  @Test
  void aWrongClassCountNamesTheSpecWithTheRightOne() {
    ModelChoice cnn = new ModelChoice("cnn:c8-p-f16-10", 1, Precision.FP32);
    ConfigException e =
        assertThrows(
            ConfigException.class, () -> cnn.requireFits(ImageShape.parse("16x16x1"), THREE));
    assertTrue(
        e.getMessage().contains("3 classes (cat, dog, fox): --model cnn:c8-p-f16-3 has as many"),
        e.getMessage());
  }
}
