// One decode step of grouped-query attention in bf16: one block per (query head, sequence), four
// query heads sharing each K/V head.  Keys are read two values at a time through __nv_bfloat162.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

#define HEADS 32
#define KV_HEADS 8
#define BATCH 64
#define SEQ 4096
#define DIM 128
#define THREADS 128
#define WARPS (THREADS / 32)

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void __launch_bounds__(THREADS) attention_decode(const __nv_bfloat16* __restrict__ q,
                                                            const __nv_bfloat16* __restrict__ k,
                                                            const __nv_bfloat16* __restrict__ v,
                                                            __nv_bfloat16* __restrict__ out, int S, float scale) {
  __shared__ float scores[SEQ];
  __shared__ float partial[WARPS];
  const int h = blockIdx.x;
  const int b = blockIdx.y;
  const int D = DIM;
  const int kv = b * KV_HEADS + h / (HEADS / KV_HEADS);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;

  const __nv_bfloat162* q2 = (const __nv_bfloat162*)(q + (size_t)(b * HEADS + h) * D);
  const float2 qa = __bfloat1622float2(q2[lane]);
  const float2 qb = __bfloat1622float2(q2[lane + 32]);
  for (int s = warp; s < S; s += WARPS) {
    const __nv_bfloat162* k2 = (const __nv_bfloat162*)(k + (size_t)kv * S * D + s * D);
    const float2 ka = __bfloat1622float2(k2[lane]);
    const float2 kb = __bfloat1622float2(k2[lane + 32]);
    const float dot = warp_sum(qa.x * ka.x + qa.y * ka.y + qb.x * kb.x + qb.y * kb.y);
    if (lane == 0) scores[s] = dot * scale;
  }
  __syncthreads();

  float m = -INFINITY;
  for (int s = threadIdx.x; s < S; s += THREADS) m = fmaxf(m, scores[s]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane == 0) partial[warp] = m;
  __syncthreads();
  m = partial[0];
  for (int w = 1; w < WARPS; ++w) m = fmaxf(m, partial[w]);
  __syncthreads();
  float sum = 0.0f;
  for (int s = threadIdx.x; s < S; s += THREADS) {
    const float e = __expf(scores[s] - m);
    scores[s] = e;
    sum += e;
  }
  sum = warp_sum(sum);
  if (lane == 0) partial[warp] = sum;
  __syncthreads();
  sum = 0.0f;
  for (int w = 0; w < WARPS; ++w) sum += partial[w];

  const int d = threadIdx.x;
  float acc = 0.0f;
  for (int s = 0; s < S; ++s) acc += scores[s] * __bfloat162float(v[(size_t)kv * S * D + s * D + d]);
  out[(size_t)(b * HEADS + h) * D + d] = __float2bfloat16(acc / sum);
}

int main() {
  const size_t q_elems = (size_t)BATCH * HEADS * DIM;
  const size_t kv_elems = (size_t)BATCH * KV_HEADS * SEQ * DIM;
  std::vector<__nv_bfloat16> q(q_elems), k(kv_elems), v(kv_elems), out(q_elems);
  for (size_t i = 0; i < q_elems; ++i) q[i] = __float2bfloat16((float)((i * 2654435761u) % 17) / 16.0f - 0.5f);
  for (size_t i = 0; i < kv_elems; ++i) {
    k[i] = __float2bfloat16((float)((i * 40503u) % 13) / 12.0f - 0.5f);
    v[i] = __float2bfloat16((float)((i * 2246822519u) % 11) / 10.0f - 0.5f);
  }
  __nv_bfloat16 *dq, *dk, *dv, *dout;
  cudaMalloc(&dq, q_elems * sizeof(__nv_bfloat16));
  cudaMalloc(&dk, kv_elems * sizeof(__nv_bfloat16));
  cudaMalloc(&dv, kv_elems * sizeof(__nv_bfloat16));
  cudaMalloc(&dout, q_elems * sizeof(__nv_bfloat16));
  cudaMemcpy(dq, q.data(), q_elems * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice);
  cudaMemcpy(dk, k.data(), kv_elems * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice);
  cudaMemcpy(dv, v.data(), kv_elems * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice);

  const float scale = 1.0f / sqrtf((float)DIM);
  attention_decode<<<dim3(HEADS, BATCH), THREADS>>>(dq, dk, dv, dout, SEQ, scale);
  if (cudaMemcpy(out.data(), dout, q_elems * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost) != cudaSuccess) {
    fprintf(stderr, "kernel or copy failed\n");
    return 1;
  }

  int bad = 0;
  const int checks[3][2] = {{0, 0}, {5, 17}, {31, 63}};
  std::vector<double> p(SEQ);
  for (const auto& hb : checks) {
    const int h = hb[0], b = hb[1], kv = b * KV_HEADS + h / (HEADS / KV_HEADS);
    double m = -1e30, sum = 0.0;
    for (int s = 0; s < SEQ; ++s) {
      double dot = 0.0;
      for (int d = 0; d < DIM; ++d)
        dot += (double)__bfloat162float(q[((size_t)b * HEADS + h) * DIM + d]) *
               __bfloat162float(k[((size_t)kv * SEQ + s) * DIM + d]);
      p[s] = dot * scale;
      m = std::max(m, p[s]);
    }
    for (int s = 0; s < SEQ; ++s) sum += (p[s] = std::exp(p[s] - m));
    for (int d = 0; d < DIM; d += 37) {
      double ref = 0.0;
      for (int s = 0; s < SEQ; ++s) ref += p[s] * __bfloat162float(v[((size_t)kv * SEQ + s) * DIM + d]);
      ref /= sum;
      if (std::fabs(ref - __bfloat162float(out[((size_t)b * HEADS + h) * DIM + d])) > 2e-2) ++bad;
    }
  }
  printf("%s\n", bad ? "FAILED" : "ok");
  cudaFree(dq);
  cudaFree(dk);
  cudaFree(dv);
  cudaFree(dout);
  return bad != 0;
}
