// GEMM on a 1D grid decoded into 64 x 64 output tiles (a Triton-style program id), C = A * B, n x n.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define BM 64
#define BN 64
#define CDIV(a, b) (((a) + (b) - 1) / (b))

__global__ void gemm_decoded(const float* A, const float* B, float* C, int n) {
  const int pid = blockIdx.x;
  const int tiles_n = CDIV(n, BN);
  const int tile_m = pid / tiles_n;
  const int tile_n = pid % tiles_n;
  const int col = tile_n * BN + threadIdx.x;
  for (int r = threadIdx.y; r < BM; r += blockDim.y) {
    const int row = tile_m * BM + r;
    if (row < n && col < n) {
      float acc = 0.0f;
      for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
      C[row * n + col] = acc;
    }
  }
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 3000;  // not a multiple of the tile: a ragged last tile row
  const size_t bytes = sizeof(float) * n * n;
  float* hA = (float*)malloc(bytes);
  float* hB = (float*)malloc(bytes);
  float* hC = (float*)malloc(bytes);
  srand(99);
  for (int i = 0; i < n * n; ++i) {
    hA[i] = rand() / (float)RAND_MAX - 0.5f;
    hB[i] = rand() / (float)RAND_MAX - 0.5f;
  }
  float *A, *B, *C;
  cudaMalloc(&A, bytes);
  cudaMalloc(&B, bytes);
  cudaMalloc(&C, bytes);
  cudaMemcpy(A, hA, bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(B, hB, bytes, cudaMemcpyHostToDevice);
  cudaMemset(C, 0xff, bytes);  // poison: every element must be written
  gemm_decoded<<<CDIV(n, BM) * CDIV(n, BN), dim3(BN, 4)>>>(A, B, C, n);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    printf("launch failed\n");
    return 1;
  }
  cudaMemcpy(hC, C, bytes, cudaMemcpyDeviceToHost);
  unsigned long long hash = 1469598103934665603ull;  // FNV-1a over every output byte
  const unsigned char* bytesC = (const unsigned char*)hC;
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ bytesC[i]) * 1099511628211ull;
  printf("gemm_decoded n=%d: output hash %016llx\n", n, hash);
  return 0;
}
