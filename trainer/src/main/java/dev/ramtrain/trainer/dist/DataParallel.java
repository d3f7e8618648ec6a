package dev.ramtrain.trainer.dist;

import dev.ramtrain.trainer.backend.HostBuffer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.channels.ServerSocketChannel;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;

/**
 * This process's place in a data-parallel job, and the two things training needs from the other
 * ranks: gradients averaged (each rank's gradient is the mean over its share of the global batch,
 * so their average is the global batch's mean, as PyTorch's DistributedDataParallel computes it)
 * and sums of the figures it reports. A job of one rank talks to nobody.
 *
 * <p>Collectives pair up only when every rank calls them in the same order. Gradients are averaged
 * by whichever thread updates the weights (the offloaded learner's host optimizer thread, layer by
 * layer, while the training loop's thread goes on), figures are summed by the training loop's
 * thread: each has a ring of its own, so the two orders never interleave. A rank that fails or
 * stops answering fails the others' calls within the timeout ({@link CollectiveException}, thrown
 * unchecked here, as {@link UncheckedIOException}, because it ends the training step).
 */
public final class DataParallel implements AutoCloseable {
  private static final DataParallel SINGLE = new DataParallel(null, null, 0, null);
  private static final int GRADIENT_RING = 0;
  private static final int FIGURES_RING = 1;

  private final TcpRing ring; // gradients, between the nodes' first ranks; null: one node, or none
  private final TcpRing figures; // sums of reported figures, every rank; null: one rank
  private final int zeroStage; // ZeRO: 1 shares the optimizer state out, 2 the gradients too
  private final NodeExchange node; // this rank's node's devices in this JVM; null: one a node
  private final int devicesPerNode;

  private DataParallel(TcpRing ring, TcpRing figures, int zeroStage, NodeExchange node) {
    this.ring = ring;
    this.figures = figures;
    this.zeroStage = zeroStage;
    this.node = node;
    this.devicesPerNode = node == null ? 1 : node.devices();
  }

  /** A job of one rank. */
  public static DataParallel single() {
    return SINGLE;
  }

  /**
   * Joins the job as {@code rank} of {@code addresses.size()} (see {@link TcpRing#connect}): forms
   * its two rings one after the other on the same listeners. The caller closes the listener. {@code
   * zeroStage} 1 partitions the optimizer state over the ranks (ZeRO stage 1), 2 the gradients too
   * (stage 2); 0 neither.
   */
  public static DataParallel join(
      int rank,
      List<InetSocketAddress> addresses,
      ServerSocketChannel listener,
      byte[] secret,
      Duration timeout,
      int zeroStage)
      throws IOException {
    return join(rank, addresses, listener, secret, timeout, zeroStage, null);
  }

  /**
   * As above, the ranks on nodes whose devices are ranks in one JVM, exchanging gradients through
   * the host: {@code node}, this rank's node's exchange (null: one device a node). Of W ranks on W
   * / N nodes, rank r is device r / (W / N) of node r mod (W / N): a node's devices take the global
   * batch's slices a rank of a W / N rank job accumulating N batches a step would take, in the
   * order it adds them, so a node computes what that rank computes. A node's device 0 (ranks 0 to W
   * / N - 1) sums its node's gradients on the host, and only those ranks form the gradient ring,
   * which then carries one sum per node. Every rank is on the figures ring. ZeRO partitions over
   * the nodes, whose one host copy each is device 0's: a node keeps the optimizer state (and, stage
   * 2, the reduced gradients) of its 1 / (W / N) share.
   */
  public static DataParallel join(
      int rank,
      List<InetSocketAddress> addresses,
      ServerSocketChannel listener,
      byte[] secret,
      Duration timeout,
      int zeroStage,
      NodeExchange node)
      throws IOException {
    int devicesPerNode = node == null ? 1 : node.devices();
    if (zeroStage < 0 || zeroStage > 2) {
      throw new IllegalArgumentException("ZeRO stage 0, 1 or 2, got " + zeroStage);
    }
    int world = addresses.size();
    if (devicesPerNode < 1 || world % devicesPerNode != 0) {
      throw new IllegalArgumentException(
          world + " ranks do not make nodes of " + devicesPerNode + " devices");
    }
    if (world == 1) {
      return SINGLE;
    }
    if (devicesPerNode == 1) {
      TcpRing gradients =
          TcpRing.connect(rank, addresses, listener, secret, timeout, GRADIENT_RING);
      try {
        return new DataParallel(
            gradients,
            TcpRing.connect(rank, addresses, listener, secret, timeout, FIGURES_RING),
            zeroStage,
            null);
      } catch (IOException | RuntimeException e) {
        gradients.close();
        throw e;
      }
    }
    // Every rank joins the figures ring first, and is known to have (its first sum) before the
    // nodes' first ranks connect again: a listener then receives only the gradient ring's.
    TcpRing figures = TcpRing.connect(rank, addresses, listener, secret, timeout, FIGURES_RING);
    try {
      figures.allGatherBytes(new byte[0]);
      int nodes = world / devicesPerNode;
      TcpRing gradients = null;
      if (rank < nodes && nodes > 1) { // each node's device 0
        gradients =
            TcpRing.connect(
                rank, addresses.subList(0, nodes), listener, secret, timeout, GRADIENT_RING);
      }
      return new DataParallel(gradients, figures, zeroStage, node);
    } catch (IOException | RuntimeException e) {
      figures.close();
      throw e;
    }
  }

