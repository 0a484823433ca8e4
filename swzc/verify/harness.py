"""The GPU harness: the original and the rewritten kernel, built side by side, checked and timed.

Each variant of the source file is built as a shared library with a small launcher appended
(`swzc_launch`, through cudaLaunchKernel or hipLaunchKernel) and the file's own `main` renamed away.
A generated C++ program loads both libraries, fills the kernel's inputs with random data, poisons its outputs, runs
both variants on the same inputs and compares every output byte (two seeds), then times them with
CUDA events, interleaved (A B A' per round, A' giving the A/A noise), with L2 flushed before every
timed launch.  Buffers, scalars and the launch come from the file (the launch site, the footprint
analysis) or from a launch spec (TOML) that fills the gaps.

The fills, the poisoning and the comparison are host code (swzc/native/harness_host.h, plain C++ over
bytes): the generated program only moves bytes to and from the GPU, and the tests compile the same
header for the CPU.  Elements are stored by kind (float, double, half, bfloat16, fp8 e4m3/e5m2, integers
of every width, and vectors of these), each fill finite for its type.

Two toolchains build it.  nvcc builds CUDA sources, and HIP sources through swzc's HIP compatibility
header (swzc/compat), for an NVIDIA GPU; hipcc builds HIP sources for an AMD GPU.  A HIP source gets a
HIP launcher and a HIP harness either way, so the same text runs on both.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from swzc.core import processes
from swzc.analysis.kernels import kernel_function
from swzc.analysis.records import KernelInfo, Launch
from swzc.frontend.syntax import parameter_list
from swzc.analysis.context import FileContext
from swzc.core.errors import ExitCode, SwzcError
from swzc.frontend.evaluate import Scope
from swzc.model.footprint import Footprint, footprint
from swzc.core.inputs import read_regular
from swzc.analysis.templates import TemplateArguments, base_type, template_arguments, template_parameters

KIND_BYTES = {"F32": 4, "F64": 8, "F16": 2, "BF16": 2, "E4M3": 1, "E5M2": 1, "I8": 1, "U8": 1, "I16": 2, "U16": 2,
              "I32": 4, "U32": 4, "I64": 8, "U64": 8, "BOOL": 1}
FLOAT_KINDS = frozenset({"F32", "F64", "F16", "BF16", "E4M3", "E5M2"})
BUILD_TIMEOUT_S = 900
RUN_TIMEOUT_S = 300


@dataclass(frozen=True)
class ElementType:
    """How the harness stores one element: a kind of the host header (swzc/native/harness_host.h) and, for
    vector types such as float4 or half2, how many components."""

    kind: str  # F32, F64, F16, BF16, E4M3, E5M2, I8, U8, I16, U16, I32, U32, I64, U64, BOOL
    components: int = 1

    @property
    def bytes(self) -> int:
        return KIND_BYTES[self.kind] * self.components

    @property
    def floating(self) -> bool:
        return self.kind in FLOAT_KINDS


def _element_types() -> dict[str, ElementType]:
    scalar = {
        "F32": ("float",), "F64": ("double",),
        "F16": ("half", "__half", "_Float16", "__half_raw"),
        "BF16": ("__nv_bfloat16", "nv_bfloat16", "__nv_bfloat16_raw", "__hip_bfloat16", "hip_bfloat16", "__bf16"),
        "E4M3": ("__nv_fp8_e4m3", "__hip_fp8_e4m3"), "E5M2": ("__nv_fp8_e5m2", "__hip_fp8_e5m2"),
        "I8": ("char", "signed char", "int8_t"), "U8": ("unsigned char", "uint8_t", "__nv_fp8_storage_t"),
        "I16": ("short", "short int", "signed short", "int16_t"), "U16": ("unsigned short", "unsigned short int", "uint16_t"),
        "I32": ("int", "signed", "signed int", "int32_t"), "U32": ("unsigned", "unsigned int", "uint32_t", "uint"),
        "I64": ("long", "long int", "long long", "long long int", "int64_t", "ssize_t", "ptrdiff_t", "intptr_t"),
        "U64": ("unsigned long", "unsigned long int", "unsigned long long", "unsigned long long int", "uint64_t", "size_t",
                "uintptr_t"),
        "BOOL": ("bool",),
    }
    table = {name: ElementType(kind) for kind, names in scalar.items() for name in names}
    vectors = {"float": "F32", "double": "F64", "int": "I32", "uint": "U32", "char": "I8", "uchar": "U8", "short": "I16",
               "ushort": "U16", "long": "I64", "ulong": "U64", "longlong": "I64", "ulonglong": "U64"}
    for stem, kind in vectors.items():
        for n in (1, 2, 3, 4):
            table[f"{stem}{n}"] = ElementType(kind, n)
    for name in ("half2", "__half2", "_Float16_2"):
        table[name] = ElementType("F16", 2)
    for name in ("__nv_bfloat162", "nv_bfloat162", "__hip_bfloat162"):
        table[name] = ElementType("BF16", 2)
    for fmt in ("e4m3", "e5m2"):
        table[f"__nv_fp8x2_{fmt}"] = ElementType(fmt.upper(), 2)
        table[f"__nv_fp8x4_{fmt}"] = ElementType(fmt.upper(), 4)
    return table


ELEMENT_TYPES = _element_types()  # C type (as written, aliases resolved) -> how the harness stores it
FILLS = ("uniform", "range:LO:HI", "arange:STEP", "const:V")


@dataclass(frozen=True)
class Buffer:
    name: str
    ctype: str  # the element type, aliases and template parameters resolved (a key of ELEMENT_TYPES)
    count: int  # elements (a float4 buffer of n vectors: n)
    role: str  # "in", "out" or "inout"
    fill: str = "uniform"  # uniform | range:LO:HI | arange:STEP | const:V


@dataclass(frozen=True)
class Scalar:
    name: str
    ctype: str
    value: float | int | tuple[float | int, ...]  # a tuple: one value per component of a vector type (half2, float4)


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
    detail: str  # the first mismatch, or why the check could not run; "" when correct
    timing: Timing | None
    failed: bool = False  # the check did not run to its end: a crash, a timeout, output with no verdict in it


def plan_launch(ctx: FileContext, kernel: KernelInfo, spec: Mapping | None = None) -> LaunchPlan:
    """The launch to run: the file's first fixed launch, buffers sized by the footprint, the spec on top.
    Parameter types are read through the file's aliases and the kernel's template arguments (written at the
    launch, deduced from the arguments' declared types, or given in the spec as `template = "<float, 128>"`)."""
    spec = dict(spec or {})
    src = ctx.src
    where = f"{src.path}:{kernel.line}: {kernel.name}"
    function = kernel_function(ctx, kernel)
    if function is None:
        raise SwzcError(f"{src.path}: kernel {kernel.name} not found")
    index = next((i for i, la in enumerate(kernel.launches) if la.grid is not None and la.block is not None), None)
    launch = kernel.launches[index] if index is not None else None
    grid = tuple(spec.get("grid") or (launch.grid if launch else ())) or None
    block = tuple(spec.get("block") or (launch.block if launch else ())) or None
    if not grid or not block:
        raise SwzcError(f"{where}: the launch's grid and block are not known; "
                        "give them in a launch spec (grid = [x, y, z], block = [x, y, z])")
    scope = ctx.scope()
    params = parameter_list(function)
    tparams = template_parameters(function)
    targs = template_arguments(src, function, params, launch, scope, str(spec.get("template", "")))
    types = targs.types(tparams)
    fp: Footprint | str = "no launch"
    if launch is not None and index is not None:  # the footprint sees deduced template types too
        launches = list(kernel.launches)
        launches[index] = replace(launch, type_args=tuple(sorted({**dict(launch.type_args), **types}.items())))
        fp = footprint(ctx, replace(kernel, launches=tuple(launches)), index, None)
    bindings = dict(launch.bindings) if launch else {}
    args = spec.get("args", {})
    planned: list[Buffer | Scalar] = []
    for p in params:
        given = args.get(p.name, {})
        written = str(given.get("type") or base_type(p.type))
        ctype = _resolve(written, types, scope)
        if ctype not in ELEMENT_TYPES:
            if written in targs.unknown:
                raise SwzcError(_template_refusal(where, kernel.name, targs, launch, f"parameter {p.name} has type {written!r}"))
            raise SwzcError(f"{where}: parameter {p.name} has type {ctype!r}, which the harness does not fill; give `type` "
                            "for it in the launch spec, one the harness fills (such as float, __half, __nv_bfloat16, "
                            "__nv_fp8_e4m3, int8_t, float4)")
        if p.pointer:
            count, role = _buffer_shape(fp, p.name, ELEMENT_TYPES[ctype].bytes)
            count = int(given.get("count", count or 0))
            role = given.get("role", role)
            if count <= 0:
                raise SwzcError(f"{where}: the size of buffer {p.name} is not known from the source; "
                                "give `count` for it in the launch spec")
            if role not in ("in", "out", "inout"):
                raise SwzcError(f"{where}: buffer {p.name} has role {role!r}; the roles are in, out and inout")
            fill = str(given.get("fill", "uniform"))
            fill_parts(fill, f"{where}: buffer {p.name}")
            planned.append(Buffer(p.name, ctype, count, role, fill))
        else:
            value = given.get("value", bindings.get(p.name))
            if value is None:
                raise SwzcError(f"{where}: the value of {p.name} is not known at the launch; "
                                "give `value` for it in the launch spec or with --set")
            components = ELEMENT_TYPES[ctype].components
            values = tuple(value) if isinstance(value, (list, tuple)) else (value,)
            if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values) or len(values) not in (1, components):
                raise SwzcError(f"{where}: the value of {p.name} must be a finite number"
                                + (f" or a list of {components}, one per component" if components > 1 else "") + f", not {value!r}")
            planned.append(Scalar(p.name, ctype, values if len(values) > 1 else values[0]))
    if targs.unknown:
        raise SwzcError(_template_refusal(where, kernel.name, targs, launch, f"template parameter {targs.unknown[0]} is not fixed"))
    return LaunchPlan(kernel.name + targs.listing, grid, block, int(spec.get("shmem", 0)), tuple(planned),  # type: ignore[arg-type]
                      float(spec.get("tolerance", 0.0)))


