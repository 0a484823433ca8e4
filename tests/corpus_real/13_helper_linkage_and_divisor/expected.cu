// Two tiled kernels of an image pipeline.  The first finds its tile through a __device__ helper with
// external linkage (another translation unit may call tile_origin too).  The second decodes a 1D grid
// into tiles, with the tile count read through a call that also counts the reads.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define TILE 32
#define WIDTH 8192
#define HEIGHT 8192

struct PipelineParams {
  int tiles_x;
  int tiles_y;
  unsigned int* param_reads;
};

__device__ int2 tile_origin(int tile_w, int tile_h) {
  return make_int2(blockIdx.x * tile_w, blockIdx.y * tile_h);
}

__global__ void blur_rows(const float* __restrict__ in, float* __restrict__ out, int width, int height) {
  const int2 origin = tile_origin(TILE, TILE);
  const int x = origin.x + threadIdx.x;
  const int y = origin.y + threadIdx.y;
  if (x >= width || y >= height) return;
  const int xl = x > 0 ? x - 1 : x, xr = x < width - 1 ? x + 1 : x;
  out[(size_t)y * width + x] = 0.25f * in[(size_t)y * width + xl] + 0.5f * in[(size_t)y * width + x] +
                               0.25f * in[(size_t)y * width + xr];
}

__device__ int read_tiles_x(const PipelineParams* p) {
  atomicAdd(p->param_reads, 1u);
  return p->tiles_x;
}

__global__ void downsample_tiles(const float* __restrict__ in, float* __restrict__ out, const PipelineParams* params,
                                 int width) {
  const int pid = blockIdx.x;
  const int tiles_x = read_tiles_x(params);
  const int ty = pid / tiles_x;
  const int tx = pid % tiles_x;
  const int x = tx * TILE + threadIdx.x;
  const int y = ty * TILE + threadIdx.y;
  if (x % 2 || y % 2) return;
  const float s = in[(size_t)y * width + x] + in[(size_t)y * width + x + 1] + in[(size_t)(y + 1) * width + x] +
                  in[(size_t)(y + 1) * width + x + 1];
  out[(size_t)(y / 2) * (width / 2) + x / 2] = 0.25f * s;
}

int main() {
  std::vector<float> img((size_t)WIDTH * HEIGHT);
  for (size_t i = 0; i < img.size(); ++i) img[i] = (float)((i * 2654435761u) % 256);
  float *d_in, *d_blur, *d_small;
  PipelineParams* d_params;
  unsigned int* d_reads;
  cudaMalloc(&d_in, img.size() * sizeof(float));
  cudaMalloc(&d_blur, img.size() * sizeof(float));
  cudaMalloc(&d_small, img.size() / 4 * sizeof(float));
  cudaMalloc(&d_params, sizeof(PipelineParams));
  cudaMalloc(&d_reads, sizeof(unsigned int));
  cudaMemset(d_reads, 0, sizeof(unsigned int));
  cudaMemcpy(d_in, img.data(), img.size() * sizeof(float), cudaMemcpyHostToDevice);
  const PipelineParams params{WIDTH / TILE, HEIGHT / TILE, d_reads};
  cudaMemcpy(d_params, &params, sizeof(params), cudaMemcpyHostToDevice);

  blur_rows<<<dim3(WIDTH / TILE, HEIGHT / TILE), dim3(TILE, TILE)>>>(d_in, d_blur, WIDTH, HEIGHT);
  downsample_tiles<<<(WIDTH / TILE) * (HEIGHT / TILE), dim3(TILE, TILE)>>>(d_blur, d_small, d_params, WIDTH);

  std::vector<float> small(img.size() / 4);
  unsigned int reads = 0;
  cudaMemcpy(small.data(), d_small, small.size() * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(&reads, d_reads, sizeof(reads), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int s = 0; s < 64; ++s) {
    const int x = 2 * ((s * 977) % (WIDTH / 2 - 1)) + 2, y = 2 * ((s * 613) % (HEIGHT / 2 - 1));
    float sum = 0.0f;
    for (int dy = 0; dy < 2; ++dy)
      for (int dx = 0; dx < 2; ++dx) {
        const int xx = x + dx, yy = y + dy;
        sum += 0.25f * img[(size_t)yy * WIDTH + xx - 1] + 0.5f * img[(size_t)yy * WIDTH + xx] +
               0.25f * img[(size_t)yy * WIDTH + (xx < WIDTH - 1 ? xx + 1 : xx)];
      }
    if (std::abs(0.25f * sum - small[(size_t)(y / 2) * (WIDTH / 2) + x / 2]) > 1e-3f) ++bad;
  }
  const unsigned expected_reads = (unsigned)WIDTH * HEIGHT;
  if (reads != expected_reads) ++bad;
  printf("%s (%u parameter reads)\n", bad ? "FAILED" : "ok", reads);
  cudaFree(d_in);
  cudaFree(d_blur);
  cudaFree(d_small);
  cudaFree(d_params);
  cudaFree(d_reads);
  return bad != 0;
}
