// y = a * x + y over a long vector with a grid-stride loop: a fixed grid of a few blocks per SM,
// each thread stepping by the total thread count.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>

#define N_ELEMS (1 << 26)
#define THREADS 256
#define BLOCKS_PER_SM 4
#define SM_COUNT 132

__global__ void saxpy_grid_stride(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    y[i] = a * x[i] + y[i];
  }
}

static void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
    exit(1);
  }
}

int main() {
  std::vector<float> x(N_ELEMS), y(N_ELEMS);
  for (int i = 0; i < N_ELEMS; ++i) {
    x[i] = (float)(i % 1000) * 0.001f;
    y[i] = (float)(i % 7);
  }
  float *dx, *dy;
  check(cudaMalloc(&dx, N_ELEMS * sizeof(float)), "cudaMalloc x");
  check(cudaMalloc(&dy, N_ELEMS * sizeof(float)), "cudaMalloc y");
  check(cudaMemcpy(dx, x.data(), N_ELEMS * sizeof(float), cudaMemcpyHostToDevice), "copy x");
  check(cudaMemcpy(dy, y.data(), N_ELEMS * sizeof(float), cudaMemcpyHostToDevice), "copy y");

  const float a = 2.5f;
  saxpy_grid_stride<<<SM_COUNT * BLOCKS_PER_SM, THREADS>>>(N_ELEMS, a, dx, dy);
  check(cudaGetLastError(), "launch");
  std::vector<float> out(N_ELEMS);
  check(cudaMemcpy(out.data(), dy, N_ELEMS * sizeof(float), cudaMemcpyDeviceToHost), "copy back");

  int bad = 0;
  for (int i = 0; i < N_ELEMS; i += 9973)
    if (std::fabs(out[i] - (a * x[i] + y[i])) > 1e-5f) ++bad;
  printf("%s\n", bad ? "FAILED" : "ok");
  cudaFree(dx);
  cudaFree(dy);
  return bad != 0;
}