def _resolve(written: str, types: Mapping[str, str], scope: Scope) -> str:
    """A parameter's element type: template parameters replaced by their arguments, aliases and type macros followed."""
    current = scope.resolve_type(written)
    for _ in range(8):
        if current not in types:
            break
        current = scope.resolve_type(base_type(types[current]))
    return current


def _template_refusal(where: str, kernel: str, targs: TemplateArguments, launch: Launch | None, what: str) -> str:
    site = f"the launch at line {launch.line}" if launch is not None else "no launch in the file"
    unknown = ", ".join(targs.unknown)
    return (f"{where}: {what}: {site} does not fix template parameter(s) {unknown}, and the arguments' declared types "
            f"do not show them; give the kernel's template arguments in the launch spec: [kernel.{kernel}] "
            f"template = \"{targs.listing}\" with {unknown} written out (e.g. float, 128)")


def fill_parts(fill: str, what: str = "fill") -> tuple[str, float, float]:
    """A buffer's fill as the host header's (Fill, a, b): uniform, range:LO:HI, arange:STEP, const:V."""
    how, _, rest = fill.partition(":")
    try:
        if how == "uniform" and not rest:
            return "UNIFORM", 0.0, 0.0
        if how == "range":
            lo, hi = (int(v) for v in rest.split(":"))
            if hi > lo:
                return "RANGE", float(lo), float(hi)
        elif how == "arange":
            return "ARANGE", float(int(rest)), 0.0
        elif how == "const":
            value = float(rest)
            if math.isfinite(value):
                return "CONST", value, 0.0
    except ValueError:
        pass
    raise SwzcError(f"{what}: fill {fill!r} is not one of {', '.join(FILLS)} (LO < HI, integers)")


