package dev.ramtrain.trainer.backend.cuda;

import dev.ramtrain.trainer.backend.BackendException;
import java.util.function.Supplier;
import jcuda.driver.CUresult;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Turns a CUDA driver result into an exception that says what was being done. JCuda's own exception
 * mode is left off: it is one flag for the whole JVM, it throws for results that are answers rather
 * than failures (an event query's CUDA_ERROR_NOT_READY), and its messages carry the error name
 * only.
 */
final class CudaCalls {
  private static final Logger LOG = LoggerFactory.getLogger(CudaCalls.class);

  private CudaCalls() {}

  /**
   * For frees and destroys on the way out: after a kernel fault or a lost device the driver still
   * releases the memory but answers with the error that broke the context, which was already raised
   * where it happened; closing must go on and free the rest.
   */
  static void release(int result, Supplier<String> what) {
    if (result != CUresult.CUDA_SUCCESS) {
      LOG.warn("cuda: {} reported {}", what.get(), CUresult.stringFor(result));
    }
  }

  /** Throws unless {@code result} is CUDA_SUCCESS; {@code what} is built only on failure. */
  static void check(int result, Supplier<String> what) {
    if (result != CUresult.CUDA_SUCCESS) {
      throw new BackendException("cuda: " + what.get() + " failed: " + CUresult.stringFor(result));
    }
  }

  static void check(int result, String what) {
    if (result != CUresult.CUDA_SUCCESS) {
      throw new BackendException("cuda: " + what + " failed: " + CUresult.stringFor(result));
    }
  }
}
