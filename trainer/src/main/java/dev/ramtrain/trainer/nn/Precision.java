package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Convert;

/**
 * The arithmetic of the GEMM layers ({@code ramtrain.train.precision}). {@code fp32}: everything in
 * fp32. {@code bf16}: what {@code torch.autocast("cuda", dtype=torch.bfloat16)} does to Linear and
 * convolution layers: their inputs, weights and output gradients are rounded to bf16 before each
 * GEMM, the products accumulate in fp32 (tensor cores on a GPU with cuBLAS), and their outputs and
 * input gradients are rounded to bf16 again, while master weights, gradients, optimizer state and
 * the other layers (batch norm, the loss) stay fp32. The rounding is {@link
 * dev.ramtrain.trainer.backend.Bf16}'s on every backend, so the CPU backend computes what a GPU
 * does, up to summation order.
 */
public enum Precision {
  FP32,
  BF16;

  /**
   * {@code x} as bf16: itself when it is bf16 already (streamed bf16 weights), else converted into
   * the first {@code x.count()} elements of {@code into}.
   */
  static DeviceBuffer inBf16(Backend backend, Stream s, DeviceBuffer x, DeviceBuffer into) {
    if (x.dtype() == DType.BF16) {
      return x;
    }
    DeviceBuffer half = into.view(0, x.count());
    backend.run(s, new Convert(x, half));
    return half;
  }

  /**
   * Rounds fp32 {@code x} to bf16 values in place, through {@code scratch} (bf16, large enough).
   */
  static void round(Backend backend, Stream s, DeviceBuffer x, DeviceBuffer scratch) {
    DeviceBuffer half = scratch.view(0, x.count());
    backend.run(s, new Convert(x, half));
    backend.run(s, new Convert(half, x));
  }
}
