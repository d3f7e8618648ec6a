package dev.ramtrain.trainer.backend;

/**
 * An ordered queue of device work: everything enqueued on one stream runs in order, work on
 * different streams may overlap. Enqueueing returns at once; errors of enqueued work surface at the
 * next {@link #synchronize} (as CUDA's do).
 */
public interface Stream extends AutoCloseable {
  String label();

  /** Makes later work on this stream wait until {@code event} has completed. */
  void waitFor(Event event);

  /** Blocks until everything enqueued so far has run; rethrows the first failure of that work. */
  void synchronize();

  /**
   * Rethrows the first failure of the work that has run so far, without waiting for the rest: after
   * an event recorded on this stream completes, what ran before it has been checked.
   */
  void checkFailures();

  @Override
  void close();
}
