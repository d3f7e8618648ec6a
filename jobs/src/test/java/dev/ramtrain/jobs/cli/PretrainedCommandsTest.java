package dev.ramtrain.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Pretrained weights from the command line, as a timm user runs them: train starts from them (a
 * head of another class count starts fresh), predict and evaluate serve them without a checkpoint,
 * and weights of another architecture are one error line (exit 1) with nothing written. The weights
 * are torchvision's own tiny ViT, written by the goldens' script.
 */
class PretrainedCommandsTest {
  private static final Path WEIGHTS =
      Path.of("../trainer/src/test/resources/goldens/vit_tiny_torchvision.weights.safetensors");
  private static final String MODEL = "vit:4-32-2-4-5";

  @TempDir static Path shared;
  @TempDir Path tmp;
  static Path images;
  static Path fiveClasses;

  @BeforeAll
  static void data() {
    images = shared.resolve("images");
    MainTest.Run g =
        MainTest.run(
            "generate",
            "-o",
            images.toString(),
            "--classes",
            "5",
            "--images-per-class",
            "6",
            "--width",
            "16",
            "--height",
            "16");
    assertEquals(0, g.status(), g.err());
    fiveClasses = shared.resolve("dataset");
    MainTest.Run p =
        MainTest.run(
            "preprocess",
            "-i",
            images.toString(),
            "-o",
            fiveClasses.toString(),
            "--height",
            "16",
            "--width",
            "16",
            "--set",
            "ramtrain.etl.val-fraction=0.3");
    assertEquals(0, p.status(), p.err());
  }

  @Test
  void trainStartsFromTheWeights() {
    Path run = tmp.resolve("run");
    MainTest.Run r =
        trainFive(
            run, 1, "--model", MODEL, "--weights", WEIGHTS.toString(), "--layer-decay", "0.75");
    assertEquals(0, r.status(), r.err());
    assertTrue(r.out().contains("normalization mean [0.485, 0.456, 0.406]"), r.out());
    assertTrue(Files.isDirectory(run.resolve("checkpoints")));
  }

  /**
   * --ema: the average is evaluated every epoch beside the weights (the metrics file), saved as
   * model_ema.safetensors in every checkpoint, and served by {@code evaluate --ema}; a checkpoint
   * without one is a one-line usage error naming the file.
   */
  @Test
  void theMovingAverageIsEvaluatedCheckpointedAndServed() throws Exception {
    Path run = tmp.resolve("ema-run");
    MainTest.Run r =
        trainFive(run, 2, "--model", MODEL, "--weights", WEIGHTS.toString(), "--ema", "0.9");
    assertEquals(0, r.status(), r.err());
    assertTrue(Files.exists(run.resolve("checkpoints/epoch-0002/model_ema.safetensors")));
    assertTrue(
        Files.readAllLines(run.resolve("metrics.jsonl")).stream()
            .anyMatch(l -> l.contains("\"val_acc_ema\"")),
        "metrics record the average's accuracy");
    MainTest.Run e =
        MainTest.run("evaluate", "-c", run.toString(), "--ema", "-d", fiveClasses.toString());
    assertEquals(0, e.status(), e.err());
    assertTrue(e.out().contains("accuracy"), e.out());
    Path plain = tmp.resolve("plain-run");
    MainTest.Run p = trainFive(plain, 1, "--model", MODEL);
    assertEquals(0, p.status(), p.err());
    MainTest.Run none =
        MainTest.run("evaluate", "-c", plain.toString(), "--ema", "-d", fiveClasses.toString());
    assertEquals(2, none.status(), none.err());
    assertEquals(1, none.err().strip().lines().count(), none.err());
    assertTrue(none.err().contains("has no model_ema.safetensors"), none.err());
  }

  @Test
  void weightsOfAnotherArchitectureAreOneLineAndNothingIsWritten() {
    Path run = tmp.resolve("run");
    MainTest.Run r =
        trainFive(run, 1, "--model", "vit:4-64-2-4-5", "--weights", WEIGHTS.toString());
    assertEquals(1, r.status(), r.err());
    assertEquals(1, r.err().strip().lines().count(), r.err());
    assertTrue(
        r.err().contains("(torchvision names) does not fit vit:4-64-2-4-5: shape mismatches"),
        r.err());
    assertTrue(!Files.exists(run), "no run directory");
  }

