package dev.ramtrain.trainer.backend.cpu;

import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_BIAS;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DIFF_BIAS;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DIFF_DST;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DIFF_SRC;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DIFF_WEIGHTS;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DST;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_SRC;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_WEIGHTS;

import dev.ramtrain.trainer.backend.ops.ConvWindow;
import java.util.function.BiFunction;
import java.util.function.Supplier;
import org.bytedeco.dnnl.IntMemoryMap;
import org.bytedeco.dnnl.convolution_backward_data;
import org.bytedeco.dnnl.convolution_backward_weights;
import org.bytedeco.dnnl.convolution_forward;
import org.bytedeco.dnnl.engine;
import org.bytedeco.dnnl.global.dnnl.algorithm;
import org.bytedeco.dnnl.global.dnnl.prop_kind;
import org.bytedeco.dnnl.memory;
import org.bytedeco.dnnl.post_ops;
import org.bytedeco.dnnl.primitive_attr;
import org.bytedeco.dnnl.reorder;
import org.bytedeco.dnnl.stream;
import org.bytedeco.javacpp.Pointer;

/**
 * oneDNN's primitives for one convolution shape: forward, backward-data and backward-weights, made
 * once and run on the backend's buffers, whose activations are NCHW or channel-blocked as the
 * operation says. The primitives take activations channel-blocked ({@link #activation}: NCHW itself
 * would get a reference kernel hundreds of times slower) and weights in whatever layout oneDNN
 * picks ({@code format_tag.any}); a tensor whose layout differs is reordered into {@link
 * LayoutScratch} and back around it, so a model that keeps its activations blocked between layers
 * (Backend.channelBlock) pays no reorder but the weights'. Gradients of the weights and bias are
 * added into the backend's buffers by the reorder back (a sum post-op), as parameter gradients
 * accumulate.
 *
 * <p>The algorithm is direct convolution, never Winograd: its error is that of a sum of c·k·k
 * products in fp32, the bound the conformance test checks, as for the im2col reference.
 */
final class OneDnnConvolution implements AutoCloseable {
  // LayoutScratch slots: the tensors of one call that may need a layout of their own
  private static final int SRC = 0;
  private static final int WEIGHTS = 1;
  private static final int DST = 2;
  private static final int DIFF_WEIGHTS = 3;
  private static final int DIFF_BIAS = 4;
  private static final int DIFF_DST_FOR_DATA = 5;
  private static final int BIAS = 6;

  private final NativeObjects natives = new NativeObjects();
  private final convolution_forward forward;
  private final convolution_backward_data backwardData;
  private final convolution_backward_weights backwardWeights;
  private final Tensor src;
  private final Tensor weights;
  private final Tensor bias;
  private final Tensor dst;
  private final Tensor srcForWeights;
  private final Tensor diffDst;
  private final Tensor diffWeights;
  private final Tensor diffBias;
  private final Tensor diffDstForData;
  private final Tensor weightsForData;
  private final Tensor diffSrc;

