package dev.ramtrain.trainer.backend;

/**
 * A {@link DeviceBuffer} as each engine keeps one: a span of memory an allocation owns ({@code M}:
 * the engine's handle to it), from {@code byteOffset}, of {@code count} elements. The buffer an
 * allocation returns owns the memory and frees it on close; its views share it and own nothing.
 * What differs by engine (making a view, freeing, whether the memory is still live) is left to it.
 *
 * @param <M> the engine's handle to the allocation
 */
public abstract class OffsetBuffer<M> implements DeviceBuffer {
  private final String label;
  private final DType dtype;
  private final long count;
  private final M memory;
  private final long byteOffset;
  private final boolean owner;

  protected OffsetBuffer(
      String label, DType dtype, long count, M memory, long byteOffset, boolean owner) {
    this.label = label;
    this.dtype = dtype;
    this.count = count;
    this.memory = memory;
    this.byteOffset = byteOffset;
    this.owner = owner;
  }

  /** A view of this buffer's memory: never its owner. */
  protected abstract DeviceBuffer viewOf(
      String label, DType dtype, long count, M memory, long byteOffset);

  /** Gives the owner's memory back (called once, by the owner's close). */
  protected abstract void free(M memory);

  /** Fails, naming the buffer, when its memory has been freed. */
  public abstract void requireLive();

  @Override
  public final String label() {
    return label;
  }

  @Override
  public final DType dtype() {
    return dtype;
  }

  @Override
  public final long count() {
    return count;
  }

  protected final M memory() {
    return memory;
  }

  protected final long byteOffset() {
    return byteOffset;
  }

  @Override
  public final DeviceBuffer view(long offset, long length) {
    ArgumentChecks.checkView(label, offset, length, count);
    return viewOf(
        label + "[" + offset + ":" + (offset + length) + "]",
        dtype,
        length,
        memory,
        byteOffset + offset * dtype.bytes());
  }

  @Override
  public final DeviceBuffer viewAs(DType type, long offset, long length) {
    ArgumentChecks.checkViewAs(label, type, offset, length, bytes());
    return viewOf(
        label + "[" + type + "@" + offset + "]", type, length, memory, byteOffset + offset);
  }

  @Override
  public final void close() {
    if (owner) {
      free(memory);
    }
  }

  /** Fails unless the elements are {@code wanted} and the memory is live. */
  public final void requireType(DType wanted) {
    if (dtype != wanted) {
      throw new IllegalArgumentException(label + " is " + dtype + ", expected " + wanted);
    }
    requireLive();
  }
}
