package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Add;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * {@code relu(main(x) + shortcut(x))}: the residual add of a ResNet basic block. The shortcut is
 * the identity when empty, else a projection (1×1 convolution and batch norm). The sum and its ReLU
 * are computed in place over the main branch's output, which ends in batch norm. Backward sends the
 * same gradient down both branches and adds their input gradients.
 */
public final class ResidualBlock extends BaseLayer {
  private final List<Layer> main;
  private final List<Layer> shortcut;
  private final Activation relu;
  private DeviceBuffer dx;

  public ResidualBlock(String name, List<Layer> main, List<Layer> shortcut) {
    super(name);
    this.main = List.copyOf(main);
    this.shortcut = List.copyOf(shortcut);
    int in = main.get(0).inputSize();
    int out = main.get(main.size() - 1).outputSize();
    int shortcutOut = shortcut.isEmpty() ? in : shortcut.get(shortcut.size() - 1).outputSize();
    int shortcutIn = shortcut.isEmpty() ? in : shortcut.get(0).inputSize();
    if (shortcutOut != out || shortcutIn != in) {
      throw new IllegalArgumentException(
          name
              + ": the main branch maps "
              + in
              + " to "
              + out
              + " values per sample, the shortcut "
              + shortcutIn
              + " to "
              + shortcutOut);
    }
    if (!(main.get(main.size() - 1) instanceof BatchNorm2d)) {
      throw new IllegalArgumentException(
          name + ": the main branch must end in batch norm, whose output the sum goes over");
    }
    this.relu = Activation.reluInPlace(name + ".relu", out); // over the sum
  }

  @Override
  public int inputSize() {
    return main.get(0).inputSize();
  }

  @Override
  public int outputSize() {
    return relu.outputSize();
  }

  @Override
  public List<ParamSpec> parameters() {
    List<ParamSpec> all = new ArrayList<>();
    children().forEach(l -> all.addAll(l.parameters()));
    return all;
  }

  @Override
  public List<ParamSpec> buffers() {
    List<ParamSpec> all = new ArrayList<>();
    children().forEach(l -> all.addAll(l.buffers()));
    return all;
  }

  /** Its layers run one at a time, so the largest of theirs is the block's. */
  @Override
  public long scratchBytes(Backend backend, int maxBatch) {
    return children().stream().mapToLong(l -> l.scratchBytes(backend, maxBatch)).max().orElse(0);
  }

  /** The main branch, the shortcut's layers and the closing ReLU, in that order. */
  public List<Layer> children() {
    List<Layer> all = new ArrayList<>(main);
    all.addAll(shortcut);
    all.add(relu);
    return all;
  }

  @Override
  public int largestInput() {
    return children().stream().mapToInt(Layer::largestInput).max().orElse(inputSize());
  }

  /**
   * Each branch's layers alternate between two gradient slots; the closing ReLU's gradient, which
   * both branches start from, has a third, so neither branch writes over it. At the top level the
   * two are the model's own: the block's input-gradient slot (the main branch's first layer writes
   * there, and the shortcut's gradient is added in place) and the slot the block's gradient arrived
   * in, free once the ReLU has read it; the shortcut alternates between that one and the ReLU's,
   * free once the shortcut's last layer has read it. So a ResNet's backward needs three slots in
   * all, as autograd's peak holds about three such gradients.
   */
  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    ActivationKeys keys = params.activationKeys();
    if (keys != null) {
      bindForInference(params, keys, maxBatch);
      return;
    }
    Backend b = backend;
    String own = params.gradientSlot();
    String received = params.receivedGradientSlot();
    for (int i = 0; i < main.size(); i++) {
      ParameterSource child =
          received == null
              ? params.inputGradientIn("main" + i % 2)
              : params.inputGradientInto(i % 2 == 0 ? own : received, "main" + i % 2);
      main.get(i).bind(b, child, maxBatch);
    }
    ParameterSource reluSource = params.inputGradientIn("relu");
    String reluSlot = reluSource.gradientSlot();
    for (int i = 0; i < shortcut.size(); i++) {
      boolean last = (shortcut.size() - 1 - i) % 2 == 0; // the last, and every second before it
      ParameterSource child =
          received == null
              ? params.inputGradientIn("shortcut" + i % 2)
              : params.inputGradientInto(last ? received : reluSlot, "shortcut" + i % 2);
      shortcut.get(i).bind(b, child, maxBatch);
    }
    relu.bind(b, reluSource, maxBatch);
    dx = inputGradient((long) maxBatch * inputSize());
  }

  /**
   * Bound for inference the main branch's layers write where {@link ActivationKeys} says, keeping
   * the block's input for the shortcut, whose layers keep the main branch's output as well; the sum
   * and its ReLU go over that output.
   */
  private void bindForInference(ParameterSource params, ActivationKeys keys, int maxBatch) {
    String sum = bindChain(main, params, keys, Set.of(), maxBatch);
    bindChain(shortcut, params, keys, Set.of(sum), maxBatch);
    relu.bind(backend, params.withActivationKeys(keys.child(sum, Set.of())), maxBatch);
    keys.outputIn(sum);
  }

  /** Binds {@code layers} in a chain from the block's input; returns the region of its output. */
  private String bindChain(
      List<Layer> layers,
      ParameterSource params,
      ActivationKeys keys,
      Set<String> alsoLive,
      int maxBatch) {
    String in = keys.inputKey();
    for (Layer layer : layers) {
      ActivationKeys child = keys.child(in, alsoLive);
      layer.bind(backend, params.withActivationKeys(child), maxBatch);
      in = child.outputKey();
    }
    return in;
  }

  @Override
  public void beginStep(long stepSeed) {
    children().forEach(l -> l.beginStep(stepSeed));
  }

  @Override
  public void recomputing(boolean on) {
    children().forEach(l -> l.recomputing(on));
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer x, int batch, boolean training) {
    DeviceBuffer h = run(main, s, x, batch, training);
    DeviceBuffer skip = run(shortcut, s, x, batch, training);
    // The sum and its ReLU go over the main branch's output, as torchvision's `out += identity`:
    // its closing batch norm's backward reads its input, not this.
    backend.run(s, new Add(h, skip, h));
    return relu.forward(s, h, batch, training);
  }

  private static DeviceBuffer run(
      List<Layer> layers, Stream s, DeviceBuffer x, int batch, boolean training) {
    DeviceBuffer h = x;
    for (Layer layer : layers) {
      h = layer.forward(s, h, batch, training);
    }
    return h;
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    DeviceBuffer g = relu.backward(s, dy, batch, true);
    DeviceBuffer dMain = back(main, s, g, batch, needInputGrad);
    DeviceBuffer dSkip = shortcut.isEmpty() ? g : back(shortcut, s, g, batch, needInputGrad);
    if (!needInputGrad) {
      return null;
    }
    DeviceBuffer dxb = dx.view(0, (long) batch * inputSize());
    backend.run(s, new Add(dMain, dSkip, dxb));
    return dxb;
  }

  private static DeviceBuffer back(
      List<Layer> layers, Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    DeviceBuffer g = dy;
    for (int i = layers.size() - 1; i >= 0; i--) {
      g = layers.get(i).backward(s, g, batch, i > 0 || needInputGrad);
    }
    return g;
  }

  @Override
  public void close() {
    children().forEach(Layer::close);
    super.close();
  }
}
