"""swzc probe: measure a GPU for a hardware model, and write the model file with where each figure came from.

probe.cu (CUDA) and probe.hip (AMD, untested on hardware) are small programs, built and run on the
machine with the GPU; they print one fact per line (the format is described at the top of
probe.cu).  This module builds and runs them (`run_probe`), or reads an output saved elsewhere
(`read_output`), parses it into a `ProbeResult` (`parse_output`), and writes a complete model file
from a base model and the result (`to_toml`): every figure the probe measured gets a [sources]
entry "measured on <device>, <date>: <command> (…)"; the others keep the base model's value and
source.  Every failure is a SwzcError with a message, never a traceback.

What is derived from the output:
  * the device properties: compute units, L2 size, warp size, per-SM/CU limits, the arch;
  * block_to_cu: the SM/CU of each of the first 2 x compute_units blocks of a launch, in block order;
  * resident_blocks: the most blocks seen running at once on one SM/CU (one-warp blocks, so the
    block limit per SM, not the thread limit, binds);
  * the L2 partition of each SM: NVIDIA, from an L2 hit latency table (each SM times lines spread
    over an L2-resident buffer; if the latencies split clearly in two, an SM's near lines name its
    partition, and SMs with the same near lines share one); AMD, from the XCC_ID register directly.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path

from swzc.core import clean
from swzc.core.errors import ExitCode, SwzcError
from swzc.target.hw import OPTIONAL, HardwareModel, parse_model
from swzc.core.inputs import read_regular

FORMAT_VERSION = "1"
BUILD_TIMEOUT_S = 300
RUN_TIMEOUT_S = 120
MIN_SPLIT_CYCLES = 20.0  # near and far L2 latency must differ by at least this much
MIN_SPLIT_SPREADS = 4.0  # ... and by this many within-cluster standard deviations

_INT_FACTS = {  # keyword in the output -> ProbeResult field
    "sms": "compute_units",
    "l2_bytes": "l2_bytes",
    "warp_size": "warp_size",
    "max_threads_per_sm": "max_threads_per_cu",
    "max_blocks_per_sm": "max_blocks_per_cu",
    "regs_per_sm": "regs_per_cu",
    "smem_per_sm": "smem_per_cu",
}
_TEXT_FACTS = ("platform", "device", "date", "cc", "arch", "clock_khz")


@dataclass(frozen=True)
class ProbeResult:
    platform: str  # "cuda" or "hip"
    device: str  # the device's name, as the runtime gives it
    date: str  # YYYY-MM-DD (UTC) of the run; "" when the output does not say
    arch: str  # compiler target: sm_90, gfx942
    compute_units: int
    l2_bytes: int
    warp_size: int
    max_threads_per_cu: int
    max_blocks_per_cu: int
    regs_per_cu: int
    smem_per_cu: int
    clock_khz: int = 0  # SM clock the runtime reports; 0 if unknown
    block_to_cu: tuple[int, ...] = ()  # the SM/CU of each of the first 2 x compute_units blocks
    dispatch_blocks: int = 0  # blocks in the dispatch launch (0: no dispatch data)
    dispatch_threads: int = 0  # threads per block of that launch
    resident_blocks: int = 0  # most blocks seen running at once on one SM/CU
    cu_partition: tuple[int, ...] = ()  # L2 partition of each SM/CU id; () when not determined
    partition_method: str = ""  # "l2-latency", "xcc-register", or ""
    l2_partitions: int = 0  # partitions found (1 when the latencies show none); 0 without latency data
    chiplets: int = 0  # AMD: distinct XCDs seen; 0 when not measured
    l2_near_cycles: float = 0.0  # median L2 hit latency of near lines (of all lines if not bimodal)
    l2_far_cycles: float = 0.0  # median of far lines; 0 if not bimodal
    l2_far_extra_cycles: float = 0.0  # far minus near; 0 if not bimodal
    latency_lines: int = 0  # lines timed per SM/CU
    latency_cus: int = 0  # SMs/CUs the latency table covers
    notes: tuple[str, ...] = ()  # what a reader should know: a missing split, renumbered ids, …

    @property
    def vendor(self) -> str:
        return "nvidia" if self.platform == "cuda" else "amd"

    @property
    def l2_bimodal(self) -> bool:
        return self.l2_far_extra_cycles > 0


# ---------------------------------------------------------------------------------------------
# Building and running the probe


def source_name(hip: bool) -> str:
    return "probe.hip" if hip else "probe.cu"


def source_text(hip: bool = False) -> bytes:
    return resources.files("swzc.target.probe").joinpath(source_name(hip)).read_bytes()


def build_command(source: str, binary: str, arch: str, hip: bool = False) -> list[str]:
    if hip:
        return ["hipcc", "-O2", f"--offload-arch={arch}", "-o", binary, source]
    return ["nvcc", "-O2", f"-arch={arch}", "-o", binary, source]


def _tail(text: str, lines: int = 15) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def run_probe(arch: str, hip: bool = False, args: Sequence[str] = (), timeout_s: int = RUN_TIMEOUT_S) -> str:
    """Build the probe for `arch`, run it on the local GPU and return what it printed."""
    compiler = "hipcc" if hip else "nvcc"
    if hip and not arch.startswith("gfx"):
        raise SwzcError(f"--arch {arch} is not an AMD target (gfx…), which --hip needs")
    if not hip and not arch.startswith(("sm_", "compute_")):
        raise SwzcError(f"--arch {arch} is not an NVIDIA target (sm_…); use --hip for AMD")
    if shutil.which(compiler) is None:
        raise SwzcError(f"{compiler} is not on PATH, so the probe cannot be built here; build and run swzc/target/probe/"
                        f"{source_name(hip)} on the GPU's machine and parse what it prints with --from-output FILE")
    with tempfile.TemporaryDirectory(prefix="swzc-probe-") as tmp:
        (Path(tmp) / source_name(hip)).write_bytes(source_text(hip))
        binary = Path(tmp) / "swzc-probe"
        cmd = build_command(source_name(hip), binary.name, arch, hip)  # relative: the message reproduces in swzc/target/probe/
        try:
            build = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=BUILD_TIMEOUT_S, cwd=tmp)
        except subprocess.TimeoutExpired:
            raise SwzcError(f"building the probe took over {BUILD_TIMEOUT_S} s: {shlex.join(cmd)}", ExitCode.CHECK_FAILED) from None
        except OSError as exc:
            raise SwzcError(f"cannot run {compiler}: {exc.strerror or exc}") from None
        if build.returncode != 0:
            raise SwzcError(f"building the probe failed: {shlex.join(cmd)}\n{_tail(build.stderr + build.stdout)}",
                            ExitCode.CHECK_FAILED)
        try:
            run = subprocess.run([str(binary), *args], capture_output=True, text=True, errors="replace", timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise SwzcError(f"the probe did not finish within {timeout_s} s", ExitCode.CHECK_FAILED) from None
        except OSError as exc:
            raise SwzcError(f"cannot run the probe: {exc.strerror or exc}", ExitCode.CHECK_FAILED) from None
    detail = _tail(run.stderr) or "no message"
    if run.returncode == 2:
        raise SwzcError(f"no usable GPU here: {detail}")
    if run.returncode != 0:
        status = f"signal {-run.returncode}" if run.returncode < 0 else f"exit status {run.returncode}"
        raise SwzcError(f"the probe failed ({status}): {detail}", ExitCode.CHECK_FAILED)
    return run.stdout


MAX_OUTPUT_BYTES = 4 << 20  # a probe output is a few kilobytes


def read_output(path: str) -> str:
    """A probe output saved elsewhere (e.g. on the machine with the GPU): a regular file, read bounded."""
    try:
        return read_regular(path, MAX_OUTPUT_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        raise SwzcError(f"{path}: not a text file, so not a probe output") from None


# ---------------------------------------------------------------------------------------------
# Parsing


class _Fail:
    def __init__(self, origin: str, code: ExitCode) -> None:
        self.origin, self.code = origin, code

    def __call__(self, message: str, lineno: int | None = None) -> SwzcError:
        where = f"{self.origin}:{lineno}" if lineno else self.origin
        return SwzcError(f"{where}: {message}", self.code)


def _int(text: str, fail: _Fail, lineno: int, what: str, positive: bool = False) -> int:
    if not re.fullmatch(r"[0-9]+", text):
        raise fail(f"{what} must be a whole number, not {text!r}", lineno)
    value = int(text)
    if positive and value < 1:
        raise fail(f"{what} must be positive", lineno)
    return value


def _float(text: str, fail: _Fail, lineno: int, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise fail(f"{what} must be a number, not {text!r}", lineno) from None
    if not math.isfinite(value) or value < 0:
        raise fail(f"{what} must be a finite number ≥ 0, not {text!r}", lineno)
    return value


def _pairs(values: list[str], fail: _Fail, lineno: int, keyword: str) -> dict[str, int]:
    if len(values) % 2:
        raise fail(f"'{keyword}' needs name value pairs", lineno)
    return {values[i]: _int(values[i + 1], fail, lineno, values[i]) for i in range(0, len(values), 2)}


def parse_output(text: str, origin: str = "probe output", code: ExitCode = ExitCode.BAD_INPUT) -> ProbeResult:
    """Parse what the probe printed; a malformed or incomplete output raises SwzcError(code)."""
    fail = _Fail(origin, code)
    facts: dict[str, tuple[int, str]] = {}
    blocks: dict[int, tuple[int, int, int]] = {}
    lat: dict[int, dict[int, float]] = {}
    parts: dict[int, int] = {}
    dispatch: dict[str, int] = {}
    latency: dict[str, int] = {}
    notes: list[str] = []
    version_seen = ended = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, rest = line.partition(" ")
        rest = rest.strip()
        values = rest.split()
        if not version_seen:
            if key != "swzc-probe":
                raise fail("not the output of the swzc probe (it starts with 'swzc-probe 1')", lineno)
            if rest != FORMAT_VERSION:
                raise fail(f"probe output format {rest!r}; this swzc reads format {FORMAT_VERSION}", lineno)
            version_seen = True
            continue
        if ended:
            raise fail(f"text after 'end': {line[:60]!r}", lineno)
        if key == "block":
            if len(values) != 7 or (values[1], values[3], values[5]) != ("sm", "start", "end"):
                raise fail("expected 'block <i> sm <s> start <ns> end <ns>'", lineno)
            index = _int(values[0], fail, lineno, "block index")
            if index in blocks:
                raise fail(f"block {index} given twice", lineno)
            start, end = _int(values[4], fail, lineno, "start"), _int(values[6], fail, lineno, "end")
            if end < start:
                raise fail(f"block {index} ends before it starts", lineno)
            blocks[index] = (_int(values[2], fail, lineno, "sm"), start, end)
        elif key == "lat":
            if len(values) != 3:
                raise fail("expected 'lat <sm> <line> <cycles>'", lineno)
            sm, index = _int(values[0], fail, lineno, "sm"), _int(values[1], fail, lineno, "line")
            lat.setdefault(sm, {})[index] = _float(values[2], fail, lineno, "cycles")
        elif key == "part":
            if len(values) != 2:
                raise fail("expected 'part <cu> <partition>'", lineno)
            parts[_int(values[0], fail, lineno, "cu")] = _int(values[1], fail, lineno, "partition")
        elif key == "dispatch":
            dispatch = _pairs(values, fail, lineno, key)
        elif key == "latency":
            latency = _pairs(values, fail, lineno, key)
        elif key == "note":
            notes.append(rest)
        elif key == "end":
            ended = True
        elif key in _INT_FACTS or key in _TEXT_FACTS:
            if key in facts:
                raise fail(f"'{key}' given twice", lineno)
            if not rest:
                raise fail(f"'{key}' needs a value", lineno)
            facts[key] = (lineno, rest)
        # other keywords: facts a later probe prints that this swzc does not use
    if not version_seen:
        raise fail("empty: no probe output")
    if not ended:
        raise fail("incomplete: no 'end' line (the probe stopped before it finished)")

    def fact(key: str) -> tuple[int, str]:
        if key not in facts:
            raise fail(f"missing '{key}'")
        return facts[key]

    platform = fact("platform")[1]
    if platform not in ("cuda", "hip"):
        raise fail(f"platform must be cuda or hip, not {platform!r}", fact("platform")[0])
    numbers = {field: _int(fact(key)[1], fail, fact(key)[0], key, positive=True) for key, field in _INT_FACTS.items()}
    if platform == "cuda":
        lineno, cc = fact("cc")
        match = re.fullmatch(r"([0-9]+)\.([0-9]+)", cc)
        if not match:
            raise fail(f"cc must look like 9.0, not {cc!r}", lineno)
        arch = f"sm_{match[1]}{match[2]}"
    else:
        lineno, arch = fact("arch")
        if not re.fullmatch(r"gfx[0-9a-f]+", arch):
            raise fail(f"arch must look like gfx942, not {arch!r}", lineno)
    date = facts["date"][1] if "date" in facts and re.fullmatch(r"\d{4}-\d{2}-\d{2}", facts["date"][1]) else ""
    clock_khz = _int(facts["clock_khz"][1], fail, facts["clock_khz"][0], "clock_khz") if "clock_khz" in facts else 0
    n = numbers["compute_units"]
    unit = "SM" if platform == "cuda" else "CU"

    # The hardware's ids need not be 0..n-1 (AMD CU keys, or harvested SMs): renumber densely if not.
    seen = {sm for sm, _, _ in blocks.values()} | set(lat) | set(parts)
    if all(i < n for i in seen):
        dense = {i: i for i in seen}
    elif len(seen) <= n:
        dense = {i: k for k, i in enumerate(sorted(seen))}
        notes.append(f"the hardware {unit} ids are not 0..{n - 1}; the {len(seen)} seen were renumbered "
                     f"0..{len(seen) - 1} in ascending order")
    else:
        raise fail(f"{len(seen)} distinct {unit} ids in the output, but the device has {n} {unit}s")

    extra: dict[str, object] = {}
    if blocks:
        count = len(blocks)
        if set(blocks) != set(range(count)):
            raise fail(f"the block lines do not cover blocks 0..{count - 1}")
        if dispatch.get("blocks", count) != count:
            raise fail(f"'dispatch' announces {dispatch['blocks']} blocks, the output has {count}")
        extra["block_to_cu"] = tuple(dense[blocks[b][0]] for b in range(min(2 * n, count)))
        extra["dispatch_blocks"] = count
        extra["dispatch_threads"] = dispatch.get("threads", 0)
        extra["resident_blocks"] = _max_resident(blocks.values())
        if count < 2 * n:
            notes.append(f"the dispatch launch had only {count} blocks; block_to_cu covers them all")
    else:
        notes.append("no dispatch data: block_to_cu and the residency were not measured")

    partition: dict[str, object] = {}
    if lat:
        table = {dense[sm]: row for sm, row in lat.items()}
        partition = _analyse_latency(table, n, unit, notes)
        if latency.get("lines") and partition.get("latency_lines") and latency["lines"] != partition["latency_lines"]:
            raise fail(f"'latency' announces {latency['lines']} lines, the table has {partition['latency_lines']}")
    else:
        notes.append("no L2 latency table: the L2 partitions were not measured")
    if parts:
        partition.update(_xcc_partition({dense[cu]: p for cu, p in parts.items()}, n, notes))

    return ProbeResult(platform=platform, device=fact("device")[1], date=date, arch=arch, clock_khz=clock_khz,
                       notes=tuple(notes), **numbers, **extra, **partition)  # type: ignore[arg-type]


def _max_resident(records: Iterable[tuple[int, int, int]]) -> int:
    """The most intervals [start, end) open at once on one SM; an end at t comes before a start at t."""
    events: dict[int, list[tuple[int, int]]] = {}
    for sm, start, end in records:
        events.setdefault(sm, []).extend(((start, 1), (end, -1)))
    best = 0
    for evs in events.values():
        level = 0
        for _, step in sorted(evs, key=lambda e: (e[0], e[1])):
            level += step
            best = max(best, level)
    return best


def _two_means(values: list[float]) -> tuple[float, float, float, float]:
    """The best split of sorted `values` in two (least squares): threshold, low mean, high mean, spread."""
    n = len(values)
    prefix, prefix_sq = [0.0], [0.0]
    for v in values:
        prefix.append(prefix[-1] + v)
        prefix_sq.append(prefix_sq[-1] + v * v)
    best = (math.inf, 1)
    for k in range(1, n):
        left = prefix_sq[k] - prefix[k] ** 2 / k
        right = (prefix_sq[n] - prefix_sq[k]) - (prefix[n] - prefix[k]) ** 2 / (n - k)
        if left + right < best[0]:
            best = (left + right, k)
    sse, k = best
    low, high = prefix[k] / k, (prefix[n] - prefix[k]) / (n - k)
    return (values[k - 1] + values[k]) / 2, low, high, math.sqrt(max(sse, 0.0) / n)


def _analyse_latency(table: dict[int, dict[int, float]], n: int, unit: str, notes: list[str]) -> dict[str, object]:
    lines = max(len(row) for row in table.values())
    complete = {cu: row for cu, row in table.items() if set(row) == set(range(lines))}
    if len(complete) < len(table):
        notes.append(f"{len(table) - len(complete)} {unit}(s) with an incomplete latency row were left out")
    out: dict[str, object] = {"latency_lines": lines, "latency_cus": len(complete), "l2_partitions": 1}
    values = sorted(v for row in complete.values() for v in row.values())
    if len(values) < 4:
        notes.append("too few L2 latencies to look for near and far partitions")
        return out
    threshold, low, high, spread = _two_means(values)
    far = [v for v in values if v > threshold]
    near = [v for v in values if v <= threshold]
    gap = high - low
    far_share = len(far) / len(values)
    if gap < MIN_SPLIT_CYCLES or gap < MIN_SPLIT_SPREADS * spread or not 0.05 <= far_share <= 0.95:
        out["l2_near_cycles"] = round(statistics.median(values), 1)
        notes.append(f"L2 hit latency is not bimodal (best split {low:.1f} vs {high:.1f} cycles, {far_share:.0%} of "
                     f"lines above, spread {spread:.1f}): one partition as far as this probe can tell; cu_partition "
                     f"not measured")
        return out
    near_cycles, far_cycles = statistics.median(near), statistics.median(far)
    out.update(l2_near_cycles=round(near_cycles, 1), l2_far_cycles=round(far_cycles, 1),
               l2_far_extra_cycles=round(far_cycles - near_cycles, 1))
    # Each SM's near lines; SMs whose near lines (nearly) agree share a partition.
    tolerance = max(1, lines // 8)
    groups: list[tuple[tuple[bool, ...], list[int]]] = []
    for cu in sorted(complete):
        row = complete[cu]
        near_set = tuple(row[j] <= threshold for j in range(lines))
        if all(near_set) or not any(near_set):
            notes.append(f"L2 hit latency is bimodal, but {unit} {cu} sees every line "
                         f"{'near' if all(near_set) else 'far'}: cu_partition not measured")
            return out
        for rep, members in groups:
            if sum(a != b for a, b in zip(rep, near_set)) <= tolerance:
                members.append(cu)
                break
        else:
            groups.append((near_set, [cu]))
    smallest = min(len(members) for _, members in groups)
    if len(groups) < 2:
        notes.append(f"L2 hit latency is bimodal by line ({near_cycles:.1f} vs {far_cycles:.1f} cycles), but every "
                     f"{unit} sees the same lines near: no partition structure, cu_partition not measured")
        return out
    if smallest < (2 if len(complete) >= 4 else 1):
        notes.append(f"L2 hit latency is bimodal, but grouping the {unit}s by their near lines gave {len(groups)} groups, "
                     f"one of {smallest}: unclear, cu_partition not measured")
        return out
    # Partitions own disjoint lines, and every line is near to some partition; a latency gradient
    # (lines nearer to some SMs than others without a partition boundary) fails this.
    majority = [tuple(sum(complete[cu][j] <= threshold for cu in members) * 2 > len(members) for j in range(lines))
                for _, members in groups]
    shared = max(sum(a and b for a, b in zip(x, y)) for i, x in enumerate(majority) for y in majority[i + 1:])
    orphans = sum(not any(m[j] for m in majority) for j in range(lines))
    if shared > tolerance or orphans > tolerance:
        notes.append(f"L2 hit latency is bimodal, but the {len(groups)} groups of {unit}s by near lines do not own disjoint "
                     f"lines ({shared} shared, {orphans} near to none): unclear, cu_partition not measured")
        return out
    if len(complete) < n:
        notes.append(f"L2 latency covers {len(complete)} of {n} {unit}s: cu_partition not measured "
                     f"({len(groups)} partitions among those measured)")
        out["l2_partitions"] = len(groups)
        return out
    partition_of = {cu: p for p, (_, members) in enumerate(groups) for cu in members}
    out.update(cu_partition=tuple(partition_of[cu] for cu in range(n)), partition_method="l2-latency",
               l2_partitions=len(groups))
    return out


def _xcc_partition(parts: dict[int, int], n: int, notes: list[str]) -> dict[str, object]:
    chiplets = sorted(set(parts.values()))
    out: dict[str, object] = {"chiplets": len(chiplets)}
    if set(parts) != set(range(n)):
        notes.append(f"the XCC of {len(parts)} of {n} CUs is known: cu_partition not measured")
        return out
    rank = {x: k for k, x in enumerate(chiplets)}
    if chiplets != list(range(len(chiplets))):
        notes.append(f"XCC ids {chiplets} renumbered 0..{len(chiplets) - 1}")
    out.update(cu_partition=tuple(rank[parts[cu]] for cu in range(n)), partition_method="xcc-register",
               l2_partitions=len(chiplets))
    return out


# ---------------------------------------------------------------------------------------------
# The model file


def _dispatch_policy(result: ProbeResult) -> tuple[str, str] | None:
    """A dispatch policy the measured block order proves, with how; None when it proves none."""
    order = result.block_to_cu
    if len(order) < 2:
        return None
    if result.partition_method == "xcc-register" and result.chiplets > 1 and \
            all(result.cu_partition[cu] == b % result.chiplets for b, cu in enumerate(order)):
        return "chiplet-round-robin", f"block b ran on XCD b mod {result.chiplets} for each of the first {len(order)} blocks"
    if all(cu == b % result.compute_units for b, cu in enumerate(order)):
        return "linear", f"block b ran on compute unit b mod {result.compute_units} for each of the first {len(order)} blocks"
    return None


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value and abs(value) >= 1e6:  # 4.8e12, as the model files write bandwidths
            digits = next(d for d in range(17) if float(f"{value:.{d}e}") == value)
            mantissa, exponent = f"{value:.{digits}e}".split("e")
            return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
        text = repr(value)  # 100.0, 87.5: TOML needs the '.' to read a float
        return text if any(c in text for c in ".e") else text + ".0"
    if isinstance(value, str):
        # JSON's escapes are TOML's; swzc.core.clean spells what TOML forbids raw (DEL) or a reader should see (a
        # device name's bidi controls) as \uXXXX, and a character past the BMP as one \UXXXXXXXX, not JSON's pair
        return clean.text(json.dumps(value, ensure_ascii=False))
    if isinstance(value, tuple):
        items = [str(v) for v in value]
        if len(items) <= 24:
            return "[" + ", ".join(items) + "]"
        rows = [", ".join(items[i:i + 24]) for i in range(0, len(items), 24)]
        return "[\n    " + ",\n    ".join(rows) + ",\n]"
    raise TypeError(f"cannot write {type(value).__name__} to a model file")


def _comment(text: str) -> str:
    return clean.text(" ".join(text.split()))  # TOML allows no control character in a comment


def to_toml(base: HardwareModel, result: ProbeResult, command: str, date: str, name: str | None = None) -> str:
    """A complete model file: `base` with every figure the probe measured replaced, each with its source."""
    if result.vendor != base.vendor:
        raise SwzcError(f"the base model {base.name} is for {base.vendor} GPUs, but the probe ran on {result.device} "
                        f"({result.vendor}); pick a base model of the same vendor with --base")
    values: dict[str, object] = {f.name: getattr(base, f.name) for f in fields(HardwareModel) if f.name != "sources"}
    sources = dict(base.sources)
    notes = list(result.notes)
    where = f"measured on {result.device}, {date}: {command}"
    props = "cudaDeviceProp" if result.platform == "cuda" else "hipDeviceProp_t"
    unit = "SM" if result.platform == "cuda" else "CU"

    def measured(figure: str, value: object, how: str) -> None:
        values[figure] = value
        sources[figure] = f"{where} ({how})"

    def drop(figure: str, why: str) -> None:
        values[figure] = HardwareModel.__dataclass_fields__[figure].default
        sources.pop(figure, None)
        notes.append(f"the base model's {figure} was dropped: {why}")

    if name:
        values["name"] = name
    if result.platform == "cuda":
        measured("arch", result.arch, f"compute capability {result.arch[3:-1]}.{result.arch[-1]} from {props}")
    else:
        measured("arch", result.arch, f"{props}.gcnArchName")
    measured("compute_units", result.compute_units, f"{props}.multiProcessorCount")
    measured("l2_bytes", result.l2_bytes, f"{props}.l2CacheSize")
    measured("warp_size", result.warp_size, f"{props}.warpSize")
    measured("max_threads_per_cu", result.max_threads_per_cu, f"{props}.maxThreadsPerMultiProcessor")
    blocks_how = f"{props}.maxBlocksPerMultiProcessor"
    if result.resident_blocks:
        blocks_how += f"; at most {result.resident_blocks} one-warp blocks were seen resident on one {unit} at once"
        if result.resident_blocks != result.max_blocks_per_cu:
            notes.append(f"{result.resident_blocks} blocks were seen resident on one {unit}, the device says "
                         f"{result.max_blocks_per_cu} fit")
    measured("max_blocks_per_cu", result.max_blocks_per_cu, blocks_how)
    measured("regs_per_cu", result.regs_per_cu, f"{props}.regsPerMultiprocessor")
    smem = "sharedMemPerMultiprocessor" if result.platform == "cuda" else "maxSharedMemoryPerMultiProcessor"
    measured("smem_per_cu", result.smem_per_cu, f"{props}.{smem}")

    if result.block_to_cu:
        measured("block_to_cu", result.block_to_cu,
                 f"the {unit} of each of the first {len(result.block_to_cu)} blocks of a launch of "
                 f"{result.dispatch_blocks} blocks of {result.dispatch_threads} threads, in block order")
        policy = _dispatch_policy(result)
        if policy:
            measured("dispatch", policy[0], policy[1])
    elif base.block_to_cu and base.compute_units != result.compute_units:
        drop("block_to_cu", f"it was measured on a GPU with {base.compute_units} {unit}s")

    if result.cu_partition:
        if result.partition_method == "xcc-register":
            how = "the XCC_ID hardware register of each CU"
            measured("chiplets", result.chiplets, f"{result.chiplets} distinct XCC_ID values over the CUs")
        else:
            how = (f"L2 hit latency of {result.latency_lines} lines from each of the {result.latency_cus} {unit}s split "
                   f"in near and far; {unit}s with the same near lines share a partition")
        measured("cu_partition", result.cu_partition, how)
        if result.l2_partitions != base.l2_partitions:
            notes.append(f"the base model {base.name} has {base.l2_partitions} L2 partitions; the probe found "
                         f"{result.l2_partitions}, which this model uses")
        measured("l2_partitions", result.l2_partitions, f"{result.l2_partitions} groups: {how}")
    else:
        if result.chiplets and result.partition_method == "":
            notes.append(f"{result.chiplets} XCDs seen, but not every CU's: chiplets keeps the base model's value")
        if base.cu_partition and base.compute_units != result.compute_units:
            drop("cu_partition", f"it was measured on a GPU with {base.compute_units} {unit}s")
    if result.l2_bimodal:
        measured("l2_far_extra_cycles", result.l2_far_extra_cycles,
                 f"median L2 hit latency {result.l2_far_cycles} cycles from far lines, {result.l2_near_cycles} from near")

    lines = [f"# {_comment(result.device)} ({result.arch}): a hardware model written by `swzc probe` from a run on {date}.",
             f"# Figures the probe did not measure are the base model {base.name}'s. Each figure's source is in [sources]."]
    lines += [f"# probe: {_comment(note)}" for note in notes]
    order = [f.name for f in fields(HardwareModel) if f.name != "sources"]
    for figure in order:
        if figure in OPTIONAL and not values[figure]:
            continue
        lines.append(f"{figure} = {_toml_value(values[figure])}")
    lines.append("")
    lines.append("[sources]")
    for figure in [*order, *sorted(set(sources) - set(order))]:
        if figure in sources and not (figure in OPTIONAL and not values.get(figure)):
            lines.append(f"{figure} = {_toml_value(sources[figure])}")
    text = "\n".join(lines) + "\n"
    try:
        parse_model(text, "the probed model")
    except SwzcError as exc:
        raise SwzcError(f"the measured figures do not make a valid hardware model: {exc.message}", ExitCode.CHECK_FAILED) from None
    return text


def summary(result: ProbeResult) -> str:
    """A few lines for a person: what was measured and what was not."""
    unit = "SMs" if result.platform == "cuda" else "CUs"
    lines = [f"{result.device} ({result.arch}): {result.compute_units} {unit}, L2 {result.l2_bytes / 2**20:g} MiB"
             + (f", probed {result.date}" if result.date else "")]
    if result.block_to_cu:
        lines.append(f"  dispatch: {len(result.block_to_cu)} blocks placed, first {list(result.block_to_cu[:8])}; "
                     f"up to {result.resident_blocks} blocks resident per {unit[:-1]}")
    if result.cu_partition:
        extra = f", far L2 hits +{result.l2_far_extra_cycles:g} cycles" if result.l2_bimodal else ""
        lines.append(f"  L2: {result.l2_partitions} partitions ({result.partition_method}){extra}")
    elif result.latency_cus:
        lines.append(f"  L2: hit latency {result.l2_near_cycles:g} cycles" +
                     (f" near, {result.l2_far_cycles:g} far" if result.l2_bimodal else "") + "; no partition map")
    lines += [f"  note: {note}" for note in result.notes]
    return "\n".join(lines)
