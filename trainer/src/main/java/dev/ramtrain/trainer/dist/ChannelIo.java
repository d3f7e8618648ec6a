package dev.ramtrain.trainer.dist;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.concurrent.TimeUnit;

/**
 * Socket reads and writes that never wait past a deadline. Non-blocking channels and a selector,
 * because a blocking {@link SocketChannel} ignores socket timeouts: a peer that stops answering
 * would hang the trainer forever.
 */
final class ChannelIo {
  private ChannelIo() {}

  static long millisLeft(long deadlineNanos) {
    return TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime());
  }

  /** The next connection to {@code listener}, non-blocking, or a failure saying {@code late}. */
  static SocketChannel accept(ServerSocketChannel listener, long deadline, String late)
      throws IOException {
    listener.configureBlocking(false);
    try (Selector selector = Selector.open()) {
      listener.register(selector, SelectionKey.OP_ACCEPT);
      while (true) {
        SocketChannel channel = listener.accept();
        if (channel != null) {
          channel.configureBlocking(false);
          return channel;
        }
        long wait = millisLeft(deadline);
        if (wait <= 0) {
          throw new CollectiveException(late);
        }
        select(selector, wait);
      }
    }
  }

  static void readFully(SocketChannel channel, ByteBuffer into, long deadline, int rank, int peer)
      throws IOException {
    try (Selector selector = Selector.open()) {
      channel.register(selector, SelectionKey.OP_READ);
      while (into.hasRemaining()) {
        if (read(channel, into, rank, peer) < 0) {
          throw closed(rank, peer);
        }
        if (into.hasRemaining()) {
          await(selector, deadline, rank, peer);
        }
      }
    }
  }

  static void writeFully(SocketChannel channel, ByteBuffer from, long deadline, int rank, int peer)
      throws IOException {
    try (Selector selector = Selector.open()) {
      channel.register(selector, SelectionKey.OP_WRITE);
      while (from.hasRemaining()) {
        write(channel, from, rank, peer);
        if (from.hasRemaining()) {
          await(selector, deadline, rank, peer);
        }
      }
    }
  }

  /**
   * Sends {@code send} to the next rank while receiving {@code receive} from the previous one, on
   * the ring's own selector (both channels registered with it). Both directions at once, or every
   * rank would send while none reads once the socket buffers are full. Fails when neither direction
   * moves for {@code idleNanos}, naming the rank that stopped.
   */
  static void exchange(
      Selector selector,
      SelectionKey next,
      ByteBuffer send,
      SelectionKey previous,
      ByteBuffer receive,
      long idleNanos,
      int rank,
      int nextRank,
      int previousRank)
      throws IOException {
    SocketChannel out = (SocketChannel) next.channel();
    SocketChannel in = (SocketChannel) previous.channel();
    long deadline = System.nanoTime() + idleNanos;
    while (send.hasRemaining() || receive.hasRemaining()) {
      boolean moved = false;
      if (send.hasRemaining()) {
        moved |= write(out, send, rank, nextRank) > 0;
      }
      if (receive.hasRemaining()) {
        int read = read(in, receive, rank, previousRank);
        if (read < 0) {
          throw closed(rank, previousRank);
        }
        moved |= read > 0;
      }
      if (moved) {
        deadline = System.nanoTime() + idleNanos;
        continue;
      }
      next.interestOps(send.hasRemaining() ? SelectionKey.OP_WRITE : 0);
      previous.interestOps(receive.hasRemaining() ? SelectionKey.OP_READ : 0);
      long wait = millisLeft(deadline);
      if (wait <= 0) {
        throw new CollectiveException(
            receive.hasRemaining()
                ? stalled(rank, previousRank, "sent nothing")
                : stalled(rank, nextRank, "read nothing"));
      }
      select(selector, wait);
    }
  }

  private static int write(SocketChannel channel, ByteBuffer from, int rank, int peer)
      throws IOException {
    try {
      return channel.write(from);
    } catch (IOException e) {
      throw broken(rank, peer, e);
    }
  }

  private static int read(SocketChannel channel, ByteBuffer into, int rank, int peer)
      throws IOException {
    try {
      return channel.read(into);
    } catch (IOException e) {
      throw broken(rank, peer, e);
    }
  }

  /** A peer that died resets the connection: "Connection reset by peer", "Broken pipe". */
  private static CollectiveException broken(int rank, int peer, IOException e) {
    return new CollectiveException.PeerClosed(
        "rank " + rank + ": the connection with rank " + peer + " broke: " + e.getMessage());
  }

  private static void await(Selector selector, long deadline, int rank, int peer)
      throws IOException {
    long wait = millisLeft(deadline);
    if (wait <= 0) {
      throw new CollectiveException(stalled(rank, peer, "did not answer"));
    }
    select(selector, wait);
  }

  /** A selector wakes up when its thread is interrupted: then the wait stops with an error. */
  private static void select(Selector selector, long millis) throws IOException {
    selector.select(millis);
    selector.selectedKeys().clear();
    if (Thread.interrupted()) {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("interrupted while waiting for a peer");
    }
  }

  private static CollectiveException closed(int rank, int peer) {
    return new CollectiveException.PeerClosed(
        "rank "
            + rank
            + ": rank "
            + peer
            + " closed the connection (its task failed or was killed?)");
  }

  private static String stalled(int rank, int peer, String what) {
    return "rank " + rank + ": rank " + peer + " " + what + " within the timeout";
  }
}
