// A program whose sizes come from its command line: fp32 GEMM C = A * B (n x n) through 32 x 32 shared-memory
// tiles, n read from argv. Nothing in the file fixes the grid, so swzc can rank the kernel only from a run:
// `swzc rewrite gemm_runtime.cu --bench-cmd "./gemm_runtime 6144" --build-cmd "nvcc -O3 -arch=sm_90 -o gemm_runtime {file}"`.
// Prints one line: `kernel gemm_tiled ms <median of 5 timed launches, L2 flushed before each> checksum <FNV-1a of C>`.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define TILE 32

#define CHECK(call)                                                                            \
  do {                                                                                         \
    cudaError_t err_ = (call);                                                                 \
    if (err_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: CUDA error: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      exit(2);                                                                                 \
    }                                                                                          \
  } while (0)

__global__ void gemm_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int n) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty;
  const int col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += TILE) {
    As[ty][tx] = A[row * n + k0 + tx];
    Bs[ty][tx] = B[(k0 + ty) * n + col];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  C[row * n + col] = acc;
}

// Random inputs in [-1, 1), the same for every run: a hash of the element's index and a seed.
__global__ void fill(float* x, size_t count, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x[i] = (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s N (a multiple of %d)\n", argv[0], TILE);
    return 2;
  }
  const int n = atoi(argv[1]);
  if (n <= 0 || n % TILE != 0) {
    fprintf(stderr, "N must be a positive multiple of %d\n", TILE);
    return 2;
  }
  const size_t elems = (size_t)n * n;
  float *A, *B, *C;
  CHECK(cudaMalloc(&A, elems * sizeof(float)));
  CHECK(cudaMalloc(&B, elems * sizeof(float)));
  CHECK(cudaMalloc(&C, elems * sizeof(float)));
  fill<<<1024, 256>>>(A, elems, 0x5EEDA001ull);
  fill<<<1024, 256>>>(B, elems, 0x5EEDB002ull);
  CHECK(cudaGetLastError());
  int l2 = 0;
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  const size_t flush_bytes = 2 * (size_t)l2;
  void* flush;
  CHECK(cudaMalloc(&flush, flush_bytes));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  const dim3 grid(n / TILE, n / TILE), block(TILE, TILE);
  std::vector<float> times;
  for (int run = 0; run < 6; ++run) {  // the first is a warm-up
    CHECK(cudaMemset(C, 0xff, elems * sizeof(float)));  // poisoned: every output must be written
    CHECK(cudaMemset(flush, run, flush_bytes));         // L2 holds none of A, B, C
    CHECK(cudaEventRecord(start));
    gemm_tiled<<<grid, block>>>(A, B, C, n);
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    CHECK(cudaGetLastError());
    float ms = 0.0f;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (run > 0) times.push_back(ms);
  }
  std::vector<float> host(elems);
  CHECK(cudaMemcpy(host.data(), C, elems * sizeof(float), cudaMemcpyDeviceToHost));
  uint64_t h = 1469598103934665603ull;
  const unsigned char* p = (const unsigned char*)host.data();
  for (size_t i = 0; i < elems * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  std::sort(times.begin(), times.end());
  printf("kernel gemm_tiled ms %.4f checksum %016llx\n", times[times.size() / 2], (unsigned long long)h);
  return 0;
}
