package dev.ramtrain.files;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;

/**
 * A channel over a stream it owns (closing the channel closes the stream), handing off-heap buffers
 * over in chunks of up to 1 MiB: {@code Channels.newChannel} passes them on 8 KiB at a time, one
 * system call per 8 KiB of a file stream (375,000 for a 3 GB dataset).
 */
public final class OutputStreamChannel implements WritableByteChannel {
  private final OutputStream out;
  private byte[] chunk;
  private boolean open = true;

  public OutputStreamChannel(OutputStream out) {
    this.out = out;
  }

  @Override
  public int write(ByteBuffer src) throws IOException {
    int length = src.remaining();
    if (src.hasArray()) {
      out.write(src.array(), src.arrayOffset() + src.position(), length);
      src.position(src.limit());
      return length;
    }
    if (chunk == null) {
      chunk = new byte[1 << 20];
    }
    while (src.hasRemaining()) {
      int n = Math.min(chunk.length, src.remaining());
      src.get(chunk, 0, n);
      out.write(chunk, 0, n);
    }
    return length;
  }

  @Override
  public boolean isOpen() {
    return open;
  }

  @Override
  public void close() throws IOException {
    open = false;
    out.close();
  }
}
