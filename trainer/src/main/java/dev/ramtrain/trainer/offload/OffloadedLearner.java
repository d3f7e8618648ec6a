package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.Learner;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.Bf16;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.GradClipMath;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.checkpoint.Safetensors;
import dev.ramtrain.trainer.dist.DataParallel;
import dev.ramtrain.trainer.nn.ModelBlueprint;
import dev.ramtrain.trainer.nn.Parameters;
import dev.ramtrain.trainer.optim.EmaDecay;
import dev.ramtrain.trainer.optim.MovingAverage;
import dev.ramtrain.trainer.optim.OptimizerSpec;
import dev.ramtrain.trainer.optim.ParamGroups;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.ShortBuffer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * Offloaded training: a {@link StreamedModel} (masters and gradients in pinned host memory, layers
 * resident or streamed) and a {@link HostOptimizer} over its host slabs. Without clipping, each
 * layer's update runs on the host as soon as its gradient has landed, overlapped with the rest of
 * backward; clipping needs the norm of every gradient first, so then the update either runs over
 * the whole slab after backward (serial), or runs as without clipping and is redone from a kept
 * copy where the norm says clip ({@link SpeculativeClip}). Data parallel, each layer's gradient is
 * averaged over the ranks on the host optimizer thread as it lands, before its update (ZeRO-1: the
 * whole slab reduce-scattered after backward). Owns the model, the optimizer and the host threads.
 */
public final class OffloadedLearner implements Learner {
  private final Backend backend;
  private final StreamedModel model;
  private final HostOptimizer optimizer;
  private final HostThreads threads;
  private final float clipNorm;
  private final DataParallel ranks;
  private HostAverage average; // null: no --ema
  private MovingAverage bufferAverage; // the buffers' average, on the device as the buffers
  private long serialUpdateNanos; // the last step's clip and update after backward, if clipping
  private SpeculativeClip speculation; // null: a clipped step updates after backward
  private boolean redone; // the last step's speculative update was clipped and ran again
  private final DeviceGroup group; // null: this rank's host copy is its own
  private final int device; // this rank's device in its group: 0 owns the host copy
  private long updatesBegun; // backward-and-update calls so far
  private long seenPublished = -1; // a group's other device: the updates it last loaded after
  private long swapsSeen; // a group's other device: device 0's swaps of the average it followed

  /** Makes the host optimizer over a model's host slabs. */
  public interface OptimizerFactory {
    /** The optimizer of {@code slab}, on {@code threads}. */
    HostOptimizer create(HostOptimizer.Slab slab, HostThreads threads);

    /** The host optimizer {@code spec} describes, its state in fp32. */
    static OptimizerFactory of(OptimizerSpec spec, Backend backend) {
      return of(spec, backend, OffloadSpec.OptimizerState.FP32, 0);
    }

    /** The same, AdamW's moments in {@code state} rounded with the run's {@code seed}. */
    static OptimizerFactory of(
        OptimizerSpec spec, Backend backend, OffloadSpec.OptimizerState state, long seed) {
      return (slab, threads) -> HostOptimizer.create(spec, backend, slab, threads, state, seed);
    }
  }

  /**
   * Builds {@code model} streamed as {@code how} says, {@code hostThreads} host threads and the
   * optimizer; {@code clipNorm} 0: no clipping (which a delayed update requires).
   */
  public static OffloadedLearner build(
      ModelBlueprint model,
      Streaming how,
      OptimizerFactory optimizer,
      int hostThreads,
      float clipNorm,
      Backend backend,
      Stream stream) {
    return build(
        model,
        how,
        optimizer,
        hostThreads,
        clipNorm,
        false,
        backend,
        stream,
        DataParallel.single());
  }

  /**
   * The same, as one rank of {@code ranks} (which the caller closes); {@code speculative}: a
   * clipped step updates as its gradients land and is redone when the norm says clip ({@link
   * SpeculativeClip}), where clipping and no delayed update or ZeRO-1 are asked for.
   */
  public static OffloadedLearner build(
      ModelBlueprint model,
      Streaming how,
      OptimizerFactory optimizer,
      int hostThreads,
      float clipNorm,
      boolean speculative,
      Backend backend,
      Stream stream,
      DataParallel ranks) {
    return build(
        model, how, optimizer, hostThreads, clipNorm, speculative, backend, stream, ranks, null);
  }