  public int rank() {
    return figures == null ? 0 : figures.rank();
  }

  public int worldSize() {
    return figures == null ? 1 : figures.worldSize();
  }

  /** The ranks of a node, sharing one host copy of the model: 1 where each has its own. */
  public int devicesPerNode() {
    return devicesPerNode;
  }

  /** This rank's device among its node's, 0 for the one that sums and updates for them. */
  public int deviceInNode() {
    return rank() / nodes();
  }

  /** This rank's node, 0 to {@link #nodes()} - 1. */
  public int node() {
    return rank() % nodes();
  }

  /** The nodes of the job. */
  public int nodes() {
    return worldSize() / devicesPerNode;
  }

  /**
   * ZeRO stage 1 (DeepSpeed's name): each rank keeps optimizer state for its own share of the
   * parameters only ({@link #share}), updates that share and gathers the others' updated weights.
   */
  public boolean partitionsOptimizerState() {
    return zeroStage >= 1;
  }

  /**
   * ZeRO stage 2: each rank also keeps only its share of the gradients, each layer's reduced to its
   * owners as it lands ({@link #reduceToOwnersMean}), bit for bit stage 1's reduction.
   */
  public boolean partitionsGradients() {
    return zeroStage == 2;
  }

  /**
   * ZeRO-2's reduction of elements [{@code from}, {@code from + floats.remaining() / 4}) of a
   * buffer of {@code n}: the part of them in this rank's {@link #share} becomes their mean over the
   * ranks, with the bits {@link #reduceScatterMean} of the whole buffer gives them (the same
   * chunks, cut to the part); the rest is left partly summed. On nodes of several devices, device 0
   * calls it with its node's sum ({@link #addNodeGradients}), and the mean counts every device.
   */
  public void reduceToOwnersMean(ByteBuffer floats, long from, long n) {
    float mean = 1f / worldSize();
    if (ring != null) {
      reduceToOwners(floats, from, n, mean);
    } else if (worldSize() > 1) { // one node of several devices: its share is everything
      scale(floats.slice(), mean);
    }
  }

  /**
   * ZeRO on nodes of several devices, device 0: adds the node's other devices' next gradients
   * ({@link #contributeGradients}, the same elements) to {@code floats}, in device order, before
   * {@link #reduceToOwnersMean} or {@link #reduceScatterMean} takes the node's sum to the others.
   * Nothing to add on nodes of one device.
   */
  public void addNodeGradients(ByteBuffer floats) {
    if (node == null) {
      return;
    }
    if (deviceInNode() != 0) {
      throw new IllegalStateException("rank " + rank() + " hands its gradients to device 0");
    }
    node.handBack(node.addOthers(floats), floats); // none wants the sum: the update is device 0's
  }

  /**
   * The gradient ring's reduce-scatter of elements [{@code from}, ...) of a buffer of {@code n},
   * its chunks cut to them, then this ring rank's part of them times {@code factor}.
   */
  private void reduceToOwners(ByteBuffer floats, long from, long n, float factor) {
    long[] bounds = cutBounds(floats, from, n);
    try {
      ring.reduceScatterSum(floats, bounds);
    } catch (IOException e) {
      throw new UncheckedIOException("reducing gradients to their owners: " + e.getMessage(), e);
    }
    int mine = ring.rank();
    scale(
        floats.slice(
            floats.position() + 4 * (int) bounds[mine],
            4 * (int) (bounds[mine + 1] - bounds[mine])),
        factor);
  }

  /**
   * The gradient ring's chunks of a buffer of {@code n} cut to its elements {@code floats}, from
   * {@code from}.
   */
  private long[] cutBounds(ByteBuffer floats, long from, long n) {
    long count = floats.remaining() / 4;
    int world = ring.worldSize();
    long[] bounds = new long[world + 1];
    for (int c = 0; c <= world; c++) {
      bounds[c] = Math.min(count, Math.max(0, TcpRing.chunkStart(n, c, world) - from));
    }
    return bounds;
  }

