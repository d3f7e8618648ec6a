package dev.ramtrain.trainer.checkpoint;

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
import dev.ramtrain.trainer.nn.ConvNeXt;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.nn.ParamSpec;
import dev.ramtrain.trainer.nn.Precision;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Pretrained weights as torchvision and timm save them: torchvision's own ViT (written by the
 * goldens' script) loaded by its names into ramtrain's timm-named ViT gives torchvision's logits;
 * loading is strict, one error listing everything that does not fit; a classifier of another class
 * count starts fresh; a position embedding for another image size is resampled as timm does; F16,
 * BF16 and I64 tensors are read.
 */
class PretrainedWeightsTest {
  private static final String SPEC = "vit:4-32-2-4-5";

  static Path resource(String name) {
    try {
      return Path.of(PretrainedWeightsTest.class.getResource("/goldens/" + name).toURI());
    } catch (URISyntaxException e) {
      throw new IllegalStateException(e);
    }
  }

  private static List<ParamSpec> params(List<Layer> layers) {
    List<ParamSpec> all = new ArrayList<>();
    layers.forEach(l -> all.addAll(l.parameters()));
    return all;
  }

  @Test
  void torchvisionsViTLoadedByItsNamesGivesTorchvisionsLogits() throws IOException {
    PretrainedWeights weights =
        PretrainedWeights.read(resource("vit_tiny_torchvision.weights.safetensors"));
    assertEquals("torchvision", weights.naming());
    assertEquals(5, weights.classes());
    Map<String, Safetensors.Tensor> expected =
        Safetensors.read(resource("vit_tiny_torchvision.expected.safetensors"), new HashMap<>());
    List<Layer> layers = ModelSpec.parse(SPEC, new ImageShape(16, 16, 3));
    Map<String, float[]> values = weights.matchTo(SPEC, params(layers), List.of());
    assertEquals(params(layers).size(), values.size(), "every parameter from the file");
    assertLogits(layers, values, expected, 2);
  }

  /** torchvision's ConvNeXt: its features/block/classifier names and [C, 1, 1] layer scales. */
  @Test
  void torchvisionsConvNeXtLoadedByItsNamesGivesTorchvisionsLogits() throws IOException {
    PretrainedWeights weights =
        PretrainedWeights.read(resource("convnext_tiny_torchvision.weights.safetensors"));
    assertEquals("torchvision", weights.naming());
    Map<String, Safetensors.Tensor> expected =
        Safetensors.read(
            resource("convnext_tiny_torchvision.expected.safetensors"), new HashMap<>());
    List<Layer> layers =
        ConvNeXt.layers(
            new ConvNeXt.Config(new int[] {1, 1, 1, 1}, new int[] {8, 16, 16, 16}),
            new ImageShape(64, 64, 3),
            5,
            0f,
            Precision.FP32);
    assertLogits(layers, weights.matchTo("convnext", params(layers), List.of()), expected, 2);
  }

  /** The model's evaluation-mode logits on the golden's input, within the forward's 1e-4. */
  private static void assertLogits(
      List<Layer> layers,
      Map<String, float[]> values,
      Map<String, Safetensors.Tensor> expected,
      int batch) {
    float[] input = expected.get("input").values();
    try (Backend b = new CpuBackend(2)) {
      Stream s = b.createStream("pretrained");
      try (Model model = Model.build("pretrained", layers, b, s, batch, 1, values);
          DeviceBuffer x = b.allocate("x", DType.F32, input.length)) {
        DeviceArrays.write(b, s, x, input);
        float[] logits = DeviceArrays.read(b, s, model.forward(s, x, batch, false));
        float[] want = expected.get("logits").values();
        double largest = 0;
        for (float v : want) {
          largest = Math.max(largest, Math.abs(v));
        }
        for (int i = 0; i < want.length; i++) { // float32 against PyTorch: see PyTorchGoldenTest
          assertEquals(want[i], logits[i], 1e-4 * largest, "logit " + i);
        }
      }
    }
  }

  @Test
  void anotherClassCountReplacesTheHeadAndLoadsTheRest() throws IOException {
    PretrainedWeights weights =
        PretrainedWeights.read(resource("vit_tiny_torchvision.weights.safetensors"));
    List<Layer> layers = ModelSpec.parse("vit:4-32-2-4-7", new ImageShape(16, 16, 3));
    Map<String, float[]> values = weights.matchTo("vit:4-32-2-4-7", params(layers), List.of());
    assertTrue(!values.containsKey("head.weight") && !values.containsKey("head.bias"));
    assertEquals(params(layers).size() - 2, values.size());
  }

