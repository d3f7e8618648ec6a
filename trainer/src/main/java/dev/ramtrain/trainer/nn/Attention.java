package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.GemmOperand;
import dev.ramtrain.trainer.backend.ops.GemmStridedBatched;
import dev.ramtrain.trainer.backend.ops.Softmax;
import dev.ramtrain.trainer.backend.ops.SoftmaxBackward;
import dev.ramtrain.trainer.backend.ops.StridedCopy;
import java.util.ArrayList;
import java.util.List;

/**
 * timm's multi-head self-attention over a sample's [tokens, dim]: {@code qkv} (one Linear to 3·dim,
 * each token's row laid out [3, heads, headDim] as timm reshapes it), per head {@code softmax(q kᵀ
 * / sqrt(headDim)) v}, the heads side by side, then {@code proj}. The N×N probabilities are kept
 * for backward (what PyTorch's autograd saves). The heads are strided views of the qkv rows: one
 * stride between an image's heads, another between images, which no strided batch expresses. So
 * each product runs either per image, one batched GEMM over its heads in place, or, where the
 * engine {@linkplain dev.ramtrain.trainer.backend.Backend#batchesAcrossImages batches across
 * images} (a GPU, where a launch costs more than a copy), once for the whole batch over q, k and v
 * copied into [batch, heads, tokens, headDim] blocks of scratch, as PyTorch's matmul makes the
 * permuted views contiguous.
 */
public final class Attention extends BaseLayer {
  private final int tokens;
  private final int dim;
  private final int heads;
  private final int headDim;
  private final float scale;
  private final Linear qkv;
  private final Linear proj;
  private DeviceBuffer probs; // [batch, heads, tokens, tokens]
  private DeviceBuffer context; // [batch, tokens, dim]: the heads' outputs, proj's input
  private DeviceBuffer dqkv;
  private DeviceBuffer qkvOut;
  // Across images only, scratch, each [batch, heads, tokens, headDim]: q, k and v, then their
  // gradients (dk over k, dv over v); the fourth holds the heads' outputs in forward, dL/dcontext
  // and then dq in backward.
  private DeviceBuffer q;
  private DeviceBuffer k;
  private DeviceBuffer v;
  private DeviceBuffer fourth;
  private DeviceBuffer dprobs; // scratch: [batch (across images) or 1, heads, tokens, tokens]

  public Attention(String name, int tokens, int dim, int heads, Precision precision) {
    super(name);
    if (heads < 1 || dim % heads != 0) {
      throw new IllegalArgumentException(name + ": " + dim + " features in " + heads + " heads");
    }
    this.tokens = tokens;
    this.dim = dim;
    this.heads = heads;
    this.headDim = dim / heads;
    this.scale = (float) (1 / Math.sqrt(headDim));
    this.qkv = new Linear(name + ".qkv", dim, 3 * dim, tokens, precision, true);
    this.proj = new Linear(name + ".proj", dim, dim, tokens, precision, true);
  }

  /**
   * Backward reads what forward kept (the qkv rows, the probabilities, the context), not proj's
   * output.
   */
  @Override
  public boolean backwardReadsOutput() {
    return false;
  }

  @Override
  public int inputSize() {
    return tokens * dim;
  }

  @Override
  public int outputSize() {
    return tokens * dim;
  }

  @Override
  public List<ParamSpec> parameters() {
    List<ParamSpec> all = new ArrayList<>(qkv.parameters());
    all.addAll(proj.parameters());
    return all;
  }

  /** Its qkv and output projections. */
  public List<Linear> projections() {
    return List.of(qkv, proj);
  }

  /**
   * Training FLOPs per sample of the token mixing itself: q kᵀ and p v are 2·tokens²·dim each
   * forward, and backward does both products' two gradients.
   */
  public long mixingFlopsPerSample() {
    return 3 * 4L * tokens * tokens * dim;
  }

  /** dL/dqkv takes a gradient slot: three times the input. */
  @Override
  public int largestInput() {
    return 3 * dim * tokens;
  }

