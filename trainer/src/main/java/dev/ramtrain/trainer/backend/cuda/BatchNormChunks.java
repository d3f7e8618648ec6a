package dev.ramtrain.trainer.backend.cuda;

import dev.ramtrain.trainer.backend.BackendException;

/**
 * How batch norm's kernels split a channel's {@code n·hw} values: {@code count} chunks of {@code
 * length} values, each summed by one block, their partial sums (two doubles a chunk a channel) and
 * then the per-channel results (three floats a channel) in the stream's scratch. About 8,192 values
 * a chunk, at most 64 chunks, as many as the scratch holds.
 */
record BatchNormChunks(int count, long length, long partialBytes) {
  private static final long VALUES_PER_CHUNK = 8_192;
  private static final int MAX_CHUNKS = 64;
  private static final long BYTES_PER_CHUNK = 2L * Double.BYTES;
  private static final long RESULT_BYTES = 3L * Float.BYTES;

  static BatchNormChunks of(int n, int c, int hw) {
    long values = (long) n * hw;
    long room = (CudaStream.SCRATCH_BYTES - RESULT_BYTES * c) / (BYTES_PER_CHUNK * c);
    if (room < 1) {
      throw new BackendException(
          "cuda: batch norm over "
              + c
              + " channels needs more than the stream's "
              + CudaStream.SCRATCH_BYTES
              + " bytes of scratch");
    }
    int count =
        (int)
            Math.max(
                1,
                Math.min(
                    Math.min(room, MAX_CHUNKS),
                    (values + VALUES_PER_CHUNK - 1) / VALUES_PER_CHUNK));
    long length = Math.max(1, (values + count - 1) / count);
    return new BatchNormChunks(count, length, BYTES_PER_CHUNK * c * count);
  }
}
