package dev.ramtrain.etl.dataset;

import dev.ramtrain.format.ShardFormatException;

/**
 * No committed dataset where one was named (no manifest.json there): a wrong path given, a usage
 * error, as against a dataset whose files are damaged.
 */
public final class NoDatasetException extends ShardFormatException {
  public NoDatasetException(String manifest, String problem, Throwable cause) {
    super(manifest, problem, cause);
  }
}
