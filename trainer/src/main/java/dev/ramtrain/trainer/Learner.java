package dev.ramtrain.trainer;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.nn.Network;
import dev.ramtrain.trainer.optim.EmaDecay;
import java.util.Map;

/**
 * A model and its optimizer as the training loop drives them. {@link ResidentLearner} keeps both on
 * the device; {@code offload.OffloadedLearner} keeps master weights, gradients and optimizer state
 * in host memory and streams layers through the device. For the same seed both end with the same
 * weights (bit for bit on the CPU backend), and their checkpoints are interchangeable.
 */
public interface Learner extends Network, AutoCloseable {
  /** The network being trained; the shape and the forward pass below are its. */
  Network network();

  @Override
  default String spec() {
    return network().spec();
  }

  @Override
  default int inputSize() {
    return network().inputSize();
  }

  @Override
  default int outputSize() {
    return network().outputSize();
  }

  @Override
  default int maxBatch() {
    return network().maxBatch();
  }

  @Override
  default DeviceBuffer forward(Stream compute, DeviceBuffer x, int batch, boolean training) {
    return network().forward(compute, x, batch, training);
  }

  long parameterCount();

  /** Starts training step {@code step}: zeroes the gradients and seeds this step's dropout. */
  void beginStep(Stream compute, long step);

  /**
   * A later micro-batch of the step {@link #beginStep} began (gradient accumulation): keeps the
   * gradients so far and seeds this micro-batch's dropout with {@code dropoutSeed}.
   */
  void continueStep(Stream compute, long dropoutSeed);

  /**
   * Backward from dL/dlogits, adding to the gradients, without an update: every micro-batch of an
   * accumulated step but the last (data parallel, without exchanging gradients, as DDP's no_sync).
   */
  void accumulate(Stream compute, DeviceBuffer dlogits, int batch);

  /**
   * Backward from dL/dlogits, then one optimizer update at learning rate {@code lr}, clipping the
   * gradient norm first if so configured. One call, because an offloaded update runs layer by layer
   * while backward goes on; it is enqueued and may still be running when this returns.
   */
  void backwardAndUpdate(Stream compute, DeviceBuffer dlogits, int batch, float lr);

  /**
   * Figures about the last step for the metrics file (offloaded: bytes and times of copies, the
   * overlap, the host optimizer); waits for the step to finish. Empty for resident training.
   */
  Map<String, Object> stepMetrics(Stream compute);

  /**
   * The device slab of untrained state (batch norm's running statistics, PyTorch's buffers), read
   * by evaluation beside the weights; empty for a model without any.
   */
  DeviceBuffer buffers();

  /**
   * Starts keeping an exponential moving average of the weights and buffers (timm's ModelEma,
   * {@code --ema}): {@code ema += (1 − decay)(w − ema)} after every optimizer step ({@link
   * EmaDecay}: warmed up or not, counting {@code resumed}'s steps), from {@code resumed}'s average
   * (a checkpoint of a run with {@code --ema}) or, null or without one, from the weights now.
   * Resident, on the device; offloaded, on the host beside the masters, each layer's right after
   * its update.
   */
  default void averageWeights(EmaDecay decay, Checkpoints.Loaded resumed, Stream compute) {
    throw new UnsupportedOperationException(getClass().getSimpleName() + " keeps no average");
  }

  /** Whether {@link #averageWeights} was called. */
  default boolean averaging() {
    return false;
  }

  /**
   * Runs {@code body} (an evaluation) with the averaged weights and buffers in place of the trained
   * ones, which are back afterwards, bit for bit.
   */
  default <T> T withAveragedWeights(Stream compute, java.util.function.Supplier<T> body) {
    throw new UnsupportedOperationException(getClass().getSimpleName() + " keeps no average");
  }

  /**
   * Weights, buffers and optimizer state, read back for a checkpoint. Offloaded, the tensors read
   * the host copy in place as they are written (a model may pass the heap): write them before the
   * next step.
   */
  Checkpoints.Snapshot snapshot(Stream compute);

  /**
   * The weights and buffers alone, as {@link #snapshot} holds them (what the ranks compare at the
   * end), without reading the optimizer state back.
   */
  default java.util.List<dev.ramtrain.trainer.checkpoint.Safetensors.Tensor> weights(
      Stream compute) {
    return snapshot(compute).weights();
  }

  /** Puts a checkpoint's weights, buffers and optimizer state back. */
  void restore(Checkpoints.Loaded checkpoint, Stream compute);

  @Override
  void close();
}
