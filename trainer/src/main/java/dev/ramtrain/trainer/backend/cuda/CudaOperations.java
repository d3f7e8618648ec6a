package dev.ramtrain.trainer.backend.cuda;

import dev.ramtrain.trainer.backend.AdamWMath;
import dev.ramtrain.trainer.backend.ArgumentChecks;
import dev.ramtrain.trainer.backend.ColumnSumOrder;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.GradClipMath;
import dev.ramtrain.trainer.backend.OperationTable;
import dev.ramtrain.trainer.backend.lowering.ConvolutionLowering;
import dev.ramtrain.trainer.backend.ops.AdamWStep;
import dev.ramtrain.trainer.backend.ops.Add;
import dev.ramtrain.trainer.backend.ops.AddBias;
import dev.ramtrain.trainer.backend.ops.AddChannelBias;
import dev.ramtrain.trainer.backend.ops.BatchNormBackward;
import dev.ramtrain.trainer.backend.ops.BatchNormInference;
import dev.ramtrain.trainer.backend.ops.BatchNormTrain;
import dev.ramtrain.trainer.backend.ops.BlendBatch;
import dev.ramtrain.trainer.backend.ops.ClipGradNorm;
import dev.ramtrain.trainer.backend.ops.Col2im;
import dev.ramtrain.trainer.backend.ops.ColorJitter;
import dev.ramtrain.trainer.backend.ops.ConvWindow;
import dev.ramtrain.trainer.backend.ops.Convert;
import dev.ramtrain.trainer.backend.ops.Convolution;
import dev.ramtrain.trainer.backend.ops.ConvolutionBackward;
import dev.ramtrain.trainer.backend.ops.CutMixBatch;
import dev.ramtrain.trainer.backend.ops.DepthwiseConvolution;
import dev.ramtrain.trainer.backend.ops.DepthwiseConvolutionBackward;
import dev.ramtrain.trainer.backend.ops.DropoutMask;
import dev.ramtrain.trainer.backend.ops.Fill;
import dev.ramtrain.trainer.backend.ops.Gelu;
import dev.ramtrain.trainer.backend.ops.GeluBackward;
import dev.ramtrain.trainer.backend.ops.Gemm;
import dev.ramtrain.trainer.backend.ops.GemmStridedBatched;
import dev.ramtrain.trainer.backend.ops.Im2col;
import dev.ramtrain.trainer.backend.ops.LayerNormBackward;
import dev.ramtrain.trainer.backend.ops.LayerNormForward;
import dev.ramtrain.trainer.backend.ops.Lerp;
import dev.ramtrain.trainer.backend.ops.MaxPool;
import dev.ramtrain.trainer.backend.ops.MaxPoolBackward;
import dev.ramtrain.trainer.backend.ops.Multiply;
import dev.ramtrain.trainer.backend.ops.NormalizeImages;
import dev.ramtrain.trainer.backend.ops.Relu;
import dev.ramtrain.trainer.backend.ops.ReluBackward;
import dev.ramtrain.trainer.backend.ops.SgdStep;
import dev.ramtrain.trainer.backend.ops.Softmax;
import dev.ramtrain.trainer.backend.ops.SoftmaxBackward;
import dev.ramtrain.trainer.backend.ops.SoftmaxCrossEntropy;
import dev.ramtrain.trainer.backend.ops.StridedCopy;
import dev.ramtrain.trainer.backend.ops.SumChannels;
import dev.ramtrain.trainer.backend.ops.SumRows;
import jcuda.driver.CUdeviceptr;

/**
 * The CUDA engine's implementation of every operation: GEMM by the {@link GemmEngine}, the rest as
 * launches of the kernels in trainer/src/main/cuda, their arguments in the order the kernels
 * declare them. Elementwise kernels run one thread per element ({@link CudaKernels#launchOver});
 * the per-channel reductions one block per channel, the per-row ones (layer norm, softmax) a warp
 * per row ({@link CudaKernels#launchRows}), the sums down columns (bias and layer norm parameter
 * gradients) a block per {@link #COLUMNS} columns.
 */
final class CudaOperations {
  /** Sums down columns: columns a block (RT_COLUMNS), {@link ColumnSumOrder#LANES} lanes each. */
  private static final int COLUMNS = 32;

  /** A transpose's tile edge and the thread rows that walk it (RT_TILE, RT_TILE_ROWS). */
  private static final int TILE = 32;

  private static final int TILE_ROWS = 8;

  /** Positions a block of the depthwise weight gradient takes, and the most chunks. */
  private static final long DEPTHWISE_CHUNK = 4_096;

