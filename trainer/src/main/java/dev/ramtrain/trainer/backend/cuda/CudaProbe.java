package dev.ramtrain.trainer.backend.cuda;

import static jcuda.driver.JCudaDriver.cuDeviceGet;
import static jcuda.driver.JCudaDriver.cuDeviceGetAttribute;
import static jcuda.driver.JCudaDriver.cuDeviceGetCount;
import static jcuda.driver.JCudaDriver.cuDeviceGetName;
import static jcuda.driver.JCudaDriver.cuDeviceTotalMem;
import static jcuda.driver.JCudaDriver.cuDriverGetVersion;
import static jcuda.driver.JCudaDriver.cuInit;

import dev.ramtrain.trainer.backend.BackendException;
import java.nio.charset.StandardCharsets;
import jcuda.driver.CUdevice;
import jcuda.driver.CUdevice_attribute;
import jcuda.driver.CUresult;

/**
 * Finds the GPU, once per JVM: whether JCuda's natives and a CUDA driver load, whether there is a
 * device, and whether the driver is new enough for the kernels this build carries. Without a driver
 * JCuda throws {@link UnsatisfiedLinkError} on first use and {@link NoClassDefFoundError} on every
 * use after, so the answer is computed once and kept.
 */
public final class CudaProbe {
  /**
   * The oldest driver that runs the shipped kernels: they are built by CUDA 13.0's nvcc, whose SASS
   * and PTX need a driver of CUDA 13.0 (Linux driver 580) or newer.
   */
  public static final int MINIMUM_DRIVER_VERSION = 13000;

  /** A usable device, or why there is none ({@code device} null). */
  public record Result(Gpu device, String unavailable) {
    public boolean available() {
      return device != null;
    }
  }

  /** What the driver says about the device of CUDA ordinal {@code ordinal}. */
  public record Gpu(
      int ordinal,
      CUdevice handle,
      String name,
      int computeMajor,
      int computeMinor,
      int driverVersion,
      long memoryBytes) {
    public String describe() {
      return String.format(
          "device %d: %s (sm_%d%d, %.1f GiB, driver API %d.%d)",
          ordinal,
          name,
          computeMajor,
          computeMinor,
          memoryBytes / (double) (1L << 30),
          driverVersion / 1000,
          driverVersion % 1000 / 10);
    }
  }

  private CudaProbe() {}

  /** The probe's result for device 0, once for this JVM. */
  public static Result result() {
    return Once.RESULT;
  }

  /** The probe's result for the device of CUDA ordinal {@code ordinal} (device 0's is kept). */
  public static Result result(int ordinal) {
    return ordinal == 0 ? result() : probe(ordinal);
  }

  private static final class Once {
    static final Result RESULT = probe(0);
  }

  /** Probes now (tests change what the emulated driver reports); commands use {@link #result}. */
  static Result probe() {
    return probe(0);
  }

  private static Result probe(int ordinal) {
    try {
      return find(ordinal);
    } catch (LinkageError e) { // no libcuda.so.1, or JCuda's natives do not load here
      return new Result(null, "no CUDA driver could be loaded (" + whyNotLoaded(e) + ")");
    } catch (BackendException e) {
      return new Result(null, e.getMessage());
    }
  }

  private static Result find(int ordinal) {
    int init = cuInit(0);
    if (init == CUresult.CUDA_ERROR_NO_DEVICE) {
      return new Result(null, "the CUDA driver loads but reports no GPU");
    }
    CudaCalls.check(init, "initializing the CUDA driver");
    int[] value = new int[1];
    CudaCalls.check(cuDeviceGetCount(value), "counting devices");
    int devices = value[0];
    if (devices == 0) {
      return new Result(null, "the CUDA driver loads but reports no GPU");
    }
    CudaCalls.check(cuDriverGetVersion(value), "reading the driver version");
    int driver = value[0];
    if (driver < MINIMUM_DRIVER_VERSION) {
      return new Result(
          null,
          String.format(
              "the CUDA driver supports CUDA %d.%d; ramtrain's kernels need %d.%d or newer"
                  + " (NVIDIA driver 580 or newer)",
              driver / 1000,
              driver % 1000 / 10,
              MINIMUM_DRIVER_VERSION / 1000,
              MINIMUM_DRIVER_VERSION % 1000 / 10));
    }
    if (ordinal >= devices) {
      return new Result(
          null,
          String.format(
              "device %d was asked for, and the CUDA driver sees %d GPU%s",
              ordinal, devices, devices == 1 ? "" : "s"));
    }
    CUdevice device = new CUdevice();
    CudaCalls.check(cuDeviceGet(device, ordinal), "opening device " + ordinal);
    byte[] name = new byte[256];
    CudaCalls.check(cuDeviceGetName(name, name.length, device), "reading the device name");
    int major = attribute(device, CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    int minor = attribute(device, CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    if (major < 7 || (major == 7 && minor < 5)) {
      return new Result(
          null,
          String.format(
              "the GPU is sm_%d%d; ramtrain's kernels need sm_75 or newer", major, minor));
    }
    long[] memory = new long[1];
    CudaCalls.check(cuDeviceTotalMem(memory, device), "reading the device memory");
    return new Result(
        new Gpu(ordinal, device, cString(name), major, minor, driver, memory[0]), null);
  }

  /**
   * The line of a native library's load failure that names what is missing ("libcuda.so.1: cannot
   * open shared object file: ..."): JCuda's own message runs to dozens of lines of nested traces.
   */
  static String whyNotLoaded(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) { // JavaCPP's own error wraps the dlopen's
      String missing = missingLibrary(t);
      if (missing != null) {
        return missing;
      }
      for (Throwable suppressed : t.getSuppressed()) {
        missing = missingLibrary(suppressed);
        if (missing != null) {
          return missing;
        }
      }
    }
    String message = String.valueOf(e.getMessage());
    return message.lines().findFirst().orElse(e.getClass().getSimpleName()).strip();
  }

  private static String missingLibrary(Throwable e) {
    for (String line : String.valueOf(e.getMessage()).split("\n")) {
      int cannot = line.indexOf(": cannot open shared object file");
      if (cannot > 0) { // "...: /tmp/libJCudaDriver...so: libcuda.so.1: cannot open ..."
        return line.substring(line.lastIndexOf(": ", cannot - 1) + 2).strip();
      }
    }
    return null;
  }

  private static int attribute(CUdevice device, int attribute) {
    int[] value = new int[1];
    CudaCalls.check(
        cuDeviceGetAttribute(value, attribute, device), "reading device attribute " + attribute);
    return value[0];
  }

  private static String cString(byte[] bytes) {
    int end = 0;
    while (end < bytes.length && bytes[end] != 0) {
      end++;
    }
    return new String(bytes, 0, end, StandardCharsets.UTF_8);
  }
}