  /**
   * The primitives for {@code win} with {@code out} output channels; {@code bf16}: the input,
   * weight and output gradient are bf16 (fp32 accumulation, fp32 output and gradients).
   */
  OneDnnConvolution(
      engine eng,
      ConvWindow win,
      int out,
      boolean hasBias,
      int inBlock,
      int outBlock,
      int engineBlock,
      boolean bf16) {
    memory.data_type operand = bf16 ? memory.data_type.bf16 : memory.data_type.f32;
    memory.data_type f32 = memory.data_type.f32;
    long[] srcDims = {win.n(), win.c(), win.h(), win.w()};
    long[] weightDims = {out, win.c(), win.kh(), win.kw()};
    long[] dstDims = {win.n(), out, win.oh(), win.ow()};
    long[] biasDims = {out};
    long[] strides = {win.stride(), win.stride()};
    long[] padding = {win.pad(), win.pad()};
    memory.desc biasPlain = own(desc(biasDims, memory.format_tag.x, f32));
    BiFunction<memory.format_tag, memory.format_tag, Descriptors> describe =
        (srcTag, dstTag) ->
            new Descriptors(
                eng,
                srcDims,
                weightDims,
                dstDims,
                strides,
                padding,
                hasBias ? biasPlain : null,
                operand,
                srcTag,
                dstTag);
    // Channels-last on both sides is asked NHWC on both (the same bytes as the blocked layout on a
    // side of engineBlock channels), unless both sides have engineBlock channels: oneDNN's blocked
    // kernels are the faster there, its NHWC ones (brgemm) with more channels.
    boolean nhwc =
        inBlock == win.c()
            && outBlock == out
            && inBlock > 1
            && !(win.c() == engineBlock && out == engineBlock);
    memory.format_tag srcTag =
        nhwc ? memory.format_tag.nhwc : OneDnn.channelLayout(inBlock, win.c(), engineBlock);
    memory.format_tag dstTag =
        nhwc ? memory.format_tag.nhwc : OneDnn.channelLayout(outBlock, out, engineBlock);
    Descriptors asked =
        describe.apply(
            activation(win.c(), inBlock, engineBlock, srcTag),
            activation(out, outBlock, engineBlock, dstTag));
    if (asked.anyReference()) { // no fast kernel for the blocked layout (AVX without AVX2)
      asked = describe.apply(memory.format_tag.any, memory.format_tag.any);
    }
    convolution_forward.primitive_desc fwd = asked.forward;
    convolution_backward_weights.primitive_desc bwdWeights = asked.backwardWeights;
    convolution_backward_data.primitive_desc bwdData = asked.backwardData;
    forward = own(new convolution_forward(fwd));
    backwardWeights = own(new convolution_backward_weights(bwdWeights));
    backwardData = own(new convolution_backward_data(bwdData));
    src = new Tensor(eng, own(desc(srcDims, srcTag, operand)), own(fwd.src_desc()), SRC, false);
    weights =
        new Tensor(
            eng,
            own(desc(weightDims, memory.format_tag.oihw, operand)),
            own(fwd.weights_desc()),
            WEIGHTS,
            false);
    bias = hasBias ? new Tensor(eng, biasPlain, own(fwd.bias_desc()), BIAS, false) : null;
    dst = new Tensor(eng, own(desc(dstDims, dstTag, f32)), own(fwd.dst_desc()), DST, false);
    srcForWeights =
        new Tensor(
            eng, own(desc(srcDims, srcTag, operand)), own(bwdWeights.src_desc()), SRC, false);
    diffDst =
        new Tensor(
            eng, own(desc(dstDims, dstTag, operand)), own(bwdWeights.diff_dst_desc()), DST, false);
    diffWeights =
        new Tensor(
            eng,
            own(desc(weightDims, memory.format_tag.oihw, f32)),
            own(bwdWeights.diff_weights_desc()),
            DIFF_WEIGHTS,
            true);
    diffBias =
        hasBias
            ? new Tensor(eng, biasPlain, own(bwdWeights.diff_bias_desc()), DIFF_BIAS, true)
            : null;
    memory.desc dataDiffDst = own(bwdData.diff_dst_desc());
    diffDstForData =
        dataDiffDst.equals(own(bwdWeights.diff_dst_desc()))
            ? null // backward-weights' reordered dy serves backward-data too
            : new Tensor(
                eng, own(desc(dstDims, dstTag, operand)), dataDiffDst, DIFF_DST_FOR_DATA, false);
    weightsForData =
        new Tensor(
            eng,
            own(desc(weightDims, memory.format_tag.oihw, operand)),
            own(bwdData.weights_desc()),
            WEIGHTS,
            false);
    diffSrc =
        new Tensor(eng, own(desc(srcDims, srcTag, f32)), own(bwdData.diff_src_desc()), SRC, false);
  }

  /** {@code y = conv(x, w) + b}; {@code b} null without bias. */
  void forward(stream st, LayoutScratch scratch, Pointer x, Pointer w, Pointer b, Pointer y) {
    try (IntMemoryMap args = new IntMemoryMap()) {
      args.put(DNNL_ARG_SRC, src.in(st, scratch, x));
      args.put(DNNL_ARG_WEIGHTS, weights.in(st, scratch, w));
      if (bias != null) {
        args.put(DNNL_ARG_BIAS, bias.in(st, scratch, b));
      }
      args.put(DNNL_ARG_DST, dst.out(scratch, y));
      forward.execute(st, args);
    }
    dst.writeBack(st);
    st._wait();
  }

