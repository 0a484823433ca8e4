"""Runtime grids: run the user's program once and record each kernel's real launches.

With `--bench-cmd`, the launches the file shows may not be the ones that run (sizes from argv, grids
computed at run time).  `observe_launches` builds the program (`--build-cmd`) in a private copy of its
folder and runs `--bench-cmd` once under a launch interposer, and returns per kernel the distinct
(grid, block, dynamic shared memory) launches seen, how often each ran, and where it can, the values of
the kernel's scalar arguments (an `N` read from argv becomes known to the footprint).

Interposers, first found first:
- NVIDIA: a CUPTI injection library of swzc's own (swzc/native/launch_observer.cpp), loaded by the driver
  through CUDA_INJECTION64_PATH (statically linked cudart included).  It is built with nvcc next to
  CUPTI and cached by content hash in a private folder (0700, owned by the user, the library's hash
  checked before each use).  It reads the argument bytes through cuFuncGetParamInfo (CUDA 12.4+).
- NVIDIA without CUPTI: ncu's raw page ("Grid Size", "Block Size"), without argument values.
- AMD: rocprofv3's kernel trace (HIP's grid is in work-items: divided by the workgroup size).

Kernels are matched by name through their mangled symbols (`_Z9gemm_tiledPKfS0_Pfiii`), templates
included (`_Z4gemmIfLi128EEvPKT_…` is `gemm<float, 128>`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
import shlex
import shutil
import struct
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from swzc.core import cache

from swzc.core import processes

from swzc.analysis import tileloop
from swzc.analysis.kernels import kernel_function
from swzc.analysis.records import KernelInfo, Launch
from swzc.frontend.scope import local_scope
from swzc.frontend.syntax import functions, function_name, parameter_list
from swzc.core.errors import SwzcError
from swzc.core.inputs import TOOL_OUTPUT_BYTES, read_regular
from swzc.frontend.evaluate import Evaluator, Scope, Value, expression_of
from swzc.verify.harness import ELEMENT_TYPES, gpu_vendor, native_dir
from swzc.verify.program import ProgramBench, TIMEOUT_S, program_copy, shell, unreadable
from swzc.analysis.context import FileContext
from swzc.analysis.templates import base_type, parse_listing, template_parameters

MAX_CONFIGS = 64  # distinct launches recorded per kernel
NCU_LAUNCHES = 2000  # launches ncu profiles at most (each is replayed)
OBSERVER = "launch_observer.cpp"
TOOLS = ("cupti", "ncu", "rocprofv3")

Dim3 = tuple[int, int, int]


@dataclass(frozen=True)
class RawLaunch:
    """One distinct launch as an interposer reports it, before it is matched to the file's kernels."""

    symbol: str  # mangled, demangled or bare, as the tool shows it
    grid: Dim3
    block: Dim3
    shmem: int | None  # dynamic shared memory; None where the tool does not say
    count: int
    params: tuple[bytes, ...] = ()  # each parameter's bytes, in order (CUPTI only)


@dataclass(frozen=True)
class ObservedLaunch:
    grid: Dim3
    block: Dim3
    shmem: int | None
    count: int  # launches with this configuration
    template: tuple[str, ...] = ()  # the template arguments, where the symbol shows them
    args: tuple[tuple[str, Value], ...] = ()  # scalar arguments by parameter name (pointers left out)


@dataclass(frozen=True)
class ObservedRun:
    tool: str  # "cupti", "ncu", "rocprofv3", or "" when nothing was observed
    launches: Mapping[str, tuple[ObservedLaunch, ...]]  # kernel -> distinct launches, most frequent first
    note: str = ""  # why nothing was observed, or what was left out
    truncated: frozenset[str] = frozenset()  # kernels with more distinct launches than were recorded
    unreadable: str = ""  # what a run that went through did not print (swzc.verify.program.unreadable)

    @property
    def ok(self) -> bool:
        return bool(self.tool)


# ---- running the program ------------------------------------------------------------------------------

