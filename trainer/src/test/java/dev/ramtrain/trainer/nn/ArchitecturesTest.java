package dev.ramtrain.trainer.nn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The full-size architectures by timm name, built without binding (no weights allocated): their
 * parameter counts against the published figures, and every name and shape of ViT-B/16 and
 * ResNet-50 against a state dict's key list (written by the goldens' script: ViT-B/16 from timm's
 * module structure, ResNet-50 from torchvision's own model).
 */
class ArchitecturesTest {
  private static final ImageShape IMAGENET = new ImageShape(224, 224, 3);

  static Map<String, int[]> parameters(List<Layer> layers) {
    Map<String, int[]> all = new LinkedHashMap<>();
    for (Layer layer : layers) {
      for (ParamSpec p : layer.parameters()) {
        if (all.put(p.name(), p.shape()) != null) {
          throw new AssertionError("parameter " + p.name() + " declared twice");
        }
      }
    }
    return all;
  }

  static long count(Map<String, int[]> params) {
    return params.values().stream()
        .mapToLong(shape -> Arrays.stream(shape).asLongStream().reduce(1, (a, b) -> a * b))
        .sum();
  }

  /** timm's figures for its 1000-class ImageNet models (the model cards, timm.create_model). */
  @Test
  void visionTransformersHaveTimmsParameterCounts() {
    Map<String, Long> published =
        Map.of(
            "vit_tiny_patch16_224", 5_717_416L,
            "vit_small_patch16_224", 22_050_664L,
            "vit_base_patch16_224", 86_567_656L,
            "vit_large_patch16_224", 304_326_632L,
            "vit_huge_patch14_224", 632_045_800L);
    for (Map.Entry<String, Long> model : published.entrySet()) {
      Map<String, int[]> params = parameters(ModelSpec.parse(model.getKey(), IMAGENET));
      assertEquals(model.getValue(), count(params), model.getKey() + " parameters");
    }
    assertEquals(152, parameters(ModelSpec.parse("vit_base_patch16_224", IMAGENET)).size());
  }

  /** torchvision's figures (its model builders' docs), which timm's ResNets share. */
  @Test
  void resNetsHaveTorchvisionsParameterCounts() {
    Map<String, Long> published =
        Map.of(
            "resnet18", 11_689_512L,
            "resnet34", 21_797_672L,
            "resnet50", 25_557_032L,
            "resnet101", 44_549_160L,
            "resnet152", 60_192_808L);
    for (Map.Entry<String, Long> model : published.entrySet()) {
      Map<String, int[]> params = parameters(ModelSpec.parse(model.getKey(), IMAGENET));
      assertEquals(model.getValue(), count(params), model.getKey() + " parameters");
    }
  }

  /** timm's figures for the ImageNet-1k ConvNeXts. */
  @Test
  void convNeXtsHaveTimmsParameterCounts() {
    Map<String, Long> published =
        Map.of(
            "convnext_tiny", 28_589_128L,
            "convnext_small", 50_223_688L,
            "convnext_base", 88_591_464L,
            "convnext_large", 197_767_336L);
    for (Map.Entry<String, Long> model : published.entrySet()) {
      Map<String, int[]> params = parameters(ModelSpec.parse(model.getKey(), IMAGENET));
      assertEquals(model.getValue(), count(params), model.getKey() + " parameters");
    }
  }

  @Test
  void vitBaseHasEveryNameAndShapeOfTimmsStateDict() throws IOException {
    assertSameKeys("vit_base_patch16_224", ModelSpec.parse("vit_base_patch16_224", IMAGENET));
  }

  /** Parameters and batch-norm buffers; torchvision's num_batches_tracked is optional. */
  @Test
  void resnet50HasEveryNameAndShapeOfTorchvisionsStateDict() throws IOException {
    assertSameKeys("resnet50", ModelSpec.parse("resnet50", IMAGENET));
  }

  private void assertSameKeys(String model, List<Layer> layers) throws IOException {
    Map<String, String> expected = new LinkedHashMap<>();
    try (InputStream in = getClass().getResourceAsStream("/goldens/" + model + ".keys")) {
      for (String line : new String(in.readAllBytes(), StandardCharsets.UTF_8).split("\n")) {
        String[] nameShape = line.split(" ");
        if (!nameShape[0].endsWith("num_batches_tracked")) {
          expected.put(nameShape[0], nameShape.length > 1 ? nameShape[1] : "");
        }
      }
    }
    Map<String, int[]> declared = parameters(layers);
    for (Layer layer : layers) {
      for (ParamSpec b : layer.buffers()) {
        declared.put(b.name(), b.shape());
      }
    }
    Map<String, String> ours = new LinkedHashMap<>();
    declared.forEach(
        (name, shape) ->
            ours.put(
                name,
                Arrays.stream(shape).mapToObj(String::valueOf).collect(Collectors.joining(","))));
    List<String> differences = new ArrayList<>();
    expected.forEach(
        (name, shape) -> {
          if (!shape.equals(ours.get(name))) {
            differences.add(name + ": published " + shape + ", ramtrain " + ours.get(name));
          }
        });
    ours.keySet().stream()
        .filter(name -> !expected.containsKey(name))
        .forEach(name -> differences.add(name + ": not in the published state dict"));
    assertTrue(differences.isEmpty(), String.join("\n", differences));
  }

  @Test
  void aClassCountAfterTheNameReplacesTheHeadOnly() {
    Map<String, int[]> ten = parameters(ModelSpec.parse("vit_small_patch16_224:10", IMAGENET));
    assertEquals("[10, 384]", Arrays.toString(ten.get("head.weight")));
    assertEquals(22_050_664L - 385_000 + 3_850, count(ten));
  }

  @Test
  void imagesThePatchesDoNotTileAreRefusedAndUnknownNamesListTheKnown() {
    var untiled =
        assertThrows(
            IllegalArgumentException.class,
            () -> ModelSpec.parse("vit_base_patch16_224", new ImageShape(225, 224, 3)));
    assertEquals(
        "a ViT with 16x16 patches needs an image size divisible by 16, got 225x224",
        untiled.getMessage());
    var unknown =
        assertThrows(
            IllegalArgumentException.class, () -> ModelSpec.parse("vit_gigantic", IMAGENET));
    assertTrue(unknown.getMessage().contains("vit_base_patch16_224"), unknown.getMessage());
    var typo =
        assertThrows(IllegalArgumentException.class, () -> ModelSpec.parse("resnet05", IMAGENET));
    assertTrue(
        typo.getMessage().startsWith("unknown model spec 'resnet05', did you mean resnet50?"),
        typo.getMessage());
  }
}
