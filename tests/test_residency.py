"""Residency: the compiler's reports read (ptxas, hipcc remarks), symbols mapped to kernel names, the
occupancy arithmetic against hand-worked cases and NVIDIA's own calculator, the launch-bounds and default
fallbacks, and a real compile with nvcc.  A stand-in `nvcc`/`hipcc` on PATH plays the compiler where the
path through the compiler is tested without one."""

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from support import ROOT, needs_nvcc
from swzc.model import residency as residency_module
from swzc.analysis.kernels import analyze
from swzc.target.hw import load as load_hw
from swzc.model.residency import (KernelResources, Residency, kernel_name, occupancy, parse_amd_remarks, parse_ptxas,
                            register_budget, residency, resource_usage)
from swzc.frontend.source import load_bytes
from swzc.analysis.context import FileContext

H200 = load_hw("h200")
MI300X = load_hw("mi300x")

# CUDA 12's ptxas (cmem on the "Used" line) and CUDA 13's (barriers, no cmem), a device function's
# properties between two kernels (with a "Used" line of its own: no kernel's), and a second target that a
# -gencode flag would add.
PTXAS = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z4gemmPKfS0_Pfi' for 'sm_90'
ptxas info    : Function properties for _Z4gemmPKfS0_Pfi
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, 16384 bytes smem, 384 bytes cmem[0]
ptxas info    : Function properties for _Z6helperPf
    24 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 20 registers, 64 bytes smem
ptxas info    : Compiling entry function '_Z2tkIfLi8192EEvPT_' for 'sm_90'
ptxas info    : Function properties for _Z2tkIfLi8192EEvPT_
    800 bytes stack frame, 96 bytes spill stores, 96 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 32768 bytes smem
