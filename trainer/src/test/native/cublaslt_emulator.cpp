// libcublasLt.so.13 for the emulated device: libcublas.so.13 and JavaCPP's cuBLAS wrapper link it,
// so the file and its version node must exist. The backend calls no cuBLASLt function.
#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT unsigned long cublasLtGetVersion() { return 130100; }
