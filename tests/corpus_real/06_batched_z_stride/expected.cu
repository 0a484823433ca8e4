// Batched GEMM, C[b] = A[b] * B[b] for many small problems: the x/y grid tiles one output matrix, and the
// z dimension is capped, so each block loops over the batch with a stride of gridDim.z.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define TILE 16
#define DIM_M 1024
#define DIM_N 1024
#define DIM_K 1024
#define BATCH 48
#define MAX_GRID_Z 8

// swzc: block swizzles; each is a permutation (of the blocks, or of the tiles a tile loop walks), proven before it was spliced in.
#ifndef SWZC_B659A13D3DE49D04
#define SWZC_B659A13D3DE49D04
// grouped:G: G tile rows per group, walked column by column inside each group (Triton's GROUP_M order).
static __device__ __forceinline__ unsigned swzc_grouped(unsigned p, unsigned m, unsigned n, unsigned g) {
  g = g < m ? g : m;  // a group taller than the grid is the whole grid; keeps g * n within m * n
  const unsigned per_group = g * n;
  const unsigned first_row = p / per_group * g;
  const unsigned rows = m - first_row < g ? m - first_row : g;  // the last group may be shorter
  const unsigned k = p % per_group;
  return (first_row + k % rows) * n + k / rows;
}
#endif
#ifndef SWZC_B046AABC06027A04
#define SWZC_B046AABC06027A04
// grouped:32 over the 2D grid (rows blockIdx.y, columns blockIdx.x).
static __device__ __forceinline__ uint3 swzc_grouped32_2d(unsigned bx, unsigned by, unsigned bz, unsigned gx, unsigned gy) {
  if ((unsigned long long)gx * gy > 0xffffffffull) return make_uint3(bx, by, bz);  // ids past 32 bits: keep the hardware order
  const unsigned m = gy, n = gx;
  unsigned p = by * n + bx;
  p = swzc_grouped(p, m, n, 32u);
  return make_uint3(p % n, p / n, bz);
}
#endif

__global__ void batched_gemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                             int m, int n, int k, int batch) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  const uint3 swzc_block = swzc_grouped32_2d(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y);  // swzc: grouped:32
  const int row = swzc_block.y * TILE + threadIdx.y;
  const int col = swzc_block.x * TILE + threadIdx.x;
  for (int b = swzc_block.z; b < batch; b += gridDim.z) {
    const float* a = A + (size_t)b * m * k;
    const float* bm = B + (size_t)b * k * n;
    float acc = 0.0f;
    for (int t = 0; t < k; t += TILE) {
      As[threadIdx.y][threadIdx.x] = a[(size_t)row * k + t + threadIdx.x];
      Bs[threadIdx.y][threadIdx.x] = bm[(size_t)(t + threadIdx.y) * n + col];
      __syncthreads();
      for (int i = 0; i < TILE; ++i) acc += As[threadIdx.y][i] * Bs[i][threadIdx.x];
      __syncthreads();
    }
    C[(size_t)b * m * n + (size_t)row * n + col] = acc;
  }
}

int main() {
  const size_t per_a = (size_t)DIM_M * DIM_K, per_b = (size_t)DIM_K * DIM_N, per_c = (size_t)DIM_M * DIM_N;
  std::vector<float> a(per_a * BATCH), b(per_b * BATCH), c(per_c * BATCH);
  for (size_t i = 0; i < a.size(); ++i) a[i] = (float)((i * 2654435761u) % 1024) / 1024.0f - 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = (float)((i * 2246822519u) % 1024) / 1024.0f - 0.5f;

  float *dA, *dB, *dC;
  cudaMalloc(&dA, a.size() * sizeof(float));
  cudaMalloc(&dB, b.size() * sizeof(float));
  cudaMalloc(&dC, c.size() * sizeof(float));
  cudaMemcpy(dA, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dB, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice);

  dim3 block(TILE, TILE);
  dim3 grid(DIM_N / TILE, DIM_M / TILE, std::min(BATCH, MAX_GRID_Z));
  batched_gemm<<<grid, block>>>(dA, dB, dC, DIM_M, DIM_N, DIM_K, BATCH);
  cudaMemcpy(c.data(), dC, c.size() * sizeof(float), cudaMemcpyDeviceToHost);

  int bad = 0;
  for (int s = 0; s < 24; ++s) {
    const int bi = s % BATCH, i = (s * 7919) % DIM_M, j = (s * 6271) % DIM_N;
    double ref = 0.0;
    for (int p = 0; p < DIM_K; ++p) ref += (double)a[bi * per_a + (size_t)i * DIM_K + p] * b[bi * per_b + (size_t)p * DIM_N + j];
    if (std::fabs(ref - c[bi * per_c + (size_t)i * DIM_N + j]) > 1e-3 * (1.0 + std::fabs(ref))) ++bad;
  }
  printf("%s\n", bad ? "FAILED" : "ok");
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dC);
  return bad != 0;
}
