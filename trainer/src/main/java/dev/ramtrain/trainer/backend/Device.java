package dev.ramtrain.trainer.backend;

/**
 * The device half of a {@link Backend}: memory, pinned host memory, streams, events and
 * asynchronous copies; what the weight streamer and the data loader need, and no arithmetic. Sizes
 * are in elements, copies in bytes. The device owns its streams (closing it closes them); buffers
 * and events belong to whoever created them, and closing a device while any is still open throws,
 * naming them.
 */
public interface Device extends AutoCloseable {

  String name();

  /**
   * Whether the device's work runs on the host's own cores (the CPU backend): then host work, such
   * as an offloaded run's optimizer step, competes with it instead of running beside it.
   */
  default boolean sharesHostCores() {
    return false;
  }

  // ---- memory, streams, events -------------------------------------------------------------

  DeviceBuffer allocate(String label, DType dtype, long count);

  HostBuffer allocateHost(String label, long bytes);

  Stream createStream(String label);

  /** A new event; {@code label} names it in a leak report. The caller closes it. */
  Event createEvent(String label);

  /**
   * Takes {@code bytes} more device memory from the device now, in one piece, so that the buffers a
   * run allocates next (what its placement plan computed) need no further allocation from the
   * driver, which synchronizes the device. The CPU backend has nothing to reserve.
   */
  default void reserve(long bytes) {}

  /** Device bytes each stream takes on creation (CUDA: its scratch for ordered column sums). */
  default long streamBytes() {
    return 0;
  }

  /** The largest single allocation this device makes (the CPU backend's Java buffers: 2 GiB). */
  default long largestAllocationBytes() {
    return Long.MAX_VALUE;
  }

  /** Bytes of device memory allocated now, and the most ever allocated at once. */
  long allocatedBytes();

  long peakAllocatedBytes();

  /** Starts the peak over from what is allocated now (as torch.cuda.reset_peak_memory_stats). */
  void resetPeakAllocatedBytes();

  /** Bytes of pinned host memory allocated now, and how many host allocations were ever made. */
  long allocatedHostBytes();

  long hostAllocations();

  /**
   * Device memory free now, as the device reports it (cudaMemGetInfo); the CPU backend's device is
   * host memory, so it reports the host's free physical memory.
   */
  long freeMemoryBytes();

  // ---- copies (bytes, asynchronous on the stream) -------------------------------------------

  void copy(HostBuffer src, long srcByte, DeviceBuffer dst, long bytes, Stream stream);

  void copy(DeviceBuffer src, HostBuffer dst, long dstByte, long bytes, Stream stream);

  void copy(DeviceBuffer src, DeviceBuffer dst, Stream stream);

  /** Waits for all streams, then frees the backend; throws if allocations are still live. */
  @Override
  void close();
}
