package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import java.util.List;

/**
 * One layer with an explicit forward and backward (no general autograd). A layer declares its
 * parameters, then is bound to the model's parameter slab and given activation memory for up to
 * {@code maxBatch} samples, which it owns and frees on close.
 */
public interface Layer extends AutoCloseable {
  String name();

  /** Elements per sample of the input and of the output. */
  int inputSize();

  int outputSize();

  default List<ParamSpec> parameters() {
    return List.of();
  }

  /** State saved with the model but not trained (PyTorch's buffers, e.g. running statistics). */
  default List<ParamSpec> buffers() {
    return List.of();
  }

  void bind(Backend backend, ParameterSource params, int maxBatch);

  /**
   * Bytes of scratch this layer uses within one forward or backward call at {@code maxBatch} on
   * {@code backend} (whose choices of method it may depend on) and keeps for none: taken from the
   * model's shared {@link Workspace}, sized for the largest need.
   */
  default long scratchBytes(Backend backend, int maxBatch) {
    return 0;
  }

  /**
   * The largest input per sample of this layer and of every layer inside it: what the model's
   * shared input-gradient slots ({@link GradientSlots}) must hold per sample.
   */
  default int largestInput() {
    return inputSize();
  }

  /**
   * Whether backward reads the output forward returned. A layer that does not lets the residual it
   * closes write the sum over that output once the branch is done with it (torchvision's {@code out
   * += identity}); the safe answer, yes, is the default.
   */
  default boolean backwardReadsOutput() {
    return true;
  }

  /**
   * Whether an evaluation forward ({@code training} false) returns its input itself (an in-place
   * ReLU, dropout): then a model bound for inference finds this layer's output where its input is
   * ({@link ActivationKeys}).
   */
  default boolean evaluationReturnsInput() {
    return false;
  }

  /**
   * Called before each training forward with a seed drawn from (model seed, step), for layers whose
   * training forward draws random numbers (dropout): a resumed run draws the same numbers.
   */
  default void beginStep(long stepSeed) {}

  /**
   * While on, training forwards are recomputations for backward (activation checkpointing): they
   * must compute what the first forward did without updating state again (running statistics).
   */
  default void recomputing(boolean on) {}

  /**
   * Whether this layer's next backward may write its parameters' gradients instead of adding to
   * them ({@link #gradientsAreZero}): then the model need not zero them first. A layer that says
   * yes writes every gradient element in that backward and adds again in any later one.
   */
  default boolean writesFreshGradients() {
    return false;
  }

  /** Its gradients count as zero: the next backward writes them ({@link #writesFreshGradients}). */
  default void gradientsAreZero() {}

  /** Computes the output for {@code batch} samples of {@code x}; the layer may keep {@code x}. */
  DeviceBuffer forward(Stream stream, DeviceBuffer x, int batch, boolean training);

  /**
   * Given dL/dy for the last forward, adds dL/dθ to the gradient slab and returns dL/dx ({@code
   * needInputGrad} is false for the first layer, which then may return null).
   */
  DeviceBuffer backward(Stream stream, DeviceBuffer dy, int batch, boolean needInputGrad);

  @Override
  void close();
}
