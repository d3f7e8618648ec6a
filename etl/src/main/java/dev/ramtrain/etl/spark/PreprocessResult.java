package dev.ramtrain.etl.spark;

import dev.ramtrain.format.Manifest;
import java.util.List;

/**
 * The manifest of what was produced, the skipped inputs, in memory mode the shards' handle, and
 * where the time went.
 */
public record PreprocessResult(
    Manifest manifest, List<Reject> rejects, InMemoryShards inMemory, PreprocessTiming timing) {}
