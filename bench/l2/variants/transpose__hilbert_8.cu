// Out-of-place fp32 transpose of a DIM x DIM row-major matrix through a 32 x 33 shared-memory tile
// (padded against bank conflicts). 32 x 8 threads per block, each thread moves 4 elements; the block at
// (blockIdx.y, blockIdx.x) reads input tile (by, bx) and writes output tile (bx, by).
// 2 x 1 GB against a 60 MB L2.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define DIM 16384
#define TILE_DIM 32
#define BLOCK_ROWS 8

#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t err_ = (call);                                                       \
    if (err_ != cudaSuccess) {                                                       \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      exit(2);                                                                       \
    }                                                                                \
  } while (0)

// swzc: block swizzles; each is a permutation of the block grid, proven before it was spliced in.
// hilbert:K: the tile grid cut into bands of K rows and each band into K x K panels, taken in row-major
// order; a full panel is walked along a Hilbert curve, a ragged edge panel row by row.  K is a power of two.
static __device__ __forceinline__ unsigned swzc_hilbert(unsigned p, unsigned m, unsigned n, unsigned k) {
  const unsigned long long band = (unsigned long long)k * n;  // ids in a full band of k rows
  const unsigned row0 = (unsigned)(p / band) * k;
  const unsigned h = m - row0 < k ? m - row0 : k;  // rows in this band
  const unsigned q = (unsigned)(p % band);
  const unsigned col0 = q / (h * k) * k;  // the panels before this one are h x k each
  const unsigned w = n - col0 < k ? n - col0 : k;  // columns in this panel
  const unsigned r = q - col0 * h;
  unsigned x = 0u, y = 0u;
  if (h == k && w == k) {
    unsigned t = r;
    for (unsigned side = 1u; side < k; side *= 2u) {  // one Hilbert level per two bits of r
      const unsigned rx = 1u & (t / 2u), ry = 1u & (t ^ rx);
      if (ry == 0u) {
        if (rx == 1u) {
          x = side - 1u - x;
          y = side - 1u - y;
        }
        const unsigned swap = x;
        x = y;
        y = swap;
      }
      x += side * rx;
      y += side * ry;
      t /= 4u;
    }
  } else {
    y = r / w;
    x = r % w;
  }
  return (row0 + y) * n + col0 + x;
}
// hilbert:8 over the 2D grid (rows blockIdx.y, columns blockIdx.x).
static __device__ __forceinline__ uint3 swzc_hilbert8_2d(unsigned bx, unsigned by, unsigned bz, unsigned gx, unsigned gy) {
  if ((unsigned long long)gx * gy > 0xffffffffull) return make_uint3(bx, by, bz);  // ids past 32 bits: keep the hardware order
  const unsigned m = gy, n = gx;
  unsigned p = by * n + bx;
  p = swzc_hilbert(p, m, n, 8u);
  return make_uint3(p % n, p / n, bz);
}

__global__ void transpose(float* out, const float* in) {
  __shared__ float tile[TILE_DIM][TILE_DIM + 1];
  const uint3 swzc_block = swzc_hilbert8_2d(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y);  // swzc: hilbert:8
  int x = swzc_block.x * TILE_DIM + threadIdx.x;
  int y = swzc_block.y * TILE_DIM + threadIdx.y;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * DIM + x];
  __syncthreads();
  x = swzc_block.y * TILE_DIM + threadIdx.x;
  y = swzc_block.x * TILE_DIM + threadIdx.y;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) out[(y + j) * DIM + x] = tile[threadIdx.x][threadIdx.y + j];
}

static unsigned int rng_state = 99991u;
static float next_uniform() {  // xorshift32, values in [-1, 1)
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return (rng_state >> 8) * (1.0f / 8388608.0f) - 1.0f;
}

static unsigned long long fnv1a(const void* data, size_t len) {
  const unsigned char* p = (const unsigned char*)data;
  unsigned long long h = 14695981039346656037ull;
  for (size_t i = 0; i < len; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

int main() {
  const size_t elems = (size_t)DIM * DIM;
  const size_t bytes = elems * sizeof(float);
  float* hIn = (float*)malloc(bytes);
  float* hOut = (float*)malloc(bytes);
  for (size_t i = 0; i < elems; ++i) hIn[i] = next_uniform();

  float *in, *out;
  CHECK(cudaMalloc(&in, bytes));
  CHECK(cudaMalloc(&out, bytes));
  CHECK(cudaMemcpy(in, hIn, bytes, cudaMemcpyHostToDevice));

  dim3 block(TILE_DIM, BLOCK_ROWS);
  dim3 grid(DIM / TILE_DIM, DIM / TILE_DIM);
  transpose<<<grid, block>>>(out, in);  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemset(out, 0xff, bytes));  // poison: the measured launch must write every element
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  transpose<<<grid, block>>>(out, in);  // measured
  CHECK(cudaEventRecord(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(hOut, out, bytes, cudaMemcpyDeviceToHost));

  int bad = 0;
  for (int s = 0; s < 65536; ++s) {
    const size_t r = (size_t)(s * 2663u) % DIM, c = (size_t)(s * 4099u + 17u) % DIM;
    if (hOut[r * DIM + c] != hIn[c * DIM + r]) ++bad;
  }
  printf("kernel transpose ms %.4f checksum %016llx\n", ms, fnv1a(hOut, bytes));
  if (bad) fprintf(stderr, "transpose: %d of 65536 spot checks WRONG\n", bad);

  cudaFree(in);
  cudaFree(out);
  free(hIn);
  free(hOut);
  return bad ? 1 : 0;
}
