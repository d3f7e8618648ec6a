package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Multiply;
import dev.ramtrain.trainer.backend.ops.StridedCopy;
import dev.ramtrain.trainer.backend.ops.StridedCopy.Strides;
import dev.ramtrain.trainer.backend.ops.SumRows;
import java.util.List;

/**
 * Layer scale (CaiT, ConvNeXt): each feature of channels-last rows times its learned factor, {@code
 * y[r, f] = x[r, f] · gamma[f]}, gamma starting at 1e-6 as ConvNeXt's {@code
 * layer_scale_init_value}. The parameter is named as timm names it ({@code NAME.gamma} when
 * constructed so). The factors are broadcast to the batch's rows in the model's workspace by
 * forward and again by backward, so both are plain products and the layer keeps only its output.
 */
public final class LayerScale extends BaseLayer {
  private final String parameter;
  private final int rowsPerSample;
  private final int features;
  private DeviceBuffer gamma;
  private DeviceBuffer gammaGrad;
  private DeviceBuffer factors; // gamma on every row: scratch
  private DeviceBuffer y;
  private DeviceBuffer dx;
  private DeviceBuffer products; // x · dy, summed over rows into dgamma: scratch
  private DeviceBuffer x;

  /** {@code parameter}: the full name of gamma (ConvNeXt: {@code stages.0.blocks.0.gamma}). */
  public LayerScale(String name, String parameter, int rowsPerSample, int features) {
    super(name);
    this.parameter = parameter;
    this.rowsPerSample = rowsPerSample;
    this.features = features;
  }

  @Override
  public int inputSize() {
    return rowsPerSample * features;
  }

  @Override
  public int outputSize() {
    return inputSize();
  }

  @Override
  public List<ParamSpec> parameters() {
    return List.of(new ParamSpec(parameter, new int[] {features}, ParamSpec.Init.LAYER_SCALE, 0));
  }

  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    gamma = params.value(parameter);
    gammaGrad = params.grad(parameter);
    long n = (long) maxBatch * inputSize();
    factors = scratch("factors", DType.F32, 0, n);
    y = own("out", n);
    dx = inputGradient(n);
    products = scratch("products", DType.F32, 4 * n, n);
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer input, int batch, boolean training) {
    x = input;
    int rows = Math.multiplyExact(batch, rowsPerSample);
    long n = (long) rows * features;
    DeviceBuffer f = broadcastGamma(s, rows);
    DeviceBuffer yb = y.view(0, n);
    backend.run(s, new Multiply(input, f, yb));
    return yb;
  }

  /** Gamma on each of {@code rows} rows, in the workspace. */
  private DeviceBuffer broadcastGamma(Stream s, int rows) {
    DeviceBuffer f = factors.view(0, (long) rows * features);
    backend.run(
        s,
        new StridedCopy(
            gamma, new Strides(0, 0, 1), f, new Strides(features, 0, 1), rows, 1, features, false));
    return f;
  }

  @Override
  public long scratchBytes(Backend backend, int maxBatch) {
    return 2 * 4L * maxBatch * inputSize(); // the factors and backward's products
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    int rows = Math.multiplyExact(batch, rowsPerSample);
    long n = (long) rows * features;
    DeviceBuffer p = products.view(0, n);
    backend.run(s, new Multiply(x, dy, p));
    backend.run(s, new SumRows(p, gammaGrad, rows, features, 1f)); // dgamma += Σ x · dy
    if (!needInputGrad) {
      return null;
    }
    DeviceBuffer dxb = dx.view(0, n);
    backend.run(s, new Multiply(dy, broadcastGamma(s, rows), dxb));
    return dxb;
  }
}
