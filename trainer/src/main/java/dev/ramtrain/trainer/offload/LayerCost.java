package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.AdamWStep;
import dev.ramtrain.trainer.backend.ops.DropoutMask;
import dev.ramtrain.trainer.nn.Attention;
import dev.ramtrain.trainer.nn.Conv2d;
import dev.ramtrain.trainer.nn.DepthwiseConv2d;
import dev.ramtrain.trainer.nn.GradientSlots;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.Linear;
import dev.ramtrain.trainer.nn.ParamSpec;
import dev.ramtrain.trainer.nn.Parameters;
import dev.ramtrain.trainer.nn.Residual;
import dev.ramtrain.trainer.nn.ResidualBlock;
import dev.ramtrain.trainer.nn.Workspace;
import dev.ramtrain.trainer.optim.AdamWSpec;
import dev.ramtrain.trainer.optim.ParamGroups;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Supplier;

/**
 * What one top-level layer costs: its parameters, the device memory its activations take (a fixed
 * part and a part per sample; its output is part of that), the scratch it takes within one call
 * (likewise fixed and per sample: a depthwise convolution works one image at a time; the model's
 * workspace, shared by all layers: a plan counts the largest once), the input-gradient slots its
 * inner layers name and the largest input among them (the model's {@link GradientSlots}, shared
 * likewise: a plan counts each slot once, at the model's largest input), its training FLOPs per
 * sample (forward and backward), and, once {@link #timed} on a backend, the seconds it really takes
 * there: forward and backward per sample, a device AdamW step over its parameters, a host AdamW
 * step over them, and whether an offloaded step can hide that host step (0 and hidden while not
 * measured).
 */
