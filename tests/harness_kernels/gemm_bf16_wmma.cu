// bf16 tensor-core GEMM: C = A * B (A: M x K, B: K x N, row-major, bf16; C float), one warp per 16 x 16 tile.
#include <cuda_bf16.h>
#include <mma.h>
using namespace nvcuda;

#define M 1024
#define N 1024
#define K 512

__global__ void gemm_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C) {
  const int tile_row = blockIdx.y, tile_col = blockIdx.x;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(a, A + tile_row * 16 * K + k, K);
    wmma::load_matrix_sync(b, B + k * N + tile_col * 16, N);
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::store_matrix_sync(C + tile_row * 16 * N + tile_col * 16, acc, N, wmma::mem_row_major);
}

int main() {
  __nv_bfloat16 *A, *B; float* C;
  cudaMalloc(&A, sizeof(__nv_bfloat16) * M * K); cudaMalloc(&B, sizeof(__nv_bfloat16) * K * N); cudaMalloc(&C, sizeof(float) * M * N);
  gemm_bf16<<<dim3(N / 16, M / 16), 32>>>(A, B, C);
  cudaDeviceSynchronize();
  return 0;
}
