package dev.ramtrain.trainer.optim;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Lerp;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

/**
 * An exponential moving average of device slabs (timm's ModelEma over a model's weights and
 * buffers): one copy of each, moved toward it by {@code avg += (1 − decay)(slab − avg)} after every
 * optimizer step ({@link Lerp}, one fused multiply-add, so a host average of the same values gives
 * the same bits), and swapped in for evaluation.
 */
public final class MovingAverage implements AutoCloseable {
  private final Backend backend;
  private final EmaDecay decay;
  private long updates; // done so far
  private final List<DeviceBuffer> slabs;
  private final List<DeviceBuffer> averages = new ArrayList<>();

  /**
   * Averages of {@code slabs}, starting as copies of them, after {@code updatesDone} updates (a
   * resumed run's optimizer steps: where {@code decay}'s warm-up stands).
   */
  public MovingAverage(
      Backend backend, EmaDecay decay, long updatesDone, List<DeviceBuffer> slabs, Stream stream) {
    this.backend = backend;
    this.decay = decay;
    this.updates = updatesDone;
    this.slabs = List.copyOf(slabs);
    try {
      for (DeviceBuffer slab : slabs) {
        DeviceBuffer avg = backend.allocate(slab.label() + ".ema", DType.F32, slab.count());
        averages.add(avg);
        if (slab.count() > 0) {
          backend.copy(slab, avg, stream);
        }
      }
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  /** {@code 1 − decay}, the lerp's weight, for a decay in [0, 1). */
  public static float weightOf(float decay) {
    if (!(decay >= 0 && decay < 1)) {
      throw new IllegalArgumentException("an EMA decay must be in [0, 1), got " + decay);
    }
    return 1 - decay;
  }

  /**
   * Moves every average toward its slab: after each optimizer step. A weight of 1 (warm-up's first
   * update) copies, as PyTorch's lerp then gives the end exactly.
   */
  public void update(Stream stream) {
    float weight = decay.weightAt(++updates);
    for (int i = 0; i < slabs.size(); i++) {
      if (slabs.get(i).count() > 0) {
        if (weight == 1f) {
          backend.copy(slabs.get(i), averages.get(i), stream);
        } else {
          backend.run(stream, new Lerp(averages.get(i), slabs.get(i), weight));
        }
      }
    }
  }

  /** The averages, in the slabs' order: read for a checkpoint, written when resuming one. */
  public List<DeviceBuffer> averages() {
    return averages;
  }

  /**
   * Runs {@code body} with the averages in the slabs and the slabs' values back afterwards; {@code
   * spare.get(i)} holds slab i's values meanwhile (a resident model's gradients, free while it
   * evaluates). What {@code body} leaves in the slabs (rank 0's buffers, handed over) becomes the
   * average.
   */
  public <T> T swappedIn(Stream stream, List<DeviceBuffer> spare, Supplier<T> body) {
    for (int i = 0; i < slabs.size(); i++) {
      if (slabs.get(i).count() > 0) {
        backend.copy(slabs.get(i), spare.get(i).view(0, slabs.get(i).count()), stream);
        backend.copy(averages.get(i), slabs.get(i), stream);
      }
    }
    try {
      return body.get();
    } finally {
      for (int i = 0; i < slabs.size(); i++) {
        if (slabs.get(i).count() > 0) {
          backend.copy(slabs.get(i), averages.get(i), stream);
          backend.copy(spare.get(i).view(0, slabs.get(i).count()), slabs.get(i), stream);
        }
      }
    }
  }

  @Override
  public void close() {
    averages.forEach(DeviceBuffer::close);
    averages.clear();
  }
}
