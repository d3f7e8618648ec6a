package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ParamSpec;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Where a model's weights are for {@code predict} and {@code evaluate}: all on the device, or,
 * where they do not fit beside the activations, the largest layers that still fit there and the
 * rest streamed from pinned host memory through a ring of device slots sized for the largest
 * streamed layer ({@link StreamedInference}). The largest stay, as training's plan keeps them
 * ({@link PlacementPlan}): the most bytes never cross the bus, and the ring's slots shrink.
 *
 * @param streamed the streamed layers' names (none: resident)
 * @param deviceBytes what the device holds for it, to the byte (the allocation)
 * @param residentParameterBytes the weights kept on the device
 */
public record InferencePlacement(
    Set<String> streamed, long deviceBytes, long residentParameterBytes) {
  public InferencePlacement {
    streamed = Set.copyOf(new LinkedHashSet<>(streamed));
  }

  /** Every weight on the device: the model bound for inference as it is. */
  public static InferencePlacement resident(Model.InferenceFootprint footprint) {
    return new InferencePlacement(Set.of(), footprint.totalBytes(), footprint.parameterBytes());
  }

  /**
   * The weights streamed with a {@code depth}-slot ring, the largest layers that fit {@code budget}
   * beside everything else kept on the device; when even streaming every layer does not fit, that
   * placement (the caller refuses it, naming what it needs).
   */
  public static InferencePlacement streamed(
      Model.InferenceFootprint footprint,
      List<Layer> layers,
      int depth,
      Backend backend,
      long budget) {
    List<Layer> withWeights = new ArrayList<>();
    for (Layer l : layers) {
      if (weights(l) > 0) {
        withWeights.add(l);
      }
    }
    Set<String> streamed = new LinkedHashSet<>();
    withWeights.forEach(l -> streamed.add(l.name()));
    List<Layer> bySize = new ArrayList<>(withWeights);
    bySize.sort(Comparator.comparingLong(InferencePlacement::weights).reversed());
    for (Layer candidate : bySize) {
      Set<String> rest = new LinkedHashSet<>(streamed);
      rest.remove(candidate.name());
      if (rest.isEmpty()) {
        break; // nothing streamed is the resident model, which did not fit or was not asked for
      }
      if (of(footprint, layers, rest, depth, backend).deviceBytes() <= budget) {
        streamed.remove(candidate.name());
      }
    }
    return of(footprint, layers, streamed, depth, backend);
  }

  /**
   * The placement streaming {@code streamed} (the others' weights on the device): activations,
   * workspace and buffers as resident, the resident weights, {@code depth} slots of the largest
   * streamed layer, and the copy stream on {@code backend}.
   */
  static InferencePlacement of(
      Model.InferenceFootprint footprint,
      List<Layer> layers,
      Set<String> streamed,
      int depth,
      Backend backend) {
    long largest = 0;
    long streamedBytes = 0;
    int count = 0;
    for (Layer l : layers) {
      if (streamed.contains(l.name()) && weights(l) > 0) {
        largest = Math.max(largest, 4 * weights(l));
        streamedBytes += 4 * weights(l);
        count++;
      }
    }
    long residentWeights = footprint.parameterBytes() - streamedBytes;
    long device =
        footprint.activationBytes()
            + footprint.workspaceBytes()
            + footprint.bufferBytes()
            + residentWeights
            + largest * Math.min(depth, count)
            + backend.streamBytes();
    return new InferencePlacement(streamed, device, residentWeights);
  }

  private static long weights(Layer l) {
    return l.parameters().stream().mapToLong(ParamSpec::count).sum();
  }
}