ptxas info    : Compile time = 1.263 ms
ptxas info    : Compiling entry function 'scale' for 'sm_90'
ptxas info    : Function properties for scale
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
ptxas info    : Compiling entry function '_ZN2ns5innerEPf' for 'sm_80'
ptxas info    : Used 12 registers, 384 bytes cmem[0]
"""

# hipcc's remarks as the clang driver prints them, and as llc does; a figure before any function's name
# belongs to none.
AMD_REMARKS = """\
gemm.hip:1:0: remark:     VGPRs: 300 [-Rpass-analysis=kernel-resource-usage]
gemm.hip:10:0: remark: Function Name: _Z4gemmPKfS0_Pfi [-Rpass-analysis=kernel-resource-usage]
gemm.hip:10:0: remark:     SGPRs: 32 [-Rpass-analysis=kernel-resource-usage]
gemm.hip:10:0: remark:     VGPRs: 62 [-Rpass-analysis=kernel-resource-usage]
gemm.hip:10:0: remark:     AGPRs: 8 [-Rpass-analysis=kernel-resource-usage]
gemm.hip:10:0: remark:     ScratchSize [bytes/lane]: 16 [-Rpass-analysis=kernel-resource-usage]
gemm.hip:10:0: remark:     Dynamic Stack: False [-Rpass-analysis=kernel-resource-usage]
gemm.hip:10:0: remark:     Occupancy [waves/SIMD]: 6 [-Rpass-analysis=kernel-resource-usage]
gemm.hip:10:0: remark:     SGPRs Spill: 1 [-Rpass-analysis=kernel-resource-usage]
gemm.hip:10:0: remark:     VGPRs Spill: 2 [-Rpass-analysis=kernel-resource-usage]
gemm.hip:10:0: remark:     LDS Size [bytes/block]: 16384 [-Rpass-analysis=kernel-resource-usage]
remark: gemm.hip:30:0: Function Name: copy
remark: gemm.hip:30:0:     TotalSGPRs: 12
remark: gemm.hip:30:0:     VGPRs: 9
remark: gemm.hip:30:0:     AGPRs: 0
remark: gemm.hip:30:0:     Occupancy [waves/SIMD]: 8
remark: gemm.hip:30:0:     LDS Size [bytes/block]: 0
"""


def test_ptxas_report_gives_each_kernel_its_figures():
    assert parse_ptxas(PTXAS) == [
        KernelResources("_Z4gemmPKfS0_Pfi", "sm_90", 40, 16384, 0, 0),
        KernelResources("_Z2tkIfLi8192EEvPT_", "sm_90", 10, 32768, 800, 96),
        KernelResources("scale", "sm_90", 8, 0, 0, 0),
        KernelResources("_ZN2ns5innerEPf", "sm_80", 12, 0, 0, 0),
    ]


def test_amd_remarks_give_each_kernel_its_figures():
    assert parse_amd_remarks(AMD_REMARKS, "gfx942") == [
        # 62 VGPRs aligned to 64, then the 8 AGPRs: one register file
        KernelResources("_Z4gemmPKfS0_Pfi", "gfx942", 72, 16384, 16, 3, 6),
        KernelResources("copy", "gfx942", 9, 0, 0, 0, 8),
    ]


@pytest.mark.parametrize("symbol, name", [
    ("_Z4gemmPKfS0_Pfi", "gemm"),
    ("_Z2tkIfLi8192EEvPT_", "tk"),  # a template instantiation: its base name
    ("_ZN2ns5innerEPf", "inner"),
    ("_ZN5outer5inner4deepILi3EEEvPf", "deep"),  # a template in nested namespaces
    ("_ZN37_GLOBAL__N__178e5d88_6_rk2_cu__Z2lbPf4anonEPf", "anon"),  # nvcc's anonymous namespace
    ("_ZL6staticPf", "static"),
    ("_ZNSt3foo3barEv", "bar"),
    ("_Z6launch6Paramsi", "launch"),  # a parameter of a named type: not part of the name
    ("scale", "scale"),  # extern "C"
    ("_Z99x", "_Z99x"),  # not a mangling: left as it is
])
def test_kernel_names_from_symbols(symbol, name):
    assert kernel_name(symbol) == name


# ---- occupancy, worked by hand from cuda_occupancy.h's rules (H200: 64K registers, 228 KB shared memory,
# 2048 threads and 32 blocks per SM) -------------------------------------------------------------------

@pytest.mark.parametrize("threads, registers, shared, blocks, limit", [
    # 40 x 32 = 1280 registers a warp (5 units of 256); a sub-partition's 16384 hold 12 warps, the SM 48: 6 blocks of 8
    (256, 40, 0, 6, "registers"),
    (256, 64, 0, 4, "registers"),  # 2048 a warp: 8 warps a sub-partition, 32 an SM, 4 blocks of 8 warps
    (256, 33, 0, 6, "registers"),  # 33 x 32 = 1056 rounds up to 1280: as 40
    (256, 32, 0, 8, "threads"),  # registers allow 8 blocks too: the tie names threads
    # 1280 a warp: 12 warps a sub-partition (not 65536 // 1280 = 51 an SM), 48 warps: 24 blocks of 2 warps
    (64, 40, 0, 24, "registers"),
    (32, 16, 0, 32, "blocks per CU"),
    # 48 KB + 1 KB reserved = 50176 bytes a block, 233472 // 50176 = 4
    (128, 32, 49152, 4, "shared memory"),
    # 45666 + 1024 = 46690 fits 5 times in 233472, but a block takes 46720 (a multiple of 128): 4
    (128, 32, 45666, 4, "shared memory"),
    (1024, 128, 0, 1, "registers"),  # 4096 x 32 warps = 131072 registers: no block fits; counted as one
    (32, 300, 0, 1, "registers"),  # more than a thread can have: no block
])
def test_occupancy_on_h200(threads, registers, shared, blocks, limit):
    result = occupancy(H200, threads, registers, shared)
    assert (result.blocks_per_cu, result.limit) == (blocks, limit)
    assert result.resident_blocks(H200) == blocks * 132


@pytest.mark.parametrize("shared, blocks", [
    (13950, 6),  # a block takes 14080 bytes (a multiple of 256): 6 fit in 96 KB, not 7
    (13000, 7),  # 13056 bytes: 7 fit, with nothing reserved per block
])
def test_occupancy_before_compute_capability_8(shared, blocks):
    volta = replace(H200, name="volta", arch="sm_70", smem_per_cu=98304)
    assert occupancy(volta, 128, 32, shared).blocks_per_cu == blocks


@pytest.mark.parametrize("threads, registers, shared, waves_per_simd, blocks, limit", [
    (256, 72, 0, 6, 6, "registers"),  # 6 waves a SIMD x 4 SIMDs = 24 waves: 6 blocks of 4 waves
    (256, 64, 16384, 8, 4, "shared memory"),  # 64 KB of LDS holds 4 blocks of 16 KB
    (256, 128, 0, None, 4, "registers"),  # 512 VGPRs a lane // 128 = 4 waves a SIMD: 16 waves, 4 blocks
    (256, 100, 0, None, 4, "registers"),  # 100 VGPRs take 104 (granules of 8): 4 waves a SIMD, not 5
    (256, 32, 0, None, 8, "threads"),  # 32 waves of 64 a CU: 8 blocks of 4 waves
])
def test_occupancy_on_mi300x(threads, registers, shared, waves_per_simd, blocks, limit):
    result = occupancy(MI300X, threads, registers, shared, waves_per_simd)
    assert (result.blocks_per_cu, result.limit) == (blocks, limit)


def test_residency_is_validated():
    with pytest.raises(ValueError, match="at least 1"):
        Residency(0, 256, 32, 0, "threads", "x")
    with pytest.raises(ValueError, match="limit must be one of"):
        Residency(1, 256, 32, 0, "luck", "x")


@pytest.fixture(scope="module")
def calculator(tmp_path_factory):
    """NVIDIA's occupancy calculator (cuda_occupancy.h) built as a host program with nvcc."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    binary = tmp_path_factory.mktemp("oracle") / "occupancy_oracle"
    build = subprocess.run(["nvcc", "-std=c++17", "-o", str(binary), str(ROOT / "tests" / "native" / "occupancy_oracle.cu")],
                           capture_output=True, text=True)
    if build.returncode != 0:
        pytest.skip(f"the calculator does not build here: {build.stderr[:300]}")
    return binary


