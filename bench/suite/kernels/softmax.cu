// SwizzlePerf suite: row-wise softmax of a 16384 x 4096 fp32 matrix, one block per row on a 1D grid.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <cuda_runtime.h>

#define ROWS 16384
#define COLS 4096
#define THREADS 256
#define PER_THREAD (COLS / THREADS)
#define SEED 0x5EEDA005ull

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

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
  __shared__ float scratch[THREADS];
  const int row = blockIdx.x;
  const int t = threadIdx.x;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  float v[PER_THREAD];

  // Row maximum: per-thread, then a fixed shared-memory tree.
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < PER_THREAD; ++k) {
    v[k] = xr[t + k * THREADS];
    m = fmaxf(m, v[k]);
  }
  scratch[t] = m;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if (t < s) scratch[t] = fmaxf(scratch[t], scratch[t + s]);
    __syncthreads();
  }
  m = scratch[0];
  __syncthreads();

  // Sum of exponentials, same tree.
  float e = 0.0f;
#pragma unroll
  for (int k = 0; k < PER_THREAD; ++k) {
    v[k] = expf(v[k] - m);
    e += v[k];
  }
  scratch[t] = e;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if (t < s) scratch[t] += scratch[t + s];
    __syncthreads();
  }
  const float inv = 1.0f / scratch[0];

#pragma unroll
  for (int k = 0; k < PER_THREAD; ++k) yr[t + k * THREADS] = v[k] * inv;
}

int main() {
  const size_t elems = (size_t)ROWS * COLS;
  const size_t bytes = elems * sizeof(float);
  float* hx = (float*)malloc(bytes);
  float* hy = (float*)malloc(bytes);
  if (!hx || !hy) { fprintf(stderr, "host allocation failed\n"); return 2; }
  for (size_t i = 0; i < elems; ++i) hx[i] = uniform(-8.0f, 8.0f);

  float *dx, *dy;
  CHECK(cudaMalloc(&dx, bytes));
  CHECK(cudaMalloc(&dy, bytes));
  CHECK(cudaMemcpy(dx, hx, bytes, cudaMemcpyHostToDevice));

  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  CHECK(cudaMemset(dy, 0xff, bytes));
  softmax_rows<<<ROWS, THREADS>>>(dx, dy, COLS);  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemset(dy, 0xff, bytes));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventRecord(start));
  softmax_rows<<<ROWS, THREADS>>>(dx, dy, COLS);  // measured
  CHECK(cudaEventRecord(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(hy, dy, bytes, cudaMemcpyDeviceToHost));

  // Check 64 rows against a double-precision reference.
  size_t bad = 0;
  for (int s = 0; s < 64; ++s) {
    const int r = (int)(next_u64() % ROWS);
    const float* xr = hx + (size_t)r * COLS;
    double m = -INFINITY, sum = 0.0;
    for (int c = 0; c < COLS; ++c) m = xr[c] > m ? xr[c] : m;
    for (int c = 0; c < COLS; ++c) sum += exp(xr[c] - m);
    for (int c = 0; c < COLS; ++c) {
      const double ref = exp(xr[c] - m) / sum;
      const double got = hy[(size_t)r * COLS + c];
      if (!(fabs(got - ref) <= 1e-4 * fabs(ref) + 1e-9)) {
        if (bad < 5) fprintf(stderr, "softmax: y[%d][%d] = %g, expected %g\n", r, c, got, ref);
        ++bad;
      }
    }
  }

  const uint64_t sum = fnv1a(hy, bytes, 14695981039346656037ull);
  printf("kernel softmax ms %.4f checksum %016llx\n", ms, (unsigned long long)sum);
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
  free(hx);
  free(hy);
  if (bad) { fprintf(stderr, "softmax: %zu checked outputs wrong\n", bad); return 1; }
  return 0;
}