  private static final int MAX_DEPTHWISE_CHUNKS = 64;

  /** The most blocks along a grid's z (the transpose's outer index; the kernel strides). */
  private static final int MAX_GRID_Z = 65_535;

  private final CudaKernels kernels;

  private CudaOperations(CudaKernels kernels) {
    this.kernels = kernels;
  }

  static OperationTable<CudaStream> table(CudaKernels kernels, GemmEngine gemm) {
    CudaOperations ops = new CudaOperations(kernels);
    return new OperationTable<CudaStream>("cuda")
        .add(Gemm.class, (op, s) -> gemm.gemm(s, requireLive(op)))
        .add(GemmStridedBatched.class, (op, s) -> gemm.gemmStridedBatched(s, requireLive(op)))
        .addLowered(Convolution.class, ConvolutionLowering::forward)
        .addLowered(ConvolutionBackward.class, ConvolutionLowering::backward)
        .add(Fill.class, ops::fill)
        .add(Convert.class, ops::convert)
        .add(AddBias.class, ops::addBias)
        .add(SumRows.class, ops::sumRows)
        .add(Relu.class, (op, s) -> ops.unary(Kernel.RELU, s, op.x(), op.y()))
        .add(ReluBackward.class, ops::reluBackward)
        .add(Gelu.class, (op, s) -> ops.unary(Kernel.GELU, s, op.x(), op.y()))
        .add(GeluBackward.class, ops::geluBackward)
        .add(Add.class, (op, s) -> ops.binary(Kernel.ADD, s, op.a(), op.b(), op.out()))
        .add(Multiply.class, (op, s) -> ops.binary(Kernel.MULTIPLY, s, op.a(), op.b(), op.out()))
        .add(Lerp.class, ops::lerp)
        .add(SoftmaxCrossEntropy.class, ops::softmaxCrossEntropy)
        .add(BlendBatch.class, ops::blendBatch)
        .add(ColorJitter.class, ops::colorJitter)
        .add(CutMixBatch.class, ops::cutMixBatch)
        .add(NormalizeImages.class, ops::normalizeImages)
        .add(SgdStep.class, ops::sgdStep)
        .add(AdamWStep.class, ops::adamwStep)
        .add(Im2col.class, ops::im2col)
        .add(Col2im.class, ops::col2im)
        .add(AddChannelBias.class, ops::addChannelBias)
        .add(SumChannels.class, ops::sumChannels)
        .addNchw(MaxPool.class, MaxPool::channelBlock, ops::maxPool)
        .addNchw(MaxPoolBackward.class, MaxPoolBackward::channelBlock, ops::maxPoolBackward)
        .add(ClipGradNorm.class, ops::clipGradNorm)
        .add(DropoutMask.class, ops::dropoutMask)
        .addNchw(BatchNormTrain.class, BatchNormTrain::channelBlock, ops::batchNormTrain)
        .addNchw(
            BatchNormInference.class, BatchNormInference::channelBlock, ops::batchNormInference)
        .addNchw(BatchNormBackward.class, BatchNormBackward::channelBlock, ops::batchNormBackward)
        .add(LayerNormForward.class, ops::layerNormForward)
        .add(LayerNormBackward.class, ops::layerNormBackward)
        .add(Softmax.class, ops::softmax)
        .add(SoftmaxBackward.class, ops::softmaxBackward)
        .add(StridedCopy.class, ops::stridedCopy)
        .add(DepthwiseConvolution.class, ops::depthwiseConvolution)
        .add(DepthwiseConvolutionBackward.class, ops::depthwiseConvolutionBackward);
  }

  private void convert(Convert op, CudaStream s) {
    kernels.launchOver(
        op.narrowing() ? Kernel.TO_BF16 : Kernel.FROM_BF16,
        s,
        op.src().count(),
        new KernelArgs().buffer(cuda(op.src())).buffer(cuda(op.dst())).i64(op.src().count()));
  }

  private void addBias(AddBias op, CudaStream s) {
    kernels.launchOver(
        Kernel.ADD_BIAS,
        s,
        (long) op.rows() * op.cols(),
        new KernelArgs()
            .buffer(cuda(op.y()))
            .buffer(cuda(op.bias()))
            .i32(op.rows())
            .i32(op.cols()));
  }

