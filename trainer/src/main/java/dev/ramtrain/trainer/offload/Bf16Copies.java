package dev.ramtrain.trainer.offload;

/**
 * Where a host update writes the bf16 copies of the masters it updates (the streamed layers' with
 * bf16 slots), in the same pass as the update: the element ranges of the master slab, each with the
 * element of the copy slab it maps to.
 */
public interface Bf16Copies {
  /** No copies: the update writes fp32 only. */
  Bf16Copies NONE =
      new Bf16Copies() {
        @Override
        public void forEachRun(int from, int to, Run run) {
          run.accept(from, to, -1);
        }

        @Override
        public long address() {
          return 0;
        }
      };

  /** A run of master elements [from, to); {@code copyAt}: its first's copy element, or -1. */
  interface Run {
    void accept(int from, int to, long copyAt);
  }

  /**
   * Splits master elements [from, to) into runs with a copy and runs without, in order; the caller
   * then writes each run's copies, so the layers wholly inside [from, to) count as copied.
   */
  void forEachRun(int from, int to, Run run);

  /** The address of the copy slab's element 0 (2 bytes an element). */
  long address();
}
