"""An L2 model that predicts the hit rate and DRAM traffic of a block order, without a GPU.

- **Footprints.** Every block touches the shape its `Access` records give, moved by the block's offset,
  counted in the L2's fetch unit (NVIDIA: 32-byte sectors; AMD: 128-byte lines).  Each block reads each
  unit of its footprint from L2 once (its L1 serves repeats); writes are requests that hit.
- **Phases and waves.** A block is a sequence of phases (its loop's iterations): in phase t it reads
  slice t of each footprint.  `resident` blocks run at once (a wave: blocks per SM or CU, from the
  compiler's resource usage, times the SMs); a block starts when one ends, in dispatch order.  Two blocks
  that read the same footprint `g` dispatch positions apart read each slice a time apart, and the data
  touched in between is what every running block touches in that time.  When the blocks' starts are
  spread evenly (the steady state), that is the expected number of distinct footprints in a window of `g`
  blocks (from the gaps between repeats, over every stream): the reuse distance in bytes.  The slice is
  still in L2 while that fits, with a soft edge of `SOFTNESS`, in `EFFECTIVE` of the L2.
- **Co-resident blocks in step.** Blocks that start in the same wave advance together, so one that
  shares a footprint with a block `g < resident` positions before it finds each slice just fetched.
  The first wave starts at once: every reuse inside it hits, whatever the distance (measured on the H200,
  bench/results/rows_h200.md: launches of one wave fetch 0.83-1.00 of the way to each shared slice
  once).  Later blocks start as earlier ones end; two such blocks started in the same wave with
  probability `1 - g / resident`, and stayed together (blocks drift apart the more, the further apart
  they started) with about the same probability: a share `IN_STEP * (1 - g / resident) ** DRIFT` of those
  reuses hits, whatever the distance (`DRIFT` 2).  (On a grid larger than the blocks the model is given, which are its
  first ones, the first wave counts for more than its share.)  With `crisp_waves` every wave starts at
  once, as the H200 does at one block per SM (bench/results/slots_h200.md): a reuse from a block of the
  same wave hits and one from an earlier wave is LRU's.  That form gets those kernels' DRAM reads and not
  their hit rates (the coalescer merges more of such waves' reads than `MERGED` says), so the ranking does
  not use it.
- **Request coalescing (Hopper).** Reads of one sector that several SMs send at about the same time
  reach L2 as one request (its L2 request coalescer answers them all).  Blocks send their reads that
  close together when they stage them: a loop copies global data to shared memory and waits at a
  barrier, so every block in step issues a pass's loads at once.  In such a kernel a share `MERGED` of
  the in-step reuses is never looked up in L2, so it counts neither as a request nor as a hit.
  Measured on the H200 (bench/results/l1_probe_h200.md, ncu's lrc__ counters): the three staged GEMMs
  merge 8-14 %, 12-22 % and 31-37 % of their read sectors, the six kernels that load straight from
  global memory at most 6 %.
- **Halos.** A footprint that partly overlaps a neighbour's (a stencil) gets the shared part the
  same way from the neighbour.
- **Chiplets.** Block p runs on chiplet p mod N, with that chiplet's own L2, block sequence and
  share of the resident blocks.
- **Partitions (NVIDIA).** A request homed in another L2 partition looks its near partition up first;
  that lookup misses unless a near copy is held (an L2 of capacity / partitions), and then goes on over
  the fabric between them to its home.  ncu's hit rate counts both lookups.  Only a read from the same
  side of the chip leaves a near copy there: the copy a block finds is the one the last reader on its
  side left, the k-th reader before it with probability (1/P)(1 - 1/P)^(k-1) for P partitions (a block's
  side is independent of its position).  So n blocks in step fetch a sector once from DRAM but about P
  times into the near partitions.  Predicted before measuring and then measured on the H200 with ncu's
  fabric counter (bench/results/fabric_h200.md, 66 orders of 9 kernels): this gets the sectors sent
  across within 1.13x (median), where taking the copy the last reader left, wherever it ran
  (`NEAR_READERS` = 1), was off by 1.54x: half the traffic of the naive, shared-memory and
  register-blocked GEMMs.

What it leaves out: how far blocks drift out of step and how many requests coalesce (it takes one share of
each for every kernel; measured, the bf16 GEMM's waves stay crisp and a third of its reads merge, the
shared-memory GEMM's drift apart and a tenth merge; timed, bench/results/timeline_h200.md, what tells
kernels apart is whether blocks that read one panel start together, which nothing read before a run
predicts yet), L1 hits between blocks on one SM and L1 misses that re-read L2, associativity and
replacement details, DRAM page effects, and any access the footprint analysis could not express.
bench/results/l2_model_vs_ncu_h200.md says how far that goes, kernel by kernel, with the constants
fitted on half of the kernels.
"""

