"""Residency: how many blocks of a kernel run on one compute unit (SM or CU) at once, and from what figures.

The L2 model needs the blocks that run together, blocks per compute unit times compute units.  What a
block takes of a compute unit (its threads, registers and shared memory) bounds how many fit.  The
registers and the static shared memory come from the first of these that gives them:

1. the compiler's report: ``nvcc --resource-usage`` (ptxas' "Used N registers, M bytes smem") or
   ``hipcc -Rpass-analysis=kernel-resource-usage`` (VGPRs, LDS, occupancy in waves per SIMD).  The file is
   compiled once per content, target and flags, never run;
2. the kernel's ``__launch_bounds__``: the register budget the compiler is held to;
3. a stated default: 32 registers per thread and the kernel's static ``__shared__`` arrays where the file
   fixes their sizes.

`residency` never raises on a bad file: a compile that fails or a figure that cannot be read makes the
answer come from the next source, and `Residency.source` says which one and why.

The arithmetic is NVIDIA's occupancy calculator (cuda_occupancy.h in the CUDA toolkit, for compute
capability 7.0 and later): registers are allocated per warp in units of 256 within each of an SM's four
sub-partitions, shared memory per block in units of 128 bytes (256 before compute capability 8.0) with
1 KB per block reserved by the driver from 8.0 on.  AMD compute units are counted in waves: four SIMDs
per CU, each holding the waves its register file allows.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from tree_sitter import Node

from swzc.target import compile as compiling
from swzc.analysis.kernels import kernel_function
from swzc.analysis.records import KernelInfo
from swzc.frontend.scope import local_scope
from swzc.frontend.syntax import text, walk
from swzc.frontend.evaluate import Evaluator, Scope
from swzc.model.footprint import ELEMENT_BYTES
from swzc.target.hw import HardwareModel
if TYPE_CHECKING:
    from swzc.analysis.context import FileContext

LIMITS = ("threads", "blocks per CU", "registers", "shared memory", "launch bounds")  # a tie names the first
DEFAULT_REGISTERS = 32  # per thread, when nothing says more: what a simple kernel compiles to

# NVIDIA, compute capability 7.0 and later (cuda_occupancy.h: cudaOccRegAllocationGranularity,
# cudaOccSubPartitionsPerMultiprocessor, cudaOccSMemAllocationGranularity, reservedSharedMemPerBlock).
REGISTER_UNIT = 256  # registers are given to a warp in multiples of this
SUB_PARTITIONS = 4  # an SM's registers are split evenly over its four sub-partitions
MAX_REGISTERS_PER_THREAD = 255  # what ptxas gives a thread at most
SHARED_UNIT = 128  # shared memory is given to a block in multiples of this (from 8.0 on)
SHARED_UNIT_BEFORE_8 = 256
RESERVED_SHARED_BYTES = 1024  # shared memory the driver keeps per block (from 8.0 on)

# AMD CDNA (gfx90a, gfx942): four SIMDs per CU; VGPRs (with AGPRs, one register file) in granules of 8.
SIMDS_PER_CU = 4
VGPR_UNIT = 8

NVCC_REPORT = "--resource-usage"
HIPCC_REPORT = "-Rpass-analysis=kernel-resource-usage"


@dataclass(frozen=True)
class Residency:
    """The blocks of one kernel resident on one compute unit, the figures that gave it and what bounds it."""

    blocks_per_cu: int  # at least 1: a block that cannot fit is counted as one (its launch would fail)
    threads_per_block: int
    registers_per_thread: int | None  # None when not known
    shared_bytes_per_block: int | None  # static and dynamic; None when the static part is not known
    limit: str  # one of LIMITS: what bounds blocks_per_cu
    source: str  # where the figures came from, as a phrase for a report
    compiled: bool = field(default=False, compare=False)  # the figures are the compiler's for this file (not launch bounds or a default)

    def __post_init__(self) -> None:
        if self.blocks_per_cu < 1:
            raise ValueError(f"blocks_per_cu must be at least 1, not {self.blocks_per_cu}")
        if self.limit not in LIMITS:
            raise ValueError(f"limit must be one of {', '.join(LIMITS)}, not {self.limit!r}")

    def resident_blocks(self, hw: HardwareModel) -> int:
        """Blocks running at once on the whole GPU."""
        return self.blocks_per_cu * hw.compute_units


@dataclass(frozen=True)
class KernelResources:
    """What the compiler reports for one compiled kernel (one instantiation of a template)."""

    symbol: str  # the compiler's (mangled) name
    target: str  # sm_90, gfx942 …
    registers: int  # per thread (AMD: VGPRs and AGPRs)
    shared_bytes: int  # static shared memory (LDS) per block
    stack_bytes: int = 0  # per thread: nvcc's stack frame, hipcc's scratch per lane
    spills: int = 0  # nvcc: bytes of spill stores; hipcc: VGPRs and SGPRs spilled.  0: no spills
    waves_per_simd: int | None = None  # AMD: the compiler's occupancy


# ---- the compiler's report ----------------------------------------------------------------------------

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas(output: str) -> list[KernelResources]:
    """The kernels in ptxas' verbose report (``nvcc --resource-usage`` or ``-Xptxas -v``), in its order.

    Each kernel is a "Compiling entry function 'SYMBOL' for 'sm_XX'" line, its "Function properties" with
    the stack frame and spills, then "Used N registers[, used B barriers][, M bytes smem][, … cmem[0]]",
    which ends it.  The properties of device functions, printed after the kernels that call them, are
    left to the next kernel's entry line to clear."""
    found: list[KernelResources] = []
    entry: tuple[str, str] | None = None
    stack = spills = 0
    for line in output.splitlines():
        if match := _ENTRY.search(line):
            entry, stack, spills = (match.group(1), match.group(2)), 0, 0
        elif match := _FRAME.search(line):
            stack, spills = int(match.group(1)), int(match.group(2))
        elif (match := _USED.search(line)) and entry is not None:
            smem = _SMEM.search(line)
            found.append(KernelResources(entry[0], entry[1], int(match.group(1)), int(smem.group(1)) if smem else 0,
                                         stack, spills))
            entry = None
    return found