  /**
   * The same, as device {@code ranks.deviceInNode()} of its node's {@code group} (null: a host copy
   * of its own): device 0 builds the host copy and the optimizer, and the others, waiting for it,
   * stream from that copy and hand their gradients to it ({@link DeviceGroup}).
   */
  public static OffloadedLearner build(
      ModelBlueprint model,
      Streaming how,
      OptimizerFactory optimizer,
      int hostThreads,
      float clipNorm,
      boolean speculative,
      Backend backend,
      Stream stream,
      DataParallel ranks,
      DeviceGroup group) {
    if (group != null && group.devices() != ranks.devicesPerNode()) {
      throw new IllegalArgumentException(
          "a group of "
              + group.devices()
              + " devices for ranks in nodes of "
              + ranks.devicesPerNode());
    }
    DeviceGroup shared = group != null && group.devices() > 1 ? group : null;
    if (shared != null && ranks.deviceInNode() > 0) {
      return buildOther(model, how, clipNorm, backend, stream, ranks, shared);
    }
    try {
      OffloadedLearner learner =
          buildOwn(
              model,
              how,
              optimizer,
              hostThreads,
              clipNorm,
              speculative,
              backend,
              stream,
              ranks,
              shared);
      if (shared != null) {
        learner.model.servesOtherDevices();
        shared.shareFirst(learner.model.slabs(), learner.optimizer);
      }
      return learner;
    } catch (RuntimeException e) {
      if (shared != null) {
        shared.firstFailed(e);
      }
      throw e;
    }
  }

  /** A node's other device: streams from device 0's host copy, keeping no optimizer of its own. */
  private static OffloadedLearner buildOther(
      ModelBlueprint model,
      Streaming how,
      float clipNorm,
      Backend backend,
      Stream stream,
      DataParallel ranks,
      DeviceGroup group) {
    int device = ranks.deviceInNode();
    DeviceGroup.Shared first;
    try {
      first = group.awaitFirst(device);
    } catch (RuntimeException e) {
      group.closed(false);
      throw e;
    }
    HostThreads threads = new HostThreads(1);
    StreamedModel streamed = null;
    try {
      streamed = new StreamedModel(model, how, backend, stream, null, first.slabs());
      return new OffloadedLearner(
          backend, streamed, first.optimizer(), threads, clipNorm, ranks, group, device);
    } catch (RuntimeException e) {
      if (streamed != null) {
        streamed.close();
      }
      threads.close();
      group.closed(true);
      throw e;
    }
  }

  private static OffloadedLearner buildOwn(
      ModelBlueprint model,
      Streaming how,
      OptimizerFactory optimizer,
      int hostThreads,
      float clipNorm,
      boolean speculative,
      Backend backend,
      Stream stream,
      DataParallel ranks,
      DeviceGroup group) {
    HostThreads threads = new HostThreads(hostThreads);
    StreamedModel streamed = null;
    try {
      streamed =
          new StreamedModel(
              model, how, backend, stream, ranks.partitionsGradients() ? ranks::share : null);
      HostBuffer masters = streamed.masters();
      HostBuffer gradients = streamed.hostGradients();
      ParamGroups.Layout layout = streamed.layout();
      long first = 0;
      Bf16Copies copies = streamed.updateCopies();
      if (ranks.partitionsOptimizerState()) {
        long[] share = ranks.share(streamed.parameterCount());
        masters = new HostSlice(masters, 4 * share[0], 4 * (share[1] - share[0]));
        if (!ranks.partitionsGradients()) { // ZeRO-2's gradient slab is the share's already
          gradients = new HostSlice(gradients, 4 * share[0], 4 * (share[1] - share[0]));
        }
        layout = layout.share(share[0], share[1]);
        first = share[0];
        copies = Bf16Copies.NONE; // the gathered shares are narrowed after the gather
      }
      HostOptimizer opt =
          optimizer.create(
              new HostOptimizer.Slab(masters, gradients, layout, first, copies), threads);
      OffloadedLearner learner =
          new OffloadedLearner(backend, streamed, opt, threads, clipNorm, ranks, group, 0);
      if (speculative
          && clipNorm > 0
          && !how.delayedUpdate()
          && !ranks.partitionsOptimizerState()) {
        List<HostBuffer> written = new ArrayList<>(List.of(masters));
        written.addAll(opt.state());
        try {
          learner.speculation =
              new SpeculativeClip(
                  backend,
                  gradients,
                  written,
                  opt.groups().frozen(Math.toIntExact(streamed.parameterCount())),
                  threads);
        } catch (RuntimeException e) {
          opt.close(); // the model and the threads close below
          throw e;
        }
      }
      return learner;
    } catch (RuntimeException e) {
      if (streamed != null) {
        streamed.close();
      }
      threads.close();
      throw e;
    }
  }

