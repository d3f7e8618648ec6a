package dev.ramtrain.jobs.config;

/** A bad setting: the message names the key, what it should be, and where the value came from. */
public final class ConfigException extends RuntimeException {
  public ConfigException(String message) {
    super(message);
  }
}
