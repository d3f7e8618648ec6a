package dev.ramtrain.trainer.backend;

/**
 * What the layers, the optimizer and the weight streamer need from a device: memory, streams,
 * events, asynchronous copies, GEMM and a handful of kernels. Every kernel is enqueued on a stream
 * and returns at once. Matrices are row-major; sizes are in elements.
 *
 * <p>Implementations: {@code cpu} (the reference, also used without a GPU) and {@code cuda}. Both
 * pass the same conformance suite. The backend owns its streams (closing it closes them); buffers
 * and events belong to whoever created them, and closing a backend while any is still open throws,
 * naming them. {@link Backends#open} is the one way commands get a backend.
 */
public interface Backend extends AutoCloseable {

  String name();

  /**
   * Whether the device's work runs on the host's own cores (the CPU backend): then host work, such
   * as an offloaded run's optimizer step, competes with it instead of running beside it.
   */
  default boolean sharesHostCores() {
    return false;
  }

  // ---- memory, streams, events -------------------------------------------------------------

  DeviceBuffer allocate(String label, DType dtype, long count);

  HostBuffer allocateHost(String label, long bytes);

  Stream createStream(String label);

  /** A new event; {@code label} names it in a leak report. The caller closes it. */
  Event createEvent(String label);

  /**
   * Takes {@code bytes} more device memory from the device now, in one piece, so that the buffers a
   * run allocates next (what its placement plan computed) need no further allocation from the
   * driver, which synchronizes the device. The CPU backend has nothing to reserve.
   */
  default void reserve(long bytes) {}

  /** Bytes of device memory allocated now, and the most ever allocated at once. */
  long allocatedBytes();

  long peakAllocatedBytes();

  /** Starts the peak over from what is allocated now (as torch.cuda.reset_peak_memory_stats). */
  void resetPeakAllocatedBytes();

  /** Bytes of pinned host memory allocated now, and how many host allocations were ever made. */
  long allocatedHostBytes();

  long hostAllocations();

  /**
   * Device memory free now, as the device reports it (cudaMemGetInfo); the CPU backend's device is
   * host memory, so it reports the host's free physical memory.
   */
  long freeMemoryBytes();

  // ---- copies (bytes, asynchronous on the stream) -------------------------------------------

  void copy(HostBuffer src, long srcByte, DeviceBuffer dst, long bytes, Stream stream);

  void copy(DeviceBuffer src, HostBuffer dst, long dstByte, long bytes, Stream stream);

  void copy(DeviceBuffer src, DeviceBuffer dst, Stream stream);

  // ---- math (F32 unless stated) --------------------------------------------------------------

  /**
   * {@code C = alpha * op(A) * op(B) + beta * C}: op(A) is m×k, op(B) is k×n, C is m×n; {@code
   * lda/ldb/ldc} are the row strides of A, B and C as stored. C is F32; A and B may each be F32 or
   * BF16 (bf16 storage, fp32 accumulation: what streamed bf16 weights multiply with).
   */
  void gemm(
      Stream stream,
      boolean transA,
      boolean transB,
      int m,
      int n,
      int k,
      float alpha,
      DeviceBuffer a,
      int lda,
      DeviceBuffer b,
      int ldb,
      float beta,
      DeviceBuffer c,
      int ldc);

  /**
   * {@code count} GEMMs as {@link #gemm} (A and B F32 or BF16, C F32), the i-th on A, B and C
   * offset by {@code i * stride} elements (as cublasSgemmStridedBatched): a stride of 0 shares that
   * matrix across the batch. With {@code strideC == 0} the products are summed into the one C:
   * {@code C = beta * C + alpha * Σ op(A_i) op(B_i)} (a convolution's weight gradient over the
   * images of a batch).
   */
  void gemmStridedBatched(
      Stream stream,
      boolean transA,
      boolean transB,
      int m,
      int n,
      int k,
      float alpha,
      DeviceBuffer a,
      int lda,
      long strideA,
      DeviceBuffer b,
      int ldb,
      long strideB,
      float beta,
      DeviceBuffer c,
      int ldc,
      long strideC,
      int count);

