package dev.ramtrain.trainer.backend;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * Page-locked (pinned) host memory that the device copies to and from asynchronously: staging
 * buffers and host-held parameters. Owned by whoever allocated it; freed on close.
 */
public interface HostBuffer extends AutoCloseable {
  /** The most bytes one Java buffer views: a larger host buffer is read in {@link #range}s. */
  long MAX_VIEW_BYTES = Integer.MAX_VALUE;

  /** Floats {@link #getFloats} and {@link #putFloats} copy through one view (1 GiB). */
  int FLOATS_PER_COPY = 1 << 28;

  String label();

  long bytes();

  /** Native address of the first byte. */
  long address();

  /**
   * The whole memory as a direct buffer (native byte order), for the host side to fill or read;
   * only for a buffer of at most {@link #MAX_VIEW_BYTES} (a Java buffer indexes with ints).
   */
  ByteBuffer asByteBuffer();

  /**
   * Bytes [{@code at}, {@code at + length}) as a direct buffer (native byte order) at their
   * address: how a host slab over 2 GiB (a ViT-H's fp32 masters) is read and written, a part at a
   * time.
   */
  default ByteBuffer range(long at, long length) {
    if (at < 0 || length < 0 || at > bytes() - length || length > MAX_VIEW_BYTES) {
      throw new IndexOutOfBoundsException(
          label() + ": bytes [" + at + ", " + (at + length) + ") of " + bytes());
    }
    return MemoryUtil.directBuffer(address() + at, (int) length).order(ByteOrder.nativeOrder());
  }

  /** Floats [{@code from}, {@code from + count}) of a float32 buffer, as {@link #range}. */
  default FloatBuffer floats(long from, long count) {
    return range(4 * from, 4 * count).asFloatBuffer();
  }

  /** Copies {@code count} floats from float {@code from} on into {@code out} at {@code offset}. */
  default void getFloats(long from, float[] out, int offset, int count) {
    for (int done = 0; done < count; done += FLOATS_PER_COPY) {
      int part = Math.min(FLOATS_PER_COPY, count - done);
      floats(from + done, part).get(out, offset + done, part);
    }
  }

  /**
   * Copies {@code count} floats of {@code values} from {@code offset} here, from float {@code
   * from}.
   */
  default void putFloats(long from, float[] values, int offset, int count) {
    for (int done = 0; done < count; done += FLOATS_PER_COPY) {
      int part = Math.min(FLOATS_PER_COPY, count - done);
      floats(from + done, part).put(values, offset + done, part);
    }
  }

  /**
   * The label and size of a buffer too large for one view: the message {@link #asByteBuffer}
   * throws.
   */
  static IllegalStateException tooLargeForOneView(String label, long bytes) {
    return new IllegalStateException(
        label
            + ": "
            + ByteSize.of(bytes)
            + " is more than one Java buffer views (2 GiB); read it in ranges");
  }

  @Override
  void close();
}
