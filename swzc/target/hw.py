"""Hardware models: one TOML per GPU under hwmodels/, loaded into a frozen, validated record.

Every figure in a model file names its source in the file's [sources] table (a datasheet or white
paper, or "measured …" with the date and the command); a figure without a source is an error.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from dataclasses import dataclass, fields
from importlib import resources

from swzc.core.errors import SwzcError
from swzc.core.inputs import read_regular

DISPATCH_POLICIES = (
    "round-robin-gpc",  # NVIDIA: consecutive blocks to TPC pairs striding over GPCs (block_to_cu when measured)
    "chiplet-round-robin",  # AMD: block b to chiplet b mod chiplets, each chiplet with its own L2
    "linear",  # block b to compute unit b mod compute_units
)
_INTS = ("compute_units", "l2_bytes", "l2_partitions", "l2_line_bytes", "l2_sector_bytes", "l2_ways", "chiplets",
         "warp_size", "max_threads_per_cu", "max_blocks_per_cu", "regs_per_cu", "smem_per_cu")
OPTIONAL = ("memory_cache_bytes", "block_to_cu", "cu_partition", "l2_far_extra_cycles", "l2_request_coalescer")  # absent: 0 or empty

# The largest figure each count may take: today's GPUs with ample room (MI300X: 304 compute units, 8
# chiplets; H200: 60 MB of L2).  Past these a figure is a mistake, the model's work (which grows with
# chiplets and compute units) would run for minutes, and the prover's 32-bit arithmetic would overflow.
LIMITS = {
    "compute_units": 4096,
    "l2_bytes": 1 << 30,
    "l2_partitions": 64,
    "l2_line_bytes": 4096,
    "l2_sector_bytes": 4096,
    "l2_ways": 1024,
    "chiplets": 64,
    "warp_size": 128,
    "max_threads_per_cu": 8192,
    "max_blocks_per_cu": 1024,
    "regs_per_cu": 1 << 24,
    "smem_per_cu": 1 << 24,
    "memory_cache_bytes": 1 << 32,
}
MAX_DRAM_BYTES_PER_S = 1e15  # 1 PB/s; H200: 4.8 TB/s
MAX_FAR_EXTRA_CYCLES = 10_000.0
MAX_MODEL_FILE_BYTES = 1 << 20  # a model file is a few KB; a measured block_to_cu list stays far below this


@dataclass(frozen=True)
class HardwareModel:
    name: str
    vendor: str  # "nvidia" or "amd"
    arch: str  # compiler target, e.g. sm_90, gfx942
    compute_units: int  # SMs or CUs
    l2_bytes: int  # total L2 over all partitions and chiplets
    l2_partitions: int  # physical slices (Hopper: 2 partitions; MI300X: one L2 per XCD)
    l2_line_bytes: int
    l2_sector_bytes: int  # the unit DRAM traffic is counted in (NVIDIA: 32 B sectors)
    l2_ways: int
    chiplets: int  # dies with a private L2 that blocks are dealt to round-robin (AMD XCDs); 1 if monolithic
    dispatch: str
    dram_bytes_per_s: float
    warp_size: int
    max_threads_per_cu: int
    max_blocks_per_cu: int
    regs_per_cu: int  # 32-bit registers
    smem_per_cu: int  # bytes of shared memory (LDS) a compute unit can give to resident blocks
    sources: tuple[tuple[str, str], ...]  # (figure, where it comes from)
    memory_cache_bytes: int = 0  # a memory-side cache behind L2 (AMD Infinity Cache); 0 if none
    block_to_cu: tuple[int, ...] = ()  # measured: the SM/CU of each block of a probe launch, in launch order
    cu_partition: tuple[int, ...] = ()  # measured: the near L2 partition of each SM/CU id
    l2_far_extra_cycles: float = 0.0  # measured: extra L2 hit latency from the far partition
    l2_request_coalescer: bool = False  # reads of one sector from several SMs at once reach L2 as one (Hopper)

    def __post_init__(self) -> None:
        if self.vendor not in ("nvidia", "amd"):
            raise ValueError(f"vendor must be 'nvidia' or 'amd', not {self.vendor!r}")
        for name in _INTS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
            if value > LIMITS[name]:
                raise ValueError(f"{name} = {value} is more than any GPU this model can describe (at most {LIMITS[name]:,})")
        cache = self.memory_cache_bytes
        if isinstance(cache, bool) or not isinstance(cache, int) or cache < 0:
            raise ValueError(f"memory_cache_bytes must be a non-negative integer, not {cache!r}")
        if cache > LIMITS["memory_cache_bytes"]:
            raise ValueError(f"memory_cache_bytes = {cache} is more than any GPU this model can describe "
                             f"(at most {LIMITS['memory_cache_bytes']:,})")
        far = self.l2_far_extra_cycles
        if isinstance(far, bool) or not isinstance(far, (int, float)) or not 0 <= far <= MAX_FAR_EXTRA_CYCLES:
            raise ValueError(f"l2_far_extra_cycles must be a number from 0 to {MAX_FAR_EXTRA_CYCLES:,.0f}, not {far!r}")
        if not isinstance(self.l2_request_coalescer, bool):
            raise ValueError(f"l2_request_coalescer must be true or false, not {self.l2_request_coalescer!r}")
        if self.dispatch not in DISPATCH_POLICIES:
            raise ValueError(f"dispatch must be one of {', '.join(DISPATCH_POLICIES)}, not {self.dispatch!r}")
        bandwidth = self.dram_bytes_per_s
        if isinstance(bandwidth, bool) or not isinstance(bandwidth, (int, float)) or not 0 < bandwidth < math.inf:
            raise ValueError(f"dram_bytes_per_s must be a positive number, not {bandwidth!r}")
        if bandwidth > MAX_DRAM_BYTES_PER_S:
            raise ValueError(f"dram_bytes_per_s = {bandwidth:g} is more than any GPU this model can describe "
                             f"(at most {MAX_DRAM_BYTES_PER_S:g})")
        if self.l2_bytes % (self.l2_line_bytes * self.l2_ways) or self.l2_line_bytes % self.l2_sector_bytes:
            raise ValueError("l2_bytes must be whole sets of l2_ways lines, and lines whole sectors")
        if self.l2_bytes % self.chiplets:
            raise ValueError("l2_bytes must split evenly over the chiplets")
        if any(not 0 <= cu < self.compute_units for cu in self.block_to_cu):
            raise ValueError("block_to_cu names a compute unit the model does not have")
        if self.cu_partition and (len(self.cu_partition) != self.compute_units or
                                  any(not 0 <= p < self.l2_partitions for p in self.cu_partition)):
            raise ValueError("cu_partition must give a partition below l2_partitions for every compute unit")
        have = {figure for figure, _ in self.sources}
        missing = [f.name for f in fields(self) if f.name not in ("name", "sources") and f.name not in have
                   and (f.name not in OPTIONAL or getattr(self, f.name))]
        if missing:
            raise ValueError(f"no source given for {', '.join(missing)} (add them to [sources])")

    @property
    def flush_bytes(self) -> int:
        """What a write must cover to evict a kernel's data from every on-chip cache: twice L2 and any
        memory-side cache behind it."""
        return 2 * (self.l2_bytes + self.memory_cache_bytes)

    @property
    def l2_bytes_per_domain(self) -> int:
        """The L2 a block can hit in: a chiplet's own L2, or the whole L2 of a monolithic GPU."""
        return self.l2_bytes // self.chiplets

    @property
    def nvcc_arch(self) -> str:
        """What nvcc builds for: the model's own target, or sm_90 for an AMD model checked with nvcc."""
        return self.arch if self.vendor == "nvidia" else "sm_90"

    def source(self, figure: str) -> str:
        return dict(self.sources).get(figure, "")


