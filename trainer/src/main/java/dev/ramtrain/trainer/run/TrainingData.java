package dev.ramtrain.trainer.run;

import dev.ramtrain.format.Manifest;
import dev.ramtrain.trainer.data.ShardSet;

/**
 * The opened shards a run trains and evaluates on, wherever they come from, with the manifest that
 * describes them (its resize mode and decoder go into the checkpoints, so that prediction prepares
 * images the same way) and {@code source}, the name checkpoints give the data.
 */
public record TrainingData(ShardSet train, ShardSet val, Manifest manifest, String source) {}
