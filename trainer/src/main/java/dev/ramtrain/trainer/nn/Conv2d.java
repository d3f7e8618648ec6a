package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import java.util.List;

/**
 * 2-D convolution on NCHW activations, weight [out, in, k, k] as PyTorch's nn.Conv2d. Forward is
 * one batched im2col and one GEMM giving channels-last rows, the bias, then a transpose to NCHW;
 * backward runs the same path in reverse (col2im for the input gradient).
 */
public final class Conv2d extends BaseLayer {
  private final int in;
  private final int out;
  private final int h;
  private final int w;
  private final int k;
  private final int stride;
  private final int pad;
  private final int oh;
  private final int ow;
  private final int patch; // in * k * k
  private DeviceBuffer weight;
  private DeviceBuffer bias;
  private DeviceBuffer weightGrad;
  private DeviceBuffer biasGrad;
  private DeviceBuffer cols;
  private DeviceBuffer rows; // channels-last output, then its gradient
  private DeviceBuffer y;
  private DeviceBuffer dcols;
  private DeviceBuffer dx;

  public Conv2d(String name, int in, int h, int w, int out, int k, int stride, int pad) {
    super(name);
    if (in < 1 || out < 1 || k < 1 || stride < 1 || pad < 0 || h + 2 * pad < k || w + 2 * pad < k) {
      throw new IllegalArgumentException(
          name
              + ": bad convolution "
              + in
              + "x"
              + h
              + "x"
              + w
              + " -> "
              + out
              + " k"
              + k
              + " s"
              + stride
              + " p"
              + pad);
    }
    this.in = in;
    this.out = out;
    this.h = h;
    this.w = w;
    this.k = k;
    this.stride = stride;
    this.pad = pad;
    this.oh = (h + 2 * pad - k) / stride + 1;
    this.ow = (w + 2 * pad - k) / stride + 1;
    this.patch = in * k * k;
  }

  public int outputHeight() {
    return oh;
  }

  public int outputWidth() {
    return ow;
  }

  @Override
  public int inputSize() {
    return in * h * w;
  }

  @Override
  public int outputSize() {
    return out * oh * ow;
  }

  @Override
  public List<ParamSpec> parameters() {
    return List.of(
        new ParamSpec(
            name + ".weight", new int[] {out, in, k, k}, ParamSpec.Init.KAIMING_UNIFORM, patch),
        new ParamSpec(name + ".bias", new int[] {out}, ParamSpec.Init.FAN_IN_UNIFORM, patch));
  }

  @Override
  protected void bind(Parameters params, int maxBatch) {
    weight = params.value(name + ".weight");
    bias = params.value(name + ".bias");
    weightGrad = params.grad(name + ".weight");
    biasGrad = params.grad(name + ".bias");
    long positions = (long) maxBatch * oh * ow;
    cols = own("cols", positions * patch);
    rows = own("rows", positions * out);
    y = own("out", positions * out);
    dcols = own("dcols", positions * patch);
    dx = own("dx", (long) maxBatch * inputSize());
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer x, int batch, boolean training) {
    int positions = batch * oh * ow;
    DeviceBuffer c = cols.view(0, (long) positions * patch);
    DeviceBuffer r = rows.view(0, (long) positions * out);
    DeviceBuffer yb = y.view(0, (long) positions * out);
    backend.im2col(s, x, batch, in, h, w, k, k, stride, pad, c);
    backend.gemm(s, false, true, positions, out, patch, 1f, c, patch, weight, patch, 0f, r, out);
    backend.addBias(s, r, bias, positions, out);
    backend.transpose(s, r, batch, oh * ow, out, yb); // [n, hw, out] -> [n, out, hw]
    return yb;
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    int positions = batch * oh * ow;
    DeviceBuffer dr = rows.view(0, (long) positions * out);
    DeviceBuffer c = cols.view(0, (long) positions * patch);
    backend.transpose(s, dy, batch, out, oh * ow, dr); // [n, out, hw] -> [n, hw, out]
    backend.gemm(
        s, true, false, out, patch, positions, 1f, dr, out, c, patch, 1f, weightGrad, patch);
    backend.sumRows(s, dr, biasGrad, positions, out, 1f);
    if (!needInputGrad) {
      return null;
    }
    DeviceBuffer dc = dcols.view(0, (long) positions * patch);
    DeviceBuffer dxb = dx.view(0, (long) batch * inputSize());
    backend.gemm(s, false, false, positions, patch, out, 1f, dr, out, weight, patch, 0f, dc, patch);
    backend.col2im(s, dc, batch, in, h, w, k, k, stride, pad, dxb);
    return dxb;
  }
}
