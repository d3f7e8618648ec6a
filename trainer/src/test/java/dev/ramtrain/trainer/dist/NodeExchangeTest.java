package dev.ramtrain.trainer.dist;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** A node's devices exchanging gradients through host memory. */
class NodeExchangeTest {
  private final ExecutorService devices = Executors.newCachedThreadPool();

  @AfterEach
  void stop() {
    devices.shutdownNow();
  }

  private static ByteBuffer floats(float... values) {
    ByteBuffer b = ByteBuffer.allocateDirect(4 * values.length).order(ByteOrder.nativeOrder());
    b.asFloatBuffer().put(values);
    return b;
  }

  private static float[] read(ByteBuffer b) {
    float[] out = new float[b.remaining() / 4];
    b.order(ByteOrder.nativeOrder()).asFloatBuffer().get(out);
    return out;
  }

  /**
   * Device 0 adds the others' gradients in device order, ((g0 + g1) + g2), whose bits differ from
   * other orders for these values; the mean goes back to the device that wants it, not to the one
   * that does not.
   */
  @Test
  void device0AddsTheOthersInDeviceOrderAndHandsTheMeanBack() throws Exception {
    NodeExchange node = new NodeExchange(3, Duration.ofMinutes(5));
    float a = 1f;
    float b = 0x1p-24f;
    float c = 0x1p-24f;
    assertTrue((a + b) + c != a + (b + c), "values whose sum depends on the order");
    ByteBuffer g1 = floats(b, 2f);
    ByteBuffer g2 = floats(c, 3f);
    Future<?> one = devices.submit(() -> node.handOver(1, g1, true));
    Future<?> two = devices.submit(() -> node.handOver(2, g2, false));
    ByteBuffer g0 = floats(a, 1f);
    List<NodeExchange.Handed> handed = node.addOthers(g0);
    assertArrayEquals(new float[] {(a + b) + c, 6f}, read(g0.duplicate()));
    ByteBuffer mean = floats(((a + b) + c) / 3, 2f);
    node.handBack(handed, mean);
    one.get();
    two.get();
    assertArrayEquals(read(mean.duplicate()), read(g1.duplicate()), "device 1 wanted the mean");
    assertArrayEquals(new float[] {c, 3f}, read(g2.duplicate()), "device 2 did not");
  }

  /**
   * A device that stops (failed, or closed) fails its node's waits for it at once, as a
   * NodeStoppedException, not at the timeout (which would fail them as a CollectiveException).
   */
  @Test
  void aDeviceThatStopsFailsTheOthersWaitsAtOnce() throws Exception {
    NodeExchange node = new NodeExchange(2, Duration.ofMinutes(5));
    Future<?> device0 = devices.submit(() -> node.addOthers(floats(1f)));
    node.abort(new IllegalStateException("device 1 failed: its own error"));
    ExecutionException e = assertThrows(ExecutionException.class, device0::get);
    assertTrue(e.getCause() instanceof NodeStoppedException, String.valueOf(e.getCause()));
    assertTrue(e.getCause().getMessage().contains("its own error"), e.getCause().getMessage());
    assertTrue(NodeStoppedException.within(new IllegalStateException("wrapped", e.getCause())));

    NodeExchange other = new NodeExchange(2, Duration.ofMinutes(5));
    Future<?> device1 = devices.submit(() -> other.handOver(1, floats(1f), true));
    other.abort(new IllegalStateException("device 0 closed"));
    ExecutionException f = assertThrows(ExecutionException.class, device1::get);
    assertTrue(f.getCause() instanceof NodeStoppedException, String.valueOf(f.getCause()));
  }

  /** Spread over the cores in chunks, the sum has the bits of one thread adding in device order. */
  @Test
  void theSumInChunksHasTheBitsOfOneThreadAddingInDeviceOrder() {
    int n = 3 * (1 << 16) + 7; // chunks, and a short last one
    java.util.Random random = new java.util.Random(43);
    float[][] g = new float[3][n];
    for (float[] device : g) {
      for (int i = 0; i < n; i++) {
        device[i] = (float) random.nextGaussian() * (1 << random.nextInt(20));
      }
    }
    float[] expected = new float[n];
    for (int i = 0; i < n; i++) {
      expected[i] = (g[0][i] + g[1][i]) + g[2][i];
    }
    ByteBuffer total = floats(g[0]);
    NodeExchange.addInOrder(
        total.duplicate().order(ByteOrder.nativeOrder()).asFloatBuffer(),
        List.of(
            floats(g[1]).order(ByteOrder.nativeOrder()).asFloatBuffer(),
            floats(g[2]).order(ByteOrder.nativeOrder()).asFloatBuffer()));
    assertArrayEquals(expected, read(total));
  }

  /** Devices that do not run the same model fail the exchange, naming the device. */
  @Test
  void aGradientOfAnotherLengthIsRefused() throws Exception {
    NodeExchange node = new NodeExchange(2, Duration.ofMinutes(5));
    Future<?> device1 = devices.submit(() -> node.handOver(1, floats(1f, 2f), true));
    IllegalStateException e =
        assertThrows(IllegalStateException.class, () -> node.addOthers(floats(1f)));
    assertTrue(e.getMessage().startsWith("device 1 handed 2 gradients"), e.getMessage());
    ExecutionException f = assertThrows(ExecutionException.class, device1::get);
    assertEquals(java.io.UncheckedIOException.class, f.getCause().getClass());
  }
}