def observe_launches(ctx: FileContext, program: ProgramBench, kernels: set[str], tool: str | None = None,
                     timeout: float = TIMEOUT_S) -> ObservedRun:
    """Build and run the program once, in a private temporary copy of its folder (removed however the run
    ends), under a launch interposer; `tool` forces one of TOOLS, else the first that works here.  Never
    raises for the program's sake: a failed build or run is an ObservedRun with `note` saying why."""
    path, data = ctx.src.path, ctx.src.data
    chosen, why = (tool, "") if tool else _pick_tool()
    if not chosen:
        return ObservedRun("", {}, why)
    try:
        with tempfile.TemporaryDirectory(prefix="swzc-observe-", ignore_cleanup_errors=True) as tmp:
            where = Path(tmp)
            copy = program_copy(path, data, program, "observed", where)
            name = Path(path).name
            if chosen == "cupti":
                with observer_library() as library:
                    out = where / "launches.jsonl"
                    env = {**os.environ, "CUDA_INJECTION64_PATH": str(library), "SWZC_OBSERVE_OUT": str(out),
                           "SWZC_OBSERVE_MAX": str(MAX_CONFIGS)}
                    done = shell(program.bench_cmd, copy, name, env)
                    written = read_regular(str(out), TOOL_OUTPUT_BYTES) if os.path.lexists(out) else b""
                    raw, dropped = parse_observer_output(written.decode(errors="replace"))
            elif chosen == "ncu":
                command = (f"{shlex.quote(shutil.which('ncu') or 'ncu')} --csv --page raw --print-kernel-base mangled "
                           f"--metrics launch__grid_size,launch__shared_mem_per_block_dynamic --target-processes all "
                           f"--launch-count {NCU_LAUNCHES} /bin/sh -c {shlex.quote(program.bench_cmd)}")
                done = shell(command, copy, name)
                raw, dropped = parse_ncu_csv(done.stdout), {}
            elif chosen == "rocprofv3":
                trace = where / "trace"
                command = (f"{shlex.quote(shutil.which('rocprofv3') or 'rocprofv3')} --kernel-trace --output-format csv "
                           f"-d {shlex.quote(str(trace))} -o swzc -- /bin/sh -c {shlex.quote(program.bench_cmd)}")
                done = shell(command, copy, name)
                raw = [r for table in sorted(trace.rglob("*kernel_trace.csv"))
                       for r in parse_rocprof_trace(read_regular(str(table), TOOL_OUTPUT_BYTES).decode(errors="replace"))]
                dropped = {}
            else:
                return ObservedRun("", {}, f"unknown launch interposer {chosen!r} (one of {', '.join(TOOLS)})")
    except SwzcError as exc:  # the build command failed, or the observer could not be built
        return ObservedRun("", {}, exc.message)
    if not done.ok and not raw:
        return ObservedRun("", {}, f"`{program.bench_cmd}` {done.status()} under {chosen}; its output began:\n{done.head()}")
    found = match_launches(ctx, raw, kernels)
    truncated = frozenset(k for k in found if any(kernel_name(s)[0] == k for s in dropped))
    note = "" if done.ok else f"`{program.bench_cmd}` {done.status()} under {chosen}: the launches before that are kept"
    if chosen != "cupti":
        note = "; ".join(filter(None, [note, f"{chosen} gives no argument values"]))
    # only the interposer that leaves the program's output as it is (a profiler's own lines could match)
    return ObservedRun(chosen, found, note, truncated, unreadable(program, done) if done.ok and chosen == "cupti" else "")


def merged(runs: list[ObservedRun]) -> ObservedRun:
    """The runs of one program at several sizes as one: every distinct launch of each kernel, counts added,
    the most frequent first; the notes of the runs that said something."""
    seen = [r for r in runs if r.ok]
    if not seen:
        return runs[0] if runs else ObservedRun("", {}, "nothing was run")
    counts: dict[str, dict[ObservedLaunch, int]] = {}
    for run in seen:
        for kernel, launches in run.launches.items():
            mine = counts.setdefault(kernel, {})
            for la in launches:
                key = replace(la, count=0)
                mine[key] = mine.get(key, 0) + la.count
    launches = {k: tuple(replace(la, count=n) for la, n in sorted(v.items(), key=lambda item: -item[1])) for k, v in counts.items()}
    notes = "; ".join(dict.fromkeys(r.note for r in runs if r.note))
    return ObservedRun(seen[0].tool, launches, notes, frozenset().union(*(r.truncated for r in seen)),
                       next((r.unreadable for r in seen if r.unreadable), ""))


