// bf16 tensor-core GEMM C = A * B (M = N = 6144, K = 4096) with nvcuda::wmma, fp32 accumulate, fp32 output.
// A is row-major M x K, B row-major K x N, C row-major M x N. Each block of 256 threads (8 warps) computes a
// 128 x 128 tile of C on a 2D grid (bm = blockIdx.y, bn = blockIdx.x): 48 x 48 blocks.
// K goes in steps of 32: the block copies a 128 x 32 slice of A and a 32 x 128 slice of B into shared memory
// with cooperative, strided 16-byte loads, then each warp multiplies its 32 x 64 sub-tile as 2 x 4 fragments
// of 16 x 16 x 16. A and B are 50 MB each and C is 151 MB, against a 60 MB L2.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <mma.h>

using namespace nvcuda;

#define M 6144
#define N 6144
#define K 4096
#define BM 128
#define BN 128
#define BK 32
#define THREADS 256
#define PAD 8
#define SEED 0x5EEDB16Full

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

// bf16 on the host as its 16 bits: round to nearest even, and back.
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint64_t fnv1a(const void* data, size_t bytes, uint64_t h) {
  const unsigned char* p = (const unsigned char*)data;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

__global__ void bf16_gemm_2d(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                               float* __restrict__ C) {
  // Rows padded by 8 elements (16 bytes): fragment rows stay 32-byte aligned and banks spread.
  __shared__ alignas(32) __nv_bfloat16 As[BM][BK + PAD];
  __shared__ alignas(32) __nv_bfloat16 Bs[BK][BN + PAD];
  const int bm = blockIdx.y;
  const int bn = blockIdx.x;
  const int warp = threadIdx.x / 32;
  const int wm = warp / 2;  // 4 warp rows of 32
  const int wn = warp % 2;  // 2 warp columns of 64

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][4];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  for (int k0 = 0; k0 < K; k0 += BK) {
    // 128 x 32 of A: 512 chunks of 8 elements, two per thread.
    for (int i = threadIdx.x; i < BM * BK / 8; i += blockDim.x) {
      const int r = i / (BK / 8);
      const int c = i % (BK / 8);
      *reinterpret_cast<int4*>(&As[r][c * 8]) =
          *reinterpret_cast<const int4*>(&A[(size_t)(bm * BM + r) * K + k0 + c * 8]);
    }
    // 32 x 128 of B: 512 chunks of 8 elements, two per thread.
    for (int i = threadIdx.x; i < BK * BN / 8; i += blockDim.x) {
      const int r = i / (BN / 8);
      const int c = i % (BN / 8);
      *(int4*)&Bs[r][c * 8] = *(const int4*)&B[(size_t)(k0 + r) * N + bn * BN + c * 8];
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b[4];
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &As[wm * 32 + i * 16][kk], BK + PAD);
      for (int j = 0; j < 4; ++j) wmma::load_matrix_sync(b[j], &Bs[kk][wn * 64 + j * 16], BN + PAD);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 4; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }

  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      wmma::store_matrix_sync(C + (size_t)(bm * BM + wm * 32 + i * 16) * N + bn * BN + wn * 64 + j * 16, acc[i][j], N,
                              wmma::mem_row_major);
}

int main() {
  const size_t a_elems = (size_t)M * K, b_elems = (size_t)K * N, c_elems = (size_t)M * N;
  uint16_t* hA = (uint16_t*)malloc(a_elems * sizeof(uint16_t));
  uint16_t* hB = (uint16_t*)malloc(b_elems * sizeof(uint16_t));
  float* hC = (float*)malloc(c_elems * sizeof(float));
  if (!hA || !hB || !hC) { fprintf(stderr, "host allocation failed\n"); return 2; }
  for (size_t i = 0; i < a_elems; ++i) hA[i] = to_bf16(uniform(-1.0f, 1.0f));
  for (size_t i = 0; i < b_elems; ++i) hB[i] = to_bf16(uniform(-1.0f, 1.0f));

  __nv_bfloat16 *dA, *dB;
  float* dC;
  CHECK(cudaMalloc(&dA, a_elems * sizeof(__nv_bfloat16)));
  CHECK(cudaMalloc(&dB, b_elems * sizeof(__nv_bfloat16)));
  CHECK(cudaMalloc(&dC, c_elems * sizeof(float)));
  CHECK(cudaMemcpy(dA, hA, a_elems * sizeof(uint16_t), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dB, hB, b_elems * sizeof(uint16_t), cudaMemcpyHostToDevice));

  const dim3 tiles(N / BN, M / BM);
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  CHECK(cudaMemset(dC, 0xff, c_elems * sizeof(float)));
  bf16_gemm_2d<<<tiles, THREADS>>>(dA, dB, dC);  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemset(dC, 0xff, c_elems * sizeof(float)));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventRecord(start));
  bf16_gemm_2d<<<tiles, THREADS>>>(dA, dB, dC);  // measured
  CHECK(cudaEventRecord(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(hC, dC, c_elems * sizeof(float), cudaMemcpyDeviceToHost));

  // Spot check 64 outputs against a double-precision reference of the same bf16 inputs.
  int bad = 0;
  for (int s = 0; s < 64; ++s) {
    const int r = (int)(next_u64() % M), c = (int)(next_u64() % N);
    double ref = 0.0, mag = 0.0;
    for (int k = 0; k < K; ++k) {
      const double p = (double)from_bf16(hA[(size_t)r * K + k]) * from_bf16(hB[(size_t)k * N + c]);
      ref += p;
      mag += fabs(p);
    }
    const double got = hC[(size_t)r * N + c];
    if (!(fabs(got - ref) <= 2e-4 * mag + 1e-3)) {
      if (bad < 5) fprintf(stderr, "bf16_gemm_2d: C[%d][%d] = %g, expected %g\n", r, c, got, ref);
      ++bad;
    }
  }

  const uint64_t sum = fnv1a(hC, c_elems * sizeof(float), 14695981039346656037ull);
  printf("kernel bf16_gemm_2d ms %.4f checksum %016llx\n", ms, (unsigned long long)sum);
  CHECK(cudaFree(dA));
  CHECK(cudaFree(dB));
  CHECK(cudaFree(dC));
  free(hA);
  free(hB);
  free(hC);
  if (bad) { fprintf(stderr, "bf16_gemm_2d: %d of 64 checked outputs wrong\n", bad); return 1; }
  return 0;
}
