package dev.ramtrain.trainer.backend;

import java.io.Serializable;
import java.util.List;

/**
 * The CUDA engine's choices ({@code ramtrain.cuda.*}): who multiplies matrices ({@code gemm}), who
 * convolves ({@code conv}), where TensorFloat-32 may round fp32 operands ({@code tf32}) and the
 * directories NVIDIA's libraries are loaded from before the system's search path ({@code
 * libraryPath}).
 */
public record CudaSpec(GemmChoice gemm, ConvChoice conv, Tf32 tf32, List<String> libraryPath)
    implements Serializable {

  /**
   * The CUDA backend's GEMM: {@code auto} is cuBLAS when libcublas.so.13 loads and the backend's
   * own kernels otherwise (a machine with only a driver); the other two insist.
   */
  public enum GemmChoice {
    AUTO,
    CUBLAS,
    KERNELS
  }

  /**
   * The CUDA backend's convolutions: {@code auto} is cuDNN when libcudnn 9 loads and im2col with
   * GEMM otherwise; the other two insist.
   */
  public enum ConvChoice {
    AUTO,
    CUDNN,
    KERNELS
  }

  /**
   * Where fp32 operands may be rounded to TensorFloat-32 (10-bit mantissa) on the tensor cores, as
   * PyTorch's {@code torch.backends.cudnn.allow_tf32} and {@code torch.backends.cuda.matmul
   * .allow_tf32}: {@code convolutions} (PyTorch's default: cuDNN's convolutions only), {@code all}
   * (GEMMs too) or {@code off} (fp32 arithmetic everywhere). bf16 operands are not affected.
   */
  public enum Tf32 {
    CONVOLUTIONS,
    ALL,
    OFF;

    public boolean convolutions() {
      return this != OFF;
    }

    public boolean matmul() {
      return this == ALL;
    }
  }

  public CudaSpec {
    if (gemm == null || conv == null || tf32 == null || libraryPath == null) {
      throw new IllegalArgumentException("gemm, conv, tf32 and libraryPath must be given");
    }
    libraryPath = List.copyOf(libraryPath);
  }

  /** PyTorch's defaults: the libraries where they load, TF32 in convolutions only. */
  public static CudaSpec defaults() {
    return new CudaSpec(GemmChoice.AUTO, ConvChoice.AUTO, Tf32.CONVOLUTIONS, List.of());
  }

  /** Only the backend's own kernels (GEMM and convolutions): what needs nothing but the driver. */
  public static CudaSpec ownKernels() {
    return defaults().withGemm(GemmChoice.KERNELS).withConv(ConvChoice.KERNELS);
  }

  public CudaSpec withGemm(GemmChoice choice) {
    return new CudaSpec(choice, conv, tf32, libraryPath);
  }

  public CudaSpec withConv(ConvChoice choice) {
    return new CudaSpec(gemm, choice, tf32, libraryPath);
  }

  public CudaSpec withTf32(Tf32 choice) {
    return new CudaSpec(gemm, conv, choice, libraryPath);
  }
}
