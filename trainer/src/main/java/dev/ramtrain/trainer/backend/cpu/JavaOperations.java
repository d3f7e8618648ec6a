package dev.ramtrain.trainer.backend.cpu;

import static dev.ramtrain.trainer.backend.cpu.CpuBackend.cpu;

import dev.ramtrain.trainer.backend.ArgumentChecks;
import dev.ramtrain.trainer.backend.DType;
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
import java.nio.ByteOrder;
import org.bytedeco.javacpp.FloatPointer;

/**
 * The Java engine's table: every operation, computed by ramtrain's own Java kernels ({@link
 * CpuKernels}, {@link NormKernels}, {@link CopyKernels}) with GEMM by OpenBLAS and convolutions
 * lowered to im2col and GEMM ({@link ConvolutionLowering}), over NCHW tensors. The reference the
 * conformance suite checks every other engine against, and what {@link OneDnnOperations} falls back
 * to for what oneDNN does not compute. Each entry takes its buffers in the caller's thread (so a
 * closed buffer is named there) and enqueues the arithmetic on the stream.
 */
final class JavaOperations {
  private final CpuKernels kernels;
  private final NormKernels norms;
  private final CopyKernels copies;
  private final DepthwiseKernels depthwise;

  private JavaOperations(
      CpuKernels kernels, NormKernels norms, CopyKernels copies, DepthwiseKernels depthwise) {
    this.kernels = kernels;
    this.norms = norms;
    this.copies = copies;
    this.depthwise = depthwise;
  }

  static OperationTable<CpuStream> table(
      CpuKernels kernels, NormKernels norms, CopyKernels copies, DepthwiseKernels depthwise) {
    JavaOperations ops = new JavaOperations(kernels, norms, copies, depthwise);
    return new OperationTable<CpuStream>("cpu")
        .add(Gemm.class, ops::gemm)
        .add(GemmStridedBatched.class, ops::gemmStridedBatched)
        .add(Fill.class, ops::fill)
        .add(Convert.class, ops::convert)
        .add(AddBias.class, ops::addBias)
        .add(SumRows.class, ops::sumRows)
        .add(Relu.class, ops::relu)
        .add(ReluBackward.class, ops::reluBackward)
        .add(Gelu.class, ops::gelu)
        .add(GeluBackward.class, ops::geluBackward)
        .add(Add.class, ops::add)
        .add(Lerp.class, ops::lerp)
        .add(Multiply.class, ops::multiply)
        .add(SoftmaxCrossEntropy.class, ops::softmaxCrossEntropy)
        .add(BlendBatch.class, ops::blendBatch)
        .add(ColorJitter.class, ops::colorJitter)
        .add(CutMixBatch.class, ops::cutMixBatch)
        .add(NormalizeImages.class, ops::normalizeImages)
        .add(SgdStep.class, ops::sgdStep)
        .add(AdamWStep.class, ops::adamWStep)
        .add(Im2col.class, ops::im2col)
        .add(Col2im.class, ops::col2im)
        .add(AddChannelBias.class, ops::addChannelBias)
        .add(SumChannels.class, ops::sumChannels)
        .add(ClipGradNorm.class, ops::clipGradNorm)
        .add(DropoutMask.class, ops::dropoutMask)
        .add(Softmax.class, ops::softmax)
        .add(SoftmaxBackward.class, ops::softmaxBackward)
        .add(StridedCopy.class, ops::stridedCopy)
        .add(DepthwiseConvolution.class, ops::depthwiseConvolution)
        .add(DepthwiseConvolutionBackward.class, ops::depthwiseConvolutionBackward)
        .addNchw(MaxPool.class, MaxPool::channelBlock, ops::maxPool)
        .addNchw(MaxPoolBackward.class, MaxPoolBackward::channelBlock, ops::maxPoolBackward)
        .addNchw(BatchNormTrain.class, BatchNormTrain::channelBlock, ops::batchNormTrain)
        .addNchw(
            BatchNormInference.class, BatchNormInference::channelBlock, ops::batchNormInference)
        .addNchw(BatchNormBackward.class, BatchNormBackward::channelBlock, ops::batchNormBackward)
        .add(LayerNormForward.class, ops::layerNormForward)
        .add(LayerNormBackward.class, ops::layerNormBackward)
        .addLowered(Convolution.class, ConvolutionLowering::forward)
        .addLowered(ConvolutionBackward.class, ConvolutionLowering::backward);
  }

