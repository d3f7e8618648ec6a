package dev.ramtrain.format;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.zip.CRC32C;
import org.apache.arrow.flatbuf.Footer;
import org.apache.arrow.flatbuf.Message;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.RecordBatch;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.ForeignAllocation;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.VectorLoader;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.message.ArrowBlock;
import org.apache.arrow.vector.ipc.message.ArrowFooter;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.ipc.message.MessageSerializer;

/**
 * Reads a shard without copying its pixels: the file (or an in-memory shard in a direct buffer) is
 * wrapped as one Arrow buffer and every record batch is loaded as slices of it. The Arrow IPC file
 * layout is parsed here (magic, footer, block metadata) because Arrow Java's own file reader copies
 * each batch body into freshly allocated memory.
 */
public final class ShardReader implements AutoCloseable {

  private static final byte[] MAGIC = "ARROW1".getBytes(StandardCharsets.US_ASCII);

  /** Magic plus padding at the start; magic plus footer length at the end. */
  private static final int HEAD_BYTES = 8;

  private static final int TAIL_BYTES = MAGIC.length + 4;

  private final String name;
  private final Path file; // the mapped file; null for a shard held in memory
  private final ByteBuffer data;
  private final BufferAllocator allocator;
  private final ArrowBuf whole;
  private final ShardSchema schema;
  private final List<ArrowBlock> blocks;
  private final int[] rows; // per record batch, checked against its buffers when opened

  private ShardReader(String name, Path file, ByteBuffer data) throws ShardFormatException {
    this.name = name;
    this.file = file;
    this.data = data.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    this.allocator = new RootAllocator();
    ArrowBuf wrapped = null;
    try {
      ArrowFooter footer = readFooter();
      this.schema = ShardSchema.fromArrow(footer.getSchema(), name);
      this.blocks = List.copyOf(footer.getRecordBatches());
      this.rows = new int[blocks.size()];
      for (int i = 0; i < blocks.size(); i++) {
        rows[i] = checkBlock(blocks.get(i), i);
      }
      wrapped = allocator.wrapForeignAllocation(new BufferRegion(this.data));
      this.whole = wrapped;
    } catch (ShardFormatException | RuntimeException e) {
      if (wrapped != null) {
        wrapped.close();
      }
      allocator.close();
      if (e instanceof ShardFormatException f) {
        throw f;
      }
      // The flatbuffers of a damaged file fail in many ways; each is the same fact to the reader.
      throw new ShardFormatException(name, "corrupt shard: unreadable metadata (" + e + ")", e);
    }
  }

  /**
   * Memory-maps a local shard file; checks its CRC32C first when {@code expectedCrc32c} is given.
   */
  public static ShardReader open(Path file, Long expectedCrc32c) throws IOException {
    String name = file.toString();
    ByteBuffer mapped;
    try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
      long size = channel.size();
      if (size > Integer.MAX_VALUE) {
        throw new ShardFormatException(name, "shard is larger than 2 GiB (" + size + " bytes)");
      }
      mapped = channel.map(FileChannel.MapMode.READ_ONLY, 0, size);
    } catch (NoSuchFileException e) {
      throw new ShardFormatException(name, "shard file is missing", e);
    }
    checkCrc(name, mapped, expectedCrc32c);
    return new ShardReader(name, file, mapped);
  }

  /**
   * Reads a shard held in memory. A direct buffer is used in place; a heap buffer is copied once
   * into direct memory, because Arrow buffers live off-heap.
   */
  public static ShardReader open(String name, ByteBuffer bytes, Long expectedCrc32c)
      throws ShardFormatException {
    checkCrc(name, bytes, expectedCrc32c);
    ByteBuffer direct = bytes;
    if (!bytes.isDirect()) {
      direct = ByteBuffer.allocateDirect(bytes.remaining());
      direct.put(bytes.duplicate()).flip();
    }
    return new ShardReader(name, null, direct.slice());
  }

  private static void checkCrc(String name, ByteBuffer bytes, Long expectedCrc32c)
      throws ShardFormatException {
    if (expectedCrc32c != null) {
      long actual = crc32c(bytes);
      if (actual != expectedCrc32c) {
        throw new ShardFormatException(
            name,
            String.format(
                "checksum mismatch: CRC32C is %08x, manifest says %08x (corrupt or modified shard)",
                actual, expectedCrc32c));
      }
    }
  }

  public static long crc32c(ByteBuffer bytes) {
    CRC32C crc = new CRC32C();
    crc.update(bytes.duplicate());
    return crc.getValue();
  }

  public String name() {
    return name;
  }

  public ShardSchema schema() {
    return schema;
  }

  /** Whether the memory read is a local file's, mapped; else the shard is held in memory. */
  public boolean mapped() {
    return file != null;
  }

  /**
   * Null while the memory read is the file as it was opened; else how it changed. A mapped file cut
   * short (by another program: ramtrain's writers leave a version alone while it is read) faults
   * every read of its lost pages, and such a read returns garbage before the fault surfaces as an
   * error somewhere in the reading thread: a reader checks this after reading, before it uses what
   * it read. A file unlinked keeps its pages, and is no change.
   */
  public String changedOnDisk() {
    if (file == null) {
      return null;
    }
    long now;
    try {
      now = java.nio.file.Files.size(file);
    } catch (IOException e) {
      return null; // unlinked (its mapping keeps its pages), or unreadable metadata: no evidence
    }
    return now >= data.capacity()
        ? null
        : String.format(
            "cut to %d bytes while it was read (%d when opened): a dataset must not change while it"
                + " is read; preprocess writes a new version beside it",
            now, data.capacity());
  }

  /** The shard's size in bytes: the memory it is read from. */
  public long bytes() {
    return data.capacity();
  }

  public int batchCount() {
    return blocks.size();
  }

  public long rowCount() {
    long total = 0;
    for (int r : rows) {
      total += r;
    }
    return total;
  }

  /** Loads batch {@code index} as views into the shard's memory; close the batch when done. */
  public ShardBatch batch(int index) {
    ArrowBlock block = blocks.get(index);
    Message message = messageAt(block);
    RecordBatch header = (RecordBatch) message.header(new RecordBatch());
    ArrowBuf body =
        whole.slice(block.getOffset() + block.getMetadataLength(), block.getBodyLength());
    VectorSchemaRoot root = VectorSchemaRoot.create(schema.toArrow(), allocator);
    // deserializeRecordBatch releases the body it is given, as if it owned a fresh allocation;
    // the body here shares the whole shard's reference count, so hand it a reference of its own.
    body.getReferenceManager().retain();
    try (ArrowRecordBatch batch = MessageSerializer.deserializeRecordBatch(header, body)) {
      new VectorLoader(root).load(batch);
    } catch (IOException | RuntimeException e) {
      root.close();
      throw new IllegalStateException(name + ": cannot load record batch " + index, e);
    }
    if (root.getRowCount() != rows[index]) {
      root.close();
      throw new IllegalStateException(name + ": record batch " + index + " changed its rows");
    }
    ShardBatch loaded = new ShardBatch(root, schema);
    int classes = schema.classes().size();
    for (int row = 0; row < loaded.rowCount(); row++) {
      String badImage = loaded.checkImage(row);
      if (badImage != null) {
        long id = loaded.id(row);
        loaded.close();
        throw new IllegalStateException(
            String.format(
                "%s: record batch %d row %d (sample %d) %s", name, index, row, id, badImage));
      }
      int label = loaded.label(row);
      if (label < 0 || label >= classes) {
        long id = loaded.id(row);
        loaded.close();
        throw new IllegalStateException(
            String.format(
                "%s: record batch %d row %d (sample %d) has label %d, outside the shard's %d"
                    + " classes",
                name, index, row, id, label, classes));
      }
    }
    return loaded;
  }

  @Override
  public void close() {
    whole.close();
    allocator.close();
  }

  private ArrowFooter readFooter() throws ShardFormatException {
    int size = data.capacity();
    if (size < HEAD_BYTES + TAIL_BYTES) {
      throw new ShardFormatException(name, "truncated shard: only " + size + " bytes");
    }
    if (!hasMagic(0)) {
      throw new ShardFormatException(name, "not an Arrow IPC file (no ARROW1 magic at the start)");
    }
    if (!hasMagic(size - MAGIC.length)) {
      throw new ShardFormatException(
          name, "truncated shard: no ARROW1 magic at the end (the write did not finish)");
    }
    int footerLength = data.getInt(size - TAIL_BYTES);
    int footerStart = size - TAIL_BYTES - footerLength;
    if (footerLength <= 0 || footerStart < HEAD_BYTES) {
      throw new ShardFormatException(name, "corrupt shard: footer length " + footerLength);
    }
    try {
      ByteBuffer footerBytes = data.slice(footerStart, footerLength).order(ByteOrder.LITTLE_ENDIAN);
      return new ArrowFooter(Footer.getRootAsFooter(footerBytes));
    } catch (RuntimeException e) {
      throw new ShardFormatException(name, "corrupt shard: unreadable footer", e);
    }
  }

  /**
   * Checks one record batch before anything reads it: inside the file, a record batch of the
   * shard's columns with no nulls, and every buffer inside the batch's body and large enough for
   * its rows, so that no later read (pixels are copied by address) can leave the file. An encoded
   * shard's offsets are checked too: starting at 0, never decreasing, ending inside the bytes they
   * index. Returns its rows.
   */
  private int checkBlock(ArrowBlock block, int index) throws ShardFormatException {
    long end = block.getOffset() + block.getMetadataLength() + block.getBodyLength();
    if (block.getOffset() < HEAD_BYTES
        || block.getMetadataLength() < 8
        || block.getBodyLength() < 0
        || end > data.capacity()) {
      throw new ShardFormatException(
          name,
          "corrupt shard: record batch at offset "
              + block.getOffset()
              + " ends at byte "
              + end
              + " of "
              + data.capacity());
    }
    Message message = messageAt(block);
    if (message.headerType() != MessageHeader.RecordBatch) {
      throw new ShardFormatException(name, "corrupt shard: block is not a record batch");
    }
    RecordBatch header = (RecordBatch) message.header(new RecordBatch());
    String where = "corrupt shard: record batch " + index;
    long length = header.length();
    if (length < 0 || length > Integer.MAX_VALUE) {
      throw new ShardFormatException(name, where + " claims " + length + " rows");
    }
    if (header.compression() != null) {
      throw new ShardFormatException(name, where + " is compressed; shards never are");
    }
    // Per buffer, the bytes each row needs at least: validity bitmaps may be empty, an encoded
    // image column has offsets (one more than its rows) and then bytes of any length.
    long[] perRow =
        schema.encoded()
            ? new long[] {0, Integer.BYTES, 0, 0, Integer.BYTES, 0, Long.BYTES, 0, Byte.BYTES}
            : new long[] {0, schema.shape().bytes(), 0, Integer.BYTES, 0, Long.BYTES};
    int columns = schema.encoded() ? 4 : 3;
    if (header.nodesLength() != columns || header.buffersLength() != perRow.length) {
      throw new ShardFormatException(
          name, where + " has " + header.nodesLength() + " columns, a shard has " + columns);
    }
    for (int n = 0; n < columns; n++) {
      if (header.nodes(n).length() != length || header.nodes(n).nullCount() != 0) {
        throw new ShardFormatException(
            name, where + ": column " + n + " disagrees on its rows or holds nulls");
      }
    }
    for (int b = 0; b < perRow.length; b++) {
      org.apache.arrow.flatbuf.Buffer buffer = header.buffers(b);
      long needed = length * perRow[b] + (schema.encoded() && b == 1 ? Integer.BYTES : 0);
      if (buffer.offset() < 0
          || buffer.length() < needed
          || buffer.offset() + buffer.length() > block.getBodyLength()) {
        throw new ShardFormatException(
            name,
            where
                + ": buffer "
                + b
                + " ["
                + buffer.offset()
                + ", +"
                + buffer.length()
                + ") does not fit its body of "
                + block.getBodyLength()
                + " bytes or its "
                + length
                + " rows");
      }
    }
    if (schema.encoded()) {
      checkOffsets(block, header, (int) length, where);
    }
    return (int) length;
  }

  /** An encoded image column's offsets: from 0, never decreasing, within its bytes. */
  private void checkOffsets(ArrowBlock block, RecordBatch header, int rows, String where)
      throws ShardFormatException {
    long body = block.getOffset() + block.getMetadataLength();
    int at = Math.toIntExact(body + header.buffers(1).offset());
    long bytes = header.buffers(2).length();
    int previous = data.getInt(at);
    if (previous != 0) {
      throw new ShardFormatException(name, where + ": image offsets start at " + previous);
    }
    for (int r = 1; r <= rows; r++) {
      int offset = data.getInt(at + r * Integer.BYTES);
      if (offset < previous || offset > bytes) {
        throw new ShardFormatException(
            name,
            where
                + ": image offset "
                + r
                + " is "
                + offset
                + " after "
                + previous
                + ", outside the column's "
                + bytes
                + " bytes");
      }
      previous = offset;
    }
  }

  private Message messageAt(ArrowBlock block) {
    int offset = Math.toIntExact(block.getOffset());
    int prefix = data.getInt(offset) == MessageSerializer.IPC_CONTINUATION_TOKEN ? 8 : 4;
    int length = data.getInt(offset + prefix - 4);
    ByteBuffer meta = data.slice(offset + prefix, length).order(ByteOrder.LITTLE_ENDIAN);
    return Message.getRootAsMessage(meta);
  }

  private boolean hasMagic(int at) {
    for (int i = 0; i < MAGIC.length; i++) {
      if (data.get(at + i) != MAGIC[i]) {
        return false;
      }
    }
    return true;
  }

  /**
   * Lends the shard's direct memory to Arrow; the buffer stays reachable until Arrow releases it.
   */
  private static final class BufferRegion extends ForeignAllocation {
    private ByteBuffer buffer;

    BufferRegion(ByteBuffer buffer) {
      super(buffer.capacity(), MemoryUtil.getByteBufferAddress(buffer));
      this.buffer = buffer;
    }

    @Override
    protected void release0() {
      buffer = null; // the mapping or direct buffer is freed by the JVM once unreachable
    }
  }
}
