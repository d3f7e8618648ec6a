package dev.ramtrain.trainer.backend.cpu;

import static dev.ramtrain.trainer.backend.cpu.CpuBackend.cpu;
import static dev.ramtrain.trainer.backend.cpu.JavaOperations.widened;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.OperationTable;
import dev.ramtrain.trainer.backend.ops.Add;
import dev.ramtrain.trainer.backend.ops.AddBias;
import dev.ramtrain.trainer.backend.ops.BatchNormBackward;
import dev.ramtrain.trainer.backend.ops.BatchNormInference;
import dev.ramtrain.trainer.backend.ops.BatchNormTrain;
import dev.ramtrain.trainer.backend.ops.Convert;
import dev.ramtrain.trainer.backend.ops.Convolution;
import dev.ramtrain.trainer.backend.ops.ConvolutionBackward;
import dev.ramtrain.trainer.backend.ops.Gelu;
import dev.ramtrain.trainer.backend.ops.GeluBackward;
import dev.ramtrain.trainer.backend.ops.Gemm;
import dev.ramtrain.trainer.backend.ops.GemmStridedBatched;
import dev.ramtrain.trainer.backend.ops.LayerNormBackward;
import dev.ramtrain.trainer.backend.ops.LayerNormForward;
import dev.ramtrain.trainer.backend.ops.MaxPool;
import dev.ramtrain.trainer.backend.ops.MaxPoolBackward;
import dev.ramtrain.trainer.backend.ops.Relu;
import dev.ramtrain.trainer.backend.ops.ReluBackward;
import dev.ramtrain.trainer.backend.ops.Softmax;
import dev.ramtrain.trainer.backend.ops.SoftmaxBackward;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.Pointer;

/**
 * The oneDNN engine's table: what oneDNN computes (GEMM and convolutions, with bf16 operands in
 * bf16 where the CPU multiplies bf16 natively; batch norm with its ReLU fused and max pooling over
 * blocked channels; layer norm over the last dimension; the pointwise operations, softmax and bias)
 * and, for everything else, the {@link JavaOperations} table it was given. Where oneDNN is slower
 * than the Java kernel (a reduction over rows, NCHW pooling without a jit kernel) the Java kernel
 * stays: the entry is simply not here.
 */
final class OneDnnOperations {
  private final OneDnn oneDnn;
  private final CpuKernels kernels;
  private final OperationTable<CpuStream> reference;

  private OneDnnOperations(OneDnn oneDnn, CpuKernels kernels, OperationTable<CpuStream> reference) {
    this.oneDnn = oneDnn;
    this.kernels = kernels;
    this.reference = reference;
  }

  /** oneDNN's table over {@code reference}, the Java engine's, for what oneDNN does not compute. */
  static OperationTable<CpuStream> table(
      OneDnn oneDnn, CpuKernels kernels, OperationTable<CpuStream> reference) {
    OneDnnOperations ops = new OneDnnOperations(oneDnn, kernels, reference);
    return new OperationTable<>("cpu", reference)
        .add(Gemm.class, ops::gemm)
        .add(Convert.class, ops::convert)
        .add(AddBias.class, ops::addBias)
        .add(Relu.class, ops::relu)
        .add(ReluBackward.class, ops::reluBackward)
        .add(Gelu.class, ops::gelu)
        .add(GeluBackward.class, ops::geluBackward)
        .add(Add.class, ops::add)
        .add(Softmax.class, ops::softmax)
        .add(SoftmaxBackward.class, ops::softmaxBackward)
        .add(GemmStridedBatched.class, ops::gemmStridedBatched)
        .add(Convolution.class, ops::convolution)
        .add(ConvolutionBackward.class, ops::convolutionBackward)
        .add(MaxPool.class, ops::maxPool)
        .add(MaxPoolBackward.class, ops::maxPoolBackward)
        .add(BatchNormTrain.class, ops::batchNormTrain)
        .add(BatchNormInference.class, ops::batchNormInference)
        .add(BatchNormBackward.class, ops::batchNormBackward)
        .add(LayerNormForward.class, ops::layerNormForward)
        .add(LayerNormBackward.class, ops::layerNormBackward);
  }