  /** {@code clipNorm} 0: no clipping. */
  public OffloadedLearner(
      Backend backend,
      StreamedModel model,
      HostOptimizer optimizer,
      HostThreads threads,
      float clipNorm,
      DataParallel ranks) {
    this(backend, model, optimizer, threads, clipNorm, ranks, null, 0);
  }

  private OffloadedLearner(
      Backend backend,
      StreamedModel model,
      HostOptimizer optimizer,
      HostThreads threads,
      float clipNorm,
      DataParallel ranks,
      DeviceGroup group,
      int device) {
    this.backend = backend;
    this.model = model;
    this.optimizer = optimizer;
    this.threads = threads;
    this.clipNorm = clipNorm;
    this.ranks = ranks;
    this.group = group;
    this.device = device;
  }

  /** A node's device other than 0: the host copy and its optimizer are device 0's. */
  private boolean sharesAnothersCopy() {
    return group != null && device > 0;
  }

  /**
   * Forward from the host copy as it is after every update begun so far. A node's device 0
   * publishes its updates first (they are done, their copies written), and its other devices wait
   * for that before loading anything.
   */
  @Override
  public DeviceBuffer forward(Stream compute, DeviceBuffer x, int batch, boolean training) {
    if (group != null && device == 0) {
      model.publishUpdates(compute);
      group.publish(updatesBegun);
    } else if (sharesAnothersCopy()) {
      long published = group.awaitPublished(device, updatesBegun);
      if (published != seenPublished) {
        seenPublished = published;
        model.hostCopyChanged();
      }
    }
    return model.forward(compute, x, batch, training);
  }

  @Override
  public StreamedModel network() {
    return model;
  }

  @Override
  public long parameterCount() {
    return model.parameterCount();
  }

  @Override
  public void beginStep(Stream compute, long step) {
    model.beginStep(compute, step);
  }

  /**
   * Offloaded gradients land in host memory layer by layer, over the last step's: accumulating them
   * there is not built yet, and the run settings refuse accumulation with offloading before this.
   */
  @Override
  public void continueStep(Stream compute, long dropoutSeed) {
    throw new UnsupportedOperationException("gradient accumulation of an offloaded model");
  }

  @Override
  public void accumulate(Stream compute, DeviceBuffer dlogits, int batch) {
    throw new UnsupportedOperationException("gradient accumulation of an offloaded model");
  }

  @Override
  public void backwardAndUpdate(Stream compute, DeviceBuffer dlogits, int batch, float lr) {
    updatesBegun++;
    if (sharesAnothersCopy()) { // device 0 adds this gradient to its own and updates for both
      if (bufferAverage != null) {
        bufferAverage.update(compute); // this device's buffers; the weights' average is device 0's
      }
      model.backward(
          compute, dlogits, batch, (from, to) -> ranks.contributeGradients(model.landed(from, to)));
      return;
    }
    if (bufferAverage != null) {
      bufferAverage.update(compute); // the buffers are final once forward has run
      average.beginUpdate();
    }
    HostUpdate optimizerStep = optimizer.beginStep(lr);
    // With --ema each range's average follows right after its update, on the same host thread.
    HostUpdate step =
        average == null || ranks.partitionsOptimizerState()
            ? optimizerStep
            : (from, to) -> {
              optimizerStep.update(from, to);
              average.update(from, to);
            };
    serialUpdateNanos = 0;
    HostBuffer grads = model.hostGradients();
    if (ranks.partitionsOptimizerState()) {
      updateShare(compute, dlogits, batch, step, grads);
      return;
    }
    // A node's device 0 delaying its update exchanges each layer as it lands and updates after
    // backward: its other devices may still read a layer's copies until they hand it over.
    boolean wholeAfterBackward = model.delaysThisStep() && group != null;
    if (clipNorm <= 0 && !wholeAfterBackward) {
      // Layers land in the same order on every rank, and the host thread averages and updates
      // them in that order, so the ranks' collectives pair up while backward goes on.
      HostUpdate averaged =
          ranks.worldSize() == 1
              ? step
              : (from, to) -> {
                averageLanded(grads, from, to);
                step.update(from, to);
              };
      model.backward(compute, dlogits, batch, averaged);
      return;
    }
    // Clipping: the ranks' gradients averaged layer by layer as they land, as without clipping
    // (so that the speculative and the serial update see the same bits).
    HostUpdate averaging =
        ranks.worldSize() == 1 ? null : (from, to) -> averageLanded(grads, from, to);
    if (model.delaysThisStep()) {
      delayedWholeStep(compute, dlogits, batch, step, averaging);
      return;
    }
    if (speculation != null) {
      speculativeStep(compute, dlogits, batch, step, averaging);
      return;
    }
    model.backward(compute, dlogits, batch, averaging);
    model.awaitGradients(compute);
    model.awaitUpdates();
    long start = System.nanoTime();
    clip(model.hostGradients(), false);
    step.update(0, model.parameterCount());
    serialUpdateNanos = System.nanoTime() - start;
    model.mastersUpdated();
  }

