// Naive fp32 GEMM, C = A * B, N x N row-major, one output element per thread, 16 x 16 thread blocks on
// a 2D grid (rows = blockIdx.y). Every thread walks a whole row of A and a whole column of B, so the
// order in which blocks run decides how much of A and B is still in L2 when it is needed again.
// 3 x 64 MB of data against a 60 MB L2.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

#define N 4096
#define TILE 16

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
// hilbert:4 over the 2D grid (rows blockIdx.y, columns blockIdx.x).
static __device__ __forceinline__ uint3 swzc_hilbert4_2d(unsigned bx, unsigned by, unsigned bz, unsigned gx, unsigned gy) {
  if ((unsigned long long)gx * gy > 0xffffffffull) return make_uint3(bx, by, bz);  // ids past 32 bits: keep the hardware order
  const unsigned m = gy, n = gx;
  unsigned p = by * n + bx;
  p = swzc_hilbert(p, m, n, 4u);
  return make_uint3(p % n, p / n, bz);
}

__global__ void naive_gemm(const float* A, const float* B, float* C, int n) {
  const uint3 swzc_block = swzc_hilbert4_2d(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y);  // swzc: hilbert:4
  int row = swzc_block.y * TILE + threadIdx.y;
  int col = swzc_block.x * TILE + threadIdx.x;
  if (row >= n || col >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}

static unsigned int rng_state = 12345u;
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
  const size_t elems = (size_t)N * N;
  const size_t bytes = elems * sizeof(float);
  float* hA = (float*)malloc(bytes);
  float* hB = (float*)malloc(bytes);
  float* hC = (float*)malloc(bytes);
  for (size_t i = 0; i < elems; ++i) hA[i] = next_uniform();
  for (size_t i = 0; i < elems; ++i) hB[i] = next_uniform();

  float *A, *B, *C;
  CHECK(cudaMalloc(&A, bytes));
  CHECK(cudaMalloc(&B, bytes));
  CHECK(cudaMalloc(&C, bytes));
  CHECK(cudaMemcpy(A, hA, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(B, hB, bytes, cudaMemcpyHostToDevice));

  dim3 block(TILE, TILE);
  dim3 grid(N / TILE, N / TILE);
  naive_gemm<<<grid, block>>>(A, B, C, N);  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemset(C, 0xff, bytes));  // poison: the measured launch must write every element
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  naive_gemm<<<grid, block>>>(A, B, C, N);  // measured
  CHECK(cudaEventRecord(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(hC, C, bytes, cudaMemcpyDeviceToHost));

  int bad = 0;
  for (int s = 0; s < 16; ++s) {
    const int r = (s * 977 + 3) % N, c = (s * 1013 + 5) % N;
    double ref = 0.0, mag = 0.0;
    for (int k = 0; k < N; ++k) {
      ref += (double)hA[(size_t)r * N + k] * hB[(size_t)k * N + c];
      mag += fabs((double)hA[(size_t)r * N + k] * hB[(size_t)k * N + c]);
    }
    if (!(fabs(ref - hC[(size_t)r * N + c]) <= 1e-4 * mag + 1e-3)) ++bad;
  }
  printf("kernel naive_gemm ms %.4f checksum %016llx\n", ms, fnv1a(hC, bytes));
  if (bad) fprintf(stderr, "naive_gemm: %d of 16 spot checks WRONG\n", bad);

  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  free(hA);
  free(hB);
  free(hC);
  return bad ? 1 : 0;
}
