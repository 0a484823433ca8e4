// Naive fp32 GEMM, C = A * B, n x n, one thread per output element on a 2D grid of 16 x 16 tiles.
// The README's example: `swzc rewrite examples/naive_gemm.cu -o patched.cu`.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

#define TILE 16
#define N 4096

__global__ void gemm_naive(const float* A, const float* B, float* C, int n) {
  const int row = blockIdx.y * TILE + threadIdx.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  if (row >= n || col >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}

int main() {
  const size_t bytes = sizeof(float) * N * N;
  float* hA = (float*)malloc(bytes);
  float* hB = (float*)malloc(bytes);
  float* hC = (float*)malloc(bytes);
  srand(1234);
  for (int i = 0; i < N * N; ++i) {
    hA[i] = rand() / (float)RAND_MAX - 0.5f;
    hB[i] = rand() / (float)RAND_MAX - 0.5f;
  }
  float *A, *B, *C;
  cudaMalloc(&A, bytes);
  cudaMalloc(&B, bytes);
  cudaMalloc(&C, bytes);
  cudaMemcpy(A, hA, bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(B, hB, bytes, cudaMemcpyHostToDevice);

  dim3 block(TILE, TILE);
  dim3 grid(N / TILE, N / TILE);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  gemm_naive<<<grid, block>>>(A, B, C, N);  // warm-up
  cudaEventRecord(start);
  gemm_naive<<<grid, block>>>(A, B, C, N);
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, start, stop);
  cudaMemcpy(hC, C, bytes, cudaMemcpyDeviceToHost);

  int bad = 0;
  for (int s = 0; s < 64; ++s) {
    const int r = (s * 977) % N, c = (s * 1013) % N;
    double ref = 0.0;
    for (int k = 0; k < N; ++k) ref += (double)hA[r * N + k] * hB[k * N + c];
    if (fabs(ref - hC[r * N + c]) > 1e-2) ++bad;
  }
  unsigned long long hash = 1469598103934665603ull;  // FNV-1a over every output byte
  const unsigned char* bytesC = (const unsigned char*)hC;
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ bytesC[i]) * 1099511628211ull;
  printf("gemm_naive %d^3: %.3f ms, %s, output hash %016llx\n", N, ms, bad ? "WRONG" : "ok", hash);
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  free(hA);
  free(hB);
  free(hC);
  return bad ? 1 : 0;
}
