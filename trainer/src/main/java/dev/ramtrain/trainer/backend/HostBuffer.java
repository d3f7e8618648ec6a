package dev.ramtrain.trainer.backend;

import java.nio.ByteBuffer;

/**
 * Page-locked (pinned) host memory that the device copies to and from asynchronously: staging
 * buffers and host-held parameters. Owned by whoever allocated it; freed on close.
 */
public interface HostBuffer extends AutoCloseable {
  String label();

  long bytes();

  /** Native address of the first byte. */
  long address();

  /** The memory as a direct buffer (native byte order), for the host side to fill or read. */
  ByteBuffer asByteBuffer();

  @Override
  void close();
}
