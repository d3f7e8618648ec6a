// The one module the CUDA backend loads: every kernel source, compiled as a single translation
// unit (build-fatbin.sh for the GPU, the emulator's build for the tests).
#include "batchnorm.cu"
#include "conv.cu"
#include "elementwise.cu"
#include "gemm.cu"
#include "layout.cu"
#include "linear.cu"
#include "norm.cu"
#include "optim.cu"