  private void sumRows(SumRows op, CudaStream s) {
    if (op.cols() == 0) {
      return;
    }
    int groups = ColumnSumOrder.groups(op.rows(), op.cols());
    CUdeviceptr partials = s.scratch().pointer();
    kernels.launch(
        Kernel.SUM_ROWS,
        s,
        (op.cols() + COLUMNS - 1) / COLUMNS,
        groups,
        1,
        COLUMNS,
        ColumnSumOrder.LANES,
        new KernelArgs().buffer(cuda(op.x())).pointer(partials).i32(op.rows()).i32(op.cols()));
    columnTotals(s, partials, groups, op.cols(), cuda(op.out()), op.beta());
  }

  /** out = beta · out + the groups' partial sums at {@code partials}, in group order. */
  private void columnTotals(
      CudaStream s, CUdeviceptr partials, int groups, int cols, CudaBuffer out, float beta) {
    kernels.launchOver(
        Kernel.COLUMN_TOTALS,
        s,
        cols,
        new KernelArgs().pointer(partials).i32(groups).i32(cols).buffer(out).f32(beta));
  }

  private void reluBackward(ReluBackward op, CudaStream s) {
    binary(Kernel.RELU_BACKWARD, s, op.x(), op.dy(), op.dx());
  }

  private void geluBackward(GeluBackward op, CudaStream s) {
    binary(Kernel.GELU_BACKWARD, s, op.x(), op.dy(), op.dx());
  }

  private void softmaxCrossEntropy(SoftmaxCrossEntropy op, CudaStream s) {
    kernels.launchOver(
        Kernel.SOFTMAX_XENT,
        s,
        op.rows(),
        new KernelArgs()
            .buffer(cuda(op.logits()))
            .buffer(cuda(op.labels()))
            .i32(op.rows())
            .i32(op.classes())
            .f32(op.smoothing())
            .f32(op.mix())
            .buffer(cuda(op.loss()))
            .buffer(cuda(op.dlogits()))
            .pointer(s.statusWord()));
  }

  private void blendBatch(BlendBatch op, CudaStream s) {
    kernels.launchOver(
        Kernel.BLEND_BATCH,
        s,
        (long) ((op.batch() + 1) / 2) * op.sampleSize(),
        new KernelArgs()
            .buffer(cuda(op.x()))
            .i32(op.batch())
            .i64(op.sampleSize())
            .f32(op.lambda())
            .f32(op.oneMinus()));
  }

  private void cutMixBatch(CutMixBatch op, CudaStream s) {
    kernels.launchOver(
        Kernel.CUTMIX_BATCH,
        s,
        (long) (op.batch() / 2)
            * op.channels()
            * (op.bottom() - op.top())
            * (op.right() - op.left()),
        new KernelArgs()
            .buffer(cuda(op.x()))
            .i32(op.batch())
            .i32(op.channels())
            .i32(op.height())
            .i32(op.width())
            .i32(op.top())
            .i32(op.bottom())
            .i32(op.left())
            .i32(op.right()));
  }

  private void sgdStep(SgdStep op, CudaStream s) {
    kernels.launchOver(
        Kernel.SGD_STEP,
        s,
        op.param().count(),
        new KernelArgs()
            .buffer(cuda(op.param()))
            .buffer(cuda(op.grad()))
            .buffer(cuda(op.momentum()))
            .i64(op.param().count())
            .f32(op.lr())
            .f32(op.mu())
            .f32(op.weightDecay())
            .i32(op.nesterov()));
  }

  private void im2col(Im2col op, CudaStream s) {
    kernels.launchOver(
        Kernel.IM2COL,
        s,
        op.cols().count(),
        convArgs(cuda(op.x()), op.window()).buffer(cuda(op.cols())));
  }

  private void col2im(Col2im op, CudaStream s) {
    kernels.launchOver(
        Kernel.COL2IM,
        s,
        op.dx().count(),
        convArgs(cuda(op.cols()), op.window()).buffer(cuda(op.dx())));
  }

  private void addChannelBias(AddChannelBias op, CudaStream s) {
    kernels.launchOver(
        Kernel.ADD_CHANNEL_BIAS,
        s,
        op.y().count(),
        new KernelArgs()
            .buffer(cuda(op.y()))
            .buffer(cuda(op.bias()))
            .i32(op.n())
            .i32(op.c())
            .i32(op.hw()));
  }

  private void sumChannels(SumChannels op, CudaStream s) {
    perChannel(
        Kernel.SUM_CHANNELS,
        s,
        op.c(),
        new KernelArgs()
            .buffer(cuda(op.dy()))
            .buffer(cuda(op.out()))
            .i32(op.n())
            .i32(op.c())
            .i32(op.hw()));
  }

