package dev.ramtrain.trainer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendException;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.CudaSpec;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.backend.cuda.EmulatorFaults;
import dev.ramtrain.trainer.checkpoint.Safetensors;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.data.LoaderSpec;
import dev.ramtrain.trainer.data.ShardSet;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelBlueprint;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.nn.Precision;
import dev.ramtrain.trainer.offload.HostAdamW;
import dev.ramtrain.trainer.offload.HostSgd;
import dev.ramtrain.trainer.offload.OffloadedLearner;
import dev.ramtrain.trainer.offload.Streaming;
import dev.ramtrain.trainer.optim.AdamW;
import dev.ramtrain.trainer.optim.AdamWSpec;
import dev.ramtrain.trainer.optim.LrSchedule;
import dev.ramtrain.trainer.optim.Optimizer;
import dev.ramtrain.trainer.optim.Sgd;
import dev.ramtrain.trainer.optim.SgdSpec;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TrainerTest {
  static final ImageShape SHAPE = new ImageShape(8, 8, 1);
  @TempDir Path tmp;

  private ShardSet patterns(String name, int count, long seed) throws Exception {
    return PatternShards.write(tmp.resolve(name + ".arrow"), count, seed);
  }

  private static LoopSpec options(LoopSpec.NanPolicy policy, float clipNorm) {
    return new LoopSpec(3, 0f, clipNorm, policy, new float[] {0.5f}, new float[] {0.25f}, 5);
  }

  @Test
  void learnsAndWritesMetrics() throws Exception {
    Path metricsFile = tmp.resolve("metrics.jsonl");
    try (Backend b = new CpuBackend(2);
        ShardSet train = patterns("train", 300, 1);
        ShardSet val = patterns("val", 90, 2);
        DataLoader trainLoader =
            new DataLoader(
                b,
                train,
                new LoaderSpec(
                    32,
                    2,
                    3,
                    new LoaderSpec.Sampling(7, true, LoaderSpec.Remainder.DROP),
                    new LoaderSpec.SampleAugmentation(0, false),
                    new LoaderSpec.Rank(0, 1)));
        DataLoader valLoader = new DataLoader(b, val, LoaderSpec.evaluation(32, 1))) {
      var stream = b.createStream("setup");
      Model model = Model.build("mlp:64-32-3", ModelSpec.parse("mlp:64-32-3"), b, stream, 32, 1);
      Optimizer opt =
          new AdamW(b, model.parameters().count(), new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.01f));
      try (Learner learner = new ResidentLearner(b, model, opt, 1f);
          MetricsLog metrics = new MetricsLog(metricsFile);
          Trainer trainer =
              new Trainer(
                  b,
                  learner,
                  LrSchedule.constant(3e-3),
                  options(LoopSpec.NanPolicy.STOP, 1f),
                  SHAPE,
                  metrics)) {
        trainer.fit(trainLoader, valLoader, 0);
        EvalResult eval = trainer.evaluate(valLoader);
        assertEquals(90, eval.samples(), "evaluation sees every val sample once");
        assertTrue(eval.accuracy() > 0.95, "val accuracy " + eval.accuracy());
        assertEquals(27, trainer.globalStep(), "3 epochs of 9 full batches");
      }
    }
    List<String> lines = Files.readAllLines(metricsFile);
    assertEquals(
        List.of("\"epoch\":1", "\"epoch\":2", "\"epoch\":3"),
        lines.stream()
            .filter(l -> l.contains("\"type\":\"epoch\""))
            .map(l -> l.replaceAll(".*(\"epoch\":\\d+).*", "$1"))
            .toList(),
        "epochs are numbered from 1, as the checkpoints after them");
    assertTrue(
        lines.stream()
            .anyMatch(
                l ->
                    l.contains("\"type\":\"step\"")
                        && l.contains("\"lr\"")
                        && l.contains("\"data_stall_ms\"")
                        && l.contains("\"samples_per_s\"")
                        && l.contains("\"peak_device_bytes\"")),
        lines.toString());
    assertTrue(
        lines.get(lines.size() - 1).contains("\"data_stall_pct\""), lines.get(lines.size() - 1));
    everyStepsLossIsLoggedOnce(lines, 27, 9);
    // Training accuracy comes from each step's readback (one step late): it must count the
    // step's own labels, not those of a batch copied in since.
    String last = lines.get(lines.size() - 1);
    double trainAcc = Double.parseDouble(last.replaceAll(".*\"train_acc\":([0-9.]+).*", "$1"));
    assertTrue(trainAcc > 0.9, "train accuracy in the last epoch " + trainAcc);
  }

  /**
   * Between them the records hold each step's loss once, in order (with log-every 5, four in five
   * steps are never a step record of their own); a step record's last loss is its own, its
   * loss_mean the mean of its steps (equal batches), and an epoch's steps average to its train
   * loss.
   */
  private static void everyStepsLossIsLoggedOnce(List<String> lines, int steps, int perEpoch)
      throws Exception {
    var json = new com.fasterxml.jackson.databind.ObjectMapper();
    double[] loss = new double[steps];
    long next = 0;
    for (String line : lines) {
      var record = json.readTree(line);
      if (!record.has("step_losses")) {
        continue;
      }
      assertEquals(next, record.get("step_losses_from").asLong(), line);
      var losses = record.get("step_losses");
      double sum = 0;
      for (int i = 0; i < losses.size(); i++) {
        loss[(int) next++] = losses.get(i).asDouble();
        sum += losses.get(i).asDouble();
      }
      assertEquals(sum / losses.size(), record.get("loss_mean").asDouble(), 1e-5, line);
      if (record.get("type").asText().equals("step")) {
        assertEquals(record.get("step").asLong(), next - 1, "the record's own step ends it");
        assertEquals(record.get("loss").asDouble(), loss[(int) next - 1], 1e-6, line);
      } else {
        int epoch = record.get("epoch").asInt();
        double epochSum = 0;
        for (int s = (epoch - 1) * perEpoch; s < epoch * perEpoch; s++) {
          epochSum += loss[s];
        }
        assertEquals(record.get("train_loss").asDouble(), epochSum / perEpoch, 1e-5, line);
      }
    }
    assertEquals(steps, next, "every step's loss is in the metrics");
  }

  @Test
  void nanLossStopsNamingTheStepOrIsSkipped() throws Exception {
    try (Backend b = new CpuBackend(1);
        ShardSet train = patterns("train", 96, 3);
        DataLoader loader =
            new DataLoader(
                b,
                train,
                new LoaderSpec(
                    32,
                    1,
                    2,
                    new LoaderSpec.Sampling(7, true, LoaderSpec.Remainder.DROP),
                    new LoaderSpec.SampleAugmentation(0, false),
                    new LoaderSpec.Rank(0, 1)))) {
      var stream = b.createStream("setup");
      for (int run = 0; run < 4; run++) {
        LoopSpec.NanPolicy policy = LoopSpec.NanPolicy.values()[run % 2];
        try (Learner learner = run < 2 ? residentSgd(b, stream) : offloadedSgd(b, stream);
            MetricsLog metrics = new MetricsLog(null);
            Trainer trainer =
                new Trainer(
                    b, learner, LrSchedule.constant(1e30), options(policy, 0f), SHAPE, metrics)) {
          if (policy == LoopSpec.NanPolicy.STOP) {
            var e =
                assertThrows(TrainingDivergedException.class, () -> trainer.fit(loader, loader, 0));
            assertTrue(e.getMessage().contains("at epoch 1, step"), e.getMessage());
          } else {
            trainer.trainEpoch(loader, 0);
            assertTrue(trainer.skippedSteps() > 0, "steps were skipped");
          }
        }
      }
    }
  }

  private static Learner residentSgd(Backend b, Stream stream) {
    Model model = Model.build("mlp:64-32-3", ModelSpec.parse("mlp:64-32-3"), b, stream, 32, 1);
    return new ResidentLearner(
        b, model, new Sgd(b, model.parameters().count(), new SgdSpec(0f, 0f, false)), 0f);
  }

  /** fc1 streamed, the update layer by layer on the host: the NaN policies hold offloaded too. */
  private static Learner offloadedSgd(Backend b, Stream stream) {
    return OffloadedLearner.build(
        new ModelBlueprint("mlp:64-32-3", () -> ModelSpec.parse("mlp:64-32-3"), 32, 1),
        new Streaming(Set.of("fc1"), 1, false, false, false, 0),
        (slab, threads) ->
            new HostSgd(b, slab.masters(), slab.gradients(), new SgdSpec(0f, 0f, false), threads),
        1,
        0f,
        b,
        stream);
  }

  /** Batch norm (running statistics are checkpointed) and dropout (masks drawn per step). */
  private static final String RESUMED_MODEL = "cnn:cb4-p-d0.25-f16-3";

  /** Where the resumed runs keep their weights. */
  private enum Placement {
    RESIDENT,
    OFFLOADED,
    RESIDENT_BF16,
    OFFLOADED_BF16
  }

  private static Learner learner(Placement placement, Backend b, Stream stream) {
    Precision precision =
        placement == Placement.RESIDENT_BF16 || placement == Placement.OFFLOADED_BF16
            ? Precision.BF16
            : Precision.FP32;
    if (placement == Placement.RESIDENT || placement == Placement.RESIDENT_BF16) {
      Model model =
          Model.build(
              RESUMED_MODEL, ModelSpec.parse(RESUMED_MODEL, SHAPE, precision), b, stream, 32, 1);
      Optimizer opt =
          new AdamW(b, model.parameters().count(), new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.01f));
      return new ResidentLearner(b, model, opt, 1f);
    }
    return OffloadedLearner.build(
        new ModelBlueprint(
            RESUMED_MODEL, () -> ModelSpec.parse(RESUMED_MODEL, SHAPE, precision), 32, 1),
        new Streaming(Set.of("conv1", "fc2"), 1, false, true, false, 0),
        (slab, threads) ->
            new HostAdamW(
                b,
                slab.masters(),
                slab.gradients(),
                new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.01f),
                threads),
        2,
        1f,
        b,
        stream);
  }

  /**
   * Trains epochs [first, epochs) with checkpoints in {@code run}; returns the final parameters
   * followed by the final buffers.
   */
  private float[] run(Path run, int first, int epochs, boolean resume, Placement placement)
      throws Exception {
    return run(run, first, epochs, resume, placement, () -> new CpuBackend(2), () -> {}, 0, -1);
  }

  /** As above, on the backend {@code backend} opens, running {@code afterCheckpoint} after each. */
  private float[] run(
      Path run,
      int first,
      int epochs,
      boolean resume,
      Placement placement,
      Supplier<Backend> backend,
      Runnable afterCheckpoint)
      throws Exception {
    return run(run, first, epochs, resume, placement, backend, afterCheckpoint, 0, -1);
  }

  /**
   * As above, with a checkpoint every {@code everySteps} steps within epochs too, and the run
   * failing after step {@code failAt} (if not negative), as a killed task would.
   */
  private float[] run(
      Path run,
      int first,
      int epochs,
      boolean resume,
      Placement placement,
      Supplier<Backend> backend,
      Runnable afterCheckpoint,
      int everySteps,
      long failAt)
      throws Exception {
    try (Backend b = backend.get();
        ShardSet train = patterns("train", 300, 1);
        ShardSet val = patterns("val", 60, 2);
        DataLoader trainLoader =
            new DataLoader(
                b,
                train,
                new LoaderSpec(
                    32,
                    2,
                    3,
                    new LoaderSpec.Sampling(7, true, LoaderSpec.Remainder.DROP),
                    new LoaderSpec.SampleAugmentation(1, true),
                    new LoaderSpec.Rank(0, 1)));
        DataLoader valLoader = new DataLoader(b, val, LoaderSpec.evaluation(32, 1))) {
      var stream = b.createStream("setup");
      try (Learner learner = learner(placement, b, stream);
          MetricsLog metrics = new MetricsLog(null);
          Trainer trainer =
              new Trainer(
                  b,
                  learner,
                  LrSchedule.cosine(3e-3, 3, 27, 0),
                  new LoopSpec(
                          epochs,
                          0.1f,
                          1f,
                          LoopSpec.NanPolicy.STOP,
                          new float[] {0.5f},
                          new float[] {0.25f},
                          5)
                      // colour jitter, mixup and cutmix on the device, drawn by batch number:
                      // resumed and offloaded runs must draw them alike
                      .withBatchAugmentation(
                          new BatchAugmentation(0.4f, new Mixup(0.8, 1.0, 0.9, 0.5), 7)),
                  SHAPE,
                  metrics)) {
        Map<String, Object> info = Map.of("classes", List.of("rows", "columns", "checker"));
        trainer.checkpointTo(
            (name, epochsDone, step, snapshot) -> {
              Path saved =
                  dev.ramtrain.trainer.checkpoint.Checkpoints.save(
                      run, name, epochsDone, step, snapshot, info);
              afterCheckpoint.run();
              return saved;
            },
            everySteps);
        trainer.afterEachStep(
            steps -> {
              if (steps == failAt) {
                throw new IllegalStateException("stopped after step " + steps);
              }
            });
        if (resume) {
          var c = dev.ramtrain.trainer.checkpoint.Checkpoints.loadLatest(run);
          assertEquals(first, c.epochsDone());
          learner.restore(c, stream);
          trainer.resumeAt(c.globalStep());
        }
        trainer.fit(trainLoader, valLoader, first);
        List<Safetensors.Tensor> saved = learner.snapshot(stream).weights();
        float[] all = new float[saved.stream().mapToInt(t -> t.values().length).sum()];
        int at = 0;
        for (Safetensors.Tensor t : saved) { // parameters in model order, then buffers
          System.arraycopy(t.values(), 0, all, at, t.values().length);
          at += t.values().length;
        }
        return all;
      }
    }
  }

  @Test
  void aResumedRunEndsBitIdenticalToAnUninterruptedOne() throws Exception {
    float[] straight = run(tmp.resolve("straight"), 0, 3, false, Placement.RESIDENT);
    // stops after the first epoch, checkpoint written
    run(tmp.resolve("interrupted"), 0, 1, false, Placement.RESIDENT);
    assertEquals(
        "epoch-0001", Files.readString(tmp.resolve("interrupted/checkpoints/latest")).strip());
    float[] resumed = run(tmp.resolve("interrupted"), 1, 3, true, Placement.RESIDENT);
    org.junit.jupiter.api.Assertions.assertArrayEquals(
        straight, resumed, "weights and running statistics after resume");
    assertTrue(Files.exists(tmp.resolve("interrupted/checkpoints/epoch-0003/model.safetensors")));
  }

  /**
   * Stopped within an epoch (after step 15 of 9-batch epochs, checkpoints every 4 steps), a run
   * resumes from checkpoint step-000000012, three batches into its second epoch, and ends with the
   * uninterrupted run's weights, bit for bit: the loader restarts the epoch's order at that batch,
   * the schedule and dropout at that step.
   */
  @Test
  void aRunStoppedWithinAnEpochResumesFromItsStepCheckpointBitIdentical() throws Exception {
    for (Placement placement : List.of(Placement.RESIDENT, Placement.OFFLOADED)) {
      float[] straight = run(tmp.resolve("straight-" + placement), 0, 3, false, placement);
      Path interrupted = tmp.resolve("interrupted-" + placement);
      Supplier<Backend> cpu = () -> new CpuBackend(2);
      IllegalStateException stopped =
          org.junit.jupiter.api.Assertions.assertThrows(
              IllegalStateException.class,
              () -> run(interrupted, 0, 3, false, placement, cpu, () -> {}, 4, 15));
      assertTrue(stopped.getMessage().contains("after step 15"), stopped.getMessage());
      assertEquals(
          "step-000000012", Files.readString(interrupted.resolve("checkpoints/latest")).strip());
      float[] resumed = run(interrupted, 1, 3, true, placement, cpu, () -> {}, 4, -1);
      org.junit.jupiter.api.Assertions.assertArrayEquals(straight, resumed, placement.name());
    }
  }

  /**
   * The same run with two layers streamed and the optimizer on the host (clipped, with batch norm,
   * dropout and augmentation), straight and interrupted: the resident run's weights bit for bit.
   */
  @Test
  void anOffloadedRunMatchesTheResidentRunAndResumes() throws Exception {
    float[] straight = run(tmp.resolve("resident"), 0, 3, false, Placement.RESIDENT);
    org.junit.jupiter.api.Assertions.assertArrayEquals(
        straight,
        run(tmp.resolve("offloaded"), 0, 3, false, Placement.OFFLOADED),
        "offloaded, straight");
    run(tmp.resolve("interrupted"), 0, 1, false, Placement.OFFLOADED);
    org.junit.jupiter.api.Assertions.assertArrayEquals(
        straight,
        run(tmp.resolve("interrupted"), 1, 3, true, Placement.OFFLOADED),
        "offloaded, resumed after epoch 1");
  }

  private static Supplier<Backend> cuda(CudaSpec spec, String... faults) {
    return () -> EmulatorFaults.open(new BackendSpec(BackendSpec.Kind.CUDA, 2, spec), faults);
  }

  /**
   * The same training (loader with augmentation, batch norm, dropout, AdamW, clipping) on the
   * emulated GPU, with NVIDIA's libraries (the default: cuBLAS and cuDNN) and with the backend's
   * own kernels: the CPU run's weights up to summation order, and an offloaded CUDA run the
   * resident CUDA run's bit for bit on both paths.
   */
  @Test
  void theCudaBackendTrainsAsTheCpuBackendDoes() throws Exception {
    float[] cpu = run(tmp.resolve("cpu"), 0, 3, false, Placement.RESIDENT);
    Map<String, CudaSpec> paths =
        Map.of(
            // TF32 off: the comparison with the CPU's fp32 holds on a real GPU too (lent.sh)
            "libraries",
            CudaSpec.defaults().withTf32(CudaSpec.Tf32.OFF),
            "kernels",
            CudaSpec.ownKernels());
    for (Map.Entry<String, CudaSpec> path : paths.entrySet()) {
      String name = path.getKey();
      float[] gpu =
          run(
              tmp.resolve("cuda-" + name),
              0,
              3,
              false,
              Placement.RESIDENT,
              cuda(path.getValue()),
              () -> {});
      double worst = 0;
      for (int i = 0; i < cpu.length; i++) {
        worst = Math.max(worst, Math.abs(cpu[i] - gpu[i]) / Math.max(1, Math.abs(cpu[i])));
      }
      assertTrue(worst < 1e-3, name + ": largest difference from the cpu run " + worst);
      System.out.printf("cuda (%s) vs cpu after 3 epochs: largest difference %.2e%n", name, worst);
      org.junit.jupiter.api.Assertions.assertArrayEquals(
          gpu,
          run(
              tmp.resolve("cuda-offloaded-" + name),
              0,
              3,
              false,
              Placement.OFFLOADED,
              cuda(path.getValue()),
              () -> {}),
          "offloaded on cuda (" + name + "), bit for bit");
    }
  }

  /**
   * The GPU falls off the bus in epoch 2: the run stops with an error, epoch 1's checkpoint loads.
   */
  @Test
  void aLostGpuStopsTheRunWithItsLastCheckpointIntact() throws Exception {
    Path unplugged = tmp.resolve("unplugged");
    Path run = tmp.resolve("lost");
    var e =
        assertThrows(
            BackendException.class,
            () ->
                run(
                    run,
                    0,
                    3,
                    false,
                    Placement.RESIDENT,
                    cuda(CudaSpec.defaults(), "lose-device-when=" + unplugged),
                    () -> {
                      try {
                        Files.writeString(unplugged, "gone");
                      } catch (java.io.IOException io) {
                        throw new java.io.UncheckedIOException(io);
                      }
                    }));
    assertTrue(e.getMessage().contains("CUDA_ERROR_UNKNOWN"), e.getMessage());
    for (Throwable closing : e.getSuppressed()) { // the fault again, never a leak
      assertTrue(closing.getMessage().contains("CUDA_ERROR_UNKNOWN"), closing.toString());
    }
    var latest = dev.ramtrain.trainer.checkpoint.Checkpoints.loadLatest(run);
    assertEquals(1, latest.epochsDone());
    assertEquals(9, latest.globalStep());
  }

  /**
   * bf16 precision trains the same model a little differently from fp32 (it is on), the same on the
   * emulated GPU up to summation order, and offloaded exactly as resident.
   */
  @Test
  void bf16PrecisionTrainsOnBothBackendsAndOffloaded() throws Exception {
    float[] fp32 = run(tmp.resolve("fp32"), 0, 3, false, Placement.RESIDENT);
    float[] bf16 = run(tmp.resolve("bf16"), 0, 3, false, Placement.RESIDENT_BF16);
    double fromFp32 = largestDifference(fp32, bf16);
    assertTrue(fromFp32 > 1e-4 && fromFp32 < 0.1, "bf16 vs fp32 weights: " + fromFp32);
    float[] gpu =
        run(
            tmp.resolve("bf16-cuda"),
            0,
            3,
            false,
            Placement.RESIDENT_BF16,
            cuda(CudaSpec.ownKernels()),
            () -> {});
    double fromCpu = largestDifference(bf16, gpu);
    System.out.printf("bf16: cuda vs cpu %.2e, bf16 vs fp32 %.2e%n", fromCpu, fromFp32);
    assertTrue(fromCpu < 1e-4, "bf16 on cuda vs cpu: " + fromCpu);
    org.junit.jupiter.api.Assertions.assertArrayEquals(
        bf16,
        run(tmp.resolve("bf16-offloaded"), 0, 3, false, Placement.OFFLOADED_BF16),
        "bf16 offloaded, bit for bit");
  }

  private static double largestDifference(float[] a, float[] b) {
    double worst = 0;
    for (int i = 0; i < a.length; i++) {
      worst = Math.max(worst, Math.abs(a[i] - b[i]) / Math.max(1, Math.abs(a[i])));
    }
    return worst;
  }
}
