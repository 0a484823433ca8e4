// A separable 2D filter's vertical pass over 32 x 8 tiles, with the launch wrapped in timing and
// error-check macros that expand to whole statements and are written without a trailing ';'.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>

#include "timing.h"

#define WIDTH 16384
#define HEIGHT 16384
#define TAPS 9
#define BX 32
#define BY 8

__constant__ float c_taps[TAPS];

__global__ void filter_columns(const float* __restrict__ in, float* __restrict__ out, int width, int height) {
  const int x = blockIdx.x * BX + threadIdx.x;
  const int y = blockIdx.y * BY + threadIdx.y;
  if (x >= width || y < TAPS / 2 || y >= height - TAPS / 2) return;
  float acc = 0.0f;
  for (int t = 0; t < TAPS; ++t) acc += c_taps[t] * in[(size_t)(y + t - TAPS / 2) * width + x];
  out[(size_t)y * width + x] = acc;
}

static void run_filter(const float* d_in, float* d_out) {
  dim3 block(BX, BY);
  dim3 grid(WIDTH / BX, HEIGHT / BY);
  TIMED_BEGIN
  filter_columns<<<grid, block>>>(d_in, d_out, WIDTH, HEIGHT);
  TIMED_END("filter_columns")
  CHECK_LAST_ERROR("filter_columns")
}

int main() {
  std::vector<float> img((size_t)WIDTH * HEIGHT), out(img.size());
  for (size_t i = 0; i < img.size(); ++i) img[i] = (float)((i * 2654435761u) % 255);
  float taps[TAPS];
  for (int t = 0; t < TAPS; ++t) taps[t] = 1.0f / TAPS;
  cudaMemcpyToSymbol(c_taps, taps, sizeof(taps));

  float *d_in, *d_out;
  cudaMalloc(&d_in, img.size() * sizeof(float));
  cudaMalloc(&d_out, img.size() * sizeof(float));
  cudaMemcpy(d_in, img.data(), img.size() * sizeof(float), cudaMemcpyHostToDevice);
  run_filter(d_in, d_out);
  cudaMemcpy(out.data(), d_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost);

  int bad = 0;
  for (int s = 0; s < 64; ++s) {
    const int x = (s * 977) % WIDTH, y = TAPS + (s * 613) % (HEIGHT - 2 * TAPS);
    float ref = 0.0f;
    for (int t = 0; t < TAPS; ++t) ref += taps[t] * img[(size_t)(y + t - TAPS / 2) * WIDTH + x];
    if (std::fabs(ref - out[(size_t)y * WIDTH + x]) > 1e-3f) ++bad;
  }
  printf("%s\n", bad ? "FAILED" : "ok");
  cudaFree(d_in);
  cudaFree(d_out);
  return bad != 0;
}