  private void maxPool(MaxPool op, CudaStream s) {
    kernels.launchOver(
        Kernel.MAX_POOL,
        s,
        op.y().count(),
        new KernelArgs()
            .buffer(cuda(op.x()))
            .i32(op.n())
            .i32(op.c())
            .i32(op.h())
            .i32(op.w())
            .i32(op.k())
            .i32(op.stride())
            .i32(op.pad())
            .i32(op.oh())
            .i32(op.ow())
            .buffer(cuda(op.y()))
            .buffer(cuda(op.argmax())));
  }

  private void maxPoolBackward(MaxPoolBackward op, CudaStream s) {
    kernels.launchOver(
        Kernel.MAX_POOL_BACKWARD,
        s,
        (long) op.n() * op.c() * op.h() * op.w(),
        new KernelArgs()
            .buffer(cuda(op.dy()))
            .buffer(cuda(op.argmax()))
            .i32(op.n() * op.c())
            .i32(op.h())
            .i32(op.w())
            .i32(op.k())
            .i32(op.stride())
            .i32(op.pad())
            .i32(op.oh())
            .i32(op.ow())
            .buffer(cuda(op.dx())));
  }

  private void dropoutMask(DropoutMask op, CudaStream s) {
    kernels.launchOver(
        Kernel.DROPOUT_MASK,
        s,
        op.mask().count(),
        new KernelArgs()
            .f32(op.p())
            .f32(op.keepScale())
            .i64(op.seed())
            .buffer(cuda(op.mask()))
            .i64(op.mask().count()));
  }

  /**
   * Three launches: each (chunk, channel) block's sums into the stream's scratch, a thread a
   * channel for the statistics and the affine map (after the sums in the scratch), then the map.
   */
  private void batchNormTrain(BatchNormTrain op, CudaStream s) {
    ArgumentChecks.requireUnfused(op.reluMask(), "batch norm");
    BatchNormChunks chunks = BatchNormChunks.of(op.n(), op.c(), op.hw());
    CUdeviceptr partials = s.scratch().pointer();
    CUdeviceptr affine = partials.withByteOffset(chunks.partialBytes());
    kernels.launch(
        Kernel.BATCHNORM_SUMS,
        s,
        chunks.count(),
        op.c(),
        1,
        CudaKernels.BLOCK,
        1,
        new KernelArgs()
            .buffer(cuda(op.x()))
            .i32(op.n())
            .i32(op.c())
            .i32(op.hw())
            .i64(chunks.length())
            .pointer(partials));
    kernels.launchOver(
        Kernel.BATCHNORM_STATISTICS,
        s,
        op.c(),
        new KernelArgs()
            .pointer(partials)
            .i32(chunks.count())
            .i32(op.c())
            .i64((long) op.n() * op.hw())
            .buffer(cuda(op.gamma()))
            .buffer(cuda(op.beta()))
            .f32(op.eps())
            .f32(op.momentum())
            .buffer(cuda(op.runningMean()))
            .buffer(cuda(op.runningVar()))
            .buffer(cuda(op.savedMean()))
            .buffer(cuda(op.savedInvStd()))
            .pointer(affine));
    perPlane(
        Kernel.BATCHNORM_APPLY,
        s,
        op.n() * op.c(),
        op.hw(),
        new KernelArgs()
            .buffer(cuda(op.x()))
            .i32(op.c())
            .i32(op.hw())
            .pointer(affine)
            .buffer(cuda(op.y())));
  }

  /** A launch of a block row per plane: enough blocks along y to cover {@code hw} once. */
  private void perPlane(Kernel kernel, CudaStream s, int planes, int hw, KernelArgs args) {
    if (planes == 0 || hw == 0) {
      return;
    }
    int across = Math.min(MAX_GRID_Z, (hw + CudaKernels.BLOCK - 1) / CudaKernels.BLOCK);
    kernels.launch(kernel, s, planes, across, 1, Math.min(CudaKernels.BLOCK, hw), 1, args);
  }

  private void batchNormInference(BatchNormInference op, CudaStream s) {
    kernels.launchOver(
        Kernel.BATCHNORM_INFERENCE,
        s,
        op.x().count(),
        new KernelArgs()
            .buffer(cuda(op.x()))
            .i32(op.n())
            .i32(op.c())
            .i32(op.hw())
            .buffer(cuda(op.gamma()))
            .buffer(cuda(op.beta()))
            .f32(op.eps())
            .buffer(cuda(op.runningMean()))
            .buffer(cuda(op.runningVar()))
            .buffer(cuda(op.y())));
  }

