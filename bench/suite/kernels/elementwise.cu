// SwizzlePerf suite: fused element-wise out = relu(a * x + b) * y over 2^26 fp32 elements, 1D grid.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <cuda_runtime.h>

#define N_ELEMS (1 << 26)
#define BLOCK 256
#define SEED 0x5EEDA003ull

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

__global__ void fused_relu_axpb_mul(const float* __restrict__ a, const float* __restrict__ x, const float* __restrict__ b,
                                    const float* __restrict__ y, float* __restrict__ out, int n) {
  const int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) {
    const float t = a[i] * x[i] + b[i];
    out[i] = fmaxf(t, 0.0f) * y[i];
  }
}

int main() {
  const size_t n = N_ELEMS;
  const size_t bytes = n * sizeof(float);
  float* ha = (float*)malloc(bytes);
  float* hx = (float*)malloc(bytes);
  float* hb = (float*)malloc(bytes);
  float* hy = (float*)malloc(bytes);
  float* hout = (float*)malloc(bytes);
  if (!ha || !hx || !hb || !hy || !hout) { fprintf(stderr, "host allocation failed\n"); return 2; }
  for (size_t i = 0; i < n; ++i) ha[i] = uniform(0.5f, 2.0f);
  for (size_t i = 0; i < n; ++i) hx[i] = uniform(-1.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) hb[i] = uniform(-0.5f, 0.5f);
  for (size_t i = 0; i < n; ++i) hy[i] = uniform(-2.0f, 2.0f);

  float *da, *dx, *db, *dy, *dout;
  CHECK(cudaMalloc(&da, bytes));
  CHECK(cudaMalloc(&dx, bytes));
  CHECK(cudaMalloc(&db, bytes));
  CHECK(cudaMalloc(&dy, bytes));
  CHECK(cudaMalloc(&dout, bytes));
  CHECK(cudaMemcpy(da, ha, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dx, hx, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, hb, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dy, hy, bytes, cudaMemcpyHostToDevice));

  const int blocks = (N_ELEMS + BLOCK - 1) / BLOCK;
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  CHECK(cudaMemset(dout, 0xff, bytes));
  fused_relu_axpb_mul<<<blocks, BLOCK>>>(da, dx, db, dy, dout, N_ELEMS);  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemset(dout, 0xff, bytes));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventRecord(start));
  fused_relu_axpb_mul<<<blocks, BLOCK>>>(da, dx, db, dy, dout, N_ELEMS);  // measured
  CHECK(cudaEventRecord(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(hout, dout, bytes, cudaMemcpyDeviceToHost));

  // Check every output (the device may fuse a * x + b into one FMA, hence the tolerance).
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const double t = (double)ha[i] * hx[i] + hb[i];
    const double ref = (t > 0.0 ? t : 0.0) * hy[i];
    if (!(fabs(hout[i] - ref) <= 1e-5 * fabs(ref) + 1e-6)) {
      if (bad < 5) fprintf(stderr, "elementwise: out[%zu] = %g, expected %g\n", i, hout[i], ref);
      ++bad;
    }
  }

  const uint64_t sum = fnv1a(hout, bytes, 14695981039346656037ull);
  printf("kernel elementwise ms %.4f checksum %016llx\n", ms, (unsigned long long)sum);
  CHECK(cudaFree(da));
  CHECK(cudaFree(dx));
  CHECK(cudaFree(db));
  CHECK(cudaFree(dy));
  CHECK(cudaFree(dout));
  free(ha);
  free(hx);
  free(hb);
  free(hy);
  free(hout);
  if (bad) { fprintf(stderr, "elementwise: %zu outputs wrong\n", bad); return 1; }
  return 0;
}
