// The footprint of SwizzlePerf's default GEMM (fp16, 8192^3, 256 x 256 output tiles, K in steps of 64), as
// a plain CUDA kernel for swzc's L2 model; it is analysed, not run.
#include <cuda_fp16.h>

#define M 8192
#define N 8192
#define K 8192
#define BM 256
#define BN 256
#define BK 64

__global__ void gemm_fp16(const half* A, const half* B, half* C) {
  const int row0 = blockIdx.y * BM;
  const int col0 = blockIdx.x * BN;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BK)
    for (int r = threadIdx.y; r < BM; r += blockDim.y)
      for (int kk = threadIdx.x; kk < BK; kk += blockDim.x)
        acc += __half2float(A[(row0 + r) * K + k0 + kk]) * __half2float(B[(k0 + kk) * N + col0 + r]);
  C[(row0 + threadIdx.y) * N + col0 + threadIdx.x] = __float2half(acc);
}

int main() {
  half *A = 0, *B = 0, *C = 0;
  gemm_fp16<<<dim3(N / BN, M / BM), dim3(64, 4)>>>(A, B, C);
  return 0;
}
