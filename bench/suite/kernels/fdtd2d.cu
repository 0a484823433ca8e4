// SwizzlePerf suite: one FDTD-2D time step (ey, ex, then hz update kernels) on 8192 x 8192 fp32 fields, 2D grid of 32 x 8 blocks.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <cuda_runtime.h>

#define NX 8192
#define NY 8192
#define BX 32
#define BY 8
#define FICT 0.25f
#define SEED 0x5EEDA009ull

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t err_ = (call);                                                               \
    if (err_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d: CUDA error: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      exit(2);                                                                               \
    }                                                                                        \
  } while (0)

// splitmix64: a small, fixed-seed host generator.
static uint64_t rng_state = SEED;
static uint64_t next_u64() {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)(next_u64() >> 40) * (1.0f / 16777216.0f); }

static uint64_t fnv1a(const void* data, size_t bytes, uint64_t h) {
  const unsigned char* p = (const unsigned char*)data;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// The step is out of place (fields *0 in, *1 out) so that it can be repeated and its outputs poisoned.
// Row i runs along blockIdx.y, column j along blockIdx.x; fields are NX rows of NY floats.
__global__ void fdtd_ey(const float* __restrict__ ey0, const float* __restrict__ hz0, float* __restrict__ ey1,
                        float fict, int nx, int ny) {
  const int j = blockIdx.x * BX + threadIdx.x;
  const int i = blockIdx.y * BY + threadIdx.y;
  if (i >= nx || j >= ny) return;
  const int id = i * ny + j;
  ey1[id] = (i == 0) ? fict : ey0[id] - 0.5f * (hz0[id] - hz0[id - ny]);
}

__global__ void fdtd_ex(const float* __restrict__ ex0, const float* __restrict__ hz0, float* __restrict__ ex1, int nx, int ny) {
  const int j = blockIdx.x * BX + threadIdx.x;
  const int i = blockIdx.y * BY + threadIdx.y;
  if (i >= nx || j >= ny) return;
  const int id = i * ny + j;
  ex1[id] = (j == 0) ? ex0[id] : ex0[id] - 0.5f * (hz0[id] - hz0[id - 1]);
}

__global__ void fdtd_hz(const float* __restrict__ ex1, const float* __restrict__ ey1, const float* __restrict__ hz0,
                        float* __restrict__ hz1, int nx, int ny) {
  const int j = blockIdx.x * BX + threadIdx.x;
  const int i = blockIdx.y * BY + threadIdx.y;
  if (i >= nx || j >= ny) return;
  const int id = i * ny + j;
  hz1[id] = (i == nx - 1 || j == ny - 1) ? hz0[id]
                                         : hz0[id] - 0.7f * (ex1[id + 1] - ex1[id] + ey1[id + ny] - ey1[id]);
}

int main() {
  const size_t elems = (size_t)NX * NY;
  const size_t bytes = elems * sizeof(float);
  float* hex0 = (float*)malloc(bytes);
  float* hey0 = (float*)malloc(bytes);
  float* hhz0 = (float*)malloc(bytes);
  float* hex1 = (float*)malloc(bytes);
  float* hey1 = (float*)malloc(bytes);
  float* hhz1 = (float*)malloc(bytes);
  if (!hex0 || !hey0 || !hhz0 || !hex1 || !hey1 || !hhz1) { fprintf(stderr, "host allocation failed\n"); return 2; }
  for (size_t i = 0; i < elems; ++i) hex0[i] = uniform(-1.0f, 1.0f);
  for (size_t i = 0; i < elems; ++i) hey0[i] = uniform(-1.0f, 1.0f);
  for (size_t i = 0; i < elems; ++i) hhz0[i] = uniform(-1.0f, 1.0f);

  float *dex0, *dey0, *dhz0, *dex1, *dey1, *dhz1;
  CHECK(cudaMalloc(&dex0, bytes));
  CHECK(cudaMalloc(&dey0, bytes));
  CHECK(cudaMalloc(&dhz0, bytes));
  CHECK(cudaMalloc(&dex1, bytes));
  CHECK(cudaMalloc(&dey1, bytes));
  CHECK(cudaMalloc(&dhz1, bytes));
  CHECK(cudaMemcpy(dex0, hex0, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dey0, hey0, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dhz0, hhz0, bytes, cudaMemcpyHostToDevice));

  dim3 block(BX, BY);
  dim3 grid((NY + BX - 1) / BX, (NX + BY - 1) / BY);
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  // Warm-up step.
  CHECK(cudaMemset(dex1, 0xff, bytes));
  CHECK(cudaMemset(dey1, 0xff, bytes));
  CHECK(cudaMemset(dhz1, 0xff, bytes));
  fdtd_ey<<<grid, block>>>(dey0, dhz0, dey1, FICT, NX, NY);
  fdtd_ex<<<grid, block>>>(dex0, dhz0, dex1, NX, NY);
  fdtd_hz<<<grid, block>>>(dex1, dey1, dhz0, dhz1, NX, NY);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  // Measured step: the three launches together.
  CHECK(cudaMemset(dex1, 0xff, bytes));
  CHECK(cudaMemset(dey1, 0xff, bytes));
  CHECK(cudaMemset(dhz1, 0xff, bytes));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventRecord(start));
  fdtd_ey<<<grid, block>>>(dey0, dhz0, dey1, FICT, NX, NY);
  fdtd_ex<<<grid, block>>>(dex0, dhz0, dex1, NX, NY);
  fdtd_hz<<<grid, block>>>(dex1, dey1, dhz0, dhz1, NX, NY);
  CHECK(cudaEventRecord(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(hex1, dex1, bytes, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hey1, dey1, bytes, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hhz1, dhz1, bytes, cudaMemcpyDeviceToHost));

  // Check every cell of all three fields (hz from the device's ex1/ey1, so errors do not compound).
  size_t bad = 0;
  for (int i = 0; i < NX; ++i)
    for (int j = 0; j < NY; ++j) {
      const size_t id = (size_t)i * NY + j;
      const double ey = i == 0 ? FICT : hey0[id] - 0.5 * ((double)hhz0[id] - hhz0[id - NY]);
      const double ex = j == 0 ? hex0[id] : hex0[id] - 0.5 * ((double)hhz0[id] - hhz0[id - 1]);
      const double hz = (i == NX - 1 || j == NY - 1)
                            ? hhz0[id]
                            : hhz0[id] - 0.7 * ((double)hex1[id + 1] - hex1[id] + (double)hey1[id + NY] - hey1[id]);
      if (!(fabs(hey1[id] - ey) <= 1e-5 * (1.0 + fabs(ey)) && fabs(hex1[id] - ex) <= 1e-5 * (1.0 + fabs(ex)) &&
            fabs(hhz1[id] - hz) <= 1e-5 * (1.0 + fabs(hz)))) {
        if (bad < 5)
          fprintf(stderr, "fdtd2d: cell (%d,%d) ey %g ex %g hz %g, expected %g %g %g\n", i, j, hey1[id], hex1[id], hhz1[id], ey, ex, hz);
        ++bad;
      }
    }

  uint64_t sum = fnv1a(hey1, bytes, 14695981039346656037ull);
  sum = fnv1a(hex1, bytes, sum);
  sum = fnv1a(hhz1, bytes, sum);
  printf("kernel fdtd2d ms %.4f checksum %016llx\n", ms, (unsigned long long)sum);
  CHECK(cudaFree(dex0));
  CHECK(cudaFree(dey0));
  CHECK(cudaFree(dhz0));
  CHECK(cudaFree(dex1));
  CHECK(cudaFree(dey1));
  CHECK(cudaFree(dhz1));
  free(hex0);
  free(hey0);
  free(hhz0);
  free(hex1);
  free(hey1);
  free(hhz1);
  if (bad) { fprintf(stderr, "fdtd2d: %zu cells wrong\n", bad); return 1; }
  return 0;
}
