// SwizzlePerf suite: persistent bf16 GEMM C = A * B on tensor cores (WMMA, fp32 accumulate and output).
// A fixed grid of 2 blocks per SM walks the 128 x 128 output tiles: for (tile = blockIdx.x; ...; tile += gridDim.x).
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <mma.h>

#define M 8192
#define N 8192
#define K 8192
#define BM 128
#define BN 128
#define BK 32
#define PAD 8         // bf16 elements after each shared-memory row: rows stay 16-byte aligned, banks spread
#define THREADS 256   // 8 warps in a 2 x 4 layout, each computing 64 x 32 of the tile
#define BLOCKS 264    // 2 resident blocks on each of the H200's 132 SMs
#define SEED 0x5EEDA00Bull

using namespace nvcuda;

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

__global__ void __launch_bounds__(THREADS, 2) gemm_persistent(const __nv_bfloat16* __restrict__ A,
                                                              const __nv_bfloat16* __restrict__ B,
                                                              float* __restrict__ C, int m, int n, int k) {
  __shared__ alignas(32) __nv_bfloat16 As[BM][BK + PAD];  // WMMA loads need 32-byte aligned fragments
  __shared__ alignas(32) __nv_bfloat16 Bs[BK][BN + PAD];
  const int warp = threadIdx.x / 32;
  const int warp_m = warp / 4;
  const int warp_n = warp % 4;
  const int tiles_m = m / BM;
  const int tiles_n = n / BN;
  for (int tile = blockIdx.x; tile < tiles_m * tiles_n; tile += gridDim.x) {
    const int tm = tile / tiles_n;
    const int tn = tile % tiles_n;
    const __nv_bfloat16* a = A + (size_t)tm * BM * k;
    const __nv_bfloat16* b = B + (size_t)tn * BN;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    for (int k0 = 0; k0 < k; k0 += BK) {
      // The A tile (BM x BK) and the B tile (BK x BN) as 16-byte vectors: 512 each, two per thread.
      for (int v = threadIdx.x; v < BM * BK / 8; v += THREADS) {
        const int r = v / (BK / 8), c = v % (BK / 8) * 8;
        *(uint4*)&As[r][c] = *(const uint4*)&a[(size_t)r * k + k0 + c];
      }
      for (int v = threadIdx.x; v < BK * BN / 8; v += THREADS) {
        const int r = v / (BN / 8), c = v % (BN / 8) * 8;
        *(uint4*)&Bs[r][c] = *(const uint4*)&b[(size_t)(k0 + r) * n + c];
      }
      __syncthreads();
      for (int kk = 0; kk < BK; kk += 16) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb[2];
        for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &Bs[kk][warp_n * 32 + j * 16], BN + PAD);
        for (int i = 0; i < 4; ++i) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
          wmma::load_matrix_sync(fa, &As[warp_m * 64 + i * 16][kk], BK + PAD);
          for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa, fb[j], acc[i][j]);
        }
      }
      __syncthreads();
    }
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 2; ++j) {
        float* c = C + (size_t)(tm * BM + warp_m * 64 + i * 16) * n + tn * BN + warp_n * 32 + j * 16;
        wmma::store_matrix_sync(c, acc[i][j], n, wmma::mem_row_major);
      }
  }
}

int main() {
  const size_t elems_a = (size_t)M * K, elems_b = (size_t)K * N, elems_c = (size_t)M * N;
  __nv_bfloat16* hA = (__nv_bfloat16*)malloc(elems_a * sizeof(__nv_bfloat16));
  __nv_bfloat16* hB = (__nv_bfloat16*)malloc(elems_b * sizeof(__nv_bfloat16));
  float* hC = (float*)malloc(elems_c * sizeof(float));
  if (!hA || !hB || !hC) { fprintf(stderr, "host allocation failed\n"); return 2; }
  for (size_t i = 0; i < elems_a; ++i) hA[i] = __float2bfloat16(uniform(-1.0f, 1.0f));
  for (size_t i = 0; i < elems_b; ++i) hB[i] = __float2bfloat16(uniform(-1.0f, 1.0f));

  __nv_bfloat16 *dA, *dB;
  float* dC;
  CHECK(cudaMalloc(&dA, elems_a * sizeof(__nv_bfloat16)));
  CHECK(cudaMalloc(&dB, elems_b * sizeof(__nv_bfloat16)));
  CHECK(cudaMalloc(&dC, elems_c * sizeof(float)));
  CHECK(cudaMemcpy(dA, hA, elems_a * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dB, hB, elems_b * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));

  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  CHECK(cudaMemset(dC, 0xff, elems_c * sizeof(float)));
  gemm_persistent<<<BLOCKS, THREADS>>>(dA, dB, dC, M, N, K);  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemset(dC, 0xff, elems_c * sizeof(float)));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventRecord(start));
  gemm_persistent<<<BLOCKS, THREADS>>>(dA, dB, dC, M, N, K);  // measured
  CHECK(cudaEventRecord(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(hC, dC, elems_c * sizeof(float), cudaMemcpyDeviceToHost));

  // Spot check 64 outputs against a double-precision product of the same bf16 inputs.
  int bad = 0;
  for (int s = 0; s < 64; ++s) {
    const int r = (int)(next_u64() % M), c = (int)(next_u64() % N);
    double ref = 0.0, mag = 0.0;
    for (int i = 0; i < K; ++i) {
      const double p = (double)__bfloat162float(hA[(size_t)r * K + i]) * __bfloat162float(hB[(size_t)i * N + c]);
      ref += p;
      mag += fabs(p);
    }
    const double got = hC[(size_t)r * N + c];
    if (!(fabs(got - ref) <= 1e-4 * mag + 1e-3)) {
      if (bad < 5) fprintf(stderr, "gemm_persistent: C[%d][%d] = %g, expected %g\n", r, c, got, ref);
      ++bad;
    }
  }

  const uint64_t sum = fnv1a(hC, elems_c * sizeof(float), 14695981039346656037ull);
  printf("kernel gemm_persistent ms %.4f checksum %016llx\n", ms, (unsigned long long)sum);
  CHECK(cudaFree(dA));
  CHECK(cudaFree(dB));
  CHECK(cudaFree(dC));
  free(hA);
  free(hB);
  free(hC);
  if (bad) { fprintf(stderr, "gemm_persistent: %d of 64 checked outputs wrong\n", bad); return 1; }
  return 0;
}
