package dev.ramtrain.trainer.data;

import dev.ramtrain.format.ShardBatch;
import java.nio.ByteBuffer;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * A staging slot's JPEG memory: where a row decodes to before its crop, and, for a memory-mapped
 * shard, the copy it decodes from. The native decoder never reads a mapping: a file cut short under
 * it would kill the process with a signal inside libjpeg, where a copy made in Java faults as an
 * error the loader names (the copy costs a memcpy of the row's bytes, next to its decode).
 */
final class JpegScratch {
  private final ByteBuffer decoded;
  private ByteBuffer copy = ByteBuffer.allocateDirect(0); // grown to the largest row seen

  JpegScratch(int decodedBytes) {
    this.decoded = ByteBuffer.allocateDirect(decodedBytes);
  }

  /** Where a row decodes to. */
  long decoded() {
    return MemoryUtil.getByteBufferAddress(decoded);
  }

  /** Where row {@code row}'s JPEG is decoded from: in place, or a copy where it is mapped. */
  long input(ShardBatch source, int row, boolean mapped) {
    if (!mapped) {
      return source.imageAddress(row);
    }
    int length = source.imageLength(row);
    if (copy.capacity() < length) {
      copy = ByteBuffer.allocateDirect(Math.max(length, 2 * copy.capacity()));
    }
    long at = MemoryUtil.getByteBufferAddress(copy);
    MemoryUtil.copyMemory(source.imageAddress(row), at, length);
    return at;
  }
}
