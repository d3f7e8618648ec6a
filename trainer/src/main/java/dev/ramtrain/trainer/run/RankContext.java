package dev.ramtrain.trainer.run;

import dev.ramtrain.trainer.dist.DataParallel;

/**
 * What one rank of a data-parallel job brings to a run besides its spec and data: the other ranks,
 * who hears of its steps (may be null), the host memory it may take, and whether its console is its
 * own ({@code ownConsole}: an executor's) or shared with the other ranks of a local[N] run, where
 * rank 0 speaks for them all.
 */
public record RankContext(
    DataParallel ranks, StepListener steps, HostLimit hostLimit, boolean ownConsole) {
  /** A process training alone. */
  public static final RankContext SINGLE =
      new RankContext(DataParallel.single(), null, HostLimit.MACHINE, true);

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
