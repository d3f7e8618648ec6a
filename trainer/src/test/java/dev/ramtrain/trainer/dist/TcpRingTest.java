package dev.ramtrain.trainer.dist;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Ranks are threads of this JVM on loopback; each joins the ring exactly as a trainer task does.
 */
class TcpRingTest {
  private static final byte[] SECRET = "0123456789abcdef-job-secret".getBytes();
  private static final Duration TIMEOUT = Duration.ofSeconds(20);
  private static final Duration SHORT = Duration.ofMillis(1500);

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private final List<ServerSocketChannel> listeners = new ArrayList<>();

  @AfterEach
  void stop() throws Exception {
    threads.shutdownNow();
    assertTrue(threads.awaitTermination(30, TimeUnit.SECONDS), "a rank thread hung");
    for (ServerSocketChannel listener : listeners) {
      listener.close();
    }
  }

  /** Sizes: empty, fewer elements than ranks, chunks of unequal length, several segments. */
  @ParameterizedTest
  @CsvSource({"2,0", "2,1", "3,2", "2,1001", "3,1000003", "4,777777", "5,64"})
  void allReduceSumsInTheFixedRingOrderAndEveryRankHoldsTheSameBits(int world, int n)
      throws Exception {
    float[][] inputs = randomInputs(world, n, world * 31L + n);
    List<float[]> results =
        runRanks(world, TIMEOUT, (ring, data) -> ring.allReduceSum(data), inputs);
    float[] expected = ringOrderSum(inputs);
    for (int r = 0; r < world; r++) {
      assertArrayEquals(expected, results.get(r), "rank " + r);
    }
    // And the fixed order is still the sum, to float32 rounding: each of the world - 1 additions
    // rounds by at most half an ulp of a partial sum, itself at most the sum of magnitudes.
    for (int i = 0; i < n; i++) {
      double exact = 0;
      double magnitude = 0;
      for (float[] input : inputs) {
        exact += input[i];
        magnitude += Math.abs(input[i]);
      }
      assertEquals(exact, expected[i], world * 0x1p-24 * magnitude, "element " + i);
    }
  }

  @Test
  void twoRanksSumExactlyAsOneProcessWouldAddTheirTwoHalves() throws Exception {
    float[][] inputs = randomInputs(2, 100_003, 5);
    List<float[]> results = runRanks(2, TIMEOUT, (ring, data) -> ring.allReduceSum(data), inputs);
    for (int i = 0; i < inputs[0].length; i++) {
      assertEquals(inputs[0][i] + inputs[1][i], results.get(0)[i]);
    }
  }

  @Test
  void reduceScatterCompletesEachRanksOwnChunkAndAllGatherSharesThem() throws Exception {
    int world = 3;
    int n = 300_001;
    float[][] inputs = randomInputs(world, n, 9);
    float[] sum = ringOrderSum(inputs);
    List<float[]> scattered =
        runRanks(world, TIMEOUT, (ring, data) -> ring.reduceScatterSum(data), inputs);
    float[][] owned = new float[world][];
    for (int r = 0; r < world; r++) {
      int from = (int) TcpRing.chunkStart(n, r, world);
      int to = (int) TcpRing.chunkStart(n, r + 1, world);
      float[] chunk = java.util.Arrays.copyOfRange(scattered.get(r), from, to);
      assertArrayEquals(java.util.Arrays.copyOfRange(sum, from, to), chunk, "rank " + r);
      // ZeRO-1: only a rank's own chunk is meaningful to it; give the others garbage.
      owned[r] = new float[n];
      java.util.Arrays.fill(owned[r], Float.NaN);
      System.arraycopy(chunk, 0, owned[r], from, chunk.length);
    }
    List<float[]> gathered = runRanks(world, TIMEOUT, (ring, data) -> ring.allGather(data), owned);
    for (int r = 0; r < world; r++) {
      assertArrayEquals(sum, gathered.get(r), "rank " + r);
    }
  }

