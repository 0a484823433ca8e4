// swzc compat: a stand-in for <hip/hip_fp8.h>, the OCP fp8 types only, on top of CUDA's (see
// hip_runtime.h).  The FNUZ types of MI300 (__hip_fp8_e4m3_fnuz, …) are another encoding and have no
// CUDA counterpart: a source using them does not compile here.
#pragma once

#include "hip_runtime.h"

typedef __nv_fp8_e4m3 __hip_fp8_e4m3;
typedef __nv_fp8_e5m2 __hip_fp8_e5m2;
typedef __nv_fp8x2_e4m3 __hip_fp8x2_e4m3;
typedef __nv_fp8x2_e5m2 __hip_fp8x2_e5m2;
