// HIP kernels on bfloat16 and fp8 types: a template instantiated at the launch, and a widening sum.
#include <hip/hip_runtime.h>
#include <hip/hip_bfloat16.h>
#include <hip/hip_bf16.h>
#include <hip/hip_fp8.h>

#define N 2048

template <typename T, int TILE>
__global__ void blend(const T* a, const T* b, T* out, T w) {
  const int row = hipBlockIdx_y * TILE + hipThreadIdx_y, col = hipBlockIdx_x * TILE + hipThreadIdx_x;
  out[row * N + col] = a[row * N + col] * w + b[col * N + row];
}

__global__ void widen(const __hip_bfloat16* a, const __hip_fp8_e4m3* q, float* out) {
  const int row = hipBlockIdx_y * 16 + hipThreadIdx_y, col = hipBlockIdx_x * 16 + hipThreadIdx_x;
  out[row * N + col] = __bfloat162float(a[row * N + col]) + float(q[col * N + row]);
}

int main() {
  hip_bfloat16 *a, *b, *out;
  hipMalloc(&a, sizeof(hip_bfloat16) * N * N); hipMalloc(&b, sizeof(hip_bfloat16) * N * N); hipMalloc(&out, sizeof(hip_bfloat16) * N * N);
  hipLaunchKernelGGL(HIP_KERNEL_NAME(blend<hip_bfloat16, 16>), dim3(N / 16, N / 16), dim3(16, 16), 0, 0, a, b, out, hip_bfloat16(0.5f));
  __hip_bfloat16* x; __hip_fp8_e4m3* q; float* y;
  hipMalloc(&x, 2 * N * N); hipMalloc(&q, N * N); hipMalloc(&y, 4 * N * N);
  hipLaunchKernelGGL(widen, dim3(N / 16, N / 16), dim3(16, 16), 0, 0, x, q, y);
  return 0;
}
