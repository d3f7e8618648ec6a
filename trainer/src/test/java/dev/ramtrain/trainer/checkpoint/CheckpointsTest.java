package dev.ramtrain.trainer.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.nn.ParamSpec;
import dev.ramtrain.trainer.nn.Parameters;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CheckpointsTest {
  @TempDir Path tmp;

  private static Checkpoints.Snapshot snapshot() {
    return new Checkpoints.Snapshot(
        "mlp:2-1",
        List.of(
            new Safetensors.Tensor("fc1.weight", new long[] {1, 2}, new float[] {0.5f, -1f}),
            new Safetensors.Tensor("fc1.bias", new long[] {1}, new float[] {2f})),
        List.of(
            Safetensors.Values.of(new float[] {1, 2, 3}),
            Safetensors.Values.of(new float[] {4, 5, 6})),
        9);
  }

  @Test
  void theSameStateSavesToTheSameBytesWhateverTheOrderOfItsInfo() throws Exception {
    List<String> keys = List.of("zeta", "classes", "mean", "dataset", "image", "alpha", "resize");
    Map<String, Object> forward = new LinkedHashMap<>();
    keys.forEach(k -> forward.put(k, "value of " + k));
    Map<String, Object> backward = new LinkedHashMap<>();
    for (int i = keys.size() - 1; i >= 0; i--) {
      backward.put(keys.get(i), "value of " + keys.get(i));
    }
    Map<String, Object> hashed = new HashMap<>(256);
    hashed.putAll(forward);
    List<Path> saved = new ArrayList<>();
    for (Map<String, Object> info : List.of(forward, backward, hashed)) {
      saved.add(Checkpoints.save(tmp.resolve("run-" + saved.size()), 3, 42, snapshot(), info));
    }
    for (String file : List.of("model.safetensors", "optimizer.safetensors", "state.json")) {
      for (Path dir : saved) {
        assertArrayEquals(
            Files.readAllBytes(saved.get(0).resolve(file)),
            Files.readAllBytes(dir.resolve(file)),
            file);
      }
    }
    List<String> written = new ArrayList<>();
    for (String line : Files.readAllLines(saved.get(0).resolve("state.json"))) {
      if (line.startsWith("  \"")) {
        written.add(line.substring(3, line.indexOf('"', 3)));
      }
    }
    List<String> sorted = new ArrayList<>(written);
    sorted.sort(null);
    assertEquals(sorted, written, "state.json keys in a fixed (sorted) order");
    assertEquals(9, Checkpoints.loadLatest(tmp.resolve("run-0")).optimizerSteps());
  }

  /**
   * Restoring stages a few MiB at a time: a tensor larger than the staging buffer arrives in
   * pieces, each at its place in the slab, and the slab equals the one gathered on the heap.
   */
  @Test
  void restoringInPiecesFillsTheSlabAsGatheringDoes() {
    List<ParamSpec> specs =
        List.of(
            new ParamSpec("a", new int[] {7}, ParamSpec.Init.ZEROS, 1),
            new ParamSpec("b", new int[] {2, 5}, ParamSpec.Init.ZEROS, 1),
            new ParamSpec("c", new int[] {1}, ParamSpec.Init.ZEROS, 1));
    Map<String, Safetensors.Tensor> weights = new LinkedHashMap<>();
    float v = 0;
    for (ParamSpec p : specs) {
      float[] values = new float[(int) p.count()];
      for (int i = 0; i < values.length; i++) {
        values[i] = ++v;
      }
      long[] shape = java.util.Arrays.stream(p.shape()).asLongStream().toArray();
      weights.put(p.name(), new Safetensors.Tensor(p.name(), shape, values));
    }
    Checkpoints.Loaded c = new Checkpoints.Loaded(tmp, Map.of(), weights, List.of());
    try (Backend b = new CpuBackend(1);
        Parameters params = Parameters.allocateForInference(b, specs, List.of())) {
      Stream s = b.createStream("s");
      // 12 bytes: three floats at a time, so "a" and "b" arrive in three and four pieces
      Checkpoints.uploadTensors(b, s, params.values(), c, params.entries(), 12);
      assertArrayEquals(
          Checkpoints.gather(c, params.entries(), params.count()),
          Checkpoints.download(b, s, params.values()));
    }
  }

  /**
   * A loaded checkpoint leaves its weights and optimizer state in its files: they are checked, put
   * into a host slab and uploaded (a rank's share) from the file a piece at a time, a tensor longer
   * than one piece included, and read into memory for a copy whose files go away.
   */
  @Test
  void aLoadedCheckpointIsReadFromItsFilesAPieceAtATime() throws Exception {
    int n = (1 << 20) + 3; // one piece of the finiteness check and three values more
    float[] big = new float[n];
    float[] state = new float[n];
    for (int i = 0; i < n; i++) {
      big[i] = i * 0.25f - 9;
      state[i] = -i;
    }
    List<ParamSpec> specs =
        List.of(
            new ParamSpec("fc1.bias", new int[] {1}, ParamSpec.Init.ZEROS, 1),
            new ParamSpec("fc1.weight", new int[] {n}, ParamSpec.Init.ZEROS, 1));
    Checkpoints.Snapshot snap =
        new Checkpoints.Snapshot(
            "mlp:test",
            List.of(
                new Safetensors.Tensor("fc1.bias", new long[] {1}, new float[] {7}),
                new Safetensors.Tensor("fc1.weight", new long[] {n}, big)),
            List.of(Safetensors.Values.of(state)),
            3);
    Path dir = Checkpoints.save(tmp.resolve("run"), 1, 3, snap, Map.of());
    Checkpoints.Loaded c = Checkpoints.load(dir);
    try (Backend b = new CpuBackend(1);
        Parameters params = Parameters.allocateForInference(b, specs, List.of());
        var host = b.allocateHost("masters", 4L * (n + 1));
        var share = b.allocate("share", dev.ramtrain.trainer.backend.DType.F32, n - 5)) {
      Checkpoints.requireTensors(c, params.entries());
      Checkpoints.fill(c, params.entries(), host);
      float[] filled = new float[n + 1];
      host.getFloats(0, filled, 0, n + 1);
      assertArrayEquals(Checkpoints.gather(c.inMemory(), params.entries(), n + 1), filled);
      assertEquals(7f, filled[(int) params.entries().get(0).offset()]);
      Stream s = b.createStream("s");
      Checkpoints.upload(b, s, share, c.optimizerState().get(0), 5);
      assertArrayEquals(
          java.util.Arrays.copyOfRange(state, 5, n), Checkpoints.download(b, s, share));
      var beyond =
          assertThrows(
              IllegalArgumentException.class,
              () -> Checkpoints.upload(b, s, share, c.optimizerState().get(0), 6));
      assertTrue(beyond.getMessage().contains("share takes values [6, "), beyond.getMessage());
      Checkpoints.Loaded copy = c.inMemory();
      big[n - 2] = Float.NaN; // in the second piece the check reads
      Safetensors.write(dir.resolve("model.safetensors"), snap.weights(), Map.of());
      var e =
          assertThrows(
              IllegalArgumentException.class,
              () -> Checkpoints.requireTensors(Checkpoints.load(dir), params.entries()));
      assertTrue(
          e.getMessage().contains("fc1.weight holds NaN at [" + (n - 2) + "]"), e.getMessage());
      for (String file : List.of("model.safetensors", "optimizer.safetensors")) {
        Files.delete(dir.resolve(file));
      }
      assertEquals(-(n - 1), copy.optimizerState().get(0).toArray()[n - 1]);
      assertEquals(-9f + (n - 2) * 0.25f, copy.weights().get("fc1.weight").values()[n - 2]);
    }
  }

  @Test
  void aDamagedStateOrLatestPointerIsRefusedNamingTheFile() throws Exception {
    Path run = tmp.resolve("run");
    Path dir = Checkpoints.save(run, 1, 10, snapshot(), Map.of());
    Files.writeString(
        dir.resolve("state.json"), "{\"epochs_done\": \"one\", \"model\": \"mlp:2-1\"}");
    var e = assertThrows(IOException.class, () -> Checkpoints.loadLatest(run));
    assertTrue(e.getMessage().contains("state.json: 'epochs_done'"), e.getMessage());
    Files.writeString(run.resolve("checkpoints/latest"), "../../../etc");
    e = assertThrows(IOException.class, () -> Checkpoints.loadLatest(run));
    assertTrue(e.getMessage().contains("not a checkpoint folder"), e.getMessage());
  }

  /**
   * A save that fails part way (here state.json, after both safetensors files: as a disk filling up
   * would) removes its staging folder: no half checkpoint is left, and latest is unchanged.
   */
  @Test
  void aFailedSaveLeavesNoStagingBehind(@TempDir Path run) throws Exception {
    Checkpoints.save(run, 1, 10, snapshot(), Map.of());
    Map<String, Object> unwritable = Map.of("what", new Object()); // JSON has no form for it
    assertThrows(IOException.class, () -> Checkpoints.save(run, 2, 20, snapshot(), unwritable));
    try (var entries = Files.list(run.resolve("checkpoints"))) {
      assertEquals(
          List.of("epoch-0001", "latest"),
          entries.map(p -> p.getFileName().toString()).sorted().toList());
    }
    assertEquals(1, Checkpoints.loadLatest(run).epochsDone());
  }

  @Test
  void aFullDiskIsReportedWithTheFileBeingWritten() throws Exception {
    Path full = Path.of("/dev/full"); // every write fails with ENOSPC, as on a full disk
    org.junit.jupiter.api.Assumptions.assumeTrue(Files.isWritable(full), "Linux's /dev/full");
    var e =
        assertThrows(
            IOException.class, () -> Safetensors.write(full, snapshot().weights(), Map.of()));
    assertEquals("No space left on device writing /dev/full", e.getMessage());
    try (var metrics = new dev.ramtrain.trainer.MetricsLog(full, true)) {
      var m =
          assertThrows(
              java.io.UncheckedIOException.class, () -> metrics.write(Map.of("type", "step")));
      assertEquals("No space left on device writing /dev/full", m.getCause().getMessage());
    }
  }

  /** The snapshot's tensors as a model of fc1.weight [1, 2] and fc1.bias [1] expects them. */
  private static void requireFits(Checkpoints.Loaded c) throws Exception {
    try (var backend = new dev.ramtrain.trainer.backend.cpu.CpuBackend(1);
        var p =
            dev.ramtrain.trainer.nn.Parameters.allocate(
                backend,
                List.of(
                    new dev.ramtrain.trainer.nn.ParamSpec(
                        "fc1.weight",
                        new int[] {1, 2},
                        dev.ramtrain.trainer.nn.ParamSpec.Init.ZEROS,
                        2),
                    new dev.ramtrain.trainer.nn.ParamSpec(
                        "fc1.bias",
                        new int[] {1},
                        dev.ramtrain.trainer.nn.ParamSpec.Init.ZEROS,
                        2)),
                List.of())) {
      Checkpoints.requireTensors(c, p.entries());
    }
  }

  /**
   * A checkpoint whose weights do not fit the model is refused, every difference named: a weight of
   * transposed shape (the same count), a missing and an extra tensor, a NaN; so are counters no run
   * reaches.
   */
  @Test
  void weightsThatDoNotFitTheModelAreRefusedNamingEachDifference() throws Exception {
    Path run = tmp.resolve("run");
    Path dir = Checkpoints.save(run, 1, 10, snapshot(), Map.of());
    requireFits(Checkpoints.load(dir)); // the saved weights fit
    Map<String, String> cases =
        Map.of(
            "transposed", "fc1.weight is [2, 1], the model's [1, 2]",
            "extra", "unexpected fc2.weight",
            "missing", "missing fc1.bias [1]",
            "nan", "fc1.weight holds NaN at [1]");
    for (var c : cases.entrySet()) {
      List<Safetensors.Tensor> tensors = new ArrayList<>();
      switch (c.getKey()) {
        case "transposed" -> {
          tensors.add(new Safetensors.Tensor("fc1.weight", new long[] {2, 1}, new float[] {1, 2}));
          tensors.add(new Safetensors.Tensor("fc1.bias", new long[] {1}, new float[] {0}));
        }
        case "extra" -> {
          tensors.addAll(snapshot().weights());
          tensors.add(new Safetensors.Tensor("fc2.weight", new long[] {1}, new float[] {0}));
        }
        case "missing" -> tensors.add(snapshot().weights().get(0));
        default -> {
          tensors.add(
              new Safetensors.Tensor("fc1.weight", new long[] {1, 2}, new float[] {1, Float.NaN}));
          tensors.add(new Safetensors.Tensor("fc1.bias", new long[] {1}, new float[] {0}));
        }
      }
      Safetensors.write(dir.resolve("model.safetensors"), tensors, Map.of("format", "pt"));
      var e =
          assertThrows(IllegalArgumentException.class, () -> requireFits(Checkpoints.load(dir)));
      assertTrue(
          e.getMessage().contains(dir.resolve("model.safetensors").toString()), e.getMessage());
      assertTrue(e.getMessage().contains(c.getValue()), c.getKey() + ": " + e.getMessage());
    }
    for (String count : List.of("9223372036854775000", "-1", "1.5", "1e300")) {
      String state = Files.readString(dir.resolve("state.json"));
      Files.writeString(
          dir.resolve("state.json"),
          state.replaceFirst("\"global_step\" : \\d+", "\"global_step\" : " + count));
      var e = assertThrows(IOException.class, () -> Checkpoints.load(dir), count);
      assertTrue(e.getMessage().contains("'global_step' is"), e.getMessage());
      Files.writeString(dir.resolve("state.json"), state);
    }
  }
}
