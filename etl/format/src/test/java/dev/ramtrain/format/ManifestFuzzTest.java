package dev.ramtrain.format;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * Manifests are untrusted input: whatever a mutation does to one, {@link ManifestCodec#fromJson}
 * either refuses it with a {@link ShardFormatException} naming the file, or returns a manifest
 * whose counts agree and whose every file name stays inside the dataset directory.
 */
class ManifestFuzzTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String FILE = "/data/ds/manifest.json";
  private static final byte[] VALID = ManifestCodec.toJson(valid());

  static Manifest valid() {
    List<Long> counts = List.of(2L, 1L, 1L);
    Manifest.Shard a =
        new Manifest.Shard("v0001/train/part-00000.arrow", 4, 900, "0badcafe", counts);
    Manifest.Shard b =
        new Manifest.Shard("v0001/train/part-00001.arrow", 4, 1000, "12345678", counts);
    Manifest.Shard v = new Manifest.Shard("v0001/val/part-00000.arrow", 4, 950, "deadbeef", counts);
    return new Manifest(
        Manifest.FORMAT,
        Manifest.VERSION,
        "test",
        Manifest.Image.of(new ImageShape(4, 4, 3)),
        List.of("a", "b", "c"),
        Map.of(
            Manifest.TRAIN,
            new Manifest.Split(8, 1900, List.of(4L, 2L, 2L), List.of(a, b)),
            Manifest.VAL,
            new Manifest.Split(4, 950, counts, List.of(v))),
        new Manifest.Source("image-folder", "/raw", Map.of()),
        Map.of("resize", "stretch"),
        7,
        new Manifest.Rejects(1, 13, Map.of("CORRUPT", 1L), "v0001/rejects.jsonl"));
  }

  /** Replace the value at one place of the JSON tree. */
  record Edit(int node, JsonNode value) {}

  @Provide
  Arbitrary<List<Edit>> edits() {
    Arbitrary<JsonNode> values =
        Arbitraries.of(
            JSON.nullNode(),
            JSON.getNodeFactory().numberNode(-1),
            JSON.getNodeFactory().numberNode(0),
            JSON.getNodeFactory().numberNode(Long.MAX_VALUE),
            JSON.getNodeFactory().numberNode(1e308),
            JSON.getNodeFactory().textNode("../../../etc/passwd"),
            JSON.getNodeFactory().textNode("/etc/passwd"),
            JSON.getNodeFactory().textNode("v0001/../../x.arrow"),
            JSON.getNodeFactory().textNode("file:///etc/passwd"),
            JSON.getNodeFactory().textNode("a\\b"),
            JSON.getNodeFactory().textNode(""),
            JSON.getNodeFactory().textNode("zz"),
            JSON.getNodeFactory().booleanNode(true),
            JSON.createArrayNode(),
            JSON.createArrayNode().add(JSON.nullNode()),
            JSON.createObjectNode());
    return Combinators.combine(Arbitraries.integers().between(0, 200), values)
        .as(Edit::new)
        .list()
        .ofMinSize(1)
        .ofMaxSize(3);
  }

  @Property(tries = 1500)
  void structuralEditsAreRefusedOrConsistent(@ForAll("edits") List<Edit> edits) throws Exception {
    JsonNode tree = JSON.readTree(VALID);
    for (Edit e : edits) {
      replace(tree, e);
    }
    check(JSON.writeValueAsBytes(tree));
  }

  @Provide
  Arbitrary<List<int[]>> byteEdits() {
    return Combinators.combine(
            Arbitraries.integers().between(0, VALID.length - 1),
            Arbitraries.integers().between(0, 2),
            Arbitraries.integers().between(0, 127))
        .as((at, kind, value) -> new int[] {at, kind, value})
        .list()
        .ofMinSize(1)
        .ofMaxSize(6);
  }

  @Property(tries = 1500)
  void byteEditsAreRefusedOrConsistent(@ForAll("byteEdits") List<int[]> edits) throws Exception {
    StringBuilder text = new StringBuilder(new String(VALID, StandardCharsets.UTF_8));
    for (int[] e : edits) {
      int at = Math.min(e[0], text.length() - 1);
      switch (e[1]) {
        case 0 -> text.setCharAt(at, (char) e[2]);
        case 1 -> text.deleteCharAt(at);
        default -> text.insert(at, (char) e[2]);
      }
    }
    check(text.toString().getBytes(StandardCharsets.UTF_8));
  }

  @Example
  void theUnmutatedManifestIsAccepted() throws Exception {
    check(VALID);
    assertTrue(ManifestCodec.fromJson(VALID, FILE).equals(valid()));
  }

  @Example
  void pathsLeavingTheDatasetAreRefusedNamingTheFile() throws Exception {
    for (String bad :
        List.of(
            "../../../etc/passwd",
            "/etc/passwd",
            "v0001/../x.arrow",
            "./x",
            "a//b",
            "hdfs://nn/x")) {
      JsonNode tree = JSON.readTree(VALID);
      ((ObjectNode) tree.at("/splits/train/shards/0")).put("file", bad);
      var e =
          assertThrows(
              ShardFormatException.class,
              () -> ManifestCodec.fromJson(JSON.writeValueAsBytes(tree), FILE));
      assertTrue(
          e.getMessage().startsWith(FILE) && e.getMessage().contains("plain relative path"),
          e.getMessage());
    }
  }

  @Example
  void countsThatDisagreeAreRefused() throws Exception {
    JsonNode tree = JSON.readTree(VALID);
    ((ObjectNode) tree.at("/splits/train")).put("rows", 9);
    var e =
        assertThrows(
            ShardFormatException.class,
            () -> ManifestCodec.fromJson(JSON.writeValueAsBytes(tree), FILE));
    assertTrue(e.getMessage().contains("split train says 9 rows"), e.getMessage());
  }

  @Example
  void garbageIsReportedOnOneLine() {
    var e =
        assertThrows(
            ShardFormatException.class,
            () ->
                ManifestCodec.fromJson("{\"format\": ram".getBytes(StandardCharsets.UTF_8), FILE));
    assertFalse(e.getMessage().contains("\n"), e.getMessage());
    assertTrue(e.getMessage().contains("line 1, column"), e.getMessage());
  }

  private static void check(byte[] json) {
    Manifest m;
    try {
      m = ManifestCodec.fromJson(json, FILE);
    } catch (ShardFormatException e) {
      assertTrue(e.getMessage().startsWith(FILE + ": "), e.getMessage());
      assertFalse(e.getMessage().contains("\n"), "one line: " + e.getMessage());
      return;
    }
    Path dir = Path.of("/data/ds");
    for (String file : m.files()) {
      assertTrue(dir.resolve(file).normalize().startsWith(dir), file + " leaves the dataset");
    }
    for (Manifest.Split split : m.splits().values()) {
      assertTrue(split.shards().stream().mapToLong(Manifest.Shard::rows).sum() == split.rows());
      assertTrue(split.classCounts().size() == m.classes().size());
    }
  }

  /** Replaces the {@code e.node()}-th value of a depth-first walk (mod the number of values). */
  private static void replace(JsonNode root, Edit e) {
    List<JsonNode[]> slots = new ArrayList<>(); // {container, key or index as text node}
    collect(root, slots);
    if (slots.isEmpty()) {
      return;
    }
    JsonNode[] slot = slots.get(e.node() % slots.size());
    if (slot[0] instanceof ObjectNode o) {
      o.set(slot[1].asText(), e.value().deepCopy());
    } else if (slot[0] instanceof ArrayNode a) {
      a.set(slot[1].asInt(), e.value().deepCopy());
    }
  }

  private static void collect(JsonNode node, List<JsonNode[]> slots) {
    if (node instanceof ObjectNode o) {
      List<String> names = new ArrayList<>();
      o.fieldNames().forEachRemaining(names::add);
      for (String name : names) {
        slots.add(new JsonNode[] {o, JSON.getNodeFactory().textNode(name)});
        collect(o.get(name), slots);
      }
    } else if (node instanceof ArrayNode a) {
      for (int i = 0; i < a.size(); i++) {
        slots.add(new JsonNode[] {a, JSON.getNodeFactory().numberNode(i)});
        collect(a.get(i), slots);
      }
    }
  }
}
