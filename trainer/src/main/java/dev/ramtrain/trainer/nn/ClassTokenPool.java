package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Fill;
import dev.ramtrain.trainer.backend.ops.StridedCopy;
import dev.ramtrain.trainer.backend.ops.StridedCopy.Strides;

/** timm's {@code global_pool='token'}: a sample's first token (the class token) as its features. */
public final class ClassTokenPool extends BaseLayer {
  private final int tokens;
  private final int dim;
  private DeviceBuffer out;
  private DeviceBuffer dx;

  public ClassTokenPool(String name, int tokens, int dim) {
    super(name);
    this.tokens = tokens;
    this.dim = dim;
  }

  @Override
  public int inputSize() {
    return tokens * dim;
  }

  @Override
  public int outputSize() {
    return dim;
  }

  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    out = own("out", (long) maxBatch * dim);
    dx = inputGradient((long) maxBatch * inputSize());
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer x, int batch, boolean training) {
    DeviceBuffer y = out.view(0, (long) batch * dim);
    backend.run(
        s,
        new StridedCopy(
            x, new Strides(inputSize(), 0, 1), y, new Strides(dim, 0, 1), batch, 1, dim, false));
    return y;
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    if (!needInputGrad) {
      return null;
    }
    DeviceBuffer dxb = dx.view(0, (long) batch * inputSize());
    backend.run(s, new Fill(dxb, 0f));
    backend.run(
        s,
        new StridedCopy(
            dy, new Strides(dim, 0, 1), dxb, new Strides(inputSize(), 0, 1), batch, 1, dim, false));
    return dxb;
  }
}
