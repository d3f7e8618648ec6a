package dev.ramtrain.trainer.backend.cuda;

import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_CONVOLUTION_COMP_TYPE;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_CONVOLUTION_CONV_MODE;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_CONVOLUTION_DILATIONS;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_CONVOLUTION_POST_PADDINGS;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_ENGINECFG_ENGINE;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_ENGINEHEUR_MODE;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_ENGINEHEUR_RESULTS;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_ENGINE_NUMERICAL_NOTE;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_OPERATIONGRAPH_OPS;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_TENSOR_DATA_TYPE;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_TENSOR_DIMENSIONS;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_TENSOR_STRIDES;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_TENSOR_UNIQUE_ID;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS;
import static org.bytedeco.cuda.global.cudnn.CUDNN_ATTR_VARIANT_PACK_WORKSPACE;
import static org.bytedeco.cuda.global.cudnn.CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR;
import static org.bytedeco.cuda.global.cudnn.CUDNN_BACKEND_ENGINECFG_DESCRIPTOR;
import static org.bytedeco.cuda.global.cudnn.CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR;
import static org.bytedeco.cuda.global.cudnn.CUDNN_BACKEND_ENGINE_DESCRIPTOR;
import static org.bytedeco.cuda.global.cudnn.CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR;
import static org.bytedeco.cuda.global.cudnn.CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR;
import static org.bytedeco.cuda.global.cudnn.CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR;
import static org.bytedeco.cuda.global.cudnn.CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
import static org.bytedeco.cuda.global.cudnn.CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR;
import static org.bytedeco.cuda.global.cudnn.CUDNN_BACKEND_TENSOR_DESCRIPTOR;
import static org.bytedeco.cuda.global.cudnn.CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR;
import static org.bytedeco.cuda.global.cudnn.CUDNN_CROSS_CORRELATION;
import static org.bytedeco.cuda.global.cudnn.CUDNN_DATA_FLOAT;
import static org.bytedeco.cuda.global.cudnn.CUDNN_HEUR_MODE_A;
import static org.bytedeco.cuda.global.cudnn.CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
import static org.bytedeco.cuda.global.cudnn.CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
import static org.bytedeco.cuda.global.cudnn.CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION;
import static org.bytedeco.cuda.global.cudnn.CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
import static org.bytedeco.cuda.global.cudnn.CUDNN_NUMERICAL_NOTE_TYPE_COUNT;
import static org.bytedeco.cuda.global.cudnn.CUDNN_STATUS_SUCCESS;
import static org.bytedeco.cuda.global.cudnn.CUDNN_TYPE_BACKEND_DESCRIPTOR;
import static org.bytedeco.cuda.global.cudnn.CUDNN_TYPE_CONVOLUTION_MODE;
import static org.bytedeco.cuda.global.cudnn.CUDNN_TYPE_DATA_TYPE;
import static org.bytedeco.cuda.global.cudnn.CUDNN_TYPE_FLOAT;
import static org.bytedeco.cuda.global.cudnn.CUDNN_TYPE_HANDLE;
import static org.bytedeco.cuda.global.cudnn.CUDNN_TYPE_HEUR_MODE;
import static org.bytedeco.cuda.global.cudnn.CUDNN_TYPE_INT64;
import static org.bytedeco.cuda.global.cudnn.CUDNN_TYPE_NUMERICAL_NOTE;
import static org.bytedeco.cuda.global.cudnn.CUDNN_TYPE_VOID_PTR;
import static org.bytedeco.cuda.global.cudnn.cudnnBackendCreateDescriptor;
import static org.bytedeco.cuda.global.cudnn.cudnnBackendDestroyDescriptor;
import static org.bytedeco.cuda.global.cudnn.cudnnBackendExecute;
import static org.bytedeco.cuda.global.cudnn.cudnnBackendFinalize;
import static org.bytedeco.cuda.global.cudnn.cudnnBackendGetAttribute;
import static org.bytedeco.cuda.global.cudnn.cudnnBackendSetAttribute;
import static org.bytedeco.cuda.global.cudnn.cudnnGetErrorString;

import dev.ramtrain.trainer.backend.BackendException;
import dev.ramtrain.trainer.backend.ops.ConvWindow;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.bytedeco.cuda.cudnn.cudnnBackendDescriptor_t;
import org.bytedeco.cuda.cudnn.cudnnContext;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.IntPointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerPointer;

