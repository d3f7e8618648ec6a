package dev.ramtrain.trainer.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SafetensorsTest {
  @TempDir Path tmp;

  @Test
  void readsAFileBuiltByHandFromTheFormatSpec() throws Exception {
    // u64 little-endian header size N, N bytes of JSON, then the tensors' bytes, as the spec says.
    String header =
        "{\"weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
            + "\"bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]},\"__metadata__\":{\"format\":\"pt\"}}";
    byte[] json = header.getBytes(StandardCharsets.UTF_8);
    ByteBuffer b = ByteBuffer.allocate(8 + json.length + 24).order(ByteOrder.LITTLE_ENDIAN);
    b.putLong(json.length).put(json);
    for (float v : new float[] {1.5f, -2f, 0.25f, 8f, 3f, -1f}) {
      b.putFloat(v);
    }
    Path file = tmp.resolve("spec.safetensors");
    Files.write(file, b.array());
    Map<String, String> meta = new HashMap<>();
    var tensors = Safetensors.read(file, meta);
    assertArrayEquals(new float[] {1.5f, -2f, 0.25f, 8f}, tensors.get("weight").values());
    assertArrayEquals(new long[] {2, 2}, tensors.get("weight").shape());
    assertArrayEquals(new float[] {3f, -1f}, tensors.get("bias").values());
    assertEquals("pt", meta.get("format"));
  }

  /**
   * Half, bfloat16 and int64 tensors widen to the same floats whether read whole or left in the
   * file and read in part (a checkpoint's weights are read in place).
   */
  @Test
  void narrowAndIntegerTensorsWidenTheSameReadWholeOrInPlace() throws Exception {
    String header =
        "{\"h\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]},"
            + "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[6,10]},"
            + "\"n\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[10,26]}}";
    byte[] json = header.getBytes(StandardCharsets.UTF_8);
    ByteBuffer b = ByteBuffer.allocate(8 + json.length + 26).order(ByteOrder.LITTLE_ENDIAN);
    b.putLong(json.length).put(json);
    // F16 1.5, -2, 2^-24 (the smallest subnormal); BF16 0.25, -3; I64 7, -1
    b.putShort((short) 0x3E00).putShort((short) 0xC000).putShort((short) 0x0001);
    b.putShort((short) 0x3E80).putShort((short) 0xC040);
    b.putLong(7).putLong(-1);
    Path file = tmp.resolve("narrow.safetensors");
    Files.write(file, b.array());
    var whole = Safetensors.read(file, new HashMap<>());
    var inPlace = Safetensors.readInPlace(file);
    Map<String, float[]> expected =
        Map.of(
            "h", new float[] {1.5f, -2f, 0x1p-24f},
            "b", new float[] {0.25f, -3f},
            "n", new float[] {7f, -1f});
    for (var e : expected.entrySet()) {
      assertArrayEquals(e.getValue(), whole.get(e.getKey()).values(), e.getKey());
      assertArrayEquals(e.getValue(), inPlace.get(e.getKey()).values(), e.getKey());
    }
    float[] tail = new float[2];
    inPlace.get("h").data().read(1, java.nio.FloatBuffer.wrap(tail));
    assertArrayEquals(new float[] {-2f, 0x1p-24f}, tail);
  }

  @Test
  void roundTripWithAlignedHeader() throws Exception {
    Path file = tmp.resolve("rt.safetensors");
    var a = new Safetensors.Tensor("fc1.weight", new long[] {3, 2}, new float[] {1, 2, 3, 4, 5, 6});
    var c = new Safetensors.Tensor("fc1.bias", new long[] {3}, new float[] {-1, 0, 1});
    Safetensors.write(file, List.of(a, c), Map.of("ramtrain.model", "mlp:2-3"));
    byte[] bytes = Files.readAllBytes(file);
    long headerLength = ByteBuffer.wrap(bytes, 0, 8).order(ByteOrder.LITTLE_ENDIAN).getLong();
    assertEquals(0, headerLength % 8, "data starts 8-byte aligned");
    assertEquals(8 + headerLength + 36, bytes.length);
    Map<String, String> meta = new HashMap<>();
    var back = Safetensors.read(file, meta);
    assertEquals(List.of("fc1.weight", "fc1.bias"), List.copyOf(back.keySet()));
    assertArrayEquals(a.values(), back.get("fc1.weight").values());
    assertEquals("mlp:2-3", meta.get("ramtrain.model"));
  }

  /**
   * A tensor whose values are read as it is written (a host slab's range, here a function of the
   * index) writes the bytes an array of the same values does, across the writer's 1 Mi-value pieces
   * (three values past one piece, a piece started at an odd offset); read back in place it yields
   * the same values from any offset, and whole.
   */
  @Test
  void aTensorReadAsItIsWrittenMatchesItsArrayAndReadsBackInPlace() throws Exception {
    int n = (1 << 20) + 3;
    float[] array = new float[n];
    for (int i = 0; i < n; i++) {
      array[i] = i * 0.5f - 7;
    }
    Safetensors.Values computed =
        new Safetensors.Values() {
          @Override
          public long count() {
            return n;
          }

          @Override
          public void read(long from, java.nio.FloatBuffer into) {
            while (into.hasRemaining()) {
              into.put(from++ * 0.5f - 7);
            }
          }
        };
    Path fromArray = tmp.resolve("array.safetensors");
    Path fromValues = tmp.resolve("values.safetensors");
    var small = new Safetensors.Tensor("b", new long[] {3}, new float[] {1, 2, 3});
    Safetensors.write(
        fromArray,
        List.of(small, new Safetensors.Tensor("state.0", new long[] {n}, array)),
        Map.of());
    Safetensors.write(
        fromValues,
        List.of(small, new Safetensors.Tensor("state.0", new long[] {n}, computed)),
        Map.of());
    assertArrayEquals(Files.readAllBytes(fromArray), Files.readAllBytes(fromValues));

    var inPlace = Safetensors.readInPlace(fromValues);
    assertEquals(List.of("b", "state.0"), List.copyOf(inPlace.keySet()));
    Safetensors.Values stored = inPlace.get("state.0").data();
    assertEquals(n, stored.count());
    assertArrayEquals(array, stored.toArray());
    float[] tail = new float[5];
    stored.read(n - 5, java.nio.FloatBuffer.wrap(tail));
    assertArrayEquals(Arrays.copyOfRange(array, n - 5, n), tail);
    assertArrayEquals(array, Safetensors.read(fromValues, new HashMap<>()).get("state.0").values());
    assertArrayEquals(new float[] {1, 2, 3}, inPlace.get("b").values());
  }

  @Test
  void truncatedOrForeignFilesAreNamed() throws Exception {
    Path file = tmp.resolve("cut.safetensors");
    Safetensors.write(
        file,
        List.of(new Safetensors.Tensor("w", new long[] {4}, new float[] {1, 2, 3, 4})),
        Map.of());
    byte[] bytes = Files.readAllBytes(file);
    Files.write(file, Arrays.copyOf(bytes, bytes.length - 4));
    var e = assertThrows(IOException.class, () -> Safetensors.read(file, new HashMap<>()));
    assertTrue(
        e.getMessage().contains("cut.safetensors") && e.getMessage().contains("truncated"),
        e.getMessage());
    Files.writeString(file, "not a safetensors file at all, just text");
    e = assertThrows(IOException.class, () -> Safetensors.read(file, new HashMap<>()));
    assertTrue(e.getMessage().contains("cut.safetensors"), e.getMessage());
  }
}
