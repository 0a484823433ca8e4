// A naive fp32 GEMM C = A * B (n x n), one thread per output, 32 x 8 blocks on a 2D grid; n comes from the
// command line (default 4096): the grid is set at run time, as in most programs.
//   nvcc -O3 -arch=sm_90 -o gemm_rt gemm_rt.cu && ./gemm_rt 8192
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <cuda_runtime.h>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t err_ = (call);                                                               \
    if (err_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d: CUDA error: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      exit(2);                                                                               \
    }                                                                                        \
  } while (0)

static uint64_t state = 0x5EEDA0F1ull;
static uint64_t next_u64() {  // splitmix64
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void gemm_rt(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int n) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n || col >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[(size_t)row * n + k] * B[(size_t)k * n + col];
  C[(size_t)row * n + col] = acc;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 4096;
  const size_t elems = (size_t)n * n;
  float* hA = (float*)malloc(elems * sizeof(float));
  float* hB = (float*)malloc(elems * sizeof(float));
  float* hC = (float*)malloc(elems * sizeof(float));
  for (size_t i = 0; i < elems; ++i) hA[i] = (float)(next_u64() >> 40) / 16777216.0f - 0.5f;
  for (size_t i = 0; i < elems; ++i) hB[i] = (float)(next_u64() >> 40) / 16777216.0f - 0.5f;
  float *dA, *dB, *dC;
  CHECK(cudaMalloc(&dA, elems * sizeof(float)));
  CHECK(cudaMalloc(&dB, elems * sizeof(float)));
  CHECK(cudaMalloc(&dC, elems * sizeof(float)));
  CHECK(cudaMemcpy(dA, hA, elems * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dB, hB, elems * sizeof(float), cudaMemcpyHostToDevice));
  dim3 block(32, 8);
  dim3 grid((n + 31) / 32, (n + 7) / 8);
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  gemm_rt<<<grid, block>>>(dA, dB, dC, n);  // warm-up
  CHECK(cudaMemset(dC, 0xff, elems * sizeof(float)));
  CHECK(cudaEventRecord(start));
  gemm_rt<<<grid, block>>>(dA, dB, dC, n);  // measured
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(hC, dC, elems * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int s = 0; s < 64; ++s) {  // 64 outputs against a double-precision dot product
    const int r = (int)(next_u64() % n), c = (int)(next_u64() % n);
    double ref = 0.0, mag = 0.0;
    for (int k = 0; k < n; ++k) {
      ref += (double)hA[(size_t)r * n + k] * hB[(size_t)k * n + c];
      mag += fabs((double)hA[(size_t)r * n + k] * hB[(size_t)k * n + c]);
    }
    if (fabs(hC[(size_t)r * n + c] - ref) > 1e-5 * mag + 1e-6) ++bad;
  }
  uint64_t h = 1469598103934665603ull;
  const unsigned char* p = (const unsigned char*)hC;
  for (size_t i = 0; i < elems * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  printf("kernel gemm_rt ms %.3f checksum %016llx\n", ms, (unsigned long long)h);
  if (bad) fprintf(stderr, "%d of 64 outputs differ from the reference\n", bad);
  return bad ? 1 : 0;
}
