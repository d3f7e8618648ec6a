package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.CpuEngine;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;

/**
 * The PyTorch goldens on the CPU backend's oneDNN engine: logits, loss, every gradient, the AdamW
 * losses and running statistics, as on the Java engine. (The ResNet golden's input keeps every ReLU
 * input well off 0, {@code make_goldens.py}'s {@code input_off_the_kinks}, so engines that sum in
 * other orders take the same side of every ReLU.)
 */
class OneDnnPyTorchGoldenTest extends PyTorchGoldenTest {
  @Override
  protected Backend create() {
    return new CpuBackend(2, CpuEngine.ONEDNN);
  }
}
