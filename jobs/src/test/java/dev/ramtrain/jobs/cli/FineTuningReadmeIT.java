package dev.ramtrain.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The README's "Fine-tuning a pretrained model" section, command by command through bin/ramtrain
 * with the flags it shows and every other setting at its default, as a new user on a machine
 * without a GPU runs it: the commands are read from the README itself, and only the names of the
 * user's files and the models' size are swapped for small ones (300 generated 16×16 images of 5
 * classes for the photo folder; torchvision's tiny ViT, whose weights the goldens ship, for the
 * pretrained models; 16 for 224). Each command must exit 0.
 */
class FineTuningReadmeIT {
  private static final Path ROOT = Path.of(System.getProperty("ramtrain.repo.root"));
  private static final String MODEL = "vit:4-32-2-4-5";
  private static final Path WEIGHTS =
      ROOT.resolve("trainer/src/test/resources/goldens/vit_tiny_torchvision.weights.safetensors");

  @TempDir Path tmp;

  /** The section's bash block, one command per entry (continuation lines joined). */
  private static List<String> section() throws Exception {
    List<String> commands = new ArrayList<>();
    boolean inSection = false;
    boolean inBlock = false;
    StringBuilder pending = new StringBuilder();
    for (String line : Files.readAllLines(ROOT.resolve("README.md"))) {
      if (line.startsWith("## ")) {
        inSection = line.equals("## Fine-tuning a pretrained model");
      } else if (inSection && line.equals("```bash")) {
        inBlock = true;
      } else if (inBlock && line.equals("```")) {
        return commands;
      } else if (inBlock) {
        String code = line.replaceAll("\\s+#.*$", "").strip(); // a trailing comment
        if (code.endsWith("\\")) {
          pending.append(code, 0, code.length() - 1).append(' ');
        } else {
          commands.add(pending.append(code).toString());
          pending.setLength(0);
        }
      }
    }
    throw new AssertionError("README.md: no bash block under '## Fine-tuning a pretrained model'");
  }

  @Test
  void theSectionRunsCommandByCommandAtItsDefaults() throws Exception {
    Path photos = tmp.resolve("photos");
    Path weights = Files.copy(WEIGHTS, tmp.resolve("weights.safetensors"));
    LauncherIT.Result generated =
        LauncherIT.launch(
            Map.of(),
            "generate",
            "-o",
            photos.toString(),
            "--classes",
            "5",
            "--images-per-class",
            "60",
            "--width",
            "16",
            "--height",
            "16");
    assertEquals(0, generated.status(), generated.output());
    Map<String, String> swapped =
        Map.ofEntries(
            Map.entry("photos/", photos + "/"),
            Map.entry("photos-ds", tmp.resolve("photos-ds").toString()),
            Map.entry("run", tmp.resolve("run").toString()),
            Map.entry("vit_large_patch16_224", MODEL),
            Map.entry("vit_base_patch16_224", MODEL),
            Map.entry("resnet50", MODEL),
            Map.entry("vit_large.safetensors", weights.toString()),
            Map.entry("vit_b.safetensors", weights.toString()),
            Map.entry("resnet50.safetensors", weights.toString()),
            Map.entry("224", "16"),
            Map.entry("224x224x3", "16x16x3"));
    List<String> commands = section();
    List<String> ran = new ArrayList<>();
    for (String command : commands) {
      List<String> args = new ArrayList<>();
      for (String token : command.split("\\s+")) {
        args.add(swapped.getOrDefault(token, token));
      }
      assertEquals("bin/ramtrain", args.remove(0), command);
      if (args.get(0).equals("predict") && args.contains("--weights")) {
        args.addAll(List.of("--image", "16x16")); // the swapped model's size; the README's: 224
      }
      LauncherIT.Result r = LauncherIT.launch(Map.of(), args.toArray(String[]::new));
      assertEquals(0, r.status(), command + "\n" + r.output());
      ran.add(args.get(0));
      switch (args.get(0)) {
        case "train" -> {
          assertTrue(r.output().contains("val accuracy"), r.output());
          assertTrue(Files.isRegularFile(tmp.resolve("run/checkpoints/best")), r.output());
          assertTrue(Files.isRegularFile(tmp.resolve("run/report/index.html")), r.output());
        }
        case "predict" -> {
          long rows = r.output().lines().filter(l -> l.startsWith(photos.toString())).count();
          assertEquals(300, rows, r.output());
        }
        case "evaluate" -> assertTrue(r.output().contains("accuracy"), r.output());
        default -> {}
      }
    }
    assertEquals(
        Arrays.asList("preprocess", "plan", "train", "predict", "evaluate"),
        ran,
        "the section's commands, each run once");
  }
}
