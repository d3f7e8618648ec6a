package dev.ramtrain.trainer.data;

/**
 * A shard file that changed under the loader reading it (cut short while memory-mapped): what was
 * read from it cannot be trusted, and the batch is not used.
 */
public final class ShardChangedException extends RuntimeException {
  ShardChangedException(String message, Throwable cause) {
    super(message, cause);
  }
}