public record LayerCost(
    String name,
    long parameters,
    long activationBytesFixed,
    long activationBytesPerSample,
    long outputBytesPerSample,
    long flopsPerSample,
    double secondsPerSample,
    double updateSeconds,
    long scratchBytesFixed,
    long scratchBytesPerSample,
    double hostUpdateSeconds,
    boolean hostUpdateExposed,
    Set<String> gradientSlots,
    long largestInputBytesPerSample) {

  public LayerCost {
    gradientSlots = Set.copyOf(gradientSlots);
  }

  /** A layer's memory and FLOPs, its times not measured, no scratch. */
  public LayerCost(
      String name,
      long parameters,
      long activationBytesFixed,
      long activationBytesPerSample,
      long outputBytesPerSample,
      long flopsPerSample) {
    this(
        name,
        parameters,
        activationBytesFixed,
        activationBytesPerSample,
        outputBytesPerSample,
        flopsPerSample,
        0,
        0,
        0,
        0,
        0,
        false,
        Set.of(),
        0);
  }

  /** The host AdamW seconds an offloaded step cannot hide behind the device's work. */
  public double exposedHostUpdateSeconds() {
    return hostUpdateExposed ? hostUpdateSeconds : 0;
  }

  /** Whether {@link #timed} measured this layer. */
  public boolean measured() {
    return secondsPerSample > 0;
  }

  public long activationBytes(int batch) {
    return activationBytesFixed + activationBytesPerSample * batch;
  }

  public long scratchBytes(int batch) {
    return scratchBytesFixed + scratchBytesPerSample * batch;
  }

  /**
   * The model's gradient slots at {@code batch}: every slot any of {@code layers} names, each the
   * largest input of them all.
   */
  static long gradientSlotBytes(List<LayerCost> layers, int batch) {
    long slots = layers.stream().flatMap(l -> l.gradientSlots.stream()).distinct().count();
    long largest = layers.stream().mapToLong(LayerCost::largestInputBytesPerSample).max().orElse(0);
    return slots * largest * batch;
  }

  /** The model's workspace at {@code batch}: the largest scratch any of {@code layers} takes. */
  static long workspaceBytes(List<LayerCost> layers, int batch) {
    return layers.stream().mapToLong(l -> l.scratchBytes(batch)).max().orElse(0);
  }

  /**
   * Measures the layers {@code model} builds by binding each alone on {@code backend} at batch 1
   * and at batch 2 and reading what the backend allocated: the plan's activation figures are the
   * layers' own allocations, not a second formula that could drift from them.
   */
  public static List<LayerCost> measure(Supplier<List<Layer>> model, Backend backend) {
    List<Layer> atOne = model.get();
    List<Layer> atTwo = model.get();
    List<LayerCost> costs = new ArrayList<>();
    for (int i = 0; i < atOne.size(); i++) {
      Layer layer = atOne.get(i);
      Set<String> slots = new HashSet<>();
      long one = activationBytes(layer, i, backend, 1, slots);
      long two = activationBytes(atTwo.get(i), i, backend, 2, slots);
      long params = layer.parameters().stream().mapToLong(ParamSpec::count).sum();
      costs.add(
          new LayerCost(
              layer.name(),
              params,
              2 * one - two,
              two - one,
              4L * layer.outputSize(),
              flops(layer),
              0,
              0,
              2 * layer.scratchBytes(backend, 1) - layer.scratchBytes(backend, 2),
              layer.scratchBytes(backend, 2) - layer.scratchBytes(backend, 1),
              0,
              false,
              slots,
              4L * layer.largestInput()));
    }
    return costs;
  }

  /**
   * Device bytes an unbound layer allocates besides its parameters and their gradients at {@code
   * batch}: activations and buffers (running statistics); the scratch and the gradient slots it
   * names (into {@code slots}) left out: the plan counts those once for the model.
   */
  private static long activationBytes(
      Layer layer, int index, Backend backend, int batch, Set<String> slots) {
    try (Workspace scratch = Workspace.forLayers(backend, List.of(layer), batch);
        GradientSlots gradients = GradientSlots.forLayers(backend, List.of(layer), batch)) {
      long before = backend.allocatedBytes();
      long params = layer.parameters().stream().mapToLong(ParamSpec::count).sum();
      try (Parameters p = Parameters.allocate(backend, layer.parameters(), layer.buffers())) {
        try {
          layer.bind(backend, p.sharing(scratch, gradients).topLevelGradientIn(index), batch);
          slots.addAll(gradients.names());
          return backend.allocatedBytes() - before - 8 * params - gradients.bytes();
        } finally {
          layer.close();
        }
      }
    }
  }

  /**
   * {@code costs} with the seconds each layer takes on {@code backend} at {@code batch}: built
   * alone with random weights, input and output gradient, one layer at a time (a model that must be
   * offloaded never has to fit), forward and backward timed over three steps after a warm-up
   * (median), and a device AdamW step over its parameters. What the backend really does for these
   * shapes, where FLOPs over a large GEMM's rate runs several times too fast.
   */
  public static List<LayerCost> timed(
      List<LayerCost> costs,
      Supplier<List<Layer>> model,
      Backend backend,
      int batch,
      int hostThreads) {
    return timed(costs, model, backend, batch, hostThreads, OffloadSpec.OptimizerState.FP32);
  }

  /** As above, the host AdamW timed with its moments in {@code state}. */
  public static List<LayerCost> timed(
      List<LayerCost> costs,
      Supplier<List<Layer>> model,
      Backend backend,
      int batch,
      int hostThreads,
      OffloadSpec.OptimizerState state) {
    List<Layer> layers = model.get();
    List<LayerCost> timed = new ArrayList<>();
    try (Stream s = backend.createStream("layer-timing")) {
      // An offloaded step updates each layer on the host as its gradient lands, behind the rest of
      // backward; the layer whose gradient lands last (the first with weights) has nothing left to
      // hide behind. On the CPU backend the host update shares the cores with compute: all of it
      // shows.
      int lastToLand = 0;
      while (lastToLand < costs.size() - 1 && costs.get(lastToLand).parameters == 0) {
        lastToLand++;
      }
      double[][] seconds = new double[layers.size()][];
      List<Integer> firstOfKind = new ArrayList<>();
      java.util.Set<Class<?>> kinds = new java.util.HashSet<>();
      for (int i = 0; i < layers.size(); i++) {
        seconds[i] = time(layers.get(i), backend, s, batch, i > 0);
        if (kinds.add(layers.get(i).getClass())) {
          firstOfKind.add(i);
        }
      }
      // The first layer of each kind ran while the JIT still compiled the code the later ones
      // share (a 2048-wide MLP's first layer timed 2-5x its warm time): timed again, now warm,
      // on a model built afresh (a timed layer is closed), the faster of the two kept.
      List<Layer> again = model.get();
      for (int i : firstOfKind) {
        double[] warm = time(again.get(i), backend, s, batch, i > 0);
        seconds[i] =
            new double[] {Math.min(seconds[i][0], warm[0]), Math.min(seconds[i][1], warm[1])};
      }
      for (int i = 0; i < layers.size(); i++) {
        LayerCost c = costs.get(i);
        timed.add(
            new LayerCost(
                c.name,
                c.parameters,
                c.activationBytesFixed,
                c.activationBytesPerSample,
                c.outputBytesPerSample,
                c.flopsPerSample,
                Math.max(seconds[i][0] / batch, Double.MIN_NORMAL),
                seconds[i][1],
                c.scratchBytesFixed,
                c.scratchBytesPerSample,
                hostUpdateSeconds(backend, c.parameters, hostThreads, state),
                backend.sharesHostCores() || i == lastToLand,
                c.gradientSlots,
                c.largestInputBytesPerSample));
      }
    }
    return timed;
  }

  /** Median seconds of a host AdamW step over {@code params} on {@code threads} host threads. */
  private static double hostUpdateSeconds(
      Backend backend, long params, int threads, OffloadSpec.OptimizerState state) {
    if (params == 0) {
      return 0;
    }
    try (HostBuffer masters = backend.allocateHost("timing.masters", 4 * params);
        HostBuffer grads = backend.allocateHost("timing.grads", 4 * params);
        HostThreads pool = new HostThreads(threads);
        HostAdamW adamw =
            new HostAdamW(
                backend,
                masters,
                grads,
                new AdamWSpec(0.9f, 0.999f, 1e-8f, 0f),
                ParamGroups.uniform(params),
                pool,
                state,
                Bf16Copies.NONE,
                0,
                0)) {
      double[] seconds = new double[4];
      for (int it = 0; it < seconds.length; it++) {
        long t0 = System.nanoTime();
        adamw.beginStep(1e-9f).update(0, (int) params);
        seconds[it] = (System.nanoTime() - t0) / 1e9;
      }
      return median(seconds);
    }
  }

  /** Median forward+backward seconds of {@code layer} at {@code batch}, and of its AdamW step. */
  private static double[] time(
      Layer layer, Backend backend, Stream s, int batch, boolean needInputGrad) {
    long params = layer.parameters().stream().mapToLong(ParamSpec::count).sum();
    try (Parameters p = Parameters.allocate(backend, layer.parameters(), layer.buffers());
        DeviceBuffer x = backend.allocate("timing.x", DType.F32, (long) batch * layer.inputSize());
        DeviceBuffer dy =
            backend.allocate("timing.dy", DType.F32, (long) batch * layer.outputSize());
        DeviceBuffer m = backend.allocate("timing.m", DType.F32, params);
        DeviceBuffer v = backend.allocate("timing.v", DType.F32, params)) {
      p.initialize(backend, s, 1);
      backend.run(
          s, new DropoutMask(0.5f, 7, x)); // values of 0 and 2: inputs whose ReLUs and maxima vary
      backend.run(s, new DropoutMask(0.5f, 8, dy));
      layer.bind(backend, p, batch);
      try {
        double[] steps = new double[4];
        double[] updates = new double[4];
        for (int it = 0; it < steps.length; it++) {
          s.synchronize();
          long t0 = System.nanoTime();
          layer.forward(s, x, batch, true);
          layer.backward(s, dy, batch, needInputGrad);
          s.synchronize();
          long t1 = System.nanoTime();
          if (params > 0) {
            backend.run(
                s, new AdamWStep(p.values(), p.grads(), m, v, 1e-9f, 0.9f, 0.999f, 1e-8f, 0f, 1));
            s.synchronize();
          }
          steps[it] = (t1 - t0) / 1e9;
          updates[it] = (System.nanoTime() - t1) / 1e9;
        }
        return new double[] {median(steps), params > 0 ? median(updates) : 0};
      } finally {
        layer.close();
      }
    }
  }

  /** The median of the timed iterations (the first, a warm-up, left out). */
  private static double median(double[] values) {
    double[] timed = java.util.Arrays.copyOfRange(values, 1, values.length);
    java.util.Arrays.sort(timed);
    return timed[timed.length / 2];
  }

  /**
   * Training FLOPs per sample: a GEMM layer does 2 per weight and output position forward and twice
   * that backward (input and weight gradients); other layers a few per value, counted as 3.
   */
  static long flops(Layer layer) {
    if (layer instanceof Linear || layer instanceof Conv2d) {
      ParamSpec weight = layer.parameters().get(0);
      long positions = layer.outputSize() / weight.shape()[0]; // 1 for Linear
      return 6 * weight.count() * positions;
    }
    if (layer instanceof ResidualBlock block) {
      return block.children().stream().mapToLong(LayerCost::flops).sum();
    }
    if (layer instanceof Residual residual) {
      return residual.branch().stream().mapToLong(LayerCost::flops).sum() + 3L * layer.outputSize();
    }
    if (layer instanceof DepthwiseConv2d depthwise) {
      return 6L * depthwise.taps() * layer.outputSize();
    }
    if (layer instanceof Attention attention) {
      return attention.projections().stream().mapToLong(LayerCost::flops).sum()
          + attention.mixingFlopsPerSample();
    }
    return 3L * layer.outputSize();
  }
}
