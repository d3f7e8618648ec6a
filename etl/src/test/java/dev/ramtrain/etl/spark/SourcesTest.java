package dev.ramtrain.etl.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import dev.ramtrain.etl.TestSpark;
import dev.ramtrain.etl.image.Augmentation;
import dev.ramtrain.etl.image.ImageDecoder;
import dev.ramtrain.etl.image.ImageStorage;
import dev.ramtrain.etl.image.ImageTransform;
import dev.ramtrain.etl.image.ResizeMode;
import dev.ramtrain.etl.source.CifarSource;
import dev.ramtrain.etl.source.IdxSource;
import dev.ramtrain.etl.source.SyntheticImages;
import dev.ramtrain.etl.source.TableSource;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ids.SampleIds;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.zip.GZIPOutputStream;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SourcesTest {
  @TempDir Path tmp;

  /** Same-size stretch without augmentation: raw pixels must come through unchanged. */
  private static PreprocessSpec identity(ImageShape shape, Path out) {
    return new PreprocessSpec(
        new ImageTransform(shape, ResizeMode.STRETCH, Augmentation.NONE),
        ImageDecoder.Kind.OPENCV,
        1L << 26,
        1L << 26,
        0.2,
        3,
        1 << 20,
        1 << 16,
        0,
        1,
        0,
        PreprocessSpec.Output.OFFLINE,
        out.toString(),
        false,
        true,
        true,
        ImageStorage.RAW);
  }

  private static byte[] pattern(int sample, int bytes) {
    byte[] b = new byte[bytes];
    for (int i = 0; i < bytes; i++) {
      b[i] = (byte) (sample * 13 + i * 5);
    }
    return b;
  }

  @Test
  void idxFilesKeepTheirOwnSplitAndPixels() throws Exception {
    Path dir = tmp.resolve("idx");
    Files.createDirectories(dir);
    writeIdx(dir, "train", 50, false);
    writeIdx(dir, "t10k", 20, true);
    Path out = tmp.resolve("out");
    Manifest m =
        Preprocessing.run(
                new IdxSource(dir.toString(), List.of()), identity(new ImageShape(8, 6, 1), out))
            .manifest();
    assertEquals(List.of("0", "1", "2", "3", "4", "5", "6"), m.classes());
    assertEquals(50, m.split(Manifest.TRAIN).rows());
    assertEquals(20, m.split(Manifest.VAL).rows());
    // The manifest records what was done: the source's own val split, no fraction taken, and no
    // augmentation settings for copies never made.
    assertEquals("the source's own split", m.transforms().get("val"));
    assertFalse(m.transforms().containsKey("val-fraction"), m.transforms().toString());
    assertFalse(m.transforms().containsKey("augment"), m.transforms().toString());
    var rows = Preprocessing.rows(Preprocessing.open(out), Manifest.VAL);
    for (int i = 0; i < 20; i++) {
      var row = rows.get(SampleIds.of("t10k-images-idx3-ubyte.gz#" + i));
      assertEquals(i % 7, row.label());
      assertArrayEquals(pattern(i, 48), row.pixels(), "sample " + i);
    }
  }

  private static void writeIdx(Path dir, String prefix, int n, boolean gzip) throws IOException {
    String suffix = gzip ? ".gz" : "";
    try (DataOutputStream images =
            new DataOutputStream(open(dir.resolve(prefix + "-images-idx3-ubyte" + suffix), gzip));
        DataOutputStream labels =
            new DataOutputStream(open(dir.resolve(prefix + "-labels-idx1-ubyte" + suffix), gzip))) {
      images.writeInt(0x803);
      images.writeInt(n);
      images.writeInt(8);
      images.writeInt(6);
      labels.writeInt(0x801);
      labels.writeInt(n);
      for (int i = 0; i < n; i++) {
        images.write(pattern(i, 48));
        labels.write(i % 7);
      }
    }
  }

  private static OutputStream open(Path file, boolean gzip) throws IOException {
    OutputStream out = Files.newOutputStream(file);
    return gzip ? new GZIPOutputStream(out) : out;
  }

  @Test
  void cifarPlanesBecomeInterleavedRgb() throws Exception {
    Path dir = tmp.resolve("cifar");
    Files.createDirectories(dir);
    writeCifar(dir.resolve("data_batch_1.bin"), 30, 0);
    writeCifar(dir.resolve("test_batch.bin"), 10, 100);
    Files.writeString(dir.resolve("batches.meta.txt"), "airplane\nautomobile\nbird\n\n");
    Path out = tmp.resolve("out");
    Manifest m =
        Preprocessing.run(new CifarSource(dir.toString()), identity(new ImageShape(32, 32, 3), out))
            .manifest();
    assertEquals(List.of("airplane", "automobile", "bird"), m.classes());
    assertEquals(30, m.split(Manifest.TRAIN).rows());
    assertEquals(10, m.split(Manifest.VAL).rows());
    var rows = Preprocessing.rows(Preprocessing.open(out), Manifest.TRAIN);
    var row = rows.get(SampleIds.of("data_batch_1.bin#4"));
    assertEquals(4 % 3, row.label());
    byte[] planes = pattern(4, 3072);
    for (int p = 0; p < 1024; p++) {
      assertEquals(planes[p], row.pixels()[3 * p], "R of pixel " + p);
      assertEquals(planes[1024 + p], row.pixels()[3 * p + 1], "G of pixel " + p);
      assertEquals(planes[2048 + p], row.pixels()[3 * p + 2], "B of pixel " + p);
    }
  }

  private static void writeCifar(Path file, int n, int offset) throws IOException {
    try (OutputStream out = Files.newOutputStream(file)) {
      for (int i = 0; i < n; i++) {
        out.write(i % 3);
        out.write(pattern(i + offset, 3072));
      }
    }
  }

  @Test
  void parquetTableWithStringLabels() throws Exception {
    Path images = tmp.resolve("images");
    new SyntheticImages(3, 6, 32, 32, 0.5, 9).writeTo(images);
    List<Row> rows = new ArrayList<>();
    try (var files = Files.walk(images)) {
      for (Path f : files.filter(Files::isRegularFile).sorted().toList()) {
        rows.add(
            RowFactory.create(
                images.relativize(f).toString(),
                Files.readAllBytes(f),
                "label-" + f.getParent().getFileName()));
      }
    }
    rows.add(RowFactory.create("no-label", rows.get(0).get(1), null));
    StructType schema =
        new StructType()
            .add("path", DataTypes.StringType)
            .add("jpeg", DataTypes.BinaryType)
            .add("kind", DataTypes.StringType);
    Path table = tmp.resolve("table.parquet");
    TestSpark.session()
        .createDataFrame(rows, schema)
        .repartition(3)
        .write()
        .parquet(table.toString());

    Path out = tmp.resolve("out");
    var options =
        Preprocessing.options(
            new ImageShape(16, 16, 3), Augmentation.NONE, PreprocessSpec.Output.OFFLINE, out, 0.1);
    Manifest m =
        Preprocessing.run(new TableSource(table.toString(), "jpeg", "kind", "path"), options)
            .manifest();
    assertEquals(List.of("label-circle", "label-square", "label-triangle"), m.classes());
    assertEquals(18, m.split(Manifest.TRAIN).rows() + m.split(Manifest.VAL).rows());
    assertEquals(Map.of("MISSING_LABEL", 1L), m.rejects().byReason());
  }
}
