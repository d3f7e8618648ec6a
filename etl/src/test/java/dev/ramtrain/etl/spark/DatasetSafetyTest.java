package dev.ramtrain.etl.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.etl.TestFiles;
import dev.ramtrain.etl.TestSpark;
import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.etl.dataset.DatasetCommitter;
import dev.ramtrain.etl.dataset.DatasetLayout;
import dev.ramtrain.etl.dataset.DirectoryLock;
import dev.ramtrain.etl.dataset.FullDiskFileSystem;
import dev.ramtrain.etl.dataset.VersionLease;
import dev.ramtrain.etl.image.Augmentation;
import dev.ramtrain.etl.source.ImageFolderSource;
import dev.ramtrain.etl.source.SyntheticImages;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.Manifest;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What preprocessing promises about the files around it: it deletes nothing it did not write, one
 * writer at a time, a replacement leaves the old version or the new one whole, and a failure leaves
 * nothing behind.
 */
class DatasetSafetyTest {
  static final ImageShape SHAPE = new ImageShape(16, 16, 3);
  @TempDir static Path shared;
  @TempDir Path tmp;
  static Path images;

  @BeforeAll
  static void generate() throws IOException {
    images = shared.resolve("images");
    new SyntheticImages(3, 8, 32, 32, 0.5, 3).writeTo(images);
  }

  private static PreprocessSpec options(Path out, boolean overwrite) {
    return Preprocessing.to(
        Preprocessing.options(SHAPE, Augmentation.NONE, PreprocessSpec.Output.OFFLINE, out, 0.2),
        out.toString(),
        overwrite);
  }

  private static Manifest preprocess(Path input, Path out, boolean overwrite) throws IOException {
    return Preprocessing.run(new ImageFolderSource(input.toString()), options(out, overwrite))
        .manifest();
  }

  @Test
  void aFolderOfSomeoneElsesFilesIsRefusedWhateverTheFlagsAndNothingIsDeleted() throws Exception {
    Path user = tmp.resolve("user");
    TestFiles.copyTree(images, user.resolve("train"));
    Files.createDirectories(user.resolve("val"));
    Files.writeString(user.resolve("rejects.jsonl"), "my own notes\n");
    Map<String, String> before = TestFiles.contents(user);
    for (boolean overwrite : new boolean[] {false, true}) {
      var e =
          assertThrows(
              DatasetCommitter.UnsafeOutputException.class,
              () -> preprocess(images, user, overwrite));
      assertTrue(e.getMessage().contains("holds no ramtrain dataset"), e.getMessage());
      assertEquals(before, TestFiles.contents(user), "overwrite=" + overwrite + " touched nothing");
    }
  }

  @Test
  void anOutputInsideTheInputOrAroundItIsRefused() throws Exception {
    Path dir = tmp.resolve("dir");
    TestFiles.copyTree(images, dir.resolve("train"));
    Map<String, String> before = TestFiles.contents(dir);
    var around =
        assertThrows(
            DatasetCommitter.UnsafeOutputException.class,
            () -> preprocess(dir.resolve("train"), dir, false));
    assertTrue(around.getMessage().contains("is inside ramtrain.etl.output"), around.getMessage());
    var inside =
        assertThrows(
            DatasetCommitter.UnsafeOutputException.class,
            () -> preprocess(dir, dir.resolve("train/out"), true));
    assertTrue(inside.getMessage().contains("is inside the input"), inside.getMessage());
    // A symbolic link does not hide the overlap.
    Path link = Files.createSymbolicLink(tmp.resolve("link"), dir);
    assertThrows(
        DatasetCommitter.UnsafeOutputException.class,
        () -> preprocess(dir.resolve("train"), link, false));
    assertEquals(before, TestFiles.contents(dir));
  }

  @Test
  void aSecondWriterFailsAtOnceNamingTheHolder() throws Exception {
    Path out = tmp.resolve("out");
    Files.createDirectories(out);
    try (DirectoryLock other =
        DirectoryLock.acquire(
            new org.apache.hadoop.fs.Path(out.toUri()), new Configuration(), "preprocess")) {
      var e =
          assertThrows(DirectoryLock.LockedException.class, () -> preprocess(images, out, false));
      assertTrue(e.getMessage().contains("pid " + ProcessHandle.current().pid()), e.getMessage());
      try (var files = Files.list(out)) {
        assertEquals(List.of(out.resolve(DirectoryLock.FILE)), files.toList());
      }
    }
    preprocess(images, out, false);
  }

