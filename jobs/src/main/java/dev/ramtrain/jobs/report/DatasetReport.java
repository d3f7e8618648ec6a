package dev.ramtrain.jobs.report;

import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ShardBatch;
import dev.ramtrain.format.ShardReader;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;

/** A dataset's manifest summary and class histogram as text, and samples drawn from its shards. */
public final class DatasetReport {
  private DatasetReport() {}

  public static String summary(Dataset dataset) {
    Manifest m = dataset.manifest();
    StringBuilder s = new StringBuilder();
    s.append(String.format("dataset      %s%n", dataset.location()));
    s.append(
        String.format("format       %s v%d (%s)%n", m.format(), m.formatVersion(), m.createdBy()));
    s.append(
        String.format(
            "images       %dx%dx%d uint8 %s%n",
            m.image().height(), m.image().width(), m.image().channels(), m.image().layout()));
    s.append(String.format("source       %s %s%n", m.source().type(), m.source().path()));
    s.append(String.format("transforms   %s%n", m.transforms()));
    s.append(String.format("seed         %d%n", m.seed()));
    for (var e : new TreeMap<>(m.splits()).entrySet()) {
      Manifest.Split split = e.getValue();
      s.append(
          String.format(
              "split %-6s %,d rows in %d shards, %.1f MB%n",
              e.getKey(), split.rows(), split.shards().size(), split.bytes() / 1e6));
    }
    s.append(
        String.format(
            "rejects      %d of %d inputs %s%n",
            m.rejects().count(), m.rejects().inputs(), m.rejects().byReason()));
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
              out.add(new Sample(batch.image(row), batch.label(row), batch.id(row)));
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

  /**
   * Opens every shard with its checksum checked (opening also checks its rows against the
   * manifest's); returns the rows seen.
   */
  public static long verifyAll(Dataset dataset) throws IOException {
    long rows = 0;
    for (Manifest.Split split : dataset.manifest().splits().values()) {
      for (Manifest.Shard shard : split.shards()) {
        try (ShardReader reader = dataset.openShard(shard, true)) {
          rows += reader.rowCount();
        }
      }
    }
    return rows;
  }
}
