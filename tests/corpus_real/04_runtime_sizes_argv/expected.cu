// A 2D convolution with a 5 x 5 filter whose image size comes from the command line:
//   ./conv2d WIDTH HEIGHT
// The launch grid is known only at run time.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>

#define RADIUS 2
#define BLOCK_X 32
#define BLOCK_Y 8

__constant__ float c_filter[(2 * RADIUS + 1) * (2 * RADIUS + 1)];

__global__ void conv2d(const float* __restrict__ in, float* __restrict__ out, int width, int height) {
  const int x = blockIdx.x * BLOCK_X + threadIdx.x;
  const int y = blockIdx.y * BLOCK_Y + threadIdx.y;
  if (x >= width || y >= height) return;
  float acc = 0.0f;
  for (int dy = -RADIUS; dy <= RADIUS; ++dy) {
    const int yy = min(max(y + dy, 0), height - 1);
    for (int dx = -RADIUS; dx <= RADIUS; ++dx) {
      const int xx = min(max(x + dx, 0), width - 1);
      acc += c_filter[(dy + RADIUS) * (2 * RADIUS + 1) + dx + RADIUS] * in[(size_t)yy * width + xx];
    }
  }
  out[(size_t)y * width + x] = acc;
}

static float reference_at(const std::vector<float>& img, const float* filter, int width, int height, int x, int y) {
  float acc = 0.0f;
  for (int dy = -RADIUS; dy <= RADIUS; ++dy)
    for (int dx = -RADIUS; dx <= RADIUS; ++dx) {
      const int yy = std::min(std::max(y + dy, 0), height - 1);
      const int xx = std::min(std::max(x + dx, 0), width - 1);
      acc += filter[(dy + RADIUS) * (2 * RADIUS + 1) + dx + RADIUS] * img[(size_t)yy * width + xx];
    }
  return acc;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s WIDTH HEIGHT\n", argv[0]);
    return 2;
  }
  const int width = atoi(argv[1]);
  const int height = atoi(argv[2]);
  std::vector<float> img((size_t)width * height), out(img.size());
  for (size_t i = 0; i < img.size(); ++i) img[i] = (float)((i * 2246822519u) % 4096) / 4096.0f;
  float filter[(2 * RADIUS + 1) * (2 * RADIUS + 1)];
  for (int i = 0; i < (2 * RADIUS + 1) * (2 * RADIUS + 1); ++i) filter[i] = 1.0f / ((2 * RADIUS + 1) * (2 * RADIUS + 1));
  cudaMemcpyToSymbol(c_filter, filter, sizeof(filter));

  float *d_in, *d_out;
  cudaMalloc(&d_in, img.size() * sizeof(float));
  cudaMalloc(&d_out, img.size() * sizeof(float));
  cudaMemcpy(d_in, img.data(), img.size() * sizeof(float), cudaMemcpyHostToDevice);

  dim3 block(BLOCK_X, BLOCK_Y);
  dim3 grid((width + BLOCK_X - 1) / BLOCK_X, (height + BLOCK_Y - 1) / BLOCK_Y);
  conv2d<<<grid, block>>>(d_in, d_out, width, height);
  cudaMemcpy(out.data(), d_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost);

  int bad = 0;
  for (int s = 0; s < 100; ++s) {
    const int x = (s * 7919) % width, y = (s * 6271) % height;
    if (std::fabs(out[(size_t)y * width + x] - reference_at(img, filter, width, height, x, y)) > 1e-4f) ++bad;
  }
  printf("%s\n", bad ? "FAILED" : "ok");
  cudaFree(d_in);
  cudaFree(d_out);
  return bad != 0;
}
