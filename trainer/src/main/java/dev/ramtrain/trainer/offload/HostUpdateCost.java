package dev.ramtrain.trainer.offload;

import java.util.List;

/**
 * An offloaded step's host update: its time, and how much of it the step waits for, by when it runs
 * ({@link HostUpdateTiming}). AdamW reads each parameter's gradient, master weight and two moments
 * and writes the weight and the moments (28 bytes a parameter with fp32 moments, 20 with bf16
 * ones); with bf16 device weights each streamed parameter's landed bf16 gradient is also widened (2
 * bytes read, 4 written) and its bf16 copy written (2). The update's time is the layers' host
 * updates as {@link LayerCost#timed} measured them, else those bytes over the host's bandwidth. The
 * copies to and from the device move their bytes through the same host memory, so those that run
 * beside the update stretch it by their bytes over that bandwidth (on an H200 the plan read 15-19%
 * short while it left them out); where the device is the host's own cores (the cpu backend) the
 * copies already take compute's time, and the update takes all of its own.
 *
 * @param updateSeconds the update alone, over the owner's share of the parameters
 * @param lastToLandSeconds the part of it for the layer whose gradient lands last (the first with
 *     weights), which nothing after backward hides; all of it on the host's cores
 * @param backwardCopySeconds the copies during backward (gradients out, weights in again), over the
 *     host's bandwidth
 * @param forwardCopySeconds the forward's weight loads, over the host's bandwidth
 * @param speculationSeconds a speculative clip's extra bytes: the kept copy of what the update
 *     writes (read and written once) and the norm's read of the gradients
 * @param normSeconds a clip's read of the gradients for the norm, after backward
 * @param publishSeconds a delayed update's refresh of the published weights from the masters (4
 *     bytes read, 4 written a parameter), which the next step's loads read
 */
record HostUpdateCost(
    HostUpdateTiming timing,
    boolean sharesHostCores,
    double updateSeconds,
    double lastToLandSeconds,
    double backwardCopySeconds,
    double forwardCopySeconds,
    double speculationSeconds,
    double normSeconds,
    double publishSeconds) {

  /**
   * The cost for {@code layers} ({@code parameters} in all, {@code streamedParameters} streamed),
   * the host keeping {@code stateBytes} of optimizer state a parameter and updating {@code
   * shareOfParameters} of them (ZeRO's share), the copies moving {@code forwardBytes} and {@code
   * backwardBytes} a step.
   */
  static HostUpdateCost of(
      List<LayerCost> layers,
      HostProfile host,
      HostUpdateTiming timing,
      boolean sharesHostCores,
      int stateBytes,
      boolean bf16Weights,
      long streamedParameters,
      double shareOfParameters,
      long forwardBytes,
      long backwardBytes) {
    double bandwidth = host.bandwidthBytesPerSecond();
    long parameters = layers.stream().mapToLong(LayerCost::parameters).sum();
    long perParameter = 4 + 2 * 4 + 2L * stateBytes; // gradient; weight read, written; moments
    long bf16Bytes = bf16Weights ? (2 + 4 + 2) * streamedParameters : 0;
    boolean timed = layers.stream().anyMatch(l -> l.hostUpdateSeconds() > 0);
    double update;
    double lastToLand;
    if (timed) {
      update = layers.stream().mapToDouble(LayerCost::hostUpdateSeconds).sum();
      lastToLand = layers.stream().mapToDouble(LayerCost::exposedHostUpdateSeconds).sum();
    } else {
      long first =
          layers.stream().mapToLong(LayerCost::parameters).filter(p -> p > 0).findFirst().orElse(0);
      update = perParameter * (double) parameters / bandwidth;
      lastToLand = perParameter * (double) first / bandwidth;
    }
    update = shareOfParameters * (update + bf16Bytes / bandwidth);
    lastToLand = sharesHostCores ? update : shareOfParameters * lastToLand;
    long kept = 2L * (4 + stateBytes) * parameters; // masters and moments, read and written
    return new HostUpdateCost(
        timing,
        sharesHostCores,
        update,
        lastToLand,
        backwardBytes / bandwidth,
        forwardBytes / bandwidth,
        (kept + 4L * parameters) / bandwidth,
        4L * parameters / bandwidth,
        8L * shareOfParameters * parameters / bandwidth);
  }

  /**
   * The streamed step, given the device's part of it ({@code onDevice}: compute, and copies that
   * compute does not hide) and its {@code forward} pass. As the gradients land, the host updates
   * beside backward but the next forward needs the first layers, whose gradients land last: the
   * step is at least the forward and every hidden update (an H200 measured a 377 M-parameter MLP's
   * 122 ms of host AdamW making its streamed step 171 ms where the device alone needed 93), plus
   * the last layer's. Serially, the whole update follows backward. Delayed, it runs on into the
   * next forward and bounds the step only when it outlasts the step with every copy; delayed and
   * clipped, it starts after backward and must end before the next one.
   */
  double stepSeconds(double onDevice, double forward) {
    if (sharesHostCores) { // the update takes compute's cores: all of it shows
      return onDevice + hostSeconds();
    }
    double hidden = updateSeconds - lastToLandSeconds + backwardCopySeconds;
    return switch (timing) {
      case AS_GRADIENTS_LAND -> Math.max(onDevice, forward + hidden) + lastToLandSeconds;
      case SPECULATIVE ->
          Math.max(onDevice, forward + hidden + speculationSeconds) + lastToLandSeconds;
      case AFTER_BACKWARD -> onDevice + updateSeconds + normSeconds;
      case DELAYED ->
          Math.max(
              onDevice, updateSeconds + publishSeconds + backwardCopySeconds + forwardCopySeconds);
      case DELAYED_AFTER_BACKWARD ->
          Math.max(
              onDevice,
              onDevice
                  - forward
                  + updateSeconds
                  + normSeconds
                  + publishSeconds
                  + forwardCopySeconds);
    };
  }

  /**
   * The host's whole work a step: the update and, by its timing, the speculation's kept copy, the
   * norm's read, the published weights' refresh.
   */
  double hostSeconds() {
    return updateSeconds
        + switch (timing) {
          case AS_GRADIENTS_LAND -> 0;
          case SPECULATIVE -> speculationSeconds;
          case AFTER_BACKWARD -> normSeconds;
          case DELAYED -> publishSeconds;
          case DELAYED_AFTER_BACKWARD -> normSeconds + publishSeconds;
        };
  }
}
