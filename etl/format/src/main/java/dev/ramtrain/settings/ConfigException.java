package dev.ramtrain.settings;

/**
 * A bad setting: the message names the key, what it should be, and where the value came from.
 * Shared by every module: a run's settings are checked where they are read (jobs) and where they
 * meet each other as the run is assembled (the trainer); the CLI reports it in one line with exit
 * status 2.
 */
public final class ConfigException extends RuntimeException {
  public ConfigException(String message) {
    super(message);
  }
}