  private void gemm(Gemm op, CpuStream s) {
    gemmStridedBatched(GemmStridedBatched.of(op), s);
  }

  private void convert(Convert op, CpuStream s) {
    CpuBuffer src = cpu(op.src());
    CpuBuffer dst = cpu(op.dst());
    s.enqueue(() -> oneDnn.convert(src.count(), op.narrowing(), src.pointer(), dst.pointer()));
  }

  private void addBias(AddBias op, CpuStream s) {
    CpuBuffer y = cpu(op.y());
    CpuBuffer bias = cpu(op.bias());
    s.enqueue(() -> oneDnn.addBias(op.rows(), op.cols(), y.pointer(), bias.pointer()));
  }

  private void relu(Relu op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer y = cpu(op.y());
    s.enqueue(() -> oneDnn.relu(x.count(), x.pointer(), y.pointer()));
  }

  private void reluBackward(ReluBackward op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer dy = cpu(op.dy());
    CpuBuffer dx = cpu(op.dx());
    s.enqueue(() -> oneDnn.reluBackward(x.count(), x.pointer(), dy.pointer(), dx.pointer()));
  }

  private void gelu(Gelu op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer y = cpu(op.y());
    s.enqueue(() -> oneDnn.gelu(x.count(), x.pointer(), y.pointer()));
  }

  private void geluBackward(GeluBackward op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer dy = cpu(op.dy());
    CpuBuffer dx = cpu(op.dx());
    s.enqueue(() -> oneDnn.geluBackward(x.count(), x.pointer(), dy.pointer(), dx.pointer()));
  }

  private void add(Add op, CpuStream s) {
    CpuBuffer a = cpu(op.a());
    CpuBuffer b = cpu(op.b());
    CpuBuffer out = cpu(op.out());
    s.enqueue(() -> oneDnn.add(out.count(), a.pointer(), b.pointer(), out.pointer()));
  }

  private void softmax(Softmax op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer y = cpu(op.y());
    s.enqueue(() -> oneDnn.softmax(op.rows(), op.cols(), x.pointer(), y.pointer()));
  }

  private void softmaxBackward(SoftmaxBackward op, CpuStream s) {
    CpuBuffer y = cpu(op.y());
    CpuBuffer dy = cpu(op.dy());
    CpuBuffer dx = cpu(op.dx());
    s.enqueue(
        () ->
            oneDnn.softmaxBackward(op.rows(), op.cols(), y.pointer(), dy.pointer(), dx.pointer()));
  }

  /**
   * A GEMM (or a strided batch of them) by oneDNN's matmul: bf16 × bf16 in bf16 where the CPU
   * multiplies bf16 natively, else in fp32 with any bf16 operand widened exactly first.
   */
  private void gemmStridedBatched(GemmStridedBatched op, CpuStream s) {
    CpuBuffer a = cpu(op.a());
    CpuBuffer b = cpu(op.b());
    CpuBuffer c = cpu(op.c());
    boolean bf16 = oneDnn.bf16Dot() && a.dtype() == DType.BF16 && b.dtype() == DType.BF16;
    OneDnnMatmul.Shape shape = OneDnnMatmul.Shape.of(bf16, op);
    s.enqueue(
        () -> {
          if (bf16) {
            oneDnn.gemm(shape, op, a.pointer(), b.pointer(), c.pointer());
            return;
          }
          try (FloatPointer wideA = widened(kernels, a);
              FloatPointer wideB = widened(kernels, b)) {
            oneDnn.gemm(
                shape,
                op,
                wideA != null ? wideA : a.pointer(),
                wideB != null ? wideB : b.pointer(),
                c.pointer());
          }
        });
  }

  /**
   * A convolution by oneDNN: with bf16 operands in bf16 where the CPU multiplies bf16 natively,
   * else in fp32 on the operands widened exactly first (as the GEMMs do).
   */
  private void convolution(Convolution op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer w = cpu(op.weight());
    CpuBuffer b = op.bias() == null ? null : cpu(op.bias());
    CpuBuffer y = cpu(op.y());
    boolean bf16 = oneDnn.bf16Dot() && x.dtype() == DType.BF16;
    s.enqueue(
        () -> {
          try (FloatPointer wideX = bf16 ? null : widened(kernels, x);
              FloatPointer wideW = bf16 ? null : widened(kernels, w)) {
            oneDnn.convolution(
                op.window(),
                op.outChannels(),
                op.inBlock(),
                op.outBlock(),
                bf16,
                wideX != null ? wideX : x.pointer(),
                wideW != null ? wideW : w.pointer(),
                b == null ? null : b.pointer(),
                y.pointer());
          }
        });
  }

