package dev.ramtrain.trainer.dist;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.time.Duration;
import java.util.List;

/**
 * Collectives over float32 buffers among the ranks of one training job, on a TCP ring: each rank
 * sends to rank + 1 and receives from rank - 1 (as NCCL's and Gloo's ring algorithms do).
 *
 * <p>All-reduce is a reduce-scatter followed by an all-gather, each {@code world - 1} steps moving
 * one {@code 1/world} chunk per rank and step, so every rank sends and receives {@code 2 (world -
 * 1) / world} of the buffer whatever the world size. Chunk {@code c} covers elements {@code [n c /
 * world, n (c + 1) / world)} and after the reduce-scatter is complete on rank {@code c}: the slice
 * that rank updates under ZeRO-1.
 *
 * <p>The reduction order is fixed: chunk {@code c} is summed as {@code ((g[c+1] + g[c+2]) + ...) +
 * g[c]} (ranks modulo world), the same on every run, and the all-gather hands every rank the same
 * bits, so all ranks hold identical gradients and weights. With two ranks every chunk is {@code
 * g[0] + g[1]} exactly (IEEE addition commutes).
 *
 * <p>Buffers are float32 in native byte order (the handshake refuses a peer of another order).
 * Every wait is bounded: a peer that sends or reads nothing for the timeout fails the call with a
 * message naming it.
 */
public final class TcpRing implements AutoCloseable {
  /** Transfers move in pieces this size, so a receive is reduced while it is still in cache. */
  static final int SEGMENT_BYTES = 1 << 20;

  /**
   * The largest block {@link #allGatherBytes} takes from a peer: far above any figures it carries
   * (a 1,000-class confusion matrix is 8 MB), far below what a corrupt length would ask for.
   */
  static final int MAX_BLOCK_BYTES = 256 << 20;

  private final int rank;
  private final int world;
  private final long idleNanos;
  private final Selector selector;
  private final SelectionKey next;
  private final SelectionKey previous;
  private final ByteBuffer incoming;

  private TcpRing(int rank, int world, long idleNanos, RingConnections.Links links)
      throws IOException {
    this.rank = rank;
    this.world = world;
    this.idleNanos = idleNanos;
    if (links == null) { // a world of one: nothing to exchange
      this.selector = null;
      this.next = null;
      this.previous = null;
      this.incoming = null;
      return;
    }
    this.selector = Selector.open();
    try {
      this.next = links.next().register(selector, 0);
      this.previous = links.previous().register(selector, 0);
    } catch (IOException | RuntimeException e) {
      selector.close();
      throw e;
    }
    // Freed with the ring by the garbage collector: one segment per ring, for its whole life.
    this.incoming = ByteBuffer.allocateDirect(SEGMENT_BYTES).order(ByteOrder.nativeOrder());
  }

  /**
   * A listener on an ephemeral port of {@code host}, to bind before the addresses are exchanged.
   */
  public static ServerSocketChannel listen(InetAddress host) throws IOException {
    ServerSocketChannel listener = ServerSocketChannel.open();
    try {
      listener.bind(new InetSocketAddress(host, 0));
      return listener;
    } catch (IOException | RuntimeException e) {
      listener.close();
      throw e;
    }
  }

  /**
   * Joins the ring as {@code rank} of {@code addresses.size()}, where {@code addresses.get(i)} is
   * rank i's listener and {@code listener} this rank's own (the caller keeps and closes it: nothing
   * else connects once the ring stands). Every rank must present the same {@code secret}. Waits at
   * most {@code timeout} for the ring to form, and afterwards for any peer to move.
   */
  public static TcpRing connect(
      int rank,
      List<InetSocketAddress> addresses,
      ServerSocketChannel listener,
      byte[] secret,
      Duration timeout)
      throws IOException {
    return connect(rank, addresses, listener, secret, timeout, 0);
  }

