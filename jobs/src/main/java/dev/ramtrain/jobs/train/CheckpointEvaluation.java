package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.etl.dataset.VersionLease;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.DeviceInputs;
import dev.ramtrain.trainer.EvalResult;
import dev.ramtrain.trainer.Evaluator;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.engines.Backends;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.data.LoaderSpec;
import dev.ramtrain.trainer.data.Normalization;
import dev.ramtrain.trainer.data.ShardSet;
import dev.ramtrain.trainer.nn.CrossEntropyLoss;
import dev.ramtrain.trainer.offload.InferenceNetwork;
import dev.ramtrain.trainer.run.RunData;
import java.io.IOException;
import org.apache.hadoop.conf.Configuration;

/**
 * A trained checkpoint evaluated on a split of a dataset, in this process: the model, image shape
 * and normalization come from the checkpoint, which must have been trained on the dataset's image
 * shape and classes (a run trained on random resized crops: on its channels, any stored size). What
 * {@code evaluate} and the notebook API run.
 */
public final class CheckpointEvaluation {
  private CheckpointEvaluation() {}

  /** {@code s}: the backend and evaluation batches ({@code ramtrain.train.*}). */
  public static EvalResult run(
      JobSpec s, TrainedCheckpoint trained, String location, String split, Configuration conf)
      throws IOException {
    // The version read is held while it is read: a preprocess --overwrite meanwhile keeps it.
    try (VersionLease lease =
        VersionLease.take(location, conf, "evaluate " + trained.loaded().dir())) {
      return evaluate(s, trained, lease.dataset(), location, split);
    }
  }

  private static EvalResult evaluate(
      JobSpec s, TrainedCheckpoint trained, Dataset ds, String location, String split)
      throws IOException {
    RunData data = s.run().data();
    int batch = s.run().batchSize();
    Checkpoints.Loaded c = trained.loaded();
    Manifest m = ds.manifest();
    if (!m.splits().containsKey(split)) {
      throw new ConfigException(
          "--split "
              + split
              + ": "
              + location
              + " has the splits "
              + new java.util.TreeSet<>(m.splits().keySet()));
    }
    ImageShape shape = trained.shape();
    // A run trained on random resized crops evaluates as timm does: each stored image resized and
    // centre-cropped to the model's input, whatever size it is stored at.
    LoaderSpec eval =
        data.eval().withResize(trained.evalCrop() == null ? null : trained.evalCrop().crop());
    if (!shape.equals(eval.inputShape(m.image().shape()))
        || shape.channels() != m.image().shape().channels()) {
      throw new IOException(
          c.dir()
              + " was trained on "
              + shape
              + " images; "
              + location
              + " holds "
              + m.image().shape());
    }
    if (!m.classes().equals(trained.classes())) {
      throw new IOException(
          c.dir()
              + " was trained on classes "
              + trained.classes()
              + "; "
              + location
              + " has "
              + m.classes());
    }
    String spec = trained.model();
    Normalization norm = trained.normalization();
    try (Backend backend = Backends.open(s.run().backend());
        ShardSet shards = DatasetShards.open(ds, split, shard -> true, data.shardWindow());
        DataLoader loader =
            data.loader(
                backend,
                shards,
                eval,
                trained.evalCrop() == null ? data.filter() : trained.evalCrop().filter(),
                new EtlImageNatives())) {
      Stream stream = backend.createStream("evaluate");
      try (InferenceNetwork model =
              InferenceModels.build(trained, backend, batch, s.run().offload(), "evaluate");
          CrossEntropyLoss loss = new CrossEntropyLoss(backend, batch, m.classes().size(), 0f);
          DeviceInputs inputs =
              new DeviceInputs(
                  backend, stream, shape, batch, m.classes().size(), norm.mean(), norm.std())) {
        model.restore(c, stream);
        return Evaluator.evaluate(model, loss, inputs, loader);
      }
    }
  }
}
