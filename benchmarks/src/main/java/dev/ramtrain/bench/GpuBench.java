package dev.ramtrain.bench;

import static jcuda.driver.JCudaDriver.cuCtxSetCurrent;
import static jcuda.driver.JCudaDriver.cuDeviceGet;
import static jcuda.driver.JCudaDriver.cuDevicePrimaryCtxRelease;
import static jcuda.driver.JCudaDriver.cuDevicePrimaryCtxRetain;
import static jcuda.driver.JCudaDriver.cuInit;
import static jcuda.driver.JCudaDriver.cuMemAlloc;
import static jcuda.driver.JCudaDriver.cuMemFree;
import static jcuda.driver.JCudaDriver.cuMemFreeHost;
import static jcuda.driver.JCudaDriver.cuMemHostAlloc;
import static jcuda.driver.JCudaDriver.cuMemcpyDtoH;
import static jcuda.driver.JCudaDriver.cuMemcpyHtoD;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.CudaSpec;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cuda.CudaBackend;
import dev.ramtrain.trainer.backend.ops.Convert;
import dev.ramtrain.trainer.backend.ops.Fill;
import dev.ramtrain.trainer.backend.ops.Gemm;
import dev.ramtrain.trainer.backend.ops.GemmOperand;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.nn.Precision;
import dev.ramtrain.trainer.offload.DeviceProfile;
import dev.ramtrain.trainer.offload.HostProfile;
import dev.ramtrain.trainer.offload.HostUpdateTiming;
import dev.ramtrain.trainer.offload.LayerCost;
import dev.ramtrain.trainer.offload.PlacementPlan;
import dev.ramtrain.trainer.offload.Streaming;
import java.util.List;
import java.util.Map;
import jcuda.Pointer;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.JCudaDriver;

/**
 * What a GPU does for ramtrain, printed side by side with what the planner predicts; run by
 * benchmarks/gpu/run.sh on a machine that has an NVIDIA driver (and nothing else: the bundle
 * carries its Java runtime and jars):
 *
 * <ul>
 *   <li>host-device bandwidth, pageable and pinned (synchronous driver copies), and what the
 *       backend's asynchronous copies reach against that pinned peak (target: 90%);
 *   <li>GEMM TFLOP/s, fp32 and bf16, by cuBLAS (when libcublas.so.13 loads) and by ramtrain's own
 *       kernels;
 *   <li>training steps of a model, resident against streamed for a device budget that holds its
 *       activations and a quarter of its weights' state (RATIO), at the planner's smallest batch
 *       that hides the copies and at a quarter of it (or at BATCHES, e.g. 2,32): step times,
 *       exposed copy (target: at most 5% of the step at the planned batch), overlap, samples/s
 *       (target: streamed at most 1.05x resident there), and the plan's predicted step times beside
 *       them.
 * </ul>
 *
 * <p>{@code GpuBench memory SPEC BATCH STEPS [MODE,...]} instead times resident steps at one batch
 * and prints the backend's device peak beside the plan's figure and the host's launch time: what
 * benchmarks/gpu/torch_anchor.py measures for PyTorch (max_memory_allocated) at the same batch, in
 * the same modes: {@code fp32} (TF32 off on both sides), {@code tf32} (PyTorch's defaults: TF32 in
 * convolutions) and {@code bf16} (autocast). {@code GpuBench gemm N...} times n³ GEMMs through the
 * engine's default choice, fp32 (TF32 off) and bf16, beside torch_anchor.py's {@code matmul}.
 *
 * <p>Usage: GpuBench [SPEC [GEMM_N [STEPS [RATIO [BATCHES]]]]] | GpuBench memory SPEC BATCH STEPS
 * [MODES] | GpuBench gemm N... | GpuBench ops SPEC BATCH STEPS [MODE] (time by operation type).
 */
public final class GpuBench {
  private static final long COPY_BYTES = 256L << 20;

