// Naive fp32 GEMM, C = A * B, N x N row-major, one output per thread, blocks of 32 x 8 threads: a block
// reads 8 rows of A and 32 columns of B (tile row blockIdx.y, tile column blockIdx.x). N = 6144:
// 3 x 151 MB against a 60 MB L2, a grid of 192 x 768 blocks.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

#define N 6144
#define BX 32
#define BY 8

#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t err_ = (call);                                                       \
    if (err_ != cudaSuccess) {                                                       \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      exit(2);                                                                       \
    }                                                                                \
  } while (0)

__global__ void naive_gemm_32x8(const float* A, const float* B, float* C, int n) {
  const int row = blockIdx.y * BY + threadIdx.y;
  const int col = blockIdx.x * BX + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
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
  const size_t elems = (size_t)N * N;
  const size_t bytes = elems * sizeof(float);
  float* hA = (float*)malloc(bytes);
  float* hB = (float*)malloc(bytes);
  float* hC = (float*)malloc(bytes);
  for (size_t i = 0; i < elems; ++i) hA[i] = next_uniform();
  for (size_t i = 0; i < elems; ++i) hB[i] = next_uniform();

  float *A, *B, *C;
  CHECK(cudaMalloc(&A, bytes));
  CHECK(cudaMalloc(&B, bytes));
  CHECK(cudaMalloc(&C, bytes));
  CHECK(cudaMemcpy(A, hA, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(B, hB, bytes, cudaMemcpyHostToDevice));

  dim3 block(BX, BY);
  dim3 grid(N / BX, N / BY);
  naive_gemm_32x8<<<grid, block>>>(A, B, C, N);  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemset(C, 0xff, bytes));  // poison: the measured launch must write every element
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  naive_gemm_32x8<<<grid, block>>>(A, B, C, N);  // measured
  CHECK(cudaEventRecord(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(hC, C, bytes, cudaMemcpyDeviceToHost));

  int bad = 0;
  for (int s = 0; s < 16; ++s) {
    const int r = (s * 977 + 3) % N, c = (s * 1013 + 5) % N;
    double ref = 0.0, mag = 0.0;
    for (int k = 0; k < N; ++k) {
      ref += (double)hA[(size_t)r * N + k] * hB[(size_t)k * N + c];
      mag += fabs((double)hA[(size_t)r * N + k] * hB[(size_t)k * N + c]);
    }
    if (!(fabs(ref - hC[(size_t)r * N + c]) <= 1e-4 * mag + 1e-3)) ++bad;
  }
  printf("kernel naive_gemm_32x8 ms %.4f checksum %016llx\n", ms, fnv1a(hC, bytes));
  if (bad) fprintf(stderr, "naive_gemm_32x8: %d of 16 spot checks WRONG\n", bad);

  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  free(hA);
  free(hB);
  free(hC);
  return bad ? 1 : 0;
}
