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

  /**
   * {@code count} elements of {@code dtype} from byte {@code byteOffset} of this buffer (a multiple
   * of the element size): one allocation serving buffers of several types, as an arena.
   */
  DeviceBuffer viewAs(DType dtype, long byteOffset, long count);

  @Override
  void close();
}
