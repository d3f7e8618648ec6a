package dev.ramtrain.trainer.backend.cuda;

import static org.bytedeco.cuda.global.cudnn.CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
import static org.bytedeco.cuda.global.cudnn.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
import static org.bytedeco.cuda.global.cudnn.CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
import static org.bytedeco.cuda.global.cudnn.CUDNN_CROSS_CORRELATION;
import static org.bytedeco.cuda.global.cudnn.CUDNN_DATA_FLOAT;
import static org.bytedeco.cuda.global.cudnn.CUDNN_DEFAULT_MATH;
import static org.bytedeco.cuda.global.cudnn.CUDNN_DETERMINISTIC;
import static org.bytedeco.cuda.global.cudnn.CUDNN_FMA_MATH;
import static org.bytedeco.cuda.global.cudnn.CUDNN_STATUS_SUCCESS;
import static org.bytedeco.cuda.global.cudnn.CUDNN_TENSOR_NCHW;
import static org.bytedeco.cuda.global.cudnn.cudnnConvolutionBackwardData;
import static org.bytedeco.cuda.global.cudnn.cudnnConvolutionBackwardFilter;
import static org.bytedeco.cuda.global.cudnn.cudnnConvolutionForward;
import static org.bytedeco.cuda.global.cudnn.cudnnCreate;
import static org.bytedeco.cuda.global.cudnn.cudnnCreateConvolutionDescriptor;
import static org.bytedeco.cuda.global.cudnn.cudnnCreateFilterDescriptor;
import static org.bytedeco.cuda.global.cudnn.cudnnCreateTensorDescriptor;
import static org.bytedeco.cuda.global.cudnn.cudnnDestroy;
import static org.bytedeco.cuda.global.cudnn.cudnnDestroyConvolutionDescriptor;
import static org.bytedeco.cuda.global.cudnn.cudnnDestroyFilterDescriptor;
import static org.bytedeco.cuda.global.cudnn.cudnnDestroyTensorDescriptor;
import static org.bytedeco.cuda.global.cudnn.cudnnGetConvolutionBackwardDataAlgorithm_v7;
import static org.bytedeco.cuda.global.cudnn.cudnnGetConvolutionBackwardFilterAlgorithm_v7;
import static org.bytedeco.cuda.global.cudnn.cudnnGetConvolutionForwardAlgorithm_v7;
import static org.bytedeco.cuda.global.cudnn.cudnnGetErrorString;
import static org.bytedeco.cuda.global.cudnn.cudnnSetConvolution2dDescriptor;
import static org.bytedeco.cuda.global.cudnn.cudnnSetConvolutionMathType;
import static org.bytedeco.cuda.global.cudnn.cudnnSetFilter4dDescriptor;
import static org.bytedeco.cuda.global.cudnn.cudnnSetStream;
import static org.bytedeco.cuda.global.cudnn.cudnnSetTensor4dDescriptor;

