package dev.ramtrain.trainer.backend;

/** Element types of device buffers. */
public enum DType {
  F32(4),
  BF16(2),
  U8(1),
  I32(4);

  private final int bytes;

  DType(int bytes) {
    this.bytes = bytes;
  }

  public int bytes() {
    return bytes;
  }
}