  /**
   * Layer [from, to)'s gradient, landed in {@code grads}, becomes its mean over the ranks (a node's
   * other devices' gradients added first, {@link DataParallel#averageGradients}).
   */
  private void averageLanded(HostBuffer grads, int from, int to) {
    ranks.averageGradients(grads.range(4L * from, 4L * (to - from)));
  }

  /**
   * A delayed step updated whole after backward (clipped, or on a node's device 0): each layer's
   * copies are published as its gradient lands (averaged over the ranks there), as an unclipped
   * delayed step does; the whole slab is then clipped (with a clip norm) and updated on the host
   * optimizer thread after backward, beside the next step's forward, which computes with the
   * published weights (the update before this one), as ZeRO-Offload's. AdamW and SGD are
   * element-wise: the same bits as updating layer by layer.
   */
  private void delayedWholeStep(
      Stream compute, DeviceBuffer dlogits, int batch, HostUpdate step, HostUpdate averaging) {
    model.backward(compute, dlogits, batch, averaging != null ? averaging : (from, to) -> {});
    HostBuffer g = model.hostGradients();
    model.afterBackward(
        (from, to) -> {
          if (clipNorm > 0) {
            clip(g, false);
          }
          step.update(from, to);
        });
  }

  /**
   * A clipped step updated as its gradients land, then validated: where the norm says clip (or is
   * not finite) the kept state goes back and the step runs again on the clipped gradients, as the
   * serial update would have run it ({@link SpeculativeClip}).
   */
  private void speculativeStep(
      Stream compute, DeviceBuffer dlogits, int batch, HostUpdate step, HostUpdate averaging) {
    speculation.beginStep();
    HostUpdate landed =
        (from, to) -> {
          if (averaging != null) {
            averaging.update(from, to);
          }
          speculation.landed(from, to);
          step.update(from, to);
        };
    model.backward(compute, dlogits, batch, landed);
    model.awaitGradients(compute);
    model.awaitUpdates();
    long start = System.nanoTime();
    float norm = speculation.norm();
    float scale = GradClipMath.scale(clipNorm, norm);
    redone = scale < 1 || !Float.isFinite(norm);
    if (redone) {
      speculation.restore();
      HostBuffer g = speculation.gradients();
      if (scale < 1) {
        threads.forRange(
            0,
            model.parameterCount(),
            (from, to) -> GradClipMath.scale(g.floats(from, to - from), scale, 0, to - from));
      }
      step.update(0, model.parameterCount());
      model.mastersUpdated();
    }
    serialUpdateNanos = System.nanoTime() - start;
  }

