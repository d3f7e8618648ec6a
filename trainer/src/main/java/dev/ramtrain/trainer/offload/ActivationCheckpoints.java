package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.ParameterSource;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntFunction;

/**
 * Activation checkpointing's memory and moves: every top-level layer (a residual block is one)
 * binds its activations in one shared byte arena; forward keeps each layer's output, copied out of
 * the arena; backward recomputes a layer's forward from its kept input right before its backward
 * (batch norm leaves its running statistics alone then, dropout redraws the same mask) and copies
 * the layer's dL/dx out to a boundary buffer, since the next recompute reuses the arena.
 */
final class ActivationCheckpoints implements AutoCloseable {
  private final Backend backend;
  private final List<Layer> layers;
  private final List<DeviceBuffer> owned = new ArrayList<>();
  private final DeviceBuffer arena;
  private final DeviceBuffer gradBoundary;
  private final DeviceBuffer[] kept;
  private DeviceBuffer lastInput; // the last training forward's input (layer 0's recompute)

  /**
   * Sizes the arena by binding {@code sizing} (fresh copies of {@code layers}, layer i to {@code
   * parameters.apply(i)}) to zero-length activation buffers, then allocates it, the kept outputs
   * and the gradient boundary for up to {@code maxBatch} samples.
   */
  ActivationCheckpoints(
      Backend backend,
      List<Layer> layers,
      List<Layer> sizing,
      IntFunction<ParameterSource> parameters,
      int maxBatch) {
    this.backend = backend;
    this.layers = layers;
    long arenaBytes = 0;
    int widest = 0; // the largest output: every dL/dx but the first layer's is one
    for (int i = 0; i < sizing.size(); i++) {
      Layer layer = sizing.get(i);
      ArenaSource counter = new ArenaSource(parameters.apply(i), null);
      try {
        layer.bind(backend, counter, maxBatch);
      } finally {
        layer.close();
      }
      arenaBytes = Math.max(arenaBytes, counter.bytes);
      widest = Math.max(widest, layer.outputSize());
    }
    this.kept = new DeviceBuffer[layers.size()];
    try {
      this.arena = own("activation-arena", DType.U8, arenaBytes);
      this.gradBoundary = own("grad-boundary", DType.F32, (long) maxBatch * widest);
      for (int i = 0; i < layers.size(); i++) {
        Layer layer = layers.get(i);
        kept[i] = own(layer.name() + ".kept", DType.F32, (long) maxBatch * layer.outputSize());
      }
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  private DeviceBuffer own(String label, DType dtype, long count) {
    DeviceBuffer b = backend.allocate(label, dtype, count);
    owned.add(b);
    return b;
  }

  /** What layer i binds to: its parameters from {@code parameters}, activations in the arena. */
  ParameterSource source(ParameterSource parameters) {
    return new ArenaSource(parameters, arena);
  }

  /** Remembers a training forward's input: layer 0 recomputes from it. */
  void input(DeviceBuffer x) {
    lastInput = x;
  }

  /** Copies layer i's output out of the arena; returns the kept copy (the next layer's input). */
  DeviceBuffer keep(Stream compute, int i, DeviceBuffer output, int batch) {
    DeviceBuffer out = kept[i].view(0, (long) batch * layers.get(i).outputSize());
    backend.copy(output, out, compute);
    return out;
  }

  /** Runs layer i's training forward again from its kept input, to fill the arena for backward. */
  void recompute(Stream compute, int i, int batch) {
    Layer layer = layers.get(i);
    DeviceBuffer in = i == 0 ? lastInput : kept[i - 1].view(0, (long) batch * layer.inputSize());
    layer.recomputing(true);
    try {
      layer.forward(compute, in, batch, true);
    } finally {
      layer.recomputing(false);
    }
  }

  /** Copies layer i's dL/dx out of the arena, which the next recompute reuses. */
  DeviceBuffer keepGradient(Stream compute, int i, DeviceBuffer dx, int batch) {
    DeviceBuffer boundary = gradBoundary.view(0, (long) batch * layers.get(i).inputSize());
    backend.copy(dx, boundary, compute);
    return boundary;
  }

  @Override
  public void close() {
    owned.forEach(DeviceBuffer::close);
    owned.clear();
  }

  /**
   * Parameters from {@code base}; activation memory from {@code arena}, from byte 0 for each layer
   * (one layer's activations are live at a time), or, with no arena yet, zero-length buffers while
   * counting what a layer asks for.
   */
  private static final class ArenaSource extends ParameterSource.Delegating {
    private final DeviceBuffer arena;
    private long bytes;

    ArenaSource(ParameterSource base, DeviceBuffer arena) {
      super(
          base); // parameters and the workspace: scratch is not an activation, it outlives no call
      this.arena = arena;
    }

    @Override
    public DeviceBuffer activation(Backend b, String label, DType dtype, long count) {
      long at = (bytes + 3) / 4 * 4; // 4-byte aligned: every element type fits
      bytes = at + count * dtype.bytes();
      return arena == null ? b.allocate(label, dtype, 0) : arena.viewAs(dtype, at, count);
    }
  }
}
