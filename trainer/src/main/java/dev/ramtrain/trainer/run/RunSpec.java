package dev.ramtrain.trainer.run;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.LoopSpec;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.data.LoaderSpec;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.offload.OffloadSpec;
import dev.ramtrain.trainer.optim.OptimizerSpec;
import dev.ramtrain.trainer.optim.ScheduleSpec;
import java.io.Serializable;
import java.util.List;

/**
 * What a training run computes, checked once where its settings were read and passed down as
 * values: the data and its loaders, the model, the optimizer and its schedule, the loop, where the
 * weights live and the backend. {@link TrainingSession} builds the run from it; where the run
 * writes, and what a resume is checked against, are the job's.
 */
public record RunSpec(
    RunData data,
    ModelChoice model,
    OptimizerSpec optimizer,
    ScheduleSpec schedule,
    LoopSpec loop,
    OffloadSpec offload,
    BackendSpec backend)
    implements Serializable {

  /** The samples per step (the largest batch the model runs). */
  public int batchSize() {
    return data.train().batchSize();
  }

  /**
   * This run for a dataset of {@code classes} stored as {@code stored} images: its model sized to
   * the classes ({@link #forClasses}) and checked to take the loaders' input and give one output
   * per class, a usage error naming the setting otherwise. Commands call it before they start a
   * job, so a model that does not fit is refused before anything runs.
   */
  public RunSpec forDataset(ImageShape stored, List<String> classes) {
    RunSpec fitted = forClasses(classes);
    fitted.model().requireFits(data.train().inputShape(stored), classes);
    return fitted;
  }

  /**
   * This run for a dataset of {@code classes}: a model named without a class count (a timm name)
   * gets one output per class, as timm's num_classes; other specs are kept as they are.
   */
  private RunSpec forClasses(List<String> classes) {
    String resolved = ModelSpec.withClasses(model.spec(), classes.size());
    if (resolved.equals(model.spec())) {
      return this;
    }
    return new RunSpec(
        data,
        new ModelChoice(
            resolved,
            model.seed(),
            model.precision(),
            model.weights(),
            model.dropPath(),
            model.ema(),
            model.emaWarmup()),
        optimizer,
        schedule,
        loop,
        offload,
        backend);
  }

  /**
   * This run as rank {@code rank} of {@code world} data-parallel ranks: {@code batch-size} is the
   * global batch, and each rank loads {@code batch-size / world} of it (its share of every batch's
   * positions, as PyTorch's DistributedSampler) and evaluates its share of the val split.
   */
  public RunSpec forRank(int rank, int world) {
    return withData(
        data.forRank(new LoaderSpec.Rank(rank, world), new LoaderSpec.Rank(rank, world)));
  }

  /**
   * This run as rank {@code rank} of {@code world} ranks that each train on shards of their own,
   * taking {@code trainPerEpoch} samples of them each epoch (the count every rank takes) and
   * evaluating all of its own; otherwise as {@link #forRank(int, int)}.
   */
  public RunSpec forRankWithOwnShards(int rank, int world, long trainPerEpoch) {
    return withData(
        data.forRank(
            LoaderSpec.Rank.owning(rank, world, trainPerEpoch),
            LoaderSpec.Rank.owning(rank, world, 0)));
  }

  private RunSpec withData(RunData other) {
    return new RunSpec(other, model, optimizer, schedule, loop, offload, backend);
  }

  /** This run on {@code other}. */
  public RunSpec withBackend(BackendSpec other) {
    return new RunSpec(data, model, optimizer, schedule, loop, offload, other);
  }
}