  /**
   * ZeRO-1: after backward the gradients are reduce-scattered (this rank's share averaged), this
   * rank's optimizer updates its share of the masters, and the ranks gather each other's updated
   * shares. ZeRO-2: each layer's gradient is reduced to its owners as it lands instead, the host
   * keeping this rank's share only; the same bits. Without clipping the weights are those of the
   * unpartitioned update, bit for bit (AdamW and SGD are element-wise); the clipping norm sums the
   * shares' squares over the ranks.
   */
  private void updateShare(
      Stream compute, DeviceBuffer dlogits, int batch, HostUpdate step, HostBuffer grads) {
    long[] share = ranks.share(model.parameterCount());
    int n = (int) (share[1] - share[0]);
    if (model.delaysThisStep()) {
      delayedShareStep(compute, dlogits, batch, step, grads, share);
      return;
    }
    HostBuffer mine;
    long start;
    if (ranks.partitionsGradients()) {
      model.backward(compute, dlogits, batch, (from, to) -> reduceToOwner(from, to, share, grads));
      model.awaitGradients(compute);
      model.awaitUpdates();
      start = System.nanoTime();
      mine = grads;
    } else {
      model.backward(compute, dlogits, batch, nodeSum(grads));
      model.awaitGradients(compute);
      model.awaitUpdates(); // bf16 gradients widened
      start = System.nanoTime();
      ranks.reduceScatterMean(grads, model.parts());
      mine = new HostSlice(grads, 4 * share[0], 4L * n);
    }
    if (clipNorm > 0) {
      clip(mine, true);
    }
    step.update(0, n);
    ranks.allGather(model.masters(), model.parts());
    if (average != null) {
      average.update(0, model.parameterCount()); // every rank's, of the gathered masters
    }
    serialUpdateNanos = System.nanoTime() - start;
    model.mastersChanged();
  }

  /**
   * ZeRO with the delayed update: backward publishes each layer's copies as its gradient lands
   * (ZeRO-2 reducing it to its owners there), and the share's reduction (ZeRO-1), clipping, update
   * and the gather of the masters run on the host optimizer thread after backward, beside the next
   * step's forward. Everything that talks to the other ranks there goes over the gradient ring, the
   * host optimizer thread's (the clipping norm's sum too: the figures ring is the loop's).
   */
  private void delayedShareStep(
      Stream compute,
      DeviceBuffer dlogits,
      int batch,
      HostUpdate step,
      HostBuffer grads,
      long[] share) {
    int n = (int) (share[1] - share[0]);
    boolean reduced = ranks.partitionsGradients();
    HostUpdate summed = nodeSum(grads);
    model.backward(
        compute,
        dlogits,
        batch,
        reduced
            ? (from, to) -> reduceToOwner(from, to, share, grads)
            : summed != null ? summed : (from, to) -> {});
    model.afterBackward(
        (from, to) -> {
          HostBuffer mine;
          if (reduced) {
            mine = grads;
          } else {
            ranks.reduceScatterMean(grads, model.parts());
            mine = new HostSlice(grads, 4 * share[0], 4L * n);
          }
          if (clipNorm > 0) {
            clip(mine, true);
          }
          step.update(0, n);
          ranks.allGather(model.masters(), model.parts());
          if (average != null) {
            average.update(0, model.parameterCount());
          }
        });
  }

  /**
   * ZeRO-1 on a node of several devices: each layer's gradient from the node's other devices added
   * to device 0's as it lands, so that the reduce-scatter after backward takes the node's sum; null
   * where a node is one device (nothing to add).
   */
  private HostUpdate nodeSum(HostBuffer grads) {
    if (ranks.devicesPerNode() == 1) {
      return null;
    }
    return (from, to) -> ranks.addNodeGradients(grads.range(4L * from, 4L * (to - from)));
  }

  /**
   * ZeRO-2, on the host optimizer thread as layer [from, to)'s gradient lands: reduced to its
   * owners over the gradient ring with ZeRO-1's chunks cut to the layer (so with its bits), and the
   * part in this rank's {@code share} kept in the share's gradient slab {@code kept}; the landing
   * slot is then free for the next layer but one.
   */
  private void reduceToOwner(int from, int to, long[] share, HostBuffer kept) {
    ByteBuffer landed = model.landed(from, to);
    ranks.addNodeGradients(landed);
    ranks.reduceToOwnersMean(landed, from, model.parameterCount());
    int a = (int) Math.max(from, share[0]);
    int b = (int) Math.min(to, share[1]);
    if (a < b) {
      kept.range(4 * (a - share[0]), 4L * (b - a)).put(0, landed, 4 * (a - from), 4 * (b - a));
    }
  }

