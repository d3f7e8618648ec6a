package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Gelu;
import dev.ramtrain.trainer.backend.ops.GeluBackward;
import dev.ramtrain.trainer.backend.ops.Relu;
import dev.ramtrain.trainer.backend.ops.ReluBackward;

/** An elementwise activation, ReLU or GELU (exact, as PyTorch's default). */
public final class Activation extends BaseLayer {
  public enum Kind {
    RELU,
    GELU
  }

  private final Kind kind;
  private final int size;
  private final boolean inPlace;
  private boolean overInput; // bound to write its output over its input
  private DeviceBuffer y;
  private DeviceBuffer dx;
  private DeviceBuffer x;

  public Activation(String name, Kind kind, int size) {
    this(name, kind, size, false);
  }

  private Activation(String name, Kind kind, int size, boolean inPlace) {
    super(name);
    this.kind = kind;
    this.size = size;
    this.inPlace = inPlace;
  }

  /**
   * A ReLU that writes its output over its input, as torchvision's ResNet (inplace=True): only
   * where the input's producer does not read its own output in backward and nothing else reads it
   * (batch norm's output in a chain, a residual block's sum). Backward is unchanged, bit for bit:
   * max(x, 0) passes the same mask as x, positive exactly where x is.
   */
  public static Activation reluInPlace(String name, int size) {
    return new Activation(name, Kind.RELU, size, true);
  }

  @Override
  public int inputSize() {
    return size;
  }

  @Override
  public int outputSize() {
    return size;
  }

  /** Writing over its input: in place, or bound for inference where nothing reads it after. */
  @Override
  public boolean evaluationReturnsInput() {
    return overInput;
  }

  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    ActivationKeys keys = params.activationKeys();
    overInput = inPlace || keys != null && !keys.inputReadLater();
    if (!overInput) {
      y = own("out", (long) maxBatch * size);
    }
    dx = inputGradient((long) maxBatch * size);
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer input, int batch, boolean training) {
    x = input;
    DeviceBuffer yb = overInput ? input : y.view(0, (long) batch * size);
    if (kind == Kind.RELU) {
      backend.run(s, new Relu(input, yb));
    } else {
      backend.run(s, new Gelu(input, yb));
    }
    return yb;
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    if (!needInputGrad) {
      return null;
    }
    DeviceBuffer dxb = dx.view(0, (long) batch * size);
    if (kind == Kind.RELU) {
      backend.run(s, new ReluBackward(x, dy, dxb));
    } else {
      backend.run(s, new GeluBackward(x, dy, dxb));
    }
    return dxb;
  }
}
