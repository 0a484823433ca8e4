// bf16 tensor-core GEMM, C (fp32) = A (M x K, row-major) * B (K x N, row-major).  One block per
// 128 x 128 tile of C on a 1D grid decoded into (tile row, tile column); 8 warps in a 2 x 4 layout,
// each computing 64 x 32 with WMMA 16 x 16 x 16 fragments.  Tiles of A and B are staged through
// shared memory with cooperative 16-byte loads.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <mma.h>

using namespace nvcuda;

#define BM 128
#define BN 128
#define BK 32
#define PAD 8
#define LDA (BK + PAD)
#define LDB (BN + PAD)
#define THREADS 256

// swzc: block swizzles; each is a permutation (of the blocks, or of the tiles a tile loop walks), proven before it was spliced in.
#ifndef SWZC_E8F24E39665D5326
#define SWZC_E8F24E39665D5326
// serpentine:G: grouped:G's groups of G tile rows, walked column by column, top to bottom in each column, but
// every odd-numbered group walks its columns right to left: consecutive groups meet at the same grid edge.
static __device__ __forceinline__ unsigned swzc_serpentine(unsigned p, unsigned m, unsigned n, unsigned g) {
  g = g < m ? g : m;  // a group taller than the grid is the whole grid; keeps g * n within m * n
  const unsigned per_group = g * n;
  const unsigned group = p / per_group;
  const unsigned first_row = group * g;
  const unsigned rows = m - first_row < g ? m - first_row : g;  // the last group may be shorter
  const unsigned k = p % per_group;
  const unsigned col = k / rows;
  return (first_row + k % rows) * n + (group % 2u == 0u ? col : n - 1u - col);
}
#endif
#ifndef SWZC_6E154ED6B57BC1A8
#define SWZC_6E154ED6B57BC1A8
// serpentine:16 over the tile grid the kernel decodes from a linear id (row = id / n: blockIdx.x, or a tile loop's index).
static __device__ __forceinline__ uint3 swzc_serpentine16_1d(unsigned bx, unsigned by, unsigned bz, unsigned gx, unsigned n) {
  if (n == 0u || gx % n != 0u) return make_uint3(bx, by, bz);  // not an m x n tiling: keep the hardware order
  const unsigned m = gx / n;
  unsigned p = bx;
  p = swzc_serpentine(p, m, n, 16u);
  return make_uint3(p, by, bz);
}
#endif

__global__ void __launch_bounds__(THREADS) gemm_bf16_wmma(const __nv_bfloat16* __restrict__ A,
                                                          const __nv_bfloat16* __restrict__ B,
                                                          float* __restrict__ C, int M, int N, int K) {
  __shared__ int4 a_raw[BM * LDA / 8];
  __shared__ int4 b_raw[BK * LDB / 8];
  __nv_bfloat16* As = reinterpret_cast<__nv_bfloat16*>(a_raw);
  __nv_bfloat16* Bs = reinterpret_cast<__nv_bfloat16*>(b_raw);

  const int tiles_n = N / BN;
  const uint3 swzc_block = swzc_serpentine16_1d(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, (unsigned)(tiles_n));  // swzc: serpentine:16
  const int bm = swzc_block.x / tiles_n;
  const int bn = swzc_block.x % tiles_n;
  const int warp = threadIdx.x / 32;
  const int wm = warp / 4;
  const int wn = warp % 4;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = threadIdx.x; i < BM * BK / 8; i += blockDim.x) {
      int r = i / (BK / 8);
      int c = i % (BK / 8);
      *(int4*)&As[r * LDA + c * 8] = *(const int4*)&A[(size_t)(bm * BM + r) * K + k0 + c * 8];
    }
    for (int i = threadIdx.x; i < BK * BN / 8; i += blockDim.x) {
      int r = i / (BN / 8);
      int c = i % (BN / 8);
      *(int4*)&Bs[r * LDB + c * 8] = *(const int4*)&B[(size_t)(k0 + r) * N + bn * BN + c * 8];
    }
    __syncthreads();
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a_frag[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b_frag[2];
      for (int i = 0; i < 4; ++i) wmma::load_matrix_sync(a_frag[i], As + (wm * 64 + i * 16) * LDA + kk, LDA);
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b_frag[j], Bs + kk * LDB + wn * 32 + j * 16, LDB);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(C + (size_t)(bm * BM + wm * 64 + i * 16) * N + bn * BN + wn * 32 + j * 16, acc[i][j], N,
                              wmma::mem_row_major);
}

int main() {
  const int M = 8192, N = 8192, K = 4096;
  std::vector<__nv_bfloat16> a((size_t)M * K), b((size_t)K * N);
  std::vector<float> af(a.size()), bf(b.size()), c((size_t)M * N);
  for (size_t i = 0; i < a.size(); ++i) {
    af[i] = (float)((i * 2654435761u) % 33) / 32.0f - 0.5f;
    a[i] = __float2bfloat16(af[i]);
  }
  for (size_t i = 0; i < b.size(); ++i) {
    bf[i] = (float)((i * 40503u) % 17) / 16.0f - 0.5f;
    b[i] = __float2bfloat16(bf[i]);
  }

  __nv_bfloat16 *dA, *dB;
  float* dC;
  cudaMalloc(&dA, a.size() * sizeof(__nv_bfloat16));
  cudaMalloc(&dB, b.size() * sizeof(__nv_bfloat16));
  cudaMalloc(&dC, c.size() * sizeof(float));
  cudaMemcpy(dA, a.data(), a.size() * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice);
  cudaMemcpy(dB, b.data(), b.size() * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice);

  const int tiles = (M / BM) * (N / BN);
  gemm_bf16_wmma<<<tiles, THREADS>>>(dA, dB, dC, M, N, K);
  if (cudaMemcpy(c.data(), dC, c.size() * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) {
    fprintf(stderr, "kernel or copy failed\n");
    return 1;
  }

  int bad = 0;
  for (int s = 0; s < 32; ++s) {
    const int i = (s * 7919) % M, j = (s * 104729) % N;
    double ref = 0.0;
    for (int p = 0; p < K; ++p) ref += (double)af[(size_t)i * K + p] * bf[(size_t)p * N + j];
    if (std::fabs(ref - c[(size_t)i * N + j]) > 1e-2 * (1.0 + std::fabs(ref))) ++bad;
  }
  printf("%s\n", bad ? "FAILED" : "ok");
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dC);
  return bad != 0;
}
