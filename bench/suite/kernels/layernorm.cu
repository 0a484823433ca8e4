// SwizzlePerf suite: LayerNorm over rows of a 16384 x 4096 fp32 matrix, one block per row on a (1, ROWS) grid.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <cuda_runtime.h>

#define ROWS 16384
#define COLS 4096
#define THREADS 256
#define PER_THREAD (COLS / THREADS)
#define EPS 1e-5f
#define SEED 0x5EEDA004ull

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

// Sum over the block with a fixed shared-memory tree: the same order every run.
__device__ float block_sum(float v, float* scratch) {
  const int t = threadIdx.x;
  scratch[t] = v;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if (t < s) scratch[t] += scratch[t + s];
    __syncthreads();
  }
  const float total = scratch[0];
  __syncthreads();
  return total;
}

__global__ void layernorm(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                          float* __restrict__ y, int cols) {
  __shared__ float scratch[THREADS];
  const int row = blockIdx.y;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  float v[PER_THREAD];
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < PER_THREAD; ++k) {
    v[k] = xr[threadIdx.x + k * THREADS];
    s += v[k];
  }
  const float mean = block_sum(s, scratch) / cols;
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < PER_THREAD; ++k) {
    const float d = v[k] - mean;
    q += d * d;
  }
  const float var = block_sum(q, scratch) / cols;
  const float inv = rsqrtf(var + EPS);
#pragma unroll
  for (int k = 0; k < PER_THREAD; ++k) {
    const int c = threadIdx.x + k * THREADS;
    yr[c] = (v[k] - mean) * inv * gamma[c] + beta[c];
  }
}

int main() {
  const size_t elems = (size_t)ROWS * COLS;
  const size_t bytes = elems * sizeof(float);
  const size_t pbytes = COLS * sizeof(float);
  float* hx = (float*)malloc(bytes);
  float* hy = (float*)malloc(bytes);
  float* hgamma = (float*)malloc(pbytes);
  float* hbeta = (float*)malloc(pbytes);
  if (!hx || !hy || !hgamma || !hbeta) { fprintf(stderr, "host allocation failed\n"); return 2; }
  for (size_t i = 0; i < elems; ++i) hx[i] = uniform(-3.0f, 5.0f);
  for (int c = 0; c < COLS; ++c) hgamma[c] = uniform(0.5f, 1.5f);
  for (int c = 0; c < COLS; ++c) hbeta[c] = uniform(-0.5f, 0.5f);

  float *dx, *dy, *dgamma, *dbeta;
  CHECK(cudaMalloc(&dx, bytes));
  CHECK(cudaMalloc(&dy, bytes));
  CHECK(cudaMalloc(&dgamma, pbytes));
  CHECK(cudaMalloc(&dbeta, pbytes));
  CHECK(cudaMemcpy(dx, hx, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dgamma, hgamma, pbytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dbeta, hbeta, pbytes, cudaMemcpyHostToDevice));

  dim3 grid(1, ROWS);
  dim3 block(THREADS);
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  CHECK(cudaMemset(dy, 0xff, bytes));
  layernorm<<<grid, block>>>(dx, dgamma, dbeta, dy, COLS);  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemset(dy, 0xff, bytes));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventRecord(start));
  layernorm<<<grid, block>>>(dx, dgamma, dbeta, dy, COLS);  // measured
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
    double mean = 0.0, var = 0.0;
    for (int c = 0; c < COLS; ++c) mean += xr[c];
    mean /= COLS;
    for (int c = 0; c < COLS; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    var /= COLS;
    const double inv = 1.0 / sqrt(var + 1e-5);
    for (int c = 0; c < COLS; ++c) {
      const double ref = (xr[c] - mean) * inv * hgamma[c] + hbeta[c];
      const double got = hy[(size_t)r * COLS + c];
      if (!(fabs(got - ref) <= 1e-4 * fabs(ref) + 1e-4)) {
        if (bad < 5) fprintf(stderr, "layernorm: y[%d][%d] = %g, expected %g\n", r, c, got, ref);
        ++bad;
      }
    }
  }

  const uint64_t sum = fnv1a(hy, bytes, 14695981039346656037ull);
  printf("kernel layernorm ms %.4f checksum %016llx\n", ms, (unsigned long long)sum);
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
  CHECK(cudaFree(dgamma));
  CHECK(cudaFree(dbeta));
  free(hx);
  free(hy);
  free(hgamma);
  free(hbeta);
  if (bad) { fprintf(stderr, "layernorm: %zu checked outputs wrong\n", bad); return 1; }
  return 0;
}
