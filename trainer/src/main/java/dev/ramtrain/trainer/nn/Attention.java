package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.GemmOperand;
import dev.ramtrain.trainer.backend.ops.GemmStridedBatched;
import dev.ramtrain.trainer.backend.ops.Softmax;
import dev.ramtrain.trainer.backend.ops.SoftmaxBackward;
import java.util.ArrayList;
import java.util.List;

/**
 * timm's multi-head self-attention over a sample's [tokens, dim]: {@code qkv} (one Linear to 3·dim,
 * each token's row laid out [3, heads, headDim] as timm reshapes it), per head {@code softmax(q kᵀ
 * / sqrt(headDim)) v}, the heads side by side, then {@code proj}. The N×N probabilities are kept
 * for backward (what PyTorch's autograd saves); the heads are strided views of the qkv rows, so
 * each image's heads are one batched GEMM, with no permute copies.
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
  private DeviceBuffer dprobs; // one image's, scratch
  private DeviceBuffer qkvOut;

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
   * Backward reads what forward kept (q, k, v, the probabilities, the context), not proj's output.
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

  @Override
  public long scratchBytes(int maxBatch) {
    return 4L * heads * tokens * tokens;
  }

  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    // One gradient slot serves both: backward has consumed proj's (dL/dcontext) before qkv's
    // backward writes its own there.
    ParameterSource linears = params.inputGradientIn("attention");
    qkv.bind(backend, linears, maxBatch);
    proj.bind(backend, linears, maxBatch);
    probs = own("probs", (long) maxBatch * heads * tokens * tokens);
    context = own("context", (long) maxBatch * tokens * dim);
    dqkv = innerGradient("qkv", (long) maxBatch * tokens * 3 * dim);
    dprobs = scratch("dprobs", DType.F32, 0, (long) heads * tokens * tokens);
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer x, int batch, boolean training) {
    qkvOut = qkv.forward(s, x, batch, training);
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
    return proj.forward(s, context.view(0, (long) batch * tokens * dim), batch, training);
  }

  /** Image b's q (0), k (1) or v (2) columns of the qkv rows, from the first token's row. */
  private DeviceBuffer part(DeviceBuffer rows, int b, int which) {
    long start = (long) b * tokens * 3 * dim + (long) which * dim;
    return rows.view(start, (long) (tokens - 1) * 3 * dim + dim);
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    DeviceBuffer dcontext = proj.backward(s, dy, batch, true);
    long square = (long) tokens * tokens;
    DeviceBuffer dq = dqkv.view(0, (long) batch * tokens * 3 * dim);
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
    return qkv.backward(s, dq, batch, needInputGrad);
  }

  @Override
  public void close() {
    qkv.close();
    proj.close();
    super.close();
  }
}
