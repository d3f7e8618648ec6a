package dev.ramtrain.trainer.backend.cuda;

import static jcuda.driver.JCudaDriver.cuEventCreate;
import static jcuda.driver.JCudaDriver.cuEventDestroy;
import static jcuda.driver.JCudaDriver.cuEventElapsedTime;
import static jcuda.driver.JCudaDriver.cuEventQuery;
import static jcuda.driver.JCudaDriver.cuEventRecord;
import static jcuda.driver.JCudaDriver.cuEventSynchronize;

import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.Stream;
import java.util.function.Consumer;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUresult;

/** A CUDA event with timing (the metrics' step-time breakdown reads it). */
final class CudaEvent implements Event {
  private final String label;
  private final CudaContext context;
  private final Consumer<CudaEvent> onClose;
  private final CUevent handle = new CUevent();
  private volatile boolean recorded; // set by the recording thread, read by the timing one
  private boolean closed;

  CudaEvent(String label, CudaContext context, Consumer<CudaEvent> onClose) {
    this.label = label;
    this.context = context;
    this.onClose = onClose;
    context.bind();
    CudaCalls.check(
        cuEventCreate(handle, CUevent_flags.CU_EVENT_DEFAULT),
        () -> "creating event '" + label + "'");
  }

  CUevent handle() {
    return handle;
  }

  @Override
  public void record(Stream stream) {
    context.bind();
    CudaCalls.check(
        cuEventRecord(handle, ((CudaStream) stream).handle()),
        () -> "recording event '" + label + "' on stream '" + stream.label() + "'");
    recorded = true;
  }

  @Override
  public void synchronize() {
    context.bind();
    CudaCalls.check(cuEventSynchronize(handle), () -> "waiting for event '" + label + "'");
  }

  @Override
  public boolean isDone() {
    context.bind();
    int result = cuEventQuery(handle);
    if (result == CUresult.CUDA_ERROR_NOT_READY) {
      return false;
    }
    CudaCalls.check(result, () -> "querying event '" + label + "'");
    return true;
  }

  @Override
  public double millisSince(Event start) {
    CudaEvent from = (CudaEvent) start;
    if (!recorded || !from.recorded || !isDone() || !from.isDone()) {
      throw new IllegalStateException("millisSince needs two reached events");
    }
    float[] millis = new float[1];
    CudaCalls.check(
        cuEventElapsedTime(millis, from.handle, handle),
        () -> "timing event '" + label + "' since '" + from.label + "'");
    return millis[0];
  }

  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    context.bind();
    CudaCalls.release(cuEventDestroy(handle), () -> "destroying event '" + label + "'");
    onClose.accept(this);
  }
}