  /**
   * The same for ring {@code ringId} of the job: several rings can be formed one after another on
   * the same listeners, each connection proving which ring it belongs to.
   */
  public static TcpRing connect(
      int rank,
      List<InetSocketAddress> addresses,
      ServerSocketChannel listener,
      byte[] secret,
      Duration timeout,
      int ringId)
      throws IOException {
    int world = addresses.size();
    if (rank < 0 || rank >= world) {
      throw new IllegalArgumentException("rank " + rank + " outside a world of " + world);
    }
    if (secret.length < 16) {
      throw new IllegalArgumentException("the job secret must have at least 16 bytes");
    }
    long idle = timeout.toNanos();
    if (world == 1) {
      return new TcpRing(rank, 1, idle, null);
    }
    RingConnections.Links links =
        RingConnections.open(rank, addresses, listener, secret, ringId, idle);
    try {
      return new TcpRing(rank, world, idle, links);
    } catch (IOException | RuntimeException e) {
      links.next().close();
      links.previous().close();
      throw e;
    }
  }

  public int rank() {
    return rank;
  }

  public int worldSize() {
    return world;
  }

  /** First element of chunk {@code c} of a buffer of {@code n} elements. */
  public static long chunkStart(long n, int c, int world) {
    return n * c / world;
  }

  /** Sums {@code floats} (from its position to its limit) over all ranks, in place. */
  public void allReduceSum(ByteBuffer floats) throws IOException {
    reduceScatterSum(floats);
    allGather(floats);
  }

  /**
   * Leaves chunk {@link #rank()} of {@code floats} holding the sum over all ranks; the other chunks
   * hold partial sums.
   */
  public void reduceScatterSum(ByteBuffer floats) throws IOException {
    reduceScatterSum(floats, chunks(elements(floats)));
  }

  /**
   * The same over chunks of its own: chunk {@code c} is elements [{@code bounds[c]}, {@code
   * bounds[c + 1]}) of {@code floats} (world + 1 ascending bounds from 0 to its length; a chunk may
   * be empty). Each element is summed in the order its chunk's owner fixes, so a part of a buffer
   * reduced with the whole buffer's chunk boundaries (cut to the part) gets the whole reduction's
   * bits: ZeRO-2 reduces each layer's gradient to its owners that way.
   */
  public void reduceScatterSum(ByteBuffer floats, long[] bounds) throws IOException {
    requireBounds(bounds, elements(floats));
    for (int step = 0; step < world - 1; step++) {
      int send = Math.floorMod(rank - step - 1, world);
      int receive = Math.floorMod(rank - step - 2, world);
      moveChunk(floats, bounds, send, receive, true);
    }
  }

  private void requireBounds(long[] bounds, long n) {
    if (bounds.length != world + 1 || bounds[0] != 0 || bounds[world] != n) {
      throw new IllegalArgumentException(
          "chunk bounds " + java.util.Arrays.toString(bounds) + " for " + n + " elements");
    }
  }

  /** The ring's chunk boundaries of a buffer of {@code n} elements. */
  private long[] chunks(long n) {
    long[] bounds = new long[world + 1];
    for (int c = 0; c <= world; c++) {
      bounds[c] = chunkStart(n, c, world);
    }
    return bounds;
  }

  /** Hands every rank's chunk {@code rank} of {@code floats} to every other rank, in place. */
  public void allGather(ByteBuffer floats) throws IOException {
    allGather(floats, chunks(elements(floats)));
  }

  /** The same over chunks of its own, as {@link #reduceScatterSum(ByteBuffer, long[])}'s. */
  public void allGather(ByteBuffer floats, long[] bounds) throws IOException {
    requireBounds(bounds, elements(floats));
    for (int step = 0; step < world - 1; step++) {
      int send = Math.floorMod(rank - step, world);
      int receive = Math.floorMod(rank - step - 1, world);
      moveChunk(floats, bounds, send, receive, false);
    }
  }