  @Test
  void aReplacementKilledBeforeOrAfterItsCommitPointLeavesOneWholeVersion() throws Exception {
    Path out = tmp.resolve("out");
    Manifest v1 = preprocess(images, out, false);
    String v1Json = Files.readString(out.resolve(DatasetLayout.MANIFEST));
    List<String> v1Files = v1.files();

    // Killed before the commit point: v0002 moved into place and the old files journaled, but
    // the manifest still names v0001.
    TestFiles.copyTree(out.resolve("v0001"), out.resolve("v0002"));
    Files.createDirectories(out.resolve("_staging"));
    String journal = new com.fasterxml.jackson.databind.ObjectMapper().writeValueAsString(v1Files);
    Files.writeString(out.resolve("_staging/retire-dead.json"), journal);
    assertEquals(v1, Preprocessing.open(out).manifest(), "readers see the old version");
    Manifest replaced = preprocess(images, out, true);
    assertTrue(
        replaced.files().stream().allMatch(f -> f.startsWith("v0002/")),
        replaced.files().toString());
    assertFalse(Files.exists(out.resolve("v0001")));
    assertFalse(Files.exists(out.resolve("_staging")));

    // Killed after the commit point: the manifest names v0003, v0002's files are still there.
    String v3Json =
        Files.readString(out.resolve(DatasetLayout.MANIFEST)).replace("v0002/", "v0003/");
    TestFiles.copyTree(out.resolve("v0002"), out.resolve("v0003"));
    Files.writeString(out.resolve(DatasetLayout.MANIFEST), v3Json);
    Files.createDirectories(out.resolve("_staging"));
    Files.writeString(
        out.resolve("_staging/retire-dead.json"),
        new com.fasterxml.jackson.databind.ObjectMapper().writeValueAsString(replaced.files()));
    Manifest v3 = Preprocessing.open(out).manifest();
    assertEquals(
        Preprocessing.rows(Preprocessing.open(out), Manifest.TRAIN).size(),
        v3.split(Manifest.TRAIN).rows());
    Manifest v4 = preprocess(images, out, true);
    assertFalse(Files.exists(out.resolve("v0002")), "the journal's files were retired");
    assertFalse(Files.exists(out.resolve("v0003")), "the replaced version was retired");
    assertTrue(v4.files().stream().allMatch(f -> f.startsWith("v0004/")));
    assertTrue(v1Json.contains("v0001/"));
  }

  /**
   * A writer killed while journaling (CI's random kill once landed between the journal's create and
   * its write, and every later writer failed on the empty journal): the journal is renamed into
   * place whole, its unfinished temporary goes with the staging folder, and an empty journal left
   * by an older writer names nothing.
   */
  @Test
  void aReplacementKilledWhileJournalingLeavesTheOldVersionAndTheNextWriterGoesOn()
      throws Exception {
    Path out = tmp.resolve("out");
    Manifest v1 = preprocess(images, out, false);
    Files.createDirectories(out.resolve("_staging"));
    Files.writeString(out.resolve("_staging/retire-killed.json.partial"), "[\"v0001/tra");
    Files.writeString(out.resolve("_staging/retire-older.json"), "");
    Files.writeString(out.resolve("_staging/notes.txt"), "someone else's");
    assertEquals(v1, Preprocessing.open(out).manifest(), "readers see the old version");
    Manifest v2 = preprocess(images, out, true);
    assertTrue(v2.files().stream().allMatch(f -> f.startsWith("v0002/")), v2.files().toString());
    assertFalse(Files.exists(out.resolve("v0001")), "the replaced version was retired");
    try (Stream<Path> left = Files.list(out.resolve("_staging"))) {
      assertEquals(
          List.of("notes.txt"), left.map(p -> p.getFileName().toString()).toList(), "ours went");
    }
  }

