// A bf16 GEMM in HIP, C = A * B with fp32 accumulation, one thread per output and a 2D grid of
// 16 x 16 tiles, launched with hipLaunchKernelGGL.
#include <hip/hip_runtime.h>
#include <cmath>
#include <cstdio>
#include <vector>

#include "bf16_types.h"

#define TILE 16

#define HIP_CHECK(expr)                                                                   \
  do {                                                                                    \
    hipError_t status_ = (expr);                                                          \
    if (status_ != hipSuccess) {                                                          \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, hipGetErrorString(status_));     \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

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
#ifndef SWZC_A610A7C3F4FBCAE9
#define SWZC_A610A7C3F4FBCAE9
// grouped:256 over the 2D grid (rows blockIdx.y, columns blockIdx.x).
static __device__ __forceinline__ uint3 swzc_grouped256_2d(unsigned bx, unsigned by, unsigned bz, unsigned gx, unsigned gy) {
  if ((unsigned long long)gx * gy > 0xffffffffull) return make_uint3(bx, by, bz);  // ids past 32 bits: keep the hardware order
  const unsigned m = gy, n = gx;
  unsigned p = by * n + bx;
  p = swzc_grouped(p, m, n, 256u);
  return make_uint3(p % n, p / n, bz);
}
#endif

__global__ void gemm_bf16(const hip_bfloat16* __restrict__ A, const hip_bfloat16* __restrict__ B,
                          hip_bfloat16* __restrict__ C, int M, int N, int K) {
  const uint3 swzc_block = swzc_grouped256_2d(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y);  // swzc: grouped:256
  const int row = swzc_block.y * TILE + threadIdx.y;
  const int col = swzc_block.x * TILE + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k)
    acc += static_cast<float>(A[(size_t)row * K + k]) * static_cast<float>(B[(size_t)k * N + col]);
  C[(size_t)row * N + col] = hip_bfloat16(acc);
}

int main() {
  const int M = 8192, N = 8192, K = 2048;
  std::vector<hip_bfloat16> a((size_t)M * K), b((size_t)K * N), c((size_t)M * N);
  std::vector<float> af(a.size()), bf(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = hip_bfloat16((float)((i * 2654435761u) % 9) / 8.0f - 0.5f);
    af[i] = static_cast<float>(a[i]);
  }
  for (size_t i = 0; i < b.size(); ++i) {
    b[i] = hip_bfloat16((float)((i * 40503u) % 5) / 4.0f - 0.5f);
    bf[i] = static_cast<float>(b[i]);
  }

  hip_bfloat16 *dA, *dB, *dC;
  HIP_CHECK(hipMalloc(&dA, a.size() * sizeof(hip_bfloat16)));
  HIP_CHECK(hipMalloc(&dB, b.size() * sizeof(hip_bfloat16)));
  HIP_CHECK(hipMalloc(&dC, c.size() * sizeof(hip_bfloat16)));
  HIP_CHECK(hipMemcpy(dA, a.data(), a.size() * sizeof(hip_bfloat16), hipMemcpyHostToDevice));
  HIP_CHECK(hipMemcpy(dB, b.data(), b.size() * sizeof(hip_bfloat16), hipMemcpyHostToDevice));

  dim3 block(TILE, TILE);
  dim3 grid(N / TILE, M / TILE);
  hipLaunchKernelGGL(gemm_bf16, grid, block, 0, 0, dA, dB, dC, M, N, K);
  HIP_CHECK(hipGetLastError());
  HIP_CHECK(hipMemcpy(c.data(), dC, c.size() * sizeof(hip_bfloat16), hipMemcpyDeviceToHost));

  int bad = 0;
  for (int s = 0; s < 16; ++s) {
    const int i = (s * 7919) % M, j = (s * 104729) % N;
    double ref = 0.0;
    for (int p = 0; p < K; ++p) ref += (double)af[(size_t)i * K + p] * bf[(size_t)p * N + j];
    if (std::fabs(ref - static_cast<float>(c[(size_t)i * N + j])) > 1e-2 * (1.0 + std::fabs(ref))) ++bad;
  }
  printf("%s\n", bad ? "FAILED" : "ok");
  HIP_CHECK(hipFree(dA));
  HIP_CHECK(hipFree(dB));
  HIP_CHECK(hipFree(dC));
  return bad != 0;
}
