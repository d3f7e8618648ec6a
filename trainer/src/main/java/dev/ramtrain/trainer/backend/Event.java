package dev.ramtrain.trainer.backend;

/**
 * A completion point in a stream: recorded after some work, waited on by other streams or hosts.
 */
public interface Event extends AutoCloseable {
  /** Completes when all work enqueued on {@code stream} so far has run. */
  void record(Stream stream);

  /** Blocks the calling thread until the last recorded point is reached. */
  void synchronize();

  /** Whether the last recorded point has been reached (true if never recorded). */
  boolean isDone();

  /**
   * Milliseconds from {@code start}'s last recorded point to this event's (cudaEventElapsedTime):
   * both must have been recorded and reached.
   */
  double millisSince(Event start);

  @Override
  void close();
}