  /** {@code dw += dL/dW}, {@code db += dL/db} (null without bias), {@code dx = dL/dx} (or null). */
  void backward(
      stream st,
      LayoutScratch scratch,
      Pointer x,
      Pointer dy,
      Pointer w,
      Pointer dw,
      Pointer db,
      Pointer dx) {
    memory dyInner = diffDst.in(st, scratch, dy);
    try (IntMemoryMap args = new IntMemoryMap()) {
      args.put(DNNL_ARG_SRC, srcForWeights.in(st, scratch, x));
      args.put(DNNL_ARG_DIFF_DST, dyInner);
      args.put(DNNL_ARG_DIFF_WEIGHTS, diffWeights.out(scratch, dw));
      if (diffBias != null) {
        args.put(DNNL_ARG_DIFF_BIAS, diffBias.out(scratch, db));
      }
      backwardWeights.execute(st, args);
    }
    diffWeights.writeBack(st);
    if (diffBias != null) {
      diffBias.writeBack(st);
    }
    if (dx != null) {
      try (IntMemoryMap args = new IntMemoryMap()) {
        args.put(
            DNNL_ARG_DIFF_DST,
            diffDstForData == null ? dyInner : diffDstForData.in(st, scratch, dy));
        args.put(DNNL_ARG_WEIGHTS, weightsForData.in(st, scratch, w));
        args.put(DNNL_ARG_DIFF_SRC, diffSrc.out(scratch, dx)); // the source's slot: read by now
        backwardData.execute(st, args);
      }
      diffSrc.writeBack(st);
    }
    st._wait();
  }

  @Override
  public void close() {
    natives.close();
  }

  private <P extends Pointer> P own(P p) {
    return natives.own(p);
  }

  /** The three primitive descriptors of one shape, with the activations' layouts asked for. */
  private final class Descriptors {
    final convolution_forward.primitive_desc forward;
    final convolution_backward_weights.primitive_desc backwardWeights;
    final convolution_backward_data.primitive_desc backwardData;

    Descriptors(
        engine eng,
        long[] srcDims,
        long[] weightDims,
        long[] dstDims,
        long[] strides,
        long[] padding,
        memory.desc bias,
        memory.data_type operand,
        memory.format_tag srcTag,
        memory.format_tag dstTag) {
      memory.data_type f32 = memory.data_type.f32;
      memory.desc noBias = bias != null ? bias : own(new memory.desc());
      memory.desc srcAsked = own(desc(srcDims, srcTag, operand));
      memory.desc weightAsked = own(desc(weightDims, memory.format_tag.any, operand));
      memory.desc diffDstAsked = own(desc(dstDims, dstTag, operand));
      forward =
          own(
              new convolution_forward.primitive_desc(
                  eng,
                  prop_kind.forward_training,
                  algorithm.convolution_direct,
                  srcAsked,
                  weightAsked,
                  noBias,
                  own(desc(dstDims, dstTag, f32)),
                  strides,
                  padding,
                  padding));
      backwardWeights =
          own(
              new convolution_backward_weights.primitive_desc(
                  eng,
                  algorithm.convolution_direct,
                  srcAsked,
                  own(desc(weightDims, memory.format_tag.any, f32)),
                  noBias,
                  diffDstAsked,
                  strides,
                  padding,
                  padding,
                  forward));
      Supplier<convolution_backward_data.primitive_desc> data =
          () ->
              own(
                  new convolution_backward_data.primitive_desc(
                      eng,
                      algorithm.convolution_direct,
                      own(desc(srcDims, srcTag, f32)),
                      weightAsked,
                      diffDstAsked,
                      strides,
                      padding,
                      padding,
                      forward));
      convolution_backward_data.primitive_desc direct = data.get();
      backwardData = passedStridedBrgemm(direct) ? direct : data.get();
    }

