package dev.ramtrain.trainer.data;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.function.DoubleSupplier;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Load-time crops against torchvision and Pillow (goldens/random_resized_crop.json, from
 * trainer/src/test/goldens/make_crop_goldens.py): torchvision's own RandomResizedCrop.get_params on
 * the same uniform draws, and Pillow's crop + BILINEAR resize (and timm's Resize + CenterCrop) of
 * random images, both to the exact integer.
 */
class ResizedCropGoldenTest {
  private static JsonNode goldens;

  @BeforeAll
  static void read() throws IOException {
    try (InputStream in =
        ResizedCropGoldenTest.class.getResourceAsStream("/goldens/random_resized_crop.json")) {
      goldens = new ObjectMapper().readTree(in);
    }
  }

  @Test
  void cropParametersAreTorchvisionsOnTheSameDraws() {
    int fallbacks = 0;
    for (JsonNode c : goldens.get("params")) {
      RandomResizedCrop crop =
          new RandomResizedCrop(
              8,
              8,
              c.get("scale").get(0).asDouble(),
              c.get("scale").get(1).asDouble(),
              c.get("ratio").get(0).asDouble(),
              c.get("ratio").get(1).asDouble());
      double[] draws = new double[c.get("draws").size()];
      for (int i = 0; i < draws.length; i++) {
        draws[i] = c.get("draws").get(i).asDouble();
      }
      int[] used = {0};
      DoubleSupplier uniform = () -> draws[used[0]++];
      int[] box = crop.box(c.get("imageHeight").asInt(), c.get("imageWidth").asInt(), uniform);
      JsonNode e = c.get("expected");
      int[] expected = {
        e.get("top").asInt(), e.get("left").asInt(), e.get("height").asInt(), e.get("width").asInt()
      };
      assertArrayEquals(expected, box, c.toString());
      assertEquals(e.get("drawsUsed").asInt(), used[0], "draws read: " + c);
      fallbacks += used[0] == 20 ? 1 : 0;
    }
    assertEquals(true, fallbacks > 0, "the cases include the central fallback");
  }

  @Test
  void resizedPixelsArePillowsToTheValue() {
    for (JsonNode c : goldens.get("pixels")) {
      JsonNode image = goldens.get("images").get(c.get("image").asInt());
      int channels = image.get("channels").asInt();
      int height = image.get("height").asInt();
      int width = image.get("width").asInt();
      ByteBuffer src = bytes(image.get("pixels"));
      int outHeight = c.get("outHeight").asInt();
      int outWidth = c.get("outWidth").asInt();
      CropPlan plan =
          c.has("centerCrop")
              ? new CenterCrop(outHeight, outWidth, c.get("cropPct").asDouble())
                  .plan(height, width, () -> 0)
              : new CropPlan(
                  c.get("top").asInt(),
                  c.get("left").asInt(),
                  c.get("cropHeight").asInt(),
                  c.get("cropWidth").asInt(),
                  outHeight,
                  outWidth,
                  0,
                  0);
      ByteBuffer expected = bytes(c.get("expected"));
      for (boolean mirror : new boolean[] {false, true}) {
        ByteBuffer out = ByteBuffer.allocate(3 + outHeight * outWidth * channels);
        new AntialiasedResize()
            .resize(src, width, channels, plan, outHeight, outWidth, mirror, out, 3);
        for (int y = 0; y < outHeight; y++) {
          for (int x = 0; x < outWidth; x++) {
            int sx = mirror ? outWidth - 1 - x : x;
            for (int k = 0; k < channels; k++) {
              int want = expected.get((y * outWidth + sx) * channels + k) & 0xFF;
              int got = out.get(3 + (y * outWidth + x) * channels + k) & 0xFF;
              assertEquals(want, got, c.get("image") + " " + plan + " at " + y + "," + x);
            }
          }
        }
      }
    }
  }

  private static ByteBuffer bytes(JsonNode values) {
    ByteBuffer b = ByteBuffer.allocate(values.size());
    for (int i = 0; i < values.size(); i++) {
      b.put(i, (byte) values.get(i).asInt());
    }
    return b;
  }
}
