// swzc compat: a stand-in for <hip/hip_runtime.h> that maps HIP names onto CUDA,
// so that a HIP source can be compile-checked with nvcc on a machine without ROCm:
//
//     nvcc -x cu -I <swzc/compat> -c file.hip
//
// It covers only the common subset of the HIP runtime that typical programs and
// benchmarks use; it is not a replacement for ROCm's hip/nvidia_detail headers.
#pragma once

#include <cuda_runtime.h>
#include <cuda_fp16.h>  // before the shuffle macros below, which would mangle them
#include <cuda_bf16.h>  // (for hip_bf16.h, hip_bfloat16.h)
#include <cuda_fp8.h>   // (for hip_fp8.h)

#ifndef __HIP_PLATFORM_NVIDIA__
#define __HIP_PLATFORM_NVIDIA__ 1
#endif
#ifndef __HIP_PLATFORM_NVCC__
#define __HIP_PLATFORM_NVCC__ 1
#endif
#if defined(__CUDACC__) && !defined(__HIPCC__)
#define __HIPCC__ 1
#endif
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#define __HIP_DEVICE_COMPILE__ 1
#endif

// ---- types -------------------------------------------------------------------
typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef cudaDeviceProp hipDeviceProp_t;
typedef cudaFuncAttributes hipFuncAttributes;
typedef cudaMemcpyKind hipMemcpyKind;
typedef cudaDeviceAttr hipDeviceAttribute_t;

// ---- errors ------------------------------------------------------------------
#define hipSuccess cudaSuccess
#define hipErrorInvalidValue cudaErrorInvalidValue
#define hipErrorOutOfMemory cudaErrorMemoryAllocation
#define hipErrorNotReady cudaErrorNotReady
#define hipGetErrorString cudaGetErrorString
#define hipGetErrorName cudaGetErrorName
#define hipGetLastError cudaGetLastError
#define hipPeekAtLastError cudaPeekAtLastError

// ---- devices -----------------------------------------------------------------
#define hipSetDevice cudaSetDevice
#define hipGetDevice cudaGetDevice
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipDeviceReset cudaDeviceReset
#define hipMemGetInfo cudaMemGetInfo

#define hipDeviceAttributeMaxThreadsPerBlock cudaDevAttrMaxThreadsPerBlock
#define hipDeviceAttributeMaxBlockDimX cudaDevAttrMaxBlockDimX
#define hipDeviceAttributeMaxGridDimX cudaDevAttrMaxGridDimX
#define hipDeviceAttributeMaxSharedMemoryPerBlock cudaDevAttrMaxSharedMemoryPerBlock
#define hipDeviceAttributeSharedMemPerBlockOptin cudaDevAttrMaxSharedMemoryPerBlockOptin
#define hipDeviceAttributeWarpSize cudaDevAttrWarpSize
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#define hipDeviceAttributeMaxThreadsPerMultiProcessor cudaDevAttrMaxThreadsPerMultiProcessor
#define hipDeviceAttributeClockRate cudaDevAttrClockRate
#define hipDeviceAttributeL2CacheSize cudaDevAttrL2CacheSize
#define hipDeviceAttributeComputeCapabilityMajor cudaDevAttrComputeCapabilityMajor
#define hipDeviceAttributeComputeCapabilityMinor cudaDevAttrComputeCapabilityMinor

// ---- memory ------------------------------------------------------------------
#define hipMalloc cudaMalloc
#define hipMallocManaged cudaMallocManaged
#define hipMemAttachGlobal cudaMemAttachGlobal
#define hipFree cudaFree
#define hipHostFree cudaFreeHost
#define hipFreeHost cudaFreeHost
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemcpyToSymbol cudaMemcpyToSymbol
#define hipMemcpyFromSymbol cudaMemcpyFromSymbol
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
#define HIP_SYMBOL(sym) sym

#define hipMemcpyHostToHost cudaMemcpyHostToHost
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipMemcpyDefault cudaMemcpyDefault

// hipHostMalloc(ptr, size[, flags]): pinned host memory. HIP's coherence/NUMA flags
// have no CUDA counterpart and are dropped.
#define hipHostMallocDefault 0x0u
#define hipHostMallocPortable 0x1u
#define hipHostMallocMapped 0x2u
#define hipHostMallocWriteCombined 0x4u
#define hipHostMallocNumaUser 0x20000000u
#define hipHostMallocCoherent 0x40000000u
#define hipHostMallocNonCoherent 0x80000000u

template <typename T>
static inline hipError_t hipHostMalloc(T** ptr, size_t size, unsigned int flags = 0u) {
  flags &= cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
  return cudaMallocHost(reinterpret_cast<void**>(ptr), size, flags);
}

// ---- streams and events ------------------------------------------------------
#define hipStreamDefault cudaStreamDefault
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipStreamCreate cudaStreamCreate
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamWaitEvent cudaStreamWaitEvent

#define hipEventDefault cudaEventDefault
#define hipEventBlockingSync cudaEventBlockingSync
#define hipEventDisableTiming cudaEventDisableTiming
#define hipEventCreate cudaEventCreate
#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventRecord cudaEventRecord
#define hipEventQuery cudaEventQuery
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipEventDestroy cudaEventDestroy

// ---- kernels -----------------------------------------------------------------
#define hipFuncGetAttributes cudaFuncGetAttributes
#define hipFuncSetAttribute cudaFuncSetAttribute
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define hipLaunchCooperativeKernel cudaLaunchCooperativeKernel
#define hipLaunchKernel cudaLaunchKernel

// HIP_KERNEL_NAME protects the commas of a template kernel's name from the macro.
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) \
  kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)

#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];

#define hipThreadIdx_x threadIdx.x
#define hipThreadIdx_y threadIdx.y
#define hipThreadIdx_z threadIdx.z
#define hipBlockIdx_x blockIdx.x
#define hipBlockIdx_y blockIdx.y
#define hipBlockIdx_z blockIdx.z
#define hipBlockDim_x blockDim.x
#define hipBlockDim_y blockDim.y
#define hipBlockDim_z blockDim.z
#define hipGridDim_x gridDim.x
#define hipGridDim_y gridDim.y
#define hipGridDim_z gridDim.z

// ---- warp shuffles -----------------------------------------------------------
// HIP's shuffles take no mask; on NVIDIA they become the *_sync forms over the
// full warp (so all 32 lanes must take part, as on sm_70 and later anyway).
#define SWZC_HIP_FULL_MASK 0xffffffffu

template <typename T>
__device__ inline T swzc_hip_shfl(T var, int src_lane, int width = warpSize) {
  return __shfl_sync(SWZC_HIP_FULL_MASK, var, src_lane, width);
}
template <typename T>
__device__ inline T swzc_hip_shfl_up(T var, unsigned int delta, int width = warpSize) {
  return __shfl_up_sync(SWZC_HIP_FULL_MASK, var, delta, width);
}
template <typename T>
__device__ inline T swzc_hip_shfl_down(T var, unsigned int delta, int width = warpSize) {
  return __shfl_down_sync(SWZC_HIP_FULL_MASK, var, delta, width);
}
template <typename T>
__device__ inline T swzc_hip_shfl_xor(T var, int lane_mask, int width = warpSize) {
  return __shfl_xor_sync(SWZC_HIP_FULL_MASK, var, lane_mask, width);
}

#define __shfl swzc_hip_shfl
#define __shfl_up swzc_hip_shfl_up
#define __shfl_down swzc_hip_shfl_down
#define __shfl_xor swzc_hip_shfl_xor
