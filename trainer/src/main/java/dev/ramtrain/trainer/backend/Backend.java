package dev.ramtrain.trainer.backend;

/**
 * A device and the operations it runs: what the layers, the optimizers and the offload schedule
 * need. An operation is a record of {@code backend.ops} (its arguments, checked when it is made);
 * {@link #run} enqueues it on a stream and returns at once.
 *
 * <p>Engines: {@code cpu} (the reference, also used without a GPU) and {@code cuda}; each
 * implements every operation once, in its operations table, and both pass the same conformance
 * suite. {@link Backends#open} is the one way commands get a backend.
 */
public interface Backend extends Device {

  /**
   * Enqueues {@code op} on {@code stream}. Buffers must be open and of this backend; the work's own
   * failures surface at the stream's next synchronize.
   */
  void run(Stream stream, Operation op);

  /**
   * How this engine computes fastest on a 4-D activation: its channels blocked by this many (oneDNN
   * on AVX-512: 16, oneDNN's nChw16c), or 1 for NCHW. A model whose layers allow it keeps such
   * activations in that layout from layer to layer instead of converting at every convolution; the
   * layouts' results agree within their rounding, not bit for bit.
   */
  default int channelBlock() {
    return 1;
  }

  /**
   * Whether {@code Convolution} and {@code ConvolutionBackward} take bf16 operands (fp32
   * accumulation) on this engine: oneDNN's, in bf16 where the CPU multiplies bf16 and widened
   * exactly to fp32 elsewhere. Engines that lower convolutions to im2col and GEMM take fp32 only (a
   * bf16 layer converts the columns instead).
   */
  default boolean convolvesInBf16() {
    return false;
  }

  /**
   * Whether every fp32 {@link dev.ramtrain.trainer.backend.ops.Convolution} and its backward run
   * without im2col columns (oneDNN's own convolutions): then layers pass none, and reserve no
   * workspace for them (a 7×7 stem's columns at batch 64 and 224² are 450 MiB).
   */
  default boolean convolvesWithoutColumns() {
    return false;
  }

  /**
   * Whether layers should convolve depthwise with the direct {@link
   * dev.ramtrain.trainer.backend.ops.DepthwiseConvolution} rather than im2col and GEMM. Every
   * engine computes the operation (the CPU's Java loops are its reference); the engines say where
   * it is the faster path: on a GPU the im2col columns of a 7×7 depthwise convolution are 49 times
   * the input, written and read per image.
   */
  default boolean convolvesDepthwise() {
    return false;
  }

  /**
   * Whether layers should gather operands strided differently within and between images
   * (attention's heads) into contiguous blocks, to run a product as one batched GEMM over the whole
   * batch rather than one per image. On a GPU a launch costs more than the copy; on the CPU the
   * copies cost more than the calls they save (ViT-B/16, batch 8: the step 5% slower,
   * benchmarks/RESULTS.md).
   */
  default boolean batchesAcrossImages() {
    return false;
  }

  /**
   * Bytes of the mask a batch norm over {@code n × c × hw} values in layout {@code channelBlock}
   * keeps when it fuses the ReLU after it ({@code BatchNormTrain} with a ReLU mask), or 0 where
   * this engine does not fuse them: there the ReLU runs as its own operation, as it computes the
   * same (oneDNN fuses them over blocked channels; the ReLU's passes over the activations go).
   */
  default long normReluMaskBytes(int n, int c, int hw, int channelBlock) {
    return 0;
  }
}
