// libcudart.so.13 for the emulated device: JavaCPP's cuBLAS and cuDNN wrappers link the CUDA
// runtime (their classes extend the cudart preset's), so the file and its version node must exist.
// The backend calls no runtime function: its driver is libcuda.so.1 (cuda_emulator.cpp).
#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT int cudaRuntimeGetVersion(int* version) {
  *version = 13010;  // CUDA 13.1, the runtime the presets were built against
  return 0;
}