  @Test
  void predictAndEvaluateServeTheWeightsWithoutACheckpoint() throws Exception {
    Path csv = tmp.resolve("p.csv");
    MainTest.Run p =
        MainTest.run(
            "predict",
            "--model",
            MODEL,
            "--weights",
            WEIGHTS.toString(),
            "--image",
            "16x16",
            "-o",
            csv.toString(),
            images.toString());
    assertEquals(0, p.status(), p.err());
    List<String> lines = Files.readAllLines(csv);
    assertEquals("path,prediction,probability,0,1,2,3,4,error", lines.get(0));
    assertEquals(1 + 30, lines.size(), "one row per image");
    MainTest.Run e =
        MainTest.run(
            "evaluate",
            "--model",
            MODEL,
            "--weights",
            WEIGHTS.toString(),
            "-d",
            fiveClasses.toString(),
            "-o",
            tmp.resolve("confusion.png").toString());
    assertEquals(0, e.status(), e.err());
    assertTrue(e.out().contains("accuracy"), e.out());
    MainTest.Run neither = MainTest.run("predict", images.toString());
    assertEquals(2, neither.status(), neither.err());
    assertTrue(neither.err().contains("needs --checkpoint DIR, or --model NAME with --weights"));
  }

  /**
   * ImageNet-style serving: --top-k writes the K likeliest classes (likeliest first, the first the
   * prediction) instead of every class's column, and --class-names names a bare head's classes, one
   * per line; a list of another length, K below 1, or names for a checkpoint are one-line usage
   * errors that write nothing.
   */
  @Test
  void predictWritesTheTopKClassesByTheirNames() throws Exception {
    Path names = tmp.resolve("classes.txt");
    Files.writeString(names, "circle\nsquare\n\ntriangle\ncross\nstar\n"); // a blank line
    Path csv = tmp.resolve("top.csv");
    MainTest.Run p =
        predictWeights(csv, "--image", "16x16", "--class-names", names.toString(), "--top-k", "2");
    assertEquals(0, p.status(), p.err());
    List<String> lines = Files.readAllLines(csv);
    assertEquals(
        "path,prediction,probability,top1,top1_probability,top2,top2_probability,error",
        lines.get(0));
    assertEquals(1 + 30, lines.size());
    List<String> known = List.of("circle", "square", "triangle", "cross", "star");
    for (String line : lines.subList(1, lines.size())) {
      String[] f = line.split(",", -1);
      assertEquals(f[1], f[3], "the first of the top k is the prediction: " + line);
      assertEquals(f[2], f[4], line);
      assertTrue(known.contains(f[3]) && known.contains(f[5]) && !f[3].equals(f[5]), line);
      assertTrue(Double.parseDouble(f[4]) >= Double.parseDouble(f[6]), "likeliest first: " + line);
    }
    Path every = tmp.resolve("every.csv");
    MainTest.Run named =
        predictWeights(every, "--image", "16x16", "--class-names", names.toString());
    assertEquals(0, named.status(), named.err());
    assertEquals(
        "path,prediction,probability,circle,square,triangle,cross,star,error",
        Files.readAllLines(every).get(0),
        "five classes: every class's column by default");
    Path four = tmp.resolve("four.txt");
    Files.writeString(four, "a\nb\nc\nd\n");
    Path none = tmp.resolve("none.csv");
    MainTest.Run wrong = predictWeights(none, "--image", "16x16", "--class-names", four.toString());
    assertEquals(2, wrong.status(), wrong.err());
    assertTrue(wrong.err().contains(four + ": 4 names for a head of 5 classes"), wrong.err());
    MainTest.Run zero = predictWeights(none, "--top-k", "0");
    assertEquals(2, zero.status(), zero.err());
    assertTrue(zero.err().contains("--top-k must be >= 1, got 0"), zero.err());
    MainTest.Run huge = predictWeights(none, "--num-classes", "2147483647");
    assertEquals(2, huge.status(), huge.err());
    assertTrue(huge.err().contains("head has 5 classes, and predict serves the head it has"));
    assertFalse(Files.exists(none), "nothing written");
  }

