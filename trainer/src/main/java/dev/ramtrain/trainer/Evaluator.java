package dev.ramtrain.trainer;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.data.Batch;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.nn.CrossEntropyLoss;
import dev.ramtrain.trainer.nn.Network;

/**
 * Loss, accuracy and confusion matrix of a model over every batch of a loader, without training.
 */
public final class Evaluator {
  private Evaluator() {}

  public static EvalResult evaluate(
      Network model, CrossEntropyLoss loss, DeviceInputs inputs, DataLoader data) {
    int classes = model.outputSize();
    long[][] confusion = new long[classes][classes];
    double lossSum = 0;
    long samples = 0;
    try (DataLoader.Epoch batches = data.epoch(0)) {
      Batch b;
      while ((b = batches.next()) != null) {
        int n = b.size();
        inputs.stage(b, 0);
        inputs.releaseWhenCopied(b, 0);
        DeviceBuffer x = inputs.normalized(0, n);
        var stream = inputs.computeStream();
        DeviceBuffer logits = model.forward(stream, x, n, false);
        loss.compute(stream, logits, inputs.labels(0, n), n);
        inputs.consumed(0);
        DeviceInputs.Readback rb = inputs.read(loss.losses(n), logits, inputs.labels(0, n), n);
        lossSum += rb.lossSum();
        for (int i = 0; i < n; i++) {
          confusion[rb.truth()[i]][rb.predictions()[i]]++;
        }
        samples += n;
      }
    }
    long correct = 0;
    for (int c = 0; c < classes; c++) {
      correct += confusion[c][c];
    }
    return new EvalResult(lossSum / samples, (double) correct / samples, samples, confusion);
  }
}
