package dev.ramtrain.bench;

import com.sun.management.ThreadMXBean;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.ShardBatch;
import dev.ramtrain.format.ShardReader;
import dev.ramtrain.format.ShardSchema;
import dev.ramtrain.format.ShardWriter;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.arrow.memory.AllocationListener;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.FixedSizeBinaryVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileReader;

/**
 * Bytes copied per sample when reading shards into a staging buffer: ramtrain's memory-mapped
 * reader against Arrow Java's own ArrowFileReader, on the same files (page cache warm). Prints
 * JSON.
 *
 * <p>Usage: ShardReadBench DIR [shards] [rows-per-shard] [reps]
 */
public final class ShardReadBench {
  private static final ThreadMXBean MX = (ThreadMXBean) ManagementFactory.getThreadMXBean();

  public static void main(String[] args) throws Exception {
    Path dir = Path.of(args[0]);
    int shards = args.length > 1 ? Integer.parseInt(args[1]) : 4;
    int rows = args.length > 2 ? Integer.parseInt(args[2]) : 2000;
    int reps = args.length > 3 ? Integer.parseInt(args[3]) : 5;
    ShardSchema schema = new ShardSchema(new ImageShape(64, 64, 3), List.of("a", "b"));
    int imageBytes = schema.shape().bytes();
    List<Path> files = new ArrayList<>();
    byte[] pixels = new byte[imageBytes];
    Files.createDirectories(dir);
    for (int s = 0; s < shards; s++) {
      Path f = dir.resolve("part-" + s + ".arrow");
      try (OutputStream out = Files.newOutputStream(f);
          ShardWriter w = new ShardWriter(schema, out, 4 << 20)) {
        for (int r = 0; r < rows; r++) {
          pixels[r % imageBytes] = (byte) r;
          w.append(r, r % 2, pixels);
        }
        w.finish();
      }
      files.add(f);
    }
    ByteBuffer staging = ByteBuffer.allocateDirect(imageBytes);
    for (int rep = 0; rep < reps; rep++) { // interleaved, the last one reported
      Result mapped = ramtrain(files, staging);
      Result arrow = arrowFileReader(files, staging);
      if (rep == reps - 1) {
        print("ramtrain_mmap_reader", mapped, imageBytes);
        print("arrow_file_reader", arrow, imageBytes);
      }
    }
  }

  /** {@code copiedBytes}: bytes moved from the file into Arrow buffers (record batch bodies). */
  record Result(
      long samples, double seconds, long heapBytes, long allocatorBytes, long copiedBytes) {}

  private static Result ramtrain(List<Path> files, ByteBuffer staging) throws Exception {
    long heap = MX.getCurrentThreadAllocatedBytes();
    long start = System.nanoTime();
    long samples = 0;
    for (Path f : files) {
      try (ShardReader reader = ShardReader.open(f, null)) {
        for (int b = 0; b < reader.batchCount(); b++) {
          try (ShardBatch batch = reader.batch(b)) {
            for (int r = 0; r < batch.rowCount(); r++, samples++) {
              staging.clear();
              batch.copyImage(r, staging);
            }
          }
        }
      }
    }
    return new Result(
        samples,
        (System.nanoTime() - start) / 1e9,
        MX.getCurrentThreadAllocatedBytes() - heap,
        0,
        0);
  }

  private static Result arrowFileReader(List<Path> files, ByteBuffer staging) throws Exception {
    AtomicLong allocated = new AtomicLong();
    AllocationListener listener =
        new AllocationListener() {
          @Override
          public void onAllocation(long size) {
            allocated.addAndGet(size);
          }
        };
    long heap = MX.getCurrentThreadAllocatedBytes();
    long start = System.nanoTime();
    long samples = 0;
    long stagingAddress = MemoryUtil.getByteBufferAddress(staging);
    long copied = 0;
    try (RootAllocator allocator = new RootAllocator(listener, Long.MAX_VALUE)) {
      for (Path f : files) {
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ);
            ArrowFileReader reader = new ArrowFileReader(ch, allocator)) {
          VectorSchemaRoot root = reader.getVectorSchemaRoot();
          for (var block : reader.getRecordBlocks()) {
            copied += block.getBodyLength();
          }
          while (reader.loadNextBatch()) {
            FixedSizeBinaryVector images = (FixedSizeBinaryVector) root.getVector("image");
            int width = images.getByteWidth();
            long base = images.getDataBuffer().memoryAddress();
            for (int r = 0; r < root.getRowCount(); r++, samples++) {
              MemoryUtil.copyMemory(base + (long) r * width, stagingAddress, width);
            }
          }
        }
      }
    }
    return new Result(
        samples,
        (System.nanoTime() - start) / 1e9,
        MX.getCurrentThreadAllocatedBytes() - heap,
        allocated.get(),
        copied);
  }

  private static void print(String name, Result r, int imageBytes) {
    double copiedPerSample = (double) r.copiedBytes / r.samples;
    System.out.printf(
        "{\"reader\": \"%s\", \"samples\": %d, \"samples_per_s\": %.0f, \"GB_per_s\": %.2f, \"image_bytes\": %d,"
            + " \"heap_bytes_per_sample\": %.1f, \"bytes_read_into_arrow_buffers_per_sample\": %.0f,"
            + " \"arrow_bytes_allocated_per_sample\": %.0f, \"pixel_copies_per_sample\": %d}%n",
        name,
        r.samples,
        r.samples / r.seconds,
        r.samples * (double) imageBytes / r.seconds / 1e9,
        imageBytes,
        (double) r.heapBytes / r.samples,
        copiedPerSample,
        (double) r.allocatorBytes / r.samples,
        1 + Math.round(copiedPerSample / imageBytes));
  }
}