def available() -> list[str]:
    return sorted(p.name.removesuffix(".toml") for p in resources.files("swzc.hwmodels").iterdir() if p.name.endswith(".toml"))


def named_in(card: str) -> str | None:
    """The bundled model whose name a card's name holds as a word ("NVIDIA H100 80GB HBM3": h100), if one does."""
    return next((name for name in available() if re.search(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])", card, re.I)), None)


def parse_model(text: str, origin: str) -> HardwareModel:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SwzcError(f"{origin}: not valid TOML: {exc}") from None
    except RecursionError:
        raise SwzcError(f"{origin}: not a hardware model: arrays or tables nested too deeply") from None
    wanted = {f.name for f in fields(HardwareModel)}
    required = {f.name for f in fields(HardwareModel) if f.name not in OPTIONAL}
    missing = sorted(required - raw.keys())
    unknown = sorted(raw.keys() - wanted)
    if missing:
        raise SwzcError(f"{origin}: missing {', '.join(missing)}")
    if unknown:
        raise SwzcError(f"{origin}: unknown key(s) {', '.join(unknown)}")
    for name in ("name", "vendor", "arch", "dispatch"):
        if not isinstance(raw[name], str):
            raise SwzcError(f"{origin}: {name} must be a string")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,39}", raw["name"]):
        # it is printed in summaries, reports and review comments, and a model file may come with a project
        raise SwzcError(f"{origin}: name {raw['name'][:60]!r} must be 1-40 letters, digits and . _ + -")
    if not re.fullmatch(r"sm_[0-9]{2,3}[a-z]?|gfx[0-9a-f]{3,4}(:[a-z]+[+-])*", raw["arch"]):
        # it goes onto the compiler's command line (-arch=, --offload-arch=): a target name, nothing else
        raise SwzcError(f"{origin}: arch {raw['arch']!r} is not a GPU target such as sm_90 or gfx942")
    if not isinstance(raw["sources"], dict) or not all(isinstance(v, str) and v.strip() for v in raw["sources"].values()):
        raise SwzcError(f"{origin}: [sources] must map each figure to a non-empty string")
    for name in ("block_to_cu", "cu_partition"):
        if name in raw and not (isinstance(raw[name], list) and all(isinstance(v, int) and not isinstance(v, bool) for v in raw[name])):
            raise SwzcError(f"{origin}: {name} must be a list of integers")
    raw["sources"] = tuple(sorted(raw["sources"].items()))
    for name in ("block_to_cu", "cu_partition"):
        if name in raw:
            raw[name] = tuple(raw[name])
    try:
        return HardwareModel(**raw)
    except (ValueError, TypeError) as exc:
        raise SwzcError(f"{origin}: {exc}") from None


def load(name: str) -> HardwareModel:
    """A bundled model by name (h200, mi300x, …), or a model file by path (ending in .toml)."""
    names = available()
    if name.endswith(".toml") and os.path.lexists(name):
        data = read_regular(name, MAX_MODEL_FILE_BYTES)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SwzcError(f"{name}: not UTF-8 text (byte {exc.start})") from None
        return parse_model(text, name)
    if name not in names:
        if name.endswith(".toml"):
            raise SwzcError(f"{name}: no such file (and no bundled hardware model has that name; known: {', '.join(names)})")
        raise SwzcError(f"unknown hardware model {name!r}; known: {', '.join(names)} (or a path to a .toml file)")
    text = resources.files("swzc.hwmodels").joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return parse_model(text, f"hwmodels/{name}.toml")