def _buffer_shape(fp: Footprint | str, name: str, elem: int) -> tuple[int | None, str]:
    """Elements a buffer needs (the furthest element any block touches, plus one) and whether it is read,
    written or both, from the footprint."""
    if isinstance(fp, str):
        return None, "inout"
    mine = [a for a in fp.accesses if a.array == name]
    if not mine or any(u.array == name for u in fp.unknown):
        return None, "inout"
    furthest = max(
        int(a.sectors.max() + 1) * 32 + sum(max(0, b) * (t - 1) for b, t in zip(a.block_bytes, fp.tiles)) for a in mine
    )
    reads, writes = any(not a.write for a in mine), any(a.write for a in mine)
    role = "inout" if reads and writes else ("out" if writes else "in")
    return math.ceil(furthest / elem), role


MAX_SPEC_BYTES = 1 << 20


def load_spec(path: str | None, kernel: str) -> dict:
    if not path:
        return {}
    try:
        raw = tomllib.loads(read_regular(path, MAX_SPEC_BYTES).decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
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
    for cuda, hip in HIP_IRREGULAR.items():
        text = text.replace(cuda, hip)
    return re.sub(r"\bcuda(?=[A-Z])", "hip", text)


def launcher(kernel: str, dialect: str) -> str:
    return in_dialect(LAUNCHER, dialect).format(kernel=kernel)  # the kernel's own name is left as it is


def native_dir() -> str:
    """The folder of the C++ swzc compiles at run time (the harness's host header, the launch observer)."""
    return str(resources.files("swzc.native"))


def harness_source(plan: LaunchPlan, flush_bytes: int, dialect: str = "cuda") -> str:
    """The harness program.  Before each timed launch it writes max(`flush_bytes`, twice the L2 the device
    reports) to evict the last launch's data (HardwareModel.flush_bytes covers a memory-side cache too)."""
    buffers = [p for p in plan.params if isinstance(p, Buffer)]
    table = []
    for b in buffers:
        element = ELEMENT_TYPES[b.ctype]
        fill, lo, hi = fill_parts(b.fill)
        table.append(f'    {{"{b.name}", swzc::{element.kind}, {b.count * element.components}ull, swzc::{b.role.upper()}, '
                     f"swzc::{fill}, {lo!r}, {hi!r}}},\n")
    scalars, args = [], []
    at = 0
    for p in plan.params:
        if isinstance(p, Buffer):
            args.append(f"&work[{at}]")
            at += 1
            continue
        element = ELEMENT_TYPES[p.ctype]
        width = KIND_BYTES[element.kind]
        values = p.value if isinstance(p.value, tuple) else (p.value,) * element.components
        stores = []
        for c, v in enumerate(values):
            if isinstance(v, int) and not isinstance(v, bool) or not element.floating and float(v).is_integer():
                stores.append(f"swzc::store_int(swzc::{element.kind}, {int(v) & (1 << 64) - 1}ull, s_{p.name} + {width * c});")
            else:
                stores.append(f"swzc::store(swzc::{element.kind}, {float(v)!r}, s_{p.name} + {width * c});")
        scalars.append(f"  alignas(16) unsigned char s_{p.name}[{element.bytes}];\n  " + " ".join(stores) + "\n")
        args.append(f"s_{p.name}")
    g, b_ = plan.grid, plan.block
    return in_dialect(_HARNESS, dialect).format(
        buffers="".join(table), scalars="".join(scalars), args=", ".join([*args, "nullptr"]), gx=g[0], gy=g[1], gz=g[2],
        bx=b_[0], by=b_[1], bz=b_[2], shmem=plan.shmem, flush=flush_bytes, tolerance=repr(plan.tolerance))


_HARNESS = r"""// Generated by swzc: runs variant A (original) and B (rewritten) of one kernel on the same inputs.
// Fills, poisoning and the comparison are the host code of harness_host.h; this file moves the bytes.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "harness_host.h"

typedef cudaError_t (*launch_fn)(dim3, dim3, size_t, void**);
static void check(cudaError_t e, const char* what) {{
  if (e != cudaSuccess) {{ fprintf(stderr, "swzc harness: %s: %s\n", what, cudaGetErrorString(e)); exit(3); }}
}}

// The device of swzc::check: the kernel's buffers on the GPU and the two variants' launchers.
struct Gpu {{
  std::vector<void*>& work;
  launch_fn* launchers;
  dim3 grid, block;
  void** args;
  void upload(size_t i, const std::vector<unsigned char>& image) {{
    check(cudaMemcpy(work[i], image.data(), image.size(), cudaMemcpyHostToDevice), "upload");
  }}
  void launch(int v) {{
    check(launchers[v](grid, block, {shmem}, args), "launch");
    check(cudaDeviceSynchronize(), "kernel");
  }}
  std::vector<unsigned char> download(size_t i, size_t bytes) {{
    std::vector<unsigned char> out(bytes);
    check(cudaMemcpy(out.data(), work[i], bytes, cudaMemcpyDeviceToHost), "download");
    return out;
  }}
}};

int main(int argc, char** argv) {{
  if (argc < 4) {{ fprintf(stderr, "usage: harness A.so B.so check|time ROUNDS|profile-a|profile-b|timeline FILE BLOCKS\n"); return 2; }}
  launch_fn launch[2];
  void* libs[2];
  for (int v = 0; v < 2; ++v) {{
    void* lib = libs[v] = dlopen(argv[1 + v], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {{ fprintf(stderr, "swzc harness: %s\n", dlerror()); return 3; }}
    launch[v] = (launch_fn)dlsym(lib, "swzc_launch");
    if (!launch[v]) {{ fprintf(stderr, "swzc harness: no swzc_launch in %s\n", argv[1 + v]); return 3; }}
  }}
  const std::string mode = argv[3];
  const std::vector<swzc::Buffer> buffers = {{
{buffers}  }};
  std::vector<void*> work(buffers.size(), nullptr), pristine(buffers.size(), nullptr);
  for (size_t i = 0; i < buffers.size(); ++i) {{
    check(cudaMalloc(&work[i], buffers[i].bytes()), "cudaMalloc");
    if (buffers[i].role != swzc::OUT) check(cudaMalloc(&pristine[i], buffers[i].bytes()), "cudaMalloc");
  }}
{scalars}  void* args[] = {{{args}}};
  const dim3 grid({gx}, {gy}, {gz}), block({bx}, {by}, {bz});
  if (mode == "check") {{
    Gpu gpu{{work, launch, grid, block, args}};
    swzc::check(buffers, gpu, {tolerance}, stdout);
    return 0;
  }}
  for (size_t i = 0; i < buffers.size(); ++i) {{
    if (buffers[i].role == swzc::OUT) continue;
    const std::vector<unsigned char> image = swzc::fill(buffers[i], 1, i);
    check(cudaMemcpy(pristine[i], image.data(), image.size(), cudaMemcpyHostToDevice), "fill");
  }}
  auto run = [&](int v) {{  // restores inputs that the kernel overwrites
    for (size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i].role != swzc::OUT)
        check(cudaMemcpy(work[i], pristine[i], buffers[i].bytes(), cudaMemcpyDeviceToDevice), "reset");
    check(launch[v](grid, block, {shmem}, args), "launch");
    check(cudaDeviceSynchronize(), "kernel");
  }};
  if (mode == "profile-a" || mode == "profile-b") {{ run(mode == "profile-a" ? 0 : 1); return 0; }}
  int device = 0, device_l2 = 0;
  check(cudaGetDevice(&device), "device");
  check(cudaDeviceGetAttribute(&device_l2, cudaDevAttrL2CacheSize, device), "L2 size");
  const size_t flush_bytes = std::max((size_t){flush}ull, 2 * (size_t)device_l2);
  void* flush; check(cudaMalloc(&flush, flush_bytes), "cudaMalloc flush");
  const int rounds = argc > 4 ? atoi(argv[4]) : 30;
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto timed = [&](int v) {{
    run(v);  // outside the timed part
    check(cudaMemset(flush, 0x5a, flush_bytes), "flush L2");
    check(cudaDeviceSynchronize(), "flush");
    cudaEventRecord(e0);
    check(launch[v](grid, block, {shmem}, args), "launch");
    cudaEventRecord(e1);
    check(cudaEventSynchronize(e1), "time");
    float ms = 0; cudaEventElapsedTime(&ms, e0, e1); return ms;
  }};
  if (mode == "timeline") {{  // B stamps its first argv[5] blocks (swzc.verify.calibrate): the flushed launch's, to argv[4]
    typedef int (*arm_fn)(unsigned long long);
    typedef int (*save_fn)(const char*);
    arm_fn arm = (arm_fn)dlsym(libs[1], "swzc_timeline_arm");
    save_fn save = (save_fn)dlsym(libs[1], "swzc_timeline_save");
    if (!arm || !save || argc < 6) {{ fprintf(stderr, "swzc harness: B keeps no timeline\n"); return 3; }}
    const unsigned long long blocks = (unsigned long long)grid.x * grid.y * grid.z;
    const unsigned long long stamped = std::min(blocks, strtoull(argv[5], nullptr, 10));  // the first ones
    if (stamped == 0 || arm(stamped)) {{ fprintf(stderr, "swzc harness: timeline buffers\n"); return 3; }}
    timed(1);
    return save(argv[4]) ? 3 : 0;
  }}
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
          include_dir: str, folder: Path, dialect: str = "cuda", toolchain: str = "nvcc",
          flags: tuple[str, ...] = ()) -> Build:
    """Compile the two variants as shared libraries and the harness, all at once, into `folder` (the caller
    owns it and removes it); raise with the command on a compile error.  `arch` is nvcc's -arch (sm_90) or
    hipcc's --offload-arch (gfx942); `flags` are the build's own include folders and defines (and the user's
    compile flags), the ones the analysis and the compile check used."""
    builder = Builder(name, plan.kernel, arch, include_dir, Path(folder), dialect, toolchain, flags)
    a, b, harness = builder.compile([builder.variant("a", original), builder.variant("b", rewritten),
                                     builder.harness("", plan, flush_bytes)])
    return Build(builder.folder, harness, a, b, toolchain, plan.kernel.partition("<")[0])


class Builder:
    """The compiles of one kernel's benchmark into one folder (the caller owns it): each variant of the file
    as a shared library, and harness programs, each a plan's launch.  The variants do not depend on the
    launch, nor the harness on the variant: a loop over several sizes builds the original once, each
    candidate once and a harness per size (swzc.verify.bench)."""

    def __init__(self, name: str, kernel: str, arch: str, include_dir: str, folder: Path, dialect: str = "cuda",
                 toolchain: str = "nvcc", flags: tuple[str, ...] = ()) -> None:
        if not shutil.which(toolchain):
            raise SwzcError(f"the benchmark needs {toolchain} on PATH", ExitCode.CHECK_FAILED)
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.stem, self.kernel, self.dialect, self.toolchain = Path(name).stem, kernel, dialect, toolchain
        self.include_dir, self.flags = include_dir, flags
        self.suffix = ".hip" if toolchain == "hipcc" else ".cu"
        if toolchain == "hipcc":
            self.compiler = ["hipcc", f"--offload-arch={arch}", "-std=c++17"]
            self.shared = ["-fPIC", "-shared"]
        else:
            self.compiler = ["nvcc", f"-arch={arch}", "-std=c++17"]
            self.shared = ["-Xcompiler", "-fPIC", "-shared"]
            if dialect == "hip":  # HIP on an NVIDIA GPU: through the compatibility header
                self.compiler += ["-I", str(resources.files("swzc.compat"))]

    def variant(self, tag: str, data: bytes) -> tuple[list[str], Path]:
        """The command that compiles one variant of the file (with the launcher the harness calls), and its library."""
        path = self.folder / f"{self.stem}.{tag}{self.suffix}"
        path.write_bytes(data + launcher(self.kernel, self.dialect).encode())
        lib = self.folder / f"{self.stem}.{tag}.so"
        return [*self.compiler, "-O3", *self.shared, "-Dmain=swzc_user_main", "-I", self.include_dir, *self.flags,
                "-o", str(lib), str(path)], lib

    def harness(self, tag: str, plan: LaunchPlan, flush_bytes: int) -> tuple[list[str], Path]:
        """The command that compiles the harness of one launch, and its program."""
        source = self.folder / f"{self.stem}.harness{tag}{self.suffix}"
        source.write_text(harness_source(plan, flush_bytes, self.dialect))
        binary = self.folder / f"{self.stem}.harness{tag}"
        return [*self.compiler, "-O2", "-I", native_dir(), "-o", str(binary), str(source), "-ldl", "-lpthread"], binary

    def compile(self, jobs: list[tuple[list[str], Path]]) -> list[Path]:
        """Run the compiles at once; raise with the command on the first that fails."""
        for got in self.compile_each(jobs):
            if isinstance(got, SwzcError):
                raise got
        return [out for _, out in jobs]

    def compile_each(self, jobs: list[tuple[list[str], Path]]) -> list[Path | SwzcError]:
        """Run the compiles at once: each one's output, or the error naming its command."""
        return [out if done.ok else SwzcError(f"benchmark build failed ({done.status()}): {done.command}\n"
                                              f"{done.stderr.strip()[:2000]}", ExitCode.CHECK_FAILED)
                for done, (_, out) in zip(processes.run_all([command for command, _ in jobs], BUILD_TIMEOUT_S), jobs)]


def run_harness(built: Build, rounds: int = 30, timeout: int = RUN_TIMEOUT_S) -> HarnessResult:
    """Check, then time.  A harness that crashes, times out or prints no verdict is a failed check, with how
    it ended and the first lines of its output; outputs that differ are an incorrect result."""
    base = [str(built.harness), str(built.a), str(built.b)]
    check = processes.run([*base, "check"], timeout)
    lines = _json_lines(check.stdout)
    verdict = next((line for line in reversed(lines) if "correct" in line), None)
    if not check.ok or verdict is None:
        return HarnessResult(False, _failure("check", check), None, failed=True)
    if not verdict["correct"]:
        first = next((line for line in lines if line.get("match") is False), {})
        return HarnessResult(False, f"buffer {first.get('buffer', '?')} differs from the original's at byte "
                                    f"{first.get('byte', '?')} (element {first.get('element', '?')}, seed {first.get('seed', '?')})", None)
    timed = processes.run([*base, "time", str(rounds)], timeout)
    doc = next((line for line in reversed(_json_lines(timed.stdout)) if {"a", "b", "a2"} <= line.keys()), None)
    if not timed.ok or doc is None:
        return HarnessResult(True, _failure("timed", timed), None, failed=True)
    return HarnessResult(True, "", Timing(tuple(doc["a"]), tuple(doc["b"]), tuple(doc["a2"])))


def _json_lines(output: str) -> list[dict]:
    found = []
    for line in output.splitlines():
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict):
                found.append(doc)
    return found