    /**
     * Moves {@code pd} past oneDNN's brgemm backward-data for strided NHWC convolutions, which it
     * lists first: on ResNet-20's stride-2 convolutions it measured 2-3 times slower than the
     * direct kernel listed next (1.04 ms against 0.50 for 16 to 32 channels at 28², 0.32 against
     * 0.10 for the 1×1 shortcut). False when no fast kernel follows (then it is used after all).
     */
    private static boolean passedStridedBrgemm(convolution_backward_data.primitive_desc pd) {
      while (pd.impl_info_str().getString().startsWith("brgconv_strided")) {
        if (!pd.next_impl()) {
          return false;
        }
      }
      return !isReference(pd.impl_info_str().getString());
    }

    /** Whether oneDNN has only its reference kernel for one of them. */
    boolean anyReference() {
      return isReference(forward.impl_info_str().getString())
          || isReference(backwardWeights.impl_info_str().getString())
          || isReference(backwardData.impl_info_str().getString());
    }

    private static boolean isReference(String implementation) {
      return implementation.startsWith("ref");
    }
  }

  /**
   * An activation as the primitives are asked for it: as the model holds it ({@code held}, when
   * blocked or channels-last), or (an NCHW tensor) as this CPU's kernels are fastest in ({@code
   * engineBlock}), so each primitive gets the same layout whether the model's tensor is NCHW or
   * not, and none picks a layout of its own: given {@code any}, the backward-data of a stride-2
   * convolution chose oneDNN's NHWC kernel, with reorders around it 3-7 times slower than the
   * blocked one (4.3 ms of a ResNet-20 step against 1.6). Fewer channels than a block (a stem's
   * image) stay {@code any}: padded to a block they would multiply zeros.
   */
  private static memory.format_tag activation(
      int channels, int block, int engineBlock, memory.format_tag held) {
    if (block > 1) {
      return held;
    }
    return channels >= engineBlock ? OneDnn.blocked(engineBlock) : memory.format_tag.any;
  }

  private static memory.desc desc(long[] dims, memory.format_tag tag, memory.data_type type) {
    return new memory.desc(dims, type, tag);
  }

  /**
   * One tensor as the backend holds it (NCHW, the user memory) and as the primitive wants it; the
   * same memory when the layouts agree, else a scratch slot and the reorders between them. An
   * accumulating tensor (a gradient added into the user's) always computes in scratch and is summed
   * into the user's on the way back.
   */
  private final class Tensor {
    private final memory user;
    private final memory inner;
    private final reorder toInner;
    private final reorder toUser;
    private final int slot;
    private final long innerBytes;

    Tensor(engine eng, memory.desc userDesc, memory.desc innerDesc, int slot, boolean accumulates) {
      this.slot = slot;
      this.innerBytes = innerDesc.get_size();
      this.user = own(new memory(userDesc, eng, (Pointer) null));
      if (!accumulates && userDesc.equals(innerDesc)) {
        inner = user;
        toInner = null;
        toUser = null;
        return;
      }
      inner = own(new memory(innerDesc, eng, (Pointer) null));
      toInner = accumulates ? null : own(new reorder(user, inner));
      if (accumulates) {
        try (post_ops sum = new post_ops();
            primitive_attr attr = new primitive_attr()) {
          sum.append_sum();
          attr.set_post_ops(sum);
          toUser = own(new reorder(inner, user, attr));
        }
      } else {
        toUser = own(new reorder(inner, user));
      }
    }

    /** The tensor at {@code data} in the primitive's layout, reordered there if need be. */
    memory in(stream st, LayoutScratch scratch, Pointer data) {
      user.set_data_handle(data);
      if (inner != user) {
        inner.set_data_handle(scratch.slot(slot, innerBytes));
        toInner.execute(st, user, inner);
      }
      return inner;
    }

    /** Where the primitive writes the tensor bound for {@code data}. */
    memory out(LayoutScratch scratch, Pointer data) {
      user.set_data_handle(data);
      if (inner != user) {
        inner.set_data_handle(scratch.slot(slot, innerBytes));
      }
      return inner;
    }

    /** Brings what the primitive wrote into the user's buffer (summed, if it accumulates). */
    void writeBack(stream st) {
      if (inner != user) {
        toUser.execute(st, inner, user);
      }
    }
  }
}
