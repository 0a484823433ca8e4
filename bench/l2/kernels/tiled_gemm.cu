// Register-blocked fp32 GEMM staged through shared memory, C = A * B, N x N row-major. Each block of
// 16 x 16 threads computes a 64 x 64 tile of C (4 x 4 outputs per thread, 16 apart), looping over K in
// steps of 16: each step copies the 64 x 16 slice of A (tile row blockIdx.y) and the 16 x 64 slice of B
// (tile column blockIdx.x) into shared memory, four loads per thread each, between two barriers.
// 3 x 64 MB against a 60 MB L2.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

#define N 4096
#define BT 64
#define BK 16

#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t err_ = (call);                                                       \
    if (err_ != cudaSuccess) {                                                       \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      exit(2);                                                                       \
    }                                                                                \
  } while (0)

__global__ void tiled_gemm(const float* A, const float* B, float* C, int n) {
  __shared__ float As[BT][BK + 1];
  __shared__ float Bs[BK][BT];
  const int tx = threadIdx.x, ty = threadIdx.y, t = ty * 16 + tx;
  const int row0 = blockIdx.y * BT, col0 = blockIdx.x * BT;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < n; k0 += BK) {
    for (int i = t; i < BT * BK; i += 256) {
      As[i / BK][i % BK] = A[(row0 + i / BK) * n + k0 + i % BK];
      Bs[i / BT][i % BT] = B[(k0 + i / BT) * n + col0 + i % BT];
    }
    __syncthreads();
    for (int k = 0; k < BK; ++k)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] += As[ty + 16 * i][k] * Bs[k][tx + 16 * j];
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) C[(row0 + ty + 16 * i) * n + col0 + tx + 16 * j] = acc[i][j];
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

  dim3 block(16, 16);
  dim3 grid(N / BT, N / BT);
  tiled_gemm<<<grid, block>>>(A, B, C, N);  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemset(C, 0xff, bytes));  // poison: the measured launch must write every element
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  tiled_gemm<<<grid, block>>>(A, B, C, N);  // measured
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
  printf("kernel tiled_gemm ms %.4f checksum %016llx\n", ms, fnv1a(hC, bytes));
  if (bad) fprintf(stderr, "tiled_gemm: %d of 16 spot checks WRONG\n", bad);

  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  free(hA);
  free(hB);
  free(hC);
  return bad ? 1 : 0;
}
