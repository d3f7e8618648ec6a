package dev.ramtrain.trainer.backend;

/**
 * The order in which every engine sums a matrix down its columns (bias gradients, layer norm's
 * parameter gradients), so that they agree to the bit: the rows are dealt to {@code 16 · groups}
 * lanes, lane l summing the rows r ≡ l (mod lanes) in increasing order, in double; each group's 16
 * lanes are added in lane order, then the groups in group order.
 *
 * <p>Groups exist for the GPU: one group is a block of threads, and a tall matrix (ConvNeXt's
 * 100,352 rows of 96 features at batch 32) needs many blocks, where 16 lanes a column left most of
 * the device idle. A matrix of at most {@link #ROWS_PER_GROUP} rows is one group (the order of 16
 * lanes alone). The groups' partial sums live in a stream's scratch, which bounds their number by
 * the column count.
 */
public final class ColumnSumOrder {
  /** Lanes a group sums a column in (RT_COLUMN_LANES). */
  public static final int LANES = 16;

  /** Rows a group takes before another is added: 32 a lane. */
  public static final int ROWS_PER_GROUP = LANES * 32;

  /** The most groups: the final pass reads this many partial sums a column. */
  public static final int MAX_GROUPS = 64;

  /** Scratch the partial sums may fill: two doubles (a layer norm's two sums) a column a group. */
  public static final long SCRATCH_BYTES = 1L << 20;

  private ColumnSumOrder() {}

  /** How many groups a {@code rows} × {@code cols} matrix is summed in (at least 1). */
  public static int groups(long rows, int cols) {
    long wanted = (rows + ROWS_PER_GROUP - 1) / ROWS_PER_GROUP;
    long room = SCRATCH_BYTES / (2L * Double.BYTES * Math.max(1, cols));
    return (int) Math.max(1, Math.min(Math.min(wanted, MAX_GROUPS), room));
  }

  /**
   * A column's total from its lanes' sums, laid out [lane][column] {@code stride} apart: each
   * group's lanes in lane order, then the groups in group order.
   */
  public static double total(double[] laneSums, int stride, int column, int groups) {
    double total = 0;
    for (int g = 0; g < groups; g++) {
      double group = 0;
      for (int lane = g * LANES; lane < (g + 1) * LANES; lane++) {
        group += laneSums[lane * stride + column];
      }
      total += group;
    }
    return total;
  }
}
