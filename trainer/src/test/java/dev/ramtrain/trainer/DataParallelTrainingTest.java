package dev.ramtrain.trainer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.backend.cuda.EmulatorFaults;
import dev.ramtrain.trainer.checkpoint.Safetensors;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.data.LoaderSpec;
import dev.ramtrain.trainer.data.ShardSet;
import dev.ramtrain.trainer.dist.DataParallel;
import dev.ramtrain.trainer.dist.NodeExchange;
import dev.ramtrain.trainer.dist.TcpRing;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelBlueprint;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.offload.DeviceGroup;
import dev.ramtrain.trainer.offload.DeviceProfile;
import dev.ramtrain.trainer.offload.LayerCost;
import dev.ramtrain.trainer.offload.OffloadSpec;
import dev.ramtrain.trainer.offload.OffloadedLearner;
import dev.ramtrain.trainer.offload.PlacementPlan;
import dev.ramtrain.trainer.offload.Streaming;
import dev.ramtrain.trainer.optim.AdamW;
import dev.ramtrain.trainer.optim.AdamWSpec;
import dev.ramtrain.trainer.optim.EmaDecay;
import dev.ramtrain.trainer.optim.LrSchedule;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Data-parallel training as PyTorch's DistributedDataParallel defines it: two ranks, each with its
 * half of every global batch, end with the same weights bit for bit, and with the weights of one
 * process that accumulates the same two half batches into each step. That comparison is of like
 * with like on any CPU: each micro-batch's gradient is computed alone with the same shapes (so the
 * same BLAS kernels), the ring adds two gradients as the accumulated total does (IEEE addition
 * commutes), and the ranks' mean (x 1/2 after the sum) equals the sum of the halved micro-batch
 * gradients exactly, halving being exact. A process with the whole global batch would sum over it
 * in another order, by kernels BLAS picks per CPU: no tolerance holds for that on every machine.
 */
class DataParallelTrainingTest {
  private static final String MODEL = "mlp:64-32-3";
  private static final String BATCH_NORM_MODEL = "cnn:cb4-p-f3";
  private static final int GLOBAL_BATCH = 32;
  private static final int EPOCHS = 3;

  /** The offloaded runs' host AdamW moments. */
  private OffloadSpec.OptimizerState optimizerState = OffloadSpec.OptimizerState.FP32;

  /** The offloaded runs' delayed update starts at this step; -1: none. */
  private int delayedFrom = -1;

  private float emaDecay = 0; // > 0: the learners average the weights (--ema)

  /**
   * The offloaded runs' streamed layer computes from bf16 weights (its gradients cross in bf16).
   */
  private boolean bf16Weights;

