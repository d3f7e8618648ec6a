package dev.ramtrain.trainer.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendConformanceTest;
import dev.ramtrain.trainer.backend.Bf16;
import dev.ramtrain.trainer.backend.CpuEngine;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.OutOfDeviceMemoryException;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.ConvWindow;
import dev.ramtrain.trainer.backend.ops.Convert;
import dev.ramtrain.trainer.backend.ops.Convolution;
import dev.ramtrain.trainer.backend.ops.ConvolutionBackward;
import org.junit.jupiter.api.Test;

/** The conformance suite on the CPU backend as runs get it: convolutions by oneDNN. */
class CpuBackendTest extends BackendConformanceTest {
  @Override
  protected Backend create() {
    return new CpuBackend(2, CpuEngine.ONEDNN);
  }

  /**
   * oneDNN narrows to bf16 with AVX512-BF16's VCVTNEPS2BF16 where the CPU has it, which flushes
   * fp32 denormals to zero (Intel SDM), and its AVX2 reorder flushes them too (to +0, whatever the
   * sign), where Bf16.fromFloat keeps bf16's own denormals; normal values round alike (the
   * conformance test). Either outcome is allowed here; anything else is not.
   */
  /**
   * One allocation holds at most 2 GiB (Java buffers index with ints): a larger one (the columns of
   * a 4000² random resized crop) is one line naming what asked and the flags that shrink it.
   */
  @Test
  void anAllocationBeyondOneBufferNamesItsLabel() {
    try (Backend b = new CpuBackend(1)) {
      OutOfDeviceMemoryException e =
          assertThrows(
              OutOfDeviceMemoryException.class,
              () -> b.allocate("workspace", DType.U8, (long) Integer.MAX_VALUE + 1));
      assertTrue(
          e.getMessage().startsWith("cpu backend: workspace needs 2.00 GiB"), e.getMessage());
      assertTrue(e.getMessage().contains("--batch-size or image size"), e.getMessage());
      assertEquals(0, b.allocatedBytes(), "nothing allocated");
    }
  }

  /**
   * oneDNN's OpenMP teams on a stream are the backend's threads (each rank of two in one JVM took
   * every core), unless the environment's OMP_NUM_THREADS sets them; another thread keeps its own.
   */
  @Test
  void oneDnnRunsOnTheBackendsThreadsOnEachStream() throws Exception {
    org.junit.jupiter.api.Assumptions.assumeTrue(
        System.getenv("OMP_NUM_THREADS") == null, "OMP_NUM_THREADS sets the threads here");
    int[] seen = new int[2];
    for (int threads : new int[] {37, 41}) { // no machine's core count: set, not found
      try (Backend b = new CpuBackend(threads, CpuEngine.ONEDNN)) {
        Stream s = b.createStream("omp");
        ((CpuStream) s).enqueue(() -> seen[0] = OpenMpThreads.ofThisThread());
        s.synchronize();
        assertEquals(threads, seen[0], "the stream's OpenMP threads");
      }
    }
    Thread other = new Thread(() -> seen[1] = OpenMpThreads.ofThisThread());
    other.start();
    other.join();
    assertTrue(seen[1] > 0 && seen[1] != 41, "a thread keeps its own count: " + seen[1]);
  }

  @Test
  void denormalsNarrowToBf16DenormalsOrToZero() {
    float[] x = {1e-40f, -1e-40f, 5e-39f};
    try (DeviceBuffer f = upload("f32", x);
        DeviceBuffer h = backend.allocate("bf16", DType.BF16, x.length);
        DeviceBuffer back = backend.allocate("back", DType.F32, x.length)) {
      backend.run(stream, new Convert(f, h));
      backend.run(stream, new Convert(h, back));
      float[] got = download(back);
      for (int i = 0; i < x.length; i++) {
        float kept = Bf16.toFloat(Bf16.fromFloat(x[i]));
        assertTrue(
            Float.compare(kept, got[i]) == 0 || got[i] == 0f, // 0f == -0f: either zero
            x[i] + " narrowed to " + got[i]);
      }
    }
  }

  /**
   * Two streams run the same convolution: each stream's thread makes and runs its own primitives
   * (OneDnn). When one engine thread's primitives were run from a second stream's thread, a
   * GEMM-based convolution's backward (oneDNN's path under ONEDNN_MAX_CPU_ISA=AVX) crashed the JVM;
   * on every ISA both streams must give the same bits.
   */
  @Test
  void aSecondStreamRunsTheFirstStreamsPrimitives() {
    ConvWindow win = new ConvWindow(3, 2, 7, 6, 3, 3, 1, 1);
    java.util.Random rng = new java.util.Random(5);
    float[] x = random(rng, (int) win.inputCount());
    float[] w = random(rng, 5 * 2 * 9);
    float[] dy = random(rng, (int) win.outputCount(5));
    float[][] first = null;
    for (Stream s : new Stream[] {stream, backend.createStream("second")}) {
      try (DeviceBuffer xd = upload("x", x);
          DeviceBuffer wd = upload("w", w);
          DeviceBuffer bd = upload("b", new float[5]);
          DeviceBuffer dyd = upload("dy", dy);
          DeviceBuffer y = backend.allocate("y", DType.F32, dy.length);
          DeviceBuffer dw = upload("dw", new float[w.length]);
          DeviceBuffer db = upload("db", new float[5]);
          DeviceBuffer dx = backend.allocate("dx", DType.F32, x.length);
          DeviceBuffer cols = backend.allocate("cols", DType.F32, win.columnCount())) {
        backend.run(s, new Convolution(xd, wd, bd, y, win, 5, cols));
        backend.run(s, new ConvolutionBackward(xd, dyd, wd, dw, db, dx, win, 5, cols));
        s.synchronize();
        float[][] got = {download(y), download(dw), download(db), download(dx)};
        if (first == null) {
          first = got;
        } else {
          for (int i = 0; i < got.length; i++) {
            assertArrayEquals(first[i], got[i], "result " + i + " on the second stream");
          }
        }
      }
    }
  }

