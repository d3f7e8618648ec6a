package dev.ramtrain.trainer.backend.lowering;

import dev.ramtrain.trainer.backend.ArgumentChecks;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;
import dev.ramtrain.trainer.backend.ops.AddChannelBias;
import dev.ramtrain.trainer.backend.ops.Col2im;
import dev.ramtrain.trainer.backend.ops.ConvWindow;
import dev.ramtrain.trainer.backend.ops.Convolution;
import dev.ramtrain.trainer.backend.ops.ConvolutionBackward;
import dev.ramtrain.trainer.backend.ops.GemmOperand;
import dev.ramtrain.trainer.backend.ops.GemmStridedBatched;
import dev.ramtrain.trainer.backend.ops.Im2col;
import dev.ramtrain.trainer.backend.ops.SumChannels;
import java.util.ArrayList;
import java.util.List;

/**
 * A convolution as im2col and GEMM, for the engines without one of their own (the plain-Java CPU
 * engine, the readable reference, and CUDA): per image, the columns are a [c·k·k, oh·ow] matrix
 * that PyTorch's weight layout [out, c·k·k] multiplies into the image's NCHW output directly, so a
 * strided batch of GEMMs does a batch. Backward runs the same GEMMs transposed and col2im.
 */
public final class ConvolutionLowering {
  private ConvolutionLowering() {}

  /** Lowered, a convolution multiplies fp32 columns: a bf16 layer converts the columns itself. */
  private static void requireFp32(DeviceBuffer x) {
    if (x.dtype() != DType.F32) {
      throw new IllegalArgumentException(
          x.label()
              + " is "
              + x.dtype()
              + ": bf16 convolution operands need an engine that"
              + " convolves in bf16 (oneDNN)");
    }
  }

  public static List<Operation> forward(Convolution op) {
    requireColumns(op.columns());
    ArgumentChecks.requirePlainChannels(Math.max(op.inBlock(), op.outBlock()), "convolution");
    requireFp32(op.x());
    ConvWindow win = op.window();
    int out = op.outChannels();
    List<Operation> ops = new ArrayList<>(3);
    ops.add(new Im2col(op.x(), win, op.columns()));
    ops.add(outputs(win, out, op.weight(), op.columns(), op.y()));
    if (op.bias() != null) {
      ops.add(new AddChannelBias(op.y(), op.bias(), win.n(), out, win.oh() * win.ow()));
    }
    return ops;
  }

  public static List<Operation> backward(ConvolutionBackward op) {
    requireColumns(op.columns());
    ArgumentChecks.requirePlainChannels(
        Math.max(op.inBlock(), op.outBlock()), "convolution backward");
    requireFp32(op.x());
    ConvWindow win = op.window();
    int out = op.outChannels();
    List<Operation> ops = new ArrayList<>(5);
    if (op.biasGrad() != null) {
      ops.add(new SumChannels(op.dy(), op.biasGrad(), win.n(), out, win.oh() * win.ow()));
    }
    ops.add(new Im2col(op.x(), win, op.columns()));
    ops.add(weightGradient(win, out, op.dy(), op.columns(), op.weightGrad()));
    if (op.dx() != null) {
      // into the columns (the weight gradient has read them), then summed back by col2im
      ops.add(columnGradients(win, out, op.weight(), op.dy(), op.columns()));
      ops.add(new Col2im(op.columns(), win, op.dx()));
    }
    return ops;
  }

  /** {@code y_i [out, oh·ow] = W [out, c·k·k] · cols_i [c·k·k, oh·ow]} for every image i. */
  public static GemmStridedBatched outputs(
      ConvWindow win, int out, DeviceBuffer weight, DeviceBuffer cols, DeviceBuffer y) {
    int hw = win.oh() * win.ow();
    int patch = win.c() * win.kh() * win.kw();
    return new GemmStridedBatched(
        out,
        hw,
        patch,
        1f,
        GemmOperand.of(weight, patch),
        GemmOperand.of(cols, hw).strided((long) patch * hw),
        0f,
        GemmOperand.of(y, hw).strided((long) out * hw),
        win.n());
  }

  /** {@code dW += Σ_i dy_i [out, oh·ow] · cols_iᵀ}. */
  public static GemmStridedBatched weightGradient(
      ConvWindow win, int out, DeviceBuffer dy, DeviceBuffer cols, DeviceBuffer weightGrad) {
    int hw = win.oh() * win.ow();
    int patch = win.c() * win.kh() * win.kw();
    return new GemmStridedBatched(
        out,
        patch,
        hw,
        1f,
        GemmOperand.of(dy, hw).strided((long) out * hw),
        GemmOperand.of(cols, hw).transposed().strided((long) patch * hw),
        1f,
        GemmOperand.of(weightGrad, patch),
        win.n());
  }

  /** {@code dcols_i = Wᵀ · dy_i} for every image i (overwritten). */
  public static GemmStridedBatched columnGradients(
      ConvWindow win, int out, DeviceBuffer weight, DeviceBuffer dy, DeviceBuffer cols) {
    int hw = win.oh() * win.ow();
    int patch = win.c() * win.kh() * win.kw();
    return new GemmStridedBatched(
        patch,
        hw,
        out,
        1f,
        GemmOperand.of(weight, patch).transposed(),
        GemmOperand.of(dy, hw).strided((long) out * hw),
        0f,
        GemmOperand.of(cols, hw).strided((long) patch * hw),
        win.n());
  }

  private static void requireColumns(Object columns) {
    if (columns == null) {
      throw new IllegalArgumentException(
          "convolution: this engine lowers to im2col and needs the columns' scratch"
              + " (Backend.convolvesWithoutColumns says whether it may be left out)");
    }
  }
}
