package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.files.BundledLibrary;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How many OpenMP threads oneDNN's work on the calling thread runs on: the calling thread's own
 * count ({@code omp_set_num_threads} is per initial thread), set in the runtime oneDNN loaded. The
 * environment's {@code OMP_NUM_THREADS} sets one count for the whole process; two data-parallel
 * ranks in one JVM each took every core with it, which cost them 15-20% of their speed on 2 cores
 * (benchmarks/RESULTS.md). A small JNI library of the trainer's own does the call: JavaCPP's oneDNN
 * presets bind none.
 */
final class OpenMpThreads {
  private static final Logger LOG = LoggerFactory.getLogger(OpenMpThreads.class);
  private static final String LIBRARY = "linux-x86_64/libramtrain_openmp.so";
  private static final String UNAVAILABLE = load(); // null once the library is loaded

  private OpenMpThreads() {}

  /**
   * Limits oneDNN's parallel work started from this thread to {@code threads}; returns null, or why
   * it could not (the library not built here, no OpenMP runtime loaded yet).
   */
  static String limitThisThread(int threads) {
    if (UNAVAILABLE != null) {
      return UNAVAILABLE;
    }
    return limitThisThread0(threads);
  }

  /** The OpenMP thread count of this thread's parallel work; -1 when it cannot be read. */
  static int ofThisThread() {
    return UNAVAILABLE != null ? -1 : ofThisThread0();
  }

  private static native String limitThisThread0(int threads);

  private static native int ofThisThread0();

  private static String load() {
    String why = BundledLibrary.load(OpenMpThreads.class, LIBRARY);
    if (why != null) {
      LOG.debug("the OpenMP thread limit is unavailable: {}", why);
    }
    return why;
  }
}
