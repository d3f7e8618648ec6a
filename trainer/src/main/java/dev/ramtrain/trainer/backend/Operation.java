package dev.ramtrain.trainer.backend;

/**
 * One kind of device work, described once: a record of its arguments whose constructor checks them
 * (counts, shapes, element types) in the caller's thread, where an error names its cause; an error
 * in enqueued work would surface only at the next synchronize. Each engine implements each
 * operation once in its table ({@code JavaOperations}, {@code OneDnnOperations}, {@code
 * CudaOperations}), and {@link dev.ramtrain.trainer.backend.Backend#run} enqueues it. Buffers are
 * row-major, sizes in elements, F32 unless a record says otherwise.
 *
 * <p>Adding an operation: its record here, its CPU code, its {@code .cu} kernel and its line in
 * each engine's table, and its case in {@code BackendConformanceTest}.
 */
public interface Operation {}
