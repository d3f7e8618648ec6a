package dev.ramtrain.jobs.train;

import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.offload.HostProfile;
import dev.ramtrain.trainer.offload.HostUpdateTiming;
import dev.ramtrain.trainer.offload.OffloadSpec;
import dev.ramtrain.trainer.run.Placement;

/**
 * What {@code plan} (the command and the notebook API's) reads of the host from the settings: its
 * memory bandwidth and when the run's host update would run.
 */
public final class PlanSettings {
  private static final String HOST_BANDWIDTH = "ramtrain.plan.host-bandwidth";

  private PlanSettings() {}

  /**
   * The host the plan counts the update and the copies on ({@code ramtrain.plan.host-bandwidth}):
   * this one, measured on the optimizer's threads as {@code train} measures it, or the bandwidth
   * given in bytes/s (a GPU server planned from elsewhere).
   */
  public static HostProfile host(RamtrainConfig c, Backend backend, OffloadSpec offload) {
    String text = c.string(HOST_BANDWIDTH);
    if (text.equals("measured")) {
      return HostProfile.measure(backend, offload.hostThreads());
    }
    try {
      return new HostProfile("given", Double.parseDouble(text));
    } catch (IllegalArgumentException e) {
      throw new ConfigException(
          HOST_BANDWIDTH
              + ": 'measured' or the host's memory bandwidth in bytes/s (e.g. 86e9), got '"
              + text
              + "'");
    }
  }

  /**
   * When the run these settings describe would update on the host ({@code
   * ramtrain.train.clip-norm}, {@code ramtrain.offload.delayed-update} and {@code .clip-update}),
   * {@code partitions} where ZeRO shares the optimizer state, on a device that {@code
   * sharesHostCores} or not.
   */
  public static HostUpdateTiming timing(
      RamtrainConfig c, OffloadSpec offload, boolean partitions, boolean sharesHostCores) {
    String key = "ramtrain.train.clip-norm";
    double norm = c.number(key);
    if (!(norm >= 0)) {
      throw new ConfigException(key + ": must be >= 0 (0: no clipping), got " + norm);
    }
    return Placement.plannedTiming(offload, (float) norm, partitions, sharesHostCores);
  }
}