  private void convolutionBackward(ConvolutionBackward op, CpuStream s) {
    CpuBuffer x = cpu(op.x());
    CpuBuffer dy = cpu(op.dy());
    CpuBuffer w = cpu(op.weight());
    CpuBuffer dw = cpu(op.weightGrad());
    CpuBuffer db = op.biasGrad() == null ? null : cpu(op.biasGrad());
    CpuBuffer dx = op.dx() == null ? null : cpu(op.dx());
    boolean bf16 = oneDnn.bf16Dot() && x.dtype() == DType.BF16;
    s.enqueue(
        () -> {
          try (FloatPointer wideX = bf16 ? null : widened(kernels, x);
              FloatPointer wideDy = bf16 ? null : widened(kernels, dy);
              FloatPointer wideW = bf16 ? null : widened(kernels, w)) {
            oneDnn.convolutionBackward(
                op.window(),
                op.outChannels(),
                op.inBlock(),
                op.outBlock(),
                bf16,
                db != null,
                wideX != null ? wideX : x.pointer(),
                wideDy != null ? wideDy : dy.pointer(),
                wideW != null ? wideW : w.pointer(),
                dw.pointer(),
                db == null ? null : db.pointer(),
                dx == null ? null : dx.pointer());
          }
        });
  }

  /**
   * Over blocked channels always; over NCHW where oneDNN has a jit kernel for it (AVX-512 and
   * above), else by the Java kernel, 2-3x faster than oneDNN's simple_nchw loop.
   */
  private void maxPool(MaxPool op, CpuStream s) {
    if (op.channelBlock() == 1 && !oneDnn.poolsPlainChannels()) {
      reference.run(op, s);
      return;
    }
    CpuBuffer x = cpu(op.x());
    CpuBuffer y = cpu(op.y());
    CpuBuffer argmax = cpu(op.argmax());
    OneDnnMaxPool.Window window = OneDnnMaxPool.Window.of(op);
    s.enqueue(() -> oneDnn.maxPool(window, x.pointer(), y.pointer(), argmax.pointer()));
  }

  private void maxPoolBackward(MaxPoolBackward op, CpuStream s) {
    if (op.channelBlock() == 1 && !oneDnn.poolsPlainChannels()) {
      reference.run(op, s);
      return;
    }
    CpuBuffer dy = cpu(op.dy());
    CpuBuffer argmax = cpu(op.argmax());
    CpuBuffer dx = cpu(op.dx());
    OneDnnMaxPool.Window window = OneDnnMaxPool.Window.of(op);
    s.enqueue(() -> oneDnn.maxPoolBackward(window, dy.pointer(), argmax.pointer(), dx.pointer()));
  }

  /** Over blocked channels, with a fused ReLU where asked; NCHW by the Java kernel. */
  private void batchNormTrain(BatchNormTrain op, CpuStream s) {
    if (op.channelBlock() == 1) {
      reference.run(op, s);
      return;
    }
    CpuBuffer x = cpu(op.x());
    CpuBuffer gamma = cpu(op.gamma());
    CpuBuffer beta = cpu(op.beta());
    CpuBuffer runningMean = cpu(op.runningMean());
    CpuBuffer runningVar = cpu(op.runningVar());
    CpuBuffer y = cpu(op.y());
    CpuBuffer savedMean = cpu(op.savedMean());
    CpuBuffer savedInvStd = cpu(op.savedInvStd());
    Pointer reluMask = reluMask(op.reluMask(), op.n(), op.c(), op.hw(), op.channelBlock());
    s.enqueue(
        () ->
            oneDnn.batchNormTrain(
                op.n(),
                op.c(),
                op.hw(),
                op.channelBlock(),
                op.eps(),
                op.momentum(),
                x.pointer(),
                gamma.pointer(),
                beta.pointer(),
                y.pointer(),
                reluMask,
                savedMean,
                savedInvStd.floats(),
                runningMean.floats(),
                runningVar.floats()));
  }

