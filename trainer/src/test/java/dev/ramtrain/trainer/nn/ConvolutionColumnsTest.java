package dev.ramtrain.trainer.nn;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.CpuEngine;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import org.junit.jupiter.api.Test;

/**
 * oneDNN convolves without im2col columns, so an fp32 convolution reserves no workspace for them
 * there (a 7×7 stem at batch 64 and 224² reserved 450 MiB; a 4000² crop more than one buffer
 * holds); the Java kernels, which lower to im2col, still get them. That oneDNN's convolutions
 * compute as before without them, OneDnnPyTorchGoldenTest and GradientCheckTest say.
 */
class ConvolutionColumnsTest {
  @Test
  void oneDnnReservesNoColumnsTheJavaKernelsDo() {
    Conv2d stem = new Conv2d("conv1", 3, 224, 224, 64, 7, 2, 3, false);
    try (Backend onednn = new CpuBackend(1, CpuEngine.ONEDNN);
        Backend java = new CpuBackend(1, CpuEngine.JAVA)) {
      assertEquals(0, stem.scratchBytes(onednn, 64));
      assertEquals(4L * 64 * 112 * 112 * 147, stem.scratchBytes(java, 64));
    }
  }
}
