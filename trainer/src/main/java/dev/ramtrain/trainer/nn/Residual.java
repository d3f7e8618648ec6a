package dev.ramtrain.trainer.nn;

import dev.ramtrain.random.Seeds;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Add;
import dev.ramtrain.trainer.backend.ops.DropoutMask;
import dev.ramtrain.trainer.backend.ops.Multiply;
import dev.ramtrain.trainer.backend.ops.StridedCopy;
import dev.ramtrain.trainer.backend.ops.StridedCopy.Strides;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * {@code x + drop_path(branch(x))}: the pre-norm residual of a transformer block (timm's {@code x =
 * x + drop_path(attn(norm1(x)))}) and of a ConvNeXt block. Drop path (stochastic depth) zeroes a
 * whole sample's branch with probability p in training and scales the kept ones by 1/(1-p); the
 * mask is drawn from the counter RNG by (step seed, block name, sample), so a resumed run drops the
 * same samples.
 */
public final class Residual extends BaseLayer {
  private final List<Layer> branch;
  private final int size;
  private final float dropPath;
  private final boolean sumOverBranch; // the sum goes over the branch's output, not into `sum`
  private long stepSeed;
  private DeviceBuffer keep; // [batch]: 0 or 1/(1-p) per sample
  private DeviceBuffer mask; // keep, broadcast over each sample's values
  private DeviceBuffer scaled;
  private DeviceBuffer sum;
  private DeviceBuffer dx;
  private boolean dropped; // whether the last forward applied a mask

  public Residual(String name, List<Layer> branch, float dropPath) {
    super(name);
    this.branch = List.copyOf(branch);
    this.size = branch.get(0).inputSize();
    if (branch.get(branch.size() - 1).outputSize() != size) {
      throw new IllegalArgumentException(
          name
              + ": the branch maps "
              + size
              + " values per sample to "
              + branch.get(branch.size() - 1).outputSize());
    }
    if (!(dropPath >= 0 && dropPath < 1)) {
      throw new IllegalArgumentException(
          name + ": drop path rate must be in [0, 1), got " + dropPath);
    }
    this.dropPath = dropPath;
    // Without drop path (whose backward reuses its own buffers) the sum can go over the branch's
    // output where the branch's last layer no longer needs it (a linear, attention, a transpose).
    this.sumOverBranch = dropPath == 0 && !branch.get(branch.size() - 1).backwardReadsOutput();
  }

  public List<Layer> branch() {
    return branch;
  }

  @Override
  public int inputSize() {
    return size;
  }

  @Override
  public int outputSize() {
    return size;
  }

  @Override
  public List<ParamSpec> parameters() {
    List<ParamSpec> all = new ArrayList<>();
    branch.forEach(l -> all.addAll(l.parameters()));
    return all;
  }

  @Override
  public List<ParamSpec> buffers() {
    List<ParamSpec> all = new ArrayList<>();
    branch.forEach(l -> all.addAll(l.buffers()));
    return all;
  }

  @Override
  public long scratchBytes(Backend backend, int maxBatch) {
    return branch.stream().mapToLong(l -> l.scratchBytes(backend, maxBatch)).max().orElse(0);
  }

  @Override
  public int largestInput() {
    return branch.stream().mapToInt(Layer::largestInput).max().orElse(size);
  }

  /**
   * The branch's layers alternate between two gradient slots: each reads the other's. At the top
   * level one of them is the residual's own input-gradient slot (the branch's first layer writes
   * there and the received gradient is added in place); the received gradient itself is read last,
   * so its slot is not free.
   */
  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    ActivationKeys keys = params.activationKeys();
    if (keys != null) {
      bindForInference(params, keys, maxBatch);
      return;
    }
    String own = params.receivedGradientSlot() == null ? null : params.gradientSlot();
    for (int i = 0; i < branch.size(); i++) {
      ParameterSource child =
          own != null && i % 2 == 0
              ? params.inputGradientInto(own, "branch" + i % 2)
              : params.inputGradientIn("branch" + i % 2);
      branch.get(i).bind(backend, child, maxBatch);
    }
    if (!sumOverBranch) {
      sum = own("sum", (long) maxBatch * size);
    }
    dx = inputGradient((long) maxBatch * size);
    if (dropPath > 0) {
      keep = own("keep", maxBatch);
      mask = own("mask", (long) maxBatch * size);
      scaled = own("scaled", (long) maxBatch * size);
    }
  }

  /**
   * Bound for inference the branch's layers write where {@link ActivationKeys} says, keeping the
   * residual's input, and the sum goes over the branch's output: no backward will read it.
   */
  private void bindForInference(ParameterSource params, ActivationKeys keys, int maxBatch) {
    String in = keys.inputKey();
    for (Layer layer : branch) {
      ActivationKeys child = keys.child(in, Set.of());
      layer.bind(backend, params.withActivationKeys(child), maxBatch);
      in = child.outputKey();
    }
    keys.outputIn(in);
  }

  @Override
  public void beginStep(long seed) {
    stepSeed = Seeds.mix(seed, name.hashCode());
    branch.forEach(l -> l.beginStep(seed));
  }

  @Override
  public void recomputing(boolean on) {
    branch.forEach(l -> l.recomputing(on));
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer x, int batch, boolean training) {
    DeviceBuffer h = x;
    for (Layer layer : branch) {
      h = layer.forward(s, h, batch, training);
    }
    long n = (long) batch * size;
    dropped = training && dropPath > 0;
    if (dropped) {
      backend.run(s, new DropoutMask(dropPath, stepSeed, keep.view(0, batch)));
      backend.run(
          s,
          new StridedCopy(
              keep, new Strides(1, 0, 0), mask, new Strides(size, 0, 1), batch, 1, size, false));
      backend.run(s, new Multiply(h, mask.view(0, n), scaled.view(0, n)));
      h = scaled.view(0, n);
    }
    DeviceBuffer y = sum == null ? h : sum.view(0, n); // bound for inference, or sumOverBranch
    backend.run(s, new Add(x, h, y));
    return y;
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    long n = (long) batch * size;
    DeviceBuffer g = dy;
    if (dropped) {
      g = scaled.view(0, n); // the scaled branch output has served forward: reuse its memory
      backend.run(s, new Multiply(dy, mask.view(0, n), g));
    }
    for (int i = branch.size() - 1; i >= 0; i--) {
      g = branch.get(i).backward(s, g, batch, true);
    }
    if (!needInputGrad) {
      return null;
    }
    DeviceBuffer dxb = dx.view(0, n);
    backend.run(s, new Add(dy, g, dxb));
    return dxb;
  }

  @Override
  public void close() {
    branch.forEach(Layer::close);
    super.close();
  }
}
