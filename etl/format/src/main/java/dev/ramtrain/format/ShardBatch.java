package dev.ramtrain.format;

import java.nio.ByteBuffer;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.FixedSizeBinaryVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VectorSchemaRoot;

/** One record batch of a shard; the pixels stay in the shard's memory until copied out. */
public final class ShardBatch implements AutoCloseable {

  private final VectorSchemaRoot root;
  private final ImageShape shape;
  private final FixedSizeBinaryVector images;
  private final IntVector labels;
  private final BigIntVector ids;

  ShardBatch(VectorSchemaRoot root, ImageShape shape) {
    this.root = root;
    this.shape = shape;
    this.images = (FixedSizeBinaryVector) root.getVector(ShardSchema.IMAGE);
    this.labels = (IntVector) root.getVector(ShardSchema.LABEL);
    this.ids = (BigIntVector) root.getVector(ShardSchema.ID);
  }

  public int rowCount() {
    return root.getRowCount();
  }

  public ImageShape shape() {
    return shape;
  }

  // Read from the data buffers: the reader checked that no column holds nulls, so the validity
  // bitmaps say nothing (and a damaged one must not turn a row into an error here).
  public int label(int row) {
    checkRow(row);
    return labels.getDataBuffer().getInt((long) row * IntVector.TYPE_WIDTH);
  }

  public long id(int row) {
    checkRow(row);
    return ids.getDataBuffer().getLong((long) row * BigIntVector.TYPE_WIDTH);
  }

  private void checkRow(int row) {
    if (row < 0 || row >= rowCount()) {
      throw new IndexOutOfBoundsException("row " + row + " of " + rowCount());
    }
  }

  /**
   * Native address of row {@code row}'s pixels (H*W*C uint8, HWC), valid while the batch is open.
   */
  public long imageAddress(int row) {
    checkRow(row);
    return images.getDataBuffer().memoryAddress() + (long) row * shape.bytes();
  }

  /** Copies row {@code row}'s pixels to {@code dst} at its position, which it advances. */
  public void copyImage(int row, ByteBuffer dst) {
    int n = shape.bytes();
    if (dst.remaining() < n) {
      throw new IllegalArgumentException(
          "destination has " + dst.remaining() + " bytes, needs " + n);
    }
    if (dst.isDirect()) {
      MemoryUtil.copyMemory(
          imageAddress(row), MemoryUtil.getByteBufferAddress(dst) + dst.position(), n);
      dst.position(dst.position() + n);
    } else {
      images.getDataBuffer().getBytes((long) row * n, dst);
    }
  }

  /** Copies row {@code row}'s pixels into a new array (for tests and tools, not the hot path). */
  public byte[] image(int row) {
    byte[] out = new byte[shape.bytes()];
    images
        .getDataBuffer()
        .getBytes(imageAddress(row) - images.getDataBuffer().memoryAddress(), out);
    return out;
  }

  @Override
  public void close() {
    root.close();
  }
}
