// SwizzlePerf suite: Black-Scholes European call and put prices for 2^26 options, one thread per option, 1D grid.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <cuda_runtime.h>

#define N_OPT (1 << 26)
#define BLOCK 256
#define RISKFREE 0.02f
#define VOLATILITY 0.30f
#define SEED 0x5EEDA008ull

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

__global__ void black_scholes(const float* __restrict__ spot, const float* __restrict__ strike, const float* __restrict__ years,
                              float* __restrict__ call, float* __restrict__ put, int n, float r, float sigma) {
  const int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i >= n) return;
  const float s = spot[i], k = strike[i], t = years[i];
  const float sqrt_t = sqrtf(t);
  const float d1 = (logf(s / k) + (r + 0.5f * sigma * sigma) * t) / (sigma * sqrt_t);
  const float d2 = d1 - sigma * sqrt_t;
  const float discounted = k * expf(-r * t);
  call[i] = s * normcdff(d1) - discounted * normcdff(d2);
  put[i] = discounted * normcdff(-d2) - s * normcdff(-d1);
}

static double norm_cdf(double d) { return 0.5 * erfc(-d / sqrt(2.0)); }

int main() {
  const size_t n = N_OPT;
  const size_t bytes = n * sizeof(float);
  float* hs = (float*)malloc(bytes);
  float* hk = (float*)malloc(bytes);
  float* ht = (float*)malloc(bytes);
  float* hcall = (float*)malloc(bytes);
  float* hput = (float*)malloc(bytes);
  if (!hs || !hk || !ht || !hcall || !hput) { fprintf(stderr, "host allocation failed\n"); return 2; }
  for (size_t i = 0; i < n; ++i) hs[i] = uniform(5.0f, 30.0f);
  for (size_t i = 0; i < n; ++i) hk[i] = uniform(1.0f, 100.0f);
  for (size_t i = 0; i < n; ++i) ht[i] = uniform(0.25f, 10.0f);

  float *ds, *dk, *dt, *dcall, *dput;
  CHECK(cudaMalloc(&ds, bytes));
  CHECK(cudaMalloc(&dk, bytes));
  CHECK(cudaMalloc(&dt, bytes));
  CHECK(cudaMalloc(&dcall, bytes));
  CHECK(cudaMalloc(&dput, bytes));
  CHECK(cudaMemcpy(ds, hs, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dk, hk, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dt, ht, bytes, cudaMemcpyHostToDevice));

  const int blocks = (N_OPT + BLOCK - 1) / BLOCK;
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  CHECK(cudaMemset(dcall, 0xff, bytes));
  CHECK(cudaMemset(dput, 0xff, bytes));
  black_scholes<<<blocks, BLOCK>>>(ds, dk, dt, dcall, dput, N_OPT, RISKFREE, VOLATILITY);  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemset(dcall, 0xff, bytes));
  CHECK(cudaMemset(dput, 0xff, bytes));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventRecord(start));
  black_scholes<<<blocks, BLOCK>>>(ds, dk, dt, dcall, dput, N_OPT, RISKFREE, VOLATILITY);  // measured
  CHECK(cudaEventRecord(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(hcall, dcall, bytes, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hput, dput, bytes, cudaMemcpyDeviceToHost));

  // Check every 97th option against a double-precision reference (absolute error: prices are up to ~30).
  size_t bad = 0;
  for (size_t i = 0; i < n; i += 97) {
    const double s = hs[i], k = hk[i], t = ht[i], r = RISKFREE, v = VOLATILITY;
    const double d1 = (log(s / k) + (r + 0.5 * v * v) * t) / (v * sqrt(t));
    const double d2 = d1 - v * sqrt(t);
    const double disc = k * exp(-r * t);
    const double c = s * norm_cdf(d1) - disc * norm_cdf(d2);
    const double p = disc * norm_cdf(-d2) - s * norm_cdf(-d1);
    if (!(fabs(hcall[i] - c) <= 2e-3 && fabs(hput[i] - p) <= 2e-3)) {
      if (bad < 5) fprintf(stderr, "black_scholes: option %zu call %g put %g, expected %g %g\n", i, hcall[i], hput[i], c, p);
      ++bad;
    }
  }

  uint64_t sum = fnv1a(hcall, bytes, 14695981039346656037ull);
  sum = fnv1a(hput, bytes, sum);
  printf("kernel black_scholes ms %.4f checksum %016llx\n", ms, (unsigned long long)sum);
  CHECK(cudaFree(ds));
  CHECK(cudaFree(dk));
  CHECK(cudaFree(dt));
  CHECK(cudaFree(dcall));
  CHECK(cudaFree(dput));
  free(hs);
  free(hk);
  free(ht);
  free(hcall);
  free(hput);
  if (bad) { fprintf(stderr, "black_scholes: %zu checked options wrong\n", bad); return 1; }
  return 0;
}
