"""The GPU harness: the original and the rewritten kernel, built side by side, checked and timed.

Each variant of the source file is built as a shared library with a small launcher appended
(`swzc_launch`, through cudaLaunchKernel or hipLaunchKernel) and the file's own `main` renamed away.
A generated C++ program loads both libraries, fills the kernel's inputs with random data, poisons its outputs, runs
both variants on the same inputs and compares every output byte (two seeds), then times them with
CUDA events, interleaved (A B A' per round, A' giving the A/A noise), with L2 flushed before every
timed launch.  Buffers, scalars and the launch come from the file (the launch site, the footprint
analysis) or from a launch spec (TOML) that fills the gaps.

Two toolchains build it.  nvcc builds CUDA sources, and HIP sources through swzc's HIP compatibility
header (swzc/compat), for an NVIDIA GPU; hipcc builds HIP sources for an AMD GPU.  A HIP source gets a
HIP launcher and a HIP harness either way, so the same text runs on both.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import tomllib
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from swzc.analysis import KernelInfo, kernel_function, parameter_list
from swzc.errors import ExitCode, SwzcError
from swzc.footprint import ELEMENT_BYTES, Footprint, footprint
from swzc.source import SourceFile

HOST_TYPES = {  # C type -> (host storage type, kind) for buffers and scalars
    "float": ("float", "float"), "double": ("double", "float"), "half": ("__half", "half"), "__half": ("__half", "half"),
    "int": ("int", "int"), "unsigned": ("unsigned", "int"), "unsigned int": ("unsigned", "int"), "long": ("long", "int"),
    "size_t": ("size_t", "int"), "int64_t": ("int64_t", "int"), "uint32_t": ("uint32_t", "int"), "int32_t": ("int32_t", "int"),
    "long long": ("long long", "int"), "unsigned long long": ("unsigned long long", "int"), "char": ("char", "int"),
    "uint8_t": ("uint8_t", "int"), "bool": ("bool", "int"), "short": ("short", "int"),
}


@dataclass(frozen=True)
class Buffer:
    name: str
    ctype: str
    count: int
    role: str  # "in", "out" or "inout"
    fill: str = "uniform"  # uniform | range:LO:HI | arange:STEP | const:V


@dataclass(frozen=True)
class Scalar:
    name: str
    ctype: str
    value: float | int


@dataclass(frozen=True)
class LaunchPlan:
    kernel: str  # the name to launch, with template arguments if any
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shmem: int
    params: tuple[Buffer | Scalar, ...]  # in parameter order
    tolerance: float = 0.0  # 0: outputs must match bit for bit


@dataclass(frozen=True)
class Timing:
    a: tuple[float, ...]
    b: tuple[float, ...]
    a2: tuple[float, ...]  # A again in each round: the A/A noise


@dataclass(frozen=True)
class HarnessResult:
    correct: bool
    detail: str  # the first mismatch, or "" when correct
    timing: Timing | None


def plan_launch(src: SourceFile, kernel: KernelInfo, spec: Mapping | None = None) -> LaunchPlan:
    """The launch to run: the file's first fixed launch, buffers sized by the footprint, the spec on top."""
    spec = dict(spec or {})
    function = kernel_function(src, kernel)
    if function is None:
        raise SwzcError(f"{src.path}: kernel {kernel.name} not found")
    launch = next((la for la in kernel.launches if la.grid is not None and la.block is not None), None)
    grid = tuple(spec.get("grid") or (launch.grid if launch else ())) or None
    block = tuple(spec.get("block") or (launch.block if launch else ())) or None
    if not grid or not block:
        raise SwzcError(f"{src.path}:{kernel.line}: {kernel.name}: the launch's grid and block are not known; "
                        "give them in a launch spec (grid = [x, y, z], block = [x, y, z])")
    fp = footprint(src, kernel, kernel.launches.index(launch), None) if launch is not None else "no launch"
    bindings = dict(launch.bindings) if launch else {}
    args = spec.get("args", {})
    params: list[Buffer | Scalar] = []
    for name, base, pointer in ((p.name, p.type, p.pointer) for p in parameter_list(function)):
        given = args.get(name, {})
        ctype = given.get("type", base.replace("const ", "").replace("__restrict__", "").strip())
        if ctype not in HOST_TYPES:
            raise SwzcError(f"{src.path}:{kernel.line}: {kernel.name}: parameter {name} has type {ctype!r}, which the harness "
                            "does not fill; give its type in the launch spec")
        if pointer:
            count, role = _buffer_shape(fp, name, ctype)
            count = int(given.get("count", count or 0))
            role = given.get("role", role)
            if count <= 0:
                raise SwzcError(f"{src.path}:{kernel.line}: {kernel.name}: the size of buffer {name} is not known from the "
                                "source; give `count` for it in the launch spec")
            params.append(Buffer(name, ctype, count, role, given.get("fill", "uniform")))
        else:
            value = given.get("value", bindings.get(name))
            if value is None:
                raise SwzcError(f"{src.path}:{kernel.line}: {kernel.name}: the value of {name} is not known at the launch; "
                                "give `value` for it in the launch spec or with --set")
            params.append(Scalar(name, ctype, value))
    name = kernel.name + spec.get("template", "")
    return LaunchPlan(name, grid, block, int(spec.get("shmem", 0)), tuple(params), float(spec.get("tolerance", 0.0)))  # type: ignore[arg-type]


