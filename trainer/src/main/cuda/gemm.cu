// The backend's own GEMM, used where cuBLAS is not there (a machine with only a driver) or not
// wanted (ramtrain.cuda.gemm=kernels). Row-major C = alpha op(A) op(B) + beta C, optionally
// strided-batched; A and B may each be stored as fp32 or bf16, accumulation is fp32.
//
// A block computes a 64x64 tile of C with 256 threads, each a 4x4 micro-tile strided by 16 so that
// neighbouring threads read neighbouring shared-memory words; K advances 16 at a time through
// shared memory. A strided batch runs one batch item per blockIdx.z, or, when every item sums into
// one C (strideC == 0: a convolution's weight gradient), loops over the items inside the block.
// bf16 x bf16 runs on tensor cores on sm_80 and newer.
#include "ramtrain.cuh"

#define GEMM_TILE 64
#define GEMM_K 16
#define GEMM_THREADS 16

__device__ __forceinline__ float rt_load(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float rt_load(const unsigned short* p, long long i) {
  return rt_bf16_to_f32(p[i]);
}

template <typename TA, typename TB>
__device__ __forceinline__ void rt_gemm_tile(int trans_a, int trans_b, int m, int n, int k,
                                             float alpha, const TA* a, int lda,
                                             long long stride_a, const TB* b, int ldb,
                                             long long stride_b, float beta, float* c, int ldc,
                                             long long stride_c, int count) {
  __shared__ float tile_a[GEMM_K][GEMM_TILE];
  __shared__ float tile_b[GEMM_K][GEMM_TILE];
  int tx = threadIdx.x;
  int ty = threadIdx.y;
  int flat = ty * GEMM_THREADS + tx;
  int row0 = blockIdx.y * GEMM_TILE;
  int col0 = blockIdx.x * GEMM_TILE;
  bool summed = stride_c == 0 && count > 1;
  int first = summed ? 0 : blockIdx.z;
  int last = summed ? count : blockIdx.z + 1;
  float acc[4][4];
  for (int i = 0; i < 4; i++) {
    for (int j = 0; j < 4; j++) {
      acc[i][j] = 0.0f;
    }
  }
  for (int item = first; item < last; item++) {
    const TA* ai = a + item * stride_a;
    const TB* bi = b + item * stride_b;
    for (int k0 = 0; k0 < k; k0 += GEMM_K) {
      for (int e = flat; e < GEMM_K * GEMM_TILE; e += GEMM_THREADS * GEMM_THREADS) {
        int kk = e / GEMM_TILE;
        int mm = e % GEMM_TILE;
        int row = row0 + mm;
        int p = k0 + kk;
        tile_a[kk][mm] =
            row < m && p < k
                ? rt_load(ai, trans_a ? (long long)p * lda + row : (long long)row * lda + p)
                : 0.0f;
        int col = col0 + mm;
        tile_b[kk][mm] =
            col < n && p < k
                ? rt_load(bi, trans_b ? (long long)col * ldb + p : (long long)p * ldb + col)
                : 0.0f;
      }
      __syncthreads();
      for (int kk = 0; kk < GEMM_K; kk++) {
        float av[4];
        float bv[4];
        for (int i = 0; i < 4; i++) {
          av[i] = tile_a[kk][ty + GEMM_THREADS * i];
          bv[i] = tile_b[kk][tx + GEMM_THREADS * i];
        }
        for (int i = 0; i < 4; i++) {
          for (int j = 0; j < 4; j++) {
            acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
          }
        }
      }
      __syncthreads();
    }
  }
  float* ci = c + (summed ? 0 : blockIdx.z * stride_c);
  for (int i = 0; i < 4; i++) {
    int row = row0 + ty + GEMM_THREADS * i;
    for (int j = 0; j < 4; j++) {
      int col = col0 + tx + GEMM_THREADS * j;
      if (row < m && col < n) {
        float* out = ci + (long long)row * ldc + col;
        // beta == 0 never reads C (it may hold anything), as BLAS promises.
        *out = beta == 0.0f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * *out;
      }
    }
  }
}

// The bf16 x bf16 product on tensor cores (sm_80 and newer; the same launch: 256 threads, a 64x64
// tile of C). The 8 warps split the tile into 16x32 strips, two 16x16x16 WMMA accumulators each;
// K advances 16 at a time through shared memory, where the operands land whatever their transposes,
// strides and alignment (zero-padded at the edges), so the WMMA loads see aligned row-major tiles.
// Older GPUs and the emulator run rt_gemm_tile.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define RT_TENSOR_CORES 1
#include <cuda_bf16.h>
#include <mma.h>

#define TC_LDA (GEMM_K + 8)     // bf16 elements per row of the A tile: a multiple of 8, rows 32B apart
#define TC_LDB (GEMM_TILE + 8)  // of the B tile
#define TC_LDC (GEMM_TILE + 4)  // floats per row of the C tile: a multiple of 4

__device__ __forceinline__ void rt_gemm_tile_tensor_cores(
    int trans_a, int trans_b, int m, int n, int k, float alpha, const unsigned short* a, int lda,
    long long stride_a, const unsigned short* b, int ldb, long long stride_b, float beta, float* c,
    int ldc, long long stride_c, int count) {
  using namespace nvcuda;
  __shared__ __align__(32) __nv_bfloat16 tile_a[GEMM_TILE][TC_LDA];
  __shared__ __align__(32) __nv_bfloat16 tile_b[GEMM_K][TC_LDB];
  __shared__ __align__(32) float tile_c[GEMM_TILE][TC_LDC];
  int flat = threadIdx.y * GEMM_THREADS + threadIdx.x;
  int warp = flat / 32;
  int warp_row = (warp / 2) * 16;  // 4 strips of rows
  int warp_col = (warp % 2) * 32;  // 2 strips of 32 columns
  int row0 = blockIdx.y * GEMM_TILE;
  int col0 = blockIdx.x * GEMM_TILE;
  bool summed = stride_c == 0 && count > 1;
  int first = summed ? 0 : blockIdx.z;
  int last = summed ? count : blockIdx.z + 1;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
  wmma::fill_fragment(acc[0], 0.0f);
  wmma::fill_fragment(acc[1], 0.0f);
  for (int item = first; item < last; item++) {
    const unsigned short* ai = a + item * stride_a;
    const unsigned short* bi = b + item * stride_b;
    for (int k0 = 0; k0 < k; k0 += GEMM_K) {
      for (int e = flat; e < GEMM_TILE * GEMM_K; e += GEMM_THREADS * GEMM_THREADS) {
        int mm = e / GEMM_K;  // A tile: row mm, column kk
        int kk = e % GEMM_K;
        int row = row0 + mm;
        int p = k0 + kk;
        unsigned short va =
            row < m && p < k ? ai[trans_a ? (long long)p * lda + row : (long long)row * lda + p]
                             : 0;
        tile_a[mm][kk] = __ushort_as_bfloat16(va);
        int kb = e / GEMM_TILE;  // B tile: row kb, column nn
        int nn = e % GEMM_TILE;
        int col = col0 + nn;
        int q = k0 + kb;
        unsigned short vb =
            col < n && q < k ? bi[trans_b ? (long long)col * ldb + q : (long long)q * ldb + col]
                             : 0;
        tile_b[kb][nn] = __ushort_as_bfloat16(vb);
      }
      __syncthreads();
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
      wmma::load_matrix_sync(fa, &tile_a[warp_row][0], TC_LDA);
      for (int j = 0; j < 2; j++) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
        wmma::load_matrix_sync(fb, &tile_b[0][warp_col + 16 * j], TC_LDB);
        wmma::mma_sync(acc[j], fa, fb, acc[j]);
      }
      __syncthreads();
    }
  }
  for (int j = 0; j < 2; j++) {
    wmma::store_matrix_sync(
        &tile_c[warp_row][warp_col + 16 * j], acc[j], TC_LDC, wmma::mem_row_major);
  }
  __syncthreads();
  float* ci = c + (summed ? 0 : blockIdx.z * stride_c);
  for (int e = flat; e < GEMM_TILE * GEMM_TILE; e += GEMM_THREADS * GEMM_THREADS) {
    int row = row0 + e / GEMM_TILE;
    int col = col0 + e % GEMM_TILE;
    if (row < m && col < n) {
      float* out = ci + (long long)row * ldc + col;
      float v = alpha * tile_c[e / GEMM_TILE][e % GEMM_TILE];
      *out = beta == 0.0f ? v : v + beta * *out;
    }
  }
}
#endif