  /** The same three steps as {@link #batchNormTrain}, over dy and dy · xhat. */
  private void batchNormBackward(BatchNormBackward op, CudaStream s) {
    ArgumentChecks.requireUnfused(op.reluMask(), "batch norm");
    BatchNormChunks chunks = BatchNormChunks.of(op.n(), op.c(), op.hw());
    CUdeviceptr partials = s.scratch().pointer();
    CUdeviceptr coefficients = partials.withByteOffset(chunks.partialBytes());
    kernels.launch(
        Kernel.BATCHNORM_BACKWARD_SUMS,
        s,
        chunks.count(),
        op.c(),
        1,
        CudaKernels.BLOCK,
        1,
        new KernelArgs()
            .buffer(cuda(op.x()))
            .buffer(cuda(op.dy()))
            .i32(op.n())
            .i32(op.c())
            .i32(op.hw())
            .i64(chunks.length())
            .buffer(cuda(op.savedMean()))
            .buffer(cuda(op.savedInvStd()))
            .pointer(partials));
    kernels.launchOver(
        Kernel.BATCHNORM_BACKWARD_STATISTICS,
        s,
        op.c(),
        new KernelArgs()
            .pointer(partials)
            .i32(chunks.count())
            .i32(op.c())
            .i64((long) op.n() * op.hw())
            .buffer(cuda(op.gamma()))
            .buffer(cuda(op.savedInvStd()))
            .buffer(cuda(op.dgamma()))
            .buffer(cuda(op.dbeta()))
            .pointer(coefficients));
    perPlane(
        Kernel.BATCHNORM_BACKWARD_APPLY,
        s,
        op.n() * op.c(),
        op.hw(),
        new KernelArgs()
            .buffer(cuda(op.x()))
            .buffer(cuda(op.dy()))
            .i32(op.c())
            .i32(op.hw())
            .buffer(cuda(op.savedMean()))
            .buffer(cuda(op.savedInvStd()))
            .pointer(coefficients)
            .buffer(cuda(op.dx())));
  }

  private void layerNormForward(LayerNormForward op, CudaStream s) {
    kernels.launchRows(
        Kernel.LAYERNORM,
        s,
        (long) op.outer() * op.inner(),
        new KernelArgs()
            .buffer(cuda(op.x()))
            .i32(op.outer())
            .i32(op.size())
            .i32(op.inner())
            .buffer(cuda(op.gamma()))
            .buffer(cuda(op.beta()))
            .f32(op.eps())
            .buffer(cuda(op.y()))
            .buffer(cuda(op.savedMean()))
            .buffer(cuda(op.savedInvStd())));
  }

  private void softmax(Softmax op, CudaStream s) {
    kernels.launchRows(
        Kernel.SOFTMAX,
        s,
        op.rows(),
        new KernelArgs().buffer(cuda(op.x())).i32(op.rows()).i32(op.cols()).buffer(cuda(op.y())));
  }

  private void softmaxBackward(SoftmaxBackward op, CudaStream s) {
    kernels.launchRows(
        Kernel.SOFTMAX_BACKWARD,
        s,
        op.rows(),
        new KernelArgs()
            .buffer(cuda(op.y()))
            .buffer(cuda(op.dy()))
            .i32(op.rows())
            .i32(op.cols())
            .buffer(cuda(op.dx())));
  }

  private void depthwiseConvolution(DepthwiseConvolution op, CudaStream s) {
    kernels.launchOver(
        Kernel.DEPTHWISE_FORWARD,
        s,
        op.y().count(),
        depthwiseArgs(
            cuda(op.x()), cuda(op.weight()), cuda(op.y()), op.n(), op.c(), op.h(), op.w(), op.k()));
  }