def _buffer_shape(fp: Footprint | str, name: str, ctype: str) -> tuple[int | None, str]:
    """Elements a buffer needs (the furthest element any block touches, plus one) and whether it is read,
    written or both, from the footprint."""
    if isinstance(fp, str):
        return None, "inout"
    mine = [a for a in fp.accesses if a.array == name]
    if not mine or any(u.array == name for u in fp.unknown):
        return None, "inout"
    elem = ELEMENT_BYTES.get(ctype, mine[0].elem_bytes)
    furthest = max(
        int(a.sectors.max() + 1) * 32 + sum(max(0, b) * (t - 1) for b, t in zip(a.block_bytes, fp.tiles)) for a in mine
    )
    reads, writes = any(not a.write for a in mine), any(a.write for a in mine)
    role = "inout" if reads and writes else ("out" if writes else "in")
    return math.ceil(furthest / elem), role


def load_spec(path: str | None, kernel: str) -> dict:
    if not path:
        return {}
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SwzcError(f"{path}: cannot read the launch spec: {exc}") from None
    return raw.get("kernel", {}).get(kernel, {})


# ---- code generation ----------------------------------------------------------------------------------

LAUNCHER = """
// swzc harness: launch entry point, appended to a copy of the file
extern "C" cudaError_t swzc_launch(dim3 grid, dim3 block, size_t shmem, void** args) {{
  return cudaLaunchKernel((const void*)&{kernel}, grid, block, args, shmem, 0);
}}
"""


HIP_IRREGULAR = {"cudaDevAttrL2CacheSize": "hipDeviceAttributeL2CacheSize"}  # HIP names not spelt cuda -> hip


def in_dialect(cuda_text: str, dialect: str) -> str:
    """Runtime code written against CUDA, in HIP's spelling for a HIP source.  The harness uses only
    calls whose HIP name is the CUDA name with `cuda` changed to `hip`, with the same arguments, and the
    names in HIP_IRREGULAR."""
    if dialect != "hip":
        return cuda_text
    text = cuda_text.replace("#include <cuda_runtime.h>", "#include <hip/hip_runtime.h>")
    text = text.replace("#include <cuda_fp16.h>", "#include <hip/hip_fp16.h>")
    for cuda, hip in HIP_IRREGULAR.items():
        text = text.replace(cuda, hip)
    return re.sub(r"\bcuda(?=[A-Z])", "hip", text)


def launcher(kernel: str, dialect: str) -> str:
    return in_dialect(LAUNCHER, dialect).format(kernel=kernel)  # the kernel's own name is left as it is


