// Naive fp32 GEMM on a rectangle, C (M x N) = A (M x K) * B (K x N), row-major, one output per thread, blocks
// of 16 x 16 threads: a block reads 16 rows of A and 16 columns of B (tile row blockIdx.y, tile column blockIdx.x).
// M = 8192, N = 4096, K = 4096: A 134 MB, B 67 MB, C 134 MB against a 50-60 MB L2, a grid of 256 x 512 blocks.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

#define M 8192
#define N 4096
#define K 4096
#define TS 16

#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t err_ = (call);                                                       \
    if (err_ != cudaSuccess) {                                                       \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      exit(2);                                                                       \
    }                                                                                \
  } while (0)

__global__ void naive_gemm_rect(const float* A, const float* B, float* C) {
  const int row = blockIdx.y * TS + threadIdx.y;
  const int col = blockIdx.x * TS + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  C[row * N + col] = acc;
}
static unsigned int rng_state = 2024u;
static float next_uniform() {  // xorshift32, values in [-1, 1)
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return (rng_state >> 8) * (1.0f / 8388608.0f) - 1.0f;
}

static unsigned long long fnv1a(const void* data, size_t len) {
  const unsigned char* p = (const unsigned char*)data;
  unsigned long long h = 14695981039346656037ull;
  for (size_t i = 0; i < len; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

int main() {
  const size_t a_elems = (size_t)M * K, b_elems = (size_t)K * N, c_elems = (size_t)M * N;
  float* hA = (float*)malloc(a_elems * sizeof(float));
  float* hB = (float*)malloc(b_elems * sizeof(float));
  float* hC = (float*)malloc(c_elems * sizeof(float));
  for (size_t i = 0; i < a_elems; ++i) hA[i] = next_uniform();
  for (size_t i = 0; i < b_elems; ++i) hB[i] = next_uniform();

  float *A, *B, *C;
  CHECK(cudaMalloc(&A, a_elems * sizeof(float)));
  CHECK(cudaMalloc(&B, b_elems * sizeof(float)));
  CHECK(cudaMalloc(&C, c_elems * sizeof(float)));
  CHECK(cudaMemcpy(A, hA, a_elems * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(B, hB, b_elems * sizeof(float), cudaMemcpyHostToDevice));

  dim3 block(TS, TS);
  dim3 grid(N / TS, M / TS);
  naive_gemm_rect<<<grid, block>>>(A, B, C);  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemset(C, 0xff, c_elems * sizeof(float)));  // poison: the measured launch must write every element
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  naive_gemm_rect<<<grid, block>>>(A, B, C);  // measured
  CHECK(cudaEventRecord(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(hC, C, c_elems * sizeof(float), cudaMemcpyDeviceToHost));

  int bad = 0;
  for (int s = 0; s < 16; ++s) {
    const int r = (s * 977 + 3) % M, c = (s * 1013 + 5) % N;
    double ref = 0.0, mag = 0.0;
    for (int k = 0; k < K; ++k) {
      ref += (double)hA[(size_t)r * K + k] * hB[(size_t)k * N + c];
      mag += fabs((double)hA[(size_t)r * K + k] * hB[(size_t)k * N + c]);
    }
    if (!(fabs(ref - hC[(size_t)r * N + c]) <= 1e-4 * mag + 1e-3)) ++bad;
  }
  printf("kernel naive_gemm_rect ms %.4f checksum %016llx\n", ms, fnv1a(hC, c_elems * sizeof(float)));
  if (bad) fprintf(stderr, "naive_gemm_rect: %d of 16 spot checks WRONG\n", bad);

  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  free(hA);
  free(hB);
  free(hC);
  return bad ? 1 : 0;
}
