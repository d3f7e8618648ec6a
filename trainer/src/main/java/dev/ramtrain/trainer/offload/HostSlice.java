package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.HostBuffer;
import java.nio.ByteBuffer;

/**
 * A window onto part of a host buffer, owning nothing (closing it frees nothing): lets a host
 * optimizer work on one rank's share of the slabs under ZeRO-1, its state sized to that share.
 */
final class HostSlice implements HostBuffer {
  private final HostBuffer parent;
  private final long offset;
  private final long bytes;

  HostSlice(HostBuffer parent, long offset, long bytes) {
    if (offset < 0 || bytes < 0 || offset + bytes > parent.bytes()) {
      throw new IllegalArgumentException(
          "slice [" + offset + ", " + (offset + bytes) + ") of " + parent.bytes() + " bytes");
    }
    this.parent = parent;
    this.offset = offset;
    this.bytes = bytes;
  }

  @Override
  public String label() {
    return parent.label() + "[" + offset + ".." + (offset + bytes) + "]";
  }

  @Override
  public long bytes() {
    return bytes;
  }

  @Override
  public long address() {
    return parent.address() + offset;
  }

  @Override
  public ByteBuffer asByteBuffer() {
    if (bytes > MAX_VIEW_BYTES) {
      throw HostBuffer.tooLargeForOneView(label(), bytes);
    }
    return parent.range(offset, bytes);
  }

  @Override
  public void close() {
    // The parent's owner frees the memory.
  }
}