  /**
   * Each stream's thread makes and runs its own primitives (OneDnn), and closing a stream frees
   * them: an evaluation stream opened per epoch must not leave its primitives and scratch behind.
   */
  @Test
  void aClosedStreamReleasesItsOneDnnPrimitives() {
    try (CpuBackend b = new CpuBackend(1, CpuEngine.ONEDNN)) {
      int before = b.oneDnnThreads();
      ConvWindow win = new ConvWindow(2, 16, 5, 5, 3, 3, 1, 1);
      Stream s = b.createStream("short-lived");
      try (DeviceBuffer x = b.allocate("x", DType.F32, win.inputCount());
          DeviceBuffer w = b.allocate("w", DType.F32, 16L * 16 * 9);
          DeviceBuffer y = b.allocate("y", DType.F32, win.outputCount(16));
          DeviceBuffer cols = b.allocate("cols", DType.F32, win.columnCount())) {
        b.run(s, new Convolution(x, w, null, y, win, 16, cols));
        s.synchronize();
        assertEquals(before + 1, b.oneDnnThreads(), "the stream's thread made its primitives");
        s.close();
        assertEquals(before, b.oneDnnThreads(), "closing the stream freed them");
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

  /**
   * Closing memory waits for the streams' work, as cudaFree does: a run cancelled mid-step closes
   * its buffers from the trainer's thread while a stream still writes them, and freeing them under
   * that write corrupted the native heap (glibc aborted the JVM in RamTrainTest). The copy here
   * idles 200 ms on a simulated 1 MB/s bus before it writes, far longer than close's own path.
   */
  @Test
  void closingMemoryWaitsForTheWorkStillWritingIt() {
    int bytes = 200_000;
    try (Backend slow = new CpuBackend(1, new SimulatedBus(1e6, 0, 1));
        Stream copies = slow.createStream("copies");
        Event copied = slow.createEvent("copied");
        HostBuffer src = slow.allocateHost("src", bytes)) {
      DeviceBuffer dst = slow.allocate("dst", DType.F32, bytes / Float.BYTES);
      slow.copy(src, 0, dst, bytes, copies);
      copied.record(copies);
      dst.close();
      assertTrue(copied.isDone(), "dst was freed while the copy into it was still to run");
    }
  }

  /**
   * The device memory is held to its limit, the number the plan reads: free memory falls with each
   * allocation and rises with each free, and one past the limit fails naming the buffer, its size,
   * what is in use and the setting; host buffers are outside it.
   */
  @Test
  void deviceMemoryIsHeldToItsLimit() {
    CpuMemoryLimit limit = new CpuMemoryLimit(4L << 20, "ramtrain.cpu.memory=4.0 MiB");
    try (CpuBackend b = new CpuBackend(1, SimulatedBus.NONE, CpuEngine.JAVA, limit)) {
      assertEquals(4L << 20, b.freeMemoryBytes());
      try (DeviceBuffer first = b.allocate("first", DType.F32, 1L << 19)) {
        assertEquals(2L << 20, b.freeMemoryBytes());
        var beyond =
            assertThrows(
                OutOfDeviceMemoryException.class,
                () -> b.allocate("second", DType.F32, (1L << 19) + 1));
        assertEquals(
            "cpu backend: second needs 2.0 MiB, and 2.0 MiB of its 4.0 MiB are in use"
                + " (ramtrain.cpu.memory=4.0 MiB; raise it, or use a smaller --batch-size)",
            beyond.getMessage());
        try (HostBuffer host = b.allocateHost("staging", 8L << 20)) {
          assertEquals(8L << 20, host.bytes());
        }
      }
      assertEquals(4L << 20, b.freeMemoryBytes());
    }
  }

  /** The default: what is available less the heap's room to grow and a tenth for the page cache. */
  @Test
  void theDefaultLimitLeavesTheHeapAndThePageCacheTheirShare() {
    long gib = 1L << 30;
    CpuMemoryLimit limit = CpuMemoryLimit.auto(20 * gib, 5 * gib, 24 * gib);
    assertEquals(20 * gib - 5 * gib - 24 * gib / 10, limit.bytes());
    assertTrue(limit.source().startsWith("ramtrain.cpu.memory=auto: 20.00 GiB available"));
    assertEquals(0, CpuMemoryLimit.auto(gib, 5 * gib, 24 * gib).bytes(), "never negative");
  }
}
