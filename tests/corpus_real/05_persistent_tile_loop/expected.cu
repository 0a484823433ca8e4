// Two persistent GEMMs: a fixed number of blocks walks the C tiles, tile = blockIdx.x, blockIdx.x +
// gridDim.x, ...  The first uses tensor cores (WMMA, fp16 in, fp32 out) in a for loop; the second is
// a plain shared-memory GEMM written as a while loop.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

#define M 8192
#define N 8192
#define K 4096
#define BM 64
#define BN 64
#define BK 16
#define TILE 32

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
#ifndef SWZC_DB61C9ADEF4B80B7
#define SWZC_DB61C9ADEF4B80B7
// serpentine:32 over the tile grid the kernel decodes from a linear id (row = id / n: blockIdx.x, or a tile loop's index).
static __device__ __forceinline__ uint3 swzc_serpentine32_1d(unsigned bx, unsigned by, unsigned bz, unsigned gx, unsigned n) {
  if (n == 0u || gx % n != 0u) return make_uint3(bx, by, bz);  // not an m x n tiling: keep the hardware order
  const unsigned m = gx / n;
  unsigned p = bx;
  p = swzc_serpentine(p, m, n, 32u);
  return make_uint3(p, by, bz);
}
#endif

// 4 warps per block, 2 x 2, each computing a 32 x 32 piece of the 64 x 64 tile.
__global__ void gemm_wmma_persistent(const half* __restrict__ A, const half* __restrict__ B, float* __restrict__ C,
                                     int m, int n, int k) {
  const int tiles_m = m / BM;
  const int tiles_n = n / BN;
  const int warp = threadIdx.x / 32;
  const int wm = warp / 2;
  const int wn = warp % 2;
  for (int tile = blockIdx.x; tile < tiles_m * tiles_n; tile += gridDim.x) {
    const int swzc_tile = swzc_serpentine32_1d(tile, 0u, 0u, (unsigned)(tiles_m * tiles_n), (unsigned)(tiles_n)).x;  // swzc: serpentine:32
    const int tm = swzc_tile / tiles_n;
    const int tn = swzc_tile % tiles_n;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    for (int k0 = 0; k0 < k; k0 += BK) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b[2];
      for (int i = 0; i < 2; ++i)
        wmma::load_matrix_sync(a[i], A + (size_t)(tm * BM + wm * 32 + i * 16) * k + k0, k);
      for (int j = 0; j < 2; ++j)
        wmma::load_matrix_sync(b[j], B + (size_t)k0 * n + tn * BN + wn * 32 + j * 16, n);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j)
        wmma::store_matrix_sync(C + (size_t)(tm * BM + wm * 32 + i * 16) * n + tn * BN + wn * 32 + j * 16,
                                acc[i][j], n, wmma::mem_row_major);
  }
}

__global__ void gemm_smem_persistent(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                     int m, int n, int k) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE + 1];
  const int tiles_n = n / TILE;
  const int total = (m / TILE) * tiles_n;
  int tile = blockIdx.x;
  while (tile < total) {
    const int swzc_tile = swzc_serpentine32_1d(tile, 0u, 0u, (unsigned)(total), (unsigned)(tiles_n)).x;  // swzc: serpentine:32
    const int tm = swzc_tile / tiles_n;
    const int tn = swzc_tile % tiles_n;
    const int row = tm * TILE + threadIdx.y;
    const int col = tn * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < k; t += TILE) {
      As[threadIdx.y][threadIdx.x] = A[(size_t)row * k + t + threadIdx.x];
      Bs[threadIdx.y][threadIdx.x] = B[(size_t)(t + threadIdx.y) * n + col];
      __syncthreads();
      for (int i = 0; i < TILE; ++i) acc += As[threadIdx.y][i] * Bs[i][threadIdx.x];
      __syncthreads();
    }
    C[(size_t)row * n + col] = acc;
    tile += gridDim.x;
  }
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  std::vector<half> ah((size_t)M * K), bh((size_t)K * N);
  std::vector<float> af(ah.size()), bf(bh.size()), c((size_t)M * N);
  for (size_t i = 0; i < af.size(); ++i) af[i] = (float)((i * 2654435761u) % 17) / 16.0f - 0.5f;
  for (size_t i = 0; i < bf.size(); ++i) bf[i] = (float)((i * 40503u) % 13) / 12.0f - 0.5f;
  for (size_t i = 0; i < ah.size(); ++i) ah[i] = __float2half(af[i]);
  for (size_t i = 0; i < bh.size(); ++i) bh[i] = __float2half(bf[i]);

  half *dAh, *dBh;
  float *dAf, *dBf, *dC1, *dC2;
  cudaMalloc(&dAh, ah.size() * sizeof(half));
  cudaMalloc(&dBh, bh.size() * sizeof(half));
  cudaMalloc(&dAf, af.size() * sizeof(float));
  cudaMalloc(&dBf, bf.size() * sizeof(float));
  cudaMalloc(&dC1, c.size() * sizeof(float));
  cudaMalloc(&dC2, c.size() * sizeof(float));
  cudaMemcpy(dAh, ah.data(), ah.size() * sizeof(half), cudaMemcpyHostToDevice);
  cudaMemcpy(dBh, bh.data(), bh.size() * sizeof(half), cudaMemcpyHostToDevice);
  cudaMemcpy(dAf, af.data(), af.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dBf, bf.data(), bf.size() * sizeof(float), cudaMemcpyHostToDevice);

  gemm_wmma_persistent<<<sms, 128>>>(dAh, dBh, dC1, M, N, K);
  gemm_smem_persistent<<<2 * 132, dim3(TILE, TILE)>>>(dAf, dBf, dC2, M, N, K);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    fprintf(stderr, "launch failed\n");
    return 1;
  }

  int bad = 0;
  for (int pass = 0; pass < 2; ++pass) {
    cudaMemcpy(c.data(), pass ? dC2 : dC1, c.size() * sizeof(float), cudaMemcpyDeviceToHost);
    for (int s = 0; s < 16; ++s) {
      const int i = (s * 7919) % M, j = (s * 104729) % N;
      double ref = 0.0;
      for (int p = 0; p < K; ++p) ref += (double)af[(size_t)i * K + p] * bf[(size_t)p * N + j];
      if (std::fabs(ref - c[(size_t)i * N + j]) > 1e-2 * (1.0 + std::fabs(ref))) ++bad;
    }
  }
  printf("%s\n", bad ? "FAILED" : "ok");
  cudaFree(dAh);
  cudaFree(dBh);
  cudaFree(dAf);
  cudaFree(dBf);
  cudaFree(dC1);
  cudaFree(dC2);
  return bad != 0;
}