  /** A batch of one: OpenBLAS's sgemm through {@link BatchedGemm}, as the batched GEMM. */
  private void gemm(Gemm op, CpuStream s) {
    gemmStridedBatched(GemmStridedBatched.of(op), s);
  }

  private void gemmStridedBatched(GemmStridedBatched op, CpuStream s) {
    CpuBuffer a = cpu(op.a());
    CpuBuffer b = cpu(op.b());
    CpuBuffer c = cpu(op.c());
    s.enqueue(
        () -> {
          // bf16 operands are widened exactly to fp32 scratch, then multiplied in fp32: the
          // result equals an fp32-accumulating bf16 GEMM up to summation order.
          try (FloatPointer wideA = widened(kernels, a);
              FloatPointer wideB = widened(kernels, b)) {
            BatchedGemm.run(
                op,
                wideA != null ? wideA : a.floatPointer(),
                wideB != null ? wideB : b.floatPointer(),
                c.floatPointer());
          }
        });
  }

  private void maxPool(MaxPool op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer y = cpu(op.y());
    CpuBuffer argmax = cpu(op.argmax());
    s.enqueue(
        () ->
            kernels.maxPool(
                x.floats(),
                op.n(),
                op.c(),
                op.h(),
                op.w(),
                op.k(),
                op.stride(),
                op.pad(),
                y.floats(),
                argmax.ints()));
  }

  private void maxPoolBackward(MaxPoolBackward op, CpuStream s) {
    CpuBuffer dy = cpu(op.dy());
    CpuBuffer argmax = cpu(op.argmax());
    CpuBuffer dx = cpu(op.dx());
    s.enqueue(
        () ->
            kernels.maxPoolBackward(
                dy.floats(),
                argmax.ints(),
                op.n(),
                op.c(),
                op.h(),
                op.w(),
                op.oh(),
                op.ow(),
                dx.floats()));
  }

  /** Its ReLU unfused: only oneDNN fuses them, over blocked channels. */
  private void batchNormTrain(BatchNormTrain op, CpuStream s) {
    ArgumentChecks.requireUnfused(op.reluMask(), "batch norm");
    CpuBuffer x = cpu(op.x());
    CpuBuffer gamma = cpu(op.gamma());
    CpuBuffer beta = cpu(op.beta());
    CpuBuffer runningMean = cpu(op.runningMean());
    CpuBuffer runningVar = cpu(op.runningVar());
    CpuBuffer y = cpu(op.y());
    CpuBuffer savedMean = cpu(op.savedMean());
    CpuBuffer savedInvStd = cpu(op.savedInvStd());
    s.enqueue(
        () ->
            kernels.batchNormTrain(
                x.floats(),
                op.n(),
                op.c(),
                op.hw(),
                gamma.floats(),
                beta.floats(),
                op.eps(),
                op.momentum(),
                runningMean.floats(),
                runningVar.floats(),
                y.floats(),
                savedMean.floats(),
                savedInvStd.floats()));
  }

  private void batchNormInference(BatchNormInference op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer gamma = cpu(op.gamma());
    CpuBuffer beta = cpu(op.beta());
    CpuBuffer runningMean = cpu(op.runningMean());
    CpuBuffer runningVar = cpu(op.runningVar());
    CpuBuffer y = cpu(op.y());
    s.enqueue(
        () ->
            kernels.batchNormInference(
                x.floats(),
                op.n(),
                op.c(),
                op.hw(),
                gamma.floats(),
                beta.floats(),
                op.eps(),
                runningMean.floats(),
                runningVar.floats(),
                y.floats()));
  }

