package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkCount;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * Converts between F32 and BF16 buffers of the same length ({@link
 * dev.ramtrain.trainer.backend.Bf16}: round to nearest even one way, exact the other).
 */
public record Convert(DeviceBuffer src, DeviceBuffer dst) implements Operation {
  public Convert {
    checkCount(dst, src.count());
    boolean known =
        (src.dtype() == DType.F32 && dst.dtype() == DType.BF16)
            || (src.dtype() == DType.BF16 && dst.dtype() == DType.F32);
    if (!known) {
      throw new IllegalArgumentException(
          "convert "
              + src.label()
              + " ("
              + src.dtype()
              + ") to "
              + dst.label()
              + " ("
              + dst.dtype()
              + "): only F32 <-> BF16");
    }
  }

  /** F32 to BF16 (rounding); otherwise BF16 to F32 (exact). */
  public boolean narrowing() {
    return src.dtype() == DType.F32;
  }
}
