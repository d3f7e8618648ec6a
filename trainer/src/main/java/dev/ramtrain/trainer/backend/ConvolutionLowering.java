package dev.ramtrain.trainer.backend;

import dev.ramtrain.trainer.backend.ops.AddChannelBias;
import dev.ramtrain.trainer.backend.ops.Col2im;
import dev.ramtrain.trainer.backend.ops.ConvWindow;
import dev.ramtrain.trainer.backend.ops.Convolution;
import dev.ramtrain.trainer.backend.ops.ConvolutionBackward;
import dev.ramtrain.trainer.backend.ops.GemmStridedBatched;
import dev.ramtrain.trainer.backend.ops.Im2col;
import dev.ramtrain.trainer.backend.ops.Operation;
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

  public static List<Operation> forward(Convolution op) {
    ConvWindow win = op.window();
    int out = op.outChannels();
    int hw = win.oh() * win.ow();
    int patch = win.c() * win.kh() * win.kw();
    List<Operation> ops = new ArrayList<>(3);
    ops.add(new Im2col(op.x(), win, op.columns()));
    // y_i [out, hw] = W [out, patch] · cols_i [patch, hw] for every image i
    ops.add(
        new GemmStridedBatched(
            false,
            false,
            out,
            hw,
            patch,
            1f,
            op.weight(),
            patch,
            0,
            op.columns(),
            hw,
            (long) patch * hw,
            0f,
            op.y(),
            hw,
            (long) out * hw,
            win.n()));
    if (op.bias() != null) {
      ops.add(new AddChannelBias(op.y(), op.bias(), win.n(), out, hw));
    }
    return ops;
  }

  public static List<Operation> backward(ConvolutionBackward op) {
    ConvWindow win = op.window();
    int out = op.outChannels();
    int hw = win.oh() * win.ow();
    int patch = win.c() * win.kh() * win.kw();
    List<Operation> ops = new ArrayList<>(5);
    if (op.biasGrad() != null) {
      ops.add(new SumChannels(op.dy(), op.biasGrad(), win.n(), out, hw));
    }
    ops.add(new Im2col(op.x(), win, op.columns()));
    // dW += Σ_i dy_i [out, hw] · cols_iᵀ
    ops.add(
        new GemmStridedBatched(
            false,
            true,
            out,
            patch,
            hw,
            1f,
            op.dy(),
            hw,
            (long) out * hw,
            op.columns(),
            hw,
            (long) patch * hw,
            1f,
            op.weightGrad(),
            patch,
            0,
            win.n()));
    if (op.dx() != null) {
      // dcols_i = Wᵀ · dy_i for every image i, into the columns (dW has read them), then col2im
      ops.add(
          new GemmStridedBatched(
              true,
              false,
              patch,
              hw,
              out,
              1f,
              op.weight(),
              patch,
              0,
              op.dy(),
              hw,
              (long) out * hw,
              0f,
              op.columns(),
              hw,
              (long) patch * hw,
              win.n()));
      ops.add(new Col2im(op.columns(), win, op.dx()));
    }
    return ops;
  }
}
