package dev.ramtrain.trainer.nn;

import dev.ramtrain.random.Seeds;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import java.nio.FloatBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * All parameters of a model in one contiguous slab, and their gradients in a second slab of the
 * same layout; each parameter is a view. One slab is what the weight streamer later moves in a few
 * large copies, and what the optimizer updates in one kernel call. State that is saved with the
 * model but not trained (batch normalization's running statistics, PyTorch's "buffers") lives in a
 * third slab the optimizer never sees.
 */
public final class Parameters implements ParameterSource, AutoCloseable {
  /** Where a parameter lives in the slabs. */
  public record Entry(ParamSpec spec, long offset) {}

  private final Map<String, Entry> entries;
  private final long count;
  private final DeviceBuffer values;
  private final DeviceBuffer grads;
  private final Map<String, Entry> bufferEntries;
  private final DeviceBuffer buffers;

  private Parameters(
      Map<String, Entry> entries,
      long count,
      DeviceBuffer values,
      DeviceBuffer grads,
      Map<String, Entry> bufferEntries,
      DeviceBuffer buffers) {
    this.entries = entries;
    this.count = count;
    this.values = values;
    this.grads = grads;
    this.bufferEntries = bufferEntries;
    this.buffers = buffers;
  }

  /** Lays out trainable {@code specs} and untrained {@code bufferSpecs} in order (zeroed). */
  public static Parameters allocate(
      Backend backend, List<ParamSpec> specs, List<ParamSpec> bufferSpecs) {
    return allocate(backend, specs, bufferSpecs, true);
  }

  /** As above, without the gradient slab: a model bound for inference ({@link #grad} is null). */
  public static Parameters allocateForInference(
      Backend backend, List<ParamSpec> specs, List<ParamSpec> bufferSpecs) {
    return allocate(backend, specs, bufferSpecs, false);
  }

  private static Parameters allocate(
      Backend backend, List<ParamSpec> specs, List<ParamSpec> bufferSpecs, boolean gradients) {
    Map<String, Entry> entries = layout(specs, Map.of());
    Map<String, Entry> bufferEntries = layout(bufferSpecs, entries);
    long count = end(entries);
    DeviceBuffer values = backend.allocate("parameters", DType.F32, count);
    DeviceBuffer grads = null;
    DeviceBuffer buffers = null;
    try {
      grads = gradients ? backend.allocate("gradients", DType.F32, count) : null;
      buffers = backend.allocate("buffers", DType.F32, end(bufferEntries));
    } catch (RuntimeException e) {
      try (DeviceBuffer v = values;
          DeviceBuffer g = grads) {
        throw e;
      }
    }
    return new Parameters(
        Collections.unmodifiableMap(entries),
        count,
        values,
        grads,
        Collections.unmodifiableMap(bufferEntries),
        buffers);
  }

  /** Lays {@code specs} out one after another from offset 0; no name may repeat one in taken. */
  private static Map<String, Entry> layout(List<ParamSpec> specs, Map<String, Entry> taken) {
    Map<String, Entry> entries = new LinkedHashMap<>();
    long offset = 0;
    for (ParamSpec spec : specs) {
      if (taken.containsKey(spec.name())
          || entries.put(spec.name(), new Entry(spec, offset)) != null) {
        throw new IllegalArgumentException("two parameters or buffers are named " + spec.name());
      }
      offset += spec.count();
    }
    return entries;
  }

  private static long end(Map<String, Entry> entries) {
    return entries.values().stream().mapToLong(e -> e.offset() + e.spec().count()).max().orElse(0);
  }

  public long count() {
    return count;
  }

  public List<Entry> entries() {
    return new ArrayList<>(entries.values());
  }

  /** The untrained state (running statistics), saved and restored with the weights. */
  public List<Entry> bufferEntries() {
    return new ArrayList<>(bufferEntries.values());
  }

  public DeviceBuffer buffers() {
    return buffers;
  }

  @Override
  public DeviceBuffer buffer(String name) {
    Entry e = bufferEntries.get(name);
    if (e == null) {
      throw new IllegalArgumentException(
          "no buffer " + name + " (have " + bufferEntries.keySet() + ")");
    }
    return buffers.view(e.offset(), e.spec().count());
  }

