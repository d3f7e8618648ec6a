package dev.ramtrain.format;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.io.IOException;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Pattern;

/** Manifest JSON with the checks a reader needs before trusting it. */
public final class ManifestCodec {

  private static final ObjectMapper JSON =
      new ObjectMapper()
          .enable(SerializationFeature.INDENT_OUTPUT)
          .enable(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS)
          .disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);

  private static final Pattern CRC32C = Pattern.compile("[0-9a-f]{8}");

  private ManifestCodec() {}

  public static byte[] toJson(Manifest manifest) {
    try {
      return JSON.writeValueAsBytes(manifest);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("cannot serialize manifest", e);
    }
  }

  /** Parses a manifest; {@code file} names it in errors. */
  public static Manifest fromJson(byte[] json, String file) throws ShardFormatException {
    JsonNode tree;
    try {
      tree = JSON.readTree(json);
    } catch (JsonProcessingException e) {
      throw new ShardFormatException(file, "manifest is not valid JSON: " + oneLine(e), e);
    } catch (IOException e) {
      throw new ShardFormatException(file, "manifest is not valid JSON: " + e.getMessage(), e);
    }
    if (tree == null || !Manifest.FORMAT.equals(tree.path("format").asText())) {
      throw new ShardFormatException(
          file, "not a ramtrain dataset manifest (format is not " + Manifest.FORMAT + ")");
    }
    int version = tree.path("formatVersion").asInt(-1);
    if (version > Manifest.VERSION) {
      throw new ShardFormatException(
          file,
          "dataset format version "
              + version
              + " is newer than this ramtrain understands ("
              + Manifest.VERSION
              + "); upgrade ramtrain");
    }
    if (version < 1) {
      throw new ShardFormatException(file, "manifest has no valid formatVersion");
    }
    for (String field : new String[] {"image", "classes", "splits", "source", "rejects"}) {
      if (!tree.hasNonNull(field)) {
        throw new ShardFormatException(file, "manifest is malformed: it has no '" + field + "'");
      }
    }
    Manifest manifest;
    try {
      manifest = JSON.treeToValue(tree, Manifest.class);
      manifest.image().shape(); // checks the dimensions
    } catch (JsonProcessingException e) {
      throw new ShardFormatException(file, "manifest is malformed: " + oneLine(e), e);
    } catch (IllegalArgumentException e) {
      throw new ShardFormatException(file, "manifest is malformed: " + e.getMessage(), e);
    }
    checkConsistent(manifest, file);
    return manifest;
  }

  /**
   * The counts a reader relies on agree with each other, and every file name stays inside the
   * dataset directory: what {@code inspect} checks, done for every reader before a file is opened.
   */
  static void checkConsistent(Manifest m, String file) throws ShardFormatException {
    int classes = m.classes().size();
    if (classes == 0 || m.classes().stream().anyMatch(c -> c == null || c.isEmpty())) {
      throw new ShardFormatException(file, "manifest is malformed: no classes, or an unnamed one");
    }
    Set<String> files = new HashSet<>();
    for (var e : m.splits().entrySet()) {
      String where = "split " + e.getKey();
      Manifest.Split split = e.getValue();
      if (split == null) {
        throw new ShardFormatException(file, "manifest is malformed: " + where + " is null");
      }
      requireCounts(split.classCounts(), classes, split.rows(), where, file);
      long rows = 0;
      long bytes = 0;
      for (Manifest.Shard shard : split.shards()) {
        if (shard == null) {
          throw new ShardFormatException(
              file, "manifest is malformed: a shard of " + where + " is null");
        }
        SafePaths.requireInside(shard.file(), file);
        if (!files.add(shard.file())) {
          throw new ShardFormatException(file, "manifest lists shard " + shard.file() + " twice");
        }
        String shardWhere = "shard " + shard.file();
        if (shard.rows() < 0 || shard.bytes() < 0) {
          throw new ShardFormatException(
              file, "manifest is malformed: " + shardWhere + " has negative rows or bytes");
        }
        if (shard.crc32c() == null || !CRC32C.matcher(shard.crc32c()).matches()) {
          throw new ShardFormatException(
              file, "manifest is malformed: " + shardWhere + " has no CRC32C of 8 hex digits");
        }
        requireCounts(shard.classCounts(), classes, shard.rows(), shardWhere, file);
        rows += shard.rows();
        bytes += shard.bytes();
      }
      if (rows != split.rows() || bytes != split.bytes()) {
        throw new ShardFormatException(
            file,
            String.format(
                "manifest is inconsistent: %s says %d rows and %d bytes, its shards hold %d rows and %d bytes",
                where, split.rows(), split.bytes(), rows, bytes));
      }
    }
    Manifest.Rejects r = m.rejects();
    if (r.count() < 0 || r.inputs() < r.count()) {
      throw new ShardFormatException(
          file, "manifest is inconsistent: " + r.count() + " rejects of " + r.inputs() + " inputs");
    }
    if (r.file() != null) {
      SafePaths.requireInside(r.file(), file);
    }
  }

  private static void requireCounts(
      List<Long> counts, int classes, long rows, String where, String file)
      throws ShardFormatException {
    if (counts.size() != classes) {
      throw new ShardFormatException(
          file,
          "manifest is inconsistent: "
              + where
              + " has "
              + counts.size()
              + " class counts for "
              + classes
              + " classes");
    }
    long sum = 0;
    for (Long c : counts) {
      if (c == null || c < 0) {
        throw new ShardFormatException(
            file, "manifest is malformed: " + where + " has a negative or missing class count");
      }
      sum += c;
    }
    if (sum != rows) {
      throw new ShardFormatException(
          file,
          "manifest is inconsistent: "
              + where
              + " says "
              + rows
              + " rows, its class counts add up to "
              + sum);
    }
  }

  /** Jackson's message on one line: what is wrong and where, without its excerpt of the input. */
  private static String oneLine(JsonProcessingException e) {
    String what = e.getOriginalMessage() == null ? e.toString() : e.getOriginalMessage();
    what = what.lines().findFirst().orElse(what);
    var at = e.getLocation();
    String where =
        at == null || at.getLineNr() < 0
            ? ""
            : String.format(" (line %d, column %d)", at.getLineNr(), at.getColumnNr());
    if (e instanceof com.fasterxml.jackson.databind.JsonMappingException m
        && !m.getPath().isEmpty()) {
      StringBuilder path = new StringBuilder();
      for (var ref : m.getPath()) {
        path.append(
            ref.getFieldName() != null ? "." + ref.getFieldName() : "[" + ref.getIndex() + "]");
      }
      where = " (at " + path.substring(path.charAt(0) == '.' ? 1 : 0) + ")";
    }
    return what + where;
  }
}
