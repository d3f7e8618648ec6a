package dev.ramtrain.trainer.backend;

/**
 * Memory on the device, in elements of one type. The buffer an allocation returns owns its memory
 * and frees it on close; a {@link #view} shares it and owns nothing, so closing a view does
 * nothing.
 */
public interface DeviceBuffer extends AutoCloseable {
  String label();

  DType dtype();

  /** Elements. */
  long count();

  default long bytes() {
    return count() * dtype().bytes();
  }

  /** Elements {@code [offset, offset + count)} of this buffer, valid while its owner is open. */
  DeviceBuffer view(long offset, long count);

  @Override
  void close();
}