  /**
   * Clips {@code g} to {@code clipNorm} with the resident kernel's arithmetic. When {@code g} is
   * this rank's share of the gradient (ZeRO), the squares of the other shares join the norm over
   * the gradient ring, whose members are the nodes' updating devices (on the loop's thread once
   * backward's reductions are done, or on the host optimizer thread in a delayed step).
   */
  private void clip(HostBuffer g, boolean share) {
    int n = Math.toIntExact(g.bytes() / 4);
    GradClipMath.clip(
        g::floats,
        n,
        optimizer.groups().frozen(n),
        clipNorm,
        share ? mine -> ranks.sumOnGradientRing(mine)[0] : whole -> whole,
        threads::forEach);
  }

  @Override
  public Map<String, Object> stepMetrics(Stream compute) {
    StepTimeline.Totals t = model.stepTotals(compute);
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("h2d_bytes", t.bytesIn());
    m.put("d2h_bytes", t.bytesOut());
    m.put("copy_in_ms", t.copyInMs());
    m.put("copy_out_ms", t.copyOutMs());
    m.put("compute_ms", t.computeMs());
    m.put("exposed_copy_ms", t.exposedMs());
    m.put("overlap", t.overlap());
    // Clipping updates after backward: then all of it is exposed.
    m.put("host_optimizer_ms", model.hostUpdateMillis() + serialUpdateNanos / 1e6);
    m.put(
        "optimizer_exposed_ms",
        model.delaysThisStep() // the update runs beside the next forward: what it did not hide
            ? model.delayedUpdateWaitMillis()
            : model.updateTailMillis() + serialUpdateNanos / 1e6);
    m.put("pinned_host_bytes", backend.allocatedHostBytes());
    if (speculation != null) {
      m.put("clip_redone", redone ? 1 : 0); // the speculative update clipped: run again
    }
    return m;
  }

  @Override
  public DeviceBuffer buffers() {
    return model.residentSlabs().buffers(); // every layer's, streamed or not
  }

  /**
   * The masters as tensors that read the host copy when written: a model over the heap (ViT-H/14's
   * 2.5 GB of fp32) is never copied whole. They hold until the next step changes the host copy.
   */
  @Override
  public List<Safetensors.Tensor> weights(Stream compute) {
    model.awaitUpdates();
    compute.synchronize();
    Parameters slabs = model.residentSlabs();
    List<Safetensors.Tensor> tensors =
        new ArrayList<>(HostValues.tensors(model.entries(), model.masters()));
    tensors.addAll(
        Checkpoints.tensors(
            slabs.bufferEntries(), Checkpoints.download(backend, compute, slabs.buffers())));
    return tensors;
  }

  @Override
  public Checkpoints.Snapshot snapshot(Stream compute) {
    List<Safetensors.Tensor> tensors = weights(compute);
    Parameters slabs = model.residentSlabs();
    List<Safetensors.Values> state = new ArrayList<>();
    // A node's other device under ZeRO: its node's share is device 0's, gathered there only.
    boolean gathersState = !(sharesAnothersCopy() && ranks.partitionsOptimizerState());
    for (HostBuffer slab : gathersState ? optimizer.state() : List.<HostBuffer>of()) {
      state.add(
          ranks.partitionsOptimizerState() // every rank's share gathered, into an array
              ? Safetensors.Values.of(wholeState(slab))
              : new HostValues(
                  slab, 0, model.parameterCount(), optimizer.stateBytesPerValue() == 2));
    }
    Checkpoints.Snapshot snapshot =
        new Checkpoints.Snapshot(model.spec(), tensors, state, optimizer.steps());
    if (average == null) {
      return snapshot;
    }
    List<Safetensors.Tensor> averaged =
        new ArrayList<>(HostValues.tensors(model.entries(), average.slab()));
    averaged.addAll(
        Checkpoints.tensors(
            slabs.bufferEntries(),
            Checkpoints.download(backend, compute, bufferAverage.averages().get(0))));
    return snapshot.withAveraged(averaged);
  }