  /**
   * A reader holding its version reads it whole through a replacement ({@code preprocess
   * --overwrite} deleted v0001 under a windowed training run, which died on a missing shard); the
   * version goes when its last reader closes, and a reader that is gone (its lease left by a killed
   * process) holds nothing.
   */
  @Test
  void aReplacementKeepsTheVersionItsReadersHoldUntilTheLastOneCloses() throws Exception {
    Path out = tmp.resolve("out");
    Manifest v1 = preprocess(images, out, false);
    List<List<Integer>> v1Labels = labels(Preprocessing.open(out), v1);
    Configuration conf = new Configuration();
    try (VersionLease first = VersionLease.take(out.toString(), conf, "train a");
        VersionLease second = VersionLease.take(out.toString(), conf, "train b")) {
      Manifest v2 = preprocess(images, out, true);
      assertTrue(v2.files().stream().allMatch(f -> f.startsWith("v0002/")));
      assertEquals(v1, first.dataset().manifest(), "the reader keeps the version it opened");
      assertEquals(v1Labels, labels(first.dataset(), v1), "and reads it whole");
      first.close();
      assertEquals(v1Labels, labels(second.dataset(), v1), "while one reader still holds it");
      assertTrue(Files.exists(out.resolve("v0001")));
    }
    assertFalse(Files.exists(out.resolve("v0001")), "the last reader's close removed it");
    assertFalse(Files.exists(out.resolve("_staging")));
    assertFalse(Files.exists(out.resolve(VersionLease.FOLDER)));

    // A lease whose process is gone (pid of a process that has ended) holds nothing.
    try (VersionLease killed = VersionLease.take(out.toString(), conf, "train c")) {
      Path lease;
      try (Stream<Path> leases = Files.list(out.resolve(VersionLease.FOLDER))) {
        lease = leases.findFirst().orElseThrow();
      }
      Process ended = new ProcessBuilder("true").start();
      ended.waitFor();
      // its lease now names a process that has ended: as if this reader had been killed
      Files.writeString(
          lease, Files.readString(lease).replaceFirst("\"pid\":\\d+", "\"pid\":" + ended.pid()));
      Path notes = out.resolve(VersionLease.FOLDER).resolve("notes.txt"); // not a lease
      Files.writeString(notes, "mine");
      preprocess(images, out, true);
      assertFalse(Files.exists(out.resolve("v0002")), "a dead reader's version was removed");
      assertFalse(Files.exists(lease), "and its lease");
      assertEquals("mine", Files.readString(notes), "a file that is no lease stays");
    }
  }

  /** Each shard's labels of {@code m}'s train split, read through {@code ds}. */
  private static List<List<Integer>> labels(Dataset ds, Manifest m) throws IOException {
    List<List<Integer>> labels = new java.util.ArrayList<>();
    for (Manifest.Shard shard : m.split(Manifest.TRAIN).shards()) {
      try (var reader = ds.openShard(shard, true)) {
        List<Integer> mine = new java.util.ArrayList<>();
        for (int b = 0; b < reader.batchCount(); b++) {
          try (var batch = reader.batch(b)) {
            for (int r = 0; r < batch.rowCount(); r++) {
              mine.add(batch.label(r));
            }
          }
        }
        labels.add(mine);
      }
    }
    return labels;
  }

  @Test
  void foldersRamtrainDidNotWriteSurviveAReplacement() throws Exception {
    Path out = tmp.resolve("out");
    preprocess(images, out, false);
    Files.createDirectories(out.resolve("v0007"));
    Files.writeString(out.resolve("v0007/notes.txt"), "mine");
    Files.writeString(out.resolve("README.md"), "about this dataset");
    Manifest m = preprocess(images, out, true);
    assertEquals("mine", Files.readString(out.resolve("v0007/notes.txt")));
    assertEquals("about this dataset", Files.readString(out.resolve("README.md")));
    assertTrue(m.files().get(0).startsWith("v0008/"), m.files().toString());
  }

  @Test
  void imagesOutsideAnyClassFolderAreRejectedAndListed() throws Exception {
    Path input = tmp.resolve("input");
    TestFiles.copyTree(images, input);
    Path stray =
        Files.list(input.resolve("circle"))
            .filter(p -> p.toString().endsWith(".png"))
            .findFirst()
            .orElseThrow();
    Files.copy(stray, input.resolve("stray.png"));
    Path out = tmp.resolve("out");
    Manifest m = preprocess(input, out, false);
    assertEquals(Map.of("MISSING_LABEL", 1L), m.rejects().byReason());
    assertEquals(25, m.rejects().inputs());
    String rejects = Files.readString(out.resolve(m.rejects().file()), StandardCharsets.UTF_8);
    assertTrue(
        rejects.contains("stray.png") && rejects.contains("not inside a class folder"), rejects);
  }

