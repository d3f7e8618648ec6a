package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.Stream;

/**
 * Timed intervals of one training step on the compute and copy streams, measured with event pairs
 * as CUDA profilers do (the events are created once). Compute intervals are the layers' forward and
 * backward; the gap before each (from the previous interval, or from the start of its pass) is time
 * the compute stream waited for weights: the exposed, non-overlapped copy time.
 */
final class StepTimeline implements AutoCloseable {
  enum Lane {
    COMPUTE,
    COPY_IN,
    COPY_OUT
  }

  /** One step's totals, in milliseconds and bytes. */
  record Totals(
      double computeMs,
      double exposedMs,
      double copyInMs,
      double copyOutMs,
      long bytesIn,
      long bytesOut) {
    /** The share of copy time hidden behind compute: 1 when no copy made compute wait. */
    double overlap() {
      double copies = copyInMs + copyOutMs;
      return copies <= 0 ? 1 : Math.max(0, Math.min(1, 1 - exposedMs / copies));
    }
  }

  private final int capacity;
  private final Event[][] starts = new Event[Lane.values().length][];
  private final Event[][] ends = new Event[Lane.values().length][];
  private final Event[] gapFrom; // per compute interval: where its wait is counted from
  private final Event[] passStarts;
  private final int[] used = new int[Lane.values().length];
  private final long[] bytes = new long[Lane.values().length];
  private int passes;
  private Event lastComputeEnd; // null at a pass start: the next gap counts from the pass marker

  StepTimeline(Backend backend, int capacity) {
    this.capacity = capacity;
    for (Lane lane : Lane.values()) {
      starts[lane.ordinal()] = events(backend, "timeline." + lane + ".start", capacity);
      ends[lane.ordinal()] = events(backend, "timeline." + lane + ".end", capacity);
    }
    this.gapFrom = new Event[capacity];
    this.passStarts = events(backend, "timeline.pass", 2);
  }

  private static Event[] events(Backend backend, String label, int n) {
    Event[] e = new Event[n];
    for (int i = 0; i < n; i++) {
      e[i] = backend.createEvent(label + "." + i);
    }
    return e;
  }

  /** Forgets the previous step's intervals. */
  void reset() {
    java.util.Arrays.fill(used, 0);
    java.util.Arrays.fill(bytes, 0);
    passes = 0;
    lastComputeEnd = null;
  }

  /** Marks the start of forward or backward on the compute stream, before any wait. */
  void beginPass(Stream compute) {
    if (passes < passStarts.length) {
      passStarts[passes].record(compute);
      lastComputeEnd = passStarts[passes++];
    }
  }

  /** Records the start of an interval; returns its number, or -1 when the step is full. */
  int begin(Lane lane, Stream stream) {
    int l = lane.ordinal();
    if (used[l] >= capacity || (lane == Lane.COMPUTE && lastComputeEnd == null)) {
      return -1;
    }
    int k = used[l]++;
    starts[l][k].record(stream);
    if (lane == Lane.COMPUTE) {
      gapFrom[k] = lastComputeEnd;
    }
    return k;
  }

  /** Records the end of interval {@code k} (from {@link #begin}), which moved {@code n} bytes. */
  void end(Lane lane, int k, Stream stream, long n) {
    if (k < 0) {
      return;
    }
    int l = lane.ordinal();
    ends[l][k].record(stream);
    bytes[l] += n;
    if (lane == Lane.COMPUTE) {
      lastComputeEnd = ends[l][k];
    }
  }

  /** The step's totals; every recorded event must have been reached (streams synchronized). */
  Totals totals() {
    return new Totals(
        sum(Lane.COMPUTE),
        exposed(),
        sum(Lane.COPY_IN),
        sum(Lane.COPY_OUT),
        bytes[Lane.COPY_IN.ordinal()],
        bytes[Lane.COPY_OUT.ordinal()]);
  }

  private double sum(Lane lane) {
    int l = lane.ordinal();
    double ms = 0;
    for (int k = 0; k < used[l]; k++) {
      ms += ends[l][k].millisSince(starts[l][k]);
    }
    return ms;
  }

  private double exposed() {
    int l = Lane.COMPUTE.ordinal();
    double ms = 0;
    for (int k = 0; k < used[l]; k++) {
      ms += Math.max(0, starts[l][k].millisSince(gapFrom[k]));
    }
    return ms;
  }

  @Override
  public void close() {
    for (Lane lane : Lane.values()) {
      for (Event e : starts[lane.ordinal()]) {
        e.close();
      }
      for (Event e : ends[lane.ordinal()]) {
        e.close();
      }
    }
    for (Event e : passStarts) {
      e.close();
    }
  }
}
