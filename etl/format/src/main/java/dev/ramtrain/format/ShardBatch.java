package dev.ramtrain.format;

import java.nio.ByteBuffer;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.FixedSizeBinaryVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.TinyIntVector;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.arrow.vector.VectorSchemaRoot;

/**
 * One record batch of a shard; the pixels (or a row's JPEG bytes) stay in the shard's memory until
 * copied out or decoded.
 */
public final class ShardBatch implements AutoCloseable {

  private final VectorSchemaRoot root;
  private final ImageShape shape;
  private final ArrowBuf imageBytes; // the image column's values
  private final ArrowBuf offsets; // an encoded column's row offsets; null for pixels
  private final ArrowBuf encodings; // an encoded column's row encodings; null for pixels
  private final IntVector labels;
  private final BigIntVector ids;

  ShardBatch(VectorSchemaRoot root, ShardSchema schema) {
    this.root = root;
    this.shape = schema.shape();
    if (schema.encoded()) {
      VarBinaryVector images = (VarBinaryVector) root.getVector(ShardSchema.IMAGE);
      this.imageBytes = images.getDataBuffer();
      this.offsets = images.getOffsetBuffer();
      this.encodings = ((TinyIntVector) root.getVector(ShardSchema.ENCODING)).getDataBuffer();
    } else {
      this.imageBytes = ((FixedSizeBinaryVector) root.getVector(ShardSchema.IMAGE)).getDataBuffer();
      this.offsets = null;
      this.encodings = null;
    }
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

  /** Whether row {@code row} holds JPEG bytes to decode rather than pixels. */
  public boolean isJpeg(int row) {
    checkRow(row);
    return encodings != null && encodings.getByte(row) == ShardSchema.JPEG_ROW;
  }

  /**
   * Native address of row {@code row}'s image bytes, valid while the batch is open: its pixels
   * (H*W*C uint8, HWC), or its JPEG where {@link #isJpeg}.
   */
  public long imageAddress(int row) {
    checkRow(row);
    return imageBytes.memoryAddress() + imageStart(row);
  }

  /** The bytes of row {@code row}'s image: the shape's, or its JPEG's length. */
  public int imageLength(int row) {
    checkRow(row);
    return offsets == null
        ? shape.bytes()
        : offsets.getInt((long) (row + 1) * Integer.BYTES)
            - offsets.getInt((long) row * Integer.BYTES);
  }

  private long imageStart(int row) {
    return offsets == null
        ? (long) row * shape.bytes()
        : offsets.getInt((long) row * Integer.BYTES);
  }

  /**
   * Why row {@code row}'s image cannot be read as its encoding says (an unknown encoding, pixels of
   * the wrong size), or null: the reader's check before handing out the batch.
   */
  String checkImage(int row) {
    if (encodings == null) {
      return null;
    }
    byte encoding = encodings.getByte(row);
    int length = imageLength(row);
    if (encoding == ShardSchema.RAW_ROW && length != shape.bytes()) {
      return "holds " + length + " bytes of pixels, its shape " + shape + " needs " + shape.bytes();
    }
    if (encoding != ShardSchema.RAW_ROW && encoding != ShardSchema.JPEG_ROW) {
      return "has unknown image encoding " + encoding;
    }
    return null;
  }

  /** Copies row {@code row}'s pixels to {@code dst} at its position, which it advances. */
  public void copyImage(int row, ByteBuffer dst) {
    requirePixels(row);
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
      imageBytes.getBytes(imageStart(row), dst);
    }
  }

  /**
   * Copies row {@code row}'s image bytes into a new array (for tests and tools, not the hot path):
   * its pixels, or its JPEG where {@link #isJpeg}.
   */
  public byte[] image(int row) {
    byte[] out = new byte[imageLength(row)];
    imageBytes.getBytes(imageStart(row), out);
    return out;
  }

  private void requirePixels(int row) {
    if (isJpeg(row)) {
      throw new IllegalStateException(
          "row " + row + " (sample " + id(row) + ") holds a JPEG: decode it for its pixels");
    }
  }

  @Override
  public void close() {
    root.close();
  }
}
