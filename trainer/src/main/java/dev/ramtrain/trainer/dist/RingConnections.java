package dev.ramtrain.trainer.dist;

import dev.ramtrain.threads.Uninterruptibly;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.InetSocketAddress;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorCompletionService;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Opens the two connections a rank of a ring needs: to the next rank, and from the previous one.
 *
 * <p>Every rank has bound its listener before the addresses were exchanged, so a connect completes
 * in the next rank's accept backlog whatever that rank is doing; the outgoing and the incoming
 * handshakes run side by side, so they need no ordering between ranks. A peer proves it holds the
 * job's secret without sending it: the acceptor sends a random nonce, the connector answers with
 * HMAC-SHA256(secret, nonce, its rank, world size, ring id, byte order), so that the rings of a job
 * formed on the same listeners never take each other's connections. An acceptor closes a connection
 * whose answer is wrong and keeps waiting for the right one until the deadline; a connector whose
 * answer was refused fails at once.
 */
final class RingConnections {
  private static final int NONCE_BYTES = 32;
  private static final int MAC_BYTES = 32;
  private static final byte ACCEPTED = 1;

  private RingConnections() {}

  /** This rank's side of the ring: both connections, blocking mode off, handshakes done. */
  record Links(SocketChannel next, SocketChannel previous) {}

