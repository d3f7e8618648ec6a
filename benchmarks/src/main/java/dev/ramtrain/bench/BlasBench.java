package dev.ramtrain.bench;

import static org.bytedeco.openblas.global.openblas_nolapack.CblasNoTrans;
import static org.bytedeco.openblas.global.openblas_nolapack.CblasRowMajor;
import static org.bytedeco.openblas.global.openblas_nolapack.cblas_sgemm;

import dev.ludovic.netlib.blas.BLAS;
import dev.ludovic.netlib.blas.JavaBLAS;
import java.util.Arrays;
import java.util.Random;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.openblas.global.openblas_nolapack;

/**
 * The CPU BLAS choice, measured: sgemm GFLOP/s of OpenBLAS through JavaCPP (the backend's), and of
 * netlib's pure-Java BLAS and its Vector-API BLAS (dev.ludovic.netlib, what Spark MLlib uses), on
 * n×n float32 products as ../shared/anchors/blas_numpy.py times them (median of reps after 2
 * warm-ups).
 *
 * <p>Usage: BlasBench N REPS THREADS (threads apply to OpenBLAS; netlib's Java BLAS is serial; run
 * with {@code --add-modules jdk.incubator.vector} for its Vector-API variant).
 */
public final class BlasBench {
  public static void main(String[] args) {
    int n = Integer.parseInt(args[0]);
    int reps = Integer.parseInt(args[1]);
    int threads = Integer.parseInt(args[2]);
    Random rng = new Random(0);
    float[] a = new float[n * n];
    float[] b = new float[n * n];
    for (int i = 0; i < a.length; i++) {
      a[i] = (float) rng.nextGaussian();
      b[i] = (float) rng.nextGaussian();
    }
    double flops = 2.0 * n * n * n;

    openblas_nolapack.blas_set_num_threads(threads);
    try (FloatPointer pa = new FloatPointer(a);
        FloatPointer pb = new FloatPointer(b);
        FloatPointer pc = new FloatPointer((long) n * n)) {
      double gflops =
          median(
              reps,
              () ->
                  cblas_sgemm(
                      CblasRowMajor,
                      CblasNoTrans,
                      CblasNoTrans,
                      n,
                      n,
                      n,
                      1f,
                      pa,
                      n,
                      pb,
                      n,
                      0f,
                      pc,
                      n),
              flops);
      System.out.printf(
          "openblas-javacpp %s  n=%d threads=%d  %.1f GFLOP/s%n",
          openblas_nolapack.OPENBLAS_VERSION, n, threads, gflops);
    }
    float[] c = new float[n * n];
    for (BLAS blas : new BLAS[] {JavaBLAS.getInstance(), BLAS.getInstance()}) {
      // Column-major sgemm computing the row-major product C = A B as C^T = B^T A^T.
      double gflops =
          median(reps, () -> blas.sgemm("N", "N", n, n, n, 1f, b, n, a, n, 0f, c, n), flops);
      String kind = blas.getClass().getSimpleName();
      String how =
          kind.equals("JNIBLAS")
              ? "the system's libblas.so.3 via JNI, its own threads"
              : "pure Java, 1 thread";
      System.out.printf("netlib %s (%s)  n=%d  %.1f GFLOP/s%n", kind, how, n, gflops);
    }
  }

  private static double median(int reps, Runnable gemm, double flops) {
    gemm.run();
    gemm.run();
    double[] g = new double[reps];
    for (int r = 0; r < reps; r++) {
      long t0 = System.nanoTime();
      gemm.run();
      g[r] = flops / (System.nanoTime() - t0);
    }
    Arrays.sort(g);
    return g[reps / 2];
  }
}
