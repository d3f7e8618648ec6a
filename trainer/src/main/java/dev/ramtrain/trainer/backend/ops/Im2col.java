package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * im2col for a convolution's window over NCHW input, image by image: image i's block of {@code
 * cols} is a [c·kh·kw, oh·ow] matrix whose row {@code (ch, ky, kx)} holds, for every output
 * position, the input value under that kernel tap (zero in the padding). PyTorch's weight layout
 * [out, c, kh, kw] times this block gives the image's NCHW output directly.
 */
public record Im2col(DeviceBuffer x, ConvWindow window, DeviceBuffer cols) implements Operation {
  public Im2col {
    checkF32(x, window.inputCount());
    checkF32(cols, window.columnCount());
  }
}