  /**
   * Every rank's {@code mine}, in rank order (small messages: metrics, flags). Each block travels
   * around the ring once, its length first.
   */
  public List<byte[]> allGatherBytes(byte[] mine) throws IOException {
    byte[][] blocks = new byte[world][];
    blocks[rank] = mine.clone();
    for (int step = 0; step < world - 1; step++) {
      byte[] send = blocks[Math.floorMod(rank - step, world)];
      int from = Math.floorMod(rank - step - 1, world);
      ByteBuffer length = ByteBuffer.allocate(4);
      exchange(ByteBuffer.allocate(4).putInt(0, send.length), length);
      int size = length.flip().getInt();
      if (size < 0 || size > MAX_BLOCK_BYTES) {
        throw new CollectiveException(
            "rank " + rank + ": rank " + from + " sent a block of " + size + " bytes");
      }
      ByteBuffer block = ByteBuffer.allocate(size);
      exchange(ByteBuffer.wrap(send), block);
      blocks[from] = block.array();
    }
    return List.of(blocks);
  }

  /**
   * Hands rank {@code root}'s {@code bytes} (position to limit; the same length on every rank) to
   * every rank, in place: around the ring, each rank passing on what it received, so every rank
   * ends with the root's bits.
   */
  public void broadcast(ByteBuffer bytes, int root) throws IOException {
    ByteBuffer none = ByteBuffer.allocate(0);
    for (int hop = 0; hop < world - 1; hop++) {
      int sender = Math.floorMod(root + hop, world);
      boolean sends = rank == sender;
      boolean receives = rank == (sender + 1) % world;
      exchange(sends ? bytes.duplicate() : none, receives ? bytes.duplicate() : none);
    }
  }

  /** Closes both connections; an unfinished collective on a peer then fails there at once. */
  @Override
  public void close() throws IOException {
    if (selector == null) {
      return;
    }
    try (selector;
        var out = next.channel();
        var in = previous.channel()) {
      // Closed in reverse order by try-with-resources.
    }
  }

  private void moveChunk(ByteBuffer floats, long[] bounds, int send, int receive, boolean add)
      throws IOException {
    int base = floats.position();
    int sendStart = base + 4 * (int) bounds[send];
    int sendBytes = 4 * (int) (bounds[send + 1] - bounds[send]);
    int receiveStart = base + 4 * (int) bounds[receive];
    int receiveBytes = 4 * (int) (bounds[receive + 1] - bounds[receive]);
    for (int at = 0; at < Math.max(sendBytes, receiveBytes); at += SEGMENT_BYTES) {
      ByteBuffer out = floats.slice(sendStart + Math.min(at, sendBytes), piece(sendBytes, at));
      int length = piece(receiveBytes, at);
      ByteBuffer in =
          add
              ? incoming.clear().limit(length)
              : floats.slice(receiveStart + Math.min(at, receiveBytes), length);
      exchange(out, in);
      if (add && length > 0) { // past a shorter received chunk's end: only sending
        addInto(floats, receiveStart + at, length);
      }
    }
  }

  private void exchange(ByteBuffer send, ByteBuffer receive) throws IOException {
    ChannelIo.exchange(
        selector,
        next,
        send,
        previous,
        receive,
        idleNanos,
        rank,
        (rank + 1) % world,
        (rank + world - 1) % world);
  }

  /** {@code floats[at..] = incoming + floats[at..]}: the partial sum so far, then this rank's. */
  private void addInto(ByteBuffer floats, int at, int bytes) {
    FloatBuffer own = floats.slice(at, bytes).order(ByteOrder.nativeOrder()).asFloatBuffer();
    FloatBuffer partial = incoming.flip().asFloatBuffer();
    for (int i = 0; i < bytes / 4; i++) {
      own.put(i, partial.get(i) + own.get(i));
    }
  }

  private static int piece(int total, int at) {
    return Math.max(0, Math.min(SEGMENT_BYTES, total - at));
  }

  private static long elements(ByteBuffer floats) {
    if (floats.remaining() % 4 != 0) {
      throw new IllegalArgumentException(
          "a float32 buffer needs a multiple of 4 bytes, got " + floats.remaining());
    }
    if (floats.order() != ByteOrder.nativeOrder()) {
      throw new IllegalArgumentException("float32 buffers must be in native byte order");
    }
    return floats.remaining() / 4;
  }
}
