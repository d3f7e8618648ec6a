package dev.ramtrain.trainer.backend.cpu;

import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DIFF_DST;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DIFF_SRC;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DST;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_SRC;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_WORKSPACE;

import dev.ramtrain.trainer.backend.ops.MaxPool;
import dev.ramtrain.trainer.backend.ops.MaxPoolBackward;
import org.bytedeco.dnnl.engine;
import org.bytedeco.dnnl.global.dnnl;
import org.bytedeco.dnnl.memory;
import org.bytedeco.dnnl.pooling_backward;
import org.bytedeco.dnnl.pooling_forward;
import org.bytedeco.dnnl.primitive_attr;
import org.bytedeco.dnnl.stream;
import org.bytedeco.javacpp.Pointer;

/**
 * oneDNN's max pooling, forward and backward, for one shape: its vector loops pool a block's 16
 * channels at once where the Java kernel walks each channel's plane through strided reads
 * (ResNet-50's stem pooling: 33 ms forward against a few). NCHW activations go through it too where
 * it pools them with a jit kernel ({@link #jitPoolsPlainChannels}). The winners are kept in
 * oneDNN's workspace, which lives in the operation's {@code argmax} buffer (at most a 32-bit index
 * per output, what that buffer holds): an argmax only this engine's backward reads. Padding never
 * wins, ties go to the first of the window in scan order, as the operation says.
 */
final class OneDnnMaxPool implements AutoCloseable {
  private final BoundPrimitive forward;
  private final BoundPrimitive backward;

  /** A pooling's shape and layout: what one instance serves. */
  record Window(int n, int c, int h, int w, int k, int stride, int pad, int block) {
    static Window of(MaxPool op) {
      return new Window(
          op.n(), op.c(), op.h(), op.w(), op.k(), op.stride(), op.pad(), op.channelBlock());
    }

    static Window of(MaxPoolBackward op) {
      return new Window(
          op.n(), op.c(), op.h(), op.w(), op.k(), op.stride(), op.pad(), op.channelBlock());
    }

    int oh() {
      return (h + 2 * pad - k) / stride + 1;
    }

    int ow() {
      return (w + 2 * pad - k) / stride + 1;
    }
  }

  OneDnnMaxPool(engine eng, Window shape, int engineBlock) {
    NativeObjects forwardOwn = new NativeObjects();
    NativeObjects backwardOwn = new NativeObjects();
    memory.format_tag layout = OneDnn.channelLayout(shape.block(), shape.c(), engineBlock);
    long[] srcDims = {shape.n(), shape.c(), shape.h(), shape.w()};
    long[] dstDims = {shape.n(), shape.c(), shape.oh(), shape.ow()};
    long[] strides = {shape.stride(), shape.stride()};
    long[] kernel = {shape.k(), shape.k()};
    long[] dilation = {0, 0};
    long[] padding = {shape.pad(), shape.pad()};
    memory.desc src = forwardOwn.own(new memory.desc(srcDims, memory.data_type.f32, layout));
    memory.desc dst = forwardOwn.own(new memory.desc(dstDims, memory.data_type.f32, layout));
    pooling_forward.primitive_desc fwd =
        forwardOwn.own(
            new pooling_forward.primitive_desc(
                eng,
                dnnl.dnnl_forward_training,
                dnnl.dnnl_pooling_max,
                src,
                dst,
                strides,
                kernel,
                dilation,
                padding,
                padding,
                forwardOwn.own(new primitive_attr()),
                false));
    memory.desc workspace = forwardOwn.own(fwd.workspace_desc());
    long argmaxBytes = 4L * shape.n() * shape.c() * shape.oh() * shape.ow();
    if (workspace.get_size() > argmaxBytes) {
      forwardOwn.close();
      backwardOwn.close();
      throw new IllegalStateException(
          "oneDNN's max-pooling workspace needs "
              + workspace.get_size()
              + " bytes, more than the "
              + argmaxBytes
              + " of the argmax buffer");
    }
    forward =
        new BoundPrimitive(
            forwardOwn,
            eng,
            new pooling_forward(fwd),
            new int[] {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_WORKSPACE},
            new memory.desc[] {src, dst, workspace});
    pooling_backward.primitive_desc bwd =
        backwardOwn.own(
            new pooling_backward.primitive_desc(
                eng,
                dnnl.dnnl_pooling_max,
                src,
                dst,
                strides,
                kernel,
                dilation,
                padding,
                padding,
                fwd,
                backwardOwn.own(new primitive_attr()),
                false));
    backward =
        new BoundPrimitive(
            backwardOwn,
            eng,
            new pooling_backward(bwd),
            new int[] {DNNL_ARG_DIFF_DST, DNNL_ARG_WORKSPACE, DNNL_ARG_DIFF_SRC},
            new memory.desc[] {dst, workspace, src});
  }

  /**
   * Whether oneDNN pools NCHW activations with a jit kernel on this CPU. From AVX-512 on it
   * transposes blocks of channels into its vector loop (the anchor CNN's first pooling: 1.5 ms
   * forward against the Java kernel's 6); below it picks {@code simple_nchw}, a scalar loop 2-3
   * times slower than the Java kernel (16 against 5 ms on the AVX2 path), which then keeps NCHW.
   */
  static boolean jitPoolsPlainChannels(engine eng) {
    try (NativeObjects own = new NativeObjects()) {
      long[] two = {2, 2};
      long[] zero = {0, 0};
      pooling_forward.primitive_desc probe =
          own.own(
              new pooling_forward.primitive_desc(
                  eng,
                  dnnl.dnnl_forward_training,
                  dnnl.dnnl_pooling_max,
                  own.own(
                      new memory.desc(
                          new long[] {2, 32, 8, 8}, memory.data_type.f32, memory.format_tag.nchw)),
                  own.own(
                      new memory.desc(
                          new long[] {2, 32, 4, 4}, memory.data_type.f32, memory.format_tag.nchw)),
                  two,
                  two,
                  zero,
                  zero,
                  zero,
                  own.own(new primitive_attr()),
                  false));
      return probe.impl_info_str().getString().startsWith("jit");
    }
  }

  void forward(stream st, Pointer x, Pointer y, Pointer argmax) {
    forward.run(st, x, y, argmax);
  }

  void backward(stream st, Pointer dy, Pointer argmax, Pointer dx) {
    backward.run(st, dy, argmax, dx);
  }

  @Override
  public void close() {
    backward.close(); // made with the forward's descriptor as its hint
    forward.close();
  }
}
