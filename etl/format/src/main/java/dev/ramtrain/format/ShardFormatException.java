package dev.ramtrain.format;

import java.io.IOException;

/** A shard or manifest that is not what the format promises; the message names the file. */
public class ShardFormatException extends IOException {

  public ShardFormatException(String file, String problem) {
    super(file + ": " + problem);
  }

  public ShardFormatException(String file, String problem, Throwable cause) {
    super(file + ": " + problem, cause);
  }
}
