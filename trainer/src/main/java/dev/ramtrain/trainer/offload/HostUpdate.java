package dev.ramtrain.trainer.offload;

/**
 * One optimizer step applied to parameters [from, to) of the host slabs: what {@link
 * HostOptimizer#beginStep} returns and the streamed model runs for each layer whose gradient has
 * reached the host.
 */
public interface HostUpdate {
  void update(int from, int to);
}
