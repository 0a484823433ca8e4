import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
CORPUS = Path(__file__).resolve().parent / "corpus"

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


def has_gpu() -> bool:
    """An NVIDIA GPU that nvidia-smi lists, and nvcc to build for it (SWZC_NO_GPU does not matter here:
    the GPU tests ask for the GPU explicitly)."""
    if shutil.which("nvidia-smi") is None or shutil.which("nvcc") is None:
        return False
    run = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return run.returncode == 0 and "GPU" in run.stdout

# A rewritable 2D kernel with its launch, as a user writes it.
TILE2D = b"""\
#define TILE 16
__global__ void tile2d(const float* a, float* b, int n) {
  int row = blockIdx.y * TILE + threadIdx.y;
  int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += a[row * n + k] * a[k * n + col];
  if (row < n && col < n) b[row * n + col] = acc;
}

int main() {
  const int n = 4096;
  dim3 grid(n / TILE, n / TILE);
  tile2d<<<grid, dim3(TILE, TILE)>>>(nullptr, nullptr, n);
  return 0;
}
"""


# A naive GEMM with a fixed 256 x 256 grid: the L2 model ranks it and picks a grouped order.
NAIVE_GEMM = """\
#define TILE 16
__global__ void gemm(const float* A, const float* B, float* C, int n) {
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}
void run(const float* A, const float* B, float* C) { gemm<<<dim3(256, 256), dim3(TILE, TILE)>>>(A, B, C, 4096); }
"""

# Triton's GROUP_M order as the body of a custom swizzle: 8 rows per group, the last group clamped.
GROUPED_8_BODY = """\
const unsigned G = 8u;
const unsigned p = block.y * grid.x + block.x;
const unsigned per_group = G * grid.x;
const unsigned first_row = p / per_group * G;
const unsigned rows = min(grid.y - first_row, G);
const unsigned k = p % per_group;
return make_uint3(k / rows, first_row + k % rows, 0u);
"""

# A tiled GEMM that stages its reads through shared memory behind a barrier each pass.
STAGED_TILES = b"""\
#define T 16
__global__ void tiled(const float* A, const float* B, float* C, int n) {
  __shared__ float a[T][T], b[T][T];
  const int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += T) {
    a[threadIdx.y][threadIdx.x] = A[row * n + k0 + threadIdx.x];
    b[threadIdx.y][threadIdx.x] = B[(k0 + threadIdx.y) * n + col];
    __syncthreads();
    for (int k = 0; k < T; ++k) acc += a[threadIdx.y][k] * b[k][threadIdx.x];
    __syncthreads();
  }
  C[row * n + col] = acc;
}
int main() { tiled<<<dim3(256, 256), dim3(T, T)>>>(0, 0, 0, 4096); }
"""

# A GEMM sized by the launching function's parameter: ranked over a sweep, measured at several sizes.
SIZED = b"""\
__global__ void gemm_rt(const float* A, const float* B, float* C, int n) {
  const int row = blockIdx.y * 8 + threadIdx.y;
  const int col = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}
void run(float* A, float* B, float* C, int n) { gemm_rt<<<dim3(n / 32, n / 8), dim3(32, 8)>>>(A, B, C, n); }
"""