  /**
   * Bounds [0, piece, 2 piece, ..., n] of a slab of {@code n} floats cut into pieces of at most
   * {@code piece}: the {@code parts} of {@link #reduceScatterMean(HostBuffer, long[])} and {@link
   * #allGather(HostBuffer, long[])} for a slab with no layers to cut it at (a resident model's).
   */
  public static long[] pieces(long n, long piece) {
    if (n < 0 || piece <= 0) {
      throw new IllegalArgumentException(n + " floats in pieces of " + piece);
    }
    long[] bounds = new long[(int) ((n + piece - 1) / piece) + 1];
    for (int k = 1; k < bounds.length; k++) {
      bounds[k] = Math.min(n, k * piece);
    }
    return bounds;
  }

  /**
   * {@link #reduceScatterMean} of a host slab, in {@code parts} (ascending bounds from 0 to its
   * floats, each part under 2 GiB): the whole's bits, a slab larger than one Java buffer views too.
   */
  public void reduceScatterMean(HostBuffer floats, long[] parts) {
    long n = parts[parts.length - 1];
    for (int k = 0; k + 1 < parts.length; k++) {
      reduceToOwnersMean(floats.range(4 * parts[k], 4 * (parts[k + 1] - parts[k])), parts[k], n);
    }
  }

  /** {@link #allGather(ByteBuffer)} of a host slab, in {@code parts} as above. */
  public void allGather(HostBuffer floats, long[] parts) {
    long n = parts[parts.length - 1];
    for (int k = 0; k + 1 < parts.length; k++) {
      allGather(floats.range(4 * parts[k], 4 * (parts[k + 1] - parts[k])), parts[k], n);
    }
  }

  /**
   * ZeRO-1's second half for elements [{@code from}, ...) of a buffer of {@code n}: every rank's
   * part of them in its {@link #share} to every rank (the whole buffer's chunks, cut to the part).
   */
  public void allGather(ByteBuffer floats, long from, long n) {
    if (ring == null) {
      return;
    }
    try {
      ring.allGather(floats, cutBounds(floats, from, n));
    } catch (IOException e) {
      throw new UncheckedIOException("gathering the ranks' shares: " + e.getMessage(), e);
    }
  }

  /**
   * This rank's share [from, to) of {@code n} parameters under ZeRO: its node's chunk of the
   * gradient ring, {@link #node()} of {@link #nodes()} (the rank's own where a node is one device).
   */
  public long[] share(long n) {
    return new long[] {
      TcpRing.chunkStart(n, node(), nodes()), TcpRing.chunkStart(n, node() + 1, nodes())
    };
  }

  /**
   * The all-reduce's first half (and ZeRO-1's): this rank's {@link #share} of {@code floats}
   * becomes the mean over the ranks, the ring's sum times 1 / world; the rest is left partly
   * summed.
   */
  public void reduceScatterMean(ByteBuffer floats) {
    reduceToOwnersMean(floats, 0, floats.remaining() / 4);
  }

  /** ZeRO-1's second half: every rank's {@link #share} of {@code floats} to every rank. */
  public void allGather(ByteBuffer floats) {
    if (ring == null) {
      return;
    }
    try {
      ring.allGather(floats);
    } catch (IOException e) {
      throw new UncheckedIOException("gathering the ranks' shares: " + e.getMessage(), e);
    }
  }

  /** Rank 0: the one that writes metrics, checkpoints and progress. */
  public boolean leader() {
    return rank() == 0;
  }

  /**
   * Replaces {@code floats} (float32, native order, position to limit) by its mean over the ranks:
   * the ring's sum in its fixed order, times 1 / world. Identical bits on every rank afterwards.
   */
  public void averageGradients(ByteBuffer floats) {
    if (node != null) {
      averageOverNodes(floats, true);
      return;
    }
    // The all-reduce's two halves, the mean taken on each rank's own share between them: each
    // rank scales 1 / world of the buffer, not all of it, and the gather hands out those bits.
    reduceScatterMean(floats);
    allGather(floats);
  }

  /**
   * A node's other device: hands {@code floats} (this device's gradient, float32, native order,
   * position to limit) to its node's device 0, which averages it in with the ranks' as {@link
   * #averageGradients} does, and does not want the mean back (an offloaded device, whose host copy
   * device 0 updates for the node). Returns once device 0 has added it: the buffer is free.
   */
  public void contributeGradients(ByteBuffer floats) {
    if (node == null || deviceInNode() == 0) {
      throw new IllegalStateException("rank " + rank() + " averages its node's gradients itself");
    }
    averageOverNodes(floats, false);
  }

