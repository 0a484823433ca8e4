// C = A * B^T on a 2D tile grid, and the host code of a real benchmark program around it: aligned
// structs, a stream callback, inline assembly with operand lists, typeid, an array of row pointers,
// an explicit template instantiation and an extended __device__ lambda.  nvcc accepts all of it
// (the lambda needs --extended-lambda).
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstdint>
#include <typeinfo>
#include <vector>
#include <cuda_runtime.h>

#define TILE 16
#define ROWS 8192
#define COLS 8192
#define DEPTH 1024

struct __align__(16) RunStats {
  double seconds;
  float max_error;
  int failures;
};

template <typename T>
struct __align__(8) Range {
  T lo;
  T hi;
};

template struct Range<float>;

// swzc: block swizzles; each is a permutation (of the blocks, or of the tiles a tile loop walks), proven before it was spliced in.
#ifndef SWZC_B659A13D3DE49D04
#define SWZC_B659A13D3DE49D04
// grouped:G: G tile rows per group, walked column by column inside each group (Triton's GROUP_M order).
static __device__ __forceinline__ unsigned swzc_grouped(unsigned p, unsigned m, unsigned n, unsigned g) {
  g = g < m ? g : m;  // a group taller than the grid is the whole grid; keeps g * n within m * n
  const unsigned per_group = g * n;
  const unsigned first_row = p / per_group * g;
  const unsigned rows = m - first_row < g ? m - first_row : g;  // the last group may be shorter
  const unsigned k = p % per_group;
  return (first_row + k % rows) * n + k / rows;
}
#endif
#ifndef SWZC_A610A7C3F4FBCAE9
#define SWZC_A610A7C3F4FBCAE9
// grouped:256 over the 2D grid (rows blockIdx.y, columns blockIdx.x).
static __device__ __forceinline__ uint3 swzc_grouped256_2d(unsigned bx, unsigned by, unsigned bz, unsigned gx, unsigned gy) {
  if ((unsigned long long)gx * gy > 0xffffffffull) return make_uint3(bx, by, bz);  // ids past 32 bits: keep the hardware order
  const unsigned m = gy, n = gx;
  unsigned p = by * n + bx;
  p = swzc_grouped(p, m, n, 256u);
  return make_uint3(p % n, p / n, bz);
}
#endif

__global__ void matmul_abt(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                           int rows, int cols, int depth) {
  const uint3 swzc_block = swzc_grouped256_2d(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y);  // swzc: grouped:256
  const int i = swzc_block.y * TILE + threadIdx.y;
  const int j = swzc_block.x * TILE + threadIdx.x;
  if (i >= rows || j >= cols) return;
  float acc = 0.0f;
  for (int p = 0; p < depth; ++p) acc += A[(size_t)i * depth + p] * B[(size_t)j * depth + p];
  C[(size_t)i * cols + j] = acc;
}

template <typename F>
__global__ void apply_inplace(F f, float* __restrict__ data, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = f(data[i]);
}

static void CUDART_CB on_stream_done(cudaStream_t stream, cudaError_t status, void* user) {
  RunStats* stats = static_cast<RunStats*>(user);
  if (status != cudaSuccess) stats->failures = -1;
  (void)stream;
}

template <typename T>
static inline void keep_alive(T* pointer) {
  asm volatile("" : : "r"(pointer) : "memory");
}

template <typename T>
void report_type(const char* what) {
  printf("%s: elements of type %s, %zu bytes\n", what, typeid(T).name(), sizeof(T));
  if (typeid(T) == typeid(double)) printf("  (double precision: expect a lower throughput)\n");
}

template void report_type<float>(const char* what);

static Range<float> value_range(const float* data, size_t n) {
  Range<float> r{data[0], data[0]};
  for (size_t i = 1; i < n; ++i) {
    r.lo = std::fmin(r.lo, data[i]);
    r.hi = std::fmax(r.hi, data[i]);
  }
  return r;
}

int main() {
  report_type<float>("matmul_abt");
  std::vector<float> a((size_t)ROWS * DEPTH), b((size_t)COLS * DEPTH), c((size_t)ROWS * COLS);
  for (size_t i = 0; i < a.size(); ++i) a[i] = (float)((i * 2654435761u) % 97) / 97.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = (float)((i * 40503u) % 89) / 89.0f;
  float** rows = new float*[ROWS];
  for (int i = 0; i < ROWS; ++i) rows[i] = c.data() + (size_t)i * COLS;

  float *dA, *dB, *dC;
  cudaMalloc(&dA, a.size() * sizeof(float));
  cudaMalloc(&dB, b.size() * sizeof(float));
  cudaMalloc(&dC, c.size() * sizeof(float));
  cudaMemcpy(dA, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dB, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice);
  keep_alive(dC);

  cudaStream_t stream;
  cudaStreamCreate(&stream);
  RunStats stats{0.0, 0.0f, 0};
  dim3 block(TILE, TILE);
  dim3 grid(COLS / TILE, ROWS / TILE);
  matmul_abt<<<grid, block, 0, stream>>>(dA, dB, dC, ROWS, COLS, DEPTH);
  const float factor = 0.5f;
  auto halve = [=] __device__(float x) { return x * factor; };
  apply_inplace<<<(ROWS * COLS + 255) / 256, 256, 0, stream>>>(halve, dC, ROWS * COLS);
  cudaStreamAddCallback(stream, on_stream_done, &stats, 0);
  cudaStreamSynchronize(stream);
  cudaMemcpy(c.data(), dC, c.size() * sizeof(float), cudaMemcpyDeviceToHost);

  for (int s = 0; s < 16; ++s) {
    const int i = (s * 7919) % ROWS, j = (s * 6271) % COLS;
    double ref = 0.0;
    for (int p = 0; p < DEPTH; ++p) ref += (double)a[(size_t)i * DEPTH + p] * b[(size_t)j * DEPTH + p];
    const float err = (float)std::fabs(ref * factor - rows[i][j]);
    stats.max_error = std::fmax(stats.max_error, err);
    if (err > 1e-3f * (float)ref) ++stats.failures;
  }
  const Range<float> r = value_range(c.data(), c.size());
  printf("%s: max error %g, values in [%g, %g]\n", stats.failures ? "FAILED" : "ok", stats.max_error, r.lo, r.hi);
  delete[] rows;
  cudaStreamDestroy(stream);
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dC);
  return stats.failures != 0;
}
