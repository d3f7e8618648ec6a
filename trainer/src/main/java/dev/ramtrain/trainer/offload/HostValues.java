package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Bf16;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.checkpoint.Safetensors;
import dev.ramtrain.trainer.nn.Parameters;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * {@code count} values of a host slab from value {@code first} on, read as a checkpoint writes
 * them: fp32, or bf16 widened ({@code bf16}, the optimizer's bf16 moments). The checkpoint of an
 * offloaded model reads its host copy in place, so that a model larger than the heap saves; the
 * values are the slab's at the time of the read.
 */
record HostValues(HostBuffer slab, long first, long count, boolean bf16)
    implements Safetensors.Values {
  HostValues {
    long width = bf16 ? 2 : 4;
    if (first < 0 || count < 0 || (first + count) * width > slab.bytes()) {
      throw new IllegalArgumentException(
          "values [" + first + ", " + (first + count) + ") lie outside the host slab");
    }
  }

  /** One tensor per entry, each reading its range of the fp32 {@code slab}. */
  static List<Safetensors.Tensor> tensors(List<Parameters.Entry> entries, HostBuffer slab) {
    List<Safetensors.Tensor> out = new ArrayList<>();
    for (Parameters.Entry e : entries) {
      long[] shape = Arrays.stream(e.spec().shape()).asLongStream().toArray();
      out.add(
          new Safetensors.Tensor(
              e.spec().name(), shape, new HostValues(slab, e.offset(), e.spec().count(), false)));
    }
    return out;
  }

  @Override
  public void read(long from, FloatBuffer into) {
    if (from < 0 || from > count - into.remaining()) {
      throw new IndexOutOfBoundsException(
          "values [" + from + ", " + (from + into.remaining()) + ") of " + count);
    }
    long at = first + from;
    while (into.hasRemaining()) {
      int n = (int) Math.min(HostBuffer.FLOATS_PER_COPY, into.remaining());
      if (bf16) {
        ShortBuffer part = slab.range(2 * at, 2L * n).asShortBuffer();
        for (int k = 0; k < n; k++) {
          into.put(Bf16.toFloat(part.get(k)));
        }
      } else {
        into.put(slab.floats(at, n));
      }
      at += n;
    }
  }
}
