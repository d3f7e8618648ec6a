package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.StridedCopy;
import dev.ramtrain.trainer.backend.ops.StridedCopy.Strides;
import java.util.List;

/**
 * A ViT's patch grid to tokens, as timm's VisionTransformer does after its patch embedding: the
 * [dim, positions] output of the patch convolution transposed to [positions, dim] rows, the class
 * token ({@code cls_token}) prepended, the position embedding ({@code pos_embed}, [1, 1 +
 * positions, dim]) added. Parameter names are timm's; both start as timm starts them (the class
 * token near zero, the position embedding trunc_normal_(std=.02)).
 */
public final class PatchTokens extends BaseLayer {
  private final int dim;
  private final int positions;
  private final int tokens;
  private DeviceBuffer cls;
  private DeviceBuffer pos;
  private DeviceBuffer clsGrad;
  private DeviceBuffer posGrad;
  private DeviceBuffer out;
  private DeviceBuffer dx;

  public PatchTokens(String name, int dim, int positions) {
    super(name);
    this.dim = dim;
    this.positions = positions;
    this.tokens = positions + 1;
  }

  public int tokens() {
    return tokens;
  }

  @Override
  public int inputSize() {
    return dim * positions;
  }

  @Override
  public int outputSize() {
    return tokens * dim;
  }

  @Override
  public List<ParamSpec> parameters() {
    return List.of(
        new ParamSpec("cls_token", new int[] {1, 1, dim}, ParamSpec.Init.ZEROS, 0),
        new ParamSpec("pos_embed", new int[] {1, tokens, dim}, ParamSpec.Init.TRUNC_NORMAL, 0));
  }

  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    cls = params.value("cls_token");
    pos = params.value("pos_embed");
    clsGrad = params.grad("cls_token");
    posGrad = params.grad("pos_embed");
    out = own("out", (long) maxBatch * outputSize());
    dx = inputGradient((long) maxBatch * inputSize());
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer x, int batch, boolean training) {
    DeviceBuffer y = out.view(0, (long) batch * outputSize());
    // rows 1.. of each sample: the grid transposed
    backend.run(
        s,
        new StridedCopy(
            x,
            new Strides(inputSize(), 1, positions),
            y.view(dim, (long) batch * outputSize() - dim),
            new Strides(outputSize(), dim, 1),
            batch,
            positions,
            dim,
            false));
    // row 0: the class token, the same for every sample
    backend.run(
        s,
        new StridedCopy(
            cls, new Strides(0, 0, 1), y, new Strides(outputSize(), 0, 1), batch, 1, dim, false));
    backend.run(
        s,
        new StridedCopy(
            pos, new Strides(0, dim, 1), y, Strides.dense(tokens, dim), batch, tokens, dim, true));
    return y;
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    // the embeddings' gradients: sums over the batch, in sample order
    backend.run(
        s,
        new StridedCopy(
            dy,
            Strides.dense(tokens, dim),
            posGrad,
            new Strides(0, dim, 1),
            batch,
            tokens,
            dim,
            true));
    backend.run(
        s,
        new StridedCopy(
            dy,
            new Strides(outputSize(), 0, 1),
            clsGrad,
            new Strides(0, 0, 1),
            batch,
            1,
            dim,
            true));
    if (!needInputGrad) {
      return null;
    }
    DeviceBuffer dxb = dx.view(0, (long) batch * inputSize());
    backend.run(
        s,
        new StridedCopy(
            dy.view(dim, (long) batch * outputSize() - dim),
            new Strides(outputSize(), dim, 1),
            dxb,
            new Strides(inputSize(), 1, positions),
            batch,
            positions,
            dim,
            false));
    return dxb;
  }
}
