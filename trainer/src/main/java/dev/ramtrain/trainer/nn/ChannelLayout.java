package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;

/**
 * How a layer holds a 4-D activation it reads or writes. Layers side by side must agree, so a
 * model's builder says it once for the run of layers between its edges: the images coming in and
 * what is flattened, permuted or tokenized going out are NCHW; what only convolutions, batch norms,
 * poolings, ReLUs and residual sums read between them may be {@link #ENGINE}.
 */
public enum ChannelLayout {
  /** Always NCHW. */
  NCHW,
  /**
   * Channels blocked as the backend computes fastest ({@link Backend#channelBlock}: oneDNN's
   * nChw16c on AVX-512) when their count divides by its block, else NCHW: the same rule on both
   * sides of every tensor, so a producer and its consumer agree. On an engine without blocked
   * layouts (the Java kernels, CUDA) it is NCHW.
   */
  ENGINE;

  /**
   * The channel block (1 for NCHW) of a tensor with {@code channels} channels on {@code backend}.
   */
  public int block(Backend backend, int channels) {
    int block = this == ENGINE ? backend.channelBlock() : 1;
    return channels % block == 0 ? block : 1;
  }
}