@pytest.mark.parametrize("model", ["h200", "h100", "a100"])
def test_occupancy_agrees_with_nvidias_calculator(calculator, model):
    hw = load_hw(model)
    cases = [(t, r, s) for t in (32, 64, 96, 100, 128, 192, 256, 384, 512, 640, 768, 1024)
             for r in (16, 24, 32, 33, 40, 48, 56, 64, 72, 80, 96, 128, 168, 200, 255)
             for s in (0, 1, 4096, 16384, 45666, 49152, 100000, 160000, 232448)]
    stdin = "".join(f"{t} {r} {s}\n" for t, r, s in cases)
    capability = hw.arch.removeprefix("sm_")
    run = subprocess.run([str(calculator), capability, str(hw.max_threads_per_cu), str(hw.regs_per_cu), str(hw.warp_size),
                          str(hw.smem_per_cu)], input=stdin, capture_output=True, text=True, check=True)
    expected = [max(1, int(line)) for line in run.stdout.split()]
    assert len(expected) == len(cases)
    wrong = [(case, want, occupancy(hw, *case).blocks_per_cu) for case, want in zip(cases, expected)
             if occupancy(hw, *case).blocks_per_cu != want]
    assert not wrong, f"{len(wrong)} of {len(cases)} differ, e.g. (threads, registers, shared), calculator, ours: {wrong[:5]}"


def test_register_budget_of_launch_bounds():
    assert register_budget(H200, 256, 2) == 128  # 2 blocks of 8 warps: 4 warps a sub-partition, 4096 registers each
    assert register_budget(H200, 384, 1) == 168  # 12 warps: 3 a sub-partition, 5461 rounds down to 5376 a warp
    assert register_budget(H200, 256, None) == 255  # one block of 256 could take all: ptxas stops at 255
    assert register_budget(MI300X, 256, 2) == 256  # HIP: 2 waves a SIMD, 512 VGPRs a lane
    assert register_budget(MI300X, 256, 3) == 168  # 512 // 3 = 170, down to a granule of 8


