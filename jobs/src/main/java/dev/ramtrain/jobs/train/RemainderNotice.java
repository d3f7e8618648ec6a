package dev.ramtrain.jobs.train;

import dev.ramtrain.trainer.data.LoaderSpec;
import java.util.Locale;
import java.util.Optional;

/**
 * What the remainder rule costs a small dataset, said before training: with {@code remainder =
 * drop} (the default, as PyTorch's {@code drop_last}) the samples that do not fill a last step are
 * left out of every epoch. On 328 samples a batch of 256 trains one step an epoch and leaves 72
 * (22%) out, which went unsaid. A tenth or more left out is worth a line; padding and a smaller
 * batch are the ways round it.
 */
public final class RemainderNotice {
  /** The share of an epoch left out from which the notice is given. */
  static final double WORTH_SAYING = 0.10;

  private RemainderNotice() {}

  /**
   * The notice for {@code rows} training samples in steps of {@code batch} samples (a step's over
   * every rank: the batch size is the global one), {@code accumulate} batches a step; empty when
   * little or nothing is left out (or the rule keeps or pads the rest).
   */
  public static Optional<String> of(
      long rows, int batch, int accumulate, LoaderSpec.Remainder remainder) {
    long step = (long) batch * accumulate;
    long steps = rows / step;
    long left = rows % step;
    if (remainder != LoaderSpec.Remainder.DROP || steps == 0 || left < WORTH_SAYING * rows) {
      return Optional.empty();
    }
    return Optional.of(
        String.format(
            Locale.ROOT,
            "note: steps of %,d samples on %,d training samples: %,d step%s an epoch, %,d samples"
                + " (%.0f%%) left out of each (ramtrain.train.remainder = drop; which ones changes"
                + " with every epoch's shuffle). A smaller --batch-size leaves fewer out; --set"
                + " ramtrain.train.remainder=pad fills the last step with samples from the epoch's"
                + " start",
            step,
            rows,
            steps,
            steps == 1 ? "" : "s",
            left,
            100.0 * left / rows));
  }
}
