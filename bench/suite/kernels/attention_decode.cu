// Attention decode: one query token per (batch, head) attends over a cached sequence of keys and values.
// The key and value caches belong to the head and are shared by every sequence of the batch (a shared
// prefix), so the blocks of one head, across the batch, read the same 8 MB. Grid (HEADS, BATCH): blockIdx.x
// is the head, blockIdx.y the sequence in the batch. Each block has 4 warps; warp w takes positions
// w, w + 4, ... with an online softmax, lane l holding dimensions 2l, 2l + 1, 64 + 2l and 65 + 2l (two
// bf16 pairs), and the warps are combined through shared memory at the end.
// K and V are 134 MB each (bf16, HEADS x SEQ x DIM), against a 60 MB L2.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

#define HEADS 32
#define BATCH 8
#define SEQ 16384
#define DIM 128
#define WARPS 4
#define THREADS (WARPS * 32)
#define SEED 0x5EEDA00Dull

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

// bf16 on the host as its 16 bits: round to nearest even, and back.
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint64_t fnv1a(const void* data, size_t bytes, uint64_t h) {
  const unsigned char* p = (const unsigned char*)data;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__global__ void attention_decode(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                                 const __nv_bfloat16* __restrict__ v, float* __restrict__ out) {
  __shared__ float part_max[WARPS];
  __shared__ float part_sum[WARPS];
  __shared__ float part_acc[WARPS][DIM];
  const int h = blockIdx.x;
  const int b = blockIdx.y;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const float scale = rsqrtf((float)DIM);

  const __nv_bfloat162* qr = (const __nv_bfloat162*)(q + ((size_t)b * HEADS + h) * DIM);
  const float2 q0 = __bfloat1622float2(qr[lane]);
  const float2 q1 = __bfloat1622float2(qr[lane + 32]);

  float m = -INFINITY, l = 0.0f;
  float2 a0 = make_float2(0.0f, 0.0f), a1 = make_float2(0.0f, 0.0f);
  for (int s = warp; s < SEQ; s += WARPS) {
    const __nv_bfloat162* kr = (const __nv_bfloat162*)(k + (size_t)h * SEQ * DIM + (size_t)s * DIM);
    const float2 k0 = __bfloat1622float2(kr[lane]);
    const float2 k1 = __bfloat1622float2(kr[lane + 32]);
    const float score = warp_sum(q0.x * k0.x + q0.y * k0.y + q1.x * k1.x + q1.y * k1.y) * scale;
    const float m_new = fmaxf(m, score);
    const float keep = __expf(m - m_new);
    const float p = __expf(score - m_new);
    const __nv_bfloat162* vr = (const __nv_bfloat162*)(v + (size_t)h * SEQ * DIM + (size_t)s * DIM);
    const float2 v0 = __bfloat1622float2(vr[lane]);
    const float2 v1 = __bfloat1622float2(vr[lane + 32]);
    l = l * keep + p;
    a0.x = a0.x * keep + p * v0.x;
    a0.y = a0.y * keep + p * v0.y;
    a1.x = a1.x * keep + p * v1.x;
    a1.y = a1.y * keep + p * v1.y;
    m = m_new;
  }

  if (lane == 0) {
    part_max[warp] = m;
    part_sum[warp] = l;
  }
  part_acc[warp][2 * lane] = a0.x;
  part_acc[warp][2 * lane + 1] = a0.y;
  part_acc[warp][64 + 2 * lane] = a1.x;
  part_acc[warp][65 + 2 * lane] = a1.y;
  __syncthreads();

  // Thread t combines dimension t over the warps, in a fixed order.
  const int t = threadIdx.x;
  float big = part_max[0];
  for (int w = 1; w < WARPS; ++w) big = fmaxf(big, part_max[w]);
  float total = 0.0f, o = 0.0f;
  for (int w = 0; w < WARPS; ++w) {
    const float f = __expf(part_max[w] - big);
    total += part_sum[w] * f;
    o += part_acc[w][t] * f;
  }
  out[((size_t)b * HEADS + h) * DIM + t] = o / total;
}

int main() {
  const size_t q_elems = (size_t)BATCH * HEADS * DIM, kv_elems = (size_t)HEADS * SEQ * DIM;
  uint16_t* hq = (uint16_t*)malloc(q_elems * sizeof(uint16_t));
  uint16_t* hk = (uint16_t*)malloc(kv_elems * sizeof(uint16_t));
  uint16_t* hv = (uint16_t*)malloc(kv_elems * sizeof(uint16_t));
  float* hout = (float*)malloc(q_elems * sizeof(float));
  if (!hq || !hk || !hv || !hout) { fprintf(stderr, "host allocation failed\n"); return 2; }
  for (size_t i = 0; i < q_elems; ++i) hq[i] = to_bf16(uniform(-1.0f, 1.0f));
  for (size_t i = 0; i < kv_elems; ++i) hk[i] = to_bf16(uniform(-1.0f, 1.0f));
  for (size_t i = 0; i < kv_elems; ++i) hv[i] = to_bf16(uniform(-1.0f, 1.0f));

  __nv_bfloat16 *dq, *dk, *dv;
  float* dout;
  CHECK(cudaMalloc(&dq, q_elems * sizeof(__nv_bfloat16)));
  CHECK(cudaMalloc(&dk, kv_elems * sizeof(__nv_bfloat16)));
  CHECK(cudaMalloc(&dv, kv_elems * sizeof(__nv_bfloat16)));
  CHECK(cudaMalloc(&dout, q_elems * sizeof(float)));
  CHECK(cudaMemcpy(dq, hq, q_elems * sizeof(uint16_t), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dk, hk, kv_elems * sizeof(uint16_t), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dv, hv, kv_elems * sizeof(uint16_t), cudaMemcpyHostToDevice));

  dim3 grid(HEADS, BATCH);
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  CHECK(cudaMemset(dout, 0xff, q_elems * sizeof(float)));
  attention_decode<<<grid, THREADS>>>(dq, dk, dv, dout);  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemset(dout, 0xff, q_elems * sizeof(float)));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventRecord(start));
  attention_decode<<<grid, THREADS>>>(dq, dk, dv, dout);  // measured
  CHECK(cudaEventRecord(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(hout, dout, q_elems * sizeof(float), cudaMemcpyDeviceToHost));

  // Check 8 (batch, head) pairs, every dimension, against a double-precision softmax.
  int bad = 0;
  double* score = (double*)malloc(SEQ * sizeof(double));
  for (int c = 0; c < 8; ++c) {
    const int b = (int)(next_u64() % BATCH), h = (int)(next_u64() % HEADS);
    const uint16_t* qv = hq + ((size_t)b * HEADS + h) * DIM;
    double big = -INFINITY;
    for (int s = 0; s < SEQ; ++s) {
      const uint16_t* kr = hk + ((size_t)h * SEQ + s) * DIM;
      double dot = 0.0;
      for (int d = 0; d < DIM; ++d) dot += (double)from_bf16(qv[d]) * from_bf16(kr[d]);
      score[s] = dot / sqrt((double)DIM);
      big = fmax(big, score[s]);
    }
    double total = 0.0;
    for (int s = 0; s < SEQ; ++s) total += exp(score[s] - big);
    for (int d = 0; d < DIM; ++d) {
      double ref = 0.0;
      for (int s = 0; s < SEQ; ++s) ref += exp(score[s] - big) * from_bf16(hv[((size_t)h * SEQ + s) * DIM + d]);
      ref /= total;
      const double got = hout[((size_t)b * HEADS + h) * DIM + d];
      if (!(fabs(got - ref) <= 1e-3 + 1e-2 * fabs(ref))) {
        if (bad < 5) fprintf(stderr, "attention_decode: out[%d][%d][%d] = %g, expected %g\n", b, h, d, got, ref);
        ++bad;
      }
    }
  }

  const uint64_t sum = fnv1a(hout, q_elems * sizeof(float), 14695981039346656037ull);
  printf("kernel attention_decode ms %.4f checksum %016llx\n", ms, (unsigned long long)sum);
  CHECK(cudaFree(dq));
  CHECK(cudaFree(dk));
  CHECK(cudaFree(dv));
  CHECK(cudaFree(dout));
  free(hq);
  free(hk);
  free(hv);
  free(hout);
  free(score);
  if (bad) { fprintf(stderr, "attention_decode: %d of %d checked outputs wrong\n", bad, 8 * DIM); return 1; }
  return 0;
}
