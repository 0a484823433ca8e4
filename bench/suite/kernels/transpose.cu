// SwizzlePerf suite: out-of-place transpose of a 16384 x 16384 fp32 matrix, 32 x 32 tiles through padded shared memory.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <cuda_runtime.h>

#define N 16384
#define TILE 32
#define ROWS_PER_PASS 8
#define SEED 0x5EEDA007ull

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

// Block (TILE, ROWS_PER_PASS): each thread moves TILE / ROWS_PER_PASS elements of a TILE x TILE tile.
__global__ void transpose(const float* __restrict__ in, float* __restrict__ out, int n) {
  __shared__ float tile[TILE][TILE + 1];  // +1 column: no bank conflicts on the transposed read
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
#pragma unroll
  for (int j = 0; j < TILE; j += ROWS_PER_PASS) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * n + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
#pragma unroll
  for (int j = 0; j < TILE; j += ROWS_PER_PASS) out[(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
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

  dim3 block(TILE, ROWS_PER_PASS);
  dim3 grid(N / TILE, N / TILE);
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  CHECK(cudaMemset(dout, 0xff, bytes));
  transpose<<<grid, block>>>(din, dout, N);  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemset(dout, 0xff, bytes));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventRecord(start));
  transpose<<<grid, block>>>(din, dout, N);  // measured
  CHECK(cudaEventRecord(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(hout, dout, bytes, cudaMemcpyDeviceToHost));

  // A transpose moves bits: compare every element exactly (in 64 x 64 blocks, to stay in the host cache).
  size_t bad = 0;
  for (size_t r0 = 0; r0 < N; r0 += 64)
    for (size_t c0 = 0; c0 < N; c0 += 64)
      for (size_t r = r0; r < r0 + 64; ++r)
        for (size_t c = c0; c < c0 + 64; ++c)
          if (memcmp(&hout[r * N + c], &hin[c * N + r], sizeof(float)) != 0) {
            if (bad < 5) fprintf(stderr, "transpose: out[%zu][%zu] = %g, expected %g\n", r, c, hout[r * N + c], hin[c * N + r]);
            ++bad;
          }

  const uint64_t sum = fnv1a(hout, bytes, 14695981039346656037ull);
  printf("kernel transpose ms %.4f checksum %016llx\n", ms, (unsigned long long)sum);
  CHECK(cudaFree(din));
  CHECK(cudaFree(dout));
  free(hin);
  free(hout);
  if (bad) { fprintf(stderr, "transpose: %zu outputs wrong\n", bad); return 1; }
  return 0;
}
