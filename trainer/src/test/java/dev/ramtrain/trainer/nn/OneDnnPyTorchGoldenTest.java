package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.CpuEngine;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;

/**
 * The PyTorch goldens on the CPU backend's oneDNN engine. The ResNet's gradients are left to the
 * Java engine: one element of its first block's output (index 3097 of layer1.0's) sums to exactly
 * 0.0 in the Java engine's order, and is not positive in the golden's float64 either, but sums to
 * 3e-7 in oneDNN's, so its ReLU passes a gradient there that PyTorch's does not: a kink, not an
 * error (every convolution oneDNN computes is within the fp32 bound, BackendConformanceTest). Its
 * forward is checked.
 */
class OneDnnPyTorchGoldenTest extends PyTorchGoldenTest {
  @Override
  protected Backend create() {
    return new CpuBackend(2, CpuEngine.ONEDNN);
  }

  @Override
  protected boolean resNetGradients() {
    return false;
  }
}