/**
 * One direction of one convolution shape as a finalized cuDNN execution plan (cuDNN's graph, or
 * "backend", API), run by {@link #execute} with nothing but a variant pack of its buffers: the
 * legacy {@code cudnnConvolution*} calls, measured on an H200 with cuDNN 9.14, cost 200–470 µs of
 * host time each (they build such a plan on every call), more than the device time of most of
 * ResNet-50's convolutions. The engine is cuDNN's heuristic ranking (mode A), its first
 * configuration that is deterministic, keeps fp32 operands in fp32 unless TF32 is allowed, builds,
 * and needs no more workspace than the caller offers (PyTorch's filter for its v8 API).
 *
 * <p>Owns every descriptor it made, destroyed by {@link #close}. The three tensors are named by
 * their role, whatever the direction: the image side ({@code x} or {@code dx}), the filter side
 * ({@code w} or {@code dw}) and the output side ({@code y} or {@code dy}).
 */
final class CudnnGraphPlan implements AutoCloseable {
  /** The three tensors' unique ids in the variant pack. */
  private static final long IMAGE = 1;

  private static final long FILTER = 2;
  private static final long OUTPUT = 3;

  /** The alignment promised for every buffer (the arena's blocks are 256-byte aligned). */
  static final long ALIGNMENT = 16;

  /** A direction: its operation descriptor type, its attributes' base (x·, w·, y-side, alpha). */
  enum Direction {
    FORWARD(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, 700, 0f),
    BACKWARD_DATA(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, 706, 0f),
    BACKWARD_FILTER(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, 712, 1f);

    final int operation;
    final int alpha;
    final float beta; // the filter gradient accumulates

    Direction(int operation, int alpha, float beta) {
      this.operation = operation;
      this.alpha = alpha;
      this.beta = beta;
    }

    /**
     * The attribute names of alpha, beta, conv, and the image, filter and output tensors:
     * cudnn_graph.h numbers each direction's alpha, beta, conv, then its filter-side, image-side
     * and output-side tensors (w, x, y; w, dx, dy; dw, x, dy).
     */
    int[] attributes() {
      return new int[] {alpha, alpha + 1, alpha + 2, alpha + 4, alpha + 3, alpha + 5};
    }
  }

  private final List<cudnnBackendDescriptor_t> owned;
  private final cudnnBackendDescriptor_t plan;
  private final long workspaceBytes;
  private final LongPointer ids = new LongPointer(IMAGE, FILTER, OUTPUT);
  private final LongPointer pointers = new LongPointer(3);
  private final LongPointer workspace = new LongPointer(1);

  private CudnnGraphPlan(
      List<cudnnBackendDescriptor_t> owned, cudnnBackendDescriptor_t plan, long workspaceBytes) {
    this.owned = owned;
    this.plan = plan;
    this.workspaceBytes = workspaceBytes;
  }

  /**
   * The plan for {@code direction} of {@code win} with {@code out} filters, or empty where cuDNN
   * offers no configuration that fits: the caller's legacy path runs that shape. A failure of the
   * API itself (a bad attribute) is an exception.
   */
  static Optional<CudnnGraphPlan> build(
      cudnnContext handle,
      Direction direction,
      ConvWindow win,
      int out,
      boolean tf32,
      long workspaceLimit) {
    List<cudnnBackendDescriptor_t> owned = new ArrayList<>();
    try {
      String shape = direction + " " + win + " with " + out + " filters";
      cudnnBackendDescriptor_t image =
          tensor(owned, IMAGE, new long[] {win.n(), win.c(), win.h(), win.w()}, shape);
      cudnnBackendDescriptor_t filter =
          tensor(owned, FILTER, new long[] {out, win.c(), win.kh(), win.kw()}, shape);
      cudnnBackendDescriptor_t output =
          tensor(owned, OUTPUT, new long[] {win.n(), out, win.oh(), win.ow()}, shape);
      cudnnBackendDescriptor_t conv = create(owned, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, shape);
      try (IntPointer type = values(CUDNN_DATA_FLOAT);
          IntPointer mode = values(CUDNN_CROSS_CORRELATION);
          LongPointer two = values(2L);
          LongPointer ones = new LongPointer(1L, 1L);
          LongPointer strides = new LongPointer((long) win.stride(), win.stride());
          LongPointer pads = new LongPointer((long) win.pad(), win.pad())) {
        set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, type, shape);
        set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, mode, shape);
        set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, two, shape);
        set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, ones, shape);
        set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, strides, shape);
        set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pads, shape);
        set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pads, shape);
      }
      finalize(conv, shape);
      cudnnBackendDescriptor_t operation = create(owned, direction.operation, shape);
      int[] names = direction.attributes();
      try (FloatPointer alpha = new FloatPointer(1f);
          FloatPointer beta = new FloatPointer(direction.beta)) {
        set(operation, names[0], CUDNN_TYPE_FLOAT, 1, alpha, shape);
        set(operation, names[1], CUDNN_TYPE_FLOAT, 1, beta, shape);
      }
      setDescriptor(operation, names[2], conv, shape);
      setDescriptor(operation, names[3], image, shape);
      setDescriptor(operation, names[4], filter, shape);
      setDescriptor(operation, names[5], output, shape);
      finalize(operation, shape);
      cudnnBackendDescriptor_t graph =
          create(owned, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, shape);
      try (PointerPointer<?> h = single(handle)) {
        set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, h, shape);
      }
      setDescriptor(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, operation, shape);
      finalize(graph, shape);
      for (cudnnBackendDescriptor_t config : rankedConfigs(owned, graph, shape)) {
        if (!usable(owned, config, tf32, shape)) {
          continue;
        }
        cudnnBackendDescriptor_t candidate = new cudnnBackendDescriptor_t();
        check(
            cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, candidate),
            "creating an execution plan for " + shape);
        long bytes = -1;
        try (PointerPointer<?> h = single(handle)) {
          set(candidate, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, h, shape);
          setDescriptor(candidate, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config, shape);
          if (cudnnBackendFinalize(candidate) == CUDNN_STATUS_SUCCESS) {
            bytes = longAttribute(candidate, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, shape);
          }
        }
        if (bytes >= 0 && bytes <= workspaceLimit) {
          return Optional.of(new CudnnGraphPlan(owned, candidate, bytes));
        }
        cudnnBackendDestroyDescriptor(candidate);
      }
      destroyAll(owned);
      return Optional.empty();
    } catch (RuntimeException e) {
      destroyAll(owned);
      throw e;
    }
  }

  /** The workspace this plan needs (at most what {@link #build} was offered). */
  long workspaceBytes() {
    return workspaceBytes;
  }

  /**
   * Enqueues the convolution on the handle's stream over the image-, filter- and output-side
   * buffers at these device addresses, with {@code workspaceBytes} at {@code scratch}.
   */
  void execute(cudnnContext handle, long image, long filter, long output, long scratch) {
    pointers.put(0, image).put(1, filter).put(2, output);
    workspace.put(0, scratch);
    cudnnBackendDescriptor_t pack = new cudnnBackendDescriptor_t();
    check(
        cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, pack),
        "creating a variant pack");
    try {
      set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, ids, "a variant pack");
      set(
          pack,
          CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
          CUDNN_TYPE_VOID_PTR,
          3,
          pointers,
          "a variant pack");
      set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, workspace, "workspace");
      finalize(pack, "a variant pack");
      check(cudnnBackendExecute(handle, plan, pack), "executing a convolution plan");
    } finally {
      cudnnBackendDestroyDescriptor(pack);
    }
  }

  /** Whether every address is aligned as the plan's tensors promise. */
  static boolean aligned(long... addresses) {
    for (long address : addresses) {
      if (address % ALIGNMENT != 0) {
        return false;
      }
    }
    return true;
  }

  private static List<cudnnBackendDescriptor_t> rankedConfigs(
      List<cudnnBackendDescriptor_t> owned, cudnnBackendDescriptor_t graph, String shape) {
    cudnnBackendDescriptor_t heuristics = create(owned, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, shape);
    setDescriptor(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph, shape);
    try (IntPointer mode = values(CUDNN_HEUR_MODE_A)) {
      set(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, mode, shape);
    }
    finalize(heuristics, shape);
    long[] count = new long[1];
    check(
        cudnnBackendGetAttribute(
            heuristics,
            CUDNN_ATTR_ENGINEHEUR_RESULTS,
            CUDNN_TYPE_BACKEND_DESCRIPTOR,
            0,
            count,
            (Pointer) null),
        "counting the engine configurations for " + shape);
    List<cudnnBackendDescriptor_t> configs = new ArrayList<>();
    for (long i = 0; i < count[0]; i++) {
      configs.add(create(owned, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, shape));
    }
    if (configs.isEmpty()) {
      return configs;
    }
    try (PointerPointer<?> array =
        new PointerPointer<>(configs.toArray(new cudnnBackendDescriptor_t[0]))) {
      check(
          cudnnBackendGetAttribute(
              heuristics,
              CUDNN_ATTR_ENGINEHEUR_RESULTS,
              CUDNN_TYPE_BACKEND_DESCRIPTOR,
              configs.size(),
              count,
              array),
          "reading the engine configurations for " + shape);
    }
    return configs.subList(0, (int) Math.min(count[0], configs.size()));
  }

  /** Deterministic, and fp32 throughout unless TF32 is allowed. */
  private static boolean usable(
      List<cudnnBackendDescriptor_t> owned,
      cudnnBackendDescriptor_t config,
      boolean tf32,
      String shape) {
    cudnnBackendDescriptor_t engine = create(owned, CUDNN_BACKEND_ENGINE_DESCRIPTOR, shape);
    long[] count = new long[1];
    try (PointerPointer<?> target = single(engine);
        IntPointer notes = new IntPointer(CUDNN_NUMERICAL_NOTE_TYPE_COUNT)) {
      check(
          cudnnBackendGetAttribute(
              config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, count, target),
          "reading an engine of " + shape);
      check(
          cudnnBackendGetAttribute(
              engine,
              CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
              CUDNN_TYPE_NUMERICAL_NOTE,
              CUDNN_NUMERICAL_NOTE_TYPE_COUNT,
              count,
              notes),
          "reading an engine's numerical notes for " + shape);
      for (int i = 0; i < count[0]; i++) {
        int note = notes.get(i);
        boolean reduces =
            note == CUDNN_NUMERICAL_NOTE_TENSOR_CORE
                || note == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS
                || note == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION;
        if (note == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC || (reduces && !tf32)) {
          return false;
        }
      }
      return true;
    }
  }

  // JavaCPP's IntPointer(int) and LongPointer(long) are sizes, and PointerPointer(Pointer) a cast,
  // not values: one value goes through an array.
  private static PointerPointer<?> single(Pointer value) {
    return new PointerPointer<>(1L).put(0, value);
  }

  private static IntPointer values(int value) {
    return new IntPointer(new int[] {value});
  }

  private static LongPointer values(long value) {
    return new LongPointer(new long[] {value});
  }

  private static cudnnBackendDescriptor_t tensor(
      List<cudnnBackendDescriptor_t> owned, long id, long[] dims, String shape) {
    cudnnBackendDescriptor_t d = create(owned, CUDNN_BACKEND_TENSOR_DESCRIPTOR, shape);
    long[] strides = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
    try (IntPointer type = values(CUDNN_DATA_FLOAT);
        LongPointer size = new LongPointer(dims);
        LongPointer step = new LongPointer(strides);
        LongPointer uid = values(id);
        LongPointer alignment = values(ALIGNMENT)) {
      set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, type, shape);
      set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, size, shape);
      set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, step, shape);
      set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, uid, shape);
      set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, alignment, shape);
    }
    finalize(d, shape);
    return d;
  }

  private static cudnnBackendDescriptor_t create(
      List<cudnnBackendDescriptor_t> owned, int type, String shape) {
    cudnnBackendDescriptor_t d = new cudnnBackendDescriptor_t();
    check(cudnnBackendCreateDescriptor(type, d), "creating descriptor " + type + " for " + shape);
    owned.add(d);
    return d;
  }

  private static void set(
      cudnnBackendDescriptor_t d, int name, int type, long count, Pointer values, String what) {
    check(
        cudnnBackendSetAttribute(d, name, type, count, values), "setting " + name + " of " + what);
  }

  private static void setDescriptor(
      cudnnBackendDescriptor_t d, int name, cudnnBackendDescriptor_t value, String what) {
    try (PointerPointer<?> array = single(value)) {
      set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, array, what);
    }
  }

  private static long longAttribute(cudnnBackendDescriptor_t d, int name, String what) {
    long[] count = new long[1];
    try (LongPointer value = new LongPointer(1)) {
      check(
          cudnnBackendGetAttribute(d, name, CUDNN_TYPE_INT64, 1, count, value),
          "reading " + name + " of " + what);
      return value.get(0);
    }
  }

  private static void finalize(cudnnBackendDescriptor_t d, String what) {
    check(cudnnBackendFinalize(d), "finalizing " + what);
  }

  private static void check(int status, String what) {
    if (status != CUDNN_STATUS_SUCCESS) {
      throw new BackendException(
          "cuda: cuDNN " + what + " failed: " + cudnnGetErrorString(status).getString());
    }
  }

  private static void destroyAll(List<cudnnBackendDescriptor_t> owned) {
    for (int i = owned.size() - 1; i >= 0; i--) {
      cudnnBackendDestroyDescriptor(owned.get(i));
    }
    owned.clear();
  }

  @Override
  public void close() {
    cudnnBackendDestroyDescriptor(plan);
    destroyAll(owned);
    ids.close();
    pointers.close();
    workspace.close();
  }
}