#define RT_GEMM(name, TA, TB)                                                                  \
  extern "C" __global__ void name(int trans_a, int trans_b, int m, int n, int k, float alpha,  \
                                  const TA* a, int lda, long long stride_a, const TB* b,       \
                                  int ldb, long long stride_b, float beta, float* c, int ldc,  \
                                  long long stride_c, int count) {                             \
    rt_gemm_tile<TA, TB>(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, \
                         beta, c, ldc, stride_c, count);                                       \
  }                                                                                            \
  RT_KERNEL_WITH_BARRIERS(name)

RT_GEMM(gemm_f32_f32, float, float)
RT_GEMM(gemm_bf16_f32, unsigned short, float)
RT_GEMM(gemm_f32_bf16, float, unsigned short)

// bf16 x bf16: tensor cores where the GPU has them (see rt_gemm_tile_tensor_cores).
extern "C" __global__ void gemm_bf16_bf16(int trans_a, int trans_b, int m, int n, int k,
                                          float alpha, const unsigned short* a, int lda,
                                          long long stride_a, const unsigned short* b, int ldb,
                                          long long stride_b, float beta, float* c, int ldc,
                                          long long stride_c, int count) {
#ifdef RT_TENSOR_CORES
  rt_gemm_tile_tensor_cores(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b,
                            beta, c, ldc, stride_c, count);
#else
  rt_gemm_tile<unsigned short, unsigned short>(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a,
                                               b, ldb, stride_b, beta, c, ldc, stride_c, count);
#endif
}
RT_KERNEL_WITH_BARRIERS(gemm_bf16_bf16)
