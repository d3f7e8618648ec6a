package dev.ramtrain.trainer.dist;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.backend.cuda.EmulatorFaults;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelSpec;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Buckets of any size average the whole slab: each rank fills its gradients with values of its own,
 * announces the layers as backward would (last first), and ends with (g0 + g1) / 2 in every
 * element, computed here independently. Under ZeRO each rank ends with that mean in its share of
 * the host slab (ZeRO-2: every bucket reduced to its owners as it closes, its chunks cut to the
 * bucket), and its device gradients untouched.
 */
class GradientExchangeTest {
  private static final String SPEC = "mlp:12-8-6-4-3";

  @ParameterizedTest
  @CsvSource({
    "1,false,0",
    "200,false,0",
    "400,false,0",
    "26214400,false,0",
    "1,true,0",
    "200,true,0",
    "1,false,1",
    "1,false,2",
    "200,false,2",
    "26214400,false,2",
    "1,true,2"
  })
  void everyBucketSizeAveragesTheWholeSlab(long bucketBytes, boolean cuda, int zero)
      throws Exception {
    List<float[]> results = onTwoRanks(zero, dp -> exchanged(dp, bucketBytes, cuda));
    float[] rank0 = results.get(0);
    float[] rank1 = results.get(1);
    float[] expected = new float[rank0.length];
    for (int i = 0; i < expected.length; i++) {
      expected[i] = (gradient(0, i) + gradient(1, i)) * 0.5f;
    }
    if (zero == 0) {
      assertArrayEquals(expected, rank0);
      assertArrayEquals(expected, rank1);
      return;
    }
    int half = expected.length / 2; // rank 0's share is the floor
    float[] both = new float[expected.length];
    System.arraycopy(rank0, 0, both, 0, half);
    System.arraycopy(rank1, half, both, half, expected.length - half);
    assertArrayEquals(expected, both, "each rank's share of the mean");
  }

  /**
   * A host slab reduced to its owners and gathered in pieces (how a resident ZeRO slab over 2 GiB
   * goes over the ring) holds the bits one buffer's reduce-scatter and all-gather give it.
   */
  @ParameterizedTest
  @CsvSource({"1001,7", "1001,500", "1001,1001", "1001,4096"})
  void aSlabInPiecesReducesAndGathersAsOneBuffer(int n, long piece) throws Exception {
    List<float[]> results =
        onTwoRanks(
            1,
            dp -> {
              try (Backend backend = new CpuBackend(1);
                  var host = backend.allocateHost("slab", 4L * n)) {
                java.nio.ByteBuffer whole =
                    java.nio.ByteBuffer.allocateDirect(4 * n)
                        .order(java.nio.ByteOrder.nativeOrder());
                for (int i = 0; i < n; i++) {
                  whole.putFloat(4 * i, gradient(dp.rank(), i) / 3);
                }
                host.asByteBuffer().put(0, whole, 0, 4 * n);
                long[] pieces = DataParallel.pieces(n, piece);
                dp.reduceScatterMean(whole);
                dp.reduceScatterMean(host, pieces);
                float[] reduced = floats(host.asByteBuffer(), n);
                assertArrayEquals(floats(whole, n), reduced, "reduced, rank " + dp.rank());
                dp.allGather(whole);
                dp.allGather(host, pieces);
                assertArrayEquals(floats(whole, n), floats(host.asByteBuffer(), n), "gathered");
                return floats(whole, n);
              }
            });
    assertArrayEquals(results.get(0), results.get(1), "every rank holds the same slab");
    assertEquals(1 + (n + piece - 1) / piece, DataParallel.pieces(n, piece).length);
  }

  private static float[] floats(java.nio.ByteBuffer b, int n) {
    float[] out = new float[n];
    b.duplicate().order(java.nio.ByteOrder.nativeOrder()).asFloatBuffer().get(out);
    return out;
  }

  /** {@code body} on two ranks of a ring with ZeRO stage {@code zero}; their results by rank. */
  private static List<float[]> onTwoRanks(
      int zero, java.util.function.Function<DataParallel, float[]> body) throws Exception {
    ExecutorService threads = Executors.newCachedThreadPool();
    List<ServerSocketChannel> listeners = new ArrayList<>();
    List<InetSocketAddress> addresses = new ArrayList<>();
    for (int r = 0; r < 2; r++) {
      listeners.add(TcpRing.listen(InetAddress.getLoopbackAddress()));
      addresses.add((InetSocketAddress) listeners.get(r).getLocalAddress());
    }
    byte[] secret = "a secret of sixteen bytes or more".getBytes();
    List<Future<float[]>> ranks = new ArrayList<>();
    for (int r = 0; r < 2; r++) {
      int rank = r;
      ranks.add(
          threads.submit(
              () -> {
                try (DataParallel dp =
                    DataParallel.join(
                        rank,
                        addresses,
                        listeners.get(rank),
                        secret,
                        Duration.ofSeconds(30),
                        zero)) {
                  return body.apply(dp);
                }
              }));
    }
    List<float[]> results =
        List.of(ranks.get(0).get(60, TimeUnit.SECONDS), ranks.get(1).get(60, TimeUnit.SECONDS));
    for (ServerSocketChannel l : listeners) {
      l.close();
    }
    threads.shutdown();
    return results;
  }

  /** Rank {@code rank}'s made-up gradient of element {@code i}. */
  private static float gradient(int rank, int i) {
    return (rank + 1) * 0.25f + i * 0.125f;
  }

  /** On the CPU backend, or the CUDA backend over the driver emulator. */
  private static float[] exchanged(DataParallel dp, long bucketBytes, boolean cuda) {
    try (Backend backend =
            cuda
                ? EmulatorFaults.open(new BackendSpec(BackendSpec.Kind.CUDA, 1))
                : new CpuBackend(1);
        Stream compute = backend.createStream("compute");
        Model model = Model.build(SPEC, ModelSpec.parse(SPEC), backend, compute, 2, 1);
        GradientExchange exchange = new GradientExchange(backend, model, dp, bucketBytes)) {
      int n = (int) model.parameters().grads().count();
      float[] mine = new float[n];
      for (int i = 0; i < n; i++) {
        mine[i] = gradient(dp.rank(), i);
      }
      Checkpoints.upload(backend, compute, model.parameters().grads(), mine);
      for (int layer = model.layers().size() - 1; layer >= 0; layer--) {
        exchange.layerDone(compute, layer);
      }
      exchange.finish(compute);
      float[] device = Checkpoints.download(backend, compute, model.parameters().grads());
      if (!dp.partitionsOptimizerState()) {
        return device;
      }
      assertArrayEquals(mine, device, "nothing comes back to the device under ZeRO");
      float[] host = new float[n];
      exchange.reduced().asByteBuffer().asFloatBuffer().get(host);
      return host;
    }
  }
}