from __future__ import annotations

from collections.abc import Callable
import math
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from swzc.formulas.swizzles import Formula
from swzc.model.footprint import Footprint
from swzc.target.hw import HardwareModel


# The share of L2 the model lets a footprint use, and how soft the LRU edge is: calibrated on the three
# GEMMs of bench/results/l2_ncu_h200.json before the phase model, and kept.
EFFECTIVE = 0.8
SOFTNESS = 0.25
# The share of that capacity the model lets distinct data use at the home level (what DRAM is read for); the
# rest is taken by near-partition copies of data homed in the other one.  Fitted against ncu's DRAM bytes on
# the same half of the H200's kernels as IN_STEP and MERGED (bench/l2/fit.py --dram,
# bench/results/l2_fit_dram_h200.json), then checked on kernels measured after the fit (bench/l2/README.md).
UNIQUE = 0.7
# Fitted by bench/l2/fit.py on half of the measured kernels (the other half held out): the share of reuses
# between co-resident blocks that happen in step, and the share of those the L2 request coalescer merges.  With
# UNIQUE above, each fit gives the other's value again (bench/l2/README.md).
IN_STEP = 0.8
MERGED = 0.1
# The near copy is looked for among this many earlier readers of the same data (the last one stands for all
# those further back: with two partitions the first four cover 15/16 of the chance).  1 would take the copy
# the last reader left, whichever side it ran on.
NEAR_READERS = 4
# How fast co-resident blocks drift out of step with the distance between their starts: the in-step share falls as
# (1 - g / resident) ** DRIFT.  Tried from 1 to 16 on every kernel measured (bench/l2/drift.py): no one value serves
# every kernel (a larger one gets the DRAM bytes of the original order of the naive and staged GEMMs closer and the
# hit rates of the tensor-core GEMMs, whose waves stay crisp, further off), so it stays at 2.
DRIFT = 2.0


@dataclass(frozen=True)
class Prediction:
    candidate: str
    l2_hit_rate: float  # percent of L2 requests (fetch units) that hit
    dram_bytes: float  # read misses + writes
    requests: int  # L2 requests, in fetch units
    read_misses: int
    reads: int = 0  # the footprint's reads, in fetch units
    merged: int = 0  # reads the L2 request coalescer merges: never looked up
    fabric: int = 0  # requests sent on from a near partition to the far home one (ncu: lts__t_sectors_srcunit_ltcfabric)
    formula: Formula | None = field(default=None, compare=False)  # the order predicted, where a ranking made it

    def scaled(self, scale: float) -> Prediction:
        """This prediction over the first dispatch positions, as totals for a grid `scale` times as large: every
        count grows with it, the hit rate stays."""
        if scale == 1.0:
            return self
        counts = ("requests", "read_misses", "reads", "merged", "fabric")
        return replace(self, dram_bytes=self.dram_bytes * scale, **{name: int(round(getattr(self, name) * scale)) for name in counts})


