package dev.ramtrain.format;

import dev.ramtrain.files.OutputStreamChannel;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32C;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.FixedSizeBinaryVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.TinyIntVector;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileWriter;

/**
 * Writes one shard as an Arrow IPC file to a channel or stream, in record batches of about {@code
 * batchTargetBytes}. Pixels are copied once, from the caller's memory into the batch's vector, and
 * the batch's buffers are refilled, not reallocated. The target is not closed by this writer: its
 * owner (a file, a Hadoop stream, a byte buffer) is. An {@linkplain ShardSchema#encoded() encoded}
 * shard takes JPEG rows ({@link #appendJpeg}) beside pixel rows, its batches cut by the bytes
 * written.
 */
public final class ShardWriter implements AutoCloseable {

  /** Keeps batches well clear of Arrow's 2 GiB vector limits whatever the configuration says. */
  public static final long MAX_BATCH_BYTES = 256L << 20;

  private final ShardSchema schema;
  private final CountingCrcChannel sink;
  private final BufferAllocator allocator;
  private final VectorSchemaRoot root;
  private final FixedSizeBinaryVector images; // null for an encoded shard
  private final VarBinaryVector encodedImages; // null for a pixel shard
  private final TinyIntVector encodings; // null for a pixel shard
  private final IntVector labels;
  private final BigIntVector ids;
  private final ArrowFileWriter writer;
  private final int rowsPerBatch;
  private final long batchBytes;
  private final int imageBytes;
  private final long[] classCounts;
  private int rowsInBatch;
  private long bytesInBatch; // an encoded batch's image bytes so far
  private long rows;
  private boolean finished;

  /** A writer to {@code out}, which its caller keeps and closes (a byte array, a Hadoop stream). */
  public ShardWriter(ShardSchema schema, OutputStream out, long batchTargetBytes)
      throws IOException {
    this(schema, new OutputStreamChannel(out), batchTargetBytes);
  }

  /** A writer to {@code out} (a file channel: one copy per byte), which its caller closes. */
  public ShardWriter(ShardSchema schema, WritableByteChannel out, long batchTargetBytes)
      throws IOException {
    this.schema = schema;
    this.imageBytes = schema.shape().bytes();
    this.batchBytes = Math.min(Math.max(batchTargetBytes, imageBytes), MAX_BATCH_BYTES);
    // An encoded row's size is known only when it comes: its batches end at batchBytes instead,
    // and at as many rows as the pixels would take, which bounds the label and id columns too.
    this.rowsPerBatch = (int) Math.max(1, batchBytes / imageBytes);
    this.classCounts = new long[schema.classes().size()];
    this.sink = new CountingCrcChannel(out);
    this.allocator = new RootAllocator();
    this.root = VectorSchemaRoot.create(schema.toArrow(), allocator);
    boolean encoded = schema.encoded();
    this.images = encoded ? null : (FixedSizeBinaryVector) root.getVector(ShardSchema.IMAGE);
    this.encodedImages = encoded ? (VarBinaryVector) root.getVector(ShardSchema.IMAGE) : null;
    this.encodings = encoded ? (TinyIntVector) root.getVector(ShardSchema.ENCODING) : null;
    this.labels = (IntVector) root.getVector(ShardSchema.LABEL);
    this.ids = (BigIntVector) root.getVector(ShardSchema.ID);
    allocateBatch();
    this.writer = new ArrowFileWriter(root, null, sink);
    writer.start();
  }

  public ShardSchema schema() {
    return schema;
  }

  /** Appends one sample whose pixels (H*W*C uint8, HWC) start at a native address. */
  public void append(long id, int label, long pixelAddress) throws IOException {
    checkLabel(label);
    if (encodedImages != null) {
      byte[] pixels = new byte[imageBytes];
      MemoryUtil.copyFromMemory(pixelAddress, pixels, 0, imageBytes);
      appendEncoded(id, label, pixels, ShardSchema.RAW_ROW);
      return;
    }
    long dst = images.getDataBuffer().memoryAddress() + (long) rowsInBatch * imageBytes;
    MemoryUtil.copyMemory(pixelAddress, dst, imageBytes);
    finishRow(id, label);
  }

  /** Appends one sample whose pixels (H*W*C uint8, HWC) are on the heap. */
  public void append(long id, int label, byte[] pixels) throws IOException {
    if (pixels.length != imageBytes) {
      throw new IllegalArgumentException(
          "image has "
              + pixels.length
              + " bytes, shard shape "
              + schema.shape()
              + " needs "
              + imageBytes);
    }
    checkLabel(label);
    if (encodedImages != null) {
      appendEncoded(id, label, pixels, ShardSchema.RAW_ROW);
      return;
    }
    images.getDataBuffer().setBytes((long) rowsInBatch * imageBytes, pixels, 0, imageBytes);
    finishRow(id, label);
  }

  /**
   * Appends one sample as the bytes of a JPEG that decodes to the shard's shape (an encoded shard
   * only; the caller encoded or checked it).
   */
  public void appendJpeg(long id, int label, byte[] jpeg) throws IOException {
    if (encodedImages == null) {
      throw new IllegalStateException("a shard of pixels holds no JPEG rows");
    }
    if (jpeg.length == 0) {
      throw new IllegalArgumentException("empty JPEG for sample " + id);
    }
    checkLabel(label);
    appendEncoded(id, label, jpeg, ShardSchema.JPEG_ROW);
  }

  private void appendEncoded(long id, int label, byte[] bytes, byte encoding) throws IOException {
    if (rowsInBatch > 0 && bytesInBatch + bytes.length > batchBytes) {
      flushBatch(); // the row starts the next batch rather than overfill this one
    }
    encodedImages.setSafe(rowsInBatch, bytes);
    encodings.set(rowsInBatch, encoding);
    bytesInBatch += bytes.length;
    finishRow(id, label);
  }

  public long rows() {
    return rows;
  }

  /** Writes the last batch and the footer; returns the shard's stats. */
  public ShardStats finish() throws IOException {
    if (!finished) {
      flushBatch();
      writer.end();
      finished = true;
    }
    List<Long> counts = new ArrayList<>(classCounts.length);
    for (long c : classCounts) {
      counts.add(c);
    }
    return new ShardStats(rows, sink.count, sink.crc.getValue(), counts);
  }

  @Override
  public void close() {
    root.close();
    allocator.close();
  }

  private void checkLabel(int label) {
    if (label < 0 || label >= classCounts.length) {
      throw new IllegalArgumentException(
          "label " + label + " outside the " + classCounts.length + " classes of the shard");
    }
  }

  private void finishRow(long id, int label) throws IOException {
    if (images != null) {
      images.setIndexDefined(rowsInBatch);
    }
    labels.set(rowsInBatch, label);
    ids.set(rowsInBatch, id);
    classCounts[label]++;
    rows++;
    if (++rowsInBatch == rowsPerBatch) {
      flushBatch();
    }
  }

  private void flushBatch() throws IOException {
    if (rowsInBatch == 0) {
      return;
    }
    root.setRowCount(rowsInBatch);
    writer.writeBatch(); // written out before it returns: the buffers are free to refill
    rowsInBatch = 0;
    bytesInBatch = 0;
    if (images != null) {
      clearValidity(images);
    } else {
      encodedImages.reset(); // keeps its buffers: offsets restart, the bytes are overwritten
      clearValidity(encodings);
    }
    clearValidity(labels);
    clearValidity(ids);
  }

  /**
   * Refilling a batch's buffers instead of allocating new ones saves a fresh allocation and memset
   * of the whole batch per batch. Values are overwritten row by row; the validity bits must start
   * clear, or a last, shorter batch would carry bits of the batch before it past its end.
   */
  private static void clearValidity(BaseFixedWidthVector vector) {
    vector.getValidityBuffer().setZero(0, vector.getValidityBuffer().capacity());
  }

  private void allocateBatch() {
    if (images != null) {
      images.allocateNew(rowsPerBatch);
    } else {
      encodedImages.allocateNew(batchBytes, rowsPerBatch);
      encodings.allocateNew(rowsPerBatch);
    }
    labels.allocateNew(rowsPerBatch);
    ids.allocateNew(rowsPerBatch);
  }

  /**
   * Counts and checksums exactly the bytes that reach the target, and passes Arrow's off-heap
   * buffers straight on: to a file channel they go in one copy, into the page cache.
   */
  private static final class CountingCrcChannel implements WritableByteChannel {
    private final WritableByteChannel target;
    private final CRC32C crc = new CRC32C();
    private long count;

    CountingCrcChannel(WritableByteChannel target) {
      this.target = target;
    }

    @Override
    public int write(ByteBuffer src) throws IOException {
      int length = src.remaining();
      crc.update(src.duplicate());
      while (src.hasRemaining()) {
        target.write(src);
      }
      count += length;
      return length;
    }

    @Override
    public boolean isOpen() {
      return target.isOpen();
    }

    @Override
    public void close() {
      // The owner of the target closes it.
    }
  }
}