  void fill(Stream stream, DeviceBuffer x, float value);

  /**
   * Converts between F32 and BF16 buffers of the same length ({@link Bf16}: round to nearest even
   * one way, exact the other).
   */
  void convert(Stream stream, DeviceBuffer src, DeviceBuffer dst);

  /** {@code y[r, c] += bias[c]} for a rows×cols matrix. */
  void addBias(Stream stream, DeviceBuffer y, DeviceBuffer bias, int rows, int cols);

  /** {@code out[c] = beta * out[c] + sum over r of x[r, c]} (the bias gradient). */
  void sumRows(Stream stream, DeviceBuffer x, DeviceBuffer out, int rows, int cols, float beta);

  /** {@code y = max(x, 0)}. */
  void relu(Stream stream, DeviceBuffer x, DeviceBuffer y);

  /** {@code dx = x > 0 ? dy : 0}. */
  void reluBackward(Stream stream, DeviceBuffer x, DeviceBuffer dy, DeviceBuffer dx);

  /** Exact (erf) GELU, as PyTorch's default. */
  void gelu(Stream stream, DeviceBuffer x, DeviceBuffer y);

  void geluBackward(Stream stream, DeviceBuffer x, DeviceBuffer dy, DeviceBuffer dx);

  /**
   * Softmax cross-entropy over rows×classes logits with I32 labels and label smoothing ε (targets 1
   * - ε + ε/classes on the label, ε/classes elsewhere). Writes each row's loss to {@code loss} and
   * {@code dlogits = (softmax - target) / rows}, the gradient of the mean loss.
   */
  void softmaxCrossEntropy(
      Stream stream,
      DeviceBuffer logits,
      DeviceBuffer labels,
      int rows,
      int classes,
      float smoothing,
      DeviceBuffer loss,
      DeviceBuffer dlogits);

  /**
   * uint8 HWC images (n×h×w×c) to F32 NCHW, {@code (x / 255 - mean[ch]) / std[ch]}: the
   * normalization that happens on the device, so only uint8 crosses the bus.
   */
  void normalizeImages(
      Stream stream,
      DeviceBuffer u8,
      int n,
      int h,
      int w,
      int c,
      float[] mean,
      float[] std,
      DeviceBuffer out);

  /** SGD with momentum (PyTorch's form: buf = μ·buf + g; nesterov uses g + μ·buf) and L2 decay. */
  void sgdStep(
      Stream stream,
      DeviceBuffer param,
      DeviceBuffer grad,
      DeviceBuffer momentum,
      float lr,
      float mu,
      float weightDecay,
      boolean nesterov);

  /** AdamW (decoupled weight decay) step {@code step} (1-based), as torch.optim.AdamW. */
  void adamwStep(
      Stream stream,
      DeviceBuffer param,
      DeviceBuffer grad,
      DeviceBuffer m,
      DeviceBuffer v,
      float lr,
      float beta1,
      float beta2,
      float eps,
      float weightDecay,
      int step);

  /**
   * im2col for a kh×kw convolution of NCHW input, image by image: image i's block of {@code cols}
   * is a [c·kh·kw, oh·ow] matrix whose row {@code (ch, ky, kx)} holds, for every output position,
   * the input value under that kernel tap (zero in the padding). PyTorch's weight layout [out, c,
   * kh, kw] times this block gives the image's NCHW output directly.
   */
  void im2col(
      Stream stream,
      DeviceBuffer x,
      int n,
      int c,
      int h,
      int w,
      int kh,
      int kw,
      int stride,
      int pad,
      DeviceBuffer cols);

  /** The adjoint of {@link #im2col}: sums the columns back into {@code dx} (overwritten). */
  void col2im(
      Stream stream,
      DeviceBuffer cols,
      int n,
      int c,
      int h,
      int w,
      int kh,
      int kw,
      int stride,
      int pad,
      DeviceBuffer dx);

  /** {@code y[i, ch, p] += bias[ch]} for NCHW activations (n images, c channels, hw positions). */
  void addChannelBias(Stream stream, DeviceBuffer y, DeviceBuffer bias, int n, int c, int hw);

