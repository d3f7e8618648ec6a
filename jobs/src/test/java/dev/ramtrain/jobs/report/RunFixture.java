package dev.ramtrain.jobs.report;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.jobs.train.RunJournal;
import dev.ramtrain.trainer.EvalResult;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A run directory as a finished training run leaves it, written by hand in the formats the trainer
 * writes (metrics.jsonl, checkpoints/latest and its state.json, report/evaluation.json): the report
 * is tested without training.
 */
final class RunFixture {
  static final List<String> CLASSES = List.of("cat", "dog", "bird");
  static final int STEPS_PER_EPOCH = 12;
  static final int LOG_EVERY = 5;
  private static final ObjectMapper JSON = new ObjectMapper();

  private RunFixture() {}

  /** The loss logged for {@code step}: a noisy decay, different per {@code lr}. */
  static double loss(int step, double lr) {
    return 2 * Math.exp(-step * lr * 10) + 0.05 * Math.sin(step * 1.7);
  }

  static Path write(Path dir, int epochs, double lr, boolean offloaded) throws IOException {
    Files.createDirectories(dir.resolve("report"));
    StringBuilder metrics = new StringBuilder();
    List<Double> pending = new ArrayList<>();
    int from = 0;
    int steps = epochs * STEPS_PER_EPOCH;
    for (int step = 0; step < steps; step++) {
      pending.add(loss(step, lr));
      if (step % LOG_EVERY == 0) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("type", "step");
        r.put("epoch", step / STEPS_PER_EPOCH + 1);
        r.put("step", step);
        r.put("loss", loss(step, lr));
        r.put("step_losses_from", from);
        r.put("step_losses", pending);
        r.put("loss_mean", pending.stream().mapToDouble(d -> d).average().orElseThrow());
        r.put("lr", lr);
        r.put("samples_per_s", 1000.0 + step);
        r.put("data_stall_ms", 0.5);
        r.put("peak_device_bytes", 3 << 20);
        r.put("heap_used_bytes", 50 << 20);
        if (offloaded) {
          r.put("h2d_bytes", 8 << 20);
          r.put("d2h_bytes", 4 << 20);
          r.put("copy_in_ms", 3.0);
          r.put("copy_out_ms", 1.5);
          r.put("compute_ms", 9.0);
          r.put("exposed_copy_ms", 0.4);
          r.put("overlap", 0.9);
          r.put("host_optimizer_ms", 2.0);
          r.put("optimizer_exposed_ms", 0.2);
          r.put("step_ms", 11.0);
          r.put("pinned_host_bytes", 16 << 20);
        }
        metrics.append(JSON.writeValueAsString(r)).append('\n');
        pending = new ArrayList<>();
        from = step + 1;
      }
      if ((step + 1) % STEPS_PER_EPOCH == 0) {
        int epoch = (step + 1) / STEPS_PER_EPOCH;
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("type", "epoch");
        r.put("epoch", epoch);
        r.put("step", step + 1);
        if (!pending.isEmpty()) {
          r.put("step_losses_from", from);
          r.put("step_losses", pending);
        }
        r.put("train_loss", loss(step, lr));
        r.put("train_acc", 0.5 + 0.1 * epoch);
        r.put("val_loss", loss(step, lr) + 0.1);
        r.put("val_acc", 0.45 + 0.1 * epoch);
        r.put("samples_per_s", 1500.0);
        r.put("seconds", 2.5);
        r.put("data_stall_pct", 1.5);
        r.put("best_epoch", Math.min(epoch, 2)); // val loss stops improving after epoch 2
        metrics.append(JSON.writeValueAsString(r)).append('\n');
        pending = new ArrayList<>();
        from = step + 1;
      }
    }
    Files.writeString(dir.resolve("metrics.jsonl"), metrics);
    String name = String.format("epoch-%04d", epochs);
    Path checkpoint = Files.createDirectories(dir.resolve("checkpoints").resolve(name));
    Map<String, Object> config = new TreeMap<>();
    config.put("ramtrain.train.epochs", String.valueOf(epochs)); // the default is 5
    config.put("ramtrain.train.lr", String.valueOf(lr));
    config.put("ramtrain.seed", "42"); // as the default
    Map<String, Object> state = new LinkedHashMap<>();
    state.put("epochs_done", epochs);
    state.put("global_step", steps);
    state.put("optimizer_steps", steps);
    state.put("model", "mlp:48-16-3");
    state.put("classes", CLASSES);
    state.put("image", List.of(4, 4, 3));
    state.put("mean", List.of(0.5, 0.5, 0.5));
    state.put("std", List.of(0.25, 0.25, 0.25));
    state.put("dataset", "/data/pets");
    state.put("data_fingerprint", "sha256:00");
    state.put("train_samples", 384);
    state.put("val_samples", 60);
    state.put("parameters", 835);
    state.put("config", config);
    state.put("build", Map.of("ramtrain", "0.1.0-SNAPSHOT", "commit", "abc123"));
    JSON.writeValue(checkpoint.resolve("state.json").toFile(), state);
    Files.writeString(dir.resolve("checkpoints/latest"), name);
    Evaluation.of("val", evaluation(), CLASSES).write(dir.resolve("report"));
    try (var walk = Files.walk(dir)) { // what a run records having written
      RunJournal.of(dir).record(walk.filter(Files::isRegularFile).toArray(Path[]::new));
    }
    return dir;
  }

  /** 60 val samples, 45 right; three mistakes with 4×4 RGB images. */
  static EvalResult evaluation() {
    long[][] confusion = {{18, 1, 1}, {2, 15, 3}, {4, 4, 12}};
    List<EvalResult.Mistake> mistakes = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      byte[] px = new byte[4 * 4 * 3];
      java.util.Arrays.fill(px, (byte) (60 * i + 30));
      mistakes.add(new EvalResult.Mistake(7 * i, i, (i + 1) % 3, 0.9f - 0.1f * i, 4, 4, 3, px));
    }
    return new EvalResult(0.7, 45 / 60.0, 60, confusion, mistakes);
  }
}
