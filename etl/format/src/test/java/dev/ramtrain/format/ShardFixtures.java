package dev.ramtrain.format;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/** Deterministic shards for tests: pixel (row, i) = (row * 31 + i * 7) mod 251. */
public final class ShardFixtures {
  public static final ShardSchema SCHEMA =
      new ShardSchema(new ImageShape(5, 7, 3), List.of("alpha", "beta", "gamma"));

  private ShardFixtures() {}

  public static byte[] pixels(int row, int bytes) {
    byte[] p = new byte[bytes];
    for (int i = 0; i < bytes; i++) {
      p[i] = (byte) ((row * 31 + i * 7) % 251);
    }
    return p;
  }

  public static int label(int row) {
    return row % 3;
  }

  public static long id(int row) {
    return 1_000_000_007L * row + 5;
  }

  /** Writes {@code rows} rows, {@code rowsPerBatch} per record batch; returns the stats. */
  public static ShardStats write(Path file, ShardSchema schema, int rows, int rowsPerBatch)
      throws IOException {
    int bytes = schema.shape().bytes();
    try (OutputStream out = Files.newOutputStream(file);
        ShardWriter writer = new ShardWriter(schema, out, (long) bytes * rowsPerBatch)) {
      for (int r = 0; r < rows; r++) {
        writer.append(id(r), label(r), pixels(r, bytes));
      }
      return writer.finish();
    }
  }
}
