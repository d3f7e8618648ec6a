package dev.ramtrain.trainer.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;

/**
 * Checkpoints are untrusted input: a safetensors file mutated in its header, its length prefix or
 * its data is either read (every tensor's values from inside the file) or refused with an {@link
 * IOException} naming the file; never another exception, a huge allocation or a hang.
 */
class SafetensorsFuzzTest {
  private static Path dir;
  private static byte[] valid;

  @BeforeContainer
  static void write() throws IOException {
    dir = Files.createTempDirectory("safetensors-fuzz");
    Path file = dir.resolve("valid.safetensors");
    Safetensors.write(
        file,
        List.of(
            new Safetensors.Tensor("fc1.weight", new long[] {2, 3}, new float[] {1, 2, 3, 4, 5, 6}),
            new Safetensors.Tensor("fc1.bias", new long[] {2}, new float[] {-1, 1}),
            new Safetensors.Tensor("bn.running_var", new long[] {0}, new float[0])),
        Map.of("format", "pt", "ramtrain.model", "mlp:3-2"));
    valid = Files.readAllBytes(file);
  }

  @AfterContainer
  static void clean() throws IOException {
    try (var files = Files.list(dir)) {
      for (Path p : files.toList()) {
        Files.delete(p);
      }
    }
    Files.delete(dir);
  }

  @Provide
  Arbitrary<List<int[]>> edits() {
    // {where, what, value}: where < 8 hits the length prefix; what: set byte, delete, insert, cut
    return Combinators.combine(
            Arbitraries.integers().between(0, valid.length - 1),
            Arbitraries.integers().between(0, 3),
            Arbitraries.oneOf(
                Arbitraries.integers().between(0, 255),
                Arbitraries.of((int) '[', (int) ']', (int) '-', (int) '9', (int) '"', (int) '{')))
        .as((at, what, value) -> new int[] {at, what, value})
        .list()
        .ofMinSize(1)
        .ofMaxSize(4);
  }

  @Property(tries = 1500)
  void aMutatedFileIsReadOrRefusedCleanly(@ForAll("edits") List<int[]> edits) throws Exception {
    StringBuilder trail = new StringBuilder();
    byte[] bytes = valid;
    for (int[] e : edits) {
      bytes = apply(bytes, e);
      trail.append(e[0]).append(':').append(e[1]).append(' ');
    }
    Path file = dir.resolve("fuzz.safetensors");
    Files.write(file, bytes);
    try {
      Map<String, Safetensors.Tensor> tensors = Safetensors.read(file, new HashMap<>());
      long values = tensors.values().stream().mapToLong(t -> t.values().length).sum();
      assertTrue(4 * values <= bytes.length, "values come from inside the file: " + trail);
    } catch (IOException e) {
      assertTrue(e.getMessage().startsWith(file.toString()), e.getMessage());
    }
  }

  @Example
  void aHeaderThatListsOneRangeManyTimesIsRefused() throws Exception {
    // Without the overlap check, a small file could make the reader allocate its size many times.
    StringBuilder header = new StringBuilder("{");
    for (int i = 0; i < 1000; i++) {
      header.append(i == 0 ? "" : ",");
      header
          .append("\"t")
          .append(i)
          .append("\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}");
    }
    byte[] json = header.append('}').toString().getBytes(StandardCharsets.UTF_8);
    ByteBuffer b = ByteBuffer.allocate(8 + json.length + 16).order(ByteOrder.LITTLE_ENDIAN);
    b.putLong(json.length).put(json);
    Path file = dir.resolve("overlap.safetensors");
    Files.write(file, b.array());
    var e =
        org.junit.jupiter.api.Assertions.assertThrows(
            IOException.class, () -> Safetensors.read(file, new HashMap<>()));
    assertTrue(e.getMessage().contains("overlaps"), e.getMessage());
  }

  @Example
  void theSameTensorsWriteTheSameBytes() throws Exception {
    // A HashMap's order differs between JVMs and between maps of different capacity; the file
    // must not: metadata keys are written sorted.
    Map<String, String> small = new HashMap<>();
    Map<String, String> large = new HashMap<>(1024);
    Map<String, String> linked = new LinkedHashMap<>();
    for (String k : List.of("zeta", "format", "ramtrain.model", "alpha", "m", "b")) {
      small.put(k, k.toUpperCase());
      large.put(k, k.toUpperCase());
    }
    for (String k : List.of("b", "m", "alpha", "ramtrain.model", "format", "zeta")) {
      linked.put(k, k.toUpperCase());
    }
    var t = List.of(new Safetensors.Tensor("w", new long[] {2}, new float[] {1, 2}));
    byte[] first = null;
    for (Map<String, String> meta : List.of(small, large, linked)) {
      Path file = dir.resolve("same.safetensors");
      Safetensors.write(file, t, meta);
      byte[] bytes = Files.readAllBytes(file);
      if (first == null) {
        first = bytes;
      }
      assertArrayEquals(first, bytes);
    }
    String header = new String(first, 8, 120, StandardCharsets.UTF_8);
    assertEquals(
        List.of("alpha", "b", "format", "m", "ramtrain.model", "zeta"),
        java.util.Arrays.stream(header.replaceAll(".*__metadata__\":\\{(.*?)}.*", "$1").split(","))
            .map(kv -> kv.substring(1, kv.indexOf('"', 1)))
            .toList());
  }

  private static byte[] apply(byte[] b, int[] e) {
    if (b.length < 2) {
      return b;
    }
    int at = Math.min(e[0], b.length - 1);
    switch (e[1]) {
      case 0 -> {
        byte[] c = b.clone();
        c[at] = (byte) e[2];
        return c;
      }
      case 1 -> {
        byte[] c = new byte[b.length - 1];
        System.arraycopy(b, 0, c, 0, at);
        System.arraycopy(b, at + 1, c, at, b.length - at - 1);
        return c;
      }
      case 2 -> {
        byte[] c = new byte[b.length + 1];
        System.arraycopy(b, 0, c, 0, at);
        c[at] = (byte) e[2];
        System.arraycopy(b, at, c, at + 1, b.length - at);
        return c;
      }
      default -> {
        byte[] c = new byte[Math.max(1, at)];
        System.arraycopy(b, 0, c, 0, c.length);
        return c;
      }
    }
  }
}
