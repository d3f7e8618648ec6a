package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.image.Augmentation;
import dev.ramtrain.etl.image.ImageProcessor;
import dev.ramtrain.etl.image.ImageTransform;
import dev.ramtrain.etl.source.RawSample;
import dev.ramtrain.etl.source.RejectedImageException;
import dev.ramtrain.etl.source.SampleBytes;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.jobs.config.EtlSettings;
import dev.ramtrain.trainer.Predictor;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.engines.Backends;
import dev.ramtrain.trainer.data.CropPlan;
import dev.ramtrain.trainer.data.CropResampler;
import dev.ramtrain.trainer.offload.InferenceNetwork;
import dev.ramtrain.trainer.offload.OffloadSpec;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * A trained checkpoint classifying image files as preprocessing and training saw them: decoded,
 * resized and normalized as the checkpoint records, in batches. Owns its backend and model; what
 * {@code predict} and the notebook API serve with.
 */
public final class ImageClassifier implements AutoCloseable {
  /** A file's class and probabilities, or why it could not be classified ({@code error}). */
  public record Prediction(
      String path, String label, float probability, float[] probabilities, String error) {}

  private final TrainedCheckpoint trained;
  private final ImageProcessor processor;
  private final CropResampler cropper; // the run's evaluation crop, or null: stored as served
  private final int batchSize;
  private final long maxFileBytes;
  private final Backend backend;
  private final InferenceNetwork model;
  private final Predictor predictor;

  private ImageClassifier(
      TrainedCheckpoint trained,
      ImageProcessor processor,
      int batchSize,
      long maxFileBytes,
      Backend backend,
      InferenceNetwork model,
      Predictor predictor) {
    this.trained = trained;
    this.processor = processor;
    this.batchSize = batchSize;
    this.maxFileBytes = maxFileBytes;
    this.backend = backend;
    this.model = model;
    this.predictor = predictor;
    // one at a time: batches are classified in turn
    this.cropper =
        trained.evalCrop() == null
            ? null
            : trained.evalCrop().filter().resamplers(new EtlImageNatives()).get();
  }

  /**
   * {@code limits}: what one image may be, as preprocessing applies them. The classifier keeps
   * {@code trained} without its tensors once they are on the device: a caller that lets it go too
   * lets the heap return them ({@link #releaseHeap}).
   */
  public static ImageClassifier open(
      TrainedCheckpoint trained,
      BackendSpec backendSpec,
      EtlSettings.ImageLimits limits,
      int batchSize,
      OffloadSpec offload) {
    // A run trained on random resized crops sees its images as evaluation does: preprocessed to
    // the stored shape, then resized and centre-cropped (TrainedCheckpoint.EvalCrop).
    ImageShape decoded = trained.evalCrop() == null ? trained.shape() : trained.evalCrop().stored();
    ImageProcessor processor =
        new ImageProcessor(
                new ImageTransform(decoded, trained.resize(), Augmentation.NONE),
                trained.decoder(),
                limits.maxPixels(),
                0)
            .withExifOrientation(trained.exifOrientation());
    Backend backend = Backends.open(backendSpec);
    InferenceNetwork model = null;
    try {
      var stream = backend.createStream("predict");
      // bound for inference: no gradients, each activation's memory reused once read
      model = InferenceModels.build(trained, backend, batchSize, offload, "predict");
      Predictor predictor =
          new Predictor(
              backend,
              stream,
              model,
              trained.shape(),
              trained.normalization().mean(),
              trained.normalization().std());
      model.restore(trained.loaded(), stream);
      return new ImageClassifier(
          trained.withoutWeights(),
          processor,
          batchSize,
          limits.maxFileBytes(),
          backend,
          model,
          predictor);
    } catch (RuntimeException | Error e) {
      try (Backend closing = backend;
          InferenceNetwork closingModel = model) {
        throw e;
      }
    }
  }

  /** A processed image (at {@code pixels}) into the staging slot at {@code at}, as evaluated. */
  private void stage(long pixels, long at) {
    TrainedCheckpoint.EvalCrop eval = trained.evalCrop();
    if (eval == null) {
      MemoryUtil.copyMemory(pixels, at, trained.shape().bytes());
      return;
    }
    ImageShape stored = eval.stored();
    ImageShape input = trained.shape();
    CropPlan plan = eval.crop().plan(stored.height(), stored.width(), () -> 0);
    cropper.resample(pixels, stored, plan, input, false, at);
  }

  public List<String> classes() {
    return trained.classes();
  }

  /** The checkpoint served, its tensors left behind: they are on the device. */
  public TrainedCheckpoint checkpoint() {
    return trained;
  }

  /** One prediction per file, in order; an unreadable file gets its error, not an exception. */
  public List<Prediction> classify(List<Path> files) {
    List<Prediction> all = new ArrayList<>();
    for (int from = 0; from < files.size(); from += batchSize) {
      all.addAll(batch(files.subList(from, Math.min(files.size(), from + batchSize))));
    }
    return all;
  }

  /**
   * Returns the heap a checkpoint's tensors took to the operating system before the batches need
   * memory: G1 shrinks its heap only at a full collection, so without one a ViT-B's 330 MB of read
   * weights stay resident, unused, beside the model's own copy on the device.
   */
  public static void releaseHeap() {
    System.gc();
  }

  private List<Prediction> batch(List<Path> chunk) {
    HostBuffer staging = predictor.staging();
    long imageBytes = trained.shape().bytes();
    String[] errors = new String[chunk.size()];
    int[] slot = new int[chunk.size()];
    int staged = 0;
    for (int i = 0; i < chunk.size(); i++) {
      Path file = chunk.get(i);
      long at = staging.address() + staged * imageBytes;
      try {
        byte[] bytes = SampleBytes.readFile(file, maxFileBytes);
        processor.process(
            RawSample.encoded(file.toString(), bytes, -1, null),
            0,
            (copy, pixels) -> stage(pixels, at));
        slot[i] = staged++;
      } catch (RejectedImageException e) {
        errors[i] = e.reason().name().toLowerCase(Locale.ROOT) + ": " + e.getMessage();
      } catch (IOException e) {
        errors[i] = "unreadable: " + e.getMessage();
      }
    }
    float[][] p = staged == 0 ? new float[0][] : predictor.probabilities(staged);
    List<Prediction> out = new ArrayList<>();
    for (int i = 0; i < chunk.size(); i++) {
      String path = chunk.get(i).toString();
      if (errors[i] != null) {
        out.add(new Prediction(path, null, Float.NaN, null, errors[i]));
        continue;
      }
      float[] probs = p[slot[i]];
      int best = 0;
      for (int c = 1; c < probs.length; c++) {
        best = probs[c] > probs[best] ? c : best;
      }
      out.add(new Prediction(path, trained.classes().get(best), probs[best], probs, null));
    }
    return out;
  }

  @Override
  public void close() {
    try (Backend closingBackend = backend;
        InferenceNetwork closingModel = model;
        Predictor closingPredictor = predictor) {
      // closes in reverse order
    }
  }
}
