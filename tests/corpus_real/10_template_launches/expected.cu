// Two template kernels: a tiled matrix multiply launched with explicit template arguments
// (element type and tile size), and a 2D box filter whose element type the compiler deduces
// from the arguments at the launch.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>

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
#ifndef SWZC_B8CC3F62673FFAB2
#define SWZC_B8CC3F62673FFAB2
// serpentine:16 over the 2D grid (rows blockIdx.y, columns blockIdx.x).
static __device__ __forceinline__ uint3 swzc_serpentine16_2d(unsigned bx, unsigned by, unsigned bz, unsigned gx, unsigned gy) {
  if ((unsigned long long)gx * gy > 0xffffffffull) return make_uint3(bx, by, bz);  // ids past 32 bits: keep the hardware order
  const unsigned m = gy, n = gx;
  unsigned p = by * n + bx;
  p = swzc_serpentine(p, m, n, 16u);
  return make_uint3(p % n, p / n, bz);
}
#endif

template <typename T, int TILE>
__global__ void matmul_tiled(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int n) {
  __shared__ T As[TILE][TILE];
  __shared__ T Bs[TILE][TILE];
  const uint3 swzc_block = swzc_serpentine16_2d(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y);  // swzc: serpentine:16
  const int row = swzc_block.y * TILE + threadIdx.y;
  const int col = swzc_block.x * TILE + threadIdx.x;
  T acc = T(0);
  for (int t = 0; t < n; t += TILE) {
    As[threadIdx.y][threadIdx.x] = A[(size_t)row * n + t + threadIdx.x];
    Bs[threadIdx.y][threadIdx.x] = B[(size_t)(t + threadIdx.y) * n + col];
    __syncthreads();
    for (int i = 0; i < TILE; ++i) acc += As[threadIdx.y][i] * Bs[i][threadIdx.x];
    __syncthreads();
  }
  C[(size_t)row * n + col] = acc;
}

template <typename T>
__global__ void box_filter3(const T* __restrict__ in, T* __restrict__ out, int width, int height) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < 1 || y < 1 || x >= width - 1 || y >= height - 1) return;
  T sum = T(0);
  for (int dy = -1; dy <= 1; ++dy)
    for (int dx = -1; dx <= 1; ++dx) sum += in[(size_t)(y + dy) * width + (x + dx)];
  out[(size_t)y * width + x] = sum / T(9);
}

int main() {
  const int n = 8192;
  const int tile = 32;
  std::vector<float> a((size_t)n * n), b((size_t)n * n), c((size_t)n * n);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = (float)((i * 2654435761u) % 64) / 64.0f;
    b[i] = (float)((i * 40503u) % 64) / 64.0f;
  }
  float *dA, *dB, *dC;
  cudaMalloc(&dA, a.size() * sizeof(float));
  cudaMalloc(&dB, b.size() * sizeof(float));
  cudaMalloc(&dC, c.size() * sizeof(float));
  cudaMemcpy(dA, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dB, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice);

  dim3 block(32, 32);
  dim3 grid(n / 32, n / 32);
  matmul_tiled<float, 32><<<grid, block>>>(dA, dB, dC, n);

  const int width = 16384, height = 16384;
  std::vector<double> img((size_t)width * height);
  for (size_t i = 0; i < img.size(); ++i) img[i] = (double)(i % 255);
  double *dImg, *dOut;
  cudaMalloc(&dImg, img.size() * sizeof(double));
  cudaMalloc(&dOut, img.size() * sizeof(double));
  cudaMemcpy(dImg, img.data(), img.size() * sizeof(double), cudaMemcpyHostToDevice);
  dim3 fblock(32, 8);
  dim3 fgrid(width / 32, height / 8);
  box_filter3<<<fgrid, fblock>>>(dImg, dOut, width, height);

  cudaMemcpy(c.data(), dC, c.size() * sizeof(float), cudaMemcpyDeviceToHost);
  std::vector<double> out(img.size());
  cudaMemcpy(out.data(), dOut, out.size() * sizeof(double), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int s = 0; s < 8; ++s) {
    const int i = (s * 7919) % n, j = (s * 6271) % n;
    double ref = 0.0;
    for (int p = 0; p < n; ++p) ref += (double)a[(size_t)i * n + p] * b[(size_t)p * n + j];
    if (std::fabs(ref - c[(size_t)i * n + j]) > 1e-3 * ref + 1e-3) ++bad;
    const int x = 1 + (s * 977) % (width - 2), y = 1 + (s * 613) % (height - 2);
    double box = 0.0;
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx) box += img[(size_t)(y + dy) * width + (x + dx)];
    if (std::fabs(box / 9.0 - out[(size_t)y * width + x]) > 1e-9) ++bad;
  }
  printf("%s (tile %d)\n", bad ? "FAILED" : "ok", tile);
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dC);
  cudaFree(dImg);
  cudaFree(dOut);
  return bad != 0;
}
