package dev.ramtrain.etl.dataset;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ShardBatch;
import dev.ramtrain.format.ShardFixtures;
import dev.ramtrain.format.ShardFormatException;
import dev.ramtrain.format.ShardReader;
import dev.ramtrain.format.ShardSchema;
import dev.ramtrain.format.ShardStats;
import dev.ramtrain.format.ShardWriter;
import java.net.URI;
import java.nio.channels.WritableByteChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Commit and read through the Hadoop FileSystem API alone, on a filesystem that is not "file:" (so
 * no memory mapping): the path HDFS, S3A or GCS datasets take.
 */
public class NonLocalFileSystemTest {
  @TempDir Path tmp;

  /** Local files under another scheme: to ramtrain, a remote filesystem. */
  public static final class OtherFileSystem extends RawLocalFileSystem {
    @Override
    public URI getUri() {
      return URI.create("other:///");
    }

    @Override
    public String getScheme() {
      return "other";
    }
  }

  /** A Hadoop configuration in which {@code other://} paths are local files on another scheme. */
  public static Configuration conf() {
    Configuration conf = new Configuration(false);
    conf.setClass("fs.other.impl", OtherFileSystem.class, org.apache.hadoop.fs.FileSystem.class);
    conf.setBoolean("fs.other.impl.disable.cache", true);
    return conf;
  }

  @Test
  void commitAndReadOnAnotherFileSystem() throws Exception {
    String output = "other://" + tmp.resolve("ds");
    ShardSchema schema =
        new ShardSchema(new ImageShape(5, 7, 3), List.of("alpha", "beta", "gamma"));
    DatasetCommitter committer = DatasetCommitter.begin(output, null, false, conf());
    ShardStats stats;
    try (WritableByteChannel out = committer.staging(true).create(Manifest.TRAIN, 0);
        ShardWriter writer = new ShardWriter(schema, out, 105 * 4)) {
      for (int r = 0; r < 11; r++) {
        writer.append(ShardFixtures.id(r), ShardFixtures.label(r), ShardFixtures.pixels(r, 105));
      }
      stats = writer.finish();
    }
    assertFalse(
        Files.exists(tmp.resolve("ds/manifest.json")), "nothing is published before commit");
    Manifest.Shard shard = Manifest.Shard.of(DatasetLayout.shardFile(Manifest.TRAIN, 0), stats);
    Manifest manifest =
        new Manifest(
            Manifest.FORMAT,
            Manifest.VERSION,
            "test",
            Manifest.Image.of(schema.shape()),
            schema.classes(),
            Map.of(
                Manifest.TRAIN,
                new Manifest.Split(11, stats.bytes(), stats.classCounts(), List.of(shard))),
            new Manifest.Source("test", "nowhere", Map.of()),
            Map.of(),
            1,
            new Manifest.Rejects(0, 11, Map.of(), null));
    Manifest published = committer.commit(manifest, new byte[0]);
    committer.close();
    assertTrue(Files.exists(tmp.resolve("ds/manifest.json")));
    assertFalse(Files.exists(tmp.resolve("ds/_staging")));
    assertFalse(Files.exists(tmp.resolve("ds/" + DirectoryLock.FILE)), "the lock is released");

    Dataset dataset = Dataset.open(output, conf());
    assertEquals(published, dataset.manifest());
    assertEquals(manifest.inFolder("v0001"), published);
    Manifest.Shard stored = published.split(Manifest.TRAIN).shards().get(0);
    try (ShardReader reader = dataset.openShard(stored, true);
        ShardBatch batch = reader.batch(1)) {
      assertTrue(reader.name().startsWith("other:"), reader.name());
      assertEquals(11, reader.rowCount());
      assertArrayEquals(ShardFixtures.pixels(5, 105), batch.image(1));
    }

    // Streamed into memory the caller owns (a loader's window), the same rows, checked alike.
    java.nio.ByteBuffer slot = java.nio.ByteBuffer.allocateDirect((int) stored.bytes() + 64);
    try (ShardReader reader = dataset.readShard(stored, slot);
        ShardBatch batch = reader.batch(1)) {
      assertEquals(11, reader.rowCount());
      assertEquals(stored.bytes(), reader.bytes());
      assertArrayEquals(ShardFixtures.pixels(5, 105), batch.image(1));
    }
    assertThrows(
        IllegalArgumentException.class,
        () -> dataset.readShard(stored, java.nio.ByteBuffer.allocateDirect(16)));

    // A shard cut short after the commit is named, with both sizes.
    Path shardFile = tmp.resolve("ds/v0001/train/part-00000.arrow");
    byte[] whole = Files.readAllBytes(shardFile);
    Files.write(shardFile, java.util.Arrays.copyOf(whole, whole.length - 10));
    var cut = assertThrows(ShardFormatException.class, () -> dataset.openShard(stored, false));
    assertTrue(
        cut.getMessage().contains("truncated shard")
            && cut.getMessage().contains("the manifest says " + whole.length),
        cut.getMessage());
    Files.write(shardFile, whole);

    // A shard changed after the commit is caught by its checksum, named by its URI.
    byte[] bytes = Files.readAllBytes(tmp.resolve("ds/v0001/train/part-00000.arrow"));
    bytes[200] ^= 1;
    Files.write(tmp.resolve("ds/v0001/train/part-00000.arrow"), bytes);
    var e = assertThrows(ShardFormatException.class, () -> dataset.openShard(stored, true));
    assertTrue(
        e.getMessage().contains("other:") && e.getMessage().contains("checksum mismatch"),
        e.getMessage());
    var streamed = assertThrows(ShardFormatException.class, () -> dataset.readShard(stored, slot));
    assertTrue(streamed.getMessage().contains("checksum mismatch"), streamed.getMessage());
  }
}
