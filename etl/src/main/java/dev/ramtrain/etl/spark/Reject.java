package dev.ramtrain.etl.spark;

import dev.ramtrain.etl.source.RejectReason;
import java.io.Serializable;

/** One skipped input: where it came from and why. */
public record Reject(String path, RejectReason reason, String detail) implements Serializable {}
