// Two kernels of a small dense layer: a bias-and-activation kernel whose if statement is split
// between #if branches (nvcc sees one branch; tree-sitter sees an unbalanced brace inside the
// kernel), and a rank-k update C = A * A^T on a 2D tile grid.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>

#ifndef CLAMP_TO_ZERO
#define CLAMP_TO_ZERO 1
#endif

#define ROWS 8192
#define COLS 8192
#define DEPTH 2048
#define TILE 16

__global__ void bias_activation(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y,
                                int rows, int cols) {
  const int row = blockIdx.y * TILE + threadIdx.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  if (row >= rows || col >= cols) return;
  float v = x[(size_t)row * cols + col] + bias[col];
#if CLAMP_TO_ZERO
  if (v < 0.0f) {
#else
  if (v < -6.0f) {
#endif
    v = 0.0f;
  }
  y[(size_t)row * cols + col] = v;
}

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
#ifndef SWZC_095C50972B7EFA96
#define SWZC_095C50972B7EFA96
// grouped:128 over the 2D grid (rows blockIdx.y, columns blockIdx.x).
static __device__ __forceinline__ uint3 swzc_grouped128_2d(unsigned bx, unsigned by, unsigned bz, unsigned gx, unsigned gy) {
  if ((unsigned long long)gx * gy > 0xffffffffull) return make_uint3(bx, by, bz);  // ids past 32 bits: keep the hardware order
  const unsigned m = gy, n = gx;
  unsigned p = by * n + bx;
  p = swzc_grouped(p, m, n, 128u);
  return make_uint3(p % n, p / n, bz);
}
#endif

__global__ void rank_k_update(const float* __restrict__ A, float* __restrict__ C, int n, int depth) {
  const uint3 swzc_block = swzc_grouped128_2d(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y);  // swzc: grouped:128
  const int i = swzc_block.y * TILE + threadIdx.y;
  const int j = swzc_block.x * TILE + threadIdx.x;
  if (i >= n || j >= n) return;
  float acc = 0.0f;
  for (int p = 0; p < depth; ++p) acc += A[(size_t)i * depth + p] * A[(size_t)j * depth + p];
  C[(size_t)i * n + j] = acc;
}

int main() {
  std::vector<float> x((size_t)ROWS * COLS), bias(COLS), a((size_t)ROWS * DEPTH);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
  for (int j = 0; j < COLS; ++j) bias[j] = 0.01f * (j % 7) - 0.03f;
  for (size_t i = 0; i < a.size(); ++i) a[i] = (float)((i * 40503u) % 1001) / 1000.0f;

  float *dx, *dbias, *dy, *da, *dc;
  cudaMalloc(&dx, x.size() * sizeof(float));
  cudaMalloc(&dbias, bias.size() * sizeof(float));
  cudaMalloc(&dy, x.size() * sizeof(float));
  cudaMalloc(&da, a.size() * sizeof(float));
  cudaMalloc(&dc, (size_t)ROWS * ROWS * sizeof(float));
  cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dbias, bias.data(), bias.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(da, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice);

  dim3 block(TILE, TILE);
  dim3 grid_act(COLS / TILE, ROWS / TILE);
  dim3 grid_rank(ROWS / TILE, ROWS / TILE);
  bias_activation<<<grid_act, block>>>(dx, dbias, dy, ROWS, COLS);
  rank_k_update<<<grid_rank, block>>>(da, dc, ROWS, DEPTH);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    fprintf(stderr, "kernel failed\n");
    return 1;
  }

  std::vector<float> y(x.size()), c(4);
  cudaMemcpy(y.data(), dy, y.size() * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(c.data(), dc + (size_t)5 * ROWS + 9, sizeof(float), cudaMemcpyDeviceToHost);
  double ref = 0.0;
  for (int p = 0; p < DEPTH; ++p) ref += (double)a[(size_t)5 * DEPTH + p] * a[(size_t)9 * DEPTH + p];
  int bad = std::fabs(ref - c[0]) > 1e-2 * std::fabs(ref) ? 1 : 0;
  for (size_t i = 0; i < y.size(); i += 4099) {
    float v = x[i] + bias[i % COLS];
    if (v < 0.0f) v = 0.0f;
    if (y[i] != v) ++bad;
  }
  printf("%s\n", bad ? "FAILED" : "ok");
  cudaFree(dx);
  cudaFree(dbias);
  cudaFree(dy);
  cudaFree(da);
  cudaFree(dc);
  return bad != 0;
}
