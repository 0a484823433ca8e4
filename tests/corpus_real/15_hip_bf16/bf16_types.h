// hip_bfloat16 on both platforms: ROCm's own type on AMD, CUDA's bfloat16 when HIP is built for NVIDIA.
#pragma once
#if defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_bfloat16.h>
#else
#include <cuda_bf16.h>
typedef __nv_bfloat16 hip_bfloat16;
#endif
