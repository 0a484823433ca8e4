// Template kernels: a tiled transpose instantiated at the launch, and a scaled copy whose type is deduced.
#define SIZE 4096

template <typename T, int TILE>
__global__ void transpose(const T* in, T* out, int n) {
  __shared__ T tile[TILE][TILE + 1];
  const int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += 8) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * n + x];
  __syncthreads();
  const int tx = blockIdx.y * TILE + threadIdx.x, ty = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += 8) out[(ty + j) * n + tx] = tile[threadIdx.x][threadIdx.y + j];
}

template <typename T>
__global__ void scaled(const T* in, T* out, T alpha, int n) {
  const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  out[row * n + col] = alpha * in[col * n + row];
}

int main() {
  double *din, *dout;
  cudaMalloc(&din, sizeof(double) * SIZE * SIZE); cudaMalloc(&dout, sizeof(double) * SIZE * SIZE);
  transpose<float, 32><<<dim3(SIZE / 32, SIZE / 32), dim3(32, 8)>>>((float*)din, (float*)dout, SIZE);
  scaled<<<dim3(SIZE / 16, SIZE / 16), dim3(16, 16)>>>(din, dout, 2.0, SIZE);
  cudaDeviceSynchronize();
  return 0;
}