  /** predict of the generated images with the tiny ViT's weights into {@code csv}, and more. */
  /**
   * Inference binds the model without gradients or saved activations: {@code plan --inference} says
   * what predict allocates, and a batch the backend cannot hold is refused before anything is
   * allocated, in one usage line naming --batch-size and both sizes.
   */
  @Test
  void predictRefusesABatchItCannotHoldAndPlanSaysWhatItTakes() {
    MainTest.Run plan =
        MainTest.run(
            "plan", "--inference", "--model", MODEL, "--image", "16x16x3", "--batch-size", "8");
    assertEquals(0, plan.status(), plan.err());
    assertTrue(plan.out().contains("inference      " + MODEL), plan.out());
    assertTrue(plan.out().contains("activations    "), plan.out());
    assertTrue(plan.out().contains("fits in"), plan.out());

    // A budget the weights do not fit beside the activations: the largest layers that fit stay,
    // the rest streams, and the plan says both, to the byte predict allocates.
    long budget;
    try (var cpu = new dev.ramtrain.trainer.backend.cpu.CpuBackend(1)) {
      java.util.function.Supplier<List<dev.ramtrain.trainer.nn.Layer>> layers =
          () -> dev.ramtrain.trainer.nn.ModelSpec.parse(MODEL, new ImageShape(16, 16, 3));
      var footprint = dev.ramtrain.trainer.nn.Model.inferenceFootprint(MODEL, layers, cpu, 8);
      budget = footprint.totalBytes() - 1; // a byte short of resident: some layers stream
      assertTrue(
          dev.ramtrain.trainer.offload.InferencePlacement.streamed(
                      footprint, layers.get(), 1, cpu, budget)
                  .deviceBytes()
              <= budget,
          "with a one-slot ring the rest fits");
    }
    MainTest.Run streamed =
        MainTest.run(
            "plan",
            "--inference",
            "--model",
            MODEL,
            "--image",
            "16x16x3",
            "--batch-size",
            "8",
            "--prefetch-depth",
            "1",
            "--budget",
            Long.toString(budget));
    assertEquals(0, streamed.status(), streamed.err());
    assertTrue(streamed.out().contains("streamed       "), streamed.out());
    assertTrue(streamed.out().contains("kept on the device (the largest layers"), streamed.out());
    assertTrue(
        streamed.out().lines().anyMatch(l -> l.startsWith("device ") && l.contains("fits in")),
        streamed.out());

    Path csv = tmp.resolve("huge.csv");
    MainTest.Run r =
        predictWeights(
            csv, "--image", "16x16", "--batch-size", "5000", "--set", "ramtrain.cpu.memory=64MiB");
    assertEquals(2, r.status(), r.err());
    assertTrue(r.err().contains("predict --batch-size 5000: evaluating " + MODEL), r.err());
    assertTrue(r.err().contains("free; use a smaller --batch-size"), r.err());
    assertEquals(1, r.err().strip().lines().filter(l -> l.contains("error")).count(), r.err());
    // one layer's activations beyond the CPU backend's largest allocation (2 GiB)
    MainTest.Run huge = predictWeights(csv, "--image", "16x16", "--batch-size", "100000000");
    assertEquals(2, huge.status(), huge.err());
    assertTrue(huge.err().contains("predict --batch-size 100000000: blocks.0."), huge.err());
    assertTrue(huge.err().contains("largest allocation (2.00 GiB)"), huge.err());
    assertFalse(Files.exists(csv), "nothing written");
  }

  /**
   * --offload on streams the weights from host memory (on the CPU backend too, where auto never
   * does): the same predictions and the same evaluation as resident, to the byte.
   */
  @Test
  void streamedWeightsPredictAndEvaluateAsResident() throws Exception {
    Path resident = tmp.resolve("resident.csv");
    Path streamed = tmp.resolve("streamed.csv");
    MainTest.Run off = predictWeights(resident, "--image", "16x16", "--offload", "off");
    assertEquals(0, off.status(), off.err());
    MainTest.Run on = predictWeights(streamed, "--image", "16x16", "--offload", "on");
    assertEquals(0, on.status(), on.err());
    assertEquals(Files.readString(resident), Files.readString(streamed));
    List<String> evaluate =
        List.of(
            "evaluate",
            "--model",
            MODEL,
            "--weights",
            WEIGHTS.toString(),
            "-d",
            fiveClasses.toString(),
            "-o",
            tmp.resolve("confusion.png").toString(),
            "--offload");
    MainTest.Run evalOff = MainTest.run(with(evaluate, "off"));
    MainTest.Run evalOn = MainTest.run(with(evaluate, "on"));
    assertEquals(0, evalOn.status(), evalOn.err());
    assertEquals(evalOff.out(), evalOn.out());
  }

  private static String[] with(List<String> args, String last) {
    List<String> all = new java.util.ArrayList<>(args);
    all.add(last);
    return all.toArray(String[]::new);
  }

  private static MainTest.Run predictWeights(Path csv, String... more) {
    List<String> args =
        new java.util.ArrayList<>(
            List.of("predict", "--model", MODEL, "--weights", WEIGHTS.toString()));
    args.addAll(List.of(more));
    args.addAll(List.of("-o", csv.toString(), images.toString()));
    return MainTest.run(args.toArray(String[]::new));
  }