  /**
   * On a node's other device only its buffers' average is its own: the weights' average lives in
   * device 0's host copy beside the masters, updated there.
   */
  @Override
  public void averageWeights(EmaDecay decay, Checkpoints.Loaded resumed, Stream compute) {
    model.awaitUpdates();
    compute.synchronize();
    Parameters slabs = model.residentSlabs();
    long done = resumed == null ? 0 : resumed.optimizerSteps();
    if (!sharesAnothersCopy()) {
      average = new HostAverage(backend, model.masters(), decay, done, threads);
      if (speculation != null) {
        speculation.alsoKeep(average.slab()); // a speculative update moves it too
      }
    }
    bufferAverage = new MovingAverage(backend, decay, done, List.of(slabs.buffers()), compute);
    if (resumed != null && !resumed.averaged().isEmpty()) {
      Checkpoints.Loaded avg = resumed.averagedAsWeights();
      List<Parameters.Entry> all = new ArrayList<>(model.entries());
      all.addAll(slabs.bufferEntries());
      Checkpoints.requireTensors(avg, all);
      if (average != null) {
        Checkpoints.fill(avg, model.entries(), average.slab());
      }
      Checkpoints.upload(
          backend,
          compute,
          bufferAverage.averages().get(0),
          Checkpoints.gather(avg, slabs.bufferEntries(), slabs.buffers().count()));
    }
  }

  @Override
  public boolean averaging() {
    return bufferAverage != null;
  }

  /**
   * The average swaps places with the masters on the host, and the next forward uploads and loads
   * them as after an update; swapped back afterwards the same way. On a node, device 0 swaps for
   * all, writes the copies its other devices load at once, and swaps back once each of them is done
   * with the average; they follow each swap before loading.
   */
  @Override
  public <T> T withAveragedWeights(Stream compute, Supplier<T> body) {
    model.awaitUpdates();
    compute.synchronize();
    DeviceBuffer buffers = model.residentSlabs().buffers();
    try (DeviceBuffer spare = backend.allocate("buffers.spare", DType.F32, buffers.count())) {
      swapAverage(compute, true, true);
      boolean evaluated = false;
      try {
        T result = bufferAverage.swappedIn(compute, List.of(spare), body);
        evaluated = true;
        return result;
      } finally {
        compute.synchronize(); // the evaluation's loads have read the averaged masters
        swapAverage(compute, false, evaluated);
      }
    }
  }

  /**
   * The host copy's average swapped in ({@code in}) or back out, on every device of a node. After
   * an evaluation that failed ({@code !evaluated}) no device waits for the others, which may be
   * waiting for it in a collective: the failure ends the node's task, which stops them.
   */
  private void swapAverage(Stream compute, boolean in, boolean evaluated) {
    if (sharesAnothersCopy()) {
      if (!in) {
        group.doneWithAverage();
      }
      swapsSeen++;
      if (evaluated) {
        group.awaitSwaps(device, swapsSeen);
        model.hostCopyChanged();
      }
      return;
    }
    if (!in && group != null && evaluated) {
      group.awaitOthersDoneWithAverage();
    }
    average.swapWithMasters();
    model.mastersChanged();
    if (group != null) {
      model.publishUpdates(compute); // the copies the other devices load, written now
      group.swapped();
    }
  }

  @Override
  public void restore(Checkpoints.Loaded c, Stream compute) {
    Checkpoints.requireModel(c, model.spec());
    List<HostBuffer> state = optimizer.state();
    Checkpoints.requireOptimizerSlabs(c, state.size());
    model.awaitUpdates();
    compute.synchronize();
    List<Parameters.Entry> expected = new ArrayList<>(model.entries());
    expected.addAll(model.residentSlabs().bufferEntries());
    Checkpoints.requireTensors(c, expected);
    if (!sharesAnothersCopy()) {
      Checkpoints.fill(c, model.entries(), model.masters());
    }
    Parameters slabs = model.residentSlabs();
    Checkpoints.upload(
        backend,
        compute,
        slabs.buffers(),
        Checkpoints.gather(c, slabs.bufferEntries(), slabs.buffers().count()));
    if (sharesAnothersCopy()) {
      return; // the masters and the optimizer state are device 0's, restored there
    }
    long[] share = ranks.partitionsOptimizerState() ? ranks.share(model.parameterCount()) : null;
    for (int i = 0; i < state.size(); i++) {
      Safetensors.Values values = c.optimizerState().get(i);
      if (values.count() != model.parameterCount()) {
        throw new IllegalArgumentException(
            c.dir() + ": optimizer state slab " + i + " has " + values.count() + " values");
      }
      // a checkpoint holds the whole state: under ZeRO-1 this rank keeps its share
      long from = share == null ? 0 : share[0];
      long count = share == null ? values.count() : share[1] - share[0];
      HostBuffer slab = state.get(i);
      // a piece at a time from the file: a large model's state passes the heap
      if (optimizer.stateBytesPerValue() == 4) { // straight into the slab's views
        for (long e = 0; e < count; e += HostBuffer.FLOATS_PER_COPY) {
          int length = (int) Math.min(HostBuffer.FLOATS_PER_COPY, count - e);
          values.read(from + e, slab.floats(e, length));
        }
      } else { // bf16 moments from an fp32 checkpoint: to nearest, through a few MiB of heap
        float[] piece = new float[(int) Math.min(1 << 20, count)];
        for (long e = 0; e < count; e += piece.length) {
          int length = (int) Math.min(piece.length, count - e);
          values.read(from + e, java.nio.FloatBuffer.wrap(piece, 0, length));
          ShortBuffer part = slab.range(2 * e, 2L * length).asShortBuffer();
          for (int k = 0; k < length; k++) {
            part.put(k, Bf16.fromFloat(piece[k]));
          }
        }
      }
    }
    optimizer.resumeAt(c.optimizerSteps());
    model.mastersChanged();
  }