  /**
   * The mean over the ranks of a job on nodes of several devices: the node's other devices hand
   * their gradients to device 0, which adds them to its own in device order, sums the nodes' sums
   * on the gradient ring (its fixed order), scales by 1 / world (every device counted) and hands
   * the mean back to those that want it.
   */
  private void averageOverNodes(ByteBuffer floats, boolean wantsMean) {
    int device = deviceInNode();
    if (device > 0) {
      node.handOver(device, floats, wantsMean);
      return;
    }
    List<NodeExchange.Handed> others = node.addOthers(floats);
    try {
      float mean = 1f / worldSize(); // every device counted
      if (ring == null) { // one node
        scale(floats.slice(), mean);
      } else {
        reduceToOwners(floats, 0, floats.remaining() / 4, mean);
        allGather(floats);
      }
    } catch (RuntimeException e) {
      node.fail(others, e);
      throw e;
    }
    node.handBack(others, floats);
  }

  private static void scale(ByteBuffer floats, float factor) {
    FloatBuffer values = floats.order(ByteOrder.nativeOrder()).asFloatBuffer();
    for (int i = 0; i < values.limit(); i++) {
      values.put(i, values.get(i) * factor);
    }
  }

  /**
   * Element-wise sums of {@code values} over the ranks, added in rank order (the same bits
   * everywhere).
   */
  public double[] sum(double... values) {
    return sum(figures, values);
  }

  /**
   * As {@link #sum}, over the gradient ring: a ZeRO step's clipping norm, summed over the shares'
   * owners (the nodes' devices 0) by whichever thread updates, while the loop's thread may sum
   * figures on the other ring. The same bits as {@link #sum} where a node is one device.
   */
  public double[] sumOnGradientRing(double... values) {
    return sum(ring, values);
  }

  private double[] sum(TcpRing over, double... values) {
    if (over == null) {
      return values.clone();
    }
    ByteBuffer mine = ByteBuffer.allocate(8 * values.length);
    mine.asDoubleBuffer().put(values);
    List<byte[]> all;
    try {
      all = over.allGatherBytes(mine.array());
    } catch (IOException e) {
      throw new UncheckedIOException("summing figures over the ranks: " + e.getMessage(), e);
    }
    double[] sums = new double[values.length];
    for (int r = 0; r < all.size(); r++) {
      if (all.get(r).length != mine.capacity()) {
        throw new IllegalStateException(
            "rank "
                + r
                + " sent "
                + all.get(r).length / 8
                + " figures, rank "
                + rank()
                + " "
                + values.length
                + ": the ranks are not running the same step");
      }
      ByteBuffer theirs = ByteBuffer.wrap(all.get(r));
      for (int i = 0; i < values.length; i++) {
        sums[i] += theirs.getDouble(8 * i);
      }
    }
    return sums;
  }

  /**
   * Replaces {@code floats} (position to limit, the same length on every rank) by rank 0's, bit for
   * bit: DDP's broadcast of buffers. On the figures' ring, as it is the training loop's thread that
   * calls.
   */
  public void takeLeaders(ByteBuffer floats) {
    if (figures == null) {
      return;
    }
    try {
      figures.broadcast(floats, 0);
    } catch (IOException e) {
      throw new UncheckedIOException("handing rank 0's buffers over: " + e.getMessage(), e);
    }
  }

  /**
   * Fails unless every rank passes the same bytes (a digest of its weights, say), naming the first
   * rank whose bytes differ from rank 0's and {@code what} they are.
   */
  public void requireSame(byte[] mine, String what) {
    if (figures == null) {
      return;
    }
    List<byte[]> all;
    try {
      all = figures.allGatherBytes(mine);
    } catch (IOException e) {
      throw new UncheckedIOException("comparing " + what + " over the ranks: " + e.getMessage(), e);
    }
    for (int r = 1; r < all.size(); r++) {
      if (!Arrays.equals(all.get(0), all.get(r))) {
        throw new RanksDivergedException(
            "rank " + r + "'s " + what + " differ from rank 0's: the ranks have diverged");
      }
    }
  }

  /**
   * Says this rank takes part in no more of its node's exchanges (it is closing: a rank closes once
   * the job's last collective is behind it, or when it failed): the node's other devices' waits for
   * it fail at once instead of at the timeout.
   */
  public void leaveNode() {
    if (node != null) {
      node.abort(new IllegalStateException("rank " + rank() + " of the node stopped"));
    }
  }

  @Override
  public void close() throws IOException {
    leaveNode();
    try (TcpRing closedGradients = ring;
        TcpRing closedFigures = figures) {
      // both closed (either may be null), the second even if the first fails
    }
  }
}