  /** The weight gradient (a block per channel and tap), then the input gradient. */
  /**
   * The weight gradient for k = 3, 5, 7 in chunks of about {@link #DEPTHWISE_CHUNK} positions a
   * block (each position's dy read once), their partial sums in the stream's scratch; any other k,
   * or more taps than the scratch holds, a block per (channel, tap). Then the input gradient.
   */
  private void depthwiseConvolutionBackward(DepthwiseConvolutionBackward op, CudaStream s) {
    int taps = op.c() * op.k() * op.k();
    long positions = (long) op.n() * op.h() * op.w();
    long room = CudaStream.SCRATCH_BYTES / (Double.BYTES * (long) taps);
    if ((op.k() == 3 || op.k() == 5 || op.k() == 7) && room >= 1) {
      int chunks =
          (int)
              Math.max(
                  1,
                  Math.min(
                      Math.min(room, MAX_DEPTHWISE_CHUNKS),
                      (positions + DEPTHWISE_CHUNK - 1) / DEPTHWISE_CHUNK));
      long chunk = (positions + chunks - 1) / chunks;
      CUdeviceptr partials = s.scratch().pointer();
      kernels.launch(
          Kernel.DEPTHWISE_WEIGHT_PARTIALS,
          s,
          op.c(),
          chunks,
          1,
          CudaKernels.BLOCK,
          1,
          new KernelArgs()
              .buffer(cuda(op.x()))
              .buffer(cuda(op.dy()))
              .pointer(partials)
              .i32(op.n())
              .i32(op.c())
              .i32(op.h())
              .i32(op.w())
              .i32(op.k())
              .i64(chunk));
      kernels.launchOver(
          Kernel.DEPTHWISE_WEIGHT_TOTALS,
          s,
          taps,
          new KernelArgs().pointer(partials).i32(chunks).i32(taps).buffer(cuda(op.weightGrad())));
    } else {
      perChannel(
          Kernel.DEPTHWISE_BACKWARD_WEIGHT,
          s,
          taps,
          depthwiseArgs(
              cuda(op.x()),
              cuda(op.dy()),
              cuda(op.weightGrad()),
              op.n(),
              op.c(),
              op.h(),
              op.w(),
              op.k()));
    }
    if (op.dx() != null) {
      kernels.launchOver(
          Kernel.DEPTHWISE_BACKWARD_DATA,
          s,
          op.dx().count(),
          depthwiseArgs(
              cuda(op.dy()),
              cuda(op.weight()),
              cuda(op.dx()),
              op.n(),
              op.c(),
              op.h(),
              op.w(),
              op.k()));
    }
  }

  /** The depthwise kernels' arguments: two inputs, the output, then n, c, h, w, k. */
  private static KernelArgs depthwiseArgs(
      CudaBuffer a, CudaBuffer b, CudaBuffer out, int n, int c, int h, int w, int k) {
    return new KernelArgs().buffer(a).buffer(b).buffer(out).i32(n).i32(c).i32(h).i32(w).i32(k);
  }

  /**
   * An accumulating copy walks i in order (a thread per (r, j, k)); a plain one runs a thread per
   * element, or, where it transposes j and k (one contiguous in the source, the other in the
   * destination: NCHW planes to channels-last rows), 32 × 32 tiles.
   */
  private void stridedCopy(StridedCopy op, CudaStream s) {
    StridedCopy.Strides from = op.srcStrides();
    StridedCopy.Strides to = op.dstStrides();
    StridedCopy.Repeat repeat = op.repeat();
    long elements = (long) repeat.times() * op.n0() * op.n1() * op.n2();
    if (elements == 0) {
      return;
    }
    if (op.accumulate()) {
      kernels.launchOver(
          Kernel.STRIDED_COPY, s, (long) repeat.times() * op.n1() * op.n2(), stridedArgs(op, true));
    } else if (from.s1() == 1 && to.s2() == 1 && tiles(op.n1(), op.n2())) {
      transposeTiles(op, s, op.n1(), to.s1(), op.n2(), from.s2());
    } else if (from.s2() == 1 && to.s1() == 1 && tiles(op.n2(), op.n1())) {
      transposeTiles(op, s, op.n2(), to.s2(), op.n1(), from.s1());
    } else {
      kernels.launchOver(Kernel.STRIDED_ASSIGN, s, elements, stridedArgs(op, false));
    }
  }

  /**
   * A strided copy's kernel arguments: source and strides, destination and strides, the counts, the
   * accumulate flag where the kernel takes one ({@code withFlag}), the repeat.
   */
  private static KernelArgs stridedArgs(StridedCopy op, boolean withFlag) {
    StridedCopy.Strides from = op.srcStrides();
    StridedCopy.Strides to = op.dstStrides();
    KernelArgs args =
        new KernelArgs()
            .buffer(cuda(op.src()))
            .i64(from.s0())
            .i64(from.s1())
            .i64(from.s2())
            .buffer(cuda(op.dst()))
            .i64(to.s0())
            .i64(to.s1())
            .i64(to.s2())
            .i32(op.n0())
            .i32(op.n1())
            .i32(op.n2());
    if (withFlag) {
      args.i32(op.accumulate());
    }
    return args.i32(op.repeat().times()).i64(op.repeat().srcStep()).i64(op.repeat().dstStep());
  }

  /** Whether a transpose of {@code na} by {@code nb} is worth tiles and fits a grid's y. */
  private static boolean tiles(int na, int nb) {
    return na > 1 && nb > 1 && (nb + TILE - 1) / TILE <= MAX_GRID_Z;
  }