def _fill(buffer: Buffer, host: str) -> str:
    kind = HOST_TYPES[buffer.ctype][1]
    how, _, rest = buffer.fill.partition(":")
    if how == "range":
        lo, hi = (int(v) for v in rest.split(":"))
        value = f"({lo} + (long long)(next_u64() % (unsigned long long)({hi} - {lo})))"
    elif how == "arange":
        value = f"((long long)i * {int(rest)})"
    elif how == "const":
        value = f"({float(rest) if kind != 'int' else int(rest)})"
    else:
        value = "(next_unit() * 2.0 - 1.0)" if kind != "int" else "((long long)(next_u64() % 1000ull))"
    if kind == "half":
        return f"for (size_t i = 0; i < {buffer.count}ull; ++i) {host}[i] = __float2half((float){value});\n"
    return f"for (size_t i = 0; i < {buffer.count}ull; ++i) {host}[i] = ({HOST_TYPES[buffer.ctype][0]}){value};\n"


def harness_source(plan: LaunchPlan, flush_bytes: int, dialect: str = "cuda") -> str:
    """The harness program.  Before each timed launch it writes max(`flush_bytes`, twice the L2 the device
    reports) to evict the last launch's data (HardwareModel.flush_bytes covers a memory-side cache too)."""
    buffers = [p for p in plan.params if isinstance(p, Buffer)]
    lines = []
    for i, b in enumerate(buffers):
        t = HOST_TYPES[b.ctype][0]
        lines.append(f"  const size_t n{i} = {b.count}ull; const size_t bytes{i} = n{i} * sizeof({t});\n"
                     f"  {t}* h{i} = ({t}*)malloc(bytes{i}); void* pristine{i}; void* work{i};\n"
                     f"  check(cudaMalloc(&pristine{i}, bytes{i}), \"cudaMalloc\"); check(cudaMalloc(&work{i}, bytes{i}), \"cudaMalloc\");\n")
    decls = "".join(lines)
    fills = "".join(
        f"    {{ {_fill(b, f'h{i}')} check(cudaMemcpy(pristine{i}, h{i}, bytes{i}, cudaMemcpyHostToDevice), \"fill\"); }}\n"
        for i, b in enumerate(buffers) if b.role != "out"
    )
    reset = "".join(
        f"  check(cudaMemcpy(work{i}, pristine{i}, bytes{i}, cudaMemcpyDeviceToDevice), \"reset\");\n" if b.role != "out"
        else f"  if (poison) check(cudaMemset(work{i}, 0xff, bytes{i}), \"poison\");\n"
        for i, b in enumerate(buffers)
    )
    outs = [i for i, b in enumerate(buffers) if b.role != "in"]
    save = "".join(f"  out.push_back(std::vector<unsigned char>(bytes{i})); check(cudaMemcpy(out.back().data(), work{i}, bytes{i}, "
                   f"cudaMemcpyDeviceToHost), \"copy out\");\n" for i in outs)
    args, scalars = [], []
    bi = 0
    for p in plan.params:
        if isinstance(p, Buffer):
            args.append(f"&work{bi}")
            bi += 1
        else:
            t = HOST_TYPES[p.ctype][0]
            scalars.append(f"  {t} s_{p.name} = ({t})({p.value!r});\n")
            args.append(f"&s_{p.name}")
    decls, fills, reset, save = (in_dialect(text, dialect) for text in (decls, fills, reset, save))
    kinds = [HOST_TYPES[buffers[i].ctype][1] for i in outs]
    compare = "".join(
        f"  if (!same(a[{k}], b[{k}], {'true' if kind == 'float' and buffers[i].ctype == 'float' else 'false'}, tolerance, &at)) "
        f"{{ printf(\"{{\\\"seed\\\": %d, \\\"match\\\": false, \\\"buffer\\\": \\\"{buffers[i].name}\\\", \\\"byte\\\": %zu}}\\n\", seed, at); ok = false; }}\n"
        for k, (i, kind) in enumerate(zip(outs, kinds))
    )
    g, b_ = plan.grid, plan.block
    template = in_dialect(_HARNESS, dialect)
    return template.format(decls=decls, fills=fills, reset=reset, save=save, args=", ".join(args), scalars="".join(scalars),
                           compare=compare, gx=g[0], gy=g[1], gz=g[2], bx=b_[0], by=b_[1], bz=b_[2], shmem=plan.shmem,
                           flush=flush_bytes, tolerance=repr(plan.tolerance))