# ---- the kernel as written ----------------------------------------------------------------------------

KERNELS = b"""\
#define THREADS 256
#define MIN_BLOCKS 2
#define N 256
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS) bounded(float* a) { a[threadIdx.x] = 1; }
__global__ void __launch_bounds__(128) capped(float* a) { a[threadIdx.x] = 1; }
__global__ void __launch_bounds__(1024, 2) squeezed(float* a) { a[threadIdx.x] = 1; }
__global__ void tiled(float* a) {
  const int rows = 32;
  __shared__ float tile[rows][33];
  __shared__ double acc[N];
  extern __shared__ float dynamic[];
  a[threadIdx.x] = tile[0][threadIdx.x] + acc[threadIdx.x] + dynamic[0];
}
template <typename T, int B> __global__ void generic(T* a) { __shared__ T s[B]; a[threadIdx.x] = s[threadIdx.x]; }
template <typename T, int B> __global__ void unlaunched(T* a) { __shared__ T s[B]; a[threadIdx.x] = s[threadIdx.x]; }
void run(double* d) { generic<double, 512><<<8, 256>>>(d); }
"""


def _kernel(data: bytes, name: str, path: str = "kernels.cu"):
    src = load_bytes(path, data)
    return src, next(k for k in analyze(FileContext(src)).kernels if k.name == name)


def test_launch_bounds_with_min_blocks_give_the_compilers_register_budget():
    src, kernel = _kernel(KERNELS, "bounded")
    result = residency(FileContext(src), kernel, H200, 256, use_compiler=False)
    assert result == Residency(2, 256, 128, 0, "launch bounds",
                               "__launch_bounds__(256, 2), no shared memory (compiler not used)")


def test_launch_bounds_without_min_blocks_keep_the_default_registers():
    src, kernel = _kernel(KERNELS, "capped")
    result = residency(FileContext(src), kernel, H200, 128, use_compiler=False)
    assert (result.blocks_per_cu, result.registers_per_thread, result.limit) == (16, 32, "threads")
    assert result.source == "__launch_bounds__(128) with the default 32 registers per thread, no shared memory (compiler not used)"


def test_launch_bounds_tighter_than_the_default_registers():
    src, kernel = _kernel(KERNELS, "squeezed")
    result = residency(FileContext(src), kernel, H200, 1024, use_compiler=False)
    # 2 blocks of 32 warps: 16 warps a sub-partition, 1024 registers a warp: 32 a thread
    assert (result.blocks_per_cu, result.registers_per_thread) == (2, 32)


def test_default_counts_the_static_shared_arrays_and_the_dynamic_bytes():
    src, kernel = _kernel(KERNELS, "tiled")
    result = residency(FileContext(src), kernel, H200, 256, dynamic_shared_bytes=1000, use_compiler=False)
    shared = 32 * 33 * 4 + 256 * 8 + 1000
    assert result == Residency(8, 256, 32, shared, "threads",
                               f"default: 32 registers per thread, {shared} bytes of shared memory (compiler not used)")


def test_default_sizes_a_template_by_its_launch():
    src, kernel = _kernel(KERNELS, "generic")
    result = residency(FileContext(src), kernel, H200, 256, use_compiler=False)
    assert result.shared_bytes_per_block == 512 * 8


def test_default_says_when_it_cannot_size_the_shared_arrays():
    src, kernel = _kernel(KERNELS, "unlaunched")
    result = residency(FileContext(src), kernel, H200, 256, dynamic_shared_bytes=4096, use_compiler=False)
    assert result.shared_bytes_per_block is None
    assert result.source == ("default: 32 registers per thread, static shared memory not sized, 4096 bytes dynamic "
                             "(compiler not used)")


@pytest.mark.parametrize("threads, dynamic", [(0, 0), (-5, -100), (4096, 1 << 40)])
def test_odd_figures_give_a_residency(threads, dynamic):
    src, kernel = _kernel(KERNELS, "tiled")
    result = residency(FileContext(src), kernel, H200, threads, dynamic_shared_bytes=dynamic, use_compiler=False)
    assert result.blocks_per_cu >= 1 and result.threads_per_block >= 1