  /**
   * What pretraining is for: a CIFAR ResNet-8 trained on four of the generated shapes, fine-tuned
   * on the three others (its classifier replaced: another class count), is more accurate after two
   * epochs than the same network from scratch. Same seeds, batches, learning rate and normalization
   * on both sides. Measured on 274 validation images: 0.64 fine-tuned against 0.44 from scratch
   * (the pretrained model reaching 0.85 on its four); the test asks for a margin of 0.1.
   */
  @Test
  void fineTuningAPretrainedModelBeatsTrainingFromScratch() throws Exception {
    Path all = tmp.resolve("shapes");
    MainTest.Run g =
        MainTest.run(
            "generate",
            "-o",
            all.toString(),
            "--classes",
            "7",
            "--images-per-class",
            "300",
            "--width",
            "32",
            "--height",
            "32");
    assertEquals(0, g.status(), g.err());
    Path first = Files.createDirectories(tmp.resolve("first"));
    Path second = Files.createDirectories(tmp.resolve("second"));
    List<Path> classes;
    try (var listing = Files.list(all)) {
      classes = listing.sorted().toList();
    }
    for (int i = 0; i < classes.size(); i++) {
      Path to = (i < 4 ? first : second).resolve(classes.get(i).getFileName());
      Files.move(classes.get(i), to);
    }
    Path norm =
        Files.writeString(
            tmp.resolve("norm.conf"),
            "ramtrain.train.mean = [0.5, 0.5, 0.5]\nramtrain.train.std = [0.25, 0.25, 0.25]\n");
    Path dsFirst = preprocess(first);
    Path dsSecond = preprocess(second);
    Path pretrained = tmp.resolve("pretrained");
    train(dsFirst, pretrained, "resnet:8-16-4", 10, norm);
    String weights = pretrained.resolve("checkpoints/epoch-0010/model.safetensors").toString();
    MainTest.Run scratch = train(dsSecond, tmp.resolve("scratch"), "resnet:8-16-3", 2, norm);
    MainTest.Run tuned =
        train(dsSecond, tmp.resolve("tuned"), "resnet:8-16-3", 2, norm, "--weights", weights);
    // The run succeeded from 4-class weights into a 3-class model: only the head rule lets that
    // load (the strict match refuses every other misshapen tensor).
    double fromScratch = accuracy(scratch);
    double fineTuned = accuracy(tuned);
    assertTrue(
        fineTuned > fromScratch + 0.1,
        "fine-tuned " + fineTuned + " against " + fromScratch + " from scratch");
  }

  private static Path preprocess(Path images) {
    Path ds = images.resolveSibling(images.getFileName() + "-ds");
    MainTest.Run p =
        MainTest.run(
            "preprocess",
            "-i",
            images.toString(),
            "-o",
            ds.toString(),
            "--height",
            "32",
            "--width",
            "32",
            "--set",
            "ramtrain.etl.val-fraction=0.3");
    assertEquals(0, p.status(), p.err());
    return ds;
  }

  /** {@code train} on the five generated classes for {@code epochs}, batches of 4, one thread. */
  private static MainTest.Run trainFive(Path run, int epochs, String... more) {
    List<String> args =
        new java.util.ArrayList<>(
            List.of(
                "train",
                "-d",
                fiveClasses.toString(),
                "-o",
                run.toString(),
                "--epochs",
                String.valueOf(epochs),
                "--batch-size",
                "4",
                "--set",
                "ramtrain.train.threads=1"));
    args.addAll(List.of(more));
    return MainTest.run(args.toArray(String[]::new));
  }

  private static MainTest.Run train(
      Path dataset, Path run, String model, int epochs, Path config, String... more) {
    List<String> args =
        new java.util.ArrayList<>(
            List.of(
                "train",
                "-d",
                dataset.toString(),
                "-o",
                run.toString(),
                "--model",
                model,
                "--epochs",
                String.valueOf(epochs),
                "--batch-size",
                "32",
                "--lr",
                "3e-3",
                "--config",
                config.toString()));
    args.addAll(List.of(more));
    MainTest.Run r = MainTest.run(args.toArray(String[]::new));
    assertEquals(0, r.status(), r.err());
    return r;
  }

  /** The "val accuracy A, loss L over N samples" line train prints at its end. */
  private static double accuracy(MainTest.Run r) {
    java.util.regex.Matcher m =
        java.util.regex.Pattern.compile("val accuracy ([0-9.]+)").matcher(r.out());
    assertTrue(m.find(), r.out());
    return Double.parseDouble(m.group(1));
  }
}