  private void batchNormInference(BatchNormInference op, CpuStream s) {
    if (op.channelBlock() == 1) {
      reference.run(op, s);
      return;
    }
    CpuBuffer x = cpu(op.x());
    CpuBuffer gamma = cpu(op.gamma());
    CpuBuffer beta = cpu(op.beta());
    CpuBuffer runningMean = cpu(op.runningMean());
    CpuBuffer runningVar = cpu(op.runningVar());
    CpuBuffer y = cpu(op.y());
    s.enqueue(
        () ->
            oneDnn.batchNormInference(
                op.n(),
                op.c(),
                op.hw(),
                op.channelBlock(),
                op.eps(),
                x.pointer(),
                gamma.pointer(),
                beta.pointer(),
                runningMean.pointer(),
                runningVar.pointer(),
                y.pointer()));
  }

  private void batchNormBackward(BatchNormBackward op, CpuStream s) {
    if (op.channelBlock() == 1) {
      reference.run(op, s);
      return;
    }
    CpuBuffer x = cpu(op.x());
    CpuBuffer dy = cpu(op.dy());
    CpuBuffer gamma = cpu(op.gamma());
    CpuBuffer savedMean = cpu(op.savedMean());
    CpuBuffer savedInvStd = cpu(op.savedInvStd());
    CpuBuffer dgamma = cpu(op.dgamma());
    CpuBuffer dbeta = cpu(op.dbeta());
    CpuBuffer dx = cpu(op.dx());
    Pointer reluMask = reluMask(op.reluMask(), op.n(), op.c(), op.hw(), op.channelBlock());
    s.enqueue(
        () ->
            oneDnn.batchNormBackward(
                op.n(),
                op.c(),
                op.hw(),
                op.channelBlock(),
                x.pointer(),
                dy.pointer(),
                reluMask,
                gamma.pointer(),
                savedMean.pointer(),
                savedInvStd.floats(),
                dx.pointer(),
                dgamma.floats(),
                dbeta.floats()));
  }

  /** Over the last dimension ({@code inner == 1}); other axes by the Java kernel. */
  private void layerNormForward(LayerNormForward op, CpuStream s) {
    if (op.inner() != 1) {
      reference.run(op, s);
      return;
    }
    CpuBuffer x = cpu(op.x());
    CpuBuffer gamma = cpu(op.gamma());
    CpuBuffer beta = cpu(op.beta());
    CpuBuffer y = cpu(op.y());
    CpuBuffer savedMean = cpu(op.savedMean());
    CpuBuffer savedInvStd = cpu(op.savedInvStd());
    s.enqueue(
        () ->
            oneDnn.layerNorm(
                op.outer(),
                op.size(),
                op.eps(),
                x.pointer(),
                gamma.pointer(),
                beta.pointer(),
                y.pointer(),
                savedMean.pointer(),
                savedInvStd.floats()));
  }

  private void layerNormBackward(LayerNormBackward op, CpuStream s) {
    if (op.inner() != 1) {
      reference.run(op, s);
      return;
    }
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
            oneDnn.layerNormBackward(
                op.outer(),
                op.size(),
                x.pointer(),
                dy.pointer(),
                gamma.pointer(),
                savedMean.pointer(),
                savedInvStd.floats(),
                dx.pointer(),
                dgamma.floats(),
                dbeta.floats()));
  }

  /**
   * A fused ReLU's mask (null: none), checked to hold oneDNN's workspace for these blocked
   * channels.
   */
  private Pointer reluMask(DeviceBuffer mask, int n, int c, int hw, int block) {
    if (mask == null) {
      return null;
    }
    CpuBuffer m = cpu(mask);
    long needed = oneDnn.normReluMaskBytes(n, c, hw, block);
    if (m.count() < needed) {
      throw new IllegalArgumentException(
          mask.label() + " has " + m.count() + " bytes, a fused ReLU's mask needs " + needed);
    }
    return m.pointer();
  }
}
