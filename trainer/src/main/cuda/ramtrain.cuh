// Shared by every ramtrain kernel. Compiled two ways from the same sources: by nvcc into the
// fatbin the CUDA backend loads, and by g++ (with RAMTRAIN_EMULATOR and the emulator's shim
// header) into the CUDA-driver emulator the tests run on. Kernels are extern "C" so that
// cuModuleGetFunction finds them by their plain names.
#pragma once

#include <stdint.h>

#ifdef RAMTRAIN_EMULATOR
#include "emulator_registry.h"
// Registers a kernel with the emulator; BARRIERS marks kernels that call __syncthreads, whose
// threads the emulator must run as fibers.
#define RT_KERNEL(name) static ::emu::Registration rt_register_##name(#name, name, false);
#define RT_KERNEL_WITH_BARRIERS(name) \
  static ::emu::Registration rt_register_##name(#name, name, true);
#else
#define RT_KERNEL(name)
#define RT_KERNEL_WITH_BARRIERS(name)
#endif

// Threads per block of the elementwise kernels and of the block reductions (a power of two).
#define RT_BLOCK 256
// Sums down columns (layer norm's parameter gradients, bias gradients): RT_COLUMNS columns a
// block, RT_COLUMN_LANES lanes a column, row groups along the grid's y (ColumnSumOrder).
#define RT_COLUMNS 32
#define RT_COLUMN_LANES 16
// Sums along rows (layer norm, softmax): a warp's RT_ROW_LANES lanes a row, RT_ROWS rows a block
// (NormKernels.ROW_LANES).
#define RT_ROW_LANES 32
#define RT_ROWS 8

// A grid-stride loop over [0, n): correct for any grid size, so launches can cap their grids.
#define RT_FOR_EACH(i, n)                                                        \
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
       i += (long long)blockDim.x * gridDim.x)

// Status words a kernel writes to report bad input (read by the stream's synchronize).
#define RT_STATUS_OK 0
#define RT_STATUS_BAD_LABEL 1

struct RtStatus {
  int code;   // first error's code, 0 while none
  int where;  // its row
  int value;  // the offending value
  int limit;  // the bound it broke
};

// bfloat16 by bit manipulation, exactly as the Java reference (Bf16): round to nearest even,
// NaN stays a quiet NaN. The same bits on every device and in the emulator.
__device__ __forceinline__ unsigned short rt_f32_to_bf16(float value) {
  unsigned int bits = __float_as_uint(value);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
    return (unsigned short)((bits >> 16) | 0x0040u);
  }
  unsigned int lsb = (bits >> 16) & 1u;
  return (unsigned short)((bits + 0x7FFFu + lsb) >> 16);
}

__device__ __forceinline__ float rt_bf16_to_f32(unsigned short value) {
  return __uint_as_float(((unsigned int)value) << 16);
}

// The SplitMix64 output i of the stream at seed: dev.ramtrain.random.SplitMix64.at.
__device__ __forceinline__ unsigned long long rt_splitmix64_at(unsigned long long seed,
                                                               unsigned long long i) {
  unsigned long long z = seed + (i + 1ULL) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// CounterRng.uniform: 24 random bits as a float in [0, 1).
__device__ __forceinline__ float rt_uniform(unsigned long long seed, unsigned long long i) {
  return (float)(rt_splitmix64_at(seed, i) >> 40) * 5.9604644775390625e-8f;
}

// A row's total of one partial sum per lane, each thread of a (RT_ROW_LANES, RT_ROWS) block
// holding its row threadIdx.y's lane threadIdx.x: the lanes are added in lane order, from 0
// (NormKernels' order), and every lane gets the total. Every thread of the block must call it.
__device__ __forceinline__ double rt_row_sum(double partial, double* lanes) {
  double* row = lanes + threadIdx.y * RT_ROW_LANES;
  row[threadIdx.x] = partial;
  __syncthreads();
  double total = 0;
  for (int l = 0; l < RT_ROW_LANES; l++) {
    total += row[l];
  }
  __syncthreads();
  return total;
}

// Sums one double per thread over a block of RT_BLOCK threads; every thread gets the total.
// A fixed tree, so the result does not depend on scheduling.
__device__ __forceinline__ double rt_block_sum(double value, double* scratch) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int half = RT_BLOCK / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half) {
      scratch[threadIdx.x] += scratch[threadIdx.x + half];
    }
    __syncthreads();
  }
  double total = scratch[0];
  __syncthreads();
  return total;
}
