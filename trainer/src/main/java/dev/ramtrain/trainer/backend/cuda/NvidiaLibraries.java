package dev.ramtrain.trainer.backend.cuda;

import static org.bytedeco.cuda.global.cublas.cublasGetProperty;
import static org.bytedeco.cuda.global.cudart.MAJOR_VERSION;
import static org.bytedeco.cuda.global.cudart.MINOR_VERSION;
import static org.bytedeco.cuda.global.cudart.PATCH_LEVEL;
import static org.bytedeco.cuda.global.cudnn.cudnnGetVersion;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.bytedeco.cuda.global.cublas;
import org.bytedeco.cuda.global.cudnn;
import org.bytedeco.javacpp.Loader;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Loads NVIDIA's libraries for the CUDA engine through JavaCPP's CUDA presets, whose jar holds only
 * the JNI wrappers: cuBLAS (libcublas.so.13, libcublasLt.so.13) and cuDNN 9 (libcudnn_graph, _ops,
 * _cnn, _adv .so.9) come from the machine. The wrappers link them by soname, so the dynamic loader
 * finds them on LD_LIBRARY_PATH or in ldconfig's cache; the directories of {@code
 * ramtrain.cuda.library-path} are searched first, each library found there loaded by its path
 * (LD_LIBRARY_PATH is read once, at process start), dependencies first, so that the wrapper's
 * lookup by soname finds it already loaded.
 */
final class NvidiaLibraries {
  private static final Logger LOG = LoggerFactory.getLogger(NvidiaLibraries.class);

  /** What a PyTorch user already has; the toolkit and cuDNN's own packages are the other way. */
  static final String HOW_TO_GET =
      "install a CUDA 13 toolkit and cuDNN 9, or PyTorch for CUDA 13 (pip install torch), whose"
          + " site-packages/nvidia/*/lib bin/ramtrain finds, or name their folders in"
          + " ramtrain.cuda.library-path";

  /** The libraries of each, in load order (each after what it links). */
  private static final List<String> CUBLAS =
      List.of("libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13");

  private static final List<String> CUDNN =
      List.of(
          "libcudart.so.13",
          "libcudnn_graph.so.9",
          "libcudnn_ops.so.9",
          "libcudnn_cnn.so.9",
          "libcudnn_adv.so.9",
          "libcudnn_heuristic.so.9",
          "libcudnn_engines_precompiled.so.9",
          "libcudnn_engines_runtime_compiled.so.9",
          "libcudnn.so.9");

  /** A library that loaded (its version) or did not (what is missing). */
  record Availability(String version, String missing) {
    boolean loaded() {
      return version != null;
    }
  }

  /**
   * Each library's first answer, kept for the JVM: a native library stays loaded, and a preset
   * whose static initializer failed stays unusable ("Could not initialize class"), so a second
   * attempt could only repeat the first answer, with a worse message. The first backend's
   * directories decide.
   */
  private static final Map<String, Availability> ANSWERS = new ConcurrentHashMap<>();

  private NvidiaLibraries() {}

  /** cuBLAS, with {@code directories} searched first; never throws for a missing library. */
  static Availability cublas(List<String> directories) {
    return ANSWERS.computeIfAbsent("cublas", name -> loadCublas(directories));
  }

  /** cuDNN 9, with {@code directories} searched first; never throws for a missing library. */
  static Availability cudnn(List<String> directories) {
    return ANSWERS.computeIfAbsent("cudnn", name -> loadCudnn(directories));
  }

  private static Availability loadCublas(List<String> directories) {
    try {
      preload(CUBLAS, directories);
      Loader.load(cublas.class);
      int[] part = new int[1];
      StringBuilder version = new StringBuilder("cuBLAS ");
      for (int type : new int[] {MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL}) {
        cublasGetProperty(type, part);
        version.append(type == MAJOR_VERSION ? "" : ".").append(part[0]);
      }
      return new Availability(version.toString(), null);
    } catch (LinkageError e) {
      return new Availability(null, CudaProbe.whyNotLoaded(e));
    }
  }

  private static Availability loadCudnn(List<String> directories) {
    Availability cublas = cublas(directories);
    if (!cublas.loaded()) { // JavaCPP's cuDNN wrapper links cuBLAS's
      return new Availability(null, "its wrapper needs cuBLAS: " + cublas.missing());
    }
    try {
      preload(CUDNN, directories);
      Loader.load(cudnn.class);
      long v = cudnnGetVersion(); // major * 10000 + minor * 100 + patch since cuDNN 9
      return new Availability(
          String.format("cuDNN %d.%d.%d", v / 10000, v / 100 % 100, v % 100), null);
    } catch (LinkageError e) {
      return new Availability(null, CudaProbe.whyNotLoaded(e));
    }
  }

  /**
   * Loads each of {@code libraries} from the first of {@code directories} where it loads, by its
   * path; one that loads nowhere there is left to the system's search, which reports it if the
   * wrapper needs it.
   */
  private static void preload(List<String> libraries, List<String> directories) {
    for (String library : libraries) {
      for (String directory : directories) {
        Path file = Path.of(directory, library);
        if (Files.isRegularFile(file)) {
          try {
            System.load(file.toAbsolutePath().toString());
            break;
          } catch (UnsatisfiedLinkError e) { // not a library, another architecture, ...
            LOG.warn("cuda: {} did not load: {}", file, CudaProbe.whyNotLoaded(e));
          }
        }
      }
    }
  }
}