_HARNESS = r"""// Generated by swzc: runs variant A (original) and B (rewritten) of one kernel on the same inputs.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <dlfcn.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

typedef cudaError_t (*launch_fn)(dim3, dim3, size_t, void**);
static void check(cudaError_t e, const char* what) {{
  if (e != cudaSuccess) {{ fprintf(stderr, "swzc harness: %s: %s\n", what, cudaGetErrorString(e)); exit(3); }}
}}
static unsigned long long state = 1;
static unsigned long long next_u64() {{ state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state; }}
static double next_unit() {{ return (next_u64() >> 11) * (1.0 / 9007199254740992.0); }}
static bool same(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, bool floats, double tol, size_t* at) {{
  if (tol == 0.0 || !floats) {{
    for (size_t i = 0; i < a.size(); ++i) if (a[i] != b[i]) {{ *at = i; return false; }}
    return true;
  }}
  const float* x = (const float*)a.data(); const float* y = (const float*)b.data();
  for (size_t i = 0; i < a.size() / 4; ++i)
    if (!(std::fabs(x[i] - y[i]) <= tol * std::max(1.0f, std::fabs(x[i])))) {{ *at = 4 * i; return false; }}
  return true;
}}

int main(int argc, char** argv) {{
  if (argc < 4) {{ fprintf(stderr, "usage: harness A.so B.so check|time ROUNDS|profile-a|profile-b\n"); return 2; }}
  launch_fn launch[2];
  for (int v = 0; v < 2; ++v) {{
    void* lib = dlopen(argv[1 + v], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {{ fprintf(stderr, "swzc harness: %s\n", dlerror()); return 3; }}
    launch[v] = (launch_fn)dlsym(lib, "swzc_launch");
    if (!launch[v]) {{ fprintf(stderr, "swzc harness: no swzc_launch in %s\n", argv[1 + v]); return 3; }}
  }}
  const std::string mode = argv[3];
  const double tolerance = {tolerance};
{decls}{scalars}  void* args[] = {{{args}}};
  const dim3 grid({gx}, {gy}, {gz}), block({bx}, {by}, {bz});
  int device = 0, device_l2 = 0;
  check(cudaGetDevice(&device), "device");
  check(cudaDeviceGetAttribute(&device_l2, cudaDevAttrL2CacheSize, device), "L2 size");
  const size_t flush_bytes = std::max((size_t){flush}ull, 2 * (size_t)device_l2);
  void* flush; check(cudaMalloc(&flush, flush_bytes), "cudaMalloc flush");
  auto fill = [&](unsigned long long seed) {{
    state = seed * 0x9E3779B97F4A7C15ull + 1;
{fills}  }};
  auto run = [&](int v, bool poison) {{
{reset}    check(launch[v](grid, block, {shmem}, args), "launch");
    check(cudaDeviceSynchronize(), "kernel");
  }};
  if (mode == "check") {{
    bool ok = true;
    for (int seed = 1; seed <= 2; ++seed) {{
      fill(seed);
      std::vector<std::vector<unsigned char>> outs[2];
      for (int v = 0; v < 2; ++v) {{
        run(v, true);
        std::vector<std::vector<unsigned char>>& out = outs[v];
{save}      }}
      const std::vector<std::vector<unsigned char>>& a = outs[0];
      const std::vector<std::vector<unsigned char>>& b = outs[1];
      size_t at = 0;
{compare}    }}
    printf("{{\"correct\": %s}}\n", ok ? "true" : "false");
    return 0;
  }}
  fill(1);
  if (mode == "profile-a" || mode == "profile-b") {{ run(mode == "profile-a" ? 0 : 1, false); return 0; }}
  const int rounds = argc > 4 ? atoi(argv[4]) : 30;
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto timed = [&](int v) {{
    run(v, false);  // restores inputs that the kernel overwrites, outside the timed part
    check(cudaMemset(flush, 0x5a, flush_bytes), "flush L2");
    check(cudaDeviceSynchronize(), "flush");
    cudaEventRecord(e0);
    check(launch[v](grid, block, {shmem}, args), "launch");
    cudaEventRecord(e1);
    check(cudaEventSynchronize(e1), "time");
    float ms = 0; cudaEventElapsedTime(&ms, e0, e1); return ms;
  }};
  for (int w = 0; w < 3; ++w) {{ timed(0); timed(1); }}
  std::vector<float> ta, tb, ta2;
  for (int r = 0; r < rounds; ++r) {{ ta.push_back(timed(0)); tb.push_back(timed(1)); ta2.push_back(timed(0)); }}
  auto dump = [](const char* k, const std::vector<float>& t) {{
    printf("\"%s\": [", k); for (size_t i = 0; i < t.size(); ++i) printf("%s%.6f", i ? ", " : "", t[i]); printf("]");
  }};
  printf("{{"); dump("a", ta); printf(", "); dump("b", tb); printf(", "); dump("a2", ta2); printf("}}\n");
  return 0;
}}
"""