# ---- through a compiler -------------------------------------------------------------------------------


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """A folder alone on PATH (with the shell's tools) where a stand-in compiler is put: it logs each call
    and prints `report` on stderr."""
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "calls"

    def put(name: str, report: str, status: int = 0) -> Path:
        (tmp_path / f"{name}.out").write_text(report)
        script = folder / name
        script.write_text(f'#!/bin/sh\necho "$@" >> {log}\ncat {tmp_path / f"{name}.out"} >&2\nexit {status}\n')
        script.chmod(0o755)
        return log

    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    return put


def test_a_file_is_compiled_once_for_all_its_kernels(stand_in, tmp_path):
    log = stand_in("nvcc", PTXAS)
    path = str(tmp_path / "gemm.cu")
    first = resource_usage(path, b"// a file\n", "cuda", H200)
    assert isinstance(first, dict) and sorted(first) == ["gemm", "scale", "tk"]  # sm_80's kernel left out
    assert "--resource-usage" in log.read_text() and "-arch=sm_90" in log.read_text()
    log.write_text("")
    src = load_bytes(path, b"__global__ void gemm(float* a) { a[blockIdx.x] = 0; }\n"
                           b"__global__ void scale(float* a) { a[blockIdx.y] = 0; }\n")
    ctx = FileContext(src)
    kernels = analyze(ctx).kernels
    for kernel in (*kernels, *kernels):
        residency(ctx, kernel, H200, 256)
    assert len(log.read_text().splitlines()) == 1  # once for the file's kernels, in its context
    residency(ctx, kernels[0], H200, 256, flags=("-O2",))
    assert len(log.read_text().splitlines()) == 2  # other flags: compiled again
    residency(FileContext(src), kernels[0], H200, 256)
    assert len(log.read_text().splitlines()) == 3  # nothing is kept between contexts


def test_compiler_figures_win_over_launch_bounds(stand_in):
    stand_in("nvcc", PTXAS.replace("_Z4gemmPKfS0_Pfi", "_Z7boundedPf"))
    src, kernel = _kernel(KERNELS, "bounded")
    result = residency(FileContext(src), kernel, H200, 256, dynamic_shared_bytes=512)
    assert result == Residency(6, 256, 40, 16384 + 512, "registers", "nvcc --resource-usage -arch=sm_90")


def test_a_template_takes_its_instantiation_with_fewest_blocks(stand_in):
    stand_in("nvcc", PTXAS.replace("_Z2tkIfLi8192EEvPT_", "_Z7genericIdLi512EEvPT_")
             + PTXAS.replace("_Z2tkIfLi8192EEvPT_", "_Z7genericIfLi64EEvPT_").replace("32768 bytes smem", "256 bytes smem"))
    src, kernel = _kernel(KERNELS, "generic")
    result = residency(FileContext(src), kernel, H200, 256)
    assert (result.blocks_per_cu, result.shared_bytes_per_block) == (6, 32768)
    assert result.source == "nvcc --resource-usage -arch=sm_90; the fewest blocks of 2 instantiations"


def test_hipcc_remarks_through_the_amd_path(stand_in):
    log = stand_in("hipcc", AMD_REMARKS.replace("_Z4gemmPKfS0_Pfi", "_Z5tiledPf"))
    src, kernel = _kernel(KERNELS, "tiled", "kernels.hip")
    result = residency(FileContext(src), kernel, MI300X, 256)
    assert result == Residency(4, 256, 72, 16384, "shared memory",
                               "hipcc -Rpass-analysis=kernel-resource-usage --offload-arch=gfx942")
    assert "-Rpass-analysis=kernel-resource-usage" in log.read_text()


def test_a_compiler_for_another_gpu_is_not_asked(stand_in):
    log = stand_in("nvcc", PTXAS)
    src, kernel = _kernel(KERNELS, "tiled")
    result = residency(FileContext(src), kernel, MI300X, 256)
    assert result.source.endswith("(nvcc does not build for mi300x (gfx942))")
    assert not log.exists()


