// swzc: block swizzles; each is a permutation (of the blocks, or of the tiles a tile loop walks), proven before it was spliced in.
#ifndef SWZC_6332F4C2FF6979EF
#define SWZC_6332F4C2FF6979EF
// swzc_divide(a, d): a / d for d >= 1, in integer instructions only, so that a quotient of warp-uniform values
// stays on the uniform (NVIDIA) or scalar (AMD) datapath; `/` by a run-time value takes the floating-point
// reciprocal unit, which has no uniform form.  Exact for every a and d >= 1 (swzc/formulas/divide.py says why).
// swzc_reciprocal(dn), dn in [2^31, 2^32): under 2^63 / dn, by 7 at most.
static __device__ __forceinline__ unsigned swzc_reciprocal(unsigned dn) {
  unsigned x = 1768515945u - __umulhi(dn, 4042322161u);  // the line 48/17 - 32/17 t, t = dn / 2^32, times 2^31
  x = __umulhi(x, 0u - __umulhi(dn, x)) << 1;  // three Newton steps x (2 - t x): 4 bits, 8, 16, 32
  x = __umulhi(x, 0u - __umulhi(dn, x)) << 1;
  x = __umulhi(x, 0u - __umulhi(dn, x)) << 1;
  return x - 4u;  // now below 2^63 / dn: no quotient from it passes the true one
}
static __device__ __forceinline__ unsigned swzc_divide(unsigned a, unsigned d) {
  const unsigned s = (unsigned)__clz((int)d);
  const unsigned x = swzc_reciprocal(d << s);  // d scaled into [2^31, 2^32)
  unsigned q = __umulhi(a, x) >> (31u - s);  // a / d, or up to 8 less
  unsigned r = a - q * d;
  const unsigned c = __umulhi(r, x) >> (31u - s);  // r / d, or one less
  q += c;
  r -= c * d;
  return r >= d ? q + 1u : q;
}
#endif
#ifndef SWZC_6DA00F340968DEAF
#define SWZC_6DA00F340968DEAF
// serpentine:G: grouped:G's groups of G tile rows, walked column by column, top to bottom in each column, but
// every odd-numbered group walks its columns right to left: consecutive groups meet at the same grid edge.
static __device__ __forceinline__ unsigned swzc_serpentine(unsigned p, unsigned m, unsigned n, unsigned g) {
  g = g < m ? g : m;  // a group taller than the grid is the whole grid; keeps g * n within m * n
  const unsigned per_group = g * n;
  const unsigned group = swzc_divide(p, per_group);
  const unsigned first_row = group * g;
  const unsigned rows = m - first_row < g ? m - first_row : g;  // the last group may be shorter
  const unsigned k = p - group * per_group;
  const unsigned col = swzc_divide(k, rows);
  return (first_row + k - col * rows) * n + (group % 2u == 0u ? col : n - 1u - col);
}
#endif
#ifndef SWZC_3ACCA288C662A2EE
#define SWZC_3ACCA288C662A2EE
// serpentine:64 over the 2D grid (rows blockIdx.y, columns blockIdx.x).
static __device__ __forceinline__ uint3 swzc_serpentine64_2d(unsigned bx, unsigned by, unsigned bz, unsigned gx, unsigned gy) {
  if ((unsigned long long)gx * gy > 0xffffffffull) return make_uint3(bx, by, bz);  // ids past 32 bits: keep the hardware order
  const unsigned m = gy, n = gx;
  unsigned p = by * n + bx;
  p = swzc_serpentine(p, m, n, 64u);
  const unsigned row = swzc_divide(p, n);
  return make_uint3(p - row * n, row, bz);
}
#endif

// A naive GEMM, one thread per element of C.
__global__ void gemm(const float* A, const float* B, float* C, int n) {
  const uint3 swzc_block = swzc_serpentine64_2d(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y);  // swzc: serpentine:64
  int row = swzc_block.y * 16 + threadIdx.y;
  int col = swzc_block.x * 16 + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}

void launch(const float* A, const float* B, float* C) {
  gemm<<<dim3(256, 256), dim3(16, 16)>>>(A, B, C, 4096);
}
