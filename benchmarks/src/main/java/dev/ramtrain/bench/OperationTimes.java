package dev.ramtrain.bench;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Operation;
import dev.ramtrain.trainer.backend.Stream;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Map;

/**
 * Where a step's device time goes, by operation type: a {@link Backend} that runs each operation
 * through the one it wraps, with the stream drained before and after, and adds the time to the
 * operation's record type. Draining serializes what the device would overlap and adds a
 * synchronization's latency to each operation (tens of microseconds on a GPU), so the figures rank
 * the operations rather than sum to the step; they say which kernels to improve next. Everything
 * else is the wrapped backend's own. Beside each type's time, the host's cost of issuing one call
 * (from the call until it returns, the stream idle before it, so no queue is waited on): what a
 * step's launch time is made of, and whether a CUDA graph would pay.
 */
final class OperationTimes implements Backend {
  private final Backend backend;
  private final Map<Class<?>, long[]> times = new HashMap<>(); // {nanos, count, issue nanos}
  private boolean counting;

  OperationTimes(Backend backend) {
    this.backend = backend;
  }

  /** From now on operations are timed (the steps before were warm-up). */
  void startCounting() {
    times.clear();
    counting = true;
  }

  /** The table, slowest first: milliseconds and calls per step over {@code steps} steps. */
  String report(int steps) {
    double total = times.values().stream().mapToLong(t -> t[0]).sum();
    StringBuilder out = new StringBuilder();
    times.entrySet().stream()
        .sorted(Comparator.comparingLong((Map.Entry<Class<?>, long[]> e) -> -e.getValue()[0]))
        .forEach(
            e ->
                out.append(
                    String.format(
                        "  %-30s %9.2f ms %6.1f%% %7d calls per step, issued in %6.1f us"
                            + " a call%n",
                        e.getKey().getSimpleName(),
                        e.getValue()[0] / 1e6 / steps,
                        100 * e.getValue()[0] / total,
                        e.getValue()[1] / steps,
                        e.getValue()[2] / 1e3 / e.getValue()[1])));
    return out.append(
            String.format("  %-30s %9.2f ms per step%n", "all operations", total / 1e6 / steps))
        .toString();
  }

  @Override
  public void run(Stream stream, Operation op) {
    if (!counting) {
      backend.run(stream, op);
      return;
    }
    stream.synchronize();
    long start = System.nanoTime();
    backend.run(stream, op);
    long issued = System.nanoTime();
    stream.synchronize();
    long[] t = times.computeIfAbsent(op.getClass(), k -> new long[3]);
    t[0] += System.nanoTime() - start;
    t[1]++;
    t[2] += issued - start;
  }

  @Override
  public int channelBlock() {
    return backend.channelBlock();
  }

  @Override
  public boolean convolvesInBf16() {
    return backend.convolvesInBf16();
  }

  @Override
  public boolean convolvesDepthwise() {
    return backend.convolvesDepthwise();
  }

  @Override
  public boolean batchesAcrossImages() {
    return backend.batchesAcrossImages();
  }

  @Override
  public long normReluMaskBytes(int n, int c, int hw, int channelBlock) {
    return backend.normReluMaskBytes(n, c, hw, channelBlock);
  }

  @Override
  public String name() {
    return backend.name();
  }

  @Override
  public boolean sharesHostCores() {
    return backend.sharesHostCores();
  }

  @Override
  public DeviceBuffer allocate(String label, DType dtype, long count) {
    return backend.allocate(label, dtype, count);
  }

  @Override
  public HostBuffer allocateHost(String label, long bytes) {
    return backend.allocateHost(label, bytes);
  }

  @Override
  public Stream createStream(String label) {
    return backend.createStream(label);
  }

  @Override
  public Event createEvent(String label) {
    return backend.createEvent(label);
  }

  @Override
  public void reserve(long bytes) {
    backend.reserve(bytes);
  }

  @Override
  public long allocatedBytes() {
    return backend.allocatedBytes();
  }

  @Override
  public long peakAllocatedBytes() {
    return backend.peakAllocatedBytes();
  }

  @Override
  public void resetPeakAllocatedBytes() {
    backend.resetPeakAllocatedBytes();
  }

  @Override
  public long allocatedHostBytes() {
    return backend.allocatedHostBytes();
  }

  @Override
  public long hostAllocations() {
    return backend.hostAllocations();
  }

  @Override
  public long freeMemoryBytes() {
    return backend.freeMemoryBytes();
  }

  @Override
  public void copy(HostBuffer src, long srcByte, DeviceBuffer dst, long bytes, Stream stream) {
    backend.copy(src, srcByte, dst, bytes, stream);
  }

  @Override
  public void copy(DeviceBuffer src, HostBuffer dst, long dstByte, long bytes, Stream stream) {
    backend.copy(src, dst, dstByte, bytes, stream);
  }

  @Override
  public void copy(DeviceBuffer src, DeviceBuffer dst, Stream stream) {
    backend.copy(src, dst, stream);
  }

  @Override
  public void close() {
    backend.close();
  }
}
