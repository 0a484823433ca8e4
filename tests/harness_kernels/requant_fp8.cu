// fp8 kernel: dequantise e4m3 tiles with a per-row scale, requantise to e5m2, 2D grid of 32 x 8 tiles.
#include <cuda_fp8.h>

#define COLS 4096
#define ROWS 4096

__global__ void requant(const __nv_fp8_e4m3* in, const float* scale, __nv_fp8_e5m2* out, float bias) {
  const int row = blockIdx.y * 8 + threadIdx.y;
  const int col = blockIdx.x * 32 + threadIdx.x;
  const float v = float(in[row * COLS + col]) * scale[row] + bias;
  out[col * ROWS + row] = __nv_fp8_e5m2(v);
}

int main() {
  __nv_fp8_e4m3* in; float* scale; __nv_fp8_e5m2* out;
  cudaMalloc(&in, ROWS * COLS); cudaMalloc(&scale, sizeof(float) * ROWS); cudaMalloc(&out, ROWS * COLS);
  requant<<<dim3(COLS / 32, ROWS / 8), dim3(32, 8)>>>(in, scale, out, 0.125f);
  cudaDeviceSynchronize();
  return 0;
}