  static Links open(
      int rank,
      List<InetSocketAddress> addresses,
      ServerSocketChannel listener,
      byte[] secret,
      int ringId,
      long timeoutNanos)
      throws IOException {
    int world = addresses.size();
    int next = (rank + 1) % world;
    int previous = (rank + world - 1) % world;
    long deadline = System.nanoTime() + timeoutNanos;
    // Both sides at once, so a failure names the rank at fault, not a neighbour waiting for it.
    ExecutorService pool =
        Executors.newFixedThreadPool(
            2,
            task -> {
              Thread thread = new Thread(task, "ramtrain-ring-handshake-" + rank);
              thread.setDaemon(true);
              return thread;
            });
    ExecutorCompletionService<SocketChannel> finished = new ExecutorCompletionService<>(pool);
    Future<SocketChannel> out =
        finished.submit(
            () ->
                connectAndProve(rank, next, world, ringId, addresses.get(next), secret, deadline));
    Future<SocketChannel> in =
        finished.submit(() -> accept(rank, previous, world, ringId, listener, secret, deadline));
    pool.shutdown();
    boolean formed = false;
    try {
      for (int i = 0; i < 2; i++) {
        finished.take().get();
      }
      Links links = new Links(out.get(), in.get());
      formed = true;
      return links;
    } catch (ExecutionException e) {
      throw e.getCause() instanceof IOException io ? io : new IOException(e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("rank " + rank + ": interrupted while joining the ring");
    } finally {
      if (!formed) {
        out.cancel(true);
        in.cancel(true);
        awaitQuietly(pool);
        closeIfMade(out);
        closeIfMade(in);
      }
    }
  }

  private static SocketChannel connectAndProve(
      int rank,
      int next,
      int world,
      int ringId,
      InetSocketAddress address,
      byte[] secret,
      long deadline)
      throws IOException {
    SocketChannel channel = connect(rank, next, address, deadline);
    try {
      prove(rank, next, world, ringId, channel, secret, deadline);
      return channel;
    } catch (IOException | RuntimeException e) {
      channel.close();
      throw e;
    }
  }

  private static void awaitQuietly(ExecutorService pool) {
    // The handshake threads stop at their next wake-up once cancelled (interrupted).
    while (!Uninterruptibly.awaitTermination(pool, Duration.ofSeconds(1))) {
      // a connection attempt still waiting out its socket timeout
    }
  }

  private static void closeIfMade(Future<SocketChannel> channel) {
    if (channel.isDone() && !channel.isCancelled()) {
      try {
        channel.get().close();
      } catch (ExecutionException | InterruptedException | IOException e) {
        // Nothing was made, or it is being thrown away anyway.
      }
    }
  }

  private static SocketChannel connect(int rank, int peer, InetSocketAddress address, long deadline)
      throws IOException {
    SocketChannel channel = SocketChannel.open();
    try {
      channel.socket().setTcpNoDelay(true);
      channel
          .socket()
          .connect(
              address,
              (int) Math.max(1, Math.min(Integer.MAX_VALUE, ChannelIo.millisLeft(deadline))));
      channel.configureBlocking(false);
      return channel;
    } catch (SocketTimeoutException e) {
      channel.close();
      throw new CollectiveException(
          "rank " + rank + ": rank " + peer + " at " + address + " did not accept in time");
    } catch (IOException e) {
      channel.close();
      throw new CollectiveException(
          "rank " + rank + ": cannot connect to rank " + peer + " at " + address + ": " + e, e);
    }
  }

  /** Accepts until the previous rank proves itself; impostors are closed and ignored. */
  private static SocketChannel accept(
      int rank,
      int previous,
      int world,
      int ringId,
      ServerSocketChannel listener,
      byte[] secret,
      long deadline)
      throws IOException {
    SecureRandom random = new SecureRandom();
    while (true) {
      SocketChannel channel =
          ChannelIo.accept(
              listener,
              deadline,
              "rank " + rank + ": no connection from rank " + previous + " within the timeout");
      boolean keep = false;
      try {
        channel.socket().setTcpNoDelay(true);
        byte[] nonce = new byte[NONCE_BYTES];
        random.nextBytes(nonce);
        ChannelIo.writeFully(channel, ByteBuffer.wrap(nonce), deadline, rank, previous);
        ByteBuffer answer = ByteBuffer.allocate(4 + MAC_BYTES);
        ChannelIo.readFully(channel, answer, deadline, rank, previous);
        int claimed = answer.flip().getInt();
        byte[] mac = new byte[MAC_BYTES];
        answer.get(mac);
        if (claimed == previous
            && MessageDigest.isEqual(mac, mac(secret, nonce, claimed, world, ringId))) {
          ChannelIo.writeFully(
              channel, ByteBuffer.wrap(new byte[] {ACCEPTED}), deadline, rank, previous);
          keep = true;
          return channel;
        }
      } catch (CollectiveException e) {
        // A peer that hung up or stalled mid-handshake is not the rank we wait for; the deadline
        // still bounds the wait.
        if (ChannelIo.millisLeft(deadline) <= 0) {
          throw e;
        }
      } finally {
        if (!keep) {
          channel.close();
        }
      }
    }
  }

  private static void prove(
      int rank,
      int next,
      int world,
      int ringId,
      SocketChannel channel,
      byte[] secret,
      long deadline)
      throws IOException {
    ByteBuffer nonce = ByteBuffer.allocate(NONCE_BYTES);
    ChannelIo.readFully(channel, nonce, deadline, rank, next);
    ByteBuffer answer = ByteBuffer.allocate(4 + MAC_BYTES);
    answer.putInt(rank).put(mac(secret, nonce.array(), rank, world, ringId)).flip();
    ChannelIo.writeFully(channel, answer, deadline, rank, next);
    ByteBuffer verdict = ByteBuffer.allocate(1);
    try {
      ChannelIo.readFully(channel, verdict, deadline, rank, next);
    } catch (CollectiveException.PeerClosed e) {
      throw new CollectiveException(
          "rank "
              + rank
              + ": rank "
              + next
              + " refused the connection (a different job secret, world size or byte order?)",
          e);
    }
  }

  private static byte[] mac(byte[] secret, byte[] nonce, int rank, int world, int ringId) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(secret, "HmacSHA256"));
      mac.update(nonce);
      // Ranks of a ring exchange floats in native order: a mismatch must not pass the handshake.
      mac.update(
          ByteBuffer.allocate(13)
              .putInt(rank)
              .putInt(world)
              .putInt(ringId)
              .put((byte) (ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN ? 1 : 0))
              .array());
      return mac.doFinal();
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is part of every Java runtime", e);
    }
  }
}
