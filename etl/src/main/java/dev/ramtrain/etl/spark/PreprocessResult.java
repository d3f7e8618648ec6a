package dev.ramtrain.etl.spark;

import dev.ramtrain.format.Manifest;
import java.util.List;

/** The manifest of what was produced, the skipped inputs, and in memory mode the shards' handle. */
public record PreprocessResult(Manifest manifest, List<Reject> rejects, InMemoryShards inMemory) {}
