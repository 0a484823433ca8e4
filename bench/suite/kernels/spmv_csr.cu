// SwizzlePerf suite: naive CSR SpMV y = A * x, one thread per row, 2^20 rows, ~32 random columns per row, 1D grid.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <cuda_runtime.h>

#define ROWS (1 << 20)
#define COLS (1 << 20)
#define MIN_NNZ 24
#define MAX_NNZ 40
#define BLOCK 256
#define SEED 0x5EEDA006ull

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

__global__ void spmv_csr(int rows, const int* __restrict__ rowptr, const int* __restrict__ colidx,
                         const float* __restrict__ vals, const float* __restrict__ x, float* __restrict__ y) {
  const int r = blockIdx.x * BLOCK + threadIdx.x;
  if (r < rows) {
    float acc = 0.0f;
    for (int k = rowptr[r]; k < rowptr[r + 1]; ++k) acc += vals[k] * x[colidx[k]];
    y[r] = acc;
  }
}

int main() {
  // Build the matrix on the host: 24..40 nonzeros per row (mean 32), columns uniform, sorted within a row.
  int* hrowptr = (int*)malloc((ROWS + 1) * sizeof(int));
  if (!hrowptr) { fprintf(stderr, "host allocation failed\n"); return 2; }
  hrowptr[0] = 0;
  for (int r = 0; r < ROWS; ++r) hrowptr[r + 1] = hrowptr[r] + MIN_NNZ + (int)(next_u64() % (MAX_NNZ - MIN_NNZ + 1));
  const size_t nnz = (size_t)hrowptr[ROWS];
  int* hcol = (int*)malloc(nnz * sizeof(int));
  float* hval = (float*)malloc(nnz * sizeof(float));
  float* hx = (float*)malloc(COLS * sizeof(float));
  float* hy = (float*)malloc(ROWS * sizeof(float));
  if (!hcol || !hval || !hx || !hy) { fprintf(stderr, "host allocation failed\n"); return 2; }
  for (int r = 0; r < ROWS; ++r) {
    const int lo = hrowptr[r], hi = hrowptr[r + 1];
    for (int k = lo; k < hi; ++k) {  // insertion sort as the columns arrive
      const int c = (int)(next_u64() % COLS);
      int p = k;
      while (p > lo && hcol[p - 1] > c) { hcol[p] = hcol[p - 1]; --p; }
      hcol[p] = c;
    }
  }
  for (size_t k = 0; k < nnz; ++k) hval[k] = uniform(-1.0f, 1.0f);
  for (int c = 0; c < COLS; ++c) hx[c] = uniform(-1.0f, 1.0f);

  int *drowptr, *dcol;
  float *dval, *dx, *dy;
  CHECK(cudaMalloc(&drowptr, (ROWS + 1) * sizeof(int)));
  CHECK(cudaMalloc(&dcol, nnz * sizeof(int)));
  CHECK(cudaMalloc(&dval, nnz * sizeof(float)));
  CHECK(cudaMalloc(&dx, COLS * sizeof(float)));
  CHECK(cudaMalloc(&dy, ROWS * sizeof(float)));
  CHECK(cudaMemcpy(drowptr, hrowptr, (ROWS + 1) * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dcol, hcol, nnz * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dval, hval, nnz * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dx, hx, COLS * sizeof(float), cudaMemcpyHostToDevice));

  const int blocks = (ROWS + BLOCK - 1) / BLOCK;
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  CHECK(cudaMemset(dy, 0xff, ROWS * sizeof(float)));
  spmv_csr<<<blocks, BLOCK>>>(ROWS, drowptr, dcol, dval, dx, dy);  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemset(dy, 0xff, ROWS * sizeof(float)));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventRecord(start));
  spmv_csr<<<blocks, BLOCK>>>(ROWS, drowptr, dcol, dval, dx, dy);  // measured
  CHECK(cudaEventRecord(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(hy, dy, ROWS * sizeof(float), cudaMemcpyDeviceToHost));

  // Check every row against a double-precision reference.
  size_t bad = 0;
  for (int r = 0; r < ROWS; ++r) {
    double ref = 0.0, mag = 0.0;
    for (int k = hrowptr[r]; k < hrowptr[r + 1]; ++k) {
      ref += (double)hval[k] * hx[hcol[k]];
      mag += fabs((double)hval[k] * hx[hcol[k]]);
    }
    if (!(fabs(hy[r] - ref) <= 1e-5 * mag + 1e-6)) {
      if (bad < 5) fprintf(stderr, "spmv_csr: y[%d] = %g, expected %g\n", r, hy[r], ref);
      ++bad;
    }
  }

  const uint64_t sum = fnv1a(hy, ROWS * sizeof(float), 14695981039346656037ull);
  printf("kernel spmv_csr ms %.4f checksum %016llx\n", ms, (unsigned long long)sum);
  CHECK(cudaFree(drowptr));
  CHECK(cudaFree(dcol));
  CHECK(cudaFree(dval));
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
  free(hrowptr);
  free(hcol);
  free(hval);
  free(hx);
  free(hy);
  if (bad) { fprintf(stderr, "spmv_csr: %zu rows wrong\n", bad); return 1; }
  return 0;
}
