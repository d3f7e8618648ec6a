package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.Network;

/**
 * A model bound for inference that owns its memory, as {@code predict} and {@code evaluate} run it:
 * resident ({@link Model#buildForInference}) or with its weights streamed from the host ({@link
 * StreamedInference}); either takes a checkpoint's weights the same way.
 */
public interface InferenceNetwork extends Network, AutoCloseable {
  /** Puts {@code c}'s weights and buffers in place, checked by name and shape; synchronizes. */
  void restore(Checkpoints.Loaded c, Stream stream);

  /** Whether the weights stream from host memory. */
  boolean streamed();

  @Override
  void close();

  /** {@code model} (bound for inference on {@code backend}), resident. */
  static InferenceNetwork resident(Model model, Backend backend) {
    return new InferenceNetwork() {
      @Override
      public void restore(Checkpoints.Loaded c, Stream stream) {
        Checkpoints.restore(c, model, null, backend, stream);
      }

      @Override
      public boolean streamed() {
        return false;
      }

      @Override
      public String spec() {
        return model.spec();
      }

      @Override
      public int inputSize() {
        return model.inputSize();
      }

      @Override
      public int outputSize() {
        return model.outputSize();
      }

      @Override
      public int maxBatch() {
        return model.maxBatch();
      }

      @Override
      public DeviceBuffer forward(Stream stream, DeviceBuffer x, int batch, boolean training) {
        return model.forward(stream, x, batch, training);
      }

      @Override
      public void close() {
        model.close();
      }
    };
  }
}
