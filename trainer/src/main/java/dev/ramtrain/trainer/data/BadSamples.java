package dev.ramtrain.trainer.data;

/**
 * What a loader does with a sample whose stored image does not decode ({@code
 * ramtrain.train.bad-sample}): FAIL the run naming the sample and its shard, or SKIP it, putting in
 * its place the next sample of its record batch that decodes (so batches stay full and every rank
 * still runs the same steps) and warning once per sample.
 */
public enum BadSamples {
  FAIL,
  SKIP
}
