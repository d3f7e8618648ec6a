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
   * Channels last (NHWC) where the backend computes blocked layouts ({@link Backend#channelBlock}
   * above 1: oneDNN) and their count divides by its block, else NCHW: the same rule on both sides
   * of every tensor, so a producer and its consumer agree. NHWC is the block of all the channels
   * (the layout operations describe as [n][c/block][h][w][block]), so for a tensor of exactly the
   * engine's block (16 on AVX-512) it is oneDNN's nChw16c itself; with more, oneDNN's NHWC (brgemm)
   * convolutions measured 5-20% faster than its blocked ones on ResNet-20's 32 and 64 channels
   * (benchmarks/RESULTS.md). On an engine without blocked layouts (the Java kernels, CUDA) it is
   * NCHW.
   */
  ENGINE;

  /**
   * The channel block (1 for NCHW, {@code channels} for NHWC) of a tensor with {@code channels}
   * channels on {@code backend}.
   */
  public int block(Backend backend, int channels) {
    int block = this == ENGINE ? backend.channelBlock() : 1;
    return block > 1 && channels % block == 0 ? channels : 1;
  }
}
