// Where a tiled kernel's global loads go between L1 and L2: the bf16 WMMA GEMM's copy loops alone.
// Each block copies, for k0 = 0, 32, ..., K-32, the 128 x 32 slice of A (row bm) and the 32 x 128 slice of
// B (column bn) of an 8192 x 8192 bf16 matrix into shared memory, as bench/suite/kernels/gemm_bf16_wmma.cu
// does, and sums one shared value per thread so the copies stay.  Block b takes tile (b / 64, b % 64).
//   load_probe MODE BLOCKS      MODE: a16 b16 ab16 (16-byte loads), a4 b4 ab4 (4-byte loads)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

#define DIM 8192
#define BM 128
#define BN 128
#define BK 32
#define THREADS 256

template <bool LOAD_A, bool LOAD_B, int BYTES>
__global__ void load_probe(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                           float* __restrict__ out) {
  __shared__ alignas(16) __nv_bfloat16 As[BM][BK];
  __shared__ alignas(16) __nv_bfloat16 Bs[BK][BN];
  constexpr int E = BYTES / 2;  // elements per load
  const int bm = blockIdx.x / (DIM / BN), bn = blockIdx.x % (DIM / BN);
  float acc = 0.0f;
  for (int k0 = 0; k0 < DIM; k0 += BK) {
    if (LOAD_A)
      for (int i = threadIdx.x; i < BM * BK / E; i += THREADS) {
        const int r = i / (BK / E), c = i % (BK / E);
        const __nv_bfloat16* src = &A[(size_t)(bm * BM + r) * DIM + k0 + c * E];
        if (BYTES == 16) *reinterpret_cast<int4*>(&As[r][c * E]) = *reinterpret_cast<const int4*>(src);
        else *reinterpret_cast<int*>(&As[r][c * E]) = *reinterpret_cast<const int*>(src);
      }
    if (LOAD_B)
      for (int i = threadIdx.x; i < BK * BN / E; i += THREADS) {
        const int r = i / (BN / E), c = i % (BN / E);
        const __nv_bfloat16* src = &B[(size_t)(k0 + r) * DIM + bn * BN + c * E];
        if (BYTES == 16) *reinterpret_cast<int4*>(&Bs[r][c * E]) = *reinterpret_cast<const int4*>(src);
        else *reinterpret_cast<int*>(&Bs[r][c * E]) = *reinterpret_cast<const int*>(src);
      }
    __syncthreads();
    acc += __bfloat162float(As[threadIdx.x % BM][threadIdx.x % BK]) + __bfloat162float(Bs[threadIdx.x % BK][threadIdx.x % BN]);
    __syncthreads();
  }
  out[(size_t)blockIdx.x * THREADS + threadIdx.x] = acc;
}

int main(int argc, char** argv) {
  if (argc != 3) { fprintf(stderr, "usage: load_probe MODE BLOCKS\n"); return 2; }
  const char* mode = argv[1];
  const int blocks = atoi(argv[2]);
  const size_t elems = (size_t)DIM * DIM;
  __nv_bfloat16 *A, *B;
  float* out;
  if (cudaMalloc(&A, elems * 2) || cudaMalloc(&B, elems * 2) || cudaMalloc(&out, (size_t)blocks * THREADS * 4)) return 1;
  cudaMemset(A, 0, elems * 2);
  cudaMemset(B, 0, elems * 2);
  for (int launch = 0; launch < 2; ++launch) {  // ncu profiles the second launch
    if (!strcmp(mode, "a16")) load_probe<true, false, 16><<<blocks, THREADS>>>(A, B, out);
    else if (!strcmp(mode, "b16")) load_probe<false, true, 16><<<blocks, THREADS>>>(A, B, out);
    else if (!strcmp(mode, "ab16")) load_probe<true, true, 16><<<blocks, THREADS>>>(A, B, out);
    else if (!strcmp(mode, "a4")) load_probe<true, false, 4><<<blocks, THREADS>>>(A, B, out);
    else if (!strcmp(mode, "b4")) load_probe<false, true, 4><<<blocks, THREADS>>>(A, B, out);
    else if (!strcmp(mode, "ab4")) load_probe<true, true, 4><<<blocks, THREADS>>>(A, B, out);
    else { fprintf(stderr, "unknown mode %s\n", mode); return 2; }
  }
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) { fprintf(stderr, "%s\n", cudaGetErrorString(err)); return 1; }
  printf("%s %d ok\n", mode, blocks);
  return 0;
}