import dev.ramtrain.trainer.backend.BackendException;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.OperationTable;
import dev.ramtrain.trainer.backend.ops.AddChannelBias;
import dev.ramtrain.trainer.backend.ops.ConvWindow;
import dev.ramtrain.trainer.backend.ops.Convolution;
import dev.ramtrain.trainer.backend.ops.ConvolutionBackward;
import dev.ramtrain.trainer.backend.ops.SumChannels;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.function.Supplier;
import org.bytedeco.cuda.cudnn.cudnnContext;
import org.bytedeco.cuda.cudnn.cudnnConvolutionBwdDataAlgoPerf_t;
import org.bytedeco.cuda.cudnn.cudnnConvolutionBwdFilterAlgoPerf_t;
import org.bytedeco.cuda.cudnn.cudnnConvolutionFwdAlgoPerf_t;
import org.bytedeco.cuda.cudnn.cudnnConvolutionStruct;
import org.bytedeco.cuda.cudnn.cudnnFilterStruct;
import org.bytedeco.cuda.cudnn.cudnnTensorStruct;
import org.bytedeco.javacpp.FloatPointer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Convolutions by cuDNN 9 (libcudnn_cnn.so.9 through JavaCPP's preset): forward, backward-data and
 * backward-filter over NCHW fp32 tensors, as PyTorch's nn.Conv2d (cross-correlation).
 *
 * <p>Each shape's three directions become, on their first call, execution plans of cuDNN's graph
 * API ({@link CudnnGraphPlan}), each later call one {@code cudnnBackendExecute}, as PyTorch's v8
 * path runs them: the legacy {@code cudnnConvolution*} calls rebuild such a plan every time,
 * 200–470 µs of host time a call on an H200. The legacy calls remain for a shape the graph API
 * refuses (or a buffer it cannot take aligned), their algorithms chosen once from cuDNN's
 * heuristics ({@code cudnnGet*Algorithm_v7}, PyTorch's choice without {@code cudnn.benchmark}).
 * Either way the choice is deterministic (the bit-for-bit promises: resumed, offloaded and
 * data-parallel runs repeat one process's arithmetic), keeps fp32 unless TF32 is allowed, and needs
 * no more workspace than the operation's columns buffer: the im2col scratch the plan already
 * counts, so the library's workspace comes from the arena and {@code plan} stays equal to the
 * allocation. A shape with no such algorithm, and bf16 or channel-blocked operands, are left to the
 * own kernels ({@link #forward} answers false).
 */
final class CudnnConvolutions implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(CudnnConvolutions.class);

  /** cudnnMathType_t values that let fp32 operands round to TF32 on the tensor cores. */
  private static final int TENSOR_OP_MATH = 1;

  private static final int TENSOR_OP_MATH_ALLOW_CONVERSION = 2;

  private final CudaContext context;
  private final String version;
  private final boolean tf32;
  private final Map<CudaStream, cudnnContext> handles = new IdentityHashMap<>();
  private final Map<Shape, Plan> plans = new HashMap<>();
  private long legacyCalls; // convolutions run by the legacy calls: shapes without a plan
  private final FloatPointer one = new FloatPointer(1f);
  private final FloatPointer zero = new FloatPointer(0f);

  /** A convolution's shape: what its descriptors and algorithms depend on. */
  private record Shape(ConvWindow window, int outChannels) {}

  /** One shape's descriptors and algorithms (-1: none fits; the own kernels run it). */
  private static final class Plan implements AutoCloseable {
    final cudnnTensorStruct x = new cudnnTensorStruct();
    final cudnnTensorStruct y = new cudnnTensorStruct();
    final cudnnFilterStruct w = new cudnnFilterStruct();
    final cudnnConvolutionStruct conv = new cudnnConvolutionStruct();
    int forward = -1;
    int backwardData = -1;
    int backwardFilter = -1;
    // The same directions as execution plans of the graph API (null: the legacy call runs it).
    CudnnGraphPlan forwardGraph;
    CudnnGraphPlan dataGraph;
    CudnnGraphPlan filterGraph;

    @Override
    public void close() {
      for (CudnnGraphPlan graph : new CudnnGraphPlan[] {forwardGraph, dataGraph, filterGraph}) {
        if (graph != null) {
          graph.close();
        }
      }
      cudnnDestroyTensorDescriptor(x);
      cudnnDestroyTensorDescriptor(y);
      cudnnDestroyFilterDescriptor(w);
      cudnnDestroyConvolutionDescriptor(conv);
    }
  }

  /** {@code version} as loaded ({@link NvidiaLibraries#cudnn}); {@code tf32} for fp32 operands. */
  CudnnConvolutions(CudaContext context, String version, boolean tf32) {
    this.context = context;
    this.version = version;
    this.tf32 = tf32;
  }

  /**
   * The convolutions on cuDNN over {@code own}, which runs everything else: the bias and its
   * gradient (the own per-channel kernels, as the lowering has them) and whatever cuDNN does not
   * take.
   */
  OperationTable<CudaStream> over(OperationTable<CudaStream> own) {
    return new OperationTable<CudaStream>("cuda (cuDNN)", own)
        .add(
            Convolution.class,
            (op, s) -> {
              if (!forward(op, s)) {
                own.run(op, s);
              } else if (op.bias() != null) {
                ConvWindow win = op.window();
                own.run(
                    new AddChannelBias(
                        op.y(), op.bias(), win.n(), op.outChannels(), win.oh() * win.ow()),
                    s);
              }
            })
        .add(
            ConvolutionBackward.class,
            (op, s) -> {
              if (!backward(op, s)) {
                own.run(op, s);
              } else if (op.biasGrad() != null) {
                ConvWindow win = op.window();
                own.run(
                    new SumChannels(
                        op.dy(), op.biasGrad(), win.n(), op.outChannels(), win.oh() * win.ow()),
                    s);
              }
            });
  }

  /** How many convolutions (forward, or a whole backward) ran on the legacy calls so far. */
  synchronized long legacyCalls() {
    return legacyCalls;
  }

  String describe() {
    return version
        + " (NCHW fp32, TF32 "
        + (tf32 ? "on" : "off")
        + ", deterministic algorithms, execution plans of the graph API)";
  }

  /** Runs {@code op}'s convolution (not its bias) on cuDNN, or answers false: the caller's turn. */
  synchronized boolean forward(Convolution op, CudaStream s) {
    if (!takes(op.x().dtype(), op.inBlock(), op.outBlock())) {
      return false;
    }
    Plan plan = plan(op.window(), op.outChannels(), s);
    if (plan.forward < 0) {
      return false;
    }
    CudaBuffer columns = CudaOperations.cuda(op.columns());
    long x = CudaOperations.cuda(op.x()).address().address();
    long w = CudaOperations.cuda(op.weight()).address().address();
    long y = CudaOperations.cuda(op.y()).address().address();
    if (plan.forwardGraph != null && CudnnGraphPlan.aligned(x, w, y)) {
      plan.forwardGraph.execute(handle(s), x, w, y, columns.address().address());
      return true;
    }
    legacyCalls++;
    check(
        cudnnConvolutionForward(
            handle(s),
            one,
            plan.x,
            CudaOperations.cuda(op.x()).address(),
            plan.w,
            CudaOperations.cuda(op.weight()).address(),
            plan.conv,
            plan.forward,
            columns.address(),
            columns.bytes(),
            zero,
            plan.y,
            CudaOperations.cuda(op.y()).address()),
        () -> "cudnnConvolutionForward " + op.window() + " on stream '" + s.label() + "'");
    return true;
  }

  /**
   * Accumulates {@code op}'s weight gradient and writes its input gradient on cuDNN (not the bias
   * gradient), or answers false before doing anything: the caller's turn.
   */
  synchronized boolean backward(ConvolutionBackward op, CudaStream s) {
    if (!takes(op.x().dtype(), op.inBlock(), op.outBlock())) {
      return false;
    }
    Plan plan = plan(op.window(), op.outChannels(), s);
    if (plan.backwardFilter < 0 || (op.dx() != null && plan.backwardData < 0)) {
      return false;
    }
    CudaBuffer columns = CudaOperations.cuda(op.columns());
    CudaBuffer dy = CudaOperations.cuda(op.dy());
    long x = CudaOperations.cuda(op.x()).address().address();
    long g = dy.address().address();
    long dw = CudaOperations.cuda(op.weightGrad()).address().address();
    long w = CudaOperations.cuda(op.weight()).address().address();
    long dx = op.dx() == null ? 0 : CudaOperations.cuda(op.dx()).address().address();
    boolean planned = plan.filterGraph != null && (op.dx() == null || plan.dataGraph != null);
    if (planned && CudnnGraphPlan.aligned(x, g, dw, w, dx)) {
      long scratch = columns.address().address();
      plan.filterGraph.execute(handle(s), x, dw, g, scratch);
      if (op.dx() != null) {
        plan.dataGraph.execute(handle(s), dx, w, g, scratch);
      }
      return true;
    }
    legacyCalls++;
    check(
        cudnnConvolutionBackwardFilter(
            handle(s),
            one,
            plan.x,
            CudaOperations.cuda(op.x()).address(),
            plan.y,
            dy.address(),
            plan.conv,
            plan.backwardFilter,
            columns.address(),
            columns.bytes(),
            one, // parameter gradients accumulate
            plan.w,
            CudaOperations.cuda(op.weightGrad()).address()),
        () -> "cudnnConvolutionBackwardFilter " + op.window() + " on stream '" + s.label() + "'");
    if (op.dx() != null) {
      check(
          cudnnConvolutionBackwardData(
              handle(s),
              one,
              plan.w,
              CudaOperations.cuda(op.weight()).address(),
              plan.y,
              dy.address(),
              plan.conv,
              plan.backwardData,
              columns.address(),
              columns.bytes(),
              zero,
              plan.x,
              CudaOperations.cuda(op.dx()).address()),
          () -> "cudnnConvolutionBackwardData " + op.window() + " on stream '" + s.label() + "'");
    }
    return true;
  }

  private static boolean takes(DType operands, int inBlock, int outBlock) {
    return operands == DType.F32 && inBlock == 1 && outBlock == 1;
  }

  private Plan plan(ConvWindow win, int out, CudaStream s) {
    Shape key = new Shape(win, out);
    Plan known = plans.get(key);
    if (known != null) {
      return known;
    }
    Plan plan = new Plan();
    check(cudnnCreateTensorDescriptor(plan.x), () -> "creating a tensor descriptor");
    check(cudnnCreateTensorDescriptor(plan.y), () -> "creating a tensor descriptor");
    check(cudnnCreateFilterDescriptor(plan.w), () -> "creating a filter descriptor");
    check(cudnnCreateConvolutionDescriptor(plan.conv), () -> "creating a convolution descriptor");
    plans.put(key, plan); // owned from here: closed with the others
    String shape = win + " with " + out + " filters";
    check(
        cudnnSetTensor4dDescriptor(
            plan.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, win.n(), win.c(), win.h(), win.w()),
        () -> "describing the input of " + shape);
    check(
        cudnnSetTensor4dDescriptor(
            plan.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, win.n(), out, win.oh(), win.ow()),
        () -> "describing the output of " + shape);
    check(
        cudnnSetFilter4dDescriptor(
            plan.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, out, win.c(), win.kh(), win.kw()),
        () -> "describing the weights of " + shape);
    check(
        cudnnSetConvolution2dDescriptor(
            plan.conv,
            win.pad(),
            win.pad(),
            win.stride(),
            win.stride(),
            1,
            1,
            CUDNN_CROSS_CORRELATION,
            CUDNN_DATA_FLOAT),
        () -> "describing the convolution " + shape);
    check(
        cudnnSetConvolutionMathType(plan.conv, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH),
        () -> "setting the math type of " + shape);
    long workspace = 4L * win.columnCount();
    cudnnContext handle = handle(s);
    int[] returned = new int[1];
    try (var perf = new cudnnConvolutionFwdAlgoPerf_t(CUDNN_CONVOLUTION_FWD_ALGO_COUNT)) {
      check(
          cudnnGetConvolutionForwardAlgorithm_v7(
              handle,
              plan.x,
              plan.w,
              plan.conv,
              plan.y,
              CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
              returned,
              perf),
          () -> "ranking forward algorithms for " + shape);
      for (int i = returned[0] - 1; i >= 0; i--) {
        perf.position(i);
        if (usable(perf.status(), perf.memory(), perf.determinism(), perf.mathType(), workspace)) {
          plan.forward = perf.algo();
        }
      }
    }
    try (var perf = new cudnnConvolutionBwdDataAlgoPerf_t(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT)) {
      check(
          cudnnGetConvolutionBackwardDataAlgorithm_v7(
              handle,
              plan.w,
              plan.y,
              plan.conv,
              plan.x,
              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
              returned,
              perf),
          () -> "ranking backward-data algorithms for " + shape);
      for (int i = returned[0] - 1; i >= 0; i--) {
        perf.position(i);
        if (usable(perf.status(), perf.memory(), perf.determinism(), perf.mathType(), workspace)) {
          plan.backwardData = perf.algo();
        }
      }
    }
    try (var perf =
        new cudnnConvolutionBwdFilterAlgoPerf_t(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT)) {
      check(
          cudnnGetConvolutionBackwardFilterAlgorithm_v7(
              handle,
              plan.x,
              plan.y,
              plan.conv,
              plan.w,
              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
              returned,
              perf),
          () -> "ranking backward-filter algorithms for " + shape);
      for (int i = returned[0] - 1; i >= 0; i--) {
        perf.position(i);
        if (usable(perf.status(), perf.memory(), perf.determinism(), perf.mathType(), workspace)) {
          plan.backwardFilter = perf.algo();
        }
      }
    }
    plan.forwardGraph = graph(handle, CudnnGraphPlan.Direction.FORWARD, win, out, workspace);
    plan.dataGraph = graph(handle, CudnnGraphPlan.Direction.BACKWARD_DATA, win, out, workspace);
    plan.filterGraph = graph(handle, CudnnGraphPlan.Direction.BACKWARD_FILTER, win, out, workspace);
    LOG.debug(
        "cudnn: {}: graph plans forward {}, backward data {}, backward filter {}",
        shape,
        plan.forwardGraph != null,
        plan.dataGraph != null,
        plan.filterGraph != null);
    LOG.debug(
        "cudnn: {}: algorithms forward {}, backward data {}, backward filter {} ({} bytes of"
            + " workspace at most)",
        shape,
        plan.forward,
        plan.backwardData,
        plan.backwardFilter,
        workspace);
    return plan;
  }

  /**
   * {@code direction}'s execution plan, or null where the graph API offers none that fits or
   * refuses the shape: the legacy call then runs it (said once per shape in the log).
   */
  private CudnnGraphPlan graph(
      cudnnContext handle,
      CudnnGraphPlan.Direction direction,
      ConvWindow win,
      int out,
      long workspace) {
    try {
      return CudnnGraphPlan.build(handle, direction, win, out, tf32, workspace).orElse(null);
    } catch (BackendException e) {
      LOG.info("cudnn: the legacy call runs {} {}: {}", direction, win, e.getMessage());
      return null;
    }
  }

  /** A ranked algorithm the engine may use: it runs, repeats its results and fits the workspace. */
  private boolean usable(int status, long memory, int determinism, int mathType, long workspace) {
    boolean roundsToTf32 =
        mathType == TENSOR_OP_MATH || mathType == TENSOR_OP_MATH_ALLOW_CONVERSION;
    return status == CUDNN_STATUS_SUCCESS
        && determinism == CUDNN_DETERMINISTIC
        && memory <= workspace
        && (tf32 || !roundsToTf32);
  }

  /** The stream's handle, made on its first convolution, with the context current here. */
  private cudnnContext handle(CudaStream stream) {
    context.bind();
    cudnnContext handle = handles.get(stream);
    if (handle == null) {
      handle = new cudnnContext();
      check(cudnnCreate(handle), () -> "creating a cuDNN handle for '" + stream.label() + "'");
      handles.put(stream, handle);
      check(cudnnSetStream(handle, stream.library()), () -> "setting cuDNN's stream");
    }
    return handle;
  }

  private static void check(int status, Supplier<String> what) {
    if (status != CUDNN_STATUS_SUCCESS) {
      throw new BackendException(
          "cuda: " + what.get() + " failed: " + cudnnGetErrorString(status).getString());
    }
  }

  @Override
  public synchronized void close() {
    context.bind();
    plans.values().forEach(Plan::close);
    plans.clear();
    for (cudnnContext handle : handles.values()) {
      int status = cudnnDestroy(handle);
      if (status != CUDNN_STATUS_SUCCESS) {
        LOG.warn("cuda: destroying a cuDNN handle reported {}", status);
      }
    }
    handles.clear();
    one.close();
    zero.close();
  }
}
