/*
 * C = alpha * A * B + beta * C, one thread per element of C, in the layout of the classic
 * polyhedral benchmark suites: sizes in a header, the timing helpers pulled in by an #include on
 * the last line, which has no newline after it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda_runtime.h>

#include "gemm.cuh"

double bench_now_seconds(void);
void bench_report(const char* name, double seconds);

void init_arrays(DATA_TYPE* A, DATA_TYPE* B, DATA_TYPE* C)
{
  for (int i = 0; i < SIZE_NI; i++)
    for (int k = 0; k < SIZE_NK; k++)
      A[i * SIZE_NK + k] = ((DATA_TYPE)i * k) / SIZE_NI;
  for (int k = 0; k < SIZE_NK; k++)
    for (int j = 0; j < SIZE_NJ; j++)
      B[k * SIZE_NJ + j] = ((DATA_TYPE)k * j) / SIZE_NJ;
  for (int i = 0; i < SIZE_NI; i++)
    for (int j = 0; j < SIZE_NJ; j++)
      C[i * SIZE_NJ + j] = ((DATA_TYPE)i * j) / SIZE_NI;
}

// swzc: block swizzles; each is a permutation (of the blocks, or of the tiles a tile loop walks), proven before it was spliced in.
#ifndef SWZC_B659A13D3DE49D04
#define SWZC_B659A13D3DE49D04
// grouped:G: G tile rows per group, walked column by column inside each group (Triton's GROUP_M order).
static __device__ __forceinline__ unsigned swzc_grouped(unsigned p, unsigned m, unsigned n, unsigned g) {
  g = g < m ? g : m;  // a group taller than the grid is the whole grid; keeps g * n within m * n
  const unsigned per_group = g * n;
  const unsigned first_row = p / per_group * g;
  const unsigned rows = m - first_row < g ? m - first_row : g;  // the last group may be shorter
  const unsigned k = p % per_group;
  return (first_row + k % rows) * n + k / rows;
}
#endif
#ifndef SWZC_095C50972B7EFA96
#define SWZC_095C50972B7EFA96
// grouped:128 over the 2D grid (rows blockIdx.y, columns blockIdx.x).
static __device__ __forceinline__ uint3 swzc_grouped128_2d(unsigned bx, unsigned by, unsigned bz, unsigned gx, unsigned gy) {
  if ((unsigned long long)gx * gy > 0xffffffffull) return make_uint3(bx, by, bz);  // ids past 32 bits: keep the hardware order
  const unsigned m = gy, n = gx;
  unsigned p = by * n + bx;
  p = swzc_grouped(p, m, n, 128u);
  return make_uint3(p % n, p / n, bz);
}
#endif

__global__ void gemm_kernel(const DATA_TYPE* a, const DATA_TYPE* b, DATA_TYPE* c)
{
  const uint3 swzc_block = swzc_grouped128_2d(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y);  // swzc: grouped:128
  int j = swzc_block.x * blockDim.x + threadIdx.x;
  int i = swzc_block.y * blockDim.y + threadIdx.y;

  if ((i < SIZE_NI) && (j < SIZE_NJ))
  {
    DATA_TYPE acc = c[i * SIZE_NJ + j] * BETA;
    for (int k = 0; k < SIZE_NK; k++)
    {
      acc += ALPHA * a[i * SIZE_NK + k] * b[k * SIZE_NJ + j];
    }
    c[i * SIZE_NJ + j] = acc;
  }
}

int check_sample(const DATA_TYPE* A, const DATA_TYPE* B, const DATA_TYPE* C0, const DATA_TYPE* C)
{
  int failures = 0;
  for (int s = 0; s < 64; s++)
  {
    int i = (s * 977) % SIZE_NI, j = (s * 613) % SIZE_NJ;
    double ref = C0[i * SIZE_NJ + j] * BETA;
    for (int k = 0; k < SIZE_NK; k++)
      ref += ALPHA * A[i * SIZE_NK + k] * B[k * SIZE_NJ + j];
    if (fabs(ref - C[i * SIZE_NJ + j]) > 1e-3 * fabs(ref) + 1e-3)
      failures++;
  }
  return failures;
}

int main(int argc, char** argv)
{
  size_t bytes_a = sizeof(DATA_TYPE) * SIZE_NI * SIZE_NK;
  size_t bytes_b = sizeof(DATA_TYPE) * SIZE_NK * SIZE_NJ;
  size_t bytes_c = sizeof(DATA_TYPE) * SIZE_NI * SIZE_NJ;
  DATA_TYPE* A = (DATA_TYPE*)malloc(bytes_a);
  DATA_TYPE* B = (DATA_TYPE*)malloc(bytes_b);
  DATA_TYPE* C = (DATA_TYPE*)malloc(bytes_c);
  DATA_TYPE* C_gpu = (DATA_TYPE*)malloc(bytes_c);
  init_arrays(A, B, C);

  DATA_TYPE *A_d, *B_d, *C_d;
  cudaMalloc((void**)&A_d, bytes_a);
  cudaMalloc((void**)&B_d, bytes_b);
  cudaMalloc((void**)&C_d, bytes_c);
  cudaMemcpy(A_d, A, bytes_a, cudaMemcpyHostToDevice);
  cudaMemcpy(B_d, B, bytes_b, cudaMemcpyHostToDevice);
  cudaMemcpy(C_d, C, bytes_c, cudaMemcpyHostToDevice);

  dim3 block(TILE_X, TILE_Y);
  dim3 grid((size_t)ceil(((float)SIZE_NJ) / ((float)block.x)), (size_t)ceil(((float)SIZE_NI) / ((float)block.y)));

  double t0 = bench_now_seconds();
  gemm_kernel<<<grid, block>>>(A_d, B_d, C_d);
  cudaDeviceSynchronize();
  bench_report("gemm_kernel", bench_now_seconds() - t0);

  cudaMemcpy(C_gpu, C_d, bytes_c, cudaMemcpyDeviceToHost);
  int failures = check_sample(A, B, C, C_gpu);
  printf("%s (%d of 64 samples differ)\n", failures ? "FAILED" : "ok", failures);

  cudaFree(A_d);
  cudaFree(B_d);
  cudaFree(C_d);
  free(A);
  free(B);
  free(C);
  free(C_gpu);
  return failures != 0;
}

#include <timing_util.c>