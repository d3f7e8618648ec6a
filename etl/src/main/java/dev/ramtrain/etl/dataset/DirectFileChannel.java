package dev.ramtrain.etl.dataset;

import com.sun.nio.file.ExtendedOpenOption;
import dev.ramtrain.threads.Uninterruptibly;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.FileChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Writes a new local file with direct I/O ({@code O_DIRECT}): bytes go from this channel's buffers
 * to the device without passing through the page cache.
 *
 * <p>Why: a preprocessing run writes gigabytes of pixels it will not read back soon. Through the
 * page cache every byte is copied once more, every fresh cache page is allocated and zeroed (on a
 * VM that hands freed memory back to its host, also faulted in again: 7.9 CPU-s to write 3 GB with
 * {@code dd} on the benchmark machine, 0.16 s with {@code oflag=direct}), and the run evicts what
 * the machine had cached for other work.
 *
 * <p>Direct I/O needs block-aligned buffers, lengths and file offsets, which Arrow's writer does
 * not produce, so writes are staged in two aligned buffers: a background thread writes a full one
 * while the caller fills the other, so the device runs while the caller computes, as page-cache
 * write-back did. The last, partial block is written padded and the file truncated to its length.
 */
public final class DirectFileChannel implements WritableByteChannel {
  private static final Logger LOG = LoggerFactory.getLogger(DirectFileChannel.class);

  /** Large enough that a write costs the device little per byte; small per open shard. */
  static final int DEFAULT_BUFFER_BYTES = 4 << 20;

  private final FileChannel file;
  private final int block;
  private final BufferAllocator allocator;
  private final ArrowBuf memory;
  private final ByteBuffer[] buffers = new ByteBuffer[2];
  private final ExecutorService writer;
  private ByteBuffer filling;
  private Future<?> pending;
  private long length;
  private boolean open = true;

  private DirectFileChannel(FileChannel file, int block, int bufferBytes) {
    this.file = file;
    this.block = block;
    this.allocator = new RootAllocator();
    // One allocation holds both buffers, each starting on a block boundary.
    this.memory = allocator.buffer(2L * bufferBytes + block);
    long skip = Math.floorMod(-memory.memoryAddress(), (long) block);
    for (int i = 0; i < 2; i++) {
      buffers[i] = memory.nioBuffer(skip + (long) i * bufferBytes, bufferBytes);
    }
    this.filling = buffers[0];
    this.writer =
        Executors.newSingleThreadExecutor(
            task -> {
              Thread thread = new Thread(task, "ramtrain-direct-write");
              thread.setDaemon(true);
              return thread;
            });
  }

  /**
   * Creates (or truncates) {@code path} for writing, with direct I/O where its filesystem allows it
   * and through the page cache where it does not (tmpfs before Linux 6.6, some network and FUSE
   * filesystems). The caller closes the channel.
   */
  public static WritableByteChannel create(Path path) throws IOException {
    return create(path, DEFAULT_BUFFER_BYTES);
  }

  static WritableByteChannel create(Path path, int bufferBytes) throws IOException {
    FileChannel direct = openDirect(path);
    if (direct != null) {
      long block = Files.getFileStore(path).getBlockSize();
      if (block > 0 && block <= bufferBytes && bufferBytes % block == 0) {
        return new DirectFileChannel(direct, (int) block, bufferBytes);
      }
      direct.close();
      LOG.debug("block size {} of {} does not divide the write buffer", block, path);
    }
    return createBuffered(path);
  }

  /** Creates (or truncates) {@code path} for writing through the page cache. */
  static FileChannel createBuffered(Path path) throws IOException {
    return FileChannel.open(
        path,
        StandardOpenOption.WRITE,
        StandardOpenOption.CREATE,
        StandardOpenOption.TRUNCATE_EXISTING);
  }

  /** The file opened for direct writes, or null when its filesystem refuses direct I/O. */
  private static FileChannel openDirect(Path path) {
    try {
      return FileChannel.open(
          path,
          StandardOpenOption.WRITE,
          StandardOpenOption.CREATE,
          StandardOpenOption.TRUNCATE_EXISTING,
          ExtendedOpenOption.DIRECT);
    } catch (IOException | UnsupportedOperationException e) {
      // A real problem (no such folder, no permission) fails the buffered open the same way.
      LOG.debug("no direct I/O for {}: {}", path, e.toString());
      return null;
    }
  }

  @Override
  public int write(ByteBuffer src) throws IOException {
    if (!open) {
      throw new ClosedChannelException();
    }
    int count = src.remaining();
    while (src.hasRemaining()) {
      if (!filling.hasRemaining()) {
        writeFilledBuffer();
      }
      int take = Math.min(filling.remaining(), src.remaining());
      filling.put(filling.position(), src, src.position(), take);
      filling.position(filling.position() + take);
      src.position(src.position() + take);
    }
    length += count;
    return count;
  }

  @Override
  public boolean isOpen() {
    return open;
  }

  /** Writes what is buffered (the last block padded), trims the padding, and frees the buffers. */
  @Override
  public void close() throws IOException {
    if (!open) {
      return;
    }
    open = false;
    try (file;
        allocator;
        memory) {
      try {
        awaitPending();
        if (filling.position() > 0) {
          int data = filling.position();
          int padded = (data + block - 1) / block * block;
          filling.put(data, new byte[padded - data]);
          filling.position(0).limit(padded);
          writeFully(filling);
          file.truncate(length);
        }
      } finally {
        // Until the background write has returned, the device may still read the buffers.
        writer.shutdown();
        waitUninterruptibly(pending);
      }
    }
  }

  private void writeFilledBuffer() throws IOException {
    awaitPending();
    ByteBuffer full = filling.flip();
    pending =
        writer.submit(
            () -> {
              writeFully(full);
              return null;
            });
    filling = (full == buffers[0] ? buffers[1] : buffers[0]).clear();
  }

  private void writeFully(ByteBuffer buffer) throws IOException {
    while (buffer.hasRemaining()) {
      file.write(buffer);
    }
  }

  private void awaitPending() throws IOException {
    if (pending == null) {
      return;
    }
    try {
      pending.get();
      pending = null;
    } catch (ExecutionException e) {
      pending = null;
      throw e.getCause() instanceof IOException io ? io : new IOException(e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("interrupted while writing a shard");
    }
  }

  /** Its failure is reported by awaitPending, or superseded by the failure that led here. */
  private static void waitUninterruptibly(Future<?> future) {
    if (future != null) {
      Uninterruptibly.awaitDone(future);
    }
  }
}
