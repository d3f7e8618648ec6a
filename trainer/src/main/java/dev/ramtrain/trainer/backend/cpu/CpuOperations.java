package dev.ramtrain.trainer.backend.cpu;

import static org.bytedeco.openblas.global.openblas_nolapack.CblasNoTrans;
import static org.bytedeco.openblas.global.openblas_nolapack.CblasRowMajor;
import static org.bytedeco.openblas.global.openblas_nolapack.CblasTrans;
import static org.bytedeco.openblas.global.openblas_nolapack.cblas_sgemm;

import dev.ramtrain.trainer.backend.ArgumentChecks;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
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
import org.bytedeco.javacpp.Pointer;

/**
 * The CPU engine's implementation of every operation: GEMM, convolutions, GELU, softmax and layer
 * norm over the last dimension by oneDNN (or OpenBLAS, im2col and Java, the Java engine), the rest
 * by {@link CpuKernels}, {@link NormKernels} and {@link CopyKernels}. Each entry takes its buffers
 * in the caller's thread (so a closed buffer is named there) and enqueues the arithmetic on the
 * stream.
 */
final class CpuOperations {
  private CpuOperations() {}

  /**
   * The table; GEMM and convolutions by {@code oneDnn}, or (null) GEMM by OpenBLAS and convolutions
   * lowered to im2col and GEMM as {@link ConvolutionLowering} says.
   */
  static OperationTable<CpuStream> table(
      CpuKernels kernels, NormKernels norms, CopyKernels copies, OneDnn oneDnn) {
    OperationTable<CpuStream> table =
        new OperationTable<CpuStream>("cpu")
            .add(
                Gemm.class,
                (op, s) -> {
                  if (oneDnn != null) {
                    matmul(kernels, oneDnn, GemmStridedBatched.of(op), s);
                  } else {
                    gemm(kernels, op, s);
                  }
                })
            .add(
                GemmStridedBatched.class,
                (op, s) -> {
                  if (oneDnn != null) {
                    matmul(kernels, oneDnn, op, s);
                  } else {
                    gemmStridedBatched(kernels, op, s);
                  }
                })
            .add(
                Fill.class,
                (op, s) -> {
                  CpuBuffer x = cpu(op.x());
                  s.enqueue(() -> kernels.fill(x.floats(), op.value()));
                })
            .add(
                Convert.class,
                (op, s) -> {
                  CpuBuffer src = cpu(op.src());
                  CpuBuffer dst = cpu(op.dst());
                  if (oneDnn != null) {
                    s.enqueue(
                        () ->
                            oneDnn.convert(
                                src.count(), op.narrowing(), src.pointer(), dst.pointer()));
                  } else if (op.narrowing()) {
                    s.enqueue(() -> kernels.toBf16(src.floats(), dst.shorts()));
                  } else {
                    s.enqueue(() -> kernels.fromBf16(src.shorts(), dst.floats()));
                  }
                })
            .add(
                AddBias.class,
                (op, s) -> {
                  CpuBuffer y = cpu(op.y());
                  CpuBuffer bias = cpu(op.bias());
                  if (oneDnn != null) {
                    s.enqueue(
                        () -> oneDnn.addBias(op.rows(), op.cols(), y.pointer(), bias.pointer()));
                  } else {
                    s.enqueue(
                        () -> kernels.addBias(y.floats(), bias.floats(), op.rows(), op.cols()));
                  }
                })
            .add(
                SumRows.class,
                (op, s) -> {
                  CpuBuffer x = cpu(op.x());
                  CpuBuffer out = cpu(op.out());
                  // Java on both engines: oneDNN's reduction over rows is its reference kernel
                  // (1.5 ms for [256, 1024] against the Java kernel's ~0.1)
                  s.enqueue(
                      () ->
                          kernels.sumRows(
                              x.floats(), out.floats(), op.rows(), op.cols(), op.beta()));
                })
            .add(
                Relu.class,
                (op, s) -> {
                  CpuBuffer x = cpu(op.x());
                  CpuBuffer y = cpu(op.y());
                  if (oneDnn != null) {
                    s.enqueue(() -> oneDnn.relu(x.count(), x.pointer(), y.pointer()));
                  } else {
                    s.enqueue(() -> kernels.relu(x.floats(), y.floats()));
                  }
                })
            .add(
                ReluBackward.class,
                (op, s) -> {
                  CpuBuffer x = cpu(op.x());
                  CpuBuffer dy = cpu(op.dy());
                  CpuBuffer dx = cpu(op.dx());
                  if (oneDnn != null) {
                    s.enqueue(
                        () ->
                            oneDnn.reluBackward(
                                x.count(), x.pointer(), dy.pointer(), dx.pointer()));
                  } else {
                    s.enqueue(() -> kernels.reluBackward(x.floats(), dy.floats(), dx.floats()));
                  }
                })
            .add(
                Gelu.class,
                (op, s) -> {
                  CpuBuffer x = cpu(op.x());
                  CpuBuffer y = cpu(op.y());
                  if (oneDnn != null) {
                    s.enqueue(() -> oneDnn.gelu(x.count(), x.pointer(), y.pointer()));
                  } else {
                    s.enqueue(() -> kernels.gelu(x.floats(), y.floats()));
                  }
                })
            .add(
                GeluBackward.class,
                (op, s) -> {
                  CpuBuffer x = cpu(op.x());
                  CpuBuffer dy = cpu(op.dy());
                  CpuBuffer dx = cpu(op.dx());
                  if (oneDnn != null) {
                    s.enqueue(
                        () ->
                            oneDnn.geluBackward(
                                x.count(), x.pointer(), dy.pointer(), dx.pointer()));
                  } else {
                    s.enqueue(() -> kernels.geluBackward(x.floats(), dy.floats(), dx.floats()));
                  }
                })
            .add(
                Add.class,
                (op, s) -> {
                  CpuBuffer a = cpu(op.a());
                  CpuBuffer b = cpu(op.b());
                  CpuBuffer out = cpu(op.out());
                  if (oneDnn != null) {
                    s.enqueue(
                        () -> oneDnn.add(out.count(), a.pointer(), b.pointer(), out.pointer()));
                  } else {
                    s.enqueue(() -> kernels.add(a.floats(), b.floats(), out.floats()));
                  }
                })
            .add(
                Lerp.class,
                (op, s) -> {
                  CpuBuffer target = cpu(op.target());
                  CpuBuffer source = cpu(op.source());
                  s.enqueue(() -> kernels.lerp(target.floats(), source.floats(), op.weight()));
                })
            .add(
                Multiply.class,
                (op, s) -> {
                  CpuBuffer a = cpu(op.a());
                  CpuBuffer b = cpu(op.b());
                  CpuBuffer out = cpu(op.out());
                  s.enqueue(() -> kernels.multiply(a.floats(), b.floats(), out.floats()));
                })
            .add(
                SoftmaxCrossEntropy.class,
                (op, s) -> {
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
                })
            .add(
                BlendBatch.class,
                (op, s) -> {
                  CpuBuffer x = cpu(op.x());
                  s.enqueue(
                      () ->
                          kernels.blendBatch(
                              x.floats(), op.batch(), op.sampleSize(), op.lambda(), op.oneMinus()));
                })
            .add(
                ColorJitter.class,
                (op, s) -> {
                  CpuBuffer x = cpu(op.x());
                  s.enqueue(() -> kernels.colorJitter(x.floats(), op));
                })
            .add(
                CutMixBatch.class,
                (op, s) -> {
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
                })
            .add(
                NormalizeImages.class,
                (op, s) -> {
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
                })
            .add(
                SgdStep.class,
                (op, s) -> {
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
                })
            .add(
                AdamWStep.class,
                (op, s) -> {
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
                })
            .add(
                Im2col.class,
                (op, s) -> {
                  CpuBuffer x = cpu(op.x());
                  CpuBuffer cols = cpu(op.cols());
                  s.enqueue(() -> kernels.im2col(x.floats(), op.window(), cols.floats()));
                })
            .add(
                Col2im.class,
                (op, s) -> {
                  CpuBuffer cols = cpu(op.cols());
                  CpuBuffer dx = cpu(op.dx());
                  s.enqueue(() -> kernels.col2im(cols.floats(), op.window(), dx.floats()));
                })
            .add(
                AddChannelBias.class,
                (op, s) -> {
                  CpuBuffer y = cpu(op.y());
                  CpuBuffer bias = cpu(op.bias());
                  s.enqueue(
                      () ->
                          kernels.addChannelBias(
                              y.floats(), bias.floats(), op.n(), op.c(), op.hw()));
                })
            .add(
                SumChannels.class,
                (op, s) -> {
                  CpuBuffer dy = cpu(op.dy());
                  CpuBuffer out = cpu(op.out());
                  s.enqueue(
                      () ->
                          kernels.sumChannels(dy.floats(), out.floats(), op.n(), op.c(), op.hw()));
                })
            .add(
                MaxPool.class,
                (op, s) -> {
                  CpuBuffer x = cpu(op.x());
                  CpuBuffer y = cpu(op.y());
                  CpuBuffer argmax = cpu(op.argmax());
                  if (op.channelBlock() != 1 || oneDnn != null && oneDnn.poolsPlainChannels()) {
                    requireOneDnn(oneDnn, op.channelBlock(), "max pooling");
                    OneDnnMaxPool.Window window = OneDnnMaxPool.Window.of(op);
                    s.enqueue(
                        () -> oneDnn.maxPool(window, x.pointer(), y.pointer(), argmax.pointer()));
                    return;
                  }
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
                })
            .add(
                MaxPoolBackward.class,
                (op, s) -> {
                  CpuBuffer dy = cpu(op.dy());
                  CpuBuffer argmax = cpu(op.argmax());
                  CpuBuffer dx = cpu(op.dx());
                  if (op.channelBlock() != 1 || oneDnn != null && oneDnn.poolsPlainChannels()) {
                    requireOneDnn(oneDnn, op.channelBlock(), "max pooling");
                    OneDnnMaxPool.Window window = OneDnnMaxPool.Window.of(op);
                    s.enqueue(
                        () ->
                            oneDnn.maxPoolBackward(
                                window, dy.pointer(), argmax.pointer(), dx.pointer()));
                    return;
                  }
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
                })
            .add(
                ClipGradNorm.class,
                (op, s) -> {
                  CpuBuffer grads = cpu(op.grads());
                  CpuBuffer norm = cpu(op.norm());
                  s.enqueue(
                      () -> kernels.clipGradNorm(grads.floats(), op.maxNorm(), norm.floats()));
                })
            .add(
                DropoutMask.class,
                (op, s) -> {
                  CpuBuffer mask = cpu(op.mask());
                  s.enqueue(() -> kernels.dropoutMask(op.p(), op.seed(), mask.floats()));
                })
            .add(
                BatchNormTrain.class,
                (op, s) -> {
                  CpuBuffer x = cpu(op.x());
                  CpuBuffer gamma = cpu(op.gamma());
                  CpuBuffer beta = cpu(op.beta());
                  CpuBuffer runningMean = cpu(op.runningMean());
                  CpuBuffer runningVar = cpu(op.runningVar());
                  CpuBuffer y = cpu(op.y());
                  CpuBuffer savedMean = cpu(op.savedMean());
                  CpuBuffer savedInvStd = cpu(op.savedInvStd());
                  Pointer reluMask =
                      reluMask(oneDnn, op.reluMask(), op.n(), op.c(), op.hw(), op.channelBlock());
                  if (op.channelBlock() != 1) {
                    requireOneDnn(oneDnn, op.channelBlock(), "batch norm");
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
                    return;
                  }
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
                })
            .add(
                BatchNormInference.class,
                (op, s) -> {
                  CpuBuffer x = cpu(op.x());
                  CpuBuffer gamma = cpu(op.gamma());
                  CpuBuffer beta = cpu(op.beta());
                  CpuBuffer runningMean = cpu(op.runningMean());
                  CpuBuffer runningVar = cpu(op.runningVar());
                  CpuBuffer y = cpu(op.y());
                  if (op.channelBlock() != 1) {
                    requireOneDnn(oneDnn, op.channelBlock(), "batch norm");
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
                    return;
                  }
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
                })
            .add(
                BatchNormBackward.class,
                (op, s) -> {
                  CpuBuffer x = cpu(op.x());
                  CpuBuffer dy = cpu(op.dy());
                  CpuBuffer gamma = cpu(op.gamma());
                  CpuBuffer savedMean = cpu(op.savedMean());
                  CpuBuffer savedInvStd = cpu(op.savedInvStd());
                  CpuBuffer dgamma = cpu(op.dgamma());
                  CpuBuffer dbeta = cpu(op.dbeta());
                  CpuBuffer dx = cpu(op.dx());
                  Pointer reluMask =
                      reluMask(oneDnn, op.reluMask(), op.n(), op.c(), op.hw(), op.channelBlock());
                  if (op.channelBlock() != 1) {
                    requireOneDnn(oneDnn, op.channelBlock(), "batch norm");
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
                    return;
                  }
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
                })
            .add(
                LayerNormForward.class,
                (op, s) -> {
                  CpuBuffer x = cpu(op.x());
                  CpuBuffer gamma = cpu(op.gamma());
                  CpuBuffer beta = cpu(op.beta());
                  CpuBuffer y = cpu(op.y());
                  CpuBuffer savedMean = cpu(op.savedMean());
                  CpuBuffer savedInvStd = cpu(op.savedInvStd());
                  if (oneDnn != null && op.inner() == 1) {
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
                    return;
                  }
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
                })
            .add(
                LayerNormBackward.class,
                (op, s) -> {
                  CpuBuffer x = cpu(op.x());
                  CpuBuffer dy = cpu(op.dy());
                  CpuBuffer gamma = cpu(op.gamma());
                  CpuBuffer savedMean = cpu(op.savedMean());
                  CpuBuffer savedInvStd = cpu(op.savedInvStd());
                  CpuBuffer dgamma = cpu(op.dgamma());
                  CpuBuffer dbeta = cpu(op.dbeta());
                  CpuBuffer dx = cpu(op.dx());
                  if (oneDnn != null && op.inner() == 1) {
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
                    return;
                  }
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
                })
            .add(
                Softmax.class,
                (op, s) -> {
                  CpuBuffer x = cpu(op.x());
                  CpuBuffer y = cpu(op.y());
                  if (oneDnn != null) {
                    s.enqueue(() -> oneDnn.softmax(op.rows(), op.cols(), x.pointer(), y.pointer()));
                  } else {
                    s.enqueue(() -> norms.softmax(x.floats(), op.rows(), op.cols(), y.floats()));
                  }
                })
            .add(
                SoftmaxBackward.class,
                (op, s) -> {
                  CpuBuffer y = cpu(op.y());
                  CpuBuffer dy = cpu(op.dy());
                  CpuBuffer dx = cpu(op.dx());
                  if (oneDnn != null) {
                    s.enqueue(
                        () ->
                            oneDnn.softmaxBackward(
                                op.rows(), op.cols(), y.pointer(), dy.pointer(), dx.pointer()));
                  } else {
                    s.enqueue(
                        () ->
                            norms.softmaxBackward(
                                y.floats(), dy.floats(), op.rows(), op.cols(), dx.floats()));
                  }
                })
            .add(
                StridedCopy.class,
                (op, s) -> {
                  CpuBuffer src = cpu(op.src());
                  CpuBuffer dst = cpu(op.dst());
                  s.enqueue(() -> copies.stridedCopy(src.floats(), dst.floats(), op));
                });
    if (oneDnn == null) {
      return table
          .addLowered(Convolution.class, ConvolutionLowering::forward)
          .addLowered(ConvolutionBackward.class, ConvolutionLowering::backward);
    }
    return table
        .add(Convolution.class, (op, s) -> convolution(kernels, oneDnn, op, s))
        .add(ConvolutionBackward.class, (op, s) -> convolutionBackward(kernels, oneDnn, op, s));
  }

