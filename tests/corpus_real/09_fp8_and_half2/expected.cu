// Low-precision kernels of an inference step: an fp8 (e4m3) GEMM with per-tensor scales writing
// fp16, then a bias + GELU over the fp16 result two values at a time (half2).
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#define M 8192
#define N 8192
#define K 4096
#define TILE 16
#define ROWS_PER_BLOCK 8
#define PAIRS_PER_BLOCK 128

__global__ void gemm_fp8_e4m3(const __nv_fp8_e4m3* __restrict__ A, const __nv_fp8_e4m3* __restrict__ B,
                              __half* __restrict__ C, float scale_a, float scale_b, int m, int n, int k) {
  const int row = blockIdx.y * TILE + threadIdx.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int p = 0; p < k; ++p) acc += float(A[(size_t)row * k + p]) * float(B[(size_t)p * n + col]);
  C[(size_t)row * n + col] = __float2half(acc * scale_a * scale_b);
}

__device__ __forceinline__ float gelu(float x) {
  return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}

__global__ void bias_gelu_half2(__half2* __restrict__ x, const __half2* __restrict__ bias, int rows, int pairs) {
  const int row = blockIdx.y * ROWS_PER_BLOCK + threadIdx.y;
  const int pair = blockIdx.x * PAIRS_PER_BLOCK + threadIdx.x;
  if (row >= rows || pair >= pairs) return;
  const float2 v = __half22float2(__hadd2(x[(size_t)row * pairs + pair], bias[pair]));
  x[(size_t)row * pairs + pair] = __floats2half2_rn(gelu(v.x), gelu(v.y));
}

int main() {
  std::vector<__nv_fp8_e4m3> a((size_t)M * K), b((size_t)K * N);
  std::vector<float> af(a.size()), bf(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = __nv_fp8_e4m3((float)((i * 2654435761u) % 9) * 0.25f - 1.0f);
    af[i] = float(a[i]);
  }
  for (size_t i = 0; i < b.size(); ++i) {
    b[i] = __nv_fp8_e4m3((float)((i * 40503u) % 5) * 0.5f - 1.0f);
    bf[i] = float(b[i]);
  }
  std::vector<__half2> bias(N / 2);
  for (int j = 0; j < N / 2; ++j) bias[j] = __floats2half2_rn(0.01f * (j % 5), -0.01f * (j % 3));

  __nv_fp8_e4m3 *dA, *dB;
  __half* dC;
  __half2* dBias;
  cudaMalloc(&dA, a.size());
  cudaMalloc(&dB, b.size());
  cudaMalloc(&dC, (size_t)M * N * sizeof(__half));
  cudaMalloc(&dBias, bias.size() * sizeof(__half2));
  cudaMemcpy(dA, a.data(), a.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dB, b.data(), b.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dBias, bias.data(), bias.size() * sizeof(__half2), cudaMemcpyHostToDevice);

  const float scale_a = 0.5f, scale_b = 0.25f;
  gemm_fp8_e4m3<<<dim3(N / TILE, M / TILE), dim3(TILE, TILE)>>>(dA, dB, dC, scale_a, scale_b, M, N, K);
  bias_gelu_half2<<<dim3(N / 2 / PAIRS_PER_BLOCK, M / ROWS_PER_BLOCK), dim3(PAIRS_PER_BLOCK, ROWS_PER_BLOCK)>>>(
      reinterpret_cast<__half2*>(dC), dBias, M, N / 2);

  std::vector<__half> c((size_t)M * N);
  if (cudaMemcpy(c.data(), dC, c.size() * sizeof(__half), cudaMemcpyDeviceToHost) != cudaSuccess) {
    fprintf(stderr, "kernel or copy failed\n");
    return 1;
  }
  int bad = 0;
  for (int s = 0; s < 16; ++s) {
    const int i = (s * 7919) % M, j = (s * 104729) % N;
    double acc = 0.0;
    for (int p = 0; p < K; ++p) acc += (double)af[(size_t)i * K + p] * bf[(size_t)p * N + j];
    float v = __half2float(__float2half((float)acc * scale_a * scale_b));
    const float2 bj = __half22float2(bias[j / 2]);
    v += (j % 2) ? bj.y : bj.x;
    const float ref = 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
    if (std::fabs(ref - __half2float(c[(size_t)i * N + j])) > 0.05f * (1.0f + std::fabs(ref))) ++bad;
  }
  printf("%s\n", bad ? "FAILED" : "ok");
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dC);
  cudaFree(dBias);
  return bad != 0;
}
