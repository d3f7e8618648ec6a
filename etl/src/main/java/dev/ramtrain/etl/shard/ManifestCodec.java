package dev.ramtrain.etl.shard;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.io.IOException;

/** Manifest JSON with the checks a reader needs before trusting it. */
public final class ManifestCodec {

  private static final ObjectMapper JSON =
      new ObjectMapper()
          .enable(SerializationFeature.INDENT_OUTPUT)
          .enable(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS)
          .disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);

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
    try {
      Manifest manifest = JSON.treeToValue(tree, Manifest.class);
      manifest.image().shape(); // checks the dimensions
      return manifest;
    } catch (JsonProcessingException | IllegalArgumentException e) {
      throw new ShardFormatException(file, "manifest is malformed: " + e.getMessage(), e);
    }
  }
}