  /**
   * A convolution by oneDNN: with bf16 operands in bf16 where the CPU multiplies bf16 natively,
   * else in fp32 on the operands widened exactly first (as the GEMMs do).
   */
  private static void convolution(CpuKernels kernels, OneDnn oneDnn, Convolution op, CpuStream s) {
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

  private static void convolutionBackward(
      CpuKernels kernels, OneDnn oneDnn, ConvolutionBackward op, CpuStream s) {
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
   * A GEMM (or a strided batch of them) by oneDNN's matmul: bf16 × bf16 in bf16 where the CPU
   * multiplies bf16 natively, else in fp32 with any bf16 operand widened exactly first.
   */
  private static void matmul(
      CpuKernels kernels, OneDnn oneDnn, GemmStridedBatched op, CpuStream s) {
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

  private static void gemm(CpuKernels kernels, Gemm op, CpuStream s) {
    CpuBuffer a = cpu(op.a());
    CpuBuffer b = cpu(op.b());
    CpuBuffer c = cpu(op.c());
    s.enqueue(
        () -> {
          // bf16 operands are widened exactly to fp32 scratch, then multiplied in fp32: the
          // result equals an fp32-accumulating bf16 GEMM up to summation order.
          try (FloatPointer wideA = widened(kernels, a);
              FloatPointer wideB = widened(kernels, b)) {
            cblas_sgemm(
                CblasRowMajor,
                op.transA() ? CblasTrans : CblasNoTrans,
                op.transB() ? CblasTrans : CblasNoTrans,
                op.m(),
                op.n(),
                op.k(),
                op.alpha(),
                wideA != null ? wideA : a.floatPointer(),
                op.lda(),
                wideB != null ? wideB : b.floatPointer(),
                op.ldb(),
                op.beta(),
                c.floatPointer(),
                op.ldc());
          }
        });
  }

  private static void gemmStridedBatched(CpuKernels kernels, GemmStridedBatched op, CpuStream s) {
    CpuBuffer a = cpu(op.a());
    CpuBuffer b = cpu(op.b());
    CpuBuffer c = cpu(op.c());
    s.enqueue(
        () -> {
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

  /** An fp32 copy of a BF16 buffer (the caller closes it), or null for an F32 buffer. */
  private static FloatPointer widened(CpuKernels kernels, CpuBuffer x) {
    if (x.dtype() != DType.BF16) {
      return null;
    }
    FloatPointer wide = new FloatPointer(Math.max(1, x.count()));
    kernels.fromBf16(
        x.shorts(), wide.asByteBuffer().order(ByteOrder.nativeOrder()).asFloatBuffer());
    return wide;
  }

  /** Blocked channels are oneDNN's layout: the Java kernels compute on NCHW only. */
  private static void requireOneDnn(OneDnn oneDnn, int block, String what) {
    if (oneDnn == null) {
      ArgumentChecks.requirePlainChannels(block, what);
    }
  }

  /**
   * A fused ReLU's mask (null: none), checked to hold oneDNN's workspace: only oneDNN fuses them,
   * over blocked channels.
   */
  private static Pointer reluMask(
      OneDnn oneDnn, DeviceBuffer mask, int n, int c, int hw, int block) {
    if (mask == null) {
      return null;
    }
    if (oneDnn == null || block == 1) {
      ArgumentChecks.requireUnfused(mask, "batch norm");
    }
    CpuBuffer m = cpu(mask);
    long needed = oneDnn.normReluMaskBytes(n, c, hw, block);
    if (m.count() < needed) {
      throw new IllegalArgumentException(
          mask.label() + " has " + m.count() + " bytes, a fused ReLU's mask needs " + needed);
    }
    return m.pointer();
  }

  /** The CPU buffer behind {@code buffer}, checked to be open now, in the caller's thread. */
  static CpuBuffer cpu(DeviceBuffer buffer) {
    CpuBuffer b = (CpuBuffer) buffer;
    b.requireLive();
    return b;
  }
}
