package dev.ramtrain.format;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * Damaged shards, read without their checksum (as a shard whose manifest was damaged alike would
 * be): every mutation is either refused with a {@link ShardFormatException} when the shard is
 * opened, or naming the file when a batch with a label outside the classes is loaded, or yields
 * batches whose every row lies inside the file's bytes. Never another exception, a crash, or a read
 * outside the file.
 */
class ShardFuzzTest {
  private static final byte[] SHARD = shard(ShardFixtures.SCHEMA);

  /** An encoded shard of pixel rows and stand-in JPEG rows of varying lengths. */
  private static final byte[] ENCODED =
      shard(
          new ShardSchema(
              ShardFixtures.SCHEMA.shape(),
              ShardFixtures.SCHEMA.classes(),
              ShardSchema.Storage.ENCODED));

  private static byte[] shard(ShardSchema schema) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    int bytes = schema.shape().bytes();
    try (ShardWriter writer = new ShardWriter(schema, out, bytes * 3L)) {
      for (int r = 0; r < 8; r++) {
        if (schema.encoded() && r % 2 == 1) {
          writer.appendJpeg(
              ShardFixtures.id(r), ShardFixtures.label(r), ShardFixtures.pixels(r, 10 + 17 * r));
        } else {
          writer.append(
              ShardFixtures.id(r), ShardFixtures.label(r), ShardFixtures.pixels(r, bytes));
        }
      }
      writer.finish();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  /** One change to a shard's bytes. */
  record Mutation(int kind, int position, int value) {
    byte[] apply(byte[] original) {
      byte[] b = original.clone();
      int at = Math.floorMod(position, b.length);
      switch (kind) {
        case 0 -> b[at] = (byte) value; // one byte
        case 1 -> { // a little-endian int: lengths, offsets, counts
          int aligned = Math.min(at & ~3, b.length - 4);
          ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putInt(aligned, value);
        }
        case 2 -> { // a long: block offsets, buffer offsets and lengths
          int aligned = Math.min(at & ~7, b.length - 8);
          ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putLong(aligned, (long) value << 3);
        }
        default -> { // cut short, keeping the magic at the end (a torn middle)
          byte[] cut = new byte[Math.max(16, at)];
          System.arraycopy(b, 0, cut, 0, Math.min(cut.length, b.length));
          System.arraycopy(b, b.length - 6, cut, cut.length - 6, 6);
          return cut;
        }
      }
      return b;
    }
  }

  @Provide
  Arbitrary<List<Mutation>> mutations() {
    Arbitrary<Integer> values =
        Arbitraries.oneOf(
            Arbitraries.integers(),
            Arbitraries.of(0, -1, 1, 8, 255, Integer.MAX_VALUE, Integer.MIN_VALUE, 1 << 20));
    Arbitrary<Mutation> one =
        Combinators.combine(
                Arbitraries.integers().between(0, 3),
                Arbitraries.integers().between(0, SHARD.length - 1),
                values)
            .as(Mutation::new);
    return one.list().ofMinSize(1).ofMaxSize(4);
  }

  @Property(tries = 1500)
  void aDamagedShardIsRefusedOrReadInsideItsBytes(@ForAll("mutations") List<Mutation> changes) {
    refusedOrReadInside(SHARD, changes);
  }

  /** The same for a shard of variable-length rows, whose offsets a mutation may also hit. */
  @Property(tries = 1500)
  void aDamagedEncodedShardIsRefusedOrReadInsideItsBytes(
      @ForAll("mutations") List<Mutation> changes) {
    refusedOrReadInside(ENCODED, changes);
  }

  private static void refusedOrReadInside(byte[] shard, List<Mutation> changes) {
    byte[] bytes = shard;
    for (Mutation m : changes) {
      bytes = m.apply(bytes);
    }
    ByteBuffer direct = ByteBuffer.allocateDirect(bytes.length);
    direct.put(bytes).flip();
    long base = MemoryUtil.getByteBufferAddress(direct);
    ShardReader reader;
    try {
      reader = ShardReader.open("fuzz.arrow", direct, null);
    } catch (ShardFormatException e) {
      assertTrue(e.getMessage().startsWith("fuzz.arrow: "), e.getMessage());
      return;
    }
    try (reader) {
      long rows = 0;
      for (int b = 0; b < reader.batchCount(); b++) {
        ShardBatch loaded;
        try {
          loaded = reader.batch(b);
        } catch (IllegalStateException e) { // refused when loaded (a bad label or encoding)
          assertTrue(e.getMessage().startsWith("fuzz.arrow: "), e.getMessage());
          return;
        }
        try (ShardBatch batch = loaded) {
          for (int r = 0; r < batch.rowCount(); r++) {
            long address = batch.imageAddress(r);
            int length = batch.imageLength(r);
            assertTrue(
                length >= 0 && address >= base && address + length <= base + bytes.length,
                "row " + r + " of batch " + b + " lies outside the file");
            batch.label(r);
            batch.id(r);
          }
          rows += batch.rowCount();
        }
      }
      assertTrue(rows == reader.rowCount(), "rows counted at open and read agree");
    }
  }
}
