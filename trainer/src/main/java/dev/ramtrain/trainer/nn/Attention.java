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
import java.util.Set;

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
    ActivationKeys keys = params.activationKeys();
    if (keys != null) {
      bindForInference(params, keys, maxBatch);
      return;
    }
    // One gradient slot serves both: backward has consumed proj's (dL/dcontext) before qkv's
    // backward writes its own there.
    ParameterSource linears = params.inputGradientIn("attention");
    qkv.bind(backend, linears, maxBatch);
    proj.bind(backend, linears, maxBatch);
    probs = own("probs", squaresCount(maxBatch));
    context = own("context", headsCount(maxBatch));
    dqkv = innerGradient("qkv", 3 * headsCount(maxBatch));
    bindScratch(maxBatch);
  }

  /**
   * Bound for inference each step writes apart, in the order forward runs them, so the next layers
   * keep proj's output alone: qkv's output, then the probabilities and the heads' outputs (reading
   * it), then proj's (reading those).
   */
  private void bindForInference(ParameterSource params, ActivationKeys keys, int maxBatch) {
    ActivationKeys qkvKeys = keys.child(keys.inputKey(), Set.of());
    qkv.bind(backend, params.withActivationKeys(qkvKeys), maxBatch);
    ActivationKeys headKeys = keys.child(qkvKeys.outputKey(), Set.of());
    ParameterSource heads = params.withActivationKeys(headKeys);
    probs = own(heads, "probs", DType.F32, squaresCount(maxBatch));
    context = own(heads, "context", DType.F32, headsCount(maxBatch));
    headKeys.outputIn(headKeys.writeKey());
    ActivationKeys projKeys = keys.child(headKeys.outputKey(), Set.of());
    proj.bind(backend, params.withActivationKeys(projKeys), maxBatch);
    keys.outputIn(projKeys.outputKey());
    bindScratch(maxBatch);
  }

  /** The workspace blocks forward and backward share (see {@link #bind}). */
  private void bindScratch(int maxBatch) {
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

  /**
   * The operands of one batched GEMM a product over {@code count} heads: q, k, v, the heads'
   * outputs (forward) or their gradient (backward), the probabilities of those heads, and where
   * backward writes dq, dk and dv. One image's heads in place in the qkv rows, or every image's in
   * the workspace blocks.
   */
  private record Heads(
      int count,
      GemmOperand q,
      GemmOperand k,
      GemmOperand v,
      GemmOperand out,
      DeviceBuffer probs,
      GemmOperand dq,
      GemmOperand dk,
      GemmOperand dv) {}

  /** Image b's heads, strided views of the rows; {@code out} its [tokens, dim] rows of them. */
  private Heads imageHeads(int b, DeviceBuffer out, DeviceBuffer dqRows) {
    long square = (long) tokens * tokens;
    DeviceBuffer outRows = out.view((long) b * tokens * dim, (long) tokens * dim);
    return new Heads(
        heads,
        GemmOperand.of(part(qkvOut, b, 0), 3 * dim).strided(headDim),
        GemmOperand.of(part(qkvOut, b, 1), 3 * dim).strided(headDim),
        GemmOperand.of(part(qkvOut, b, 2), 3 * dim).strided(headDim),
        GemmOperand.of(outRows, dim).strided(headDim),
        probs.view(b * heads * square, heads * square),
        dqRows == null ? null : GemmOperand.of(part(dqRows, b, 0), 3 * dim).strided(headDim),
        dqRows == null ? null : GemmOperand.of(part(dqRows, b, 1), 3 * dim).strided(headDim),
        dqRows == null ? null : GemmOperand.of(part(dqRows, b, 2), 3 * dim).strided(headDim));
  }

  /**
   * Every image's heads in the workspace blocks: the fourth holds the outputs or dL/dcontext, and
   * backward writes dv over v (read only by dp), dq over the fourth (dL/dcontext is spent by then)
   * and dk over k (dq has read it).
   */
  private Heads batchHeads(int batch) {
    long block = (long) tokens * headDim;
    return new Heads(
        batch * heads,
        GemmOperand.of(q, headDim).strided(block),
        GemmOperand.of(k, headDim).strided(block),
        GemmOperand.of(v, headDim).strided(block),
        GemmOperand.of(fourth, headDim).strided(block),
        probs.view(0, squaresCount(batch)),
        GemmOperand.of(fourth, headDim).strided(block),
        GemmOperand.of(k, headDim).strided(block),
        GemmOperand.of(v, headDim).strided(block));
  }

  /** The GEMMs' groups of heads: each image's in place, or, batched, all of them at once. */
  private List<Heads> groups(int batch, DeviceBuffer out, DeviceBuffer dqRows) {
    if (backend.batchesAcrossImages()) {
      return List.of(batchHeads(batch));
    }
    List<Heads> images = new ArrayList<>(batch);
    for (int b = 0; b < batch; b++) {
      images.add(imageHeads(b, out, dqRows));
    }
    return images;
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer x, int batch, boolean training) {
    qkvOut = qkv.forward(s, x, batch, training);
    DeviceBuffer ctx = context.view(0, headsCount(batch));
    if (backend.batchesAcrossImages()) {
      splitHeads(s, batch);
    }
    List<Heads> groups = groups(batch, ctx, null);
    long square = (long) tokens * tokens;
    for (Heads h : groups) { // scores = scale · q kᵀ
      backend.run(
          s,
          new GemmStridedBatched(
              tokens,
              tokens,
              headDim,
              scale,
              h.q(),
              h.k().transposed(),
              0f,
              GemmOperand.of(h.probs(), tokens).strided(square),
              h.count()));
    }
    DeviceBuffer p = probs.view(0, squaresCount(batch));
    backend.run(s, new Softmax(p, batch * heads * tokens, tokens, p));
    for (Heads h : groups) { // the heads' outputs p v, side by side in each token's row
      backend.run(
          s,
          new GemmStridedBatched(
              tokens,
              headDim,
              tokens,
              1f,
              GemmOperand.of(h.probs(), tokens).strided(square),
              h.v(),
              0f,
              h.out(),
              h.count()));
    }
    if (backend.batchesAcrossImages()) {
      backend.run(s, fromHeads(fourth, ctx, dim, 0, batch));
    }
    return proj.forward(s, ctx, batch, training);
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    DeviceBuffer dcontext = proj.backward(s, dy, batch, true);
    DeviceBuffer dq = dqkv.view(0, 3 * headsCount(batch));
    if (backend.batchesAcrossImages()) {
      splitHeads(s, batch); // forward's scratch has served other layers since
      backend.run(s, toHeads(dcontext, dim, 0, fourth, batch));
    }
    for (Heads h : groups(batch, dcontext, dq)) {
      headGradients(s, h);
    }
    if (backend.batchesAcrossImages()) {
      backend.run(s, fromHeads(fourth, dq, 3 * dim, 0, batch));
      backend.run(s, fromHeads(k, dq, 3 * dim, dim, batch));
      backend.run(s, fromHeads(v, dq, 3 * dim, 2 * dim, batch));
    }
    return qkv.backward(s, dq, batch, needInputGrad);
  }

  /** dq, dk and dv of {@code h}'s heads from dL/dout, their probability gradient in scratch. */
  private void headGradients(Stream s, Heads h) {
    long square = (long) tokens * tokens;
    DeviceBuffer dp = dprobs.view(0, h.count() * square);
    GemmOperand p = GemmOperand.of(h.probs(), tokens).strided(square);
    GemmOperand dScores = GemmOperand.of(dp, tokens).strided(square);
    // dp = dout vᵀ
    backend.run(
        s,
        new GemmStridedBatched(
            tokens, tokens, headDim, 1f, h.out(), h.v().transposed(), 0f, dScores, h.count()));
    // dv = pᵀ dout
    backend.run(
        s,
        new GemmStridedBatched(
            tokens, headDim, tokens, 1f, p.transposed(), h.out(), 0f, h.dv(), h.count()));
    // the scores' gradient, in place: p ⊙ (dp - Σ dp ⊙ p)
    backend.run(s, new SoftmaxBackward(h.probs(), dp, h.count() * tokens, tokens, dp));
    // dq = scale · dscores k, then dk = scale · dscoresᵀ q
    backend.run(
        s,
        new GemmStridedBatched(
            tokens, headDim, tokens, scale, dScores, h.k(), 0f, h.dq(), h.count()));
    backend.run(
        s,
        new GemmStridedBatched(
            tokens, headDim, tokens, scale, dScores.transposed(), h.q(), 0f, h.dk(), h.count()));
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