  private void batchNormBackward(BatchNormBackward op, CpuStream s) {
    ArgumentChecks.requireUnfused(op.reluMask(), "batch norm");
    CpuBuffer x = cpu(op.x());
    CpuBuffer dy = cpu(op.dy());
    CpuBuffer gamma = cpu(op.gamma());
    CpuBuffer savedMean = cpu(op.savedMean());
    CpuBuffer savedInvStd = cpu(op.savedInvStd());
    CpuBuffer dgamma = cpu(op.dgamma());
    CpuBuffer dbeta = cpu(op.dbeta());
    CpuBuffer dx = cpu(op.dx());
    s.enqueue(
        () ->
            kernels.batchNormBackward(
                x.floats(),
                dy.floats(),
                op.n(),
                op.c(),
                op.hw(),
                gamma.floats(),
                savedMean.floats(),
                savedInvStd.floats(),
                dgamma.floats(),
                dbeta.floats(),
                dx.floats()));
  }

  private void layerNormForward(LayerNormForward op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer gamma = cpu(op.gamma());
    CpuBuffer beta = cpu(op.beta());
    CpuBuffer y = cpu(op.y());
    CpuBuffer savedMean = cpu(op.savedMean());
    CpuBuffer savedInvStd = cpu(op.savedInvStd());
    s.enqueue(
        () ->
            norms.layerNorm(
                x.floats(),
                op.outer(),
                op.size(),
                op.inner(),
                gamma.floats(),
                beta.floats(),
                op.eps(),
                y.floats(),
                savedMean.floats(),
                savedInvStd.floats()));
  }

  private void layerNormBackward(LayerNormBackward op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer dy = cpu(op.dy());
    CpuBuffer gamma = cpu(op.gamma());
    CpuBuffer savedMean = cpu(op.savedMean());
    CpuBuffer savedInvStd = cpu(op.savedInvStd());
    CpuBuffer dgamma = cpu(op.dgamma());
    CpuBuffer dbeta = cpu(op.dbeta());
    CpuBuffer dx = cpu(op.dx());
    s.enqueue(
        () ->
            norms.layerNormBackward(
                x.floats(),
                dy.floats(),
                op.outer(),
                op.size(),
                op.inner(),
                gamma.floats(),
                savedMean.floats(),
                savedInvStd.floats(),
                dgamma.floats(),
                dbeta.floats(),
                dx.floats()));
  }

  private void fill(Fill op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    s.enqueue(() -> kernels.fill(x.floats(), op.value()));
  }

  private void convert(Convert op, CpuStream s) {
    CpuBuffer src = cpu(op.src());
    CpuBuffer dst = cpu(op.dst());
    if (op.narrowing()) {
      s.enqueue(() -> kernels.toBf16(src.floats(), dst.shorts()));
    } else {
      s.enqueue(() -> kernels.fromBf16(src.shorts(), dst.floats()));
    }
  }

  private void addBias(AddBias op, CpuStream s) {
    CpuBuffer y = cpu(op.y());
    CpuBuffer bias = cpu(op.bias());
    s.enqueue(() -> kernels.addBias(y.floats(), bias.floats(), op.rows(), op.cols()));
  }

  private void depthwiseConvolution(DepthwiseConvolution op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer weight = cpu(op.weight());
    CpuBuffer y = cpu(op.y());
    s.enqueue(
        () ->
            depthwise.forward(
                x.floats(), weight.floats(), y.floats(), op.n(), op.c(), op.h(), op.w(), op.k()));
  }

