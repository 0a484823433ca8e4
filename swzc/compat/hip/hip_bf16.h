// swzc compat: a stand-in for <hip/hip_bf16.h> on top of CUDA's bfloat16 types (see hip_runtime.h).
// HIP's conversion and arithmetic intrinsics (__float2bfloat16, __bfloat162float, __hadd, …) have the
// same names in cuda_bf16.h.
#pragma once

#include "hip_runtime.h"

typedef __nv_bfloat16 __hip_bfloat16;
typedef __nv_bfloat162 __hip_bfloat162;
