package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.ParamSpec;
import dev.ramtrain.trainer.nn.Parameters;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Where an offloaded model's parameters live, computed once from its top-level layers: every
 * parameter's offset in the host slabs (the resident slab's layout, so checkpoints of either mode
 * resume in the other), which layers stream and their order among the streamed ones, each resident
 * layer's range in the device slab, and each streamed layer's range in the bf16 copy.
 */
final class HostLayout {
  /**
   * The most parameters one top-level layer has: the slabs are read and written a layer at a time
   * (the gathers, copies), each through one Java buffer view, which an int indexes in bytes.
   */
  static final long MAX_LAYER_PARAMETERS = HostBuffer.MAX_VIEW_BYTES / 4;

  /** The most parameters in all: the host update's ranges index elements with ints. */
  static final long MAX_PARAMETERS = Integer.MAX_VALUE;

  private final int[] ordinal; // per top-level layer: its number among the streamed, or -1
  private final long[] offset; // per top-level layer: its first parameter in the host slabs
  private final long[] count;
  private final long[] residentAt; // per resident layer: its first parameter in the resident slab
  private final long[] bf16At; // per streamed layer: its first element in the bf16 copy
  private final int[] streamedLayer; // per streamed ordinal: its top-level layer
  private final Map<String, Parameters.Entry> entries;
  private final List<Parameters.Entry> entryList;
  private final List<ParamSpec> residentParameters;
  private final List<ParamSpec> buffers;
  private final long parameters;
  private final long largestStreamed;
  private final long streamedParameters;

  HostLayout(String spec, List<Layer> layers, Set<String> streamedNames) {
    Set<String> names = new java.util.LinkedHashSet<>();
    layers.forEach(l -> names.add(l.name()));
    for (String wanted : streamedNames) {
      if (!names.contains(wanted)) {
        throw new IllegalArgumentException(
            spec + ": no layer '" + wanted + "' to stream; its layers are " + names);
      }
    }
    int n = layers.size();
    this.ordinal = new int[n];
    this.offset = new long[n];
    this.count = new long[n];
    this.residentAt = new long[n];
    this.bf16At = new long[n];
    this.entries = new LinkedHashMap<>();
    List<ParamSpec> residentSpecs = new ArrayList<>();
    List<ParamSpec> bufferSpecs = new ArrayList<>();
    List<Integer> streamedIndices = new ArrayList<>();
    long next = 0;
    long residentNext = 0;
    long bf16Next = 0;
    long largest = 0;
    for (int i = 0; i < n; i++) {
      Layer layer = layers.get(i);
      boolean streamIt = streamedNames.contains(layer.name()) && !layer.parameters().isEmpty();
      ordinal[i] = streamIt ? streamedIndices.size() : -1;
      offset[i] = next;
      for (ParamSpec p : layer.parameters()) {
        entries.put(p.name(), new Parameters.Entry(p, next));
        next += p.count();
      }
      count[i] = next - offset[i];
      if (count[i] > MAX_LAYER_PARAMETERS) {
        throw new IllegalArgumentException(
            String.format(
                "ramtrain.train.model: %s's layer '%s' has %,d parameters, and an offloaded"
                    + " layer at most %,d (2 GiB of fp32, what one Java buffer view indexes)",
                spec, layer.name(), count[i], MAX_LAYER_PARAMETERS));
      }
      if (streamIt) {
        streamedIndices.add(i);
        largest = Math.max(largest, count[i]);
        bf16At[i] = bf16Next;
        bf16Next += count[i];
      } else {
        residentSpecs.addAll(layer.parameters()); // laid out in this order from offset 0
        residentAt[i] = residentNext;
        residentNext += count[i];
      }
      bufferSpecs.addAll(layer.buffers());
    }
    if (next > MAX_PARAMETERS) {
      throw new IllegalArgumentException(
          String.format(
              "ramtrain.train.model: %s has %,d parameters, and an offloaded model's host slabs"
                  + " hold at most %,d (the host update indexes them with ints)",
              spec, next, MAX_PARAMETERS));
    }
    this.entryList = List.copyOf(entries.values());
    this.parameters = next;
    this.largestStreamed = largest;
    this.streamedParameters = bf16Next;
    this.residentParameters = List.copyOf(residentSpecs);
    this.buffers = List.copyOf(bufferSpecs);
    this.streamedLayer = streamedIndices.stream().mapToInt(Integer::intValue).toArray();
  }

  int layers() {
    return ordinal.length;
  }

  /** Layer i's number among the streamed layers, or -1 when it is resident. */
  int ordinal(int i) {
    return ordinal[i];
  }

  boolean streamed(int i) {
    return ordinal[i] >= 0;
  }

  /** The top-level layer that is streamed layer {@code j}. */
  int streamedLayer(int j) {
    return streamedLayer[j];
  }

  int streamedCount() {
    return streamedLayer.length;
  }

  /** Layer i's first parameter in the host slabs, and how many it has. */
  long offset(int i) {
    return offset[i];
  }

  long count(int i) {
    return count[i];
  }

  /** Resident layer i's first parameter in the resident device slab. */
  long residentAt(int i) {
    return residentAt[i];
  }

  /** Streamed layer i's first element in the bf16 copy of the streamed masters. */
  long bf16At(int i) {
    return bf16At[i];
  }

  /** Every parameter in the host slabs, in model order. */
  long parameters() {
    return parameters;
  }

  /** The parameters of the largest streamed layer: the size of a ring slot. */
  long largestStreamed() {
    return largestStreamed;
  }

  /** The parameters of all streamed layers: the length of the bf16 copy. */
  long streamedParameters() {
    return streamedParameters;
  }

  Parameters.Entry entry(String name) {
    return entries.get(name);
  }

  List<Parameters.Entry> entries() {
    return entryList;
  }

  /** The resident layers' parameters and every layer's buffers: the device slabs' contents. */
  List<ParamSpec> residentParameters() {
    return residentParameters;
  }

  List<ParamSpec> buffers() {
    return buffers;
  }
}