def _failure(run: str, done: processes.Finished) -> str:
    """One failed harness run, for the attempt and the kernel's reason."""
    how = "printed no result" if done.ok else done.status()
    return f"the harness {how} in its {run} run; its output began:\n{done.head()}\n(command: {done.command})"


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
    """The model of the first GPU this process may use ("" without one)."""
    found = gpus()
    return found[0].name if found else ""


ANY_CARD = "any"  # no card model asked for or known: any GPU will do


@dataclass(frozen=True)
class Gpu:
    """One GPU this process may use: `ident` selects it alone in `variable` (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES)."""

    ident: str
    name: str
    variable: str


def gpus() -> list[Gpu]:
    """The GPUs this process may use, in order: those nvidia-smi (or rocminfo) lists, narrowed to the ones
    CUDA_VISIBLE_DEVICES (HIP_VISIBLE_DEVICES) names where it is set, as the runtime does (a MIG instance by its
    UUID, named by its GPU); none without a GPU or with SWZC_NO_GPU.  rocminfo itself lists only the agents
    ROCR_VISIBLE_DEVICES leaves."""
    vendor = gpu_vendor()
    if vendor == "nvidia":
        run = _quiet(["nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"])
        listed = [tuple(part.strip() for part in line.split(",", 2)) for line in (run.stdout if run is not None and run.ok else "").splitlines()]
        found = [(index, uuid, name) for index, uuid, name in (row for row in listed if len(row) == 3)]
        return [Gpu(ident, name, "CUDA_VISIBLE_DEVICES") for ident, name in _visible(found, "CUDA_VISIBLE_DEVICES", _mig_instances)]
    if vendor == "amd":
        run = _quiet(["rocminfo"])
        names = amd_gpu_names(run.stdout) if run is not None else []
        found = [(str(i), "", name) for i, name in enumerate(names)]
        return [Gpu(ident, name, "HIP_VISIBLE_DEVICES") for ident, name in _visible(found, "HIP_VISIBLE_DEVICES")]
    return []