_REMARK = re.compile(r":\d+:\d+:\s+(?:remark:\s+)?(Function Name|TotalSGPRs|SGPRs Spill|VGPRs Spill|SGPRs|VGPRs|AGPRs|"
                     r"ScratchSize \[bytes/lane\]|Occupancy \[waves/SIMD\]|LDS Size \[bytes/block\]):\s+(\S+)")


def parse_amd_remarks(output: str, target: str) -> list[KernelResources]:
    """The kernels in hipcc's ``-Rpass-analysis=kernel-resource-usage`` remarks, in their order.

    A kernel is a "Function Name: SYMBOL" remark followed by "VGPRs: N", "AGPRs: N", "LDS Size
    [bytes/block]: N", "Occupancy [waves/SIMD]: N" and the like, each as "FILE:LINE:COL: remark: …" (the
    driver) or "remark: FILE:LINE:COL: …" (llc).  A kernel whose VGPRs are not a number is left out."""
    found: list[KernelResources] = []
    records: list[tuple[str, dict[str, int]]] = []
    for line in output.splitlines():
        match = _REMARK.search(line)
        if match is None:
            continue
        key, value = match.groups()
        if key == "Function Name":
            records.append((value, {}))
        elif records and value.isdigit():
            records[-1][1][key] = int(value)
    for symbol, figures in records:
        if "VGPRs" not in figures:
            continue
        vgprs, agprs = figures["VGPRs"], figures.get("AGPRs", 0)
        # gfx90a and later hold AGPRs after the VGPRs in one file, the VGPRs aligned to 4 (LLVM's totalnumvgprs)
        registers = vgprs if not agprs else _round_up(vgprs, 4) + agprs
        found.append(KernelResources(symbol, target, registers, figures.get("LDS Size [bytes/block]", 0),
                                     figures.get("ScratchSize [bytes/lane]", 0),
                                     figures.get("SGPRs Spill", 0) + figures.get("VGPRs Spill", 0),
                                     figures.get("Occupancy [waves/SIMD]")))
    return found


def kernel_name(symbol: str) -> str:
    """The kernel's unqualified name from its symbol: ``_Z4gemmPKfS0_Pfi`` -> gemm, ``_Z2tkIfLi8EEvPT_`` -> tk
    (a template's base name), ``_ZN2ns5innerEPf`` -> inner.  A symbol that is not Itanium-mangled (an
    ``extern "C"`` kernel) is its own name."""
    if not symbol.startswith("_Z"):
        return symbol
    at = 2
    if symbol.startswith("L", at):  # internal linkage
        at += 1
    nested = symbol.startswith("N", at)
    if nested:
        at += 1
        while at < len(symbol) and symbol[at] in "rVKRO":  # qualifiers of a member function
            at += 1
    last = ""
    while at < len(symbol):
        if nested and symbol.startswith("St", at):  # std::
            at += 2
            continue
        if nested and symbol.startswith("L", at):  # a static name inside a namespace
            at += 1
            continue
        digits = re.match(r"\d+", symbol[at:])
        if digits is None:
            break
        start = at + len(digits.group())
        length = int(digits.group())
        if length == 0 or start + length > len(symbol):
            return symbol  # not a mangling this reads
        last = symbol[start : start + length]
        at = start + length
        if not nested:
            break
    return last or symbol


