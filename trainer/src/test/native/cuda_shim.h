// Lets g++ compile the CUDA kernel sources (trainer/src/main/cuda) as host C++ for the emulator:
// CUDA's keywords and built-ins mapped onto the emulator's block scheduler. Included first (-include)
// in the emulator's build only; nvcc never sees it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace emu {
struct dim3 {
  unsigned int x = 1, y = 1, z = 1;
};
// The running thread's coordinates, set by the scheduler before it runs or resumes a thread.
extern thread_local dim3 thread_idx, block_idx, block_dim, grid_dim;
// A block-wide barrier: switches to the next thread of the block (see emulator_registry.h).
void syncthreads();
}  // namespace emu

#define threadIdx (::emu::thread_idx)
#define blockIdx (::emu::block_idx)
#define blockDim (::emu::block_dim)
#define gridDim (::emu::grid_dim)
#define __syncthreads() (::emu::syncthreads())

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
// A block's threads run on one host thread, one block at a time: a thread-local static is
// exactly one copy per block in flight.
#define __shared__ static thread_local

using std::exp;
using std::fabs;
using std::fmax;
using std::log;
using std::sqrt;

inline unsigned int __float_as_uint(float f) {
  unsigned int u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float __uint_as_float(unsigned int u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
// Blocks of one launch run one after another, but two streams run on two host threads.
inline int atomicCAS(int* address, int compare, int value) {
  __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST,
                              __ATOMIC_SEQ_CST);
  return compare;
}