def _mig_instances() -> dict[str, str]:
    """Each MIG instance's UUID and the model of the GPU it is part of, from `nvidia-smi -L`."""
    run = _quiet(["nvidia-smi", "-L"])
    instances: dict[str, str] = {}
    parent = ""
    for line in (run.stdout if run is not None and run.ok else "").splitlines():
        gpu = re.match(r"GPU \d+: (.+?) \(UUID: ", line)
        if gpu:
            parent = gpu.group(1)
        mig = re.search(r"\bMIG .*\(UUID: (MIG-[^)\s]+)\)", line)
        if mig:
            instances[mig.group(1)] = parent
    return instances


def _visible(found: list[tuple[str, str, str]], variable: str,
             instances: Callable[[], dict[str, str]] | None = None) -> list[tuple[str, str]]:
    """(UUID, else index, to select it by; model) of each listed GPU that `variable` leaves visible, in its order;
    an entry it names that is not listed ends the list there, as the CUDA runtime reads it."""
    given = os.environ.get(variable)
    if given is None:
        return [(uuid or index, name) for index, uuid, name in found]
    visible = []
    for item in (part.strip() for part in given.split(",")):
        match = next(((index, uuid, name) for index, uuid, name in found
                      if item == index or (len(item) > 4 and item.startswith("GPU-") and uuid.startswith(item))), None)
        if match is None and item.startswith("MIG-") and instances is not None:
            mig = next(((uuid, name) for uuid, name in instances().items() if uuid.startswith(item)), None)
            if mig is not None:
                visible.append((item, mig[1]))
                continue
        if match is None:
            break
        visible.append((match[1] or match[0], match[2]))
    return visible


def amd_gpu_name(rocminfo: str) -> str:
    """The marketing name of the first GPU agent in rocminfo's listing ("" if it lists none)."""
    names = amd_gpu_names(rocminfo)
    return names[0] if names else ""


def amd_gpu_names(rocminfo: str) -> list[str]:
    """The marketing name of each GPU agent in rocminfo's listing, in order."""
    names = []
    for agent in re.split(r"\n\*+\s*\nAgent \d+", rocminfo)[1:]:
        fields: dict[str, str] = {}
        for key, _, value in (line.partition(":") for line in agent.splitlines()):
            if value.strip():
                fields.setdefault(key.strip(), value.strip())  # the agent's own, not a nested ISA's or pool's
        if fields.get("Device Type") == "GPU":
            names.append(fields.get("Marketing Name") or fields.get("Name", ""))
    return names


def _quiet(cmd: list[str]) -> processes.Finished | None:
    try:
        return processes.run(cmd, 20)
    except OSError:
        return None