  /**
   * {@code op} as a transpose of axis a ({@code na} long, contiguous in the source, {@code da}
   * apart in the destination) and axis b ({@code nb}, {@code sb} apart in the source, contiguous in
   * the destination).
   */
  private void transposeTiles(StridedCopy op, CudaStream s, int na, long da, int nb, long sb) {
    long outer = (long) op.n0() * op.repeat().times();
    kernels.launch(
        Kernel.TRANSPOSE_TILES,
        s,
        (na + TILE - 1) / TILE,
        (nb + TILE - 1) / TILE,
        (int) Math.min(outer, MAX_GRID_Z),
        TILE,
        TILE_ROWS,
        new KernelArgs()
            .buffer(cuda(op.src()))
            .i64(1)
            .i64(sb)
            .buffer(cuda(op.dst()))
            .i64(da)
            .i64(1)
            .i32(na)
            .i32(nb)
            .i64(op.srcStrides().s0())
            .i64(op.dstStrides().s0())
            .i32(op.n0())
            .i32(op.repeat().times())
            .i64(op.repeat().srcStep())
            .i64(op.repeat().dstStep()));
  }

  /**
   * Two launches: each group's dx, then each feature's dgamma and dbeta over the groups (a block of
   * features, the groups split over lanes).
   */
  private void layerNormBackward(LayerNormBackward op, CudaStream s) {
    kernels.launchRows(
        Kernel.LAYERNORM_BACKWARD_DX,
        s,
        (long) op.outer() * op.inner(),
        new KernelArgs()
            .buffer(cuda(op.x()))
            .buffer(cuda(op.dy()))
            .i32(op.outer())
            .i32(op.size())
            .i32(op.inner())
            .buffer(cuda(op.gamma()))
            .buffer(cuda(op.savedMean()))
            .buffer(cuda(op.savedInvStd()))
            .buffer(cuda(op.dx())));
    int groups = ColumnSumOrder.groups((long) op.outer() * op.inner(), op.size());
    CUdeviceptr partials = s.scratch().pointer();
    kernels.launch(
        Kernel.LAYERNORM_BACKWARD_PARAMS,
        s,
        (op.size() + COLUMNS - 1) / COLUMNS,
        groups,
        1,
        COLUMNS,
        ColumnSumOrder.LANES,
        new KernelArgs()
            .buffer(cuda(op.x()))
            .buffer(cuda(op.dy()))
            .i32(op.outer())
            .i32(op.size())
            .i32(op.inner())
            .buffer(cuda(op.savedMean()))
            .buffer(cuda(op.savedInvStd()))
            .pointer(partials));
    columnTotals(s, partials, groups, op.size(), cuda(op.dgamma()), 1f);
    columnTotals(
        s,
        partials.withByteOffset((long) Double.BYTES * groups * op.size()),
        groups,
        op.size(),
        cuda(op.dbeta()),
        1f);
  }

  private void fill(Fill op, CudaStream s) {
    kernels.launchOver(
        Kernel.FILL,
        s,
        op.x().count(),
        new KernelArgs().buffer(cuda(op.x())).i64(op.x().count()).f32(op.value()));
  }

  private void lerp(Lerp op, CudaStream s) {
    long n = op.target().count();
    kernels.launchOver(
        Kernel.LERP,
        s,
        n,
        new KernelArgs()
            .buffer(cuda(op.target()))
            .buffer(cuda(op.source()))
            .i64(n)
            .f32(op.weight()));
  }

  private void unary(Kernel kernel, CudaStream s, DeviceBuffer x, DeviceBuffer y) {
    kernels.launchOver(
        kernel, s, x.count(), new KernelArgs().buffer(cuda(x)).buffer(cuda(y)).i64(x.count()));
  }

  /** An elementwise kernel of two inputs and one output, all of {@code out}'s length. */
  private void binary(
      Kernel kernel, CudaStream s, DeviceBuffer a, DeviceBuffer b, DeviceBuffer out) {
    kernels.launchOver(
        kernel,
        s,
        out.count(),
        new KernelArgs().buffer(cuda(a)).buffer(cuda(b)).buffer(cuda(out)).i64(out.count()));
  }

  /** A block of CudaKernels.BLOCK threads per channel (the block-reduction kernels). */
  private void perChannel(Kernel kernel, CudaStream s, int channels, KernelArgs args) {
    if (channels > 0) {
      kernels.launch(kernel, s, channels, 1, 1, CudaKernels.BLOCK, 1, args);
    }
  }