@dataclass(frozen=True)
class _Stream:
    """One access of the footprint.  Blocks are told apart by a key, the offset of their footprint in
    units of `key_offsets` (the offsets over their common factor: keys then fit 16 bits more often, and
    sort faster)."""

    units: np.ndarray  # relative fetch units one block touches
    offsets: tuple[int, int, int]  # fetch units per unit of (row, col, z)
    key_offsets: tuple[int, int, int]  # key per unit of (row, col, z)
    neighbours: tuple[tuple[int, int], ...]  # (key delta to a nearby block, units its footprint shares)


def _streams(fp: Footprint, unit_bytes: int, write: bool) -> list[_Stream]:
    streams = []
    for access in fp.accesses:
        if access.write != write:
            continue
        units = _sorted_unique(access.sectors * 32 // unit_bytes)
        offsets = tuple(int(b // unit_bytes) for b in access.block_bytes)
        step = int(np.gcd.reduce([abs(o) for o in offsets if o])) if any(offsets) else 1
        neighbours = tuple((delta // step, overlap) for delta, overlap in _neighbours(units, offsets))  # type: ignore[arg-type]
        streams.append(_Stream(units, offsets, tuple(o // step for o in offsets), neighbours))  # type: ignore[arg-type]
    return streams


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """np.unique of `values`, in one pass where they are sorted already (a footprint's sectors are)."""
    if values.size < 2 or not bool(np.all(values[1:] >= values[:-1])):
        return np.unique(values)
    return values[np.concatenate(([True], values[1:] != values[:-1]))]


def _neighbours(units: np.ndarray, offsets: tuple[int, int, int]) -> tuple[tuple[int, int], ...]:
    """Offsets to nearby blocks whose footprints overlap this one's, with the overlap size."""
    r, c, _ = offsets
    found = []
    if units.size == 0:
        return ()
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            delta = dr * r + dc * c
            if delta == 0:
                continue
            shifted = units + delta  # both sorted and unique: the units found in both, by binary search
            overlap = int(np.count_nonzero(units[np.minimum(np.searchsorted(units, shifted), units.size - 1)] == shifted))
            if overlap:
                found.append((delta, overlap))
    return tuple(sorted(set(found)))


def _tiles_of(order: np.ndarray, adapter: str, divisor: int, grid: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Logical (row, col, z) of each dispatch position, from the (x, y, z) blocks the swizzle maps to: three
    columns."""
    x, y, z = (order[:, i].astype(np.int64) for i in range(3))
    if adapter == "2d":
        return y, x, z
    if adapter == "1d" and divisor:
        return x // divisor, x % divisor, z * grid[1] + y
    return np.zeros_like(x), x, z * grid[1] + y


class L2Model:
    """Prediction for one kernel footprint on one GPU; `predict` scores one block order."""

    def __init__(self, fp: Footprint, hw: HardwareModel, resident: int | None = None, effective: float = EFFECTIVE,
                 softness: float = SOFTNESS, in_step: float = IN_STEP, merged: float = MERGED,
                 near_readers: int = NEAR_READERS, crisp_first_wave: bool = True, crisp_waves: bool = False,
                 unique: float = UNIQUE, drift: float = DRIFT) -> None:
        self.fp = fp
        self.hw = hw
        # blocks running at once on the whole GPU; without a figure, as many as the threads allow
        self.resident = max(1, resident if resident is not None else default_resident(hw, fp.threads))
        self.in_step = in_step
        self.drift = drift  # the in-step share's power of 1 - gap / resident
        self.near_readers = near_readers  # earlier readers a near-partition copy is looked for among
        self.crisp_first_wave = crisp_first_wave  # the first `resident` blocks start at once
        self.crisp_waves = crisp_waves  # every wave of `resident` blocks starts at once (one block per SM)
        # only a kernel that stages its reads behind a barrier sends them in the bursts that coalesce
        self.merged_share = merged if hw.l2_request_coalescer and fp.staged else 0.0
        self.unit = hw.l2_sector_bytes
        self.capacity = effective * hw.l2_bytes_per_domain / self.unit
        self.softness = softness
        self.unique = unique  # the share of `capacity` distinct data may use at the home level
        far = 1.0 - 1.0 / hw.l2_partitions if hw.vendor == "nvidia" and hw.chiplets == 1 else 0.0
        self.far_share = far  # requests homed in a far L2 partition
        self.reads = _streams(fp, self.unit, write=False)
        self.writes = _streams(fp, self.unit, write=True)
        self._by_count: dict[tuple[int, float], tuple[np.ndarray, ...]] = {}  # `_tables`, per block count

    def predict(self, name: str, order: np.ndarray, adapter: str, divisor: int = 0) -> Prediction:
        tiles = _tiles_of(order, adapter, divisor, self.fp.grid)
        total = tiles[0].shape[0]
        chiplets = self.hw.chiplets
        reads = sum(int(s.units.size) for s in self.reads) * total
        writes = sum(int(s.units.size) for s in self.writes) * total
        home = near = merged = 0.0
        for d in range(chiplets):  # block p runs on chiplet p mod chiplets, against that chiplet's L2
            h, n, m = self._domain_misses(tuple(t[d::chiplets] for t in tiles) if chiplets > 1 else tiles)
            home, near, merged = home + h, near + n, merged + m
        # A request homed in another partition looks the near partition up first: one more lookup, which
        # misses unless a near copy is held; writes go through without fetching.  Merged reads are never
        # looked up (they would have hit).
        far = self.far_share
        lookups = reads - merged + far * near + writes * (1.0 + far)
        misses = home + far * near
        hit = 100.0 * (1.0 - misses / lookups) if lookups else 0.0
        fabric = far * (near + writes)
        return Prediction(name, round(hit, 2), float(home * self.unit + writes * self.unit), int(round(lookups)), int(round(home)),
                          reads, int(round(merged)), int(round(fabric)))

    def _domain_misses(self, tiles: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[float, float, float]:
        """Units missed in the home L2 (fetched from DRAM) and in the near partition's copies, and the units
        the request coalescer merges before L2.  Streams of the same key offsets share their occurrences and
        everything computed from them (one sort of the keys, one table of distinct units, ...)."""
        count = tiles[0].shape[0]
        if count == 0 or not self.reads:
            return 0.0, 0.0, 0.0
        resident = max(1.0, self.resident / self.hw.chiplets)  # this chiplet's share of the running blocks
        # Everything below depends on a reuse only through its gap (0 to count - 1; 0: no reuse), so it is
        # tabled by gap once per block count (`_tables`).  In a gap: the distinct units touched, and the share
        # of such reuses that would be in step if every co-resident block were.
        position, window, in_step, step, unstep = self._tables(count, resident)
        extents = tuple(int(t.max()) + 1 for t in tiles)
        shared: dict[tuple, _Occurrences] = {}

        def occurrences_of(s: _Stream, write: bool) -> _Occurrences:
            plain = _one_block_each(s.key_offsets, extents) and (write or not s.neighbours)
            k = (plain, s.key_offsets)
            if k not in shared:
                shared[k] = _unrepeated(position) if plain else _occurrences(_keys(tiles, s.key_offsets), position)
            return shared[k]

        streams = [(s, occurrences_of(s, write))
                   for write, s in [*((False, r) for r in self.reads), *((True, w) for w in self.writes)]]
        distinct: dict[int, np.ndarray] = {}
        for _, occ in streams:
            if id(occ) not in distinct:
                distinct[id(occ)] = occ.distinct_in_all(window, count)
        touched = sum(s.units.size * distinct[id(occ)] for s, occ in streams)

        def kept(capacity: float) -> np.ndarray:
            """By gap: the share of a slice still in an L2 of `capacity` units when the block `gap` positions
            later reads it: in step with that block (a share of the co-resident ones), or else LRU over the
            distinct data touched in between, with a soft edge."""
            lru = np.clip((1.0 + self.softness - touched / capacity) / (2.0 * self.softness), 0.0, 1.0)
            table = step + unstep * lru
            table[0] = 0.0  # no reuse at gap 0
            return table

        first = int(min(count, math.ceil(resident))) if not self.crisp_waves and self.crisp_first_wave else None
        together = None if first is not None else self._together(position, resident)

        def kept_at(gap: np.ndarray, table: np.ndarray) -> np.ndarray:
            """`table` at each gap, and every reuse of a block that started with the one it reuses from."""
            if first is not None:  # a block of the first wave (a prefix of the positions) hits every reuse
                out = table[gap]
                head = out[:first]
                head[gap[:first] > 0] = 1.0
                return out
            return table[gap] if together is None else np.where(together(gap), 1.0, table[gap])

        def kept_near(occ: _Occurrences, table: np.ndarray) -> np.ndarray:
            """`kept` for a near partition's copy: the last reader on this block's side left it, and that is
            the k-th earlier reader of the same data with probability (1/P)(1 - 1/P)^(k-1)."""
            side = 1.0 / partitions
            own, left = np.zeros(count), 1.0
            for k, gap in enumerate(occ.gaps_back(self.near_readers), 1):
                share = left if k == self.near_readers else left * side
                own += share * kept_at(gap, table)
                left -= share
            return own

        missed = [0.0, 0.0]
        merged = 0.0
        partitions = self.hw.l2_partitions
        levels = [kept(self.capacity * self.unique)]
        if self.far_share:
            levels.append(kept(self.capacity / partitions))
        owns: dict[tuple, np.ndarray] = {}
        halo_gaps: dict[tuple, np.ndarray] = {}
        halo_kept: dict[tuple, np.ndarray] = {}
        plain_lost: dict[tuple, float] = {}
        merged_sums: dict[int, float] = {}
        for stream, occ in streams[: len(self.reads)]:
            size = stream.units.size
            halos = []
            for delta, overlap in stream.neighbours:
                hk = (id(occ), delta)
                if hk not in halo_gaps:
                    halo_gaps[hk] = occ.gap_to(occ.key + delta)
                halos.append((hk, overlap))
            if self.merged_share:  # own reuses in step (`in_step` is 0 where there is no reuse)
                if id(occ) not in merged_sums:
                    step_now = self.in_step * in_step[occ.gap]
                    if first is not None:
                        step_now[:first][occ.gap[:first] > 0] = 1.0
                    elif together is not None:
                        step_now = np.where(together(occ.gap), 1.0, step_now)
                    merged_sums[id(occ)] = float(step_now.sum())
                merged += self.merged_share * merged_sums[id(occ)] * size
            repeats = None
            for i, table in enumerate(levels):
                ok = (id(occ), i)
                if ok not in owns:
                    if repeats is None:
                        repeats = bool(occ.gap.any())
                    owns[ok] = kept_near(occ, table) if i and repeats else kept_at(occ.gap, table)
                own = owns[ok]
                if not halos:
                    lk = (id(occ), i, size)
                    if lk not in plain_lost:
                        plain_lost[lk] = float(np.clip((1.0 - own) * size, 0.0, size).sum())
                    missed[i] += plain_lost[lk]
                    continue
                lost = (1.0 - own) * size
                for hk, overlap in halos:  # halos a neighbour brought in, if still held
                    kk = (*hk, i)
                    if kk not in halo_kept:
                        halo_kept[kk] = kept_at(halo_gaps[hk], table)
                    lost -= (1.0 - own) * halo_kept[kk] * overlap
                missed[i] += float(np.clip(lost, 0.0, size).sum())
        return missed[0], missed[1], merged

    def _tables(self, count: int, resident: float) -> tuple[np.ndarray, ...]:
        """What depends only on the block count and the residency, by gap (made once per model and count):
        the positions (= the gaps), the windows (gaps, 1 at least), the in-step share, the model's in-step
        share `step` and 1 - `step`."""
        key = (count, resident)
        if key not in self._by_count:
            gaps = np.arange(count, dtype=np.int64)
            in_step = np.where(gaps > 0, np.clip(1.0 - gaps / resident, 0.0, 1.0) ** self.drift, 0.0)
            if self.crisp_waves:  # a block of an earlier wave started a lifetime before: never in step
                in_step = np.zeros(count)
            step = self.in_step * in_step
            self._by_count[key] = (gaps, np.maximum(gaps, 1), in_step, step, 1.0 - step)
        return self._by_count[key]

    def _together(self, position: np.ndarray, resident: float) -> Callable[[np.ndarray], np.ndarray] | None:
        """For the blocks at dispatch `position`s: which of their reuses `gap` positions back come from a block
        that started at the same moment (and so hit, in step): one of the same wave when every wave starts at
        once, one of the first wave when only that one does; None when no wave does."""
        if self.crisp_waves:
            wave = np.floor(position / resident)
            return lambda gap: (gap > 0) & (np.floor((position - gap) / resident) == wave)
        if self.crisp_first_wave:
            first = position < resident  # a block of the first wave reuses only from earlier blocks of it
            return lambda gap: first & (gap > 0)
        return None


def _one_block_each(key_offsets: tuple[int, int, int], extents: tuple[int, ...]) -> bool:
    """Whether no two tiles of a grid of `extents` share a key: each axis' offset, smallest first, steps
    past everything the smaller ones reach (every block writes its own tile, say)."""
    reach = 0
    for offset, extent in sorted((abs(o), e) for o, e in zip(key_offsets, extents) if e > 1):
        if offset <= reach:
            return False
        reach += offset * (extent - 1)
    return True


def _unrepeated(position: np.ndarray) -> _Occurrences:
    """The occurrences of a stream whose every block has its own key: no block repeats another's."""
    zeros = np.zeros(2, dtype=np.int64)
    return _Occurrences(position, position, np.zeros_like(position), zeros, zeros, int(position.size) + 1, position, position)


def _keys(tiles: tuple[np.ndarray, np.ndarray, np.ndarray], key_offsets: tuple[int, int, int]) -> np.ndarray:
    """Each dispatch position's footprint key: its tile's (row, col, z) times the stream's key offsets."""
    key = np.zeros(tiles[0].shape[0], dtype=np.int64)
    for axis, offset in enumerate(key_offsets):
        if offset:
            key += tiles[axis] * offset
    return key


def default_resident(hw: HardwareModel, threads: int) -> int:
    """Blocks running at once when nothing better is known: as many per SM or CU as the threads allow."""
    per_cu = min(hw.max_blocks_per_cu, hw.max_threads_per_cu // max(1, threads)) or 1
    return per_cu * hw.compute_units


@dataclass(frozen=True)
class _Occurrences:
    """The blocks of one stream in dispatch order: each block's key and its distance to the last block
    with the same key (0 when none came before)."""

    key: np.ndarray
    position: np.ndarray
    gap: np.ndarray
    shorter: np.ndarray  # shorter[d]: how many non-zero gaps are below d (d from 0 to the block count + 1)
    shorter_sum: np.ndarray  # shorter_sum[d]: the sum of those gaps
    span: int  # more than any position
    sorted_key: np.ndarray  # the keys, sorted (by key, then by position)
    sorted_position: np.ndarray  # and their positions in that order

    @cached_property
    def codes(self) -> np.ndarray:
        """key * span + position, sorted: one number per block to search."""
        return self.sorted_key * self.span + self.sorted_position

    def distinct_in(self, window: np.ndarray, count: int) -> np.ndarray:
        """Expected distinct keys among `window` consecutive blocks: the window, less the blocks whose key
        already appeared earlier in the same window (a block with gap g repeats in a window of length d
        placed at random with probability (d - g) / count when g < d)."""
        at = np.minimum(window, self.shorter.size - 1)
        repeats = (window * self.shorter[at] - self.shorter_sum[at]) / count
        return np.maximum(window - repeats, 1.0)

    def distinct_in_all(self, window: np.ndarray, count: int) -> np.ndarray:
        """`distinct_in` for every window max(gap, 1), gap = 0 .. count - 1, at once: window * shorter[d] -
        shorter_sum[d] is the sum over gaps g < d of (d - g), the running sum of `shorter` (the same integers)."""
        n = window.size
        if n < 2 or self.shorter.size < n + 1:
            return self.distinct_in(window, count)
        u = np.empty(n, dtype=np.int64)
        np.cumsum(self.shorter[1:n], out=u[1:])
        u[0] = u[1]  # window 1 at gap 0
        repeats = u / count
        return np.maximum(window - repeats, 1.0)

    def gaps_back(self, most: int) -> np.ndarray:
        """Row k - 1, for k = 1 to `most`: the distance from each block back to the k-th earlier block with
        its key (0 when fewer came before), in dispatch order: followed back along the chain of last reuses
        (positions are 0, 1, 2, ... in dispatch order), index n standing for none."""
        n = self.position.size
        found = np.zeros((most, n), dtype=np.int64)
        if most == 0 or n == 0:
            return found
        found[0] = self.gap
        prev = np.empty(n + 1, dtype=np.int64)
        np.subtract(self.position, self.gap, out=prev[:n])
        prev[:n][self.gap == 0] = n
        prev[n] = n
        at = prev[:n]
        for k in range(1, most):
            at = prev[at]
            np.maximum(self.position - at, 0, out=found[k])
        return found

    def gap_to(self, keys: np.ndarray) -> np.ndarray:
        """Distance from each block back to the last earlier block holding `keys` (0 when none did)."""
        at = np.searchsorted(self.codes, keys * self.span + self.position, side="left") - 1
        at_clipped = np.maximum(at, 0)
        found = (at >= 0) & (self.sorted_key[at_clipped] == keys)
        return np.where(found, self.position - self.sorted_position[at_clipped], 0)


def _occurrences(key: np.ndarray, position: np.ndarray) -> _Occurrences:
    """`position` is the dispatch positions in order (0, 1, 2, ...), `key` each one's footprint key."""
    key = key - key.min() if key.size else key
    span = int(position.size) + 1
    # by key, and by position within a key; a key that fits 16 bits sorts by radix, several times faster
    small = key.size and int(key.max()) < 1 << 16
    order = np.argsort(key.astype(np.uint16) if small else key, kind="stable")
    sorted_key = key[order]
    sorted_position = order  # the positions are 0, 1, 2, ...: the sort's own indices
    gap_sorted = np.zeros_like(sorted_position)
    if key.size > 1:
        np.subtract(sorted_position[1:], sorted_position[:-1], out=gap_sorted[1:])
        gap_sorted[1:][sorted_key[1:] != sorted_key[:-1]] = 0
    gap = np.empty_like(gap_sorted)
    gap[order] = gap_sorted
    # gaps run from 1 to the block count: a histogram and its running sums answer "how many, and what sum,
    # below d" for every window d at once
    counts = np.bincount(gap_sorted, minlength=span + 1)
    counts[0] = 0
    shorter = np.zeros(span + 2, dtype=np.int64)
    shorter_sum = np.zeros(span + 2, dtype=np.int64)
    np.cumsum(counts, out=shorter[1:])
    np.cumsum(counts * np.arange(counts.size, dtype=np.int64), out=shorter_sum[1:])
    return _Occurrences(key, position, gap, shorter, shorter_sum, span, sorted_key, sorted_position)