  public DeviceBuffer values() {
    return values;
  }

  /** The gradient slab, or null: allocated for inference. */
  public DeviceBuffer grads() {
    return grads;
  }

  @Override
  public DeviceBuffer value(String name) {
    Entry e = entry(name);
    return values.view(e.offset(), e.spec().count());
  }

  /** The parameter's gradient, or null: allocated for inference. */
  @Override
  public DeviceBuffer grad(String name) {
    Entry e = entry(name);
    return grads == null ? null : grads.view(e.offset(), e.spec().count());
  }

  /**
   * Fills every parameter as PyTorch initializes it, from a generator seeded by (seed, name), so a
   * parameter's start does not depend on the others. Blocks until uploaded.
   */
  public void initialize(Backend backend, Stream stream, long seed) {
    initialize(backend, stream, seed, Map.of());
  }

  /** As above, except the parameters and buffers {@code pretrained} holds values for, by name. */
  public void initialize(
      Backend backend, Stream stream, long seed, Map<String, float[]> pretrained) {
    fill(backend, stream, seed, pretrained, entries, values);
    fill(backend, stream, seed, pretrained, bufferEntries, buffers);
  }

  private static void fill(
      Backend backend,
      Stream stream,
      long seed,
      Map<String, float[]> pretrained,
      Map<String, Entry> entries,
      DeviceBuffer slab) {
    long count = slab.count();
    try (HostBuffer staging = backend.allocateHost("parameter-init", 4 * count)) {
      writeInitialValues(
          entries.values(), seed, pretrained, e -> staging.floats(e.offset(), e.spec().count()));
      backend.copy(staging, 0, slab, 4 * count, stream);
      stream.synchronize();
    }
  }

  /**
   * Writes each entry's PyTorch-style initial values at its offset in {@code into}, from a
   * generator seeded by (seed, name): the same values wherever a layout puts the parameter.
   */
  public static void writeInitialValues(Iterable<Entry> entries, long seed, FloatBuffer into) {
    writeInitialValues(
        entries, seed, Map.of(), e -> into.slice((int) e.offset(), (int) e.spec().count()));
  }

  /** Where an entry's values go: a buffer of its {@code count} floats, indexed from 0. */
  @FunctionalInterface
  public interface Destination {
    FloatBuffer of(Entry e);
  }

  /**
   * As above, except that an entry {@code pretrained} names takes its values from there (a
   * checkpoint's, already matched by name and shape).
   */
  public static void writeInitialValues(
      Iterable<Entry> entries, long seed, Map<String, float[]> pretrained, Destination into) {
    for (Entry e : entries) {
      ParamSpec s = e.spec();
      FloatBuffer values = into.of(e);
      float[] given = pretrained.get(s.name());
      if (given != null) {
        if (given.length != s.count()) {
          throw new IllegalArgumentException(
              s.name() + ": " + given.length + " pretrained values for " + s.count());
        }
        values.put(0, given);
        continue;
      }
      SplittableRandom rng = new SplittableRandom(Seeds.mix(seed, s.name().hashCode()));
      double bound = s.fanIn() > 0 ? Math.sqrt(1.0 / s.fanIn()) : 0;
      for (long i = 0; i < s.count(); i++) {
        float v =
            switch (s.init()) {
              case KAIMING_UNIFORM, FAN_IN_UNIFORM -> (float) ((rng.nextDouble() * 2 - 1) * bound);
              case ONES -> 1f;
              case ZEROS -> 0f;
              case TRUNC_NORMAL -> truncatedNormal(rng);
              case LAYER_SCALE -> 1e-6f;
            };
        values.put((int) i, v);
      }
    }
  }

  private static float truncatedNormal(SplittableRandom rng) {
    double v;
    do {
      v = rng.nextGaussian() * 0.02;
    } while (v < -2 || v > 2);
    return (float) v;
  }

  Entry entry(String name) {
    Entry e = entries.get(name);
    if (e == null) {
      throw new IllegalArgumentException(
          "no parameter " + name + " (have " + entries.keySet() + ")");
    }
    return e;
  }

  @Override
  public void close() {
    try (DeviceBuffer v = values;
        DeviceBuffer g = grads;
        DeviceBuffer b = buffers) {
      // closes all three, the last first
    }
  }
}