  /**
   * A state slab as a checkpoint stores it, whole: under ZeRO-1 every rank's share gathered (every
   * rank takes part, as in every collective).
   */
  private float[] wholeState(HostBuffer slab) {
    int n = model.parameterCount();
    long[] share = ranks.partitionsOptimizerState() ? ranks.share(n) : new long[] {0, n};
    int at = (int) share[0];
    int count = (int) (share[1] - share[0]);
    // fp32 always (checkpoints keep fp32, any run resumes from them), at the share's place
    float[] values = new float[n];
    if (optimizer.stateBytesPerValue() == 2) {
      for (int e = 0; e < count; e += HostBuffer.FLOATS_PER_COPY) {
        ShortBuffer part =
            slab.range(2L * e, 2L * Math.min(HostBuffer.FLOATS_PER_COPY, count - e))
                .asShortBuffer();
        for (int k = 0; k < part.capacity(); k++) {
          values[at + e + k] = Bf16.toFloat(part.get(k));
        }
      }
    } else {
      slab.getFloats(0, values, at, count);
    }
    if (ranks.partitionsOptimizerState()) { // every rank's share, a layer at a time
      long[] parts = model.parts();
      long largest = 0;
      for (int k = 0; k + 1 < parts.length; k++) {
        largest = Math.max(largest, parts[k + 1] - parts[k]);
      }
      ByteBuffer piece =
          ByteBuffer.allocateDirect(Math.toIntExact(4 * largest)).order(ByteOrder.nativeOrder());
      for (int k = 0; k + 1 < parts.length; k++) {
        int from = (int) parts[k];
        int length = (int) (parts[k + 1] - parts[k]);
        ByteBuffer part = piece.slice(0, 4 * length).order(ByteOrder.nativeOrder());
        part.asFloatBuffer().put(values, from, length);
        ranks.allGather(part, from, n);
        part.asFloatBuffer().get(values, from, length);
      }
    }
    return values;
  }

  @Override
  public void close() {
    if (group != null) {
      // A learner closes after the job's last exchange, or when its rank failed: the node's other
      // devices then wait for this one in vain, and fail at once.
      IllegalStateException stopped =
          new IllegalStateException("device " + device + " of the node closed its model");
      ranks.leaveNode();
      group.abort(stopped);
    }
    if (sharesAnothersCopy()) {
      try (threads;
          model;
          MovingAverage closedBufferAverage = bufferAverage) {
        // its own slots and device memory; the host copy and the optimizer are device 0's
      } finally {
        group.closed(true);
      }
      return;
    }
    if (group != null && !group.awaitOthersClosed()) {
      threads.close();
      throw new IllegalStateException(
          "device 0: the node's other devices did not stop; its host copy stays allocated, as"
              + " they may still read it");
    }
    try (threads;
        SpeculativeClip closedSpeculation = speculation;
        optimizer;
        model;
        HostAverage closedAverage = average;
        MovingAverage closedBufferAverage = bufferAverage) {
      // closes in reverse order: the model (its pending updates first), optimizer, threads
    }
  }
}
