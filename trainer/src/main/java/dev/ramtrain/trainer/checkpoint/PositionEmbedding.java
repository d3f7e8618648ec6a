package dev.ramtrain.trainer.checkpoint;

/**
 * A ViT's absolute position embedding ([1, 1 + grid², dim]: the class token's, then the patch
 * grid's row by row) resampled to another grid, as timm's {@code resample_abs_pos_embed}: the class
 * token's kept, the grid interpolated bicubically (PyTorch's {@code interpolate(mode= 'bicubic',
 * align_corners=False)}, A = -0.75, edges clamped).
 */
final class PositionEmbedding {
  private static final double A = -0.75;

  private PositionEmbedding() {}

  /** Both [1, 1 + n², dim] with square grids and the same width, of different sizes. */
  static boolean resizable(long[] from, long[] to) {
    return from.length == 3
        && to.length == 3
        && from[0] == 1
        && to[0] == 1
        && from[2] == to[2]
        && side(from[1] - 1) > 0
        && side(to[1] - 1) > 0;
  }

  private static int side(long positions) {
    int s = (int) Math.round(Math.sqrt(positions));
    return (long) s * s == positions ? s : -1;
  }

  static float[] resample(float[] values, long[] from, long[] to) {
    int dim = (int) from[2];
    int in = side(from[1] - 1);
    int out = side(to[1] - 1);
    float[] result = new float[(int) (to[1] * dim)];
    System.arraycopy(values, 0, result, 0, dim); // the class token
    double scale = (double) in / out;
    for (int oy = 0; oy < out; oy++) {
      double[] wy = new double[4];
      int y0 = taps(oy, scale, wy);
      for (int ox = 0; ox < out; ox++) {
        double[] wx = new double[4];
        int x0 = taps(ox, scale, wx);
        for (int c = 0; c < dim; c++) {
          double sum = 0;
          for (int i = 0; i < 4; i++) {
            int y = Math.min(Math.max(y0 + i, 0), in - 1);
            double row = 0;
            for (int j = 0; j < 4; j++) {
              int x = Math.min(Math.max(x0 + j, 0), in - 1);
              row += wx[j] * values[(1 + y * in + x) * dim + c];
            }
            sum += wy[i] * row;
          }
          result[(1 + oy * out + ox) * dim + c] = (float) sum;
        }
      }
    }
    return result;
  }

  /** The first of the four source indices for output {@code o}, and their weights. */
  private static int taps(int o, double scale, double[] weights) {
    double src = (o + 0.5) * scale - 0.5;
    int floor = (int) Math.floor(src);
    double t = src - floor;
    weights[0] = cubicFar(t + 1);
    weights[1] = cubicNear(t);
    weights[2] = cubicNear(1 - t);
    weights[3] = cubicFar(2 - t);
    return floor - 1;
  }

  private static double cubicNear(double x) { // |x| <= 1
    return ((A + 2) * x - (A + 3)) * x * x + 1;
  }

  private static double cubicFar(double x) { // 1 < |x| < 2
    return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  }
}