def resource_usage(src_path: str, data: bytes, dialect: str, hw: HardwareModel,
                   flags: tuple[str, ...] = ()) -> dict[str, tuple[KernelResources, ...]] | str:
    """Compile the file once and read the compiler's figures for each kernel, by the kernel's unqualified
    name (a template's instantiations, or same-named kernels of several namespaces, share one entry); or
    why there are none: no compiler for the model's GPU, or the compile failed.

    The compile is compile.py's (the same command, temporary folder and timeout), with the compiler's
    resource report asked for.  `residency` keeps the result in the file's context, per target and flags,
    so that ranking several kernels of one file compiles it once."""
    tool = compiling.compiler(dialect)
    if tool is None:
        return "no nvcc or hipcc on PATH"
    if (tool == "hipcc") != (hw.vendor == "amd"):
        return f"{tool} does not build for {hw.name} ({hw.arch})"
    include_dir = os.path.dirname(os.path.abspath(src_path))
    name = compiling.source_name(src_path)
    report = HIPCC_REPORT if tool == "hipcc" else NVCC_REPORT
    try:
        code, _, output = compiling.compile_copy(name, data, dialect, hw, (*flags, report), include_dir)
    except OSError as exc:  # the compiler could not be started, or the folder written
        return f"{tool} could not run: {exc.strerror or exc}"
    if code is None:
        return output
    result: dict[str, tuple[KernelResources, ...]] | str
    if code != 0:
        result = f"the compile failed: {_first_error(output, name)}"
    else:
        if tool == "hipcc":
            kernels = parse_amd_remarks(output, hw.arch)
        else:
            everything = parse_ptxas(output)
            kernels = [k for k in everything if k.target == hw.nvcc_arch] or everything  # flags may add targets
        grouped: dict[str, list[KernelResources]] = {}
        for k in kernels:
            same = grouped.setdefault(kernel_name(k.symbol), [])
            if all(other.symbol != k.symbol for other in same):
                same.append(k)
        # none at all: nvcc -rdc=true says "Resource usage is not shown as the final resource allocation is not done"
        result = {kernel: tuple(group) for kernel, group in grouped.items()} or (
            f"{tool} reported no resource usage: {_first_line(output)}")
    return result


def _first_error(output: str, name: str) -> str:
    """The compiler's first error line, the temporary folder left out of the file's path."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    line = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "")
    return _first_line(re.sub(r"\S*/(?=" + re.escape(name) + r")", "", line))


def _first_line(output: str) -> str:
    """The first line of the compiler's output that says something, kept short for a report."""
    line = next((line.strip() for line in output.splitlines() if line.strip()), "no output")
    return line if len(line) <= 200 else line[:197] + "..."


# ---- occupancy ----------------------------------------------------------------------------------------


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def _compute_capability(hw: HardwareModel) -> int:
    """The major compute capability of an NVIDIA model (9 for sm_90, sm_90a); 9 when the arch says none."""
    match = re.fullmatch(r"sm_(\d+)\d[a-z]?", hw.arch)
    return int(match.group(1)) if match else 9


