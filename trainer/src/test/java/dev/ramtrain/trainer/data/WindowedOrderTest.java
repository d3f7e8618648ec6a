package dev.ramtrain.trainer.data;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * The windows an epoch's order is drawn in, at the edges of ramtrain.train.shard-window: a window
 * of Integer.MAX_VALUE shards (a user's "all of them") is one window holding every sample, where
 * its count overflowed to none ("/ by zero" when the loader walked the order).
 */
class WindowedOrderTest {
  @Test
  void aWindowOfEveryShardIsOneWindowOfEverySample() {
    long[] rows = {3, 4, 5};
    for (int window : new int[] {3, 1_000, Integer.MAX_VALUE - 1, Integer.MAX_VALUE}) {
      WindowedOrder order = WindowedOrder.draw(rows, window, true, 7, 0, 0);
      assertEquals(1, order.windows(), "window " + window);
      assertEquals(12, order.samples().length);
      long[] sorted = order.samples().clone();
      Arrays.sort(sorted);
      long[] expected = new long[12];
      int at = 0;
      for (int shard = 0; shard < rows.length; shard++) {
        for (long row = 0; row < rows[shard]; row++) {
          expected[at++] = (long) shard << 32 | row;
        }
      }
      assertArrayEquals(expected, sorted, "every sample once");
    }
  }

  @Test
  void smallerWindowsSplitTheShards() {
    WindowedOrder order = WindowedOrder.draw(new long[] {2, 2, 2, 2, 2}, 2, false, 7, 0, 0);
    assertEquals(3, order.windows());
    assertArrayEquals(new long[] {4, 8, 10}, order.windowEnds());
  }
}