  /**
   * A block per image: the jitter's contrast sums each image's grey (RtChannelAffine: std, mean).
   */
  private void colorJitter(ColorJitter op, CudaStream s) {
    float[] unit = new float[8];
    for (int ch = 0; ch < op.channels(); ch++) {
      unit[ch] = op.std()[ch];
      unit[4 + ch] = op.mean()[ch];
    }
    perChannel(
        Kernel.COLOR_JITTER,
        s,
        op.batch(),
        new KernelArgs()
            .buffer(cuda(op.x()))
            .i32(op.batch())
            .i32(op.channels())
            .i32(op.height() * op.width())
            .floats(unit)
            .f32(op.brightness())
            .f32(op.contrast())
            .f32(op.saturation())
            .i64(op.seed()));
  }

  private void normalizeImages(NormalizeImages op, CudaStream s) {
    if (op.c() > 4) {
      throw new IllegalArgumentException(
          "the cuda backend normalizes images of up to 4 channels, got " + op.c());
    }
    float[] affine = new float[8]; // the kernel's per-channel x * scale - shift
    for (int ch = 0; ch < op.c(); ch++) {
      affine[ch] = op.scale(ch);
      affine[4 + ch] = op.shift(ch);
    }
    kernels.launchOver(
        Kernel.NORMALIZE_IMAGES,
        s,
        op.u8().count(),
        new KernelArgs()
            .buffer(cuda(op.u8()))
            .i32(op.n())
            .i32(op.h())
            .i32(op.w())
            .i32(op.c())
            .floats(affine)
            .buffer(cuda(op.out())));
  }

  private void adamwStep(AdamWStep op, CudaStream s) {
    AdamWMath math = op.math();
    kernels.launchOver(
        Kernel.ADAMW_STEP,
        s,
        op.param().count(),
        new KernelArgs()
            .buffer(cuda(op.param()))
            .buffer(cuda(op.grad()))
            .buffer(cuda(op.m()))
            .buffer(cuda(op.v()))
            .i64(op.param().count())
            .f32(math.beta1())
            .f32(math.beta2())
            .f32(math.eps())
            .f32(math.decay())
            .f32(math.stepSize())
            .f32(math.sqrtCorrection()));
  }

  /**
   * Three launches and no host round-trip: chunk sums (GradClipMath's chunks) into the stream's
   * scratch, the norm and factor from them in order, then the scaling, which reads the factor on
   * the device.
   */
  private void clipGradNorm(ClipGradNorm op, CudaStream s) {
    CudaBuffer g = cuda(op.grads());
    int n = Math.toIntExact(g.count());
    int chunks = GradClipMath.chunks(n);
    long chunkSize = (n + chunks - 1) / chunks;
    var partials = s.scratch().pointer();
    var coef = s.scratch().pointer().withByteOffset(8L * CudaStream.CLIP_CHUNKS);
    if (n > 0) {
      kernels.launch(
          Kernel.CLIP_CHUNK_SQUARES,
          s,
          chunks,
          1,
          1,
          CudaKernels.BLOCK,
          1,
          new KernelArgs().buffer(g).i64(n).i64(chunkSize).pointer(partials));
    } else {
      fill(new Fill(s.scratch().view(0, 2 * CudaStream.CLIP_CHUNKS), 0f), s);
    }
    kernels.launch(
        Kernel.CLIP_NORM,
        s,
        1,
        1,
        1,
        1,
        1,
        new KernelArgs()
            .pointer(partials)
            .i32(chunks)
            .f32(op.maxNorm())
            .buffer(cuda(op.norm()))
            .pointer(coef));
    kernels.launchOver(Kernel.CLIP_SCALE, s, n, new KernelArgs().buffer(g).i64(n).pointer(coef));
  }

  private static KernelArgs convArgs(CudaBuffer in, ConvWindow window) {
    return new KernelArgs()
        .buffer(in)
        .i32(window.n())
        .i32(window.c())
        .i32(window.h())
        .i32(window.w())
        .i32(window.kh())
        .i32(window.kw())
        .i32(window.stride())
        .i32(window.pad())
        .i32(window.oh())
        .i32(window.ow());
  }

  private static Gemm requireLive(Gemm op) {
    cuda(op.a());
    cuda(op.b());
    cuda(op.c());
    return op;
  }

  private static GemmStridedBatched requireLive(GemmStridedBatched op) {
    cuda(op.a());
    cuda(op.b());
    cuda(op.c());
    return op;
  }

  /** The CUDA buffer behind {@code buffer}, checked to be open now. */
  static CudaBuffer cuda(DeviceBuffer buffer) {
    CudaBuffer b = (CudaBuffer) buffer;
    b.requireLive();
    return b;
  }
}
