package dev.ramtrain.jobs.config;

import com.typesafe.config.Config;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.offload.DeviceProfile;
import java.util.TreeSet;

/** Device profiles from {@code ramtrain.devices.<name>} (memory, copy-bandwidth, flops). */
public final class DeviceProfiles {
  private static final String ROOT = "ramtrain.devices";

  private DeviceProfiles() {}

  /** The profiles' names, sorted. */
  public static java.util.SortedSet<String> names(RamtrainConfig c) {
    return new TreeSet<>(c.raw().getConfig(ROOT).root().keySet());
  }

  public static DeviceProfile named(RamtrainConfig c, String name) {
    Config devices = c.raw().getConfig(ROOT);
    if (!devices.hasPath(name)) {
      throw new ConfigException(
          "no device profile '"
              + name
              + "' under "
              + ROOT
              + "; known: "
              + new TreeSet<>(devices.root().keySet())
              + " or 'measured'");
    }
    String key = ROOT + "." + name;
    try {
      Config d = devices.getConfig(name);
      return new DeviceProfile(
          name, d.getBytes("memory"), d.getDouble("copy-bandwidth"), d.getDouble("flops"));
    } catch (com.typesafe.config.ConfigException | IllegalArgumentException e) {
      throw new ConfigException(
          key + ": a profile needs memory (bytes), copy-bandwidth and flops: " + e.getMessage());
    }
  }
}
