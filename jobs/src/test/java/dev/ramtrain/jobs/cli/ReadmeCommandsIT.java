package dev.ramtrain.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every command of the README's table and every flag its row shows, typed through bin/ramtrain as a
 * user types them (the launcher once took evaluate's and predict's documented {@code -c} for
 * spark-submit's {@code --conf}: a test calling Main directly never saw it). The rows are read from
 * the README itself, so a flag documented later is a failure here until some run below uses it.
 */
class ReadmeCommandsIT {
  private static final Path ROOT = Path.of(System.getProperty("ramtrain.repo.root"));
  private static final Pattern ROW = Pattern.compile("^\\| `([a-z]+)[^|]*\\|.*$");
  private static final Pattern CODE = Pattern.compile("`([^`]+)`");
  private static final Pattern FLAG = Pattern.compile("(?:^|[\\s/|(])(--?[a-z][a-z0-9-]*)");

  @TempDir Path tmp;
  private final Map<String, Set<String>> typed = new HashMap<>();

  private String run(String... args) throws Exception {
    LauncherIT.Result r = LauncherIT.launch(Map.of(), args);
    assertEquals(0, r.status(), String.join(" ", args) + "\n" + r.output());
    Set<String> flags = typed.computeIfAbsent(args[0], k -> new TreeSet<>());
    for (String a : args) {
      if (a.startsWith("-")) {
        flags.add(a);
      }
    }
    return r.output();
  }

  /**
   * The README's commands table: each command and the flags its row shows (a span that begins with
   * another command's name, {@code train --offload}, shows that command's flag).
   */
  private static Map<String, Set<String>> documented() throws Exception {
    Map<String, List<String>> spans = new TreeMap<>();
    boolean inTable = false;
    for (String line : Files.readAllLines(ROOT.resolve("README.md"))) {
      if (line.startsWith("#")) {
        inTable = line.equals("## Commands");
        continue;
      }
      Matcher row = ROW.matcher(line);
      if (!inTable || !row.matches()) {
        continue;
      }
      List<String> code = new ArrayList<>();
      Matcher span = CODE.matcher(line);
      while (span.find()) {
        code.add(span.group(1));
      }
      spans.put(row.group(1), code);
    }
    Map<String, Set<String>> rows = new TreeMap<>();
    spans.keySet().forEach(c -> rows.put(c, new LinkedHashSet<>()));
    spans.forEach(
        (command, code) -> {
          for (String span : code) {
            String first = span.split("\\s+")[0];
            String owner = rows.containsKey(first) ? first : command;
            Matcher flag = FLAG.matcher(span);
            while (flag.find()) {
              if (!flag.group(1).equals("--help")) {
                rows.get(owner).add(flag.group(1));
              }
            }
          }
        });
    return rows;
  }

  @Test
  void everyCommandAndFlagOfTheReadmeRunsThroughTheLauncher() throws Exception {
    Map<String, Set<String>> documented = documented();
    assertTrue(
        documented.keySet().containsAll(List.of("train", "predict", "evaluate")), "" + documented);
    Path images = tmp.resolve("images");
    Path ds = tmp.resolve("ds");
    Path run = tmp.resolve("run");
    Path conf = Files.writeString(tmp.resolve("my.conf"), "ramtrain.seed = 7\n");
    run("generate", "-o", images.toString(), "--classes", "3", "--images-per-class", "12");
    run(
        "preprocess",
        "-i",
        images.toString(),
        "-o",
        ds.toString(),
        "--height",
        "8",
        "--width",
        "8",
        "--color",
        "rgb",
        "--resize",
        "letterbox",
        "--copies",
        "1",
        "--val-fraction",
        "0.25",
        "--overwrite",
        "--config",
        conf.toString());
    run(
        "inspect",
        ds.toString(),
        "--samples",
        "4",
        "--sheet",
        tmp.resolve("sheet.png").toString(),
        "--verify-all");
    List<String> train =
        List.of(
            "train",
            "-d",
            ds.toString(),
            "--model",
            "mlp:192-16-3",
            "--lr",
            "0.01",
            "--optimizer",
            "adamw",
            "--weight-decay",
            "0.01",
            "--schedule",
            "cosine",
            "--clip-norm",
            "1",
            "--label-smoothing",
            "0.1",
            "--precision",
            "fp32",
            "--workers",
            "1",
            "--prefetch",
            "2",
            "--batch-size",
            "8",
            "--accumulate",
            "2",
            "--best-metric",
            "val-loss",
            "--early-stop-patience",
            "3",
            "--offload",
            "off",
            "--device-budget",
            "6GiB",
            "--set",
            "ramtrain.train.threads=1");
    run(with(train, "--output", run.toString(), "--epochs", "2"));
    run(with(train, "-o", run.toString(), "--epochs", "3", "--resume", "--resume-anyway"));
    run("report", run.toString());
    Path other = tmp.resolve("other");
    run(with(train, "-o", other.toString(), "--epochs", "1"));
    run("report", run.toString(), other.toString(), "-o", tmp.resolve("compare").toString());
    // -c is evaluate's and predict's own flag, whatever spark-submit calls -c.
    String evaluated =
        run(
            "evaluate",
            "-c",
            run.toString(),
            "-d",
            ds.toString(),
            "--split",
            "val",
            "--best",
            "--offload",
            "on",
            "-o",
            tmp.resolve("matrix.png").toString());
    assertTrue(evaluated.contains("accuracy"), evaluated);
    run(
        "predict",
        "-c",
        run.toString(),
        "--offload",
        "auto",
        "-o",
        tmp.resolve("p.csv").toString(),
        images.toString());
    assertTrue(Files.readAllLines(tmp.resolve("p.csv")).size() > 30);
    String planned = run("plan", "-c", run.toString(), "--device", "t4");
    assertTrue(planned.contains("placement"), planned);
    String inference = run("plan", "-c", run.toString(), "--inference");
    assertTrue(inference.contains("activations"), inference);
    run(with(train, "-o", other.toString(), "--epochs", "1", "--overwrite"));
    // Pretrained weights: torchvision's tiny ViT (the goldens' script wrote it), 16x16, 5 classes.
    String weights =
        ROOT.resolve("trainer/src/test/resources/goldens/vit_tiny_torchvision.weights.safetensors")
            .toString();
    run(
        "train",
        "-d",
        ds.toString(),
        "-o",
        tmp.resolve("tuned").toString(),
        "--model",
        "vit:4-32-2-4-3",
        "--weights",
        weights,
        "--epochs",
        "1",
        "--batch-size",
        "8",
        "--set",
        "ramtrain.train.threads=1");
    run(
        "predict",
        "--model",
        "vit:4-32-2-4-5",
        "--weights",
        weights,
        "--num-classes",
        "5",
        "--image",
        "16x16",
        "--class-names",
        Files.writeString(tmp.resolve("names.txt"), "a\nb\nc\nd\ne\n").toString(),
        "--top-k",
        "2",
        "-o",
        tmp.resolve("pretrained.csv").toString(),
        images.toString());
    assertTrue(
        Files.readAllLines(tmp.resolve("pretrained.csv"))
            .get(0)
            .startsWith("path,prediction,probability,top1,top1_probability,top2,"));
    Path fiveImages = tmp.resolve("five");
    Path five = tmp.resolve("five-ds");
    run("generate", "-o", fiveImages.toString(), "--classes", "5", "--images-per-class", "4");
    run(
        "preprocess",
        "-i",
        fiveImages.toString(),
        "-o",
        five.toString(),
        "--height",
        "16",
        "--width",
        "16");
    String pretrained =
        run(
            "evaluate",
            "--model",
            "vit:4-32-2-4-5",
            "--weights",
            weights,
            "-d",
            five.toString(),
            "-o",
            tmp.resolve("pretrained.png").toString());
    assertTrue(pretrained.contains("accuracy"), pretrained);
    run(
        "plan",
        "--model",
        "mlp:784-1024-1024-10",
        "--batch-size",
        "64",
        "--device",
        "t4",
        "--budget",
        "6GiB",
        "--prefetch-depth",
        "2",
        "--bf16-weights");
    String host =
        run(
            "plan",
            "--model",
            "mlp:784-1024-1024-10",
            "--device",
            "t4",
            "--clip-norm",
            "1",
            "--delayed-update",
            "--set",
            "ramtrain.offload.mode=on",
            "--set",
            "ramtrain.plan.host-bandwidth=86e9");
    assertTrue(host.contains("a step delayed-after-backward (host memory 86.0 GB/s given"), host);
    run(
        "pipeline",
        "-i",
        images.toString(),
        "-o",
        tmp.resolve("piped").toString(),
        "--height",
        "8",
        "--width",
        "8",
        "--model",
        "mlp:192-16-3",
        "--batch-size",
        "8",
        "--epochs",
        "1",
        "--ranks",
        "1",
        "--val-fraction",
        "0.3",
        "--master",
        "local[2]");
    run(
        "demo",
        "--workdir",
        tmp.resolve("demo").toString(),
        "--images-per-class",
        "10",
        "--size",
        "16",
        "--epochs",
        "1",
        "--model",
        "cnn:c4-p-f8-6",
        "--set",
        "ramtrain.train.batch-size=16");

    List<String> missing = new ArrayList<>();
    documented.forEach(
        (command, flags) -> {
          Set<String> used = typed.getOrDefault(command, Set.of());
          if (!typed.containsKey(command)) {
            missing.add(command + " (never run)");
          }
          flags.stream()
              .filter(f -> !used.contains(f) && !(f.startsWith("--") && used.contains(f + "=")))
              .forEach(f -> missing.add(command + " " + f));
        });
    assertEquals(List.of(), missing, "documented but never typed through bin/ramtrain");
    Set<String> everywhere = new TreeSet<>();
    typed.values().forEach(everywhere::addAll);
    assertTrue(everywhere.containsAll(List.of("--config", "--set", "--master")), "" + everywhere);
  }

  private static String[] with(List<String> base, String... more) {
    List<String> all = new ArrayList<>(base);
    all.addAll(List.of(more));
    return all.toArray(String[]::new);
  }
}
