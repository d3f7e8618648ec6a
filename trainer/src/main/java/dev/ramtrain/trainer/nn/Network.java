package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;

/** What evaluation needs of a model, wherever its weights live: its shape and a forward pass. */
public interface Network {
  String spec();

  /** Values per sample in and out (flat NCHW). */
  int inputSize();

  int outputSize();

  int maxBatch();

  /** The logits of {@code batch} samples; {@code training} selects dropout and batch statistics. */
  DeviceBuffer forward(Stream stream, DeviceBuffer x, int batch, boolean training);
}