  private void depthwiseConvolutionBackward(DepthwiseConvolutionBackward op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer dy = cpu(op.dy());
    CpuBuffer weight = cpu(op.weight());
    CpuBuffer weightGrad = cpu(op.weightGrad());
    CpuBuffer dx = op.dx() == null ? null : cpu(op.dx());
    s.enqueue(
        () -> {
          depthwise.backwardWeight(
              x.floats(), dy.floats(), weightGrad.floats(), op.n(), op.c(), op.h(), op.w(), op.k());
          if (dx != null) {
            depthwise.backwardData(
                dy.floats(), weight.floats(), dx.floats(), op.n(), op.c(), op.h(), op.w(), op.k());
          }
        });
  }

  private void sumRows(SumRows op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer out = cpu(op.out());
    // Java on both engines: oneDNN's reduction over rows is its reference kernel
    // (1.5 ms for [256, 1024] against the Java kernel's ~0.1)
    s.enqueue(() -> kernels.sumRows(x.floats(), out.floats(), op.rows(), op.cols(), op.beta()));
  }

  private void relu(Relu op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer y = cpu(op.y());
    s.enqueue(() -> kernels.relu(x.floats(), y.floats()));
  }

  private void reluBackward(ReluBackward op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer dy = cpu(op.dy());
    CpuBuffer dx = cpu(op.dx());
    s.enqueue(() -> kernels.reluBackward(x.floats(), dy.floats(), dx.floats()));
  }

  private void gelu(Gelu op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer y = cpu(op.y());
    s.enqueue(() -> kernels.gelu(x.floats(), y.floats()));
  }

  private void geluBackward(GeluBackward op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer dy = cpu(op.dy());
    CpuBuffer dx = cpu(op.dx());
    s.enqueue(() -> kernels.geluBackward(x.floats(), dy.floats(), dx.floats()));
  }

  private void add(Add op, CpuStream s) {
    CpuBuffer a = cpu(op.a());
    CpuBuffer b = cpu(op.b());
    CpuBuffer out = cpu(op.out());
    s.enqueue(() -> kernels.add(a.floats(), b.floats(), out.floats()));
  }

  private void lerp(Lerp op, CpuStream s) {
    CpuBuffer target = cpu(op.target());
    CpuBuffer source = cpu(op.source());
    s.enqueue(() -> kernels.lerp(target.floats(), source.floats(), op.weight()));
  }

  private void multiply(Multiply op, CpuStream s) {
    CpuBuffer a = cpu(op.a());
    CpuBuffer b = cpu(op.b());
    CpuBuffer out = cpu(op.out());
    s.enqueue(() -> kernels.multiply(a.floats(), b.floats(), out.floats()));
  }

  private void softmaxCrossEntropy(SoftmaxCrossEntropy op, CpuStream s) {
    CpuBuffer logits = cpu(op.logits());
    CpuBuffer labels = cpu(op.labels());
    CpuBuffer loss = cpu(op.loss());
    CpuBuffer dlogits = cpu(op.dlogits());
    s.enqueue(
        () ->
            kernels.softmaxCrossEntropy(
                logits.floats(),
                labels.ints(),
                op.rows(),
                op.classes(),
                op.smoothing(),
                op.mix(),
                loss.floats(),
                dlogits.floats()));
  }

  private void blendBatch(BlendBatch op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    s.enqueue(
        () ->
            kernels.blendBatch(
                x.floats(), op.batch(), op.sampleSize(), op.lambda(), op.oneMinus()));
  }

  private void colorJitter(ColorJitter op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    s.enqueue(() -> kernels.colorJitter(x.floats(), op));
  }

  private void cutMixBatch(CutMixBatch op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    s.enqueue(
        () ->
            kernels.cutMixBatch(
                x.floats(),
                op.batch(),
                op.channels(),
                op.height(),
                op.width(),
                op.top(),
                op.bottom(),
                op.left(),
                op.right()));
  }

  private void normalizeImages(NormalizeImages op, CpuStream s) {
    CpuBuffer u8 = cpu(op.u8());
    CpuBuffer out = cpu(op.out());
    s.enqueue(
        () ->
            kernels.normalizeImages(
                u8.byteBuffer(),
                op.n(),
                op.h(),
                op.w(),
                op.c(),
                op.mean(),
                op.std(),
                out.floats()));
  }

