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
  ENGINE,
  /**
   * Channels last (NHWC: a block of all the channels, [n][c/c][h][w][c]) where {@link #ENGINE}
   * would block them, else NCHW. For a tensor of exactly the engine's block it is the same bytes as
   * ENGINE. oneDNN's NHWC kernels measured faster than its blocked ones on the CIFAR ResNets' 32
   * and 64 channels (backward-weights 8-17%, batch norm's backward 25-30%) and slower on
   * ResNet-50's backward (604 → 627 ms a step, its stride-2 and first blocks), so the builders
   * choose (benchmarks/RESULTS.md).
   */
  CHANNELS_LAST;

  /**
   * The channel block (1 for NCHW, {@code channels} for NHWC) of a tensor with {@code channels}
   * channels on {@code backend}.
   */
  public int block(Backend backend, int channels) {
    int block = this == NCHW ? 1 : backend.channelBlock();
    if (block == 1 || channels % block != 0) {
      return 1;
    }
    return this == CHANNELS_LAST ? channels : block;
  }
}
