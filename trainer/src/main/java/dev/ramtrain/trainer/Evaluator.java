package dev.ramtrain.trainer;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.data.Batch;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.nn.CrossEntropyLoss;
import dev.ramtrain.trainer.nn.Network;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.PriorityQueue;

/**
 * Loss, accuracy and confusion matrix of a model over every batch of a loader, without training,
 * and its {@link #MISTAKES} most confident mistakes with their images.
 */
public final class Evaluator {
  /** How many mistakes an evaluation keeps (a report shows them as a grid). */
  public static final int MISTAKES = 24;

  // Most confident first; among equals the earlier sample, so the choice never depends on order
  // of arrival beyond the loader's own (deterministic) order.
  private static final Comparator<EvalResult.Mistake> RANK =
      Comparator.comparingDouble((EvalResult.Mistake m) -> -m.confidence())
          .thenComparingLong(EvalResult.Mistake::sample);

  private Evaluator() {}

  public static EvalResult evaluate(
      Network model, CrossEntropyLoss loss, DeviceInputs inputs, DataLoader data) {
    return evaluate(model, loss, inputs, data, MISTAKES);
  }

  /**
   * As {@link #evaluate(Network, CrossEntropyLoss, DeviceInputs, DataLoader)}, keeping {@code
   * mistakes}.
   */
  public static EvalResult evaluate(
      Network model, CrossEntropyLoss loss, DeviceInputs inputs, DataLoader data, int mistakes) {
    int classes = model.outputSize();
    long[][] confusion = new long[classes][classes];
    PriorityQueue<EvalResult.Mistake> kept = new PriorityQueue<>(RANK.reversed()); // worst on top
    double lossSum = 0;
    long samples = 0;
    try (DataLoader.Epoch batches = data.epoch(0)) {
      Batch b;
      while ((b = batches.next()) != null) {
        int n = b.size();
        inputs.stage(b, 0);
        DeviceBuffer x = inputs.normalized(0, n);
        var stream = inputs.computeStream();
        DeviceBuffer logits = model.forward(stream, x, n, false);
        loss.compute(stream, logits, inputs.labels(0, n), n);
        inputs.consumed(0);
        DeviceInputs.Readback rb =
            inputs.readWithConfidence(loss.losses(n), logits, inputs.labels(0, n), n);
        // The staging slot is read for the mistakes' images before the loader may refill it.
        keepMistakes(rb, b, samples, inputs.shape(), kept, mistakes);
        inputs.releaseWhenCopied(b, 0);
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
    List<EvalResult.Mistake> mostConfidentFirst = new ArrayList<>(kept);
    mostConfidentFirst.sort(RANK);
    return new EvalResult(
        lossSum / samples, (double) correct / samples, samples, confusion, mostConfidentFirst);
  }

  private static void keepMistakes(
      DeviceInputs.Readback rb,
      Batch b,
      long firstSample,
      ImageShape shape,
      PriorityQueue<EvalResult.Mistake> kept,
      int room) {
    for (int i = 0; i < b.size() && room > 0; i++) {
      if (rb.predictions()[i] == rb.truth()[i]) {
        continue;
      }
      long sample = firstSample + i;
      float confidence = rb.confidence()[i];
      EvalResult.Mistake worst = kept.peek();
      if (kept.size() == room
          && (confidence < worst.confidence()
              || confidence == worst.confidence() && sample > worst.sample())) {
        continue;
      }
      byte[] pixels = new byte[shape.bytes()];
      b.pixels().asByteBuffer().get(i * shape.bytes(), pixels);
      kept.add(
          new EvalResult.Mistake(
              sample,
              rb.truth()[i],
              rb.predictions()[i],
              confidence,
              shape.height(),
              shape.width(),
              shape.channels(),
              pixels));
      if (kept.size() > room) {
        kept.poll();
      }
    }
  }
}