  @Test
  void aShardWhoseInputsWereAllRejectedLeavesNoFile() throws Exception {
    Path input = tmp.resolve("input");
    Files.createDirectories(input.resolve("only"));
    Path good =
        Files.list(images.resolve("circle"))
            .filter(p -> p.toString().endsWith(".png"))
            .findFirst()
            .orElseThrow();
    Files.copy(good, input.resolve("only/good.png"));
    for (int i = 0; i < 7; i++) {
      Files.writeString(input.resolve("only/bad" + i + ".png"), "not an image " + i);
    }
    Path out = tmp.resolve("out");
    PreprocessSpec o =
        Preprocessing.withShards(
            Preprocessing.options(
                SHAPE, Augmentation.NONE, PreprocessSpec.Output.OFFLINE, out, 1.0),
            4);
    Manifest m = Preprocessing.run(new ImageFolderSource(input.toString()), o).manifest();
    assertEquals(1, m.split(Manifest.TRAIN).shards().size());
    try (Stream<Path> walk = Files.walk(out.resolve("v0001"))) {
      List<String> shards =
          walk.filter(p -> p.toString().endsWith(".arrow"))
              .map(p -> out.relativize(p).toString())
              .toList();
      assertEquals(List.of(m.split(Manifest.TRAIN).shards().get(0).file()), shards);
    }
  }

  @Test
  void aFullDiskRemovesTheStagingAndNamesTheShard() throws Exception {
    Configuration hadoop = TestSpark.session().sparkContext().hadoopConfiguration();
    hadoop.setClass(
        "fs.fulldisk.impl", FullDiskFileSystem.class, org.apache.hadoop.fs.FileSystem.class);
    hadoop.setLong(FullDiskFileSystem.LIMIT, 3000);
    Path out = tmp.resolve("full");
    var e =
        assertThrows(
            Exception.class,
            () ->
                Preprocessing.run(
                    new ImageFolderSource(images.toString()),
                    Preprocessing.to(options(out, false), "fulldisk://" + out, false)));
    Throwable root = e;
    while (root.getCause() != null
        && !(root instanceof IOException && root.getMessage().contains(" writing "))) {
      root = root.getCause();
    }
    assertTrue(
        root.getMessage().startsWith("No space left on device writing fulldisk:")
            && root.getMessage().endsWith(".arrow"),
        root.getMessage());
    assertFalse(Files.exists(out), "staging, lock and the folder the run created are gone");
  }

  @Test
  void readersCheckWhatTheManifestSaysAgainstTheFilesBeforeUsingThem() throws Exception {
    Path out = tmp.resolve("out");
    Manifest m = preprocess(images, out, false);
    Manifest.Shard shard = m.split(Manifest.TRAIN).shards().get(0);

    // Counts that agree with each other but not with the file: refused when the shard is opened.
    var json = new com.fasterxml.jackson.databind.ObjectMapper();
    var tree =
        (com.fasterxml.jackson.databind.node.ObjectNode)
            json.readTree(out.resolve("manifest.json").toFile());
    var split = (com.fasterxml.jackson.databind.node.ObjectNode) tree.at("/splits/train");
    var first = (com.fasterxml.jackson.databind.node.ObjectNode) split.at("/shards/0");
    first.put("rows", shard.rows() + 1);
    ((com.fasterxml.jackson.databind.node.ArrayNode) first.get("classCounts"))
        .set(0, shard.classCounts().get(0) + 1);
    split.put("rows", m.split(Manifest.TRAIN).rows() + 1);
    ((com.fasterxml.jackson.databind.node.ArrayNode) split.get("classCounts"))
        .set(0, m.split(Manifest.TRAIN).classCounts().get(0) + 1);
    byte[] original = Files.readAllBytes(out.resolve("manifest.json"));
    Files.write(out.resolve("manifest.json"), json.writeValueAsBytes(tree));
    var dataset = Preprocessing.open(out);
    var e =
        assertThrows(
            dev.ramtrain.format.ShardFormatException.class,
            () ->
                dataset.openShard(dataset.manifest().split(Manifest.TRAIN).shards().get(0), false));
    assertTrue(
        e.getMessage()
            .contains(
                "shard holds " + shard.rows() + " rows, the manifest says " + (shard.rows() + 1)),
        e.getMessage());

    // A shard that is a symbolic link out of the dataset is refused before it is opened.
    Files.write(out.resolve("manifest.json"), original);
    Path outside = tmp.resolve("outside.arrow");
    Files.move(out.resolve(shard.file()), outside);
    Files.createSymbolicLink(out.resolve(shard.file()), outside);
    var linked = Preprocessing.open(out);
    var l =
        assertThrows(
            dev.ramtrain.format.ShardFormatException.class, () -> linked.openShard(shard, true));
    assertTrue(l.getMessage().contains("leads out of the dataset directory"), l.getMessage());
  }
}
