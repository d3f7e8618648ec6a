package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.nn.Conv2d;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.Linear;
import dev.ramtrain.trainer.nn.ParamSpec;
import dev.ramtrain.trainer.nn.Parameters;
import dev.ramtrain.trainer.nn.ResidualBlock;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

/**
 * What one top-level layer costs: its parameters, the device memory its activations take (a fixed
 * part and a part per sample; its output is part of that), and its training FLOPs per sample
 * (forward and backward).
 */
public record LayerCost(
    String name,
    long parameters,
    long activationBytesFixed,
    long activationBytesPerSample,
    long outputBytesPerSample,
    long flopsPerSample) {

  public long activationBytes(int batch) {
    return activationBytesFixed + activationBytesPerSample * batch;
  }

  /**
   * Measures the layers {@code model} builds by binding each alone on {@code backend} at batch 1
   * and at batch 2 and reading what the backend allocated: the plan's activation figures are the
   * layers' own allocations, not a second formula that could drift from them.
   */
  public static List<LayerCost> measure(Supplier<List<Layer>> model, Backend backend) {
    List<Layer> atOne = model.get();
    List<Layer> atTwo = model.get();
    List<LayerCost> costs = new ArrayList<>();
    for (int i = 0; i < atOne.size(); i++) {
      Layer layer = atOne.get(i);
      long one = activationBytes(layer, backend, 1);
      long two = activationBytes(atTwo.get(i), backend, 2);
      long params = layer.parameters().stream().mapToLong(ParamSpec::count).sum();
      costs.add(
          new LayerCost(
              layer.name(),
              params,
              2 * one - two,
              two - one,
              4L * layer.outputSize(),
              flops(layer)));
    }
    return costs;
  }

  /**
   * Device bytes an unbound layer allocates besides its parameters and their gradients at {@code
   * batch}: activations, scratch and buffers (running statistics).
   */
  private static long activationBytes(Layer layer, Backend backend, int batch) {
    long before = backend.allocatedBytes();
    long params = layer.parameters().stream().mapToLong(ParamSpec::count).sum();
    try (Parameters p = Parameters.allocate(backend, layer.parameters(), layer.buffers())) {
      try {
        layer.bind(backend, p, batch);
        return backend.allocatedBytes() - before - 8 * params;
      } finally {
        layer.close();
      }
    }
  }

  /**
   * Training FLOPs per sample: a GEMM layer does 2 per weight and output position forward and twice
   * that backward (input and weight gradients); other layers a few per value, counted as 3.
   */
  static long flops(Layer layer) {
    if (layer instanceof Linear || layer instanceof Conv2d) {
      ParamSpec weight = layer.parameters().get(0);
      long positions = layer.outputSize() / weight.shape()[0]; // 1 for Linear
      return 6 * weight.count() * positions;
    }
    if (layer instanceof ResidualBlock block) {
      return block.children().stream().mapToLong(LayerCost::flops).sum();
    }
    return 3L * layer.outputSize();
  }
}
