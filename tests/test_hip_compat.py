"""Compile-check HIP samples with nvcc through swzc's hip_runtime.h shim."""

import importlib.resources
import shutil
import subprocess
from pathlib import Path

import pytest

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")


def compat_dir() -> Path:
    try:
        path = Path(str(importlib.resources.files("swzc.compat")))
        if (path / "hip" / "hip_runtime.h").is_file():
            return path
    except (ImportError, ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).parents[1] / "swzc" / "compat"


VECTOR_ADD = r"""
#include <hip/hip_runtime.h>
#include <cstdio>
#include <vector>

template <typename T, int UNROLL>
__global__ void vadd(const T* a, const T* b, T* c, int n) {
  int base = (hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x) * UNROLL;
  #pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    int i = base + u;
    if (i < n) c[i] = a[i] + b[i];
  }
}

__global__ void touch() {}

int main() {
  const int n = 1 << 20;
  std::vector<float> h(n, 1.0f);
  float *a, *b, *c, *pinned;
  if (hipMalloc(&a, n * sizeof(float)) != hipSuccess) return 1;
  hipMalloc((void**)&b, n * sizeof(float));
  hipMallocManaged(&c, n * sizeof(float));
  hipHostMalloc(&pinned, n * sizeof(float));
  hipHostMalloc((void**)&pinned, n * sizeof(float), hipHostMallocDefault);
  hipMemcpy(a, h.data(), n * sizeof(float), hipMemcpyHostToDevice);
  hipMemcpy(b, a, n * sizeof(float), hipMemcpyDeviceToDevice);
  hipMemset(c, 0, n * sizeof(float));

  hipStream_t s;
  hipStreamCreate(&s);
  hipEvent_t start, stop;
  hipEventCreate(&start);
  hipEventCreate(&stop);
  hipEventRecord(start, s);
  dim3 block(256);
  dim3 grid((n / 4 + 255) / 256);
  hipLaunchKernelGGL(HIP_KERNEL_NAME(vadd<float, 4>), grid, block, 0, s, a, b, c, n);
  hipLaunchKernelGGL(touch, dim3(1), dim3(1), 0, 0);
  hipEventRecord(stop, s);
  hipEventSynchronize(stop);
  float ms = 0.0f;
  hipEventElapsedTime(&ms, start, stop);
  hipError_t err = hipGetLastError();
  if (err != hipSuccess) std::printf("%s\n", hipGetErrorString(err));
  hipMemcpyAsync(pinned, c, n * sizeof(float), hipMemcpyDeviceToHost, s);
  hipStreamSynchronize(s);
  std::printf("%f ms\n", ms);
  hipEventDestroy(start);
  hipEventDestroy(stop);
  hipStreamDestroy(s);
  hipHostFree(pinned);
  hipFree(a);
  hipFree(b);
  hipFree(c);
  return hipPeekAtLastError() == hipSuccess ? 0 : 1;
}
"""

