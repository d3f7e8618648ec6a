package dev.ramtrain.etl.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.etl.TestSpark;
import dev.ramtrain.etl.dataset.DatasetCommitter;
import dev.ramtrain.etl.dataset.DatasetLayout;
import dev.ramtrain.etl.image.Augmentation;
import dev.ramtrain.etl.image.ImageStorage;
import dev.ramtrain.etl.source.ImageFolderSource;
import dev.ramtrain.etl.source.ImageSource;
import dev.ramtrain.etl.source.RawSample;
import dev.ramtrain.etl.source.SyntheticImages;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ShardFormatException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PreprocessJobTest {
  static final ImageShape SHAPE = new ImageShape(24, 24, 3);
  @TempDir static Path shared;
  @TempDir Path tmp;
  static Path images;

  @BeforeAll
  static void generate() throws IOException {
    images = shared.resolve("images");
    new SyntheticImages(4, 15, 40, 32, 0.5, 5).writeTo(images);
  }

  /** A copy of the generated images under {@code root}. */
  private static Path copyOfImages(Path root) throws IOException {
    for (Path f : Files.walk(images).filter(Files::isRegularFile).toList()) {
      Path target = root.resolve(images.relativize(f));
      Files.createDirectories(target.getParent());
      Files.copy(f, target);
    }
    return root;
  }

  /** A copy of the generated images plus one file of every kind of bad input. */
  private Path imagesWithBadFiles() throws IOException {
    Path root = copyOfImages(tmp.resolve("dirty"));
    Path circle = root.resolve("circle");
    byte[] jpeg =
        Files.readAllBytes(
            Files.list(circle)
                .filter(p -> p.toString().endsWith(".jpg"))
                .findFirst()
                .orElseThrow());
    Files.write(circle.resolve("empty.jpg"), new byte[0]);
    Files.write(circle.resolve("truncated.jpg"), Arrays.copyOf(jpeg, jpeg.length / 2));
    Files.writeString(circle.resolve("notes.png"), "not an image at all");
    Files.writeString(circle.resolve("README.txt"), "ignored: not an image extension");
    return root;
  }

  @Test
  void commitsADatasetAndListsEveryRejectedFile() throws Exception {
    Path out = tmp.resolve("out");
    var result =
        Preprocessing.run(
            new ImageFolderSource(imagesWithBadFiles().toString()),
            Preprocessing.options(
                SHAPE, Augmentation.NONE, PreprocessSpec.Output.OFFLINE, out, 0.1));
    Manifest m = result.manifest();
    assertEquals(List.of("circle", "square", "star", "triangle"), m.classes());
    assertEquals(63, m.rejects().inputs());
    assertEquals(3, m.rejects().count());
    assertEquals(
        Map.of("EMPTY_FILE", 1L, "TRUNCATED", 1L, "NOT_AN_IMAGE", 1L), m.rejects().byReason());
    assertEquals(60, m.split(Manifest.TRAIN).rows() + m.split(Manifest.VAL).rows());
    assertTrue(
        m.split(Manifest.TRAIN).shards().size() > 1, "small target bytes make several shards");
    assertEquals(
        15,
        m.split(Manifest.TRAIN).classCounts().get(0) + m.split(Manifest.VAL).classCounts().get(0));

    assertEquals("v0001/" + DatasetLayout.REJECTS, m.rejects().file());
    List<String> rejects = Files.readAllLines(out.resolve(m.rejects().file()));
    assertEquals(3, rejects.size());
    assertTrue(
        rejects.stream()
            .anyMatch(l -> l.contains("circle/truncated.jpg") && l.contains("TRUNCATED")),
        rejects.toString());
    assertTrue(
        rejects.stream().anyMatch(l -> l.contains("circle/empty.jpg") && l.contains("EMPTY_FILE")));
    assertFalse(Files.exists(out.resolve(DatasetLayout.STAGING)), "staging is cleaned up");

    var dataset = Preprocessing.open(out);
    assertEquals(m, dataset.manifest());
    assertEquals(
        m.split(Manifest.TRAIN).rows(), Preprocessing.rows(dataset, Manifest.TRAIN).size());
  }

  @Test
  void filesTravelAsReferencesAndTheRunSaysWhereItsTimeWent() throws Exception {
    long inputBytes = 0;
    for (Path f : Files.walk(images).filter(Files::isRegularFile).toList()) {
      inputBytes += Files.size(f);
    }
    var result =
        Preprocessing.run(
            new ImageFolderSource(images.toString()),
            Preprocessing.options(
                SHAPE, Augmentation.NONE, PreprocessSpec.Output.OFFLINE, tmp.resolve("out"), 0));
    PreprocessTiming timing = result.timing();
    String described = timing.describe();
    // The driver placed the listed files into shards: one stage reads, decodes and writes them.
    assertEquals(1, timing.stages().size(), described);
    PreprocessTiming.Stage stage = timing.stages().get(0);
    assertEquals(0, stage.shuffleWriteBytes() + stage.shuffleReadBytes(), described);
    Manifest m = result.manifest();
    assertTrue(
        stage.tasks()
            >= m.split(Manifest.TRAIN).shards().size() + m.split(Manifest.VAL).shards().size(),
        described);
    assertTrue(
        timing.readSeconds() > 0 && timing.decodeSeconds() > 0 && timing.writeSeconds() > 0,
        described);
    assertTrue(stage.task() >= timing.decodeSeconds(), described);

    // A source only executors can enumerate is slotted and shuffled: references, not images.
    var shuffledRun =
        Preprocessing.run(
            new ShuffledSource(images.toString()),
            Preprocessing.options(
                SHAPE, Augmentation.NONE, PreprocessSpec.Output.OFFLINE, tmp.resolve("sh"), 0));
    PreprocessTiming t2 = shuffledRun.timing();
    assertEquals(2, t2.stages().size(), t2.describe());
    long shuffled = t2.stages().get(0).shuffleWriteBytes();
    assertTrue(
        shuffled > 0 && shuffled < inputBytes / 3,
        shuffled + " bytes shuffled for " + inputBytes + " bytes of images: " + t2.describe());
    assertEquals(shuffled, t2.stages().get(1).shuffleReadBytes(), t2.describe());
    assertTrue(timing.totalSeconds() >= timing.jobSeconds(), described);
  }

  @Test
  void aFileGoneSinceTheListingIsRejectedByName() throws Exception {
    Path root = copyOfImages(tmp.resolve("copy"));
    ImageFolderSource source = new ImageFolderSource(root.toString());
    source.countBySplit(TestSpark.session(), 0.25); // the driver's listing, which the job reuses
    Path gone = Files.list(root.resolve("star")).sorted().findFirst().orElseThrow();
    Files.delete(gone);

    Path out = tmp.resolve("out");
    Manifest m =
        Preprocessing.run(
                source,
                Preprocessing.options(
                    SHAPE, Augmentation.NONE, PreprocessSpec.Output.OFFLINE, out, 0.1))
            .manifest();
    assertEquals(Map.of("UNREADABLE", 1L), m.rejects().byReason());
    assertEquals(59, m.split(Manifest.TRAIN).rows() + m.split(Manifest.VAL).rows());
    String reject = Files.readAllLines(out.resolve(m.rejects().file())).get(0);
    assertTrue(reject.contains("star/" + gone.getFileName()), reject);
  }

  @Test
  void sameSeedGivesByteIdenticalShardsWhateverThePartitioning() throws Exception {
    Augmentation aug = new Augmentation(2, true, 0.3, 1.0, 0.75, 1.33, 0.5, 10, 0.2, 0.2, 0.2);
    Path few = tmp.resolve("few");
    Path many = tmp.resolve("many");
    Preprocessing.run(
        new RepartitionedSource(images.toString(), 1),
        Preprocessing.options(SHAPE, aug, PreprocessSpec.Output.OFFLINE, few, 0));
    Preprocessing.run(
        new RepartitionedSource(images.toString(), 13),
        Preprocessing.options(SHAPE, aug, PreprocessSpec.Output.OFFLINE, many, 0));
    // The folder source itself: its listing is placed into shards by the driver, no shuffle.
    Path placed = tmp.resolve("placed");
    Preprocessing.run(
        new ImageFolderSource(images.toString()),
        Preprocessing.options(SHAPE, aug, PreprocessSpec.Output.OFFLINE, placed, 0));
    Manifest m = Preprocessing.open(few).manifest();
    assertEquals(m, Preprocessing.open(many).manifest());
    assertEquals(m, Preprocessing.open(placed).manifest());
    assertEquals(
        180,
        m.split(Manifest.TRAIN).rows() + m.split(Manifest.VAL).rows(),
        "60 samples, original + 2 copies");
    for (Manifest.Split split : m.splits().values()) {
      for (Manifest.Shard shard : split.shards()) {
        assertArrayEquals(
            Files.readAllBytes(few.resolve(shard.file())),
            Files.readAllBytes(many.resolve(shard.file())),
            shard.file());
        assertArrayEquals(
            Files.readAllBytes(few.resolve(shard.file())),
            Files.readAllBytes(placed.resolve(shard.file())),
            shard.file());
      }
    }
  }

  @Test
  void memoryModeHoldsTheSameShardsAsOfflineMode() throws Exception {
    Path out = tmp.resolve("offline");
    var offline =
        Preprocessing.run(
            new ImageFolderSource(images.toString()),
            Preprocessing.options(SHAPE, Augmentation.NONE, PreprocessSpec.Output.OFFLINE, out, 0));
    var memory =
        Preprocessing.run(
            new ImageFolderSource(images.toString()),
            Preprocessing.options(SHAPE, Augmentation.NONE, PreprocessSpec.Output.MEMORY, null, 0));
    try (InMemoryShards shards = memory.inMemory()) {
      assertEquals(offline.manifest().splits(), memory.manifest().inFolder("v0001").splits());
      List<ShardResult> blocks = shards.blocks().collect();
      long rows = 0;
      for (ShardResult block : blocks) {
        if (block.stats().rows() == 0) {
          continue;
        }
        byte[] file =
            Files.readAllBytes(
                out.resolve("v0001/" + DatasetLayout.shardFile(block.split(), block.shard())));
        assertArrayEquals(file, block.bytes());
        try (var reader = InMemoryShards.open(block)) {
          rows += reader.rowCount();
        }
      }
      assertEquals(60, rows);
    }
  }

  @Test
  void tooManyRejectsFailsTheJobAndWritesNothing() throws Exception {
    Path out = tmp.resolve("out");
    var e =
        assertThrows(
            PreprocessException.class,
            () ->
                Preprocessing.run(
                    new ImageFolderSource(imagesWithBadFiles().toString()),
                    Preprocessing.options(
                        SHAPE, Augmentation.NONE, PreprocessSpec.Output.OFFLINE, out, 0.01)));
    assertTrue(e.getMessage().contains("3 of 63 inputs"), e.getMessage());
    assertTrue(e.getMessage().contains("max-reject-fraction"), e.getMessage());
    assertTrue(e.getMessage().contains("truncated.jpg"), e.getMessage());
    assertFalse(Files.exists(out), "the output folder this run created is removed again");
  }

  @Test
  void aFailedOrKilledRunLeavesNoDatasetAndARerunSucceeds() throws Exception {
    Path out = tmp.resolve("out");
    var options =
        Preprocessing.options(SHAPE, Augmentation.NONE, PreprocessSpec.Output.OFFLINE, out, 0);
    // A task that dies in the middle of the job: its staging goes, and the folder it created.
    assertThrows(
        Exception.class,
        () -> Preprocessing.run(new FailingSource(images.toString(), "star/"), options));
    assertFalse(Files.exists(out));

    // What a kill -9 leaves: a staged run and a version folder moved into place, no manifest.
    Files.createDirectories(out.resolve("_staging/dead-run/train"));
    Files.writeString(out.resolve("_staging/dead-run/" + DatasetLayout.RUN_MARKER), "{}");
    Files.writeString(out.resolve("_staging/dead-run/train/part-00000.arrow"), "half a shard");
    Files.createDirectories(out.resolve("v0001/train"));
    Files.writeString(out.resolve("v0001/" + DatasetLayout.RUN_MARKER), "{}");
    Files.writeString(out.resolve("v0001/train/part-00007.arrow"), "moved but never committed");
    var e = assertThrows(ShardFormatException.class, () -> Preprocessing.open(out));
    assertTrue(e.getMessage().contains("never committed"), e.getMessage());

    Preprocessing.run(new ImageFolderSource(images.toString()), options);
    var dataset = Preprocessing.open(out);
    assertEquals(
        60,
        dataset.manifest().split(Manifest.TRAIN).rows()
            + dataset.manifest().split(Manifest.VAL).rows());
    assertFalse(Files.exists(out.resolve("_staging")));
    assertFalse(
        Files.exists(out.resolve("v0001/train/part-00007.arrow")),
        "leftovers of the dead run are gone");
    assertTrue(
        dataset.manifest().files().stream().allMatch(f -> f.startsWith("v0001/")),
        "the dead run's version number is reused once its folder is gone");
  }

  @Test
  void aCommittedDatasetIsReplacedOnlyWhenAsked() throws Exception {
    Path out = tmp.resolve("out");
    var options =
        Preprocessing.options(SHAPE, Augmentation.NONE, PreprocessSpec.Output.OFFLINE, out, 0);
    Preprocessing.run(new ImageFolderSource(images.toString()), options);
    var e =
        assertThrows(
            DatasetCommitter.DatasetExistsException.class,
            () -> Preprocessing.run(new ImageFolderSource(images.toString()), options));
    assertTrue(e.getMessage().contains("overwrite"), e.getMessage());
    var overwrite =
        new PreprocessSpec(
            options.transform(),
            options.decoder(),
            options.maxPixels(),
            options.maxFileBytes(),
            options.valFraction(),
            options.seed(),
            options.shardTargetBytes(),
            options.batchTargetBytes(),
            1,
            1,
            options.maxRejectFraction(),
            options.output(),
            options.outputPath(),
            true,
            options.directIo(),
            options.exifOrientation(),
            ImageStorage.RAW);
    Preprocessing.run(new ImageFolderSource(images.toString()), overwrite);
    Manifest m = Preprocessing.open(out).manifest();
    assertEquals(1, m.split(Manifest.TRAIN).shards().size());
    try (var files = Files.list(out.resolve("v0002/train"))) {
      assertEquals(1, files.count());
    }
    assertFalse(Files.exists(out.resolve("v0001")), "the old version is gone");
  }

  @Test
  void rejectsFileIsJsonLines() throws Exception {
    Path out = tmp.resolve("out");
    var result =
        Preprocessing.run(
            new ImageFolderSource(imagesWithBadFiles().toString()),
            Preprocessing.options(
                SHAPE, Augmentation.NONE, PreprocessSpec.Output.OFFLINE, out, 0.5));
    var json = new com.fasterxml.jackson.databind.ObjectMapper();
    for (String line :
        Files.readAllLines(
            out.resolve(result.manifest().rejects().file()), StandardCharsets.UTF_8)) {
      var node = json.readTree(line);
      assertTrue(node.get("path").asText().startsWith(tmp.toString()), line);
      assertFalse(node.get("reason").asText().isEmpty());
      assertFalse(node.get("detail").asText().isEmpty());
    }
  }

  /** An image folder read into a given number of partitions, in a scrambled order. */
  static final class RepartitionedSource extends Delegating {
    private final int partitions;

    RepartitionedSource(String root, int partitions) {
      super(root);
      this.partitions = partitions;
    }

    @Override
    public JavaRDD<RawSample> samples(SparkSession spark, List<String> classes) throws IOException {
      return inner
          .samples(spark, classes)
          .sortBy(s -> s.key().hashCode() * 31 + partitions, partitions % 2 == 0, partitions);
    }
  }

  /** An image folder whose reading fails for one class: a task that dies mid-job. */
  static final class FailingSource extends Delegating {
    private final String failingPrefix;

    FailingSource(String root, String failingPrefix) {
      super(root);
      this.failingPrefix = failingPrefix;
    }

    @Override
    public JavaRDD<RawSample> samples(SparkSession spark, List<String> classes) throws IOException {
      String prefix = failingPrefix;
      return inner
          .samples(spark, classes)
          .map(
              s -> {
                if (s.key().startsWith(prefix)) {
                  throw new IOException("disk died while reading " + s.key());
                }
                return s;
              });
    }
  }

  /** An image folder source with its sample reading open to change. */
  /** The folder's samples as an RDD only: the job slots and shuffles them. */
  static final class ShuffledSource extends Delegating {
    ShuffledSource(String root) {
      super(root);
    }

    @Override
    public JavaRDD<RawSample> samples(SparkSession spark, List<String> classes) throws IOException {
      return inner.samples(spark, classes);
    }
  }

  abstract static class Delegating implements ImageSource {
    final ImageFolderSource inner;

    Delegating(String root) {
      this.inner = new ImageFolderSource(root);
    }

    @Override
    public String type() {
      return inner.type();
    }

    @Override
    public String path() {
      return inner.path();
    }

    @Override
    public Map<String, String> options() {
      return inner.options();
    }

    @Override
    public List<String> classes(SparkSession spark) throws IOException {
      return inner.classes(spark);
    }

    @Override
    public Map<String, Long> countBySplit(SparkSession spark, double valFraction)
        throws IOException {
      return inner.countBySplit(spark, valFraction);
    }
  }
}