  /**
   * Chunk bounds cut to a part of a buffer (ZeRO-2's reduction of one layer or bucket) can leave a
   * rank's chunk empty beside a neighbour's of several 1 MiB segments: each chunk still ends with
   * its ring-order sum at its owner. (A 33 MB bucket wholly in one rank's share failed here once,
   * the empty chunk's additions placed past the buffer's end.)
   */
  @ParameterizedTest
  @CsvSource({"2, 0, 0", "2, 700000, 700000", "3, 0, 5", "3, 699990, 700000", "3, 1, 699999"})
  void unevenChunksOfSeveralSegmentsReduceToTheirOwners(int world, long first, long second)
      throws Exception {
    int n = 700_000; // 2.8 MB: three segments
    long[] bounds = world == 2 ? new long[] {0, first, n} : new long[] {0, first, second, n};
    float[][] inputs = randomInputs(world, n, 11);
    List<float[]> scattered =
        runRanks(world, TIMEOUT, (ring, data) -> ring.reduceScatterSum(data, bounds), inputs);
    for (int r = 0; r < world; r++) {
      for (int i = (int) bounds[r]; i < bounds[r + 1]; i++) {
        float acc = inputs[(r + 1) % world][i];
        for (int k = 2; k <= world; k++) {
          acc = acc + inputs[(r + k) % world][i];
        }
        assertEquals(acc, scattered.get(r)[i], "rank " + r + " [" + i + "]");
      }
    }
  }

  /** Blocks of every size, a 1,000-class confusion matrix's 8 MB included, in rank order. */
  @Test
  void allGatherBytesHandsEveryRankEveryBlockInRankOrder() throws Exception {
    Members ring = bind(3);
    int[] sizes = {0, 17, 8 * 1_002_000};
    List<Future<List<byte[]>>> ranks = new ArrayList<>();
    for (int r = 0; r < 3; r++) {
      int rank = r;
      ranks.add(
          threads.submit(
              () -> {
                try (TcpRing joined = join(ring, rank, TIMEOUT).get()) {
                  byte[] mine = new byte[sizes[rank]];
                  java.util.Arrays.fill(mine, (byte) (rank + 1));
                  return joined.allGatherBytes(mine);
                }
              }));
    }
    for (Future<List<byte[]>> rank : ranks) {
      List<byte[]> blocks = rank.get(60, TimeUnit.SECONDS);
      for (int r = 0; r < 3; r++) {
        assertEquals(sizes[r], blocks.get(r).length, "block of rank " + r);
        for (byte b : blocks.get(r)) {
          assertEquals(r + 1, b);
        }
      }
    }
  }

  /** Every rank ends with the root's bits (NaNs and signed zeros too), from any root. */
  @ParameterizedTest
  @CsvSource({"1,0", "2,0", "2,1", "3,0", "3,2", "5,3"})
  void broadcastHandsEveryRankTheRootsBits(int world, int root) throws Exception {
    float[][] inputs = randomInputs(world, 100_003, 9);
    inputs[root][0] = Float.NaN;
    inputs[root][1] = -0f;
    List<float[]> results =
        runRanks(world, TIMEOUT, (ring, data) -> ring.broadcast(data, root), inputs);
    for (int r = 0; r < world; r++) {
      for (int i = 0; i < inputs[root].length; i++) {
        assertEquals(
            Float.floatToRawIntBits(inputs[root][i]),
            Float.floatToRawIntBits(results.get(r)[i]),
            "rank " + r + " [" + i + "]");
      }
    }
  }

  @Test
  void aWorldOfOneIsItself() throws Exception {
    float[][] inputs = randomInputs(1, 10, 1);
    List<float[]> results = runRanks(1, TIMEOUT, (ring, data) -> ring.allReduceSum(data), inputs);
    assertArrayEquals(inputs[0], results.get(0));
  }

