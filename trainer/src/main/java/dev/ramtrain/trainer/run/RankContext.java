package dev.ramtrain.trainer.run;

import dev.ramtrain.trainer.dist.DataParallel;
import dev.ramtrain.trainer.offload.DeviceGroup;

/**
 * What one rank of a data-parallel job brings to a run besides its spec and data: the other ranks,
 * who hears of its steps (may be null), the host memory it may take, whether its console is its own
 * ({@code ownConsole}: an executor's) or shared with the other ranks of a local[N] run, where rank
 * 0 speaks for them all, and the devices of its node in this JVM whose offloaded learners share one
 * host copy ({@code node}; null where the rank is its node's only device).
 */
public record RankContext(
    DataParallel ranks,
    StepListener steps,
    HostLimit hostLimit,
    boolean ownConsole,
    DeviceGroup node) {
  /** A process training alone. */
  public static final RankContext SINGLE =
      new RankContext(DataParallel.single(), null, HostLimit.MACHINE, true);

  /** A rank that is its node's only device. */
  public RankContext(
      DataParallel ranks, StepListener steps, HostLimit hostLimit, boolean ownConsole) {
    this(ranks, steps, hostLimit, ownConsole, null);
  }

  public RankContext {
    if (node != null && node.devices() != ranks.devicesPerNode()) {
      throw new IllegalArgumentException(
          "a node of "
              + node.devices()
              + " devices for ranks on nodes of "
              + ranks.devicesPerNode());
    }
  }

  /** Whether this rank prints what every rank would: rank 0, or a rank with its own console. */
  public boolean speaks() {
    return ranks.leader() || ownConsole;
  }

  /** Hears of a rank's steps: how many it is about to run, then each as it is done. */
  public interface StepListener {
    void starting(long stepsToRun);

    /** After step {@code stepsDone} (on the loop's thread; throwing fails the run). */
    void done(long stepsDone);
  }
}