def occupancy(hw: HardwareModel, threads_per_block: int, registers_per_thread: int | None,
              shared_bytes_per_block: int | None, waves_per_simd: int | None = None,
              source: str = "figures as given") -> Residency:
    """Blocks per compute unit for a block of these figures: the least of what the threads, the block
    slots, the registers and the shared memory allow.  None for registers or shared memory leaves that
    resource out.  `waves_per_simd` (AMD: the compiler's occupancy) stands for the registers when given."""
    threads = max(1, threads_per_block)
    shared = max(0, shared_bytes_per_block or 0)
    warps = math.ceil(threads / hw.warp_size)
    bounds = {"threads": hw.max_threads_per_cu // hw.warp_size // warps, "blocks per CU": hw.max_blocks_per_cu}
    if hw.vendor == "nvidia":
        if registers_per_thread:
            per_warp = _round_up(registers_per_thread * hw.warp_size, REGISTER_UNIT)
            # Counting the warps each sub-partition holds also refuses the blocks the hardware refuses (its
            # check rounds a block's warps up to a multiple of the sub-partitions).
            per_partition = 0 if registers_per_thread > MAX_REGISTERS_PER_THREAD else hw.regs_per_cu // SUB_PARTITIONS // per_warp
            bounds["registers"] = per_partition * SUB_PARTITIONS // warps
        if _compute_capability(hw) >= 8:
            per_block = _round_up(shared + RESERVED_SHARED_BYTES, SHARED_UNIT)
        else:
            per_block = _round_up(shared, SHARED_UNIT_BEFORE_8)
        if per_block:
            bounds["shared memory"] = hw.smem_per_cu // per_block
    else:
        if waves_per_simd:
            bounds["registers"] = waves_per_simd * SIMDS_PER_CU // warps
        elif registers_per_thread:
            per_lane = hw.regs_per_cu // (SIMDS_PER_CU * hw.warp_size)  # a SIMD's VGPRs per lane (512 on CDNA)
            bounds["registers"] = per_lane // _round_up(registers_per_thread, VGPR_UNIT) * SIMDS_PER_CU // warps
        if shared:
            bounds["shared memory"] = hw.smem_per_cu // shared
    fewest = min(bounds.values())
    limit = next(name for name in LIMITS if bounds.get(name) == fewest)
    return Residency(max(1, fewest), threads, registers_per_thread, shared_bytes_per_block, limit, source)


def register_budget(hw: HardwareModel, max_threads: int, min_blocks: int | None) -> int:
    """The registers per thread the compiler may use under ``__launch_bounds__(max_threads, min_blocks)``.

    CUDA: `min_blocks` blocks of `max_threads` must fit in an SM's registers.  HIP: the second figure is
    the waves per SIMD the compiler must allow (amdgpu-waves-per-eu); without it, one block must fit."""
    max_threads = max(1, max_threads)
    if hw.vendor == "nvidia":
        warps = math.ceil(max_threads / hw.warp_size) * max(1, min_blocks or 1)
        per_warp = hw.regs_per_cu // SUB_PARTITIONS // math.ceil(warps / SUB_PARTITIONS) // REGISTER_UNIT * REGISTER_UNIT
        return max(1, min(MAX_REGISTERS_PER_THREAD, per_warp // hw.warp_size))
    per_lane = hw.regs_per_cu // (SIMDS_PER_CU * hw.warp_size)
    waves = min_blocks or math.ceil(math.ceil(max_threads / hw.warp_size) / SIMDS_PER_CU)
    return max(1, min(per_lane, per_lane // max(1, waves) // VGPR_UNIT * VGPR_UNIT))


# ---- the kernel as written ----------------------------------------------------------------------------


def _common(items: Iterable[tuple[tuple[str, object], ...]]) -> dict:
    """The (name, value) pairs every launch agrees on."""
    sets = [set(pairs) for pairs in items]
    return dict(set.intersection(*sets)) if sets else {}


def _kernel_scope(ctx: FileContext, kernel: KernelInfo) -> tuple[Scope, dict[str, str]]:
    """Names for the kernel's constant expressions: the file's, and template arguments all its launches fix."""
    bindings = _common(launch.bindings for launch in kernel.launches)
    type_args = _common(launch.type_args for launch in kernel.launches)
    return ctx.scope().child(bindings), type_args


def launch_bounds(function: Node, scope: Scope) -> tuple[int, int | None] | None:
    """(max threads per block, min blocks per SM or None) of the kernel's ``__launch_bounds__``; None when it
    has none or the file does not fix its figures."""
    node = next((c for c in function.children if c.type == "launch_bounds"), None)
    if node is None:
        return None
    args = [c for c in node.named_children if c.type != "comment"]
    evaluator = Evaluator(scope)
    values = [evaluator.value(a) for a in args[:2]]
    if not values or not isinstance(values[0], int) or values[0] < 1:
        return None
    min_blocks = values[1] if len(values) > 1 and isinstance(values[1], int) and values[1] >= 1 else None
    return values[0], min_blocks


def static_shared_bytes(function: Node, scope: Scope, type_args: Mapping[str, str] | None = None) -> int | None:
    """Bytes of the ``__shared__`` arrays and variables the kernel declares in its body, without padding;
    None when the file does not fix an element type or a size.  ``extern __shared__`` arrays are sized at
    the launch (dynamic shared memory) and are not counted here; nor are shared variables of the helpers
    the kernel calls."""
    body = function.child_by_field_name("body")
    if body is None:
        return 0
    total = 0
    for node in walk(body):
        if node.type != "declaration":
            continue
        words = {text(c) for c in node.children if c.type in ("type_qualifier", "storage_class_specifier")}
        if "__shared__" not in words or "extern" in words:
            continue
        evaluator = Evaluator(local_scope(function, node.start_byte, scope))
        type_name = scope.resolve_type(text(node.child_by_field_name("type")))
        type_name = scope.resolve_type((type_args or {}).get(type_name, type_name))
        for declarator in node.children_by_field_name("declarator"):
            if declarator.type == "init_declarator":
                declarator = declarator.child_by_field_name("declarator")
            count = 1
            while declarator is not None and declarator.type == "array_declarator":
                size = evaluator.value(declarator.child_by_field_name("size"))
                if not isinstance(size, int) or size < 1:
                    return None
                count *= size
                declarator = declarator.child_by_field_name("declarator")
            element = 8 if declarator is not None and declarator.type == "pointer_declarator" else ELEMENT_BYTES.get(type_name)
            if element is None:
                return None
            total += element * count
    return total


# ---- the answer ---------------------------------------------------------------------------------------


def residency(ctx: FileContext, kernel: KernelInfo, hw: HardwareModel, threads_per_block: int,
              dynamic_shared_bytes: int = 0, use_compiler: bool = True, flags: tuple[str, ...] = ()) -> Residency:
    """The blocks of `kernel` resident on one compute unit of `hw` for blocks of `threads_per_block` with
    `dynamic_shared_bytes` of dynamic shared memory: from the compiler's figures when `use_compiler` and a
    compiler for the model's GPU builds the file, else from the kernel's launch bounds or the default."""
    src = ctx.src
    threads = max(1, threads_per_block)
    dynamic = max(0, dynamic_shared_bytes)
    why = "compiler not used"
    if use_compiler:
        key = (hw, tuple(flags))
        if key not in ctx.usage:  # the file is compiled once for all its kernels
            ctx.usage[key] = resource_usage(src.path, src.data, src.dialect, hw, flags)
        usage = ctx.usage[key]
        if isinstance(usage, str):
            why = usage
        elif kernel.name in usage:
            return _from_compiler(usage[kernel.name], hw, threads, dynamic, src.dialect)
        else:
            why = f"the compiler built no code for {kernel.name} (a template the file does not instantiate?)"
    return _from_source(ctx, kernel, hw, threads, dynamic, why)


def _from_compiler(instances: tuple[KernelResources, ...], hw: HardwareModel, threads: int, dynamic: int,
                   dialect: str) -> Residency:
    """The residency from the compiler's figures; of a template's instantiations, the one with fewest blocks."""
    if hw.vendor == "amd":
        source = f"hipcc {HIPCC_REPORT} --offload-arch={hw.arch}"
    else:
        source = f"nvcc {NVCC_REPORT} -arch={hw.nvcc_arch}" + (" (HIP through the compatibility header)" if dialect == "hip" else "")
    if len(instances) > 1:
        source += f"; the fewest blocks of {len(instances)} instantiations"
    results = [occupancy(hw, threads, k.registers, k.shared_bytes + dynamic, k.waves_per_simd, source) for k in instances]
    return replace(min(results, key=lambda r: r.blocks_per_cu), compiled=True)


def _from_source(ctx: FileContext, kernel: KernelInfo, hw: HardwareModel, threads: int, dynamic: int, why: str) -> Residency:
    """The residency from the kernel as written: its launch bounds, else the default registers; its static
    shared arrays where the file sizes them."""
    function = kernel_function(ctx, kernel)
    bounds, static = None, None
    if function is not None:
        scope, type_args = _kernel_scope(ctx, kernel)
        bounds = launch_bounds(function, scope)
        static = static_shared_bytes(function, scope, type_args)
    shared = static + dynamic if static is not None else None
    if shared is None:
        memory = "static shared memory not sized" + (f", {dynamic} bytes dynamic" if dynamic else "")
    else:
        memory = f"{shared} bytes of shared memory" if shared else "no shared memory"
    default = f"{DEFAULT_REGISTERS} registers per thread"
    if bounds is None:
        registers, what = DEFAULT_REGISTERS, f"default: {default}, {memory}"
    elif bounds[1] is not None:
        registers, what = register_budget(hw, *bounds), f"__launch_bounds__({bounds[0]}, {bounds[1]}), {memory}"
    else:
        registers = min(DEFAULT_REGISTERS, register_budget(hw, bounds[0], None))
        what = f"__launch_bounds__({bounds[0]}) with the default {default}, {memory}"
    result = occupancy(hw, threads, registers, shared if shared is not None else dynamic, source=f"{what} ({why})")
    registers_from_bounds = bounds is not None and (bounds[1] is not None or registers < DEFAULT_REGISTERS)
    limit = "launch bounds" if registers_from_bounds and result.limit == "registers" else result.limit
    return Residency(result.blocks_per_cu, threads, registers, shared, limit, result.source)
