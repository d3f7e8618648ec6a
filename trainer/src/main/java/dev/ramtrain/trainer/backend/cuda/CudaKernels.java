package dev.ramtrain.trainer.backend.cuda;

import static jcuda.driver.JCudaDriver.cuLaunchKernel;
import static jcuda.driver.JCudaDriver.cuModuleGetFunction;
import static jcuda.driver.JCudaDriver.cuModuleLoadData;
import static jcuda.driver.JCudaDriver.cuModuleUnload;

import dev.ramtrain.trainer.backend.BackendException;
import java.io.IOException;
import java.io.InputStream;
import java.util.EnumMap;
import java.util.Map;
import jcuda.driver.CUfunction;
import jcuda.driver.CUmodule;

/**
 * The kernel module (the fatbin built from trainer/src/main/cuda by build-fatbin.sh and shipped as
 * a resource) and launches of its kernels. Every kernel is looked up when the backend opens, so a
 * fatbin missing one fails at start rather than mid-run.
 */
final class CudaKernels implements AutoCloseable {
  static final String FATBIN = "kernels.fatbin";

  /** Threads per block of the elementwise kernels and block reductions (RT_BLOCK). */
  static final int BLOCK = 256;

  /** Lanes a row of the row kernels (RT_ROW_LANES): a warp. */
  static final int ROW_LANES = 32;

  /** Rows a block of the row kernels (RT_ROWS). */
  static final int ROWS = 8;

  /** Grid-stride kernels need no more blocks than keep every multiprocessor busy. */
  private static final int MAX_GRID = 8192;

  private final CudaContext context;
  private final CUmodule module = new CUmodule();
  private final Map<Kernel, CUfunction> functions = new EnumMap<>(Kernel.class);

  CudaKernels(CudaContext context) {
    this.context = context;
    context.bind();
    byte[] image = fatbin();
    CudaCalls.check(
        cuModuleLoadData(module, image),
        () -> "loading the kernel module " + FATBIN + " (" + image.length + " bytes)");
    for (Kernel kernel : Kernel.values()) {
      CUfunction function = new CUfunction();
      CudaCalls.check(
          cuModuleGetFunction(function, module, kernel.symbol),
          () -> "finding kernel " + kernel.symbol + " in " + FATBIN);
      functions.put(kernel, function);
    }
  }

  static byte[] fatbin() {
    try (InputStream in = CudaKernels.class.getResourceAsStream(FATBIN)) {
      if (in == null) {
        throw new BackendException("cuda: this build of ramtrain has no " + FATBIN);
      }
      return in.readAllBytes();
    } catch (IOException e) {
      throw new BackendException("cuda: reading " + FATBIN + ": " + e.getMessage(), e);
    }
  }

  /** A grid-stride launch over {@code n} elements. */
  void launchOver(Kernel kernel, CudaStream stream, long n, KernelArgs args) {
    if (n == 0) {
      return;
    }
    int blocks = (int) Math.min(MAX_GRID, (n + BLOCK - 1) / BLOCK);
    launch(kernel, stream, blocks, 1, 1, BLOCK, 1, args);
  }

  /** A launch of a row kernel over {@code rows} rows: a warp a row, {@link #ROWS} a block. */
  void launchRows(Kernel kernel, CudaStream stream, long rows, KernelArgs args) {
    if (rows == 0) {
      return;
    }
    int blocks = (int) Math.min(MAX_GRID, (rows + ROWS - 1) / ROWS);
    launch(kernel, stream, blocks, 1, 1, ROW_LANES, ROWS, args);
  }

  void launch(
      Kernel kernel,
      CudaStream stream,
      int gridX,
      int gridY,
      int gridZ,
      int blockX,
      int blockY,
      KernelArgs args) {
    context.bind();
    CudaCalls.check(
        cuLaunchKernel(
            functions.get(kernel),
            gridX,
            gridY,
            gridZ,
            blockX,
            blockY,
            1,
            0,
            stream.handle(),
            args.pack(),
            null),
        () ->
            String.format(
                "launching %s on stream '%s' (grid %dx%dx%d, block %dx%d)",
                kernel.symbol, stream.label(), gridX, gridY, gridZ, blockX, blockY));
  }

  @Override
  public void close() {
    context.bind();
    CudaCalls.release(cuModuleUnload(module), () -> "unloading the kernel module");
  }
}
