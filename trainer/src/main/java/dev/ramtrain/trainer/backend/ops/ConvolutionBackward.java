package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkChannelBlock;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkConvOperand;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * The gradients of a {@link Convolution} from its output gradient {@code dy}: {@code weightGrad +=
 * dL/dW} and {@code biasGrad += dL/db} (accumulated, as parameter gradients are over micro-batches;
 * {@code biasGrad} null for a convolution without bias), and {@code dx = dL/dx} (overwritten; null
 * when no layer below needs it). One operation for both so that an engine which reorders {@code dy}
 * into its own layout does it once.
 *
 * <p>{@code columns} is scratch as in {@link Convolution}; x and dx are in the layout {@code
 * inBlock} says, dy in {@code outBlock}'s, as the forward's x and y. x, dy and weight are all F32
 * or all BF16, as in {@link Convolution}; the gradients are F32.
 */
public record ConvolutionBackward(
    DeviceBuffer x,
    DeviceBuffer dy,
    DeviceBuffer weight,
    DeviceBuffer weightGrad,
    DeviceBuffer biasGrad,
    DeviceBuffer dx,
    ConvWindow window,
    int outChannels,
    DeviceBuffer columns,
    int inBlock,
    int outBlock)
    implements Operation {
  /** Over NCHW tensors. */
  public ConvolutionBackward(
      DeviceBuffer x,
      DeviceBuffer dy,
      DeviceBuffer weight,
      DeviceBuffer weightGrad,
      DeviceBuffer biasGrad,
      DeviceBuffer dx,
      ConvWindow window,
      int outChannels,
      DeviceBuffer columns) {
    this(x, dy, weight, weightGrad, biasGrad, dx, window, outChannels, columns, 1, 1);
  }

  public ConvolutionBackward {
    checkChannelBlock(inBlock, window.c());
    checkChannelBlock(outBlock, outChannels);
    if (outChannels < 1) {
      throw new IllegalArgumentException("convolution: " + outChannels + " output channels");
    }
    long weights = (long) outChannels * window.c() * window.kh() * window.kw();
    checkConvOperand(x, window.inputCount(), x);
    checkConvOperand(dy, window.outputCount(outChannels), x);
    checkConvOperand(weight, weights, x);
    checkF32(weightGrad, weights);
    if (biasGrad != null) {
      checkF32(biasGrad, outChannels);
    }
    if (dx != null) {
      checkF32(dx, window.inputCount());
    }
    if (columns != null) { // none on an engine that convolves without them
      checkF32(columns, window.columnCount());
    }
  }
}