  /**
   * A head weight stored transposed ([in, classes]) is a shape mismatch named in the one error, for
   * the model of the file's class count and for another: it was taken for another class count and
   * the head silently started fresh (predict then failed with a NullPointerException's message).
   */
  @Test
  void aTransposedHeadIsMisshapenNotAnotherClassCount(@TempDir Path dir) throws IOException {
    Map<String, Safetensors.Tensor> all =
        Safetensors.read(resource("vit_tiny_torchvision.weights.safetensors"), new HashMap<>());
    List<Safetensors.Tensor> written = new java.util.ArrayList<>();
    for (Safetensors.Tensor t : all.values()) {
      boolean head = t.name().equals("heads.head.weight") || t.name().equals("head.weight");
      written.add(
          head
              ? new Safetensors.Tensor(
                  t.name(), new long[] {t.shape()[1], t.shape()[0]}, t.values())
              : t);
    }
    Path transposed = dir.resolve("transposed.safetensors");
    Safetensors.write(transposed, written, Map.of());
    PretrainedWeights weights = PretrainedWeights.read(transposed);
    for (String spec : new String[] {SPEC, "vit:4-32-2-4-7"}) {
      List<Layer> layers = ModelSpec.parse(spec, new ImageShape(16, 16, 3));
      var e =
          assertThrows(
              IllegalArgumentException.class,
              () -> weights.matchTo(spec, params(layers), List.of()));
      assertTrue(e.getMessage().contains("head.weight [32, 5] in the file, ["), e.getMessage());
    }
  }

  @Test
  void aPositionEmbeddingForAnotherImageSizeIsResampledAsTimmDoes() throws IOException {
    PretrainedWeights weights =
        PretrainedWeights.read(resource("vit_tiny_torchvision.weights.safetensors"));
    List<Layer> layers = ModelSpec.parse(SPEC, new ImageShape(24, 24, 3)); // a 6x6 grid
    float[] pos = weights.matchTo(SPEC, params(layers), List.of()).get("pos_embed");
    float[] torch =
        Safetensors.read(resource("vit_tiny_torchvision.expected.safetensors"), new HashMap<>())
            .get("pos_embed_6x6")
            .values();
    // the same bicubic weights; PyTorch sums 16 float products, here in double: 1e-6 of 1
    for (int i = 0; i < torch.length; i++) {
      assertEquals(torch[i], pos[i], 1e-6 * Math.max(1, Math.abs(torch[i])), "element " + i);
    }
  }

  @Test
  void aCheckpointOfAnotherArchitectureListsEverythingThatDoesNotFitInOneError()
      throws IOException {
    PretrainedWeights weights =
        PretrainedWeights.read(resource("vit_tiny_torchvision.weights.safetensors"));
    List<Layer> deeper = ModelSpec.parse("vit:4-32-3-4-5", new ImageShape(16, 16, 3));
    var e =
        assertThrows(
            IllegalArgumentException.class,
            () -> weights.matchTo("vit:4-32-3-4-5", params(deeper), List.of()));
    assertTrue(
        e.getMessage().contains("(torchvision names) does not fit vit:4-32-3-4-5: missing 12"),
        e.getMessage());
    assertTrue(e.getMessage().contains("blocks.2.norm1.weight"), e.getMessage());
    assertEquals(1, e.getMessage().lines().count(), "one line");
    List<Layer> wider = ModelSpec.parse("vit:4-64-2-4-5", new ImageShape(16, 16, 3));
    var shapes =
        assertThrows(
            IllegalArgumentException.class,
            () -> weights.matchTo("vit:4-64-2-4-5", params(wider), List.of()));
    assertTrue(shapes.getMessage().contains("shape mismatches"), shapes.getMessage());
    assertTrue(
        shapes.getMessage().contains("cls_token [1, 1, 32] in the file, [1, 1, 64]"),
        shapes.getMessage());
  }

