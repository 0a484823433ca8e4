// Shared-memory tiled matrix multiply, C = A * B with square 32 x 32 tiles.  The host side has
// conditional compilation that splits a function header and an if/else between #if branches: nvcc
// sees one branch, a parser that keeps both sees an unbalanced construct.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#define TILE 32
#define M 8192
#define N 8192
#define K 4096

#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t err_ = (call);                                                       \
    if (err_ != cudaSuccess) {                                                       \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_));  \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

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
#ifndef SWZC_9B7BA45D5F0CB190
#define SWZC_9B7BA45D5F0CB190
// serpentine:32 over the 2D grid (rows blockIdx.y, columns blockIdx.x).
static __device__ __forceinline__ uint3 swzc_serpentine32_2d(unsigned bx, unsigned by, unsigned bz, unsigned gx, unsigned gy) {
  if ((unsigned long long)gx * gy > 0xffffffffull) return make_uint3(bx, by, bz);  // ids past 32 bits: keep the hardware order
  const unsigned m = gy, n = gx;
  unsigned p = by * n + bx;
  p = swzc_serpentine(p, m, n, 32u);
  return make_uint3(p % n, p / n, bz);
}
#endif

__global__ void matmul_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                             int m, int n, int k) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE + 1];
  const uint3 swzc_block = swzc_serpentine32_2d(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y);  // swzc: serpentine:32
  const int row = swzc_block.y * TILE + threadIdx.y;
  const int col = swzc_block.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < k; t += TILE) {
    As[threadIdx.y][threadIdx.x] = A[row * k + t + threadIdx.x];
    Bs[threadIdx.y][threadIdx.x] = B[(t + threadIdx.y) * n + col];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < TILE; ++i) acc += As[threadIdx.y][i] * Bs[i][threadIdx.x];
    __syncthreads();
  }
  C[row * n + col] = acc;
}

static void print_device_summary(int device) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    printf("device %d: properties unavailable\n", device);
    return;
  }
  printf("device %d: %s, compute capability %d.%d\n", device, prop.name, prop.major, prop.minor);
  printf("  %d multiprocessors, %.1f MB L2, %.1f GB global memory\n", prop.multiProcessorCount,
         prop.l2CacheSize / 1048576.0, prop.totalGlobalMem / 1073741824.0);
  printf("  shared memory per block: %zu bytes (opt-in %zu)\n", prop.sharedMemPerBlock, prop.sharedMemPerBlockOptin);
  const double flops = 2.0 * M * N * (double)K;
  printf("  problem: %d x %d x %d, %.1f GFLOP, grid %d x %d blocks of %d x %d threads\n", M, N, K, flops * 1e-9,
         N / TILE, M / TILE, TILE, TILE);
}

static unsigned next_random(unsigned* state) {
  *state = *state * 1664525u + 1013904223u;
  return *state >> 8;
}

#ifdef PINNED_STAGING
static void fill_matrix(float* __restrict__ dst, size_t count, unsigned seed, bool pinned)
#else
static void fill_matrix(float* dst, size_t count, unsigned seed)
#endif
{
  unsigned state = seed;
  for (size_t i = 0; i < count; ++i) dst[i] = (float)(next_random(&state) % 1000) / 1000.0f - 0.5f;
}

static int check_entries(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c,
                         int samples) {
  int bad = 0;
  for (int s = 0; s < samples; ++s) {
    const int i = (s * 7919) % M, j = (s * 104729) % N;
    double ref = 0.0;
    for (int p = 0; p < K; ++p) ref += (double)a[(size_t)i * K + p] * b[(size_t)p * N + j];
    if (std::abs(ref - c[(size_t)i * N + j]) > 1e-2) ++bad;
  }
  return bad;
}

int main() {
  print_device_summary(0);
  std::vector<float> a((size_t)M * K), b((size_t)K * N), c((size_t)M * N);
#ifdef PINNED_STAGING
  fill_matrix(a.data(), a.size(), 1u, false);
  fill_matrix(b.data(), b.size(), 2u, false);
#else
  fill_matrix(a.data(), a.size(), 1u);
  fill_matrix(b.data(), b.size(), 2u);
#endif

  float *dA, *dB, *dC;
  CHECK(cudaMalloc(&dA, a.size() * sizeof(float)));
  CHECK(cudaMalloc(&dB, b.size() * sizeof(float)));
  CHECK(cudaMalloc(&dC, c.size() * sizeof(float)));
  CHECK(cudaMemcpy(dA, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dB, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice));

  dim3 block(TILE, TILE);
  dim3 grid(N / TILE, M / TILE);
  matmul_tiled<<<grid, block>>>(dA, dB, dC, M, N, K);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(c.data(), dC, c.size() * sizeof(float), cudaMemcpyDeviceToHost));

  const int bad = check_entries(a, b, c, 32);
#if defined(STRICT_CHECK)
  if (bad != 0 || std::getenv("FORCE_FAIL") != nullptr) {
#else
  if (bad != 0) {
#endif
    printf("FAILED: %d of 32 sampled entries differ\n", bad);
    return 1;
  }
  printf("ok\n");
  CHECK(cudaFree(dA));
  CHECK(cudaFree(dB));
  CHECK(cudaFree(dC));
  return 0;
}
