// swzc compat: a stand-in for <hip/hip_bfloat16.h>: `hip_bfloat16`, sixteen bits in `data`, converted
// to and from float (round to nearest even), its arithmetic done in float (see hip_runtime.h).
#pragma once

#include <stdint.h>

#include "hip_runtime.h"

struct hip_bfloat16 {
  uint16_t data;

  __host__ __device__ hip_bfloat16() = default;
  __host__ __device__ explicit hip_bfloat16(float f) {
    const __nv_bfloat16_raw raw = __float2bfloat16_rn(f);
    data = raw.x;
  }
  __host__ __device__ operator float() const {
    __nv_bfloat16_raw raw;
    raw.x = data;
    return __bfloat162float(__nv_bfloat16(raw));
  }
};

__host__ __device__ inline hip_bfloat16 operator+(hip_bfloat16 a, hip_bfloat16 b) { return hip_bfloat16(float(a) + float(b)); }
__host__ __device__ inline hip_bfloat16 operator-(hip_bfloat16 a, hip_bfloat16 b) { return hip_bfloat16(float(a) - float(b)); }
__host__ __device__ inline hip_bfloat16 operator*(hip_bfloat16 a, hip_bfloat16 b) { return hip_bfloat16(float(a) * float(b)); }
__host__ __device__ inline hip_bfloat16 operator/(hip_bfloat16 a, hip_bfloat16 b) { return hip_bfloat16(float(a) / float(b)); }
__host__ __device__ inline hip_bfloat16 operator-(hip_bfloat16 a) { a.data ^= 0x8000; return a; }
__host__ __device__ inline hip_bfloat16& operator+=(hip_bfloat16& a, hip_bfloat16 b) { return a = a + b; }
__host__ __device__ inline hip_bfloat16& operator*=(hip_bfloat16& a, hip_bfloat16 b) { return a = a * b; }
