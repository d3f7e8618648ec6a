package dev.ramtrain.jobs.train;

import dev.ramtrain.trainer.checkpoint.Checkpoints;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Which checkpoint folders a run keeps, as Lightning's {@code save_last} + {@code save_top_k} and
 * timm's {@code checkpoint_hist} do: the latest, the best, and the newest {@code keep} epoch
 * checkpoints ({@code ramtrain.train.keep-checkpoints}; 0 keeps all), so a step checkpoint goes
 * once the next is saved. One rule for a local run directory and for the remote one its checkpoints
 * are published to.
 */
final class CheckpointRetention {
  private CheckpointRetention() {}

  /**
   * Of the checkpoint folders {@code names} (other names are passed over), those the run no longer
   * keeps, oldest first; {@code latest} and {@code best} name what the pointers do (or null).
   */
  static List<String> dropped(Collection<String> names, int keep, String latest, String best) {
    if (keep == 0) {
      return List.of();
    }
    List<String> sorted =
        names.stream()
            .filter(Checkpoints::isName)
            .sorted(Comparator.comparingLong(CheckpointRetention::number))
            .toList();
    List<String> epochs = sorted.stream().filter(n -> n.startsWith("epoch-")).toList();
    Set<String> kept =
        new HashSet<>(epochs.subList(Math.max(0, epochs.size() - keep), epochs.size()));
    kept.add(latest);
    kept.add(best);
    return sorted.stream().filter(n -> !kept.contains(n)).toList();
  }

  /** A checkpoint folder's epoch or step, for ordering (epoch-10000 after epoch-9999). */
  private static long number(String name) {
    return Long.parseLong(name.substring(name.indexOf('-') + 1));
  }
}
