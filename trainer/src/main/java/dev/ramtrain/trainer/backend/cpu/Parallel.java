package dev.ramtrain.trainer.backend.cpu;

import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.RecursiveAction;

/** Splits an index range over the backend's pool; small ranges run on the calling thread. */
final class Parallel {
  interface Range {
    void run(int from, int to);
  }

  private final ForkJoinPool pool;

  Parallel(ForkJoinPool pool) {
    this.pool = pool;
  }

  /** Runs {@code body} over [0, n) in chunks of at least {@code grain} indices. */
  void forRange(int n, int grain, Range body) {
    int chunks = Math.min(pool.getParallelism() * 4, Math.max(1, n / Math.max(1, grain)));
    if (chunks <= 1) {
      body.run(0, n);
      return;
    }
    pool.invoke(new Chunk(body, 0, n, (n + chunks - 1) / chunks));
  }

  private static final class Chunk extends RecursiveAction {
    private final Range body;
    private final int from;
    private final int to;
    private final int size;

    Chunk(Range body, int from, int to, int size) {
      this.body = body;
      this.from = from;
      this.to = to;
      this.size = size;
    }

    @Override
    protected void compute() {
      if (to - from <= size) {
        body.run(from, to);
        return;
      }
      int mid = from + (to - from) / 2;
      invokeAll(new Chunk(body, from, mid, size), new Chunk(body, mid, to, size));
    }
  }
}
