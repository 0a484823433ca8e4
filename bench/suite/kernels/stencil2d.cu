// SwizzlePerf suite: 5-point Jacobi stencil on an 8192 x 8192 fp32 grid, 32 x 32 tiles on a 2D grid.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <cuda_runtime.h>

#define N 8192
#define TILE 32
#define C_CENTER 0.5f
#define C_NEIGHBOR 0.125f
#define SEED 0x5EEDA011ull

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

// out = C_CENTER * centre + C_NEIGHBOR * (left + right + up + down); the boundary is copied through.
__global__ void stencil5(const float* __restrict__ in, float* __restrict__ out, int n) {
  const int x = blockIdx.x * TILE + threadIdx.x;
  const int y = blockIdx.y * TILE + threadIdx.y;
  if (x >= n || y >= n) return;
  const int id = y * n + x;
  if (x == 0 || y == 0 || x == n - 1 || y == n - 1) {
    out[id] = in[id];
    return;
  }
  out[id] = C_CENTER * in[id] + C_NEIGHBOR * (in[id - 1] + in[id + 1] + in[id - n] + in[id + n]);
}

int main() {
  const size_t elems = (size_t)N * N;
  const size_t bytes = elems * sizeof(float);
  float* hin = (float*)malloc(bytes);
  float* hout = (float*)malloc(bytes);
  if (!hin || !hout) { fprintf(stderr, "host allocation failed\n"); return 2; }
  for (size_t i = 0; i < elems; ++i) hin[i] = uniform(-1.0f, 1.0f);

  float *din, *dout;
  CHECK(cudaMalloc(&din, bytes));
  CHECK(cudaMalloc(&dout, bytes));
  CHECK(cudaMemcpy(din, hin, bytes, cudaMemcpyHostToDevice));

  dim3 block(TILE, TILE);
  dim3 grid((N + TILE - 1) / TILE, (N + TILE - 1) / TILE);
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  CHECK(cudaMemset(dout, 0xff, bytes));
  stencil5<<<grid, block>>>(din, dout, N);  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemset(dout, 0xff, bytes));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventRecord(start));
  stencil5<<<grid, block>>>(din, dout, N);  // measured
  CHECK(cudaEventRecord(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(hout, dout, bytes, cudaMemcpyDeviceToHost));

  // Check every point.
  size_t bad = 0;
  for (int y = 0; y < N; ++y)
    for (int x = 0; x < N; ++x) {
      const size_t id = (size_t)y * N + x;
      double ref = hin[id];
      if (x > 0 && y > 0 && x < N - 1 && y < N - 1)
        ref = 0.5 * hin[id] + 0.125 * ((double)hin[id - 1] + hin[id + 1] + hin[id - N] + hin[id + N]);
      if (!(fabs(hout[id] - ref) <= 1e-6)) {
        if (bad < 5) fprintf(stderr, "stencil2d: out[%d][%d] = %g, expected %g\n", y, x, hout[id], ref);
        ++bad;
      }
    }

  const uint64_t sum = fnv1a(hout, bytes, 14695981039346656037ull);
  printf("kernel stencil2d ms %.4f checksum %016llx\n", ms, (unsigned long long)sum);
  CHECK(cudaFree(din));
  CHECK(cudaFree(dout));
  free(hin);
  free(hout);
  if (bad) { fprintf(stderr, "stencil2d: %zu points wrong\n", bad); return 1; }
  return 0;
}