  public static void main(String[] args) {
    if ((args.length == 4 || args.length == 5) && args[0].equals("memory")) {
      for (String mode : (args.length == 5 ? args[4] : "fp32").split(",")) {
        memory(
            args[1],
            Integer.parseInt(args[2]),
            Integer.parseInt(args[3]),
            Mode.valueOf(mode.toUpperCase()));
      }
      return;
    }
    if ((args.length == 4 || args.length == 5) && args[0].equals("ops")) {
      Mode mode = Mode.valueOf((args.length == 5 ? args[4] : "fp32").toUpperCase());
      operations(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]), mode);
      return;
    }
    if (args.length >= 2 && args[0].equals("gemm")) {
      BackendSpec fp32 =
          new BackendSpec(
              BackendSpec.Kind.CUDA,
              Runtime.getRuntime().availableProcessors(),
              CudaSpec.defaults().withTf32(CudaSpec.Tf32.OFF));
      for (int i = 1; i < args.length; i++) {
        gemm(fp32, Integer.parseInt(args[i]));
      }
      return;
    }
    String spec = args.length > 0 ? args[0] : "mlp:4096-8192-8192-8192-8192-8192-8192-1000";
    int gemmN = args.length > 1 ? Integer.parseInt(args[1]) : 8192;
    int steps = args.length > 2 ? Integer.parseInt(args[2]) : 20;
    double ratio = args.length > 3 ? Double.parseDouble(args[3]) : 4;
    // the streamed batches, e.g. 2,32; by default the one the plan hides copies from and a quarter
    List<Integer> batches =
        args.length > 4
            ? java.util.Arrays.stream(args[4].split(",")).map(Integer::valueOf).toList()
            : List.of();
    int threads = Runtime.getRuntime().availableProcessors();
    BackendSpec kernels = new BackendSpec(BackendSpec.Kind.CUDA, threads, CudaSpec.ownKernels());
    BackendSpec auto = new BackendSpec(BackendSpec.Kind.CUDA, threads, CudaSpec.defaults());
    try (CudaBackend b = CudaBackend.open(auto)) {
      System.out.println("# device: " + b.describe());
      long copyBytes = Math.min(COPY_BYTES, b.freeMemoryBytes() / 8);
      double pinnedPeak = driverBandwidth(copyBytes);
      double async = backendCopy(b, copyBytes);
      System.out.printf(
          "backend H2D (async copy on a stream, event-timed): %.1f GB/s = %.0f%% of the pinned"
              + " peak (target >= 90%%)%n",
          async / 1e9, 100 * async / pinnedPeak);
    }
    gemm(auto, gemmN);
    gemm(kernels, gemmN);
    steps(auto, spec, steps, ratio, threads, batches);
  }

  /** Synchronous driver copies of {@code bytes}, pageable (a Java array) and pinned; best of 5. */
  private static double driverBandwidth(long bytes) {
    cuInit(0);
    CUdevice device = new CUdevice();
    cuDeviceGet(device, 0);
    CUcontext context = new CUcontext();
    cuDevicePrimaryCtxRetain(context, device);
    cuCtxSetCurrent(context);
    CUdeviceptr d = new CUdeviceptr();
    cuMemAlloc(d, bytes);
    Pointer pinned = new Pointer();
    cuMemHostAlloc(pinned, bytes, JCudaDriver.CU_MEMHOSTALLOC_PORTABLE);
    byte[] pageable = new byte[(int) Math.min(bytes, Integer.MAX_VALUE - 8)];
    try {
      double h2dPageable =
          best(() -> cuMemcpyHtoD(d, Pointer.to(pageable), pageable.length), pageable.length);
      double h2dPinned = best(() -> cuMemcpyHtoD(d, pinned, bytes), bytes);
      double d2hPageable =
          best(() -> cuMemcpyDtoH(Pointer.to(pageable), d, pageable.length), pageable.length);
      double d2hPinned = best(() -> cuMemcpyDtoH(pinned, d, bytes), bytes);
      System.out.printf(
          "driver copies of %d MiB: H2D pageable %.1f GB/s, pinned %.1f GB/s; D2H pageable %.1f"
              + " GB/s, pinned %.1f GB/s%n",
          bytes >> 20, h2dPageable / 1e9, h2dPinned / 1e9, d2hPageable / 1e9, d2hPinned / 1e9);
      return h2dPinned;
    } finally {
      cuMemFreeHost(pinned);
      cuMemFree(d);
      cuDevicePrimaryCtxRelease(device);
    }
  }

  private static double best(Runnable copy, long bytes) {
    double seconds = Double.MAX_VALUE;
    for (int i = 0; i < 5; i++) {
      long t0 = System.nanoTime();
      copy.run();
      seconds = Math.min(seconds, (System.nanoTime() - t0) / 1e9);
    }
    return bytes / seconds;
  }

  /** Bytes per second of the backend's pinned host-to-device copy, timed by events; best of 5. */
  private static double backendCopy(Backend b, long bytes) {
    Stream s = b.createStream("copy");
    try (HostBuffer host = b.allocateHost("bench.host", bytes);
        DeviceBuffer device = b.allocate("bench.device", DType.U8, bytes);
        Event start = b.createEvent("start");
        Event end = b.createEvent("end")) {
      double best = Double.MAX_VALUE;
      for (int i = 0; i < 5; i++) {
        start.record(s);
        b.copy(host, 0, device, bytes, s);
        end.record(s);
        end.synchronize();
        best = Math.min(best, end.millisSince(start) / 1e3);
      }
      return bytes / best;
    }
  }

  /** n x n x n GEMMs, fp32 and bf16 x bf16 with fp32 accumulation; best of 5 by events. */
  private static void gemm(BackendSpec spec, int n) {
    try (CudaBackend b = CudaBackend.open(spec)) {
      Stream s = b.createStream("gemm");
      long elements = (long) n * n;
      try (DeviceBuffer a = b.allocate("a", DType.F32, elements);
          DeviceBuffer c = b.allocate("c", DType.F32, elements);
          DeviceBuffer half = b.allocate("a.bf16", DType.BF16, elements);
          Event start = b.createEvent("start");
          Event end = b.createEvent("end")) {
        b.run(s, new Fill(a, 0.5f));
        b.run(s, new Convert(a, half));
        double fp32 = Double.MAX_VALUE;
        double bf16 = Double.MAX_VALUE;
        for (int i = 0; i < 5; i++) {
          fp32 = Math.min(fp32, seconds(b, s, start, end, square(n, a, c)));
          bf16 = Math.min(bf16, seconds(b, s, start, end, square(n, half, c)));
        }
        double flops = 2.0 * n * n * n;
        System.out.printf(
            "GEMM %d^3 by %s: fp32 %.2f TFLOP/s, bf16 %.2f TFLOP/s%n",
            n,
            b.describe().replaceAll(".*GEMM by (.*), convolutions by .*", "$1"),
            flops / fp32 / 1e12,
            flops / bf16 / 1e12);
      }
    }
  }

  /** C = A A for n×n matrices. */
  private static Gemm square(int n, DeviceBuffer a, DeviceBuffer c) {
    return new Gemm(
        n, n, n, 1f, GemmOperand.of(a, n), GemmOperand.of(a, n), 0f, GemmOperand.of(c, n));
  }

  /** Seconds {@code gemm} takes on the device, between two events on {@code s}. */
  private static double seconds(Backend b, Stream s, Event start, Event end, Gemm gemm) {
    start.record(s);
    b.run(s, gemm);
    end.record(s);
    end.synchronize();
    return end.millisSince(start) / 1e3;
  }

  /** The arithmetic of a {@code memory} row, as torch_anchor.py's modes. */
  private enum Mode {
    FP32(CudaSpec.Tf32.OFF, Precision.FP32),
    TF32(CudaSpec.Tf32.CONVOLUTIONS, Precision.FP32),
    BF16(CudaSpec.Tf32.CONVOLUTIONS, Precision.BF16);

    final CudaSpec.Tf32 tf32;
    final Precision precision;

    Mode(CudaSpec.Tf32 tf32, Precision precision) {
      this.tf32 = tf32;
      this.precision = precision;
    }

    /** The CUDA backend with the libraries and this mode's TF32, on every host core. */
    BackendSpec backend() {
      return new BackendSpec(
          BackendSpec.Kind.CUDA,
          Runtime.getRuntime().availableProcessors(),
          CudaSpec.defaults().withTf32(tf32));
    }
  }

  /**
   * Resident steps of {@code model} at {@code batch} in {@code mode}: step time, device peak
   * against the plan, the host's launch time.
   */
  private static void memory(String model, int batch, int steps, Mode mode) {
    BackendSpec spec = mode.backend();
    int threads = spec.threads();
    ImageShape image = ModelSpec.pretrainingInput(model).orElse(TrainingSteps.IMAGE);
    List<LayerCost> costs;
    try (CudaBackend b = CudaBackend.open(spec)) {
      costs = LayerCost.measure(() -> ModelSpec.parse(model, image, mode.precision), b);
    }
    long planned = PlacementPlan.residentBytes(costs, batch);
    TrainingSteps.Run run =
        TrainingSteps.run(
            () -> CudaBackend.open(spec),
            model,
            image,
            mode.precision,
            batch,
            threads,
            null,
            steps);
    System.out.printf(
        "memory %s batch %d (%s) %s: resident step %.2f ms = %.1f samples/s; device peak %s, plan"
            + " %s (%+.1f%%); host launch %.2f ms = %.1f%% of the step%n",
        model,
        batch,
        image,
        mode.name().toLowerCase(),
        run.medianStepSeconds() * 1e3,
        batch / run.medianStepSeconds(),
        PlacementPlan.bytes(run.devicePeakBytes()),
        PlacementPlan.bytes(planned),
        100.0 * (planned - run.devicePeakBytes()) / run.devicePeakBytes(),
        run.medianHostSeconds() * 1e3,
        100 * run.medianHostSeconds() / run.medianStepSeconds());
  }

  /**
   * Where a resident step's device time goes, by operation type ({@link OperationTimes}: each
   * operation drained and timed alone), over {@code steps} steps after two of warm-up.
   */
  private static void operations(String model, int batch, int steps, Mode mode) {
    BackendSpec spec = mode.backend();
    int threads = spec.threads();
    ImageShape image = ModelSpec.pretrainingInput(model).orElse(TrainingSteps.IMAGE);
    OperationTimes[] timed = new OperationTimes[1];
    TrainingSteps.run(
        () -> timed[0] = new OperationTimes(CudaBackend.open(spec)),
        model,
        image,
        mode.precision,
        batch,
        threads,
        null,
        TrainingSteps.Clip.NONE,
        steps + 2,
        step -> {
          if (step == 2) {
            timed[0].startCounting();
          }
        });
    System.out.printf(
        "ops %s batch %d (%s) %s: device time by operation, each drained alone%n%s",
        model, batch, image, mode.name().toLowerCase(), timed[0].report(steps));
  }

  /**
   * Resident against streamed training steps at {@code wanted} batches, or where none are given at
   * the planned batch and a quarter of it.
   */
  private static void steps(
      BackendSpec spec, String model, int steps, double ratio, int threads, List<Integer> wanted) {
    // A timm-named model at its pretraining size (ViT-L/16, ConvNeXt-L: 224x224), else CIFAR's.
    ImageShape image = ModelSpec.pretrainingInput(model).orElse(TrainingSteps.IMAGE);
    List<LayerCost> costs;
    DeviceProfile profile;
    List<LayerCost> at64;
    HostProfile host;
    try (CudaBackend b = CudaBackend.open(spec)) {
      costs = LayerCost.measure(() -> ModelSpec.parse(model, image), b);
      profile = DeviceProfile.measure(b, "measured", b.freeMemoryBytes());
      host = HostProfile.measure(b, threads);
      at64 = LayerCost.timed(costs, () -> ModelSpec.parse(model, image), b, 64, threads);
    }
    long resident = PlacementPlan.plan(costs, 64, Long.MAX_VALUE, 2, false, profile).deviceBytes();
    // Weights, gradients and AdamW state (16 bytes a parameter) get 1/ratio of theirs; the
    // activations stay whole, or a convolutional model's budget could not even hold those.
    long state = 16 * costs.stream().mapToLong(LayerCost::parameters).sum();
    // At least what streaming every layer needs: two fp32 slots and two gradient slots of the
    // largest layer (a small model's quarter may hold less).
    long floor = 16 * costs.stream().mapToLong(LayerCost::parameters).max().orElse(0);
    long budget = resident - state + Math.max((long) (state / ratio), floor);
    int planned = PlacementPlan.plan(at64, 64, budget, 2, false, profile).minBatchToHideCopies();
    System.out.printf(
        "model %s: resident footprint at batch 64 %s, budget %s (1/%.0f of the weights' state);"
            + " profile %.1f GB/s,"
            + " %.1f TFLOP/s, host memory %.1f GB/s; the plan hides copies from batch %d%n",
        model,
        PlacementPlan.bytes(resident),
        PlacementPlan.bytes(budget),
        ratio,
        profile.copyBytesPerSecond() / 1e9,
        profile.flopsPerSecond() / 1e12,
        host.bandwidthBytesPerSecond() / 1e9,
        planned);
    // Both, or the planned one alone where a quarter of it rounds to it (1 hides the copies).
    List<Integer> batches =
        !wanted.isEmpty()
            ? wanted
            : java.util.stream.Stream.of(Math.max(1, planned / 4), Math.max(1, planned))
                .distinct()
                .toList();
    for (int batch : batches) {
      List<LayerCost> timed;
      try (CudaBackend b = CudaBackend.open(spec)) {
        timed = LayerCost.timed(costs, () -> ModelSpec.parse(model, image), b, batch, threads);
      }
      PlacementPlan plan =
          planned(timed, batch, budget, profile, host, HostUpdateTiming.AS_GRADIENTS_LAND);
      TrainingSteps.Run res =
          TrainingSteps.run(
              () -> CudaBackend.open(spec), model, image, batch, threads, null, steps);
      TrainingSteps.Run str =
          TrainingSteps.run(
              () -> CudaBackend.open(spec),
              model,
              image,
              batch,
              threads,
              Streaming.of(plan, false, 0),
              steps);
      Map<String, Object> m = str.lastMetrics();
      double stepMs = str.medianStepSeconds() * 1e3;
      double exposedMs = metric(m, "exposed_copy_ms");
      System.out.printf(
          "batch %d (%s): resident %.2f ms (plan %.2f), streamed %.2f ms (plan %.2f) = %.3fx"
              + " resident; exposed copy %.2f ms = %.1f%% of the step, overlap %.2f; %.0f vs %.0f"
              + " samples/s; device peak resident %s (plan %s), streamed %s (plan %s)%n",
          batch,
          batch == planned ? "planned" : batch < planned ? "below the plan" : "above the plan",
          res.medianStepSeconds() * 1e3,
          plan.residentStepSeconds() * 1e3,
          stepMs,
          plan.streamedStepSeconds() * 1e3,
          str.medianStepSeconds() / res.medianStepSeconds(),
          exposedMs,
          100 * exposedMs / stepMs,
          metric(m, "overlap"),
          batch / res.medianStepSeconds(),
          batch / str.medianStepSeconds(),
          PlacementPlan.bytes(res.devicePeakBytes()),
          PlacementPlan.bytes(
              PlacementPlan.plan(timed, batch, Long.MAX_VALUE, 2, false, profile).deviceBytes()),
          PlacementPlan.bytes(str.devicePeakBytes()),
          PlacementPlan.bytes(plan.deviceBytes()));
      // Clipped as fine-tuning recipes clip (norm 1): the host update after backward, or as the
      // gradients land, redone where the norm clips (ramtrain.offload.clip-update).
      double[] clippedMs = new double[2];
      Object[] exposed = new Object[2];
      Object redone = null;
      for (int k = 0; k < 2; k++) {
        TrainingSteps.Run clipped =
            TrainingSteps.run(
                () -> CudaBackend.open(spec),
                model,
                image,
                dev.ramtrain.trainer.nn.Precision.FP32,
                batch,
                threads,
                Streaming.of(plan, false, 0),
                new TrainingSteps.Clip(1f, k == 1),
                steps,
                step -> {});
        clippedMs[k] = clipped.medianStepSeconds() * 1e3;
        exposed[k] = clipped.lastMetrics().get("optimizer_exposed_ms");
        redone = k == 1 ? clipped.lastMetrics().get("clip_redone") : redone;
      }
      System.out.printf(
          "  streamed, clip-norm 1: serial update %.2f ms (plan %.2f; host update exposed %s ms),"
              + " speculative %.2f ms (plan %.2f; exposed %s ms, last step redone %s) = %.3fx"
              + " serial%n",
          clippedMs[0],
          planned(timed, batch, budget, profile, host, HostUpdateTiming.AFTER_BACKWARD)
                  .streamedStepSeconds()
              * 1e3,
          exposed[0],
          clippedMs[1],
          planned(timed, batch, budget, profile, host, HostUpdateTiming.SPECULATIVE)
                  .streamedStepSeconds()
              * 1e3,
          exposed[1],
          redone,
          clippedMs[1] / clippedMs[0]);
      // Where the streamed step's time goes, when it is not the exposed copy.
      System.out.printf(
          "  streamed step breakdown: compute %.2f ms, copy in %.2f ms, copy out %.2f ms,"
              + " host optimizer %.2f ms (exposed %.2f ms)%n",
          metric(m, "compute_ms"),
          metric(m, "copy_in_ms"),
          metric(m, "copy_out_ms"),
          metric(m, "host_optimizer_ms"),
          metric(m, "optimizer_exposed_ms"));
    }
  }

  /** The placement for {@code costs}, predicted with the host update as {@code timing} runs it. */
  private static PlacementPlan planned(
      List<LayerCost> costs,
      int batch,
      long budget,
      DeviceProfile profile,
      HostProfile host,
      HostUpdateTiming timing) {
    return PlacementPlan.plan(
        costs, batch, budget, 2, false, profile, false, 8, PlacementPlan.Zero.NONE, host, timing);
  }

  private static double metric(Map<String, Object> metrics, String key) {
    return ((Number) metrics.getOrDefault(key, 0)).doubleValue();
  }
}
