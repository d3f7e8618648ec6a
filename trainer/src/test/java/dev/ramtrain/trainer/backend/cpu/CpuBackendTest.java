package dev.ramtrain.trainer.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendConformanceTest;
import dev.ramtrain.trainer.backend.Bf16;
import dev.ramtrain.trainer.backend.CpuEngine;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.ops.Convert;
import org.junit.jupiter.api.Test;

/** The conformance suite on the CPU backend as runs get it: convolutions by oneDNN. */
class CpuBackendTest extends BackendConformanceTest {
  @Override
  protected Backend create() {
    return new CpuBackend(2, CpuEngine.ONEDNN);
  }

  /**
   * oneDNN narrows to bf16 with AVX512-BF16's VCVTNEPS2BF16 where the CPU has it, which flushes
   * fp32 denormals to zero of the same sign (Intel SDM), where Bf16.fromFloat keeps bf16's own
   * denormals; normal values round alike (the conformance test). Either outcome is allowed here;
   * anything else is not.
   */
  @Test
  void denormalsNarrowToBf16DenormalsOrToSignedZero() {
    float[] x = {1e-40f, -1e-40f, 5e-39f};
    try (DeviceBuffer f = upload("f32", x);
        DeviceBuffer h = backend.allocate("bf16", DType.BF16, x.length);
        DeviceBuffer back = backend.allocate("back", DType.F32, x.length)) {
      backend.run(stream, new Convert(f, h));
      backend.run(stream, new Convert(h, back));
      float[] got = download(back);
      for (int i = 0; i < x.length; i++) {
        float kept = Bf16.toFloat(Bf16.fromFloat(x[i]));
        float flushed = Math.copySign(0f, x[i]);
        assertTrue(
            Float.compare(kept, got[i]) == 0 || Float.compare(flushed, got[i]) == 0,
            x[i] + " narrowed to " + got[i]);
      }
    }
  }

  @Test
  void theAutomaticEngineIsOneDnnWhereItsNativesLoad() {
    try (CpuBackend auto = new CpuBackend(1)) {
      assertEquals("onednn", auto.engine());
      // oneDNN's blocking for this CPU: a zmm of floats with AVX-512, a ymm below it
      int block = auto.channelBlock();
      assertTrue(block == 16 || block == 8, "channel block " + block);
    }
    try (CpuBackend java = new CpuBackend(1, CpuEngine.JAVA)) {
      assertEquals("java", java.engine());
      assertEquals(1, java.channelBlock(), "the Java kernels compute on NCHW");
    }
  }
}
