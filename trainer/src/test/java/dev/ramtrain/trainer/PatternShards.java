package dev.ramtrain.trainer;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.ShardReader;
import dev.ramtrain.format.ShardSchema;
import dev.ramtrain.format.ShardWriter;
import dev.ramtrain.trainer.data.ShardSet;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;

/**
 * A small learnable dataset for training-loop tests: 8x8 grey images of horizontal stripes,
 * vertical stripes or a checkerboard, with noise.
 */
public final class PatternShards {
  public static final ImageShape SHAPE = new ImageShape(8, 8, 1);
  public static final List<String> CLASSES = List.of("rows", "columns", "checker");

  private PatternShards() {}

  /** Writes {@code count} images drawn from {@code seed} to {@code file} and opens them. */
  public static ShardSet write(Path file, int count, long seed) throws IOException {
    Random rng = new Random(seed);
    try (OutputStream out = Files.newOutputStream(file);
        ShardWriter w = new ShardWriter(new ShardSchema(SHAPE, CLASSES), out, 1 << 12)) {
      for (int i = 0; i < count; i++) {
        int label = i % 3;
        byte[] px = new byte[64];
        for (int y = 0; y < 8; y++) {
          for (int x = 0; x < 8; x++) {
            boolean on = label == 0 ? y % 2 == 0 : label == 1 ? x % 2 == 0 : (x + y) % 2 == 0;
            px[y * 8 + x] =
                (byte) Math.max(0, Math.min(255, (on ? 190 : 60) + rng.nextGaussian() * 40));
          }
        }
        w.append(seed * 100_000 + i, label, px);
      }
      w.finish();
    }
    return new ShardSet(SHAPE, CLASSES, List.of(ShardReader.open(file, null)));
  }
}