  /**
   * Across images, four [batch, tokens, dim] blocks of heads and the batch's probability gradients;
   * per image, one image's probability gradients.
   */
  @Override
  public long scratchBytes(Backend backend, int maxBatch) {
    return backend.batchesAcrossImages()
        ? 4L * (4 * headsCount(maxBatch) + squaresCount(maxBatch))
        : 4L * squaresCount(1);
  }

  private long headsCount(int batch) {
    return (long) batch * tokens * dim;
  }

  private long squaresCount(int batch) {
    return (long) batch * heads * tokens * tokens;
  }

  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    // One gradient slot serves both: backward has consumed proj's (dL/dcontext) before qkv's
    // backward writes its own there.
    ParameterSource linears = params.inputGradientIn("attention");
    qkv.bind(backend, linears, maxBatch);
    proj.bind(backend, linears, maxBatch);
    probs = own("probs", squaresCount(maxBatch));
    context = own("context", headsCount(maxBatch));
    dqkv = innerGradient("qkv", 3 * headsCount(maxBatch));
    if (!backend.batchesAcrossImages()) {
      dprobs = scratch("dprobs", DType.F32, 0, squaresCount(1));
      return;
    }
    long block = headsCount(maxBatch);
    q = scratch("q", DType.F32, 0, block);
    k = scratch("k", DType.F32, 4 * block, block);
    v = scratch("v", DType.F32, 8 * block, block);
    fourth = scratch("heads", DType.F32, 12 * block, block);
    dprobs = scratch("dprobs", DType.F32, 16 * block, squaresCount(maxBatch));
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer x, int batch, boolean training) {
    qkvOut = qkv.forward(s, x, batch, training);
    DeviceBuffer ctx = context.view(0, headsCount(batch));
    if (backend.batchesAcrossImages()) {
      mixAcrossImages(s, batch, ctx);
    } else {
      mixPerImage(s, batch);
    }
    return proj.forward(s, ctx, batch, training);
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    DeviceBuffer dcontext = proj.backward(s, dy, batch, true);
    DeviceBuffer dq = dqkv.view(0, 3 * headsCount(batch));
    if (backend.batchesAcrossImages()) {
      unmixAcrossImages(s, batch, dcontext, dq);
    } else {
      unmixPerImage(s, batch, dcontext, dq);
    }
    return qkv.backward(s, dq, batch, needInputGrad);
  }

  private void mixAcrossImages(Stream s, int batch, DeviceBuffer ctx) {
    splitHeads(s, batch);
    int count = batch * heads;
    long block = (long) tokens * headDim;
    long square = (long) tokens * tokens;
    DeviceBuffer p = probs.view(0, squaresCount(batch));
    // scores = scale · q kᵀ
    backend.run(
        s,
        new GemmStridedBatched(
            tokens,
            tokens,
            headDim,
            scale,
            GemmOperand.of(q, headDim).strided(block),
            GemmOperand.of(k, headDim).transposed().strided(block),
            0f,
            GemmOperand.of(p, tokens).strided(square),
            count));
    backend.run(s, new Softmax(p, count * tokens, tokens, p));
    // the heads' outputs p v, then side by side in each token's row
    backend.run(
        s,
        new GemmStridedBatched(
            tokens,
            headDim,
            tokens,
            1f,
            GemmOperand.of(p, tokens).strided(square),
            GemmOperand.of(v, headDim).strided(block),
            0f,
            GemmOperand.of(fourth, headDim).strided(block),
            count));
    backend.run(s, fromHeads(fourth, ctx, dim, 0, batch));
  }

  private void unmixAcrossImages(Stream s, int batch, DeviceBuffer dcontext, DeviceBuffer dq) {
    splitHeads(s, batch); // forward's scratch has served other layers since
    backend.run(s, toHeads(dcontext, dim, 0, fourth, batch));
    int count = batch * heads;
    long block = (long) tokens * headDim;
    long square = (long) tokens * tokens;
    DeviceBuffer p = probs.view(0, squaresCount(batch));
    DeviceBuffer dp = dprobs.view(0, squaresCount(batch));
    // dp = dcontext vᵀ
    backend.run(
        s,
        new GemmStridedBatched(
            tokens,
            tokens,
            headDim,
            1f,
            GemmOperand.of(fourth, headDim).strided(block),
            GemmOperand.of(v, headDim).transposed().strided(block),
            0f,
            GemmOperand.of(dp, tokens).strided(square),
            count));
    // dv = pᵀ dcontext, over v (read only by dp above)
    backend.run(
        s,
        new GemmStridedBatched(
            tokens,
            headDim,
            tokens,
            1f,
            GemmOperand.of(p, tokens).transposed().strided(square),
            GemmOperand.of(fourth, headDim).strided(block),
            0f,
            GemmOperand.of(v, headDim).strided(block),
            count));
    // the scores' gradient, in place: p ⊙ (dp - Σ dp ⊙ p)
    backend.run(s, new SoftmaxBackward(p, dp, count * tokens, tokens, dp));
    // dq = scale · dscores k over dL/dcontext, then dk = scale · dscoresᵀ q over k
    backend.run(
        s,
        new GemmStridedBatched(
            tokens,
            headDim,
            tokens,
            scale,
            GemmOperand.of(dp, tokens).strided(square),
            GemmOperand.of(k, headDim).strided(block),
            0f,
            GemmOperand.of(fourth, headDim).strided(block),
            count));
    backend.run(
        s,
        new GemmStridedBatched(
            tokens,
            headDim,
            tokens,
            scale,
            GemmOperand.of(dp, tokens).transposed().strided(square),
            GemmOperand.of(q, headDim).strided(block),
            0f,
            GemmOperand.of(k, headDim).strided(block),
            count));
    backend.run(s, fromHeads(fourth, dq, 3 * dim, 0, batch));
    backend.run(s, fromHeads(k, dq, 3 * dim, dim, batch));
    backend.run(s, fromHeads(v, dq, 3 * dim, 2 * dim, batch));
  }

  /** Each image's heads in place, one batched GEMM over its heads a product. */
  private void mixPerImage(Stream s, int batch) {
    long square = (long) tokens * tokens;
    for (int b = 0; b < batch; b++) {
      DeviceBuffer scores = probs.view(b * heads * square, heads * square);
      // scores_h = scale · q_h k_hᵀ: rows of q and k are 3·dim apart, heads headDim apart
      backend.run(
          s,
          new GemmStridedBatched(
              tokens,
              tokens,
              headDim,
              scale,
              GemmOperand.of(part(qkvOut, b, 0), 3 * dim).strided(headDim),
              GemmOperand.of(part(qkvOut, b, 1), 3 * dim).transposed().strided(headDim),
              0f,
              GemmOperand.of(scores, tokens).strided(square),
              heads));
    }
    DeviceBuffer p = probs.view(0, batch * heads * square);
    backend.run(s, new Softmax(p, batch * heads * tokens, tokens, p));
    for (int b = 0; b < batch; b++) {
      // context[:, h·headDim : (h+1)·headDim] = p_h v_h
      backend.run(
          s,
          new GemmStridedBatched(
              tokens,
              headDim,
              tokens,
              1f,
              GemmOperand.of(probs.view(b * heads * square, heads * square), tokens)
                  .strided(square),
              GemmOperand.of(part(qkvOut, b, 2), 3 * dim).strided(headDim),
              0f,
              GemmOperand.of(context.view((long) b * tokens * dim, (long) tokens * dim), dim)
                  .strided(headDim),
              heads));
    }
  }

  private void unmixPerImage(Stream s, int batch, DeviceBuffer dcontext, DeviceBuffer dq) {
    long square = (long) tokens * tokens;
    for (int b = 0; b < batch; b++) {
      DeviceBuffer p = probs.view(b * heads * square, heads * square);
      DeviceBuffer dctx = dcontext.view((long) b * tokens * dim, (long) tokens * dim);
      // dp_h = dcontext_h v_hᵀ
      backend.run(
          s,
          new GemmStridedBatched(
              tokens,
              tokens,
              headDim,
              1f,
              GemmOperand.of(dctx, dim).strided(headDim),
              GemmOperand.of(part(qkvOut, b, 2), 3 * dim).transposed().strided(headDim),
              0f,
              GemmOperand.of(dprobs, tokens).strided(square),
              heads));
      // dv_h = p_hᵀ dcontext_h
      backend.run(
          s,
          new GemmStridedBatched(
              tokens,
              headDim,
              tokens,
              1f,
              GemmOperand.of(p, tokens).transposed().strided(square),
              GemmOperand.of(dctx, dim).strided(headDim),
              0f,
              GemmOperand.of(part(dq, b, 2), 3 * dim).strided(headDim),
              heads));
      // the scores' gradient, in place: p ⊙ (dp - Σ dp ⊙ p)
      backend.run(s, new SoftmaxBackward(p, dprobs, heads * tokens, tokens, dprobs));
      // dq_h = scale · dscores_h k_h, dk_h = scale · dscores_hᵀ q_h
      backend.run(
          s,
          new GemmStridedBatched(
              tokens,
              headDim,
              tokens,
              scale,
              GemmOperand.of(dprobs, tokens).strided(square),
              GemmOperand.of(part(qkvOut, b, 1), 3 * dim).strided(headDim),
              0f,
              GemmOperand.of(part(dq, b, 0), 3 * dim).strided(headDim),
              heads));
      backend.run(
          s,
          new GemmStridedBatched(
              tokens,
              headDim,
              tokens,
              scale,
              GemmOperand.of(dprobs, tokens).transposed().strided(square),
              GemmOperand.of(part(qkvOut, b, 0), 3 * dim).strided(headDim),
              0f,
              GemmOperand.of(part(dq, b, 1), 3 * dim).strided(headDim),
              heads));
    }
  }

  /** Image b's q (0), k (1) or v (2) columns of the qkv rows, from the first token's row. */
  private DeviceBuffer part(DeviceBuffer rows, int b, int which) {
    long start = (long) b * tokens * 3 * dim + (long) which * dim;
    return rows.view(start, (long) (tokens - 1) * 3 * dim + dim);
  }

  /** q, k and v from the qkv rows into their [batch, heads, tokens, headDim] scratch. */
  private void splitHeads(Stream s, int batch) {
    backend.run(s, toHeads(qkvOut, 3 * dim, 0, q, batch));
    backend.run(s, toHeads(qkvOut, 3 * dim, dim, k, batch));
    backend.run(s, toHeads(qkvOut, 3 * dim, 2 * dim, v, batch));
  }

  /**
   * The copy of {@code dim} columns from {@code column} of [batch, tokens, width] rows into [batch,
   * heads, tokens, headDim] blocks: per image, i walks the heads, j the tokens, k a head's
   * features.
   */
  private StridedCopy toHeads(
      DeviceBuffer rows, int width, int column, DeviceBuffer blocks, int batch) {
    return new StridedCopy(
            from(rows, column),
            new StridedCopy.Strides(headDim, width, 1),
            blocks,
            headStrides(),
            heads,
            tokens,
            headDim,
            false)
        .repeated(batch, (long) tokens * width, (long) tokens * dim);
  }

  /** {@link #toHeads}' inverse. */
  private StridedCopy fromHeads(
      DeviceBuffer blocks, DeviceBuffer rows, int width, int column, int batch) {
    return new StridedCopy(
            blocks,
            headStrides(),
            from(rows, column),
            new StridedCopy.Strides(headDim, width, 1),
            heads,
            tokens,
            headDim,
            false)
        .repeated(batch, (long) tokens * dim, (long) tokens * width);
  }

  private StridedCopy.Strides headStrides() {
    return new StridedCopy.Strides((long) tokens * headDim, headDim, 1);
  }

  /** The rows from their {@code column}-th element on: the copy's strides do the rest. */
  private static DeviceBuffer from(DeviceBuffer rows, int column) {
    return rows.view(column, rows.count() - column);
  }

  @Override
  public void close() {
    qkv.close();
    proj.close();
    super.close();
  }
}
