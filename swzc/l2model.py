"""An L2 model that predicts the hit rate and DRAM traffic of a block order, without a GPU.

- **Footprints.** Every block touches the shape its `Access` records give, moved by the block's offset,
  counted in the L2's fetch unit (NVIDIA: 32-byte sectors; AMD: 128-byte lines).  Each block reads each
  unit of its footprint from L2 once (its L1 serves repeats); writes are requests that hit.
- **Reuse distance.** Blocks are taken in dispatch order.  When a block reads a footprint an earlier
  block read `d` positions before, the data touched in between is the expected number of distinct
  footprints in a window of `d` blocks (from the gaps between repeats, over every stream).  The
  footprint is still in L2 while that fits, with a soft edge of `SOFTNESS`, in `EFFECTIVE` of the L2.
- **Halos.** A footprint that partly overlaps a neighbour's (a stencil) gets the shared part the
  same way from the neighbour.
- **Chiplets.** Block p runs on chiplet p mod N, with that chiplet's own L2 and block sequence.
- **Partitions (NVIDIA).** A request homed in another L2 partition looks its near partition up first;
  that lookup misses unless a near copy is held (an L2 of capacity / partitions).  ncu's hit rate
  counts both lookups.

What it leaves out: time inside a block's life (blocks that share data while running side by side),
associativity and replacement details, L1 misses that re-read L2, DRAM page effects, and any access the
footprint analysis could not express.  bench/results/l2_model_vs_ncu_h200.md says how far that goes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from swzc.footprint import Footprint
from swzc.hw import HardwareModel


# Calibrated on the three GEMMs of bench/results/l2_ncu_h200.json (the stencil and the transpose were held
# out): the share of L2 the model lets a footprint use, and how soft the LRU edge is.
EFFECTIVE = 0.8
SOFTNESS = 0.25


@dataclass(frozen=True)
class Prediction:
    candidate: str
    l2_hit_rate: float  # percent of L2 requests (fetch units) that hit
    dram_bytes: float  # read misses + writes
    requests: int  # L2 requests, in fetch units
    read_misses: int


@dataclass(frozen=True)
class _Stream:
    units: np.ndarray  # relative fetch units one block touches
    offsets: tuple[int, int, int]  # fetch units per unit of (row, col, z)
    neighbours: tuple[tuple[int, int], ...]  # (delta in units, overlap in units)


def _streams(fp: Footprint, unit_bytes: int, write: bool) -> list[_Stream]:
    streams = []
    for access in fp.accesses:
        if access.write != write:
            continue
        units = np.unique(access.sectors * 32 // unit_bytes)
        offsets = tuple(int(b // unit_bytes) for b in access.block_bytes)
        streams.append(_Stream(units, offsets, _neighbours(units, offsets)))  # type: ignore[arg-type]
    return streams


def _neighbours(units: np.ndarray, offsets: tuple[int, int, int]) -> tuple[tuple[int, int], ...]:
    """Offsets to nearby blocks whose footprints overlap this one's, with the overlap size."""
    r, c, _ = offsets
    found = []
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            delta = dr * r + dc * c
            if delta == 0:
                continue
            overlap = int(np.intersect1d(units, units + delta, assume_unique=True).size)
            if overlap:
                found.append((delta, overlap))
    return tuple(sorted(set(found)))