  private static final AdamWSpec ADAMW = new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.01f);

  @TempDir Path tmp;
  private ShardSet train;
  private ShardSet val;
  private final ExecutorService ranks = Executors.newCachedThreadPool();

  @BeforeEach
  void data() throws Exception {
    train = PatternShards.write(tmp.resolve("train.arrow"), 256, 1);
    val = PatternShards.write(tmp.resolve("val.arrow"), 91, 2);
  }

  @AfterEach
  void close() throws Exception {
    ranks.shutdownNow();
    assertTrue(ranks.awaitTermination(30, TimeUnit.SECONDS));
    train.close();
    val.close();
  }

  /**
   * What a run ends with: each epoch's train loss (over all ranks), the weights, the val result.
   */
  /** Each tensor with its values in an array of its own. */
  private static List<Safetensors.Tensor> copies(List<Safetensors.Tensor> tensors) {
    return tensors.stream()
        .map(t -> new Safetensors.Tensor(t.name(), t.shape(), t.values().clone()))
        .toList();
  }

  private record Outcome(
      List<Double> losses,
      List<Safetensors.Tensor> weights,
      List<float[]> state,
      EvalResult eval,
      long pinnedBytes,
      long deviceBytes,
      EvalResult averagedEval, // with emaDecay: the weights' average evaluated; else null
      List<Safetensors.Tensor> averaged) {}

  @ParameterizedTest
  @CsvSource({"false,0,false", "false,1,false", "true,0,false", "true,1,false", "false,1,true"})
  void twoRanksMatchOneProcessAccumulatingTheirBatches(boolean offloaded, float clip, boolean cuda)
      throws Exception {
    // Accumulation needs the model resident; an offloaded rank computes what a resident one does.
    Outcome single = run(MODEL, false, clip, DataParallel.single(), cuda, 2);
    List<Outcome> two = twoRanks(MODEL, offloaded, clip, 0, cuda);
    Outcome rank0 = two.get(0);
    Outcome rank1 = two.get(1);

    // The same averaged gradient on both ranks: the same weights, to the bit.
    assertSameTensors(rank0.weights(), rank1.weights(), "rank 1 against rank 0");
    // Figures summed over the ranks: the whole split, each sample once.
    assertEquals(rank0.losses(), rank1.losses());
    assertEquals(91, rank0.eval().samples());
    assertEquals(rank0.eval().accuracy(), rank1.eval().accuracy());
    // One process accumulating the ranks' batches: the same weights to the bit, and each epoch's
    // loss the same float per-sample losses summed in doubles in another order (within n·2^-52).
    assertSameTensors(single.weights(), rank0.weights(), "the ranks against one process");
    for (int e = 0; e < EPOCHS; e++) {
      assertEquals(
          single.losses().get(e),
          rank0.losses().get(e),
          256 * 0x1p-52 * single.losses().get(e),
          "epoch " + e);
    }
    assertTrue(single.eval().accuracy() > 0.9, "it learns: " + single.eval().accuracy());
  }

  /**
   * Batch norm's running statistics follow rank 0, as DDP's broadcast of buffers makes them: each
   * rank's own statistics differ (each saw its own batches), every evaluation uses rank 0's, and
   * the ranks end with the same weights and buffers (the final digest passes). The weights are
   * those of one process accumulating the ranks' batches (batch norm normalizes each micro-batch by
   * its own statistics, as each rank does).
   */
  @Test
  void batchNormStatisticsFollowRankZero() throws Exception {
    Outcome single = run(BATCH_NORM_MODEL, false, 0, DataParallel.single(), false, 2);
    List<Outcome> two = twoRanks(BATCH_NORM_MODEL, false, 0, 0, false);
    assertSameTensors(two.get(0).weights(), two.get(1).weights(), "rank 1 against rank 0");
    assertEquals(two.get(0).eval().loss(), two.get(1).eval().loss(), "rank 0's statistics on both");
    assertEquals(two.get(0).eval().accuracy(), two.get(1).eval().accuracy());
    List<Safetensors.Tensor> trained =
        single.weights().stream().filter(t -> !t.name().contains("running_")).toList();
    List<Safetensors.Tensor> rankTrained =
        two.get(0).weights().stream().filter(t -> !t.name().contains("running_")).toList();
    assertEquals(single.weights().size() - 2, trained.size(), "running mean and var are buffers");
    assertSameTensors(trained, rankTrained, "the ranks against one process");
    assertTrue(two.get(0).eval().accuracy() > 0.9, "it learns: " + two.get(0).eval().accuracy());
  }

  /**
   * Two devices of a node in one JVM share one host copy: device 0 keeps the masters, gradients and
   * AdamW state, device 1 only two landing slots of the largest layer; and the node trains as two
   * ranks with host copies of their own and as one process accumulating their batches, bit for bit
   * (device 0 adds g0 + g1 as the ring and the accumulated total do, the mean x 1/2 after), on the
   * CPU backend's two device instances and on two devices of the emulated driver, clipped
   * (speculatively) or not. Resident, the devices exchange their gradients through the host the
   * same way, device 0 handing the mean back.
   */
  @ParameterizedTest
  @CsvSource({
    "0,false,true",
    "1,false,true",
    "0,true,true",
    "1,true,true",
    "1,false,false",
    "0,true,false"
  })
  void twoDevicesOfANodeShareOneHostCopyAndTrainAsTwoRanks(
      float clip, boolean cuda, boolean offloaded) throws Exception {
    List<Outcome> own = twoRanks(MODEL, offloaded, clip, 0, cuda);
    List<Outcome> node = ranks(2, 2, MODEL, offloaded, clip, 0, cuda, 1);
    Outcome single = run(MODEL, false, clip, DataParallel.single(), cuda, 2);
    for (int r = 0; r < 2; r++) {
      assertSameTensors(own.get(r).weights(), node.get(r).weights(), "device " + r);
      assertEquals(own.get(r).losses(), node.get(r).losses(), "device " + r + " losses");
      assertEquals(own.get(r).eval().loss(), node.get(r).eval().loss(), "device " + r + " eval");
      for (int s = 0; s < 2; s++) { // device 1's snapshot reads device 0's moments
        assertArrayEquals(own.get(r).state().get(s), node.get(r).state().get(s), "state " + s);
      }
    }
    assertSameTensors(single.weights(), node.get(1).weights(), "the node against one process");
    if (!offloaded) {
      return;
    }
    long largestLayer = 64 * 32 + 32; // fc1 of mlp:64-32-3
    assertEquals(own.get(0).pinnedBytes(), node.get(0).pinnedBytes(), "device 0: the one copy");
    long parameters = own.get(0).state().get(0).length;
    long copy = 4 * 4 * parameters + (clip > 0 ? 3 * 4 * parameters : 0); // speculation keeps 3
    assertEquals(
        own.get(1).pinnedBytes() - copy + 4 * 2 * largestLayer,
        node.get(1).pinnedBytes(),
        "device 1: its input staging and two landing slots, no copy");
  }

  /**
   * With bf16 weights the streamed layer's gradients cross the bus in bf16 on every device, device
   * 1's widened in its own bf16 slots before it hands them over: the node trains as two ranks with
   * copies of their own, bit for bit, device 1 pinning two fp32 and two bf16 slots.
   */
  @Test
  void twoDevicesWithBf16WeightsRoundTheirGradientsAlike() throws Exception {
    bf16Weights = true;
    List<Outcome> own = twoRanks(MODEL, true, 0, 0, false);
    List<Outcome> node = ranks(2, 2, MODEL, true, 0, 0, false, 1);
    bf16Weights = false;
    for (int r = 0; r < 2; r++) {
      assertSameTensors(own.get(r).weights(), node.get(r).weights(), "device " + r);
    }
    assertTrue(
        !java.util.Arrays.equals(
            own.get(0).weights().get(0).values(),
            twoRanks(MODEL, true, 0, 0, false).get(0).weights().get(0).values()),
        "bf16 weights change the weights");
    long parameters = own.get(0).state().get(0).length;
    long fc1 = 64 * 32 + 32;
    long copy = 4 * 4 * parameters + 2 * fc1 + 2 * fc1; // and fc1's bf16 copy and gradient
    assertEquals(
        own.get(1).pinnedBytes() - copy + 2 * (4 + 2) * fc1,
        node.get(1).pinnedBytes(),
        "device 1: two fp32 and two bf16 landing slots, no copy");
  }

  /**
   * Three devices of the emulated driver on one node: one host copy (the two other devices keep
   * their landing slots only), and the three end with the same weights, which learn. (Against three
   * ranks with copies of their own the sum's order differs: the ring adds chunk c from rank c + 1
   * on, the node from device 0 on, as one process accumulating adds its batches.)
   */
  @Test
  void threeEmulatedDevicesShareOneHostCopy() throws Exception {
    List<Outcome> node = ranks(3, 3, MODEL, true, 1, 0, true, 1);
    for (int r = 1; r < 3; r++) {
      assertSameTensors(node.get(0).weights(), node.get(r).weights(), "device " + r);
      assertEquals(node.get(0).eval().loss(), node.get(r).eval().loss(), "device " + r);
    }
    assertTrue(node.get(0).eval().accuracy() > 0.9, "it learns: " + node.get(0).eval());
    long parameters = node.get(0).state().get(0).length;
    long copy = 4 * 4 * parameters + 3 * 4 * parameters; // clipped: speculation keeps 3 more
    long slots = 4 * 2 * (64 * 32 + 32);
    for (int r = 1; r < 3; r++) {
      assertEquals(node.get(0).pinnedBytes() - copy + slots, node.get(r).pinnedBytes(), "no copy");
    }
  }

  /**
   * Two nodes of two devices: each node's sum crosses the gradient ring once, and all four devices
   * end with the weights of two ranks that each accumulate two batches, bit for bit: node n's
   * devices take the slices rank n accumulates, and add them as it does (its halved micro-batch
   * gradients summed, then the ranks' sum halved: the same bits as the nodes' sums quartered,
   * halving being exact).
   */
  @ParameterizedTest
  @CsvSource({"0,true", "1,true", "1,false"})
  void twoNodesOfTwoDevicesTrainAsTwoRanksAccumulatingTwoBatches(float clip, boolean offloaded)
      throws Exception {
    List<Outcome> nodes = ranks(4, 2, MODEL, offloaded, clip, 0, false, 1);
    List<Outcome> accumulating = ranks(2, 1, MODEL, false, clip, 0, false, 2);
    for (int r = 0; r < 4; r++) {
      assertSameTensors(accumulating.get(0).weights(), nodes.get(r).weights(), "device " + r);
      assertEquals(accumulating.get(0).eval().loss(), nodes.get(r).eval().loss(), "eval " + r);
    }
    assertTrue(nodes.get(0).eval().accuracy() > 0.9, "it learns: " + nodes.get(0).eval());
    if (!offloaded) {
      return;
    }
    // ranks 0 and 1 are the nodes' devices 0, each holding its node's copy; ranks 2 and 3 none
    assertEquals(nodes.get(0).pinnedBytes(), nodes.get(1).pinnedBytes(), "one copy a node");
    long parameters = nodes.get(0).state().get(0).length;
    long copy = 4 * 4 * parameters + (clip > 0 ? 3 * 4 * parameters : 0); // speculation keeps 3
    long slots = 4 * 2 * (64 * 32 + 32); // two of fc1's
    for (int r = 2; r < 4; r++) {
      assertEquals(
          nodes.get(0).pinnedBytes() - copy + slots, nodes.get(r).pinnedBytes(), "no copy");
    }
  }

  /**
   * ZeRO on two nodes of two devices partitions over the nodes, whose one host copy each is device
   * 0's: each node's device 0 keeps the AdamW moments (ZeRO-2: and the reduced gradients) of its
   * node's half, the node's other device hands its gradients over as without ZeRO. Unclipped, all
   * four devices end with the unpartitioned nodes' weights, moments and losses bit for bit;
   * clipped, ZeRO-2 with ZeRO-1's (the norm summed share by share over the nodes) and within the
   * norm's rounding of the unpartitioned nodes'. The other devices hold the same two landing slots
   * in every stage.
   */
  @ParameterizedTest
  @CsvSource({"0", "1"})
  void zeroOnNodesOfTwoDevicesPartitionsOverTheNodes(float clip) throws Exception {
    List<Outcome> plain = ranks(4, 2, MODEL, true, clip, 0, false, 1);
    List<Outcome> one = ranks(4, 2, MODEL, true, clip, 1, false, 1);
    List<Outcome> two = ranks(4, 2, MODEL, true, clip, 2, false, 1);
    for (int r = 0; r < 4; r++) {
      assertSameTensors(one.get(r).weights(), two.get(r).weights(), "ZeRO-2, device " + r);
      assertEquals(one.get(r).losses(), two.get(r).losses(), "ZeRO-2 losses, device " + r);
      assertEquals(one.get(r).eval().loss(), two.get(r).eval().loss(), "ZeRO-2 eval, " + r);
      assertSameTensors(one.get(0).weights(), one.get(r).weights(), "device " + r + " vs 0");
      if (clip == 0) {
        assertSameTensors(plain.get(r).weights(), one.get(r).weights(), "ZeRO-1, device " + r);
        assertEquals(plain.get(r).losses(), one.get(r).losses(), "ZeRO-1 losses, device " + r);
      } else {
        for (int t = 0; t < plain.get(r).weights().size(); t++) {
          float[] expected = plain.get(r).weights().get(t).values();
          float[] actual = one.get(r).weights().get(t).values();
          for (int i = 0; i < expected.length; i++) {
            assertEquals(expected[i], actual[i], 1e-5, "device " + r + " [" + i + "]");
          }
        }
      }
    }
    for (int s = 0; s < 2; s++) { // the moments device 0 of node 0 gathers for a checkpoint
      assertArrayEquals(one.get(0).state().get(s), two.get(0).state().get(s), "state " + s);
      if (clip == 0) {
        assertArrayEquals(plain.get(0).state().get(s), one.get(0).state().get(s), "moments");
      }
    }
    assertTrue(one.get(0).eval().accuracy() > 0.9, "it learns: " + one.get(0).eval());
    long parameters = plain.get(0).state().get(0).length;
    long kept = clip > 0 ? 3 * 4 * parameters : 0; // the unpartitioned nodes speculate
    long largestLayer = 64 * 32 + 32; // fc1 of mlp:64-32-3
    for (int r = 0; r < 2; r++) { // the nodes' devices 0
      long share = r == 0 ? parameters / 2 : parameters - parameters / 2; // node 0's: the floor
      assertEquals(
          plain.get(r).pinnedBytes() - 2 * 4 * (parameters - share) - kept,
          one.get(r).pinnedBytes(),
          "device 0 of node " + r + " keeps the moments of its node's share");
      assertEquals(
          one.get(r).pinnedBytes() - 4 * (parameters - share) + 4 * 2 * largestLayer,
          two.get(r).pinnedBytes(),
          "and, ZeRO-2, its gradients beside two landing slots");
    }
    for (int r = 2; r < 4; r++) {
      assertEquals(plain.get(r).pinnedBytes(), one.get(r).pinnedBytes(), "device " + r);
      assertEquals(plain.get(r).pinnedBytes(), two.get(r).pinnedBytes(), "device " + r);
    }
    if (clip == 0) { // the plan's pinned bytes drop as node 1's (the largest share's) do
      assertEquals(
          planHostPinned(new PlacementPlan.Zero(2, false))
              - planHostPinned(PlacementPlan.Zero.NONE),
          one.get(1).pinnedBytes() - plain.get(1).pinnedBytes(),
          "ZeRO-1 as planned");
      assertEquals(
          planHostPinned(new PlacementPlan.Zero(2, true)) - planHostPinned(PlacementPlan.Zero.NONE),
          two.get(1).pinnedBytes() - plain.get(1).pinnedBytes(),
          "ZeRO-2 as planned");
    }
  }

  /** The offloaded plan's pinned host bytes for {@link #MODEL} under {@code zero}. */
  private static long planHostPinned(PlacementPlan.Zero zero) {
    try (Backend b = new CpuBackend(1)) {
      List<LayerCost> costs =
          LayerCost.measure(() -> ModelSpec.parse(MODEL, PatternShards.SHAPE), b);
      return PlacementPlan.plan(
              costs,
              GLOBAL_BATCH / 4,
              1L << 40,
              1,
              false,
              new DeviceProfile("test", 1L << 40, 1e10, 1e12),
              true,
              8,
              zero)
          .hostPinnedBytes();
    }
  }

  private static void assertSameTensors(
      List<Safetensors.Tensor> expected, List<Safetensors.Tensor> actual, String what) {
    assertEquals(expected.size(), actual.size(), what);
    for (int t = 0; t < expected.size(); t++) {
      assertEquals(expected.get(t).name(), actual.get(t).name(), what);
      assertArrayEquals(
          expected.get(t).values(), actual.get(t).values(), what + ": " + expected.get(t).name());
    }
  }

  /**
   * ZeRO-1: each rank keeps AdamW's moments for half of the parameters (pinned host bytes drop by
   * half the state), and the weights and the state a checkpoint gathers are those of the
   * unpartitioned run, bit for bit (two ranks sum every chunk as g0 + g1 either way).
   */
  @ParameterizedTest
  @CsvSource({"0", "1"})
  void zero1PartitionsTheOptimizerStateAndChangesNoWeight(float clip) throws Exception {
    List<Outcome> plain = twoRanks(clip, 0);
    List<Outcome> zero = twoRanks(clip, 1);
    for (int r = 0; r < 2; r++) {
      for (int t = 0; t < plain.get(0).weights().size(); t++) {
        float[] expected = plain.get(r).weights().get(t).values();
        float[] actual = zero.get(r).weights().get(t).values();
        if (clip == 0) {
          assertArrayEquals(expected, actual, "rank " + r);
        } else { // the clipping norm is summed share by share
          for (int i = 0; i < expected.length; i++) {
            assertEquals(expected[i], actual[i], 1e-5, "rank " + r + " [" + i + "]");
          }
        }
      }
    }
    for (int t = 0; t < zero.get(0).weights().size(); t++) {
      assertArrayEquals(
          zero.get(0).weights().get(t).values(), zero.get(1).weights().get(t).values());
    }
    if (clip == 0) {
      for (int s = 0; s < 2; s++) { // AdamW's m and v, gathered whole for the checkpoint
        assertArrayEquals(plain.get(0).state().get(s), zero.get(0).state().get(s));
      }
    }
    long parameters = plain.get(0).state().get(0).length;
    long halfOfTheState = 2 * 4 * (parameters - parameters / 2); // rank 0's share is the floor
    // clipped, the unpartitioned run speculates: it keeps masters, m and v once more
    long kept = clip > 0 ? 3 * 4 * parameters : 0;
    assertEquals(plain.get(0).pinnedBytes() - halfOfTheState - kept, zero.get(0).pinnedBytes());
  }

  /**
   * ZeRO-2: each layer's gradient reduced to its owners as it lands, the host keeping this rank's
   * share of the gradients only, and every weight, moment, loss and evaluation those of ZeRO-1 bit
   * for bit, on two ranks and three (whose chunks cut layers unevenly), clipped or not; the
   * gradient slab shrinks to the share, beside two landing slots of the largest layer.
   */
  @ParameterizedTest
  @CsvSource({"2, 0", "2, 1", "3, 0", "3, 1"})
  void zero2ReducesEachLayerToItsOwnersWithZero1sBits(int world, float clip) throws Exception {
    List<Outcome> one = ranks(world, MODEL, true, clip, 1, false);
    List<Outcome> two = ranks(world, MODEL, true, clip, 2, false);
    for (int r = 0; r < world; r++) {
      assertEquals(one.get(r).losses(), two.get(r).losses(), "rank " + r + " losses");
      assertSameTensors(one.get(r).weights(), two.get(r).weights(), "rank " + r);
      for (int s = 0; s < 2; s++) {
        assertArrayEquals(one.get(r).state().get(s), two.get(r).state().get(s), "state " + s);
      }
      assertEquals(one.get(r).eval().loss(), two.get(r).eval().loss(), "rank " + r + " eval");
    }
    long parameters = one.get(0).state().get(0).length;
    long share = parameters / world; // rank 0's share is the floor
    long largestLayer = 64 * 32 + 32; // fc1 of mlp:64-32-3
    assertEquals(
        one.get(0).pinnedBytes() - 4 * (parameters - share) + 4 * 2 * largestLayer,
        two.get(0).pinnedBytes(),
        "rank 0 keeps its share of the gradients, and two landing slots");
  }

  /**
   * ZeRO on resident ranks: the device keeps AdamW's moments for the rank's share only, the
   * gradients are reduced to their owners (ZeRO-2 bucket by bucket during backward, ZeRO-1 after
   * it), the share updated on the device and the shares gathered. Unclipped, both end with the
   * unpartitioned ranks' weights, moments, losses and evaluation bit for bit; clipped, ZeRO-2 with
   * ZeRO-1's (the norm summed share by share) and within the norm's rounding of the unpartitioned
   * ranks'; on two ranks and three, the CPU backend and the CUDA engine over the emulator.
   */
  @ParameterizedTest
  @CsvSource({
    "2, 0, false",
    "2, 1, false",
    "3, 0, false",
    "3, 1, false",
    "2, 0, true",
    "2, 1, true"
  })
  void residentZeroUpdatesEachSharesOnTheDevice(int world, float clip, boolean cuda)
      throws Exception {
    List<Outcome> plain = ranks(world, MODEL, false, clip, 0, cuda);
    List<Outcome> one = ranks(world, MODEL, false, clip, 1, cuda);
    List<Outcome> two = ranks(world, MODEL, false, clip, 2, cuda);
    for (int r = 0; r < world; r++) {
      assertSameTensors(one.get(r).weights(), two.get(r).weights(), "ZeRO-2, rank " + r);
      assertEquals(one.get(r).losses(), two.get(r).losses(), "ZeRO-2 losses, rank " + r);
      assertEquals(one.get(r).eval().loss(), two.get(r).eval().loss(), "ZeRO-2 eval, rank " + r);
      for (int s = 0; s < 2; s++) {
        assertArrayEquals(one.get(r).state().get(s), two.get(r).state().get(s), "state " + s);
      }
      if (clip == 0) {
        assertSameTensors(plain.get(r).weights(), one.get(r).weights(), "ZeRO-1, rank " + r);
        assertEquals(plain.get(r).losses(), one.get(r).losses(), "ZeRO-1 losses, rank " + r);
        for (int s = 0; s < 2; s++) {
          assertArrayEquals(plain.get(r).state().get(s), one.get(r).state().get(s), "moments");
        }
      } else { // the norm's sum differs in its last bits: each weight within AdamW's step of it
        for (int t = 0; t < plain.get(r).weights().size(); t++) {
          float[] expected = plain.get(r).weights().get(t).values();
          float[] actual = one.get(r).weights().get(t).values();
          for (int i = 0; i < expected.length; i++) {
            assertEquals(expected[i], actual[i], 1e-5, "rank " + r + " [" + i + "]");
          }
        }
      }
      assertSameTensors(one.get(0).weights(), one.get(r).weights(), "rank " + r + " vs rank 0");
    }
    long parameters = plain.get(0).state().get(0).length;
    long share = parameters / world; // rank 0's share is the floor
    assertEquals(
        plain.get(0).deviceBytes() - 2 * 4 * (parameters - share),
        one.get(0).deviceBytes(),
        "rank 0's device keeps the moments of its share");
    assertEquals(one.get(0).deviceBytes(), two.get(0).deviceBytes());
  }

  /**
   * A resident ZeRO rank and an offloaded one update the same share with the same arithmetic (the
   * device's AdamW is the host's; clipping the share on the host either way): clipped ZeRO-2 gives
   * the same weights, moments and losses, bit for bit.
   */
  @Test
  void residentZeroComputesWhatOffloadedZeroComputes() throws Exception {
    List<Outcome> resident = ranks(2, MODEL, false, 1, 2, false);
    List<Outcome> offloaded = ranks(2, MODEL, true, 1, 2, false);
    for (int r = 0; r < 2; r++) {
      assertSameTensors(resident.get(r).weights(), offloaded.get(r).weights(), "rank " + r);
      assertEquals(resident.get(r).losses(), offloaded.get(r).losses(), "losses, rank " + r);
      for (int s = 0; s < 2; s++) {
        assertArrayEquals(resident.get(r).state().get(s), offloaded.get(r).state().get(s));
      }
    }
  }

  /**
   * The delayed update with ZeRO: the share's reduction, clipping, update and gather run on the
   * host optimizer thread beside the next forward; unclipped, ZeRO-1 and ZeRO-2 end with the
   * weights of the delayed run without ZeRO bit for bit, and clipped ZeRO-2 with ZeRO-1's (the norm
   * summed share by share either way), none of them the undelayed run.
   */
  @ParameterizedTest
  @CsvSource({"0", "1"})
  void theDelayedUpdateRunsWithZero(float clip) throws Exception {
    List<Outcome> undelayed = twoRanks(clip, 1);
    delayedFrom = 2;
    List<Outcome> one = twoRanks(clip, 1);
    List<Outcome> two = twoRanks(clip, 2);
    if (clip == 0) {
      List<Outcome> plain = twoRanks(clip, 0);
      for (int r = 0; r < 2; r++) {
        assertSameTensors(plain.get(r).weights(), one.get(r).weights(), "ZeRO-1, rank " + r);
        assertEquals(plain.get(r).losses(), one.get(r).losses(), "ZeRO-1 losses, rank " + r);
      }
    }
    for (int r = 0; r < 2; r++) {
      assertSameTensors(one.get(r).weights(), two.get(r).weights(), "ZeRO-2, rank " + r);
      assertEquals(one.get(r).losses(), two.get(r).losses(), "ZeRO-2 losses, rank " + r);
    }
    assertTrue(
        !java.util.Arrays.equals(
            undelayed.get(0).weights().get(0).values(), one.get(0).weights().get(0).values()),
        "the delayed run is not the undelayed one");
  }

  /**
   * The delayed update on a node of two devices sharing one host copy: device 0 refreshes a layer's
   * published copy only once device 1 has handed that layer's gradient over (it is done computing
   * with it), and updates the whole slab after backward, beside the next forward. Clipped or not,
   * the node's devices end with the weights, losses and evaluation of two ranks with copies of
   * their own, delayed alike, bit for bit; which is not the undelayed node's.
   */
  @ParameterizedTest
  @CsvSource({"0", "1"})
  void theDelayedUpdateRunsOnANodeSharingOneHostCopy(float clip) throws Exception {
    List<Outcome> undelayed = ranks(2, 2, MODEL, true, clip, 0, false, 1);
    delayedFrom = 2;
    List<Outcome> own = ranks(2, 1, MODEL, true, clip, 0, false, 1);
    List<Outcome> node = ranks(2, 2, MODEL, true, clip, 0, false, 1);
    for (int r = 0; r < 2; r++) {
      assertSameTensors(own.get(r).weights(), node.get(r).weights(), "device " + r);
      assertEquals(own.get(r).losses(), node.get(r).losses(), "device " + r + " losses");
      assertEquals(own.get(r).eval().loss(), node.get(r).eval().loss(), "device " + r + " eval");
    }
    assertTrue(
        !java.util.Arrays.equals(
            undelayed.get(0).weights().get(0).values(), node.get(0).weights().get(0).values()),
        "the delayed node is not the undelayed one");
  }

  /**
   * {@code --ema} on a node of two devices sharing one host copy: device 0 keeps the weights'
   * average beside the masters and swaps it in for every device's evaluation (each device its own
   * buffers' average). A node evaluates the average, and device 0 checkpoints it, as two ranks with
   * copies of their own do, bit for bit, updating as gradients land or delayed; with ZeRO-2 over
   * two such nodes, as the same nodes without ZeRO.
   */
  @ParameterizedTest
  @CsvSource({"2, 0, -1", "2, 0, 2", "4, 2, -1"})
  void theWeightsAverageIsDevice0sAndEveryDeviceEvaluatesIt(int world, int zero, int delay)
      throws Exception {
    emaDecay = 0.9f;
    delayedFrom = delay;
    List<Outcome> own =
        world == 2
            ? ranks(2, 1, MODEL, true, 0, 0, false, 1)
            : ranks(world, 2, MODEL, true, 0, 0, false, 1);
    List<Outcome> node = ranks(world, 2, MODEL, true, 0, zero, false, 1);
    for (int r = 0; r < world; r++) {
      assertSameTensors(own.get(r).weights(), node.get(r).weights(), "device " + r);
      assertEquals(
          own.get(r).averagedEval().loss(), node.get(r).averagedEval().loss(), "average, " + r);
      assertEquals(
          own.get(r).averagedEval().accuracy(), node.get(r).averagedEval().accuracy(), "" + r);
    }
    assertSameTensors(own.get(0).averaged(), node.get(0).averaged(), "the checkpoint's average");
    assertTrue(
        own.get(0).averagedEval().loss() != own.get(0).eval().loss(),
        "the average is not the weights: " + own.get(0).averagedEval());
  }

  /**
   * The delayed update with ZeRO over two nodes of two devices: unclipped, ZeRO-2 ends with the
   * weights of the same delayed nodes without ZeRO bit for bit; clipped, with ZeRO-1's.
   */
  @ParameterizedTest
  @CsvSource({"0, 0", "1, 1"})
  void theDelayedUpdateRunsWithZeroOverNodes(float clip, int against) throws Exception {
    delayedFrom = 2;
    List<Outcome> base = ranks(4, 2, MODEL, true, clip, against, false, 1);
    List<Outcome> two = ranks(4, 2, MODEL, true, clip, 2, false, 1);
    for (int r = 0; r < 4; r++) {
      assertSameTensors(base.get(r).weights(), two.get(r).weights(), "device " + r);
      assertEquals(base.get(r).losses(), two.get(r).losses(), "device " + r + " losses");
    }
    assertTrue(two.get(0).eval().accuracy() > 0.9, "it learns: " + two.get(0).eval());
  }

  /**
   * bf16 moments draw their rounding bits by the element's index in the model, so a rank updating
   * its ZeRO share rounds each moment as one process updating everything would: ZeRO-1 and ZeRO-2
   * end with the unpartitioned run's weights and moments bit for bit.
   */
  @Test
  void bf16MomentsRoundAlikeWhicheverRankOwnsThem() throws Exception {
    optimizerState = OffloadSpec.OptimizerState.BF16;
    List<Outcome> plain = twoRanks(0, 0);
    for (int zero = 1; zero <= 2; zero++) {
      List<Outcome> shared = twoRanks(0, zero);
      for (int r = 0; r < 2; r++) {
        assertSameTensors(plain.get(r).weights(), shared.get(r).weights(), "ZeRO-" + zero);
        for (int s = 0; s < 2; s++) {
          assertArrayEquals(plain.get(r).state().get(s), shared.get(r).state().get(s));
        }
      }
    }
    optimizerState = OffloadSpec.OptimizerState.FP32;
    assertTrue(
        !java.util.Arrays.equals(
            plain.get(0).weights().get(0).values(),
            twoRanks(0, 0).get(0).weights().get(0).values()),
        "bf16 moments change the weights");
  }

  /** Ranks that agree pass; a rank whose digest differs fails every rank, named. */
  @Test
  void ranksWhoseWeightsDifferAreToldSo() throws Exception {
    List<DataParallel> three = ring(3, 0);
    try {
      List<Future<?>> agreeing = new ArrayList<>();
      for (DataParallel rank : three) {
        agreeing.add(ranks.submit(() -> rank.requireSame(new byte[] {1, 2, 3}, "final weights")));
      }
      for (Future<?> f : agreeing) {
        f.get(30, TimeUnit.SECONDS);
      }
      List<Future<?>> diverged = new ArrayList<>();
      for (DataParallel rank : three) {
        byte[] digest = {1, 2, (byte) (rank.rank() == 2 ? 4 : 3)};
        diverged.add(ranks.submit(() -> rank.requireSame(digest, "final weights")));
      }
      for (Future<?> f : diverged) {
        java.util.concurrent.ExecutionException e =
            org.junit.jupiter.api.Assertions.assertThrows(
                java.util.concurrent.ExecutionException.class, () -> f.get(30, TimeUnit.SECONDS));
        assertTrue(
            e.getCause().getMessage().contains("rank 2's final weights differ from rank 0's"),
            e.getCause().getMessage());
      }
    } finally {
      for (DataParallel rank : three) {
        rank.close();
      }
    }
  }

  private List<Outcome> twoRanks(float clip, int zero) throws Exception {
    return twoRanks(MODEL, true, clip, zero, false);
  }

  private List<Outcome> twoRanks(
      String model, boolean offloaded, float clip, int zero, boolean cuda) throws Exception {
    return ranks(2, model, offloaded, clip, zero, cuda);
  }

  /** {@code world} ranks training side by side, each a thread of this JVM. */
  private List<Outcome> ranks(
      int world, String model, boolean offloaded, float clip, int zero, boolean cuda)
      throws Exception {
    return ranks(world, 1, model, offloaded, clip, zero, cuda, 1);
  }

  /**
   * {@code world} ranks training side by side, each a thread of this JVM, in nodes of {@code
   * devicesPerNode} that share one host copy (offloaded); a step of each is {@code accumulate}
   * batches.
   */
  private List<Outcome> ranks(
      int world,
      int devicesPerNode,
      String model,
      boolean offloaded,
      float clip,
      int zero,
      boolean cuda,
      int accumulate)
      throws Exception {
    List<NodeExchange> exchanges = new ArrayList<>();
    List<DeviceGroup> nodes = new ArrayList<>();
    for (int node = 0; node < world / devicesPerNode; node++) {
      exchanges.add(
          devicesPerNode > 1 ? new NodeExchange(devicesPerNode, Duration.ofSeconds(60)) : null);
      nodes.add(
          devicesPerNode > 1 && offloaded
              ? new DeviceGroup(devicesPerNode, Duration.ofSeconds(60))
              : null);
    }
    List<DataParallel> joined = ring(world, zero, exchanges);
    List<Future<Outcome>> running = new ArrayList<>();
    for (DataParallel rank : joined) {
      DeviceGroup node = nodes.get(rank.node());
      running.add(ranks.submit(() -> run(model, offloaded, clip, rank, cuda, accumulate, node)));
    }
    List<Outcome> outcomes = new ArrayList<>();
    for (Future<Outcome> rank : running) {
      outcomes.add(rank.get(120, TimeUnit.SECONDS));
    }
    for (DataParallel rank : joined) {
      rank.close();
    }
    return outcomes;
  }

  /**
   * On the CPU backend, or with {@code cuda} on the CUDA backend over the driver emulator; a step
   * is {@code accumulate} batches of this rank's share of the global batch.
   */
  private Outcome run(
      String model, boolean offloaded, float clip, DataParallel dp, boolean cuda, int accumulate)
      throws Exception {
    return run(model, offloaded, clip, dp, cuda, accumulate, null);
  }

  /** As above, as its device of {@code node} (null: a host copy of its own). */
  private Outcome run(
      String model,
      boolean offloaded,
      float clip,
      DataParallel dp,
      boolean cuda,
      int accumulate,
      DeviceGroup node)
      throws Exception {
    int world = dp.worldSize();
    int batch = GLOBAL_BATCH / world / accumulate;
    LoaderSpec.Rank rank = new LoaderSpec.Rank(dp.rank(), world);
    try (Backend b = open(cuda, dp.deviceInNode(), dp.devicesPerNode());
        DataLoader trainLoader =
            new DataLoader(
                b,
                train,
                new LoaderSpec(
                    batch,
                    1,
                    2,
                    LoaderSpec.Sampling.shuffled(7, LoaderSpec.Remainder.DROP),
                    LoaderSpec.SampleAugmentation.NONE,
                    rank,
                    accumulate));
        DataLoader valLoader =
            new DataLoader(
                b,
                val,
                new LoaderSpec(
                    batch,
                    1,
                    2,
                    LoaderSpec.Sampling.IN_ORDER,
                    LoaderSpec.SampleAugmentation.NONE,
                    rank))) {
      Stream setup = b.createStream("setup");
      try (Learner learner = learner(model, offloaded, clip, batch, b, setup, dp, node);
          MetricsLog metrics = new MetricsLog(null);
          Trainer trainer =
              new Trainer(
                  b,
                  learner,
                  LrSchedule.constant(3e-3),
                  new LoopSpec(
                      EPOCHS,
                      0f,
                      clip,
                      LoopSpec.NanPolicy.STOP,
                      new float[] {0.5f},
                      new float[] {0.25f},
                      5,
                      accumulate,
                      BestEpoch.Rule.DEFAULT),
                  PatternShards.SHAPE,
                  metrics,
                  dp)) {
        if (emaDecay > 0) {
          learner.averageWeights(new EmaDecay(emaDecay, false), null, setup);
        }
        List<Double> losses = new ArrayList<>();
        for (int epoch = 0; epoch < EPOCHS; epoch++) {
          losses.add(trainer.trainEpoch(trainLoader, epoch).loss());
        }
        EvalResult eval = trainer.evaluate(valLoader);
        EvalResult averagedEval = learner.averaging() ? trainer.evaluateAverage(valLoader) : null;
        long pinned = b.allocatedHostBytes();
        long device = b.allocatedBytes();
        var snapshot = learner.snapshot(setup);
        return new Outcome( // copied out: an offloaded snapshot reads the host copy in place
            losses,
            copies(snapshot.weights()),
            snapshot.optimizerState().stream().map(v -> v.toArray().clone()).toList(),
            eval,
            pinned,
            device,
            averagedEval,
            copies(snapshot.averaged()));
      }
    }
  }

  /**
   * The CPU backend, or the CUDA backend on emulated device {@code device} of {@code devices} (the
   * emulator reads its faults file as a backend opens, so they open one at a time).
   */
  private static Backend open(boolean cuda, int device, int devices) {
    if (!cuda) {
      return new CpuBackend(1);
    }
    synchronized (DataParallelTrainingTest.class) {
      return EmulatorFaults.open(
          new BackendSpec(BackendSpec.Kind.CUDA, 1).onDevice(device), "devices=" + devices);
    }
  }

  private Learner learner(
      String spec,
      boolean offloaded,
      float clip,
      int batch,
      Backend b,
      Stream setup,
      DataParallel dp,
      DeviceGroup node) {
    if (!offloaded) {
      Model model =
          Model.build(spec, ModelSpec.parse(spec, PatternShards.SHAPE), b, setup, batch, 1);
      long[] share = dp.share(model.parameters().count());
      return new ResidentLearner(
          b,
          model,
          dp.partitionsOptimizerState()
              ? ADAMW.onDevice(b, model.parameters(), share[0], share[1])
              : new AdamW(b, model.parameters().count(), ADAMW),
          clip,
          dp);
    }
    // fc1 streamed, fc2 resident: each layer's gradient is averaged on the host as it lands.
    return OffloadedLearner.build(
        new ModelBlueprint(spec, () -> ModelSpec.parse(spec, PatternShards.SHAPE), batch, 1),
        new Streaming(
            Set.of("fc1"), 1, bf16Weights, false, delayedFrom >= 0, Math.max(0, delayedFrom)),
        (slab, threads) ->
            dev.ramtrain.trainer.offload.HostOptimizer.create(
                ADAMW, b, slab, threads, optimizerState, 5),
        1,
        clip,
        clip > 0, // clipped: speculative, as a run's default is where its kept state fits
        b,
        setup,
        dp,
        node);
  }

  /** The ranks of a ring on loopback, joined side by side as barrier tasks would. */
  private List<DataParallel> ring(int world, int zero) throws Exception {
    List<NodeExchange> nodes = new ArrayList<>();
    for (int r = 0; r < world; r++) {
      nodes.add(null);
    }
    return ring(world, zero, nodes);
  }

  /** As above, on {@code nodes.size()} nodes, rank r on node r mod nodes (null: one device). */
  private List<DataParallel> ring(int world, int zero, List<NodeExchange> nodes) throws Exception {
    List<ServerSocketChannel> listeners = new ArrayList<>();
    List<InetSocketAddress> addresses = new ArrayList<>();
    for (int r = 0; r < world; r++) {
      listeners.add(TcpRing.listen(InetAddress.getLoopbackAddress()));
      addresses.add((InetSocketAddress) listeners.get(r).getLocalAddress());
    }
    byte[] secret = "a secret of sixteen bytes or more".getBytes();
    List<Future<DataParallel>> joining = new ArrayList<>();
    for (int r = 0; r < world; r++) {
      int rank = r;
      joining.add(
          ranks.submit(
              () ->
                  DataParallel.join(
                      rank,
                      addresses,
                      listeners.get(rank),
                      secret,
                      Duration.ofSeconds(60),
                      zero,
                      nodes.get(rank % nodes.size()))));
    }
    List<DataParallel> joined = new ArrayList<>();
    for (Future<DataParallel> rank : joining) {
      joined.add(rank.get(60, TimeUnit.SECONDS));
    }
    for (ServerSocketChannel listener : listeners) {
      listener.close();
    }
    return joined;
  }
}
