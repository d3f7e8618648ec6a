package dev.ramtrain.trainer.dist;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.channels.ServerSocketChannel;
import java.time.Duration;
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
  private static final DataParallel SINGLE = new DataParallel(null, null);
  private static final int GRADIENT_RING = 0;
  private static final int FIGURES_RING = 1;

  private final TcpRing ring; // gradients; null: one rank
  private final TcpRing figures; // sums of reported figures

  private DataParallel(TcpRing ring, TcpRing figures) {
    this.ring = ring;
    this.figures = figures;
  }

  /** A job of one rank. */
  public static DataParallel single() {
    return SINGLE;
  }

  /**
   * Joins the job as {@code rank} of {@code addresses.size()} (see {@link TcpRing#connect}): forms
   * its two rings one after the other on the same listeners. The caller closes the listener.
   */
  public static DataParallel join(
      int rank,
      List<InetSocketAddress> addresses,
      ServerSocketChannel listener,
      byte[] secret,
      Duration timeout)
      throws IOException {
    if (addresses.size() == 1) {
      return SINGLE;
    }
    TcpRing gradients = TcpRing.connect(rank, addresses, listener, secret, timeout, GRADIENT_RING);
    try {
      return new DataParallel(
          gradients, TcpRing.connect(rank, addresses, listener, secret, timeout, FIGURES_RING));
    } catch (IOException | RuntimeException e) {
      gradients.close();
      throw e;
    }
  }

  public int rank() {
    return ring == null ? 0 : ring.rank();
  }

  public int worldSize() {
    return ring == null ? 1 : ring.worldSize();
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
    if (ring == null) {
      return;
    }
    try {
      ring.allReduceSum(floats);
    } catch (IOException e) {
      throw new UncheckedIOException("averaging gradients: " + e.getMessage(), e);
    }
    float scale = 1f / ring.worldSize();
    FloatBuffer values = floats.slice().order(ByteOrder.nativeOrder()).asFloatBuffer();
    for (int i = 0; i < values.limit(); i++) {
      values.put(i, values.get(i) * scale);
    }
  }

  /**
   * Element-wise sums of {@code values} over the ranks, added in rank order (the same bits
   * everywhere).
   */
  public double[] sum(double... values) {
    if (ring == null) {
      return values.clone();
    }
    ByteBuffer mine = ByteBuffer.allocate(8 * values.length);
    mine.asDoubleBuffer().put(values);
    List<byte[]> all;
    try {
      all = figures.allGatherBytes(mine.array());
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

  @Override
  public void close() throws IOException {
    if (ring != null) {
      try (ring;
          figures) {
        // both closed, the second even if the first fails
      }
    }
  }
}