  /** {@code out[ch] += sum over i, p of dy[i, ch, p]} (the convolution's bias gradient). */
  void sumChannels(Stream stream, DeviceBuffer dy, DeviceBuffer out, int n, int c, int hw);

  /**
   * k×k max pooling of NCHW input (no padding); {@code argmax} (I32) records each winner's index in
   * its plane.
   */
  void maxPool(
      Stream stream,
      DeviceBuffer x,
      int n,
      int c,
      int h,
      int w,
      int k,
      int stride,
      DeviceBuffer y,
      DeviceBuffer argmax);

  /** Routes {@code dy} to the winners recorded by {@link #maxPool}; {@code dx} is overwritten. */
  void maxPoolBackward(
      Stream stream,
      DeviceBuffer dy,
      DeviceBuffer argmax,
      int n,
      int c,
      int h,
      int w,
      int oh,
      int ow,
      DeviceBuffer dx);

  /**
   * Writes the L2 norm of {@code grads} to {@code norm[0]} and, when {@code maxNorm > 0} and the
   * norm exceeds it, scales {@code grads} by {@code maxNorm / (norm + 1e-6)}, as PyTorch's
   * clip_grad_norm_. Stays on the device: no host round-trip per step.
   */
  void clipGradNorm(Stream stream, DeviceBuffer grads, float maxNorm, DeviceBuffer norm);

  /** {@code out = a + b} elementwise ({@code out} may be {@code a} or {@code b}): residual sums. */
  void add(Stream stream, DeviceBuffer a, DeviceBuffer b, DeviceBuffer out);

  /** {@code out = a * b} elementwise ({@code out} may be {@code a} or {@code b}). */
  void multiply(Stream stream, DeviceBuffer a, DeviceBuffer b, DeviceBuffer out);

  /**
   * Fills {@code mask} for inverted dropout with drop probability {@code p}: element i is 0 when
   * {@link CounterRng#uniform CounterRng.uniform(seed, i)} {@code < p}, else {@code 1 / (1 - p)}.
   * Counter-based, so every backend draws the same mask for the same seed, whatever its threading.
   */
  void dropoutMask(Stream stream, float p, long seed, DeviceBuffer mask);

  /**
   * Batch normalization in training mode over NCHW input ({@code n} images, {@code c} channels,
   * {@code hw} positions), as nn.BatchNorm2d: normalizes each channel with its batch mean and
   * biased variance, then {@code y = gamma * xhat + beta}; saves the mean and {@code 1 / sqrt(var +
   * eps)} per channel for the backward pass and moves the running statistics by {@code momentum}
   * (the running variance is the unbiased one).
   */
  void batchNormTrain(
      Stream stream,
      DeviceBuffer x,
      int n,
      int c,
      int hw,
      DeviceBuffer gamma,
      DeviceBuffer beta,
      float eps,
      float momentum,
      DeviceBuffer runningMean,
      DeviceBuffer runningVar,
      DeviceBuffer y,
      DeviceBuffer savedMean,
      DeviceBuffer savedInvStd);

  /** Batch normalization in evaluation mode: the running statistics instead of the batch's. */
  void batchNormInference(
      Stream stream,
      DeviceBuffer x,
      int n,
      int c,
      int hw,
      DeviceBuffer gamma,
      DeviceBuffer beta,
      float eps,
      DeviceBuffer runningMean,
      DeviceBuffer runningVar,
      DeviceBuffer y);

  /**
   * The backward pass of {@link #batchNormTrain}: adds dL/dgamma and dL/dbeta to {@code dgamma} and
   * {@code dbeta}, and writes dL/dx (through the batch statistics) to {@code dx}.
   */
  void batchNormBackward(
      Stream stream,
      DeviceBuffer x,
      DeviceBuffer dy,
      int n,
      int c,
      int hw,
      DeviceBuffer gamma,
      DeviceBuffer savedMean,
      DeviceBuffer savedInvStd,
      DeviceBuffer dgamma,
      DeviceBuffer dbeta,
      DeviceBuffer dx);

  /** Waits for all streams, then frees the backend; throws if allocations are still live. */
  @Override
  void close();
}