def _tiles_of(order: np.ndarray, adapter: str, divisor: int, grid: tuple[int, int, int]) -> np.ndarray:
    """Logical (row, col, z) of each dispatch position, from the (x, y, z) blocks the swizzle maps to."""
    x, y, z = (order[:, i].astype(np.int64) for i in range(3))
    if adapter == "2d":
        return np.stack([y, x, z], axis=1)
    if adapter == "1d" and divisor:
        return np.stack([x // divisor, x % divisor, z * grid[1] + y], axis=1)
    return np.stack([np.zeros_like(x), x, z * grid[1] + y], axis=1)


class L2Model:
    """Prediction for one kernel footprint on one GPU; `predict` scores one block order."""

    def __init__(self, fp: Footprint, hw: HardwareModel, effective: float = EFFECTIVE, softness: float = SOFTNESS) -> None:
        self.fp = fp
        self.hw = hw
        self.unit = hw.l2_sector_bytes
        self.capacity = effective * hw.l2_bytes_per_domain / self.unit
        self.softness = softness
        far = 1.0 - 1.0 / hw.l2_partitions if hw.vendor == "nvidia" and hw.chiplets == 1 else 0.0
        self.far_share = far  # requests homed in a far L2 partition
        self.reads = _streams(fp, self.unit, write=False)
        self.writes = _streams(fp, self.unit, write=True)

    def predict(self, name: str, order: np.ndarray, adapter: str, divisor: int = 0) -> Prediction:
        tiles = _tiles_of(order, adapter, divisor, self.fp.grid)
        total = tiles.shape[0]
        chiplets = self.hw.chiplets
        reads = sum(int(s.units.size) for s in self.reads) * total
        writes = sum(int(s.units.size) for s in self.writes) * total
        home = near = 0.0
        for d in range(chiplets):  # block p runs on chiplet p mod chiplets, against that chiplet's L2
            h, n = self._domain_misses(tiles[d::chiplets])
            home, near = home + h, near + n
        # A request homed in another partition looks the near partition up first: one more lookup, which
        # misses unless a near copy is held; writes go through without fetching.
        far = self.far_share
        lookups = reads + far * near + writes * (1.0 + far)
        misses = home + far * near
        hit = 100.0 * (1.0 - misses / lookups) if lookups else 0.0
        return Prediction(name, round(hit, 2), float(home * self.unit + writes * self.unit), int(round(lookups)), int(round(home)))

    def _domain_misses(self, tiles: np.ndarray) -> tuple[float, float]:
        """Units missed in the home L2 (fetched from DRAM) and in the near partition's copies."""
        count = tiles.shape[0]
        if count == 0 or not self.reads:
            return 0.0, 0.0
        position = np.arange(count, dtype=np.int64)
        streams = [(s, _occurrences(tiles @ np.array(s.offsets, dtype=np.int64), position)) for s in (*self.reads, *self.writes)]

        def kept(gap: np.ndarray, capacity: float) -> np.ndarray:
            """The share of a footprint still in an L2 of `capacity` units after `gap` blocks: LRU over the
            distinct data the blocks in between touched (their whole footprints), with a soft edge."""
            distinct = sum(s.units.size * occ.distinct_in(np.maximum(gap, 1), count) for s, occ in streams)
            x = distinct / capacity
            return np.where(gap > 0, np.clip((1.0 + self.softness - x) / (2.0 * self.softness), 0.0, 1.0), 0.0)

        missed = [0.0, 0.0]
        for stream, occ in streams[: len(self.reads)]:
            size = stream.units.size
            halos = [(occ.gap_to(occ.key + delta), overlap) for delta, overlap in stream.neighbours]
            for i, capacity in enumerate((self.capacity, self.capacity / self.hw.l2_partitions)):
                own = kept(occ.gap, capacity)
                lost = (1.0 - own) * size
                for gap, overlap in halos:  # halos a neighbour brought in, if still held
                    lost -= (1.0 - own) * kept(gap, capacity) * overlap
                missed[i] += float(np.clip(lost, 0.0, size).sum())
        return missed[0], missed[1]


@dataclass(frozen=True)
class _Occurrences:
    """The blocks of one stream in dispatch order: each block's key and its distance to the last block
    with the same key (0 when none came before)."""

    key: np.ndarray
    position: np.ndarray
    gap: np.ndarray
    sorted_gaps: np.ndarray  # the non-zero gaps, sorted
    gap_sums: np.ndarray  # prefix sums of sorted_gaps
    codes: np.ndarray  # key * span + position, sorted
    span: int

    def distinct_in(self, window: np.ndarray, count: int) -> np.ndarray:
        """Expected distinct keys among `window` consecutive blocks: the window, less the blocks whose key
        already appeared earlier in the same window (a block with gap g repeats in a window of length d
        placed at random with probability (d - g) / count when g < d)."""
        below = np.searchsorted(self.sorted_gaps, window, side="left")
        repeats = (window * below - self.gap_sums[below]) / count
        return np.maximum(window - repeats, 1.0)

    def gap_to(self, keys: np.ndarray) -> np.ndarray:
        """Distance from each block back to the last earlier block holding `keys` (0 when none did)."""
        at = np.searchsorted(self.codes, keys * self.span + self.position, side="left") - 1
        at_clipped = np.maximum(at, 0)
        found = (at >= 0) & (self.codes[at_clipped] // self.span == keys)
        return np.where(found, self.position - self.codes[at_clipped] % self.span, 0)


def _occurrences(key: np.ndarray, position: np.ndarray) -> _Occurrences:
    key = key - key.min() if key.size else key
    span = int(position.size) + 1
    codes = key * span + position
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    same = np.concatenate([[False], (sorted_codes[1:] // span) == (sorted_codes[:-1] // span)])
    gap_sorted = np.where(same, np.diff(sorted_codes, prepend=0), 0)
    gap = np.empty_like(gap_sorted)
    gap[order] = gap_sorted
    finite = np.sort(gap[gap > 0])
    return _Occurrences(key, position, gap, finite, np.concatenate([[0], np.cumsum(finite)]), sorted_codes, span)
