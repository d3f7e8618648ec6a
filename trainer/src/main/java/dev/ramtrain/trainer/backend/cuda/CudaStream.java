package dev.ramtrain.trainer.backend.cuda;

import static jcuda.driver.JCudaDriver.cuMemFreeHost;
import static jcuda.driver.JCudaDriver.cuMemHostAlloc;
import static jcuda.driver.JCudaDriver.cuMemHostGetDevicePointer;
import static jcuda.driver.JCudaDriver.cuStreamCreate;
import static jcuda.driver.JCudaDriver.cuStreamDestroy;
import static jcuda.driver.JCudaDriver.cuStreamQuery;
import static jcuda.driver.JCudaDriver.cuStreamSynchronize;
import static jcuda.driver.JCudaDriver.cuStreamWaitEvent;

import dev.ramtrain.trainer.backend.BackendException;
import dev.ramtrain.trainer.backend.ColumnSumOrder;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.Stream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;
import org.bytedeco.cuda.cudart.CUstream_st;

/**
 * A CUDA stream (non-blocking: it never waits for the legacy default stream) with what its kernels
 * need beside it: a status word in mapped pinned memory, where a kernel reports bad input (a label
 * out of range) for {@link #synchronize} to raise without an extra copy, and a small device scratch
 * for multi-launch reductions (column sums' and gradient clipping's partial sums).
 */
final class CudaStream implements Stream {
  static final int STATUS_BYTES = 16;
  static final int CLIP_CHUNKS = 64;

  /** The scratch: column sums' partials ({@link ColumnSumOrder}), clipping's partial sums. */
  static final int SCRATCH_BYTES = (int) ColumnSumOrder.SCRATCH_BYTES;

  private final String label;
  private final CudaContext context;
  private final CUstream handle = new CUstream();
  private final Pointer statusHost = new Pointer();
  private final ByteBuffer status;
  private final CUdeviceptr statusDevice = new CUdeviceptr();
  private final CudaBuffer scratch;
  private final CUstream_st library; // the same stream as NVIDIA's libraries take it
  private boolean closed;

  CudaStream(String label, CudaContext context, CudaBuffer scratch) {
    this.label = label;
    this.context = context;
    this.scratch = scratch;
    context.bind();
    CudaCalls.check(
        cuStreamCreate(handle, CUstream_flags.CU_STREAM_NON_BLOCKING),
        () -> "creating stream '" + label + "'");
    CudaCalls.check(
        cuMemHostAlloc(
            statusHost,
            STATUS_BYTES,
            JCudaDriver.CU_MEMHOSTALLOC_DEVICEMAP | JCudaDriver.CU_MEMHOSTALLOC_PORTABLE),
        () -> "allocating the status word of stream '" + label + "'");
    status = statusHost.getByteBuffer(0, STATUS_BYTES).order(ByteOrder.nativeOrder());
    status.putInt(0, 0);
    CudaCalls.check(
        cuMemHostGetDevicePointer(statusDevice, statusHost, 0),
        () -> "mapping the status word of stream '" + label + "'");
    library = new CUstream_st(new DevicePointer(RawHandles.of(handle, scratch.pointer(), context)));
  }

  @Override
  public String label() {
    return label;
  }

  CUstream handle() {
    return handle;
  }

  /** This stream for cuBLAS and cuDNN calls (JavaCPP's type for a CUstream). */
  CUstream_st library() {
    return library;
  }

  /** Where kernels on this stream report bad input (an RtStatus). */
  CUdeviceptr statusWord() {
    return statusDevice;
  }

  /** CLIP_CHUNKS doubles of partial sums, then one float: the clipping factor. */
  CudaBuffer scratch() {
    return scratch;
  }

  @Override
  public void waitFor(Event event) {
    context.bind();
    CudaCalls.check(
        cuStreamWaitEvent(handle, ((CudaEvent) event).handle(), 0),
        () -> "making stream '" + label + "' wait for an event");
  }

  @Override
  public void synchronize() {
    context.bind();
    int result = cuStreamSynchronize(handle);
    if (result != 0) {
      throw new BackendException(
          "work on stream '" + label + "' failed: " + jcuda.driver.CUresult.stringFor(result));
    }
    checkStatusWord();
  }

  /** A fault of the context raises here (cuStreamQuery); so does input a kernel reported. */
  @Override
  public void checkFailures() {
    context.bind();
    int result = cuStreamQuery(handle);
    if (result != 0 && result != jcuda.driver.CUresult.CUDA_ERROR_NOT_READY) {
      throw new BackendException(
          "work on stream '" + label + "' failed: " + jcuda.driver.CUresult.stringFor(result));
    }
    checkStatusWord();
  }

  private void checkStatusWord() {
    int code = status.getInt(0);
    if (code != 0) {
      int row = status.getInt(4);
      int value = status.getInt(8);
      int limit = status.getInt(12);
      status.putInt(0, 0);
      throw new BackendException(
          "work on stream '"
              + label
              + "' failed: label "
              + value
              + " of row "
              + row
              + " outside [0, "
              + limit
              + ")");
    }
  }

  /**
   * Waits until the work enqueued so far has run, its faults left for {@link #synchronize}: what
   * freeing device memory waits for. A closed stream has run all of its work.
   */
  synchronized void drain() {
    if (!closed) {
      context.bind();
      cuStreamSynchronize(handle);
    }
  }

  @Override
  public void close() {
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      context.bind();
      cuStreamSynchronize(handle); // its errors were the last synchronize's to report
      CudaCalls.release(cuStreamDestroy(handle), () -> "destroying stream '" + label + "'");
      CudaCalls.release(
          cuMemFreeHost(statusHost), () -> "freeing the status word of '" + label + "'");
    }
    scratch.close(); // outside the lock: freeing waits for the other streams, one lock at a time
  }
}
