package dev.ramtrain.trainer.checkpoint;

import java.io.IOException;
import java.util.Map;
import java.util.Set;

/**
 * A weights file's tensors as its index describes them: every name and shape (checked when the
 * index is read), the values read only for the names asked. A model is matched against the shapes
 * first, so a file of tensors the model does not have costs its header, not its bytes (a 16 GB file
 * of foreign tensors was read whole before its names were compared).
 */
interface StoredTensors {
  /** Each tensor's shape by name, in the file's order. */
  Map<String, long[]> shapes();

  /**
   * The values of {@code names} (some of {@link #shapes()}' keys), widened to float32, in the
   * file's order; an unreadable or malformed tensor is an IOException naming the file.
   */
  Map<String, float[]> read(Set<String> names) throws IOException;

  /** Every tensor, in the file's order. */
  default Map<String, Safetensors.Tensor> readAll() throws IOException {
    Map<String, long[]> shapes = shapes();
    Map<String, float[]> values = read(shapes.keySet());
    Map<String, Safetensors.Tensor> tensors = new java.util.LinkedHashMap<>();
    shapes.forEach(
        (name, shape) -> tensors.put(name, new Safetensors.Tensor(name, shape, values.get(name))));
    return tensors;
  }
}