def test_without_a_compiler_the_fallback_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    src, kernel = _kernel(KERNELS, "bounded")
    result = residency(FileContext(src), kernel, H200, 256)
    assert result.source == "__launch_bounds__(256, 2), no shared memory (no nvcc or hipcc on PATH)"


def test_a_compile_without_a_resource_report(stand_in):
    stand_in("nvcc", "nvcc warning : Resource usage is not shown as the final resource allocation is not done.\n")
    src, kernel = _kernel(KERNELS, "tiled")
    result = residency(FileContext(src), kernel, H200, 256, flags=("-rdc=true",))
    assert result.source.endswith("(nvcc reported no resource usage: nvcc warning : Resource usage is not shown as the "
                                  "final resource allocation is not done.)")


def test_a_kernel_the_compiler_did_not_build(stand_in):
    stand_in("nvcc", PTXAS)
    src, kernel = _kernel(KERNELS, "unlaunched")
    result = residency(FileContext(src), kernel, H200, 256)
    assert "(the compiler built no code for unlaunched" in result.source


def test_a_failed_compile_falls_back_with_the_first_error(stand_in, tmp_path):
    stand_in("nvcc", f"{tmp_path}/swzc-cc-x/kernels.cu(3): error: expected a \")\"\n1 error detected\n", status=2)
    src, kernel = _kernel(KERNELS, "tiled")
    result = residency(FileContext(src), kernel, H200, 256)
    assert result.source.endswith('(the compile failed: kernels.cu(3): error: expected a ")")')
    assert result.registers_per_thread == 32


# ---- with nvcc ----------------------------------------------------------------------------------------

REAL = b"""\
#define TILE 256
template <int N> __global__ void __launch_bounds__(TILE) staged(const float* in, float* out) {
  __shared__ float buffer[8192];  // 32 KB
  for (int i = threadIdx.x; i < 8192; i += TILE) buffer[i] = in[blockIdx.x * 8192 + i] * N;
  __syncthreads();
  out[blockIdx.x * TILE + threadIdx.x] = buffer[(threadIdx.x * 33) % 8192];
}
extern "C" __global__ void plain(float* out) { out[threadIdx.x] = 2.0f; }
void run(const float* in, float* out) { staged<3><<<64, TILE>>>(in, out); plain<<<1, 32>>>(out); }
"""


@needs_nvcc
def test_nvcc_reports_a_kernels_registers_and_shared_memory(tmp_path):
    path = tmp_path / "staged.cu"
    path.write_bytes(REAL)
    usage = resource_usage(str(path), REAL, "cuda", H200)
    assert isinstance(usage, dict), usage
    (staged,) = usage["staged"]
    assert staged.symbol.startswith("_Z6stagedILi3EE") and staged.target == "sm_90"
    assert staged.shared_bytes == 32768 and 1 <= staged.registers <= 255
    assert "plain" in usage

    src, kernel = _kernel(REAL, "staged", str(path))
    result = residency(FileContext(src), kernel, H200, 256, dynamic_shared_bytes=1024)
    assert result.source == "nvcc --resource-usage -arch=sm_90"
    assert (result.registers_per_thread, result.shared_bytes_per_block) == (staged.registers, 32768 + 1024)
    assert result == occupancy(H200, 256, staged.registers, 33792, source=result.source)
    # the compiler's figures are marked so (a calibration keeps them: swzc.model.calibration), a guess is not
    assert result.compiled and not residency(FileContext(src), kernel, H200, 256, use_compiler=False).compiled


@needs_nvcc
def test_a_file_that_does_not_compile_gives_the_fallback(tmp_path):
    hostile = b"""\
__global__ void broken(float* a) {
  __shared__ float s[64];
  a[threadIdx.x] = s[threadIdx.x] +;
}
"""
    path = tmp_path / "broken.cu"
    src, kernel = _kernel(hostile, "broken", str(path))
    result = residency(FileContext(src), kernel, H200, 128)
    assert result.source.startswith("default: 32 registers per thread, 256 bytes of shared memory (the compile failed: ")
    assert "broken.cu" in result.source and str(tmp_path) not in result.source
    assert result.blocks_per_cu == 16
