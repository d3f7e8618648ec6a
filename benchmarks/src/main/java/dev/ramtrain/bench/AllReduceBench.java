package dev.ramtrain.bench;

import dev.ramtrain.trainer.dist.TcpRing;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * The ring all-reduce ({@link TcpRing}) on loopback against its anchor, a plain socket copy of the
 * same bytes between two threads, interleaved (copy, all-reduce, copy, ...). Reports NCCL's
 * measures: algorithm bandwidth = bytes / time; bus bandwidth = algbw * 2 (world - 1) / world, the
 * rate each rank's link carries, directly comparable to the copy's.
 *
 * <p>Usage: AllReduceBench WORLD MEBIBYTES[,MEBIBYTES...] REPS
 */
public final class AllReduceBench {
  public static void main(String[] args) throws Exception {
    int world = Integer.parseInt(args[0]);
    String[] sizes = args[1].split(",");
    int reps = Integer.parseInt(args[2]);
    ExecutorService threads = Executors.newCachedThreadPool();
    byte[] secret = new byte[32];
    new SecureRandom().nextBytes(secret);
    try {
      List<ServerSocketChannel> listeners = new ArrayList<>();
      List<InetSocketAddress> addresses = new ArrayList<>();
      for (int r = 0; r < world; r++) {
        listeners.add(TcpRing.listen(InetAddress.getLoopbackAddress()));
        addresses.add((InetSocketAddress) listeners.get(r).getLocalAddress());
      }
      List<Future<TcpRing>> joining = new ArrayList<>();
      for (int r = 0; r < world; r++) {
        int rank = r;
        joining.add(
            threads.submit(
                () ->
                    TcpRing.connect(
                        rank, addresses, listeners.get(rank), secret, Duration.ofSeconds(60))));
      }
      List<TcpRing> rings = new ArrayList<>();
      for (Future<TcpRing> ring : joining) {
        rings.add(ring.get());
      }
      for (String size : sizes) {
        int bytes = Integer.parseInt(size) << 20;
        List<ByteBuffer> data = new ArrayList<>();
        for (int r = 0; r < world; r++) {
          data.add(ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder()));
        }
        ByteBuffer copySource = ByteBuffer.allocateDirect(bytes);
        ByteBuffer copyTarget = ByteBuffer.allocateDirect(bytes);
        double bestCopy = Double.MAX_VALUE;
        double bestReduce = Double.MAX_VALUE;
        for (int rep = 0; rep < reps + 1; rep++) { // the first round warms up
          double copy = socketCopy(threads, copySource.clear(), copyTarget.clear());
          double reduce = allReduce(threads, rings, data);
          if (rep > 0) {
            bestCopy = Math.min(bestCopy, copy);
            bestReduce = Math.min(bestReduce, reduce);
          }
        }
        double algbw = bytes / bestReduce / 1e9;
        System.out.printf(
            "{\"world\": %d, \"mib\": %s, \"allreduce_s\": %.4f, \"algbw_gbs\": %.2f,"
                + " \"busbw_gbs\": %.2f, \"socket_copy_gbs\": %.2f, \"busbw_over_copy\": %.2f}%n",
            world,
            size,
            bestReduce,
            algbw,
            algbw * 2 * (world - 1) / world,
            bytes / bestCopy / 1e9,
            algbw * 2 * (world - 1) / world / (bytes / bestCopy / 1e9));
      }
      for (TcpRing ring : rings) {
        ring.close();
      }
      for (ServerSocketChannel listener : listeners) {
        listener.close();
      }
    } finally {
      threads.shutdownNow();
    }
  }

  private static double allReduce(
      ExecutorService threads, List<TcpRing> rings, List<ByteBuffer> data) throws Exception {
    long start = System.nanoTime();
    List<Future<?>> ranks = new ArrayList<>();
    for (int r = 0; r < rings.size(); r++) {
      TcpRing ring = rings.get(r);
      ByteBuffer buffer = data.get(r).clear();
      ranks.add(
          threads.submit(
              () -> {
                ring.allReduceSum(buffer);
                return null;
              }));
    }
    for (Future<?> rank : ranks) {
      rank.get();
    }
    return (System.nanoTime() - start) / 1e9;
  }

  /** The same bytes from one thread to another over one loopback connection. */
  private static double socketCopy(ExecutorService threads, ByteBuffer source, ByteBuffer target)
      throws Exception {
    try (ServerSocketChannel listener = TcpRing.listen(InetAddress.getLoopbackAddress());
        SocketChannel sender = SocketChannel.open(listener.getLocalAddress());
        SocketChannel receiver = listener.accept()) {
      long start = System.nanoTime();
      Future<?> send =
          threads.submit(
              () -> {
                while (source.hasRemaining()) {
                  sender.write(source);
                }
                return null;
              });
      while (target.hasRemaining()) {
        receiver.read(target);
      }
      send.get();
      return (System.nanoTime() - start) / 1e9;
    }
  }
}
