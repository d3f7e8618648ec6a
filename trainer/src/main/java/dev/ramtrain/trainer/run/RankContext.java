package dev.ramtrain.trainer.run;

import dev.ramtrain.trainer.dist.DataParallel;

/**
 * What one rank of a data-parallel job brings to a run besides its spec and data: the other ranks,
 * who hears of its steps (may be null), and the host memory it may take.
 */
public record RankContext(DataParallel ranks, StepListener steps, HostLimit hostLimit) {
  /** A process training alone. */
  public static final RankContext SINGLE =
      new RankContext(DataParallel.single(), null, HostLimit.MACHINE);

  /** Hears of a rank's steps: how many it is about to run, then each as it is done. */
  public interface StepListener {
    void starting(long stepsToRun);

    /** After step {@code stepsDone} (on the loop's thread; throwing fails the run). */
    void done(long stepsDone);
  }
}