  private void sgdStep(SgdStep op, CpuStream s) {
    CpuBuffer p = cpu(op.param());
    CpuBuffer g = cpu(op.grad());
    CpuBuffer b = cpu(op.momentum());
    s.enqueue(
        () ->
            kernels.sgdStep(
                p.floats(),
                g.floats(),
                b.floats(),
                op.lr(),
                op.mu(),
                op.weightDecay(),
                op.nesterov()));
  }

  private void adamWStep(AdamWStep op, CpuStream s) {
    CpuBuffer p = cpu(op.param());
    CpuBuffer g = cpu(op.grad());
    CpuBuffer m = cpu(op.m());
    CpuBuffer v = cpu(op.v());
    s.enqueue(
        () ->
            kernels.adamwStep(
                p.floats(),
                g.floats(),
                m.floats(),
                v.floats(),
                op.lr(),
                op.beta1(),
                op.beta2(),
                op.eps(),
                op.weightDecay(),
                op.step()));
  }

  private void im2col(Im2col op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer cols = cpu(op.cols());
    s.enqueue(() -> kernels.im2col(x.floats(), op.window(), cols.floats()));
  }

  private void col2im(Col2im op, CpuStream s) {
    CpuBuffer cols = cpu(op.cols());
    CpuBuffer dx = cpu(op.dx());
    s.enqueue(() -> kernels.col2im(cols.floats(), op.window(), dx.floats()));
  }

  private void addChannelBias(AddChannelBias op, CpuStream s) {
    CpuBuffer y = cpu(op.y());
    CpuBuffer bias = cpu(op.bias());
    s.enqueue(() -> kernels.addChannelBias(y.floats(), bias.floats(), op.n(), op.c(), op.hw()));
  }

  private void sumChannels(SumChannels op, CpuStream s) {
    CpuBuffer dy = cpu(op.dy());
    CpuBuffer out = cpu(op.out());
    s.enqueue(() -> kernels.sumChannels(dy.floats(), out.floats(), op.n(), op.c(), op.hw()));
  }

  private void clipGradNorm(ClipGradNorm op, CpuStream s) {
    CpuBuffer grads = cpu(op.grads());
    CpuBuffer norm = cpu(op.norm());
    s.enqueue(() -> kernels.clipGradNorm(grads.floats(), op.maxNorm(), norm.floats()));
  }

  private void dropoutMask(DropoutMask op, CpuStream s) {
    CpuBuffer mask = cpu(op.mask());
    s.enqueue(() -> kernels.dropoutMask(op.p(), op.seed(), mask.floats()));
  }

  private void softmax(Softmax op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer y = cpu(op.y());
    s.enqueue(() -> norms.softmax(x.floats(), op.rows(), op.cols(), y.floats()));
  }

  private void softmaxBackward(SoftmaxBackward op, CpuStream s) {
    CpuBuffer y = cpu(op.y());
    CpuBuffer dy = cpu(op.dy());
    CpuBuffer dx = cpu(op.dx());
    s.enqueue(
        () -> norms.softmaxBackward(y.floats(), dy.floats(), op.rows(), op.cols(), dx.floats()));
  }

  private void stridedCopy(StridedCopy op, CpuStream s) {
    CpuBuffer src = cpu(op.src());
    CpuBuffer dst = cpu(op.dst());
    s.enqueue(() -> copies.stridedCopy(src.floats(), dst.floats(), op));
  }

  /** An fp32 copy of a BF16 buffer (the caller closes it), or null for an F32 buffer. */
  static FloatPointer widened(CpuKernels kernels, CpuBuffer x) {
    if (x.dtype() != DType.BF16) {
      return null;
    }
    FloatPointer wide = new FloatPointer(Math.max(1, x.count()));
    kernels.fromBf16(
        x.shorts(), wide.asByteBuffer().order(ByteOrder.nativeOrder()).asFloatBuffer());
    return wide;
  }
}
