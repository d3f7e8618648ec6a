package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkChannelBlock;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkConvOperand;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * A 2-D convolution as PyTorch's nn.Conv2d over NCHW input: {@code y = conv(x, weight) + bias},
 * weight [out, c, kh, kw], y [n, out, oh, ow] (overwritten), {@code bias} [out] or null.
 *
 * <p>{@code columns} ({@link ConvWindow#columnCount()} F32) is scratch for the engines that lower
 * the convolution to im2col and GEMM ({@link dev.ramtrain.trainer.backend.ConvolutionLowering}); an
 * engine with its own convolution leaves it alone, and one that {@link
 * dev.ramtrain.trainer.backend.Backend#convolvesWithoutColumns} is given none (null). {@code
 * inBlock} and {@code outBlock} are the layouts of x and y ({@link BatchNormTrain}'s channel
 * blocks; the weight is always [out, c, kh, kw]). x and weight are both F32 or both BF16 (fp32
 * accumulation into y, which is F32): bf16 operands only on an engine that {@link
 * dev.ramtrain.trainer.backend.Backend#convolvesInBf16}.
 */
public record Convolution(
    DeviceBuffer x,
    DeviceBuffer weight,
    DeviceBuffer bias,
    DeviceBuffer y,
    ConvWindow window,
    int outChannels,
    DeviceBuffer columns,
    int inBlock,
    int outBlock)
    implements Operation {
  /** Over NCHW tensors. */
  public Convolution(
      DeviceBuffer x,
      DeviceBuffer weight,
      DeviceBuffer bias,
      DeviceBuffer y,
      ConvWindow window,
      int outChannels,
      DeviceBuffer columns) {
    this(x, weight, bias, y, window, outChannels, columns, 1, 1);
  }

  public Convolution {
    checkChannelBlock(inBlock, window.c());
    checkChannelBlock(outBlock, outChannels);
    if (outChannels < 1) {
      throw new IllegalArgumentException("convolution: " + outChannels + " output channels");
    }
    checkConvOperand(x, window.inputCount(), x);
    checkConvOperand(weight, (long) outChannels * window.c() * window.kh() * window.kw(), x);
    if (bias != null) {
      checkF32(bias, outChannels);
    }
    checkF32(y, window.outputCount(outChannels));
    if (columns != null) { // none on an engine that convolves without them
      checkF32(columns, window.columnCount());
    }
  }
}