  /**
   * A file declaring 17 GB of tensors the model does not have, beside the model's own (sparse on
   * disk): its names are matched from the header and it is refused listing them, before a byte of
   * theirs is read (it was read whole first: 7 GB of heap, an OutOfMemoryError trace).
   */
  @Test
  void foreignTensorsAreRefusedFromTheHeaderWithoutReadingThem(@TempDir Path dir)
      throws IOException {
    Map<String, Safetensors.Tensor> own =
        Safetensors.read(resource("vit_tiny_torchvision.weights.safetensors"), new HashMap<>());
    StringBuilder header = new StringBuilder("{");
    long offset = 0;
    for (Safetensors.Tensor t : own.values()) {
      long end = offset + 4L * t.values().length;
      header.append(entry(t.name(), t.shape(), offset, end)).append(',');
      offset = end;
    }
    long ownBytes = offset;
    long foreign = (Integer.MAX_VALUE - 16) / 4;
    for (int i = 0; i < 8; i++) {
      long end = offset + 4 * foreign;
      header.append(entry("extra." + i, new long[] {foreign}, offset, end)).append(',');
      offset = end;
    }
    header.setCharAt(header.length() - 1, '}');
    byte[] json = header.toString().getBytes(StandardCharsets.UTF_8);
    Path file = dir.resolve("foreign.safetensors");
    try (var out =
        java.nio.channels.FileChannel.open(
            file,
            java.nio.file.StandardOpenOption.CREATE_NEW,
            java.nio.file.StandardOpenOption.WRITE)) {
      ByteBuffer head = ByteBuffer.allocate(8 + json.length).order(ByteOrder.LITTLE_ENDIAN);
      head.putLong(json.length).put(json).flip();
      out.write(head);
      ByteBuffer data = ByteBuffer.allocate((int) ownBytes).order(ByteOrder.LITTLE_ENDIAN);
      var floats = data.asFloatBuffer();
      own.values().forEach(t -> floats.put(t.values()));
      out.write(data.position(0));
      out.write(ByteBuffer.wrap(new byte[1]), 8 + json.length + offset - 1); // sparse to the end
    }
    PretrainedWeights weights = PretrainedWeights.read(file);
    List<Layer> layers = ModelSpec.parse(SPEC, new ImageShape(16, 16, 3));
    var e =
        assertThrows(
            IllegalArgumentException.class, () -> weights.matchTo(SPEC, params(layers), List.of()));
    assertTrue(e.getMessage().contains("unexpected 8 (extra.0, extra.1"), e.getMessage());
  }

  /**
   * A 40,000-character tensor name the model does not have is listed by its start, in a line of its
   * own.
   */
  @Test
  void aHugeForeignNameIsShownByItsStart(@TempDir Path dir) throws IOException {
    Map<String, Safetensors.Tensor> own =
        Safetensors.read(resource("vit_tiny_torchvision.weights.safetensors"), new HashMap<>());
    List<Safetensors.Tensor> tensors = new ArrayList<>(own.values());
    String name = "x".repeat(40_000); // Jackson reads names of up to 50,000
    tensors.add(new Safetensors.Tensor(name, new long[] {1}, new float[1]));
    Path file = dir.resolve("long-name.safetensors");
    Safetensors.write(file, tensors, Map.of());
    List<Layer> layers = ModelSpec.parse(SPEC, new ImageShape(16, 16, 3));
    PretrainedWeights weights = PretrainedWeights.read(file);
    var e =
        assertThrows(
            IllegalArgumentException.class, () -> weights.matchTo(SPEC, params(layers), List.of()));
    assertTrue(e.getMessage().contains("x… (40000 characters)"), e.getMessage());
    assertTrue(e.getMessage().length() < 1000, e.getMessage().length() + " characters");
  }

  private static String entry(String name, long[] shape, long begin, long end) {
    return String.format(
        "\"%s\":{\"dtype\":\"F32\",\"shape\":%s,\"data_offsets\":[%d,%d]}",
        name, java.util.Arrays.toString(shape).replace(" ", ""), begin, end);
  }

  @Test
  void aTruncatedFileIsRefusedNamingIt(@TempDir Path dir) throws IOException {
    byte[] whole = Files.readAllBytes(resource("vit_tiny_torchvision.weights.safetensors"));
    Path cut = dir.resolve("cut.safetensors");
    Files.write(cut, java.util.Arrays.copyOf(whole, whole.length - 100));
    var e = assertThrows(IOException.class, () -> PretrainedWeights.read(cut));
    assertTrue(e.getMessage().startsWith(cut + ": tensor "), e.getMessage());
    assertTrue(e.getMessage().contains("truncated file?"), e.getMessage());
  }

  /** F16 (with a subnormal and infinity), BF16 and I64, as a half-precision checkpoint has them. */
  @Test
  void halfBfloatAndInt64TensorsAreWidenedToFloat(@TempDir Path dir) throws IOException {
    String header =
        "{\"h\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]},"
            + "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]},"
            + "\"n\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[12,20]}}";
    byte[] json = header.getBytes(StandardCharsets.UTF_8);
    ByteBuffer file = ByteBuffer.allocate(8 + json.length + 20).order(ByteOrder.LITTLE_ENDIAN);
    file.putLong(json.length).put(json);
    file.putShort((short) 0x3C00).putShort((short) 0xC100); // 1.0, -2.5
    file.putShort((short) 0x0001).putShort((short) 0x7C00); // 2^-24, +inf
    file.putShort((short) 0x3FC0).putShort((short) 0xC049); // bf16 1.5, -3.140625
    file.putLong(12345L);
    Path path = dir.resolve("mixed.safetensors");
    Files.write(path, file.array());
    Map<String, Safetensors.Tensor> t = Safetensors.read(path, new HashMap<>());
    assertArrayEquals(
        new float[] {1f, -2.5f, 0x1p-24f, Float.POSITIVE_INFINITY}, t.get("h").values());
    assertArrayEquals(new float[] {1.5f, -3.140625f}, t.get("b").values());
    assertArrayEquals(new float[] {12345f}, t.get("n").values());
  }
}
