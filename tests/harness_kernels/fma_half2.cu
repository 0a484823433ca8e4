// half2 kernel: out = a * b + c in pairs, over a 2D grid of 16 x 16 tiles of half2 elements.
#include <cuda_fp16.h>

#define W 2048   // half2 elements per row
#define H 2048

__global__ void fma_half2(const half2* a, const half2* b, half2* out, half2 c) {
  const int row = blockIdx.y * 16 + threadIdx.y;
  const int col = blockIdx.x * 16 + threadIdx.x;
  const int i = row * W + col;
  out[i] = __hfma2(a[i], b[col * H + row], c);
}

int main() {
  half2 *a, *b, *out;
  cudaMalloc(&a, sizeof(half2) * W * H); cudaMalloc(&b, sizeof(half2) * W * H); cudaMalloc(&out, sizeof(half2) * W * H);
  fma_half2<<<dim3(W / 16, H / 16), dim3(16, 16)>>>(a, b, out, __floats2half2_rn(0.5f, -0.25f));
  cudaDeviceSynchronize();
  return 0;
}
