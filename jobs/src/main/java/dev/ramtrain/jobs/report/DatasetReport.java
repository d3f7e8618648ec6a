package dev.ramtrain.jobs.report;

import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.etl.image.JpegRowDecoder;
import dev.ramtrain.etl.image.Region;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ShardBatch;
import dev.ramtrain.format.ShardFormatException;
import dev.ramtrain.format.ShardReader;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.arrow.memory.util.MemoryUtil;

/** A dataset's manifest summary and class histogram as text, and samples drawn from its shards. */
public final class DatasetReport {
  private DatasetReport() {}

  /**
   * What preprocessing did, one line each: the resize, colour and decoder, where the val split came
   * from, and the augmented copies made (none: no augmentation settings are shown).
   */
  static String transforms(Manifest m) {
    Map<String, Object> t = m.transforms();
    StringBuilder s = new StringBuilder();
    s.append(String.format("resize       %s, %s%n", t.get("resize"), t.get("color")));
    s.append(
        String.format(
            "decoder      %s, EXIF orientation %s%n",
            t.get("decoder"),
            // Datasets made before the setting kept the stored pixels.
            "apply".equals(t.get("exif-orientation")) ? "applied" : "ignored"));
    s.append(String.format("val split    %s%n", valOrigin(m)));
    if (!(t.get("augment") instanceof Map<?, ?> a)
        || !(a.get("copies") instanceof Number copies)
        || copies.intValue() == 0) {
      s.append("augmentation none (no augmented copies were made)\n");
      return s.toString();
    }
    s.append(
        String.format(
            "augmentation %d augmented %s per image%s: random-resized-crop scale %s ratio %s,"
                + " flip p=%s, rotation ±%s°, brightness %s, contrast %s, saturation %s%n",
            copies.intValue(),
            copies.intValue() == 1 ? "copy" : "copies",
            Boolean.TRUE.equals(a.get("keep-original")) ? " and the original" : "",
            a.get("scale"),
            a.get("ratio"),
            a.get("flip-probability"),
            a.get("rotation-degrees"),
            a.get("brightness"),
            a.get("contrast"),
            a.get("saturation")));
    return s.toString();
  }

  /**
   * Where the val split came from. Manifests written before ramtrain recorded it ("val") carry the
   * val-fraction setting even when the source had a split of its own (idx, cifar10), which they
   * then did not use.
   */
  private static String valOrigin(Manifest m) {
    Object recorded = m.transforms().get("val");
    if (recorded != null) {
      return String.valueOf(recorded);
    }
    if (Set.of("idx", "cifar10").contains(m.source().type())) {
      return "the source's own split";
    }
    Object fraction = m.transforms().get("val-fraction");
    return fraction instanceof Number f
        ? String.format(
            "%.0f%% of the inputs, chosen by a hash of each input's key", 100 * f.doubleValue())
        : "unknown";
  }

  public static String summary(Dataset dataset) {
    Manifest m = dataset.manifest();
    StringBuilder s = new StringBuilder();
    s.append(String.format("dataset      %s%n", dataset.location()));
    s.append(
        String.format("format       %s v%d (%s)%n", m.format(), m.formatVersion(), m.createdBy()));
    s.append(
        String.format(
            "images       %dx%dx%d uint8 %s, stored %s%n",
            m.image().height(),
            m.image().width(),
            m.image().channels(),
            m.image().layout(),
            m.image().store()
                + (m.transforms().get("jpeg-quality") == null
                    ? ""
                    : " (quality " + m.transforms().get("jpeg-quality") + ")")));
    s.append(String.format("source       %s %s%n", m.source().type(), m.source().path()));
    s.append(transforms(m));
    s.append(String.format("seed         %d%n", m.seed()));
    long bytes = 0;
    long rawBytes = 0;
    for (var e : new TreeMap<>(m.splits()).entrySet()) {
      Manifest.Split split = e.getValue();
      s.append(
          String.format(
              "split %-6s %,d rows in %d shards, %.1f MB%n",
              e.getKey(), split.rows(), split.shards().size(), split.bytes() / 1e6));
      bytes += split.bytes();
      rawBytes += split.rows() * m.image().shape().bytes();
    }
    // What the loader maps (and the page cache must hold for epochs not to read the disk again).
    s.append(
        Manifest.Image.STORE_RAW.equals(m.image().store())
            ? String.format(
                "memory       %.1f MB of shards to map (preprocess --store jpeg or auto keeps"
                    + " photos in a fraction of it)%n",
                bytes / 1e6)
            : String.format(
                "memory       %.1f MB of shards to map; as raw pixels %.1f MB (%.1fx)%n",
                bytes / 1e6, rawBytes / 1e6, rawBytes / (double) Math.max(1, bytes)));
    s.append(
        String.format(
            "rejects      %,d of %,d inputs%s%n",
            m.rejects().count(),
            m.rejects().inputs(),
            m.rejects().byReason().isEmpty() ? "" : " " + m.rejects().byReason()));
    s.append("classes (train / val):\n");
    long max = 1;
    for (Manifest.Split split : m.splits().values()) {
      for (long c : split.classCounts()) {
        max = Math.max(max, c);
      }
    }
    int nameWidth = m.classes().stream().mapToInt(String::length).max().orElse(5);
    for (int c = 0; c < m.classes().size(); c++) {
      long train = count(m, Manifest.TRAIN, c);
      long val = count(m, Manifest.VAL, c);
      int bar = (int) Math.round(40.0 * train / max);
      s.append(
          String.format(
              "  %-" + nameWidth + "s %8d %7d  %s%n",
              m.classes().get(c),
              train,
              val,
              "#".repeat(bar)));
    }
    return s.toString();
  }

  private static long count(Manifest m, String split, int c) {
    Manifest.Split s = m.splits().get(split);
    return s == null || s.classCounts().size() <= c ? 0 : s.classCounts().get(c);
  }

  /** One sample taken out of a shard. */
  public record Sample(byte[] pixels, int label, long id) {}

  /** {@code n} samples spread evenly over the split's rows, checking each shard read. */
  public static List<Sample> samples(Dataset dataset, String splitName, int n) throws IOException {
    Manifest.Split split = dataset.manifest().split(splitName);
    List<Sample> out = new ArrayList<>();
    if (split.rows() == 0 || n <= 0) {
      return out;
    }
    long step = Math.max(1, split.rows() / n);
    ByteBuffer scratch = ByteBuffer.allocateDirect(dataset.manifest().image().shape().bytes());
    long base = 0;
    long next = 0;
    for (Manifest.Shard shard : split.shards()) {
      if (out.size() >= n) {
        break;
      }
      if (next >= base + shard.rows()) {
        base += shard.rows();
        continue;
      }
      try (ShardReader reader = dataset.openShard(shard, true)) {
        long batchBase = base;
        for (int b = 0; b < reader.batchCount() && out.size() < n; b++) {
          try (ShardBatch batch = reader.batch(b)) {
            while (next < batchBase + batch.rowCount() && out.size() < n) {
              int row = (int) (next - batchBase);
              byte[] pixels = pixels(reader, batch, row, scratch);
              out.add(new Sample(pixels, batch.label(row), batch.id(row)));
              next += step;
            }
            batchBase += batch.rowCount();
          }
        }
      }
      base += shard.rows();
    }
    return out;
  }

  /** Row {@code row}'s pixels, its JPEG decoded (into {@code scratch}) as the loader decodes it. */
  private static byte[] pixels(ShardReader reader, ShardBatch batch, int row, ByteBuffer scratch)
      throws ShardFormatException {
    if (!batch.isJpeg(row)) {
      return batch.image(row);
    }
    decode(reader, batch, row, scratch);
    byte[] out = new byte[batch.shape().bytes()];
    scratch.get(0, out);
    return out;
  }

  /** Decodes row {@code row}'s JPEG into {@code scratch}; one that does not decode is named. */
  private static void decode(ShardReader reader, ShardBatch batch, int row, ByteBuffer scratch)
      throws ShardFormatException {
    ImageShape shape = batch.shape();
    String why =
        JpegRowDecoder.decode(
            batch.imageAddress(row),
            batch.imageLength(row),
            shape,
            1,
            new Region(0, 0, shape.width(), shape.height()),
            MemoryUtil.getByteBufferAddress(scratch));
    if (why != null) {
      throw new ShardFormatException(
          reader.name(), "sample " + batch.id(row) + " does not decode: " + why);
    }
  }

  /**
   * Opens every shard with its checksum checked (opening also checks its rows against the
   * manifest's) and decodes every JPEG row; returns the rows seen. The first sample that does not
   * decode fails it, named with its shard.
   */
  public static long verifyAll(Dataset dataset) throws IOException {
    ByteBuffer scratch = ByteBuffer.allocateDirect(dataset.manifest().image().shape().bytes());
    long rows = 0;
    for (Manifest.Split split : dataset.manifest().splits().values()) {
      for (Manifest.Shard shard : split.shards()) {
        try (ShardReader reader = dataset.openShard(shard, true)) {
          rows += reader.rowCount();
          if (reader.schema().encoded()) {
            decodeAll(reader, scratch);
          }
        }
      }
    }
    return rows;
  }

  private static void decodeAll(ShardReader reader, ByteBuffer scratch)
      throws ShardFormatException {
    for (int b = 0; b < reader.batchCount(); b++) {
      try (ShardBatch batch = reader.batch(b)) {
        for (int row = 0; row < batch.rowCount(); row++) {
          if (batch.isJpeg(row)) {
            decode(reader, batch, row, scratch);
          }
        }
      }
    }
  }
}
