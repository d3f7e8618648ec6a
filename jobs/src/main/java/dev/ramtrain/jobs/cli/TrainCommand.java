package dev.ramtrain.jobs.cli;

import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.etl.shard.Manifest;
import dev.ramtrain.jobs.config.TrainSettings;
import dev.ramtrain.jobs.report.TrainingReport;
import dev.ramtrain.trainer.EvalResult;
import dev.ramtrain.trainer.MetricsLog;
import dev.ramtrain.trainer.Trainer;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.data.Normalization;
import dev.ramtrain.trainer.data.ShardSet;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.optim.Optimizer;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.apache.hadoop.conf.Configuration;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

@Command(
    name = "train",
    mixinStandardHelpOptions = true,
    description =
        "Train a model on a preprocessed dataset (its train split), evaluating on its val split each epoch.")
public final class TrainCommand implements Callable<Integer> {
  @Mixin CommonOptions common;

  @Option(
      names = {"-d", "--dataset"},
      paramLabel = "DIR",
      description = "Dataset directory (ramtrain.train.dataset).")
  String dataset;

  @Option(
      names = {"-o", "--output"},
      paramLabel = "DIR",
      description = "Run directory (ramtrain.train.output).")
  String output;

  @Option(
      names = "--model",
      description = "Model spec, e.g. mlp:784-1024-1024-10 (ramtrain.train.model).")
  String model;

  @Option(names = "--epochs", description = "Epochs (ramtrain.train.epochs).")
  Integer epochs;

  @Option(names = "--batch-size", description = "Batch size (ramtrain.train.batch-size).")
  Integer batchSize;

  @Option(names = "--optimizer", description = "adamw or sgd (ramtrain.train.optimizer).")
  String optimizer;

  @Option(names = "--lr", description = "Learning rate (ramtrain.train.lr).")
  Double lr;

  @Option(names = "--seed", description = "Seed (ramtrain.seed).")
  Long seed;

  @Option(
      names = "--resume",
      description = "Continue the run in --output from its latest checkpoint.")
  boolean resume;

  @Override
  public Integer call() throws Exception {
    TrainSettings s = new TrainSettings(common.load(flags()));
    Dataset ds = Dataset.open(s.dataset(), new Configuration());
    Manifest m = ds.manifest();
    try (Backend backend = new CpuBackend(s.threads());
        ShardSet trainShards = ShardSet.open(ds, Manifest.TRAIN);
        ShardSet valShards = ShardSet.open(ds, Manifest.VAL);
        DataLoader train = new DataLoader(backend, trainShards, s.trainLoader());
        DataLoader val = new DataLoader(backend, valShards, s.evalLoader())) {
      Path run = Path.of(s.output());
      Checkpoints.Loaded checkpoint = resume ? Checkpoints.loadLatest(run) : null;
      Normalization measured =
          checkpoint != null
              ? Normalization.fromState(checkpoint.state())
              : s.normalizationGiven() ? null : Normalization.measure(trainShards, 10_000);
      var options =
          s.options(
              measured == null ? null : measured.mean(), measured == null ? null : measured.std());
      Stream setup = backend.createStream("setup");
      try (Model net =
              Model.build(
                  s.model(),
                  ModelSpec.parse(s.model(), m.image().shape()),
                  backend,
                  setup,
                  s.batchSize(),
                  s.seed());
          Optimizer opt = s.optimizer(backend, net.parameters().count());
          MetricsLog metrics =
              new MetricsLog(run.resolve(resume ? "metrics-resumed.jsonl" : "metrics.jsonl"));
          Trainer trainer =
              new Trainer(
                  backend,
                  net,
                  opt,
                  s.schedule(train.batchesPerEpoch()),
                  options,
                  m.image().shape(),
                  metrics)) {
        System.out.printf(
            "training %s (%,d parameters) on %s: %,d train / %,d val samples, %d classes, %d batches of %d per epoch; normalization mean %s std %s%n",
            s.model(),
            net.parameters().count(),
            s.dataset(),
            train.samples(),
            val.samples(),
            m.classes().size(),
            train.batchesPerEpoch(),
            s.batchSize(),
            Arrays.toString(options.mean()),
            Arrays.toString(options.std()));
        Map<String, Object> info = new LinkedHashMap<>();
        info.put("classes", m.classes());
        info.put("image", List.of(m.image().height(), m.image().width(), m.image().channels()));
        info.put("mean", options.mean());
        info.put("std", options.std());
        info.put("dataset", s.dataset());
        trainer.checkpointTo(run, info);
        int firstEpoch = 0;
        if (checkpoint != null) {
          Checkpoints.restore(checkpoint, net, opt, backend, setup);
          trainer.resumeAt(checkpoint.globalStep());
          firstEpoch = checkpoint.epochsDone();
          System.out.printf(
              "resuming from %s after %d epochs, step %d%n",
              checkpoint.dir(), firstEpoch, checkpoint.globalStep());
        }
        trainer.fit(train, val, firstEpoch);
        EvalResult eval = trainer.evaluate(val);
        Path report =
            TrainingReport.write(
                run,
                List.of(run.resolve("metrics.jsonl"), run.resolve("metrics-resumed.jsonl")),
                eval,
                m.classes());
        System.out.printf(
            "val accuracy %.4f, loss %.4f over %,d samples; report %s%n",
            eval.accuracy(), eval.loss(), eval.samples(), report);
      }
    }
    return 0;
  }

  Map<String, String> flags() {
    Map<String, String> f = new LinkedHashMap<>();
    f.put("ramtrain.train.dataset", dataset);
    f.put("ramtrain.train.output", output);
    f.put("ramtrain.train.model", model);
    f.put("ramtrain.train.epochs", CommonOptions.text(epochs));
    f.put("ramtrain.train.batch-size", CommonOptions.text(batchSize));
    f.put("ramtrain.train.optimizer", optimizer);
    f.put("ramtrain.train.lr", CommonOptions.text(lr));
    f.put("ramtrain.seed", CommonOptions.text(seed));
    return f;
  }
}