def _pick_tool() -> tuple[str, str]:
    if gpu_vendor() == "amd":
        return ("rocprofv3", "") if shutil.which("rocprofv3") else ("", "rocprofv3 is not on PATH: no launches observed")
    found = cupti_location()
    if found is not None:
        return "cupti", ""
    if shutil.which("ncu"):
        return "ncu", ""
    return "", "neither CUPTI (next to nvcc) nor ncu was found: no launches observed"


# ---- the CUPTI observer: found, built, cached ----------------------------------------------------------

def cuda_root() -> Path | None:
    """The CUDA toolkit nvcc belongs to (nvcc may be a wrapper script: ask it)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    try:
        with tempfile.TemporaryDirectory(prefix="swzc-nvcc-") as tmp:
            probe = Path(tmp) / "probe.cu"
            probe.write_text("")
            done = processes.run([nvcc, "--dryrun", "-c", str(probe), "-o", str(Path(tmp) / "probe.o")], 60)
    except OSError:
        return None
    here = re.search(r"^#\$ _HERE_=(.+)$", done.stdout + done.stderr, re.M)
    bin_dir = Path(here.group(1).strip()) if here else Path(nvcc).resolve().parent
    return bin_dir.parent


def cupti_location(root: Path | None = None) -> tuple[Path, Path, Path] | None:
    """(CUDA include dir, CUPTI include dir, CUPTI library dir) of the toolkit, or None without CUPTI."""
    root = root or cuda_root()
    if root is None:
        return None
    targets = sorted((root / "targets").glob("*")) if (root / "targets").is_dir() else []
    includes = [root / "include", root / "extras" / "CUPTI" / "include", *(t / "include" for t in targets)]
    libs = [root / "lib64", root / "lib", root / "extras" / "CUPTI" / "lib64", *(t / "lib" for t in targets)]
    cuda_include = next((d for d in includes if (d / "cuda.h").is_file()), None)
    cupti_include = next((d for d in includes if (d / "cupti.h").is_file()), None)
    cupti_lib = next((d for d in libs if any(d.glob("libcupti.so*"))), None)
    if cuda_include is None or cupti_include is None or cupti_lib is None:
        return None
    return cuda_include, cupti_include, cupti_lib


@contextmanager
def observer_library() -> Iterator[Path]:
    """The observer library, built with nvcc against CUPTI, or taken from swzc's private cache (swzc.core.cache)
    when its bytes match their stamp.  The program loads a copy of the bytes just checked, in a private
    folder of this run.  Raises SwzcError when CUPTI or the build is missing."""
    found = cupti_location()
    nvcc = shutil.which("nvcc")
    if found is None or nvcc is None:
        raise SwzcError("the launch observer needs nvcc and CUPTI (cupti.h, libcupti.so) next to it")
    cuda_include, cupti_include, cupti_lib = found
    source = (Path(native_dir()) / OBSERVER).read_text()
    version = processes.run([nvcc, "--version"], 60).stdout
    key = hashlib.sha256("\n".join([source, version, str(cuda_include), str(cupti_include), str(cupti_lib)]).encode()).hexdigest()[:24]
    name = f"observer-{key}.so"
    with tempfile.TemporaryDirectory(prefix="swzc-observer-", ignore_cleanup_errors=True) as tmp, cache.folder() as folder:
        library = Path(tmp) / "observer.so"
        entry = cache.lookup(folder[0], name) if folder is not None else None
        if entry is not None:
            os.close(entry[0])
            library.write_bytes(entry[1])
            yield library
            return
        cpp = Path(tmp) / OBSERVER
        cpp.write_text(source)
        command = [nvcc, "-std=c++17", "-O2", "-shared", "-Xcompiler", "-fPIC", "-cudart", "none", "-I", str(cuda_include),
                   "-I", str(cupti_include), "-L", str(cupti_lib), "-o", str(library), str(cpp), "-lcupti", "-ldl",
                   "-Xlinker", f"-rpath,{cupti_lib}"]
        done = processes.run(command, 600)
        if not done.ok:
            raise SwzcError(f"the launch observer does not build ({done.status()}): {done.command}\n{done.head()}")
        if folder is not None:
            cache.store(folder[0], name, library.read_bytes())
        yield library


# ---- what the interposers write ------------------------------------------------------------------------

def parse_observer_output(text: str) -> tuple[list[RawLaunch], dict[str, int]]:
    """The observer's JSON lines (one per distinct launch and process, then a count line per process) as
    distinct launches with their counts, and the launches dropped past the cap per symbol."""
    configs: dict[tuple[int, int], dict] = {}
    counts: dict[tuple[int, int], int] = {}
    dropped: dict[str, int] = {}
    for line in text.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        if not isinstance(doc, dict):
            continue
        pid = int(doc.get("pid", 0))
        if "counts" in doc:
            counts.update({(pid, int(i)): int(n) for i, n in doc["counts"].items()})
            for symbol, n in doc.get("dropped", {}).items():
                dropped[symbol] = dropped.get(symbol, 0) + int(n)
        elif "kernel" in doc and "id" in doc:
            configs[pid, int(doc["id"])] = doc
    merged: dict[tuple, int] = {}
    for key, doc in configs.items():
        try:
            params = tuple(bytes.fromhex(p["hex"]) for p in doc.get("params", []))
            config = (str(doc["kernel"]), _dim3(doc["grid"]), _dim3(doc["block"]), int(doc.get("shmem", 0)), params)
        except (KeyError, TypeError, ValueError):
            continue
        merged[config] = merged.get(config, 0) + counts.get(key, 1)  # no count line (the program crashed): at least once
    return [RawLaunch(s, g, b, m, n, p) for (s, g, b, m, p), n in merged.items()], dropped


def _dim3(value: object) -> Dim3:
    if isinstance(value, str):  # ncu: "(256, 256, 1)"
        value = [v for v in re.split(r"[(),\s]+", value) if v]
    parts = [int(float(v)) for v in value]  # type: ignore[union-attr]
    if len(parts) != 3 or min(parts) < 1:
        raise ValueError(f"not a grid or block size: {value!r}")
    return parts[0], parts[1], parts[2]


def parse_ncu_csv(text: str) -> list[RawLaunch]:
    """ncu --csv --page raw: one row per profiled launch, with "Kernel Name", "Grid Size", "Block Size" and
    the dynamic shared memory metric where asked; other output lines and further processes' headers are
    skipped."""
    rows = list(csv.reader(line for line in text.splitlines() if line.startswith('"')))
    header: list[str] | None = None
    merged: dict[tuple, int] = {}
    for row in rows:
        if "Kernel Name" in row and "Grid Size" in row:
            header = row
            continue
        if header is None or len(row) != len(header) or not row[header.index("Kernel Name")]:
            continue  # the units row, or a row cut short
        fields = dict(zip(header, row))
        try:
            grid, block = _dim3(fields["Grid Size"]), _dim3(fields["Block Size"])
        except (KeyError, ValueError):
            continue
        shmem = _number(fields.get("launch__shared_mem_per_block_dynamic"))
        key = (fields["Kernel Name"], grid, block, int(shmem) if shmem is not None else None)
        merged[key] = merged.get(key, 0) + 1
    return [RawLaunch(s, g, b, m, n) for (s, g, b, m), n in merged.items()]


def parse_rocprof_trace(text: str) -> list[RawLaunch]:
    """rocprofv3 --kernel-trace CSV: Grid_Size_* count work-items on AMD, so blocks = grid / workgroup."""
    merged: dict[tuple, int] = {}
    for row in csv.DictReader(io.StringIO(text)):
        try:
            items = [int(float(row[f"Grid_Size_{a}"])) for a in "XYZ"]
            group = [int(float(row[f"Workgroup_Size_{a}"])) for a in "XYZ"]
            blocks = _dim3([math.ceil(i / g) for i, g in zip(items, group)])
            block = _dim3(group)
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            continue
        shmem = _number(row.get("LDS_Block_Size"))  # the workgroup's LDS, static and dynamic together
        key = (row.get("Kernel_Name") or "", blocks, block, int(shmem) if shmem is not None else None)
        merged[key] = merged.get(key, 0) + 1
    return [RawLaunch(s, g, b, m, n) for (s, g, b, m), n in merged.items()]


def _number(text: object) -> float | None:
    try:
        return float(str(text).replace(",", "")) if text not in (None, "") else None
    except ValueError:
        return None


# ---- names --------------------------------------------------------------------------------------------

_MANGLED = re.compile(r"_Z[A-Za-z0-9_$.]{1,4096}")  # what is handed to c++filt: one line each, nothing else
DEMANGLE_TIMEOUT_S = 30
DEMANGLE_MEMORY_BYTES = 512 << 20


def demangled(symbols: Iterable[str]) -> dict[str, str]:
    """Itanium-mangled symbols as c++filt (binutils) writes them, from one run for all: each symbol c++filt
    reads, to its demangled signature.  Without c++filt on PATH, or where it fails, {} (the names are then
    read from the symbols' length-prefixed parts alone, without template arguments)."""
    mangled = sorted({s.strip() for s in symbols if _MANGLED.fullmatch(s.strip())})
    tool = shutil.which("c++filt")
    if not mangled or tool is None:
        return {}
    done = processes.run([tool], DEMANGLE_TIMEOUT_S, env={"LC_ALL": "C"}, input="\n".join(mangled).encode() + b"\n",
                         memory_bytes=DEMANGLE_MEMORY_BYTES)
    out = bytes(done.stdout).decode("utf-8", "replace").split("\n")
    if done.returncode != 0 or len(out) < len(mangled):
        return {}
    return {symbol: line.strip() for symbol, line in zip(mangled, out) if line.strip() and line.strip() != symbol}


def kernel_name(symbol: str, names: Mapping[str, str] | None = None) -> tuple[str, tuple[str, ...] | None]:
    """(kernel name, template arguments or None) of a symbol: mangled (`_Z4gemmIfLi128EEv…`, demangled by
    `demangled`, whose answers `names` holds, else by one run of c++filt for this symbol), demangled (`void
    ns::gemm<float, 128>(float const*, …)`) or bare (`gemm_naive`, an extern "C" kernel)."""
    symbol = symbol.strip()
    if symbol.startswith("_Z"):
        found = (names if names is not None else demangled([symbol])).get(symbol)
        return _from_signature(found) if found is not None else _name_only(symbol)
    return _from_signature(symbol)


def _from_signature(text: str) -> tuple[str, tuple[str, ...] | None]:
    head = text
    if head.endswith(")"):  # drop the parameter list: the parenthesis that matches the last one
        depth = 0
        for i in range(len(head) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(head[i], 0)
            if depth == 0:
                head = head[:i]
                break
    head = head.strip()
    args: tuple[str, ...] | None = None
    if head.endswith(">"):
        depth = 0
        for i in range(len(head) - 1, -1, -1):
            depth += {">": 1, "<": -1}.get(head[i], 0)
            if depth == 0:
                args = tuple(parse_listing(head[i:]))
                head = head[:i]
                break
    name = head.split()[-1] if head.split() else head
    return name.split("::")[-1], args


def _name_only(symbol: str) -> tuple[str, None]:
    """A mangled symbol's name from its length-prefixed parts (the last of a nested name), where c++filt gave
    nothing."""
    nested = symbol.startswith("_ZN")
    at, names = 3 if nested else 2, []
    while (length := re.match(r"\d+", symbol[at:])) is not None:
        at += len(length.group(0))
        names.append(symbol[at:at + int(length.group(0))])
        at += int(length.group(0))
        if not nested:
            break
    return (names[-1] if names else symbol), None


def match_launches(ctx: FileContext, raw: list[RawLaunch], kernels: set[str]) -> dict[str, tuple[ObservedLaunch, ...]]:
    """The raw launches of the file's `kernels`, by name, with scalar arguments decoded by the parameters'
    C types (template parameters filled from the symbol's template arguments)."""
    scope = ctx.scope()
    definitions = {function_name(f): f for f, _ in functions(ctx.src.tree.root_node)}
    found: dict[str, dict[tuple, int]] = {}
    names = demangled(launch.symbol for launch in raw)
    for launch in raw:
        name, targs = kernel_name(launch.symbol, names)
        if name not in kernels:
            continue
        args: tuple[tuple[str, Value], ...] = ()
        function = definitions.get(name)
        if function is not None and launch.params:
            tparams = template_parameters(function)
            types = {tp.name: arg for tp, arg in zip(tparams, targs or ()) if tp.kind == "type"}
            args = decode_arguments([(p.name, p.type, p.pointer) for p in parameter_list(function)], launch.params, types, scope)
        key = (launch.grid, launch.block, launch.shmem, targs or (), args)
        found.setdefault(name, {})
        found[name][key] = found[name].get(key, 0) + launch.count
    return {name: tuple(ObservedLaunch(g, b, m, n, t, a) for (g, b, m, t, a), n in sorted(configs.items(), key=lambda kv: -kv[1]))
            for name, configs in found.items()}


def decode_arguments(params: list[tuple[str, str, bool]], raw: tuple[bytes, ...], types: Mapping[str, str],
                     scope: Scope) -> tuple[tuple[str, Value], ...]:
    """(name, value) of each scalar parameter whose C type is a plain number and whose bytes have its size."""
    values = []
    for (name, written, pointer), data in zip(params, raw):
        if pointer:
            continue
        ctype = scope.resolve_type(base_type(written))
        ctype = scope.resolve_type(base_type(types.get(ctype, ctype)))
        element = ELEMENT_TYPES.get(ctype)
        if element is None or element.components != 1 or element.bytes != len(data):
            continue
        value = _decode(element.kind, data)
        if value is not None:
            values.append((name, value))
    return tuple(values)


def _decode(kind: str, data: bytes) -> Value | None:
    if kind in ("I8", "I16", "I32", "I64"):
        return int.from_bytes(data, "little", signed=True)
    if kind in ("U8", "U16", "U32", "U64", "BOOL"):
        return int.from_bytes(data, "little", signed=False)
    if kind == "F32":
        return struct.unpack("<f", data)[0]
    if kind == "F64":
        return struct.unpack("<d", data)[0]
    if kind == "F16":
        return struct.unpack("<e", data)[0]
    if kind == "BF16":
        return struct.unpack("<f", b"\0\0" + data)[0]
    return None  # fp8: no use as a size or a scale the footprint reads


# ---- for the pipeline: observed launches as the analysis's records -------------------------------------

def observed_launches(ctx: FileContext, kernel: KernelInfo, run: ObservedRun) -> tuple[Launch, ...]:
    """The kernel's observed launches as Launch records, most frequent first, for ranking and the footprint:
    grid and block as run, bindings from the observed scalar arguments (over the file's own) and the
    symbol's template arguments, the tile decode's divisor evaluated under them.  () when none was seen."""
    seen = run.launches.get(kernel.name, ())
    if not seen:
        return ()
    function = kernel_function(ctx, kernel)
    tparams = template_parameters(function) if function is not None else []
    static = kernel.launches[0] if len(kernel.launches) == 1 else None
    records = []
    for launch in seen:
        bound: dict[str, Value] = dict(static.bindings) if static is not None else {}
        types: dict[str, str] = dict(static.type_args) if static is not None else {}
        for tp, arg in zip(tparams, launch.template):
            number = _literal(arg)
            if tp.kind == "value" and number is not None:
                bound[tp.name] = number
            elif tp.kind == "type":
                types[tp.name] = arg
        bound.update(dict(launch.args))
        record = Launch(kernel.name, static.line if static is not None else kernel.line, "observed",
                        "x".join(map(str, launch.grid)), "x".join(map(str, launch.block)), launch.grid, launch.block,
                        bindings=tuple(sorted(bound.items())), type_args=tuple(sorted(types.items())))
        if kernel.tile_loop is not None and function is not None:
            count, columns = tileloop.launch_values(kernel.tile_loop, function, ctx.scope().child(bound))
            record = replace(record, tiles=count, divisor=columns)
        elif kernel.decode is not None and function is not None:
            divisor = expression_of(kernel.decode.splice_text or kernel.decode.divisor)
            at = kernel.insert_at if kernel.insert_at is not None else function.start_byte
            value = Evaluator(local_scope(function, at, ctx.scope().child(bound))).value(divisor) if divisor else None
            record = replace(record, divisor=int(value) if value is not None else None)
        records.append(record)
    return tuple(records)


def _literal(text: str) -> Value | None:
    if text in ("true", "false"):
        return int(text == "true")
    try:
        return int(text.rstrip("uUlL"), 0)
    except ValueError:
        return None
