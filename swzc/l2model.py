"""An L2 model that predicts the hit rate and DRAM traffic of a block order, without a GPU.

The model, in the terms it works in:

- **Dispatch.** Blocks start in dispatch order, in waves of ``resident blocks per compute unit x compute
  units``.  On a chiplet GPU (``chiplets > 1``) block ``p`` goes to chiplet ``p mod chiplets``, and each
  chiplet has its own L2 and its own waves.
- **Footprints.** A block touches the footprint its `Access` records give: one shape per access, moved
  by the block's offset.  Within a wave, blocks run side by side, so data that several blocks of a wave
  share is fetched once.
- **Reuse across waves.** Blocks of a wave move through their loops together, so the data touched between
  a footprint's use in wave v and its next use in wave w is the union footprint of waves v .. w-1.  The
  footprint is still in L2 when that is smaller than the L2: LRU at wave granularity.
- **Neighbours.** Partial overlaps between neighbouring blocks (stencil halos) count as shared when the
  neighbour ran in the same wave or recently enough.
- **Units.** Traffic counts in the L2's fetch unit (NVIDIA: 32-byte sectors; AMD: 128-byte lines).
  Every block reads each unit of its footprint from L2 once (the L1 serves repeats inside a block).
  Writes count as requests that hit, and as DRAM write traffic.

What it leaves out: timing inside a wave (blocks that drift apart), L1 misses that re-read L2, cache
associativity and replacement details, DRAM row effects, and any access the footprint analysis could not
express.  The predicted-vs-measured table in bench/results/ says how far that goes on the H200.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from swzc.footprint import Access, Footprint, residency
from swzc.hw import HardwareModel


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

    def __init__(self, fp: Footprint, hw: HardwareModel, regs_per_thread: int = 32) -> None:
        self.fp = fp
        self.hw = hw
        self.unit = hw.l2_sector_bytes
        per_cu = residency(fp, hw.max_threads_per_cu, hw.max_blocks_per_cu, hw.smem_per_cu, hw.regs_per_cu, regs_per_thread)
        self.wave = max(1, per_cu * hw.compute_units // hw.chiplets)  # blocks per wave on one chiplet
        self.capacity = hw.l2_bytes_per_domain // self.unit
        self.reads = _streams(fp, self.unit, write=False)
        self.writes = _streams(fp, self.unit, write=True)

    def predict(self, name: str, order: np.ndarray, adapter: str, divisor: int = 0) -> Prediction:
        tiles = _tiles_of(order, adapter, divisor, self.fp.grid)
        total = tiles.shape[0]
        chiplets = self.hw.chiplets
        position = np.arange(total)
        domain = position % chiplets
        wave = (position // chiplets) // self.wave  # wave index inside the block's chiplet
        requests = sum(int(s.units.size) for s in (*self.reads, *self.writes)) * total
        misses = 0
        for d in range(chiplets):
            mine = domain == d
            misses += self._domain_misses(tiles[mine], wave[mine])
        write_bytes = sum(int(s.units.size) for s in self.writes) * total * self.unit
        hit = 100.0 * (1.0 - misses / requests) if requests else 0.0
        return Prediction(name, round(hit, 2), float(misses * self.unit + write_bytes), requests, int(misses))

    def _domain_misses(self, tiles: np.ndarray, wave: np.ndarray) -> int:
        if tiles.size == 0 or not self.reads:
            return 0
        n_waves = int(wave.max()) + 1
        keyed = []
        union = np.zeros(n_waves, dtype=np.float64)  # bytes-in-units each wave touches, all streams
        for stream in self.reads:
            key = tiles @ np.array(stream.offsets, dtype=np.int64)
            code, first = _unique_first(wave * (1 << 40) + (key - key.min()))
            w, k = wave[first], key[first]
            size = stream.units.size
            counts = np.bincount(w, minlength=n_waves).astype(np.float64) * size
            for delta, overlap in stream.neighbours:  # halos shared inside a wave are fetched once
                if delta > 0:
                    at = np.minimum(np.searchsorted(code, code + delta), code.size - 1)  # code is sorted
                    present = code[at] == code + delta
                    counts -= np.bincount(w[present], minlength=n_waves) * overlap
            union += counts
            keyed.append((stream, w, k))
        before = np.concatenate([[0.0], np.cumsum(union)])  # units touched by all waves before wave i
        misses = 0
        for stream, w, k in keyed:
            misses += self._stream_misses(stream, w, k, before)
        return misses

    def _stream_misses(self, stream: _Stream, w: np.ndarray, k: np.ndarray, before: np.ndarray) -> int:
        """Misses of one access stream: first touches of a footprint in a wave that L2 no longer holds."""
        size = stream.units.size
        order = np.lexsort((w, k))
        w, k = w[order], k[order]
        same_key = np.concatenate([[False], k[1:] == k[:-1]])
        previous = np.where(same_key, np.concatenate([[0], w[:-1]]), -1)
        held = (previous >= 0) & (before[w] - before[np.maximum(previous, 0)] < self.capacity)
        fresh = ~held
        missed = fresh.astype(np.float64) * size
        if stream.neighbours:
            # a fresh footprint that overlaps a neighbour still held, or fetched in this wave, misses less
            last_seen = _last_wave_lookup(k, w)
            for delta, overlap in stream.neighbours:
                seen = last_seen(k + delta, w)
                recent = (seen >= 0) & ((seen == w) | (before[w] - before[np.maximum(seen, 0)] < self.capacity))
                share = np.where(seen == w, 0.5, 1.0)  # two fresh neighbours in one wave share the halo
                missed -= fresh * recent * share * overlap
        return int(np.clip(missed, 0, size).sum())


def _last_wave_lookup(k: np.ndarray, w: np.ndarray):
    """A function giving, for keys and waves, the last wave <= w in which each key appeared (-1: never)."""
    span = int(w.max()) + 2
    codes = k * span + w
    order = np.argsort(codes)
    codes_sorted, waves_sorted, keys_sorted = codes[order], w[order], k[order]

    def last(keys: np.ndarray, waves: np.ndarray) -> np.ndarray:
        at = np.searchsorted(codes_sorted, keys * span + waves, side="right") - 1
        valid = at >= 0
        at = np.maximum(at, 0)
        found = valid & (keys_sorted[at] == keys)
        return np.where(found, waves_sorted[at], -1)

    return last


def _unique_first(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values and the index of each one's first occurrence (a sort, not a hash)."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    keep = np.concatenate([[True], ordered[1:] != ordered[:-1]])
    return ordered[keep], order[keep]
