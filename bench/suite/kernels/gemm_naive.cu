// SwizzlePerf suite: naive fp32 GEMM C = A * B (N x N), one thread per output, 16 x 16 blocks on a 2D grid.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <cuda_runtime.h>

#define N 4096
#define BS 16
#define SEED 0x5EEDA002ull

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t err_ = (call);                                                               \
    if (err_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d: CUDA error: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      exit(2);                                                                               \
    }                                                                                        \
  } while (0)

// splitmix64: a small, fixed-seed host generator.
static uint64_t rng_state = SEED;
static uint64_t next_u64() {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)(next_u64() >> 40) * (1.0f / 16777216.0f); }

static uint64_t fnv1a(const void* data, size_t bytes, uint64_t h) {
  const unsigned char* p = (const unsigned char*)data;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

__global__ void gemm_naive(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int n) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= n || col >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}

int main() {
  const size_t elems = (size_t)N * N;
  const size_t bytes = elems * sizeof(float);
  float* hA = (float*)malloc(bytes);
  float* hB = (float*)malloc(bytes);
  float* hC = (float*)malloc(bytes);
  if (!hA || !hB || !hC) { fprintf(stderr, "host allocation failed\n"); return 2; }
  for (size_t i = 0; i < elems; ++i) hA[i] = uniform(-1.0f, 1.0f);
  for (size_t i = 0; i < elems; ++i) hB[i] = uniform(-1.0f, 1.0f);

  float *dA, *dB, *dC;
  CHECK(cudaMalloc(&dA, bytes));
  CHECK(cudaMalloc(&dB, bytes));
  CHECK(cudaMalloc(&dC, bytes));
  CHECK(cudaMemcpy(dA, hA, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dB, hB, bytes, cudaMemcpyHostToDevice));

  dim3 block(BS, BS);
  dim3 grid((N + BS - 1) / BS, (N + BS - 1) / BS);
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  CHECK(cudaMemset(dC, 0xff, bytes));
  gemm_naive<<<grid, block>>>(dA, dB, dC, N);  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemset(dC, 0xff, bytes));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventRecord(start));
  gemm_naive<<<grid, block>>>(dA, dB, dC, N);  // measured
  CHECK(cudaEventRecord(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(hC, dC, bytes, cudaMemcpyDeviceToHost));

  // Spot check 64 outputs against a double-precision reference.
  int bad = 0;
  for (int s = 0; s < 64; ++s) {
    const int r = (int)(next_u64() % N), c = (int)(next_u64() % N);
    double ref = 0.0, mag = 0.0;
    for (int k = 0; k < N; ++k) {
      ref += (double)hA[(size_t)r * N + k] * hB[(size_t)k * N + c];
      mag += fabs((double)hA[(size_t)r * N + k] * hB[(size_t)k * N + c]);
    }
    const double got = hC[(size_t)r * N + c];
    if (!(fabs(got - ref) <= 1e-5 * mag + 1e-3)) {
      if (bad < 5) fprintf(stderr, "gemm_naive: C[%d][%d] = %g, expected %g\n", r, c, got, ref);
      ++bad;
    }
  }

  const uint64_t sum = fnv1a(hC, bytes, 14695981039346656037ull);
  printf("kernel gemm_naive ms %.4f checksum %016llx\n", ms, (unsigned long long)sum);
  CHECK(cudaFree(dA));
  CHECK(cudaFree(dB));
  CHECK(cudaFree(dC));
  free(hA);
  free(hB);
  free(hC);
  if (bad) { fprintf(stderr, "gemm_naive: %d of 64 checked outputs wrong\n", bad); return 1; }
  return 0;
}