REDUCTION = r"""
#include <hip/hip_runtime.h>
#include <cstdio>

__constant__ float scale;

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down(v, offset);
  return v;
}

__device__ int lane_tricks(int v) {
  v += __shfl_xor(v, 1);
  v += __shfl_up(v, 1, 16);
  return __shfl(v, 0);
}

__global__ void reduce(const float* in, float* out, int* other, int n) {
  HIP_DYNAMIC_SHARED(float, partial)
  int i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
  float v = i < n ? in[i] * scale : 0.0f;
  v = warp_sum(v);
  int lane = hipThreadIdx_x % 32, warp = hipThreadIdx_x / 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < hipBlockDim_x / 32 ? partial[lane] : 0.0f;
    v = warp_sum(v);
    if (lane == 0) atomicAdd(out, v);
  }
  if (i < n) other[i] = lane_tricks(i);
}

int main() {
  int count = 0, dev = 0;
  hipGetDeviceCount(&count);
  hipSetDevice(0);
  hipGetDevice(&dev);
  hipDeviceProp_t prop;
  hipGetDeviceProperties(&prop, dev);
  int sms = 0, warp = 0;
  hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, dev);
  hipDeviceGetAttribute(&warp, hipDeviceAttributeWarpSize, dev);
  hipFuncAttributes attr;
  hipFuncGetAttributes(&attr, reinterpret_cast<const void*>(reduce));
  std::printf("%s: %d SMs, %d regs\n", prop.name, sms, attr.numRegs);

  const int n = 4096, threads = 256;
  float one = 1.0f;
  hipMemcpyToSymbol(HIP_SYMBOL(scale), &one, sizeof(float), 0, hipMemcpyHostToDevice);
  float *in, *out;
  int* other;
  hipMalloc(&in, n * sizeof(float));
  hipMalloc(&out, sizeof(float));
  hipMalloc(&other, n * sizeof(int));
  hipMemsetAsync(out, 0, sizeof(float), 0);
  hipLaunchKernelGGL(reduce, dim3(n / threads), dim3(threads),
                     threads / 32 * sizeof(float), 0, in, out, other, n);
  void* args[] = {&in, &out, &other, (void*)&n};
  hipLaunchCooperativeKernel(reinterpret_cast<void*>(reduce), dim3(n / threads),
                             dim3(threads), args, threads / 32 * sizeof(float), 0);
  hipDeviceSynchronize();
  hipFree(in);
  hipFree(out);
  hipFree(other);
  hipDeviceReset();
  return 0;
}
"""

TILED = r"""
#include <hip/hip_runtime_api.h>
#include <hip/hip_runtime.h>

#if !defined(__HIP_PLATFORM_NVIDIA__) || !defined(__HIP_PLATFORM_NVCC__)
#error "platform macros missing"
#endif

constexpr int TILE = 16;

__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int row = hipBlockIdx_y * TILE + hipThreadIdx_y;
  int col = hipBlockIdx_x * TILE + hipThreadIdx_x;
  float acc = 0.0f;
  for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
    int ka = t * TILE + hipThreadIdx_x, kb = t * TILE + hipThreadIdx_y;
    As[hipThreadIdx_y][hipThreadIdx_x] = (row < M && ka < K) ? A[row * K + ka] : 0.0f;
    Bs[hipThreadIdx_y][hipThreadIdx_x] = (kb < K && col < N) ? B[kb * N + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[hipThreadIdx_y][k] * Bs[k][hipThreadIdx_x];
    __syncthreads();
  }
  if (row < M && col < N && hipBlockIdx_z < hipGridDim_z && hipThreadIdx_z < hipBlockDim_z)
    C[row * N + col] = acc + 0.0f * (hipGridDim_x + hipGridDim_y + hipBlockDim_y);
}

int main() {
  const int M = 512, N = 384, K = 256;
  float *A, *B, *C;
  hipMalloc(&A, M * K * sizeof(float));
  hipMalloc(&B, K * N * sizeof(float));
  hipMalloc(&C, M * N * sizeof(float));
  dim3 block(TILE, TILE);
  dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  hipLaunchKernelGGL(matmul, grid, block, 0, 0, A, B, C, M, N, K);
  matmul<<<grid, block>>>(A, B, C, M, N, K);
  hipError_t err = hipDeviceSynchronize();
  hipFree(A);
  hipFree(B);
  hipFree(C);
  return err == hipSuccess ? 0 : 1;
}
"""


@pytest.mark.parametrize(
    "name, source",
    [("vector_add.hip", VECTOR_ADD), ("reduction.hip", REDUCTION), ("tiled.cu", TILED)],
)
def test_hip_sample_compiles_with_nvcc(tmp_path, name, source):
    src = tmp_path / name
    src.write_text(source)
    obj = tmp_path / (src.stem + ".o")
    cmd = [NVCC, "-std=c++17", "-arch=sm_90", "-x", "cu", "-I", str(compat_dir()),
           "-c", str(src), "-o", str(obj)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}"
    assert obj.is_file()