# ---- building and running ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Build:
    folder: Path
    harness: Path
    a: Path
    b: Path
    toolchain: str = "nvcc"  # "nvcc" (NVIDIA GPU) or "hipcc" (AMD GPU)
    kernel: str = ""  # the launched kernel's name, to pick its dispatch out of a profile


def toolchain_for(dialect: str, vendor: str | None) -> str:
    """The compiler for a source of this dialect on this GPU vendor (None: no GPU, e.g. a build-only check)."""
    if vendor == "amd":
        if dialect != "hip":
            raise SwzcError("a CUDA source is benchmarked on an NVIDIA GPU only; this machine has an AMD GPU "
                            "(port the file to HIP, or use --no-bench)", ExitCode.CHECK_FAILED)
        return "hipcc"
    return "nvcc"


def build(name: str, original: bytes, rewritten: bytes, plan: LaunchPlan, arch: str, flush_bytes: int,
          include_dir: str, folder: Path | None = None, dialect: str = "cuda", toolchain: str = "nvcc") -> Build:
    """Compile the two variants as shared libraries and the harness, in parallel; raise with the command
    on a compile error.  `arch` is nvcc's -arch (sm_90) or hipcc's --offload-arch (gfx942)."""
    if not shutil.which(toolchain):
        raise SwzcError(f"the benchmark needs {toolchain} on PATH", ExitCode.CHECK_FAILED)
    out = Path(folder or tempfile.mkdtemp(prefix="swzc-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    code = launcher(plan.kernel, dialect).encode()
    stem = Path(name).stem
    suffix = ".hip" if toolchain == "hipcc" else ".cu"
    if toolchain == "hipcc":
        compiler = ["hipcc", f"--offload-arch={arch}", "-std=c++17"]
        shared = ["-fPIC", "-shared"]
    else:
        compiler = ["nvcc", f"-arch={arch}", "-std=c++17"]
        shared = ["-Xcompiler", "-fPIC", "-shared"]
        if dialect == "hip":  # HIP on an NVIDIA GPU: through the compatibility header
            compiler += ["-I", str(resources.files("swzc.compat"))]
    jobs = []
    for tag, data in (("a", original), ("b", rewritten)):
        path = out / f"{stem}.{tag}{suffix}"
        path.write_bytes(data + code)
        lib = out / f"{stem}.{tag}.so"
        jobs.append([*compiler, "-O3", *shared, "-Dmain=swzc_user_main", "-I", include_dir, "-o", str(lib), str(path)])
    harness = out / f"{stem}.harness{suffix}"
    harness.write_text(harness_source(plan, flush_bytes, dialect))
    binary = out / f"{stem}.harness"
    jobs.append([*compiler, "-O2", "-o", str(binary), str(harness), "-ldl"])

    def run(cmd: list[str]) -> tuple[list[str], subprocess.CompletedProcess]:
        return cmd, subprocess.run(cmd, capture_output=True, text=True)

    with ThreadPoolExecutor(3) as pool:
        for cmd, done in pool.map(run, jobs):
            if done.returncode != 0:
                raise SwzcError(f"benchmark build failed: {shlex.join(cmd)}\n{done.stderr.strip()[:2000]}", ExitCode.CHECK_FAILED)
    return Build(out, binary, out / f"{stem}.a.so", out / f"{stem}.b.so", toolchain, plan.kernel.partition("<")[0])


def run_harness(built: Build, rounds: int = 30, timeout: int = 300) -> HarnessResult:
    base = [str(built.harness), str(built.a), str(built.b)]
    check = subprocess.run([*base, "check"], capture_output=True, text=True, timeout=timeout)
    if check.returncode != 0:
        raise SwzcError(f"the benchmark harness failed: {shlex.join(base + ['check'])}\n{check.stderr.strip()}", ExitCode.CHECK_FAILED)
    lines = [json.loads(line) for line in check.stdout.splitlines() if line.startswith("{")]
    correct = bool(lines and lines[-1].get("correct"))
    detail = "" if correct else json.dumps(lines[0])
    if not correct:
        return HarnessResult(False, detail, None)
    timed = subprocess.run([*base, "time", str(rounds)], capture_output=True, text=True, timeout=timeout)
    if timed.returncode != 0:
        raise SwzcError(f"the benchmark harness failed: {shlex.join(base + ['time'])}\n{timed.stderr.strip()}", ExitCode.CHECK_FAILED)
    doc = json.loads(timed.stdout.strip().splitlines()[-1])
    return HarnessResult(True, "", Timing(tuple(doc["a"]), tuple(doc["b"]), tuple(doc["a2"])))


def gpu_vendor() -> str | None:
    """"nvidia" (nvidia-smi lists a GPU, nvcc is here) or "amd" (rocminfo lists a GPU agent, hipcc is
    here); None without a GPU, or when SWZC_NO_GPU is set."""
    if os.environ.get("SWZC_NO_GPU"):
        return None
    if shutil.which("nvidia-smi") and shutil.which("nvcc"):
        run = _quiet(["nvidia-smi", "-L"])
        if run is not None and run.returncode == 0 and "GPU" in run.stdout:
            return "nvidia"
    if shutil.which("rocminfo") and shutil.which("hipcc"):
        run = _quiet(["rocminfo"])
        if run is not None and run.returncode == 0 and amd_gpu_name(run.stdout):
            return "amd"
    return None


def gpu_present() -> bool:
    return gpu_vendor() is not None


def gpu_name() -> str:
    vendor = gpu_vendor()
    if vendor == "nvidia":
        run = _quiet(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
        return run.stdout.strip().splitlines()[0] if run is not None and run.returncode == 0 and run.stdout.strip() else ""
    if vendor == "amd":
        run = _quiet(["rocminfo"])
        return amd_gpu_name(run.stdout) if run is not None else ""
    return ""


def amd_gpu_name(rocminfo: str) -> str:
    """The marketing name of the first GPU agent in rocminfo's listing ("" if it lists none)."""
    for agent in re.split(r"\n\*+\s*\nAgent \d+", rocminfo)[1:]:
        fields: dict[str, str] = {}
        for key, _, value in (line.partition(":") for line in agent.splitlines()):
            if value.strip():
                fields.setdefault(key.strip(), value.strip())  # the agent's own, not a nested ISA's or pool's
        if fields.get("Device Type") == "GPU":
            return fields.get("Marketing Name") or fields.get("Name", "")
    return ""


def _quiet(cmd: list[str]) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