  @Test
  void ranksWithDifferentSecretsRefuseEachOtherNamingThePeer() throws Exception {
    Members ring = bind(2);
    // Each holds a secret the other lacks: whichever checks a proof first refuses the other, which
    // fails at once and stops answering; the one refused first may then wait out its deadline.
    // Which one comes first is a race, so the assertions hold for both orders.
    Duration deadline =
        Duration.ofSeconds(5); // a check takes milliseconds, on a loaded machine too
    Future<TcpRing> impostor =
        threads.submit(
            () ->
                TcpRing.connect(
                    0,
                    ring.addresses(),
                    ring.listener(0),
                    "another-job-secret!!".getBytes(),
                    deadline));
    Future<TcpRing> honest = join(ring, 1, deadline);
    String impostorFailure = failure(impostor);
    String honestFailure = failure(honest);
    assertTrue(
        impostorFailure.contains("rank 0:") && impostorFailure.contains("rank 1"), impostorFailure);
    assertTrue(
        honestFailure.contains("rank 1:") && honestFailure.contains("rank 0"), honestFailure);
    assertTrue(
        (impostorFailure + honestFailure)
            .contains("refused the connection (a different job secret"),
        "one of them was refused for its secret: " + impostorFailure + " / " + honestFailure);
  }

  @Test
  void aStrangerThatConnectsFirstIsClosedAndTheRingStillForms() throws Exception {
    Members members = bind(2);
    // Something on the network connects to rank 1's port and sends garbage.
    try (SocketChannel stranger = SocketChannel.open(members.addresses().get(1))) {
      stranger.write(ByteBuffer.wrap(new byte[36]));
      float[][] inputs = randomInputs(2, 1000, 3);
      List<float[]> results =
          runRanks(members, TIMEOUT, (ring, data) -> ring.allReduceSum(data), inputs);
      assertArrayEquals(ringOrderSum(inputs), results.get(1));
    }
  }

  @Test
  void aRankThatNeverConnectsFailsTheOthersWithinTheTimeout() throws Exception {
    Members ring = bind(3);
    Future<TcpRing> r0 = join(ring, 0, SHORT);
    Future<TcpRing> r1 = join(ring, 1, SHORT);
    // Rank 2 bound its port (its address was exchanged) but its task never joins: both others
    // give up because their timeout ran out, and say so, naming rank 2.
    String zero = failure(r0);
    String one = failure(r1);
    assertTrue(zero.startsWith("rank 0:") && zero.contains("rank 2"), zero);
    assertTrue(one.contains("rank 1: rank 2"), one);
    assertTrue(zero.contains("within the timeout"), zero);
    assertTrue(one.contains("within the timeout") || one.contains("in time"), one);
  }

  @Test
  void aRankThatDiesMidAllReduceFailsTheOtherAtOnce() throws Exception {
    Members ring = bind(2);
    Future<TcpRing> r1 = join(ring, 1, TIMEOUT);
    try (TcpRing r0 = join(ring, 0, TIMEOUT).get()) {
      Future<Void> reducing =
          threads.submit(
              () -> {
                r0.allReduceSum(floats(new float[8_000_000]));
                return null;
              });
      Thread.sleep(100);
      r1.get().close(); // its task was killed: the kernel closes its sockets
      String message = failure(reducing);
      assertTrue(
          message.contains("rank 0: rank 1 closed the connection")
              || message.contains("rank 0: the connection with rank 1 broke"),
          message);
    }
  }

  @Test
  void aRankThatStallsMidAllReduceFailsTheOtherAfterTheTimeoutNamingIt() throws Exception {
    Members ring = bind(2);
    Future<TcpRing> r1 = join(ring, 1, SHORT);
    try (TcpRing r0 = join(ring, 0, SHORT).get();
        TcpRing stalled = r1.get()) {
      // Rank 1 is connected but never calls the collective (a hung task, a lost executor).
      IOException e =
          assertThrows(IOException.class, () -> r0.allReduceSum(floats(new float[4_000_000])));
      assertTrue(e.getMessage().startsWith("rank 0: rank 1 "), e.getMessage());
      assertTrue(e.getMessage().contains("within the timeout"), e.getMessage());
    }
  }

  @Test
  void refusesBuffersItCannotSumCorrectly() throws Exception {
    try (TcpRing solo = join(bind(1), 0, TIMEOUT).get()) {
      assertThrows(
          IllegalArgumentException.class,
          () -> solo.allReduceSum(ByteBuffer.allocateDirect(6).order(ByteOrder.nativeOrder())));
      ByteOrder other =
          ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN
              ? ByteOrder.BIG_ENDIAN
              : ByteOrder.LITTLE_ENDIAN;
      assertThrows(
          IllegalArgumentException.class,
          () -> solo.allReduceSum(ByteBuffer.allocateDirect(8).order(other)));
    }
  }

  /** The expected result, computed independently: chunk c folded from rank c+1 around to c. */
  private static float[] ringOrderSum(float[][] inputs) {
    int world = inputs.length;
    int n = inputs[0].length;
    float[] sum = new float[n];
    for (int c = 0; c < world; c++) {
      for (int i = (int) ((long) n * c / world); i < (long) n * (c + 1) / world; i++) {
        float acc = inputs[(c + 1) % world][i];
        for (int k = 2; k <= world; k++) {
          acc = acc + inputs[(c + k) % world][i];
        }
        sum[i] = acc;
      }
    }
    return sum;
  }

  private interface Collective {
    void run(TcpRing ring, ByteBuffer data) throws IOException;
  }

  private List<float[]> runRanks(int world, Duration timeout, Collective op, float[][] inputs)
      throws Exception {
    return runRanks(bind(world), timeout, op, inputs);
  }

  private List<float[]> runRanks(Members members, Duration timeout, Collective op, float[][] inputs)
      throws Exception {
    List<InetSocketAddress> addresses = members.addresses();
    List<Future<float[]>> ranks = new ArrayList<>();
    for (int r = 0; r < addresses.size(); r++) {
      int rank = r;
      ranks.add(
          threads.submit(
              () -> {
                try (TcpRing ring =
                    TcpRing.connect(rank, addresses, members.listener(rank), SECRET, timeout)) {
                  assertEquals(rank, ring.rank());
                  assertEquals(addresses.size(), ring.worldSize());
                  ByteBuffer data = floats(inputs[rank]);
                  op.run(ring, data);
                  float[] out = new float[inputs[rank].length];
                  data.asFloatBuffer().get(out);
                  return out;
                }
              }));
    }
    List<float[]> results = new ArrayList<>();
    for (Future<float[]> rank : ranks) {
      results.add(rank.get(60, TimeUnit.SECONDS));
    }
    return results;
  }

  /** The ranks' listeners, bound before their addresses are known to anyone, as in a job. */
  private record Members(List<ServerSocketChannel> listeners, List<InetSocketAddress> addresses) {
    ServerSocketChannel listener(int rank) {
      return listeners.get(rank);
    }
  }

  private Members bind(int world) throws IOException {
    List<ServerSocketChannel> bound = new ArrayList<>();
    List<InetSocketAddress> addresses = new ArrayList<>();
    for (int r = 0; r < world; r++) {
      ServerSocketChannel listener = TcpRing.listen(InetAddress.getLoopbackAddress());
      listeners.add(listener);
      bound.add(listener);
      addresses.add((InetSocketAddress) listener.getLocalAddress());
    }
    return new Members(bound, addresses);
  }

  private Future<TcpRing> join(Members ring, int rank, Duration timeout) {
    return threads.submit(
        () -> TcpRing.connect(rank, ring.addresses(), ring.listener(rank), SECRET, timeout));
  }

  private static ByteBuffer floats(float[] values) {
    ByteBuffer data = ByteBuffer.allocateDirect(4 * values.length).order(ByteOrder.nativeOrder());
    data.asFloatBuffer().put(values);
    return data;
  }

  private static float[][] randomInputs(int world, int n, long seed) {
    Random random = new Random(seed);
    float[][] inputs = new float[world][n];
    for (float[] input : inputs) {
      for (int i = 0; i < n; i++) {
        // Magnitudes over several decades, so the order of the sum shows in the bits.
        input[i] = (float) (random.nextGaussian() * Math.pow(10, random.nextInt(5) - 2));
      }
    }
    return inputs;
  }

  private static String failure(Future<?> future) throws InterruptedException {
    ExecutionException e =
        assertThrows(ExecutionException.class, () -> future.get(30, TimeUnit.SECONDS));
    assertTrue(e.getCause() instanceof IOException, String.valueOf(e.getCause()));
    return e.getCause().getMessage();
  }
}
