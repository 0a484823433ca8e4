"""Ranking: the built-in swizzle family, scored by the L2 model, best first.

The candidates come from the table of kinds (swzc.formulas.steps.KINDS): identity, colmajor, grouped:G and
serpentine:G for the table's G below the tile rows, hilbert:K and morton:K (space-filling orders of K x K
panels) where the grid holds such a panel, and on a chiplet GPU xcd:N and its chunked forms xcd:N:C, alone
and before each of those.
They are ranked by predicted L2 hit rate (then by predicted DRAM bytes).  A kernel keeps identity (is
declined) unless the best candidate raises the predicted hit rate by `MARGIN_POINTS`.

A GPU measures them in a slightly different order (`Ranking.to_measure`): the best, then the best of each
other kind of order the model rates within `TIE_POINTS` of it, then the rest as ranked.  What the model leaves
out (which blocks share an SM, the order inside a wave) differs between kinds of order far more than between
two parameters of one kind: on the H200's staged GEMMs the Morton and Hilbert orders ran fastest at fewer L2
hits than the grouped orders, and xcd:8 ran 2 % faster than grouped:8 at the same traffic
(bench/results/l2_model_vs_ncu_h200.md).  A few timed tries are worth more spread over kinds the model cannot
tell apart than spent on one kind.

The model needs the blocks that run at once: from the compiler's resource usage when the caller allows a
compile (`compiler=True`), else from the launch bounds or a stated default (swzc.model.residency).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from swzc.analysis.kernels import header_kernels, kernel_function
from swzc.analysis.launches import foreign_launches
from swzc.analysis.records import KernelInfo
from swzc.analysis.context import bindings_key
from swzc.core.memo import Memo
from swzc.frontend.evaluate import Value
from swzc.model.calibration import Calibration
from swzc.model.floor import Floor, compulsory, fast_memory
from swzc.model.footprint import Footprint, UnknownAccess, footprint
from swzc.target.hw import HardwareModel
from swzc.model.l2model import L2Model, Prediction
from swzc.formulas.prove import Shape, dispatch_maps, dispatch_maps_at
from swzc.model.residency import Residency, residency
from swzc.formulas import steps
from swzc.formulas.swizzles import Step, SwizzleSpec

if TYPE_CHECKING:
    from swzc.analysis.context import FileContext

MARGIN_POINTS = 5.0  # the best candidate must raise the predicted L2 hit rate by this much to be worth a patch
# A larger grid is modelled over its first MAX_MODEL_BLOCKS dispatch positions: every candidate has reached
# its steady pattern by then (a group, a panel band, a column run), and the cost per kernel stays bounded.
MAX_MODEL_BLOCKS = 1 << 16
NO_DATA = "no data to share"  # how a write-only kernel's reason starts: the pass declines it
# Predictions this close to the best are ties for the model: its error is a few points per order
# (bench/results/l2_model_vs_ncu_h200.md).
TIE_POINTS = 3.0


@dataclass(frozen=True)
class Ranking:
    footprint: Footprint
    predictions: tuple[Prediction, ...]  # best first; identity among them
    chosen: SwizzleSpec | None  # None: nothing beats identity by the margin
    reason: str  # why chosen, or why declined, with the numbers
    residency: Residency | None = None  # the blocks per SM or CU the model ran with, and where that came from
    # Where the file sets the grid at run time: the sizes ranked (swzc.model.sweep); the fields above are the
    # largest size's, and `chosen` is gated at its crossover.
    sweep: SizeSweep | None = None
    fast_bytes: int = 0  # an L2 domain's fast memory on the GPU ranked for (floor.fast_memory): the I/O bound's S
    domains: int = 1  # the GPU's L2 domains (chiplets), each with that fast memory
    calibration: Calibration | None = None  # the inputs a run of the original order measured (swzc.model.calibration)

    @property
    def identity(self) -> Prediction:
        return next(p for p in self.predictions if p.candidate == "identity")

    @functools.cached_property
    def floor(self) -> Floor:
        """The DRAM traffic no order goes below (swzc.model.floor), over the grid ranked."""
        return compulsory(self.footprint, self.fast_bytes, self.domains)

    def prediction(self, candidate: str) -> Prediction | None:
        return next((p for p in self.predictions if p.candidate == candidate), None)

    @property
    def to_measure(self) -> tuple[Prediction, ...]:
        """The predictions in the order a GPU should time them (see the module's docstring)."""
        return measuring_order(self.predictions)


@dataclass(frozen=True)
class SizePoint:
    """One size of a sweep: the value every size name was bound to, the grid it gives and the ranking there."""

    size: int
    grid: tuple[int, int, int]
    tiles: int  # the tile grid's rows x columns: what a gate counts
    data_bytes: int  # the bytes the kernel's arrays span
    ranking: Ranking
    written_bytes: int = 0  # the bytes the arrays it writes span (of those writes)

    def prediction(self, candidate: str) -> Prediction | None:
        return self.ranking.prediction(candidate)


@dataclass(frozen=True)
class SizeSweep:
    """A kernel ranked over the sizes its grid is set by at run time (swzc.model.sweep)."""

    names: tuple[str, ...]  # the names bound, all to the same value
    points: tuple[SizePoint, ...]  # smallest first
    crossovers: tuple[tuple[str, int | None], ...]  # each order's smallest size from which it pays (None: never)
    chosen: SwizzleSpec | None  # gated at `crossover` (no gate where it pays at every size swept)
    crossover: int | None
    reason: str
    gated: tuple[SwizzleSpec, ...] = ()  # every order that pays from some size up, gated at its crossover, best first
    assumed: tuple[tuple[str, int], ...] = ()  # a block set at run time: the value its names were given throughout
    # Where no order pays: the first size swept whose written bytes exceed the L2 (None: at no size swept).  The
    # order lines are written back in (write locality, which the model does not rank) matters once what the
    # kernel writes no longer fits in the L2, so a GPU measures the transposed raster gated from there.
    writes_past_l2: int | None = None

    def gate_at(self, size: int) -> int:
        """The gate that switches an order on from `size` up (`gate_from`)."""
        return gate_from(self.points, size)

    def bindings(self, size: int) -> dict[str, int | tuple[int, int, int]]:
        """What the names are bound to at `size`: each to the size (a dim3 `dims.x` to (size, size, 1)), and the
        block's names to their assumed values."""
        return size_bindings(self.names, size, self.assumed)

    @property
    def shapes(self) -> tuple[tuple[int, int, int, int], ...]:
        """The grids swept, with the decode divisor of each (0 where none): what the prover checks."""
        return tuple(dict.fromkeys((*pt.grid, pt.ranking.footprint.divisor) for pt in self.points))


def gate_from(points: Sequence[SizePoint], size: int) -> int:
    """The gate that switches an order on from `size` up, over a sweep of these points: the tile count of the grid
    at `size` (0 where that is the first size: no gate)."""
    at = next(pt for pt in points if pt.size == size)
    return at.tiles if size != points[0].size else 0


def size_bindings(names: Sequence[str], size: int, assumed: Sequence[tuple[str, int]] = ()) -> dict[str, int | tuple[int, int, int]]:
    """Each of a sweep's names bound to `size`; a dim3's field (`dims.x`) binds the dim3 to (size, size, 1), a
    struct's (`p.n`, `args->m`) binds that field."""
    bound: dict[str, int | tuple[int, int, int]] = {}
    for name in names:
        base, dot, axis = name.partition(".")
        dim3 = dot and axis in ("x", "y", "z")  # a struct's field (`p.n`) is bound as it is named
        bound[base if dim3 else name] = (size, size, 1) if dim3 else size
    return {**bound, **dict(assumed)}


def measuring_order(predictions: Sequence[Prediction]) -> tuple[Prediction, ...]:
    """Ranked predictions (best first) reordered for timing: the best; then, among those within `TIE_POINTS`
    of it, the best of every kind not yet taken, in rank order; then everything else in rank order."""
    if not predictions:
        return ()
    best = predictions[0]
    first, kinds = [best], {_kind(best)}
    for p in predictions[1:]:
        if best.l2_hit_rate - p.l2_hit_rate > TIE_POINTS:
            break
        if _kind(p) not in kinds:
            kinds.add(_kind(p))
            first.append(p)
    taken = {p.candidate for p in first}
    return (*first, *(p for p in predictions if p.candidate not in taken))


def _kind(p: Prediction) -> str:
    """A prediction's kind of order: its formula's steps without their parameters (`xcd+grouped`)."""
    return p.formula.kind if p.formula is not None else "+".join(s.split(":", 1)[0] for s in p.candidate.split("+"))


def candidates(adapter: str, tiles: tuple[int, int, int], hw: HardwareModel) -> list[SwizzleSpec]:
    """The orders the model ranks, from the table of kinds (swzc.formulas.steps.KINDS): identity; every tile
    kind at each of its ranked parameters that fits the tile grid, in the table's order, the panel kinds side
    by side parameter by parameter; and on a chiplet GPU each chiplet step alone and before each tile order."""
    rows, cols, _ = tiles
    tile_orders: list[tuple[Step, ...]] = []
    if adapter != "linear" and rows > 1 and cols > 1:
        kinds = [k for k in steps.KINDS.values() if k.tiles]
        for k in kinds:
            if not k.panel:
                params = k.ranked if k.letter is not None else (0,)
                tile_orders += [(Step(k.name, p),) for p in params if k.fits(p, rows, cols)]
        panels = [k for k in kinds if k.panel]
        sides = sorted({p for k in panels for p in k.ranked})
        tile_orders += [(Step(k.name, p),) for p in sides for k in panels if p in k.ranked and k.fits(p, rows, cols)]
    specs = [SwizzleSpec(())] + [SwizzleSpec(order) for order in tile_orders]
    if hw.chiplets > 1:
        chips = [Step(k.name, hw.chiplets, c) for k in steps.KINDS.values() if k.per_chiplet for c in (0, *k.ranked_chunks)]
        specs += [SwizzleSpec((chip,)) for chip in chips]
        specs += [SwizzleSpec((chip, *order)) for chip in chips for order in tile_orders]
    return specs


def rank(ctx: FileContext, kernel: KernelInfo, hw: HardwareModel, user: Mapping[str, Value] | None = None,
         specs: list[SwizzleSpec] | None = None, compiler: bool = False, flags: tuple[str, ...] = (),
         running: Residency | None = None, orders: Orders | None = None, calibration: Calibration | None = None
         ) -> Ranking | str:
    """Score the candidates for a kernel's first launch with a known grid; a reason string when it cannot.

    `compiler`: ask the compiler (with `flags`) for the kernel's registers and shared memory (the file is
    compiled, never run); otherwise the residency comes from the launch bounds or the default.  `running`:
    a residency found before (an earlier ranking's), used as it is.  `orders`: block orders listed before
    (`block_orders`), used where they hold the ones needed.  `calibration`: the model's inputs measured on a run
    of the kernel's original order (swzc.model.calibration), in place of its defaults."""
    surveyed = survey(ctx, kernel, hw, user, compiler, flags, running)
    if isinstance(surveyed, str):
        return surveyed
    fp, running, resident = surveyed
    if calibration is not None and calibration.resident:  # measured on a run of the kernel: the model takes it
        resident = calibration.resident
    divisor = fp.divisor
    specs = specs if specs is not None else candidates(fp.adapter, fp.tiles, hw)
    # the unknown accesses by line and reason: a ranking's reason names them (the numbers do not depend on them)
    key = (_shape_key(fp), tuple(map(str, fp.unknown)), fp.adapter, divisor, hw, tuple(specs), resident, calibration)
    if key in ctx.rankings:  # a kernel of the same shape was ranked already: the same numbers
        return replace(ctx.rankings[key], footprint=fp, residency=running)
    ranking = ctx.rankings[key] = replace(_rank(fp, fp.adapter, divisor, hw, specs, resident, orders, calibration,
                                                ctx.build.memo),
                                          residency=running, fast_bytes=fast_memory(hw), domains=hw.chiplets,
                                          calibration=calibration)
    return ranking


def survey(ctx: FileContext, kernel: KernelInfo, hw: HardwareModel, user: Mapping[str, Value] | None = None,
           compiler: bool = False, flags: tuple[str, ...] = (), running: Residency | None = None
           ) -> tuple[Footprint, Residency, int] | str:
    """What `rank` needs before the model runs: the footprint of the kernel's first launch with a known grid,
    the residency and the blocks resident at once; a reason string where the model cannot rank it."""
    index = next((i for i, la in enumerate(kernel.launches) if la.grid is not None), None)
    if index is None:
        seen = "; ".join(f"line {la.line}: {' '.join(la.grid_text.split())[:60]}" for la in kernel.launches[:3] if la.line)
        if not seen:  # launched nowhere here: no size given with --set can make a grid
            known = {name for name, _ in ctx.definitions()} | set(header_kernels(ctx.src, ctx.prepared()[0]))
            pointers = foreign_launches(ctx.matches("launches"), known)  # neither here nor in a header: a pointer
            through = (f"; line {pointers[0][0].start_point.row + 1} launches {pointers[0][1]}, which is no function of this file: a "
                       "kernel pointer, which swzc does not follow" if pointers else "")
            return (f"no launch in this file fixes the grid (it is launched nowhere here by name: give it with --grid "
                    f"{kernel.name}=X,Y and its block with --block {kernel.name}=X,Y{through})")
        return f"no launch in this file fixes the grid ({seen}; give it with --grid {kernel.name}=X,Y, or the sizes with --set)"
    fp = _footprint(ctx, kernel, index, user)
    if isinstance(fp, str):
        return fp
    blind = [u for u in fp.unknown if u.reads]
    if blind:  # a stream the model would leave out: it would rank the rest, and rank wrong
        return f"the model cannot follow {len(blind)} global read(s): {_listed(blind)}"
    if not any(not a.write for a in fp.accesses):
        unwritten = f" (writes not followed: {_listed(fp.unknown)})" if fp.unknown else ""
        return f"{NO_DATA}: the kernel reads no global memory{unwritten}"
    if running is None:
        running = residency(ctx, kernel, hw, fp.threads, use_compiler=compiler, flags=flags)
    return fp, running, resident_at(running, kernel, index, hw)


def identity_order(fp: Footprint) -> np.ndarray:
    """The footprint's grid in its original dispatch order, as the model follows it (the first MAX_MODEL_BLOCKS)."""
    return dispatch_maps([(SwizzleSpec(()), fp.adapter)], (*fp.grid, fp.divisor), MAX_MODEL_BLOCKS)[0]


def _footprint(ctx: FileContext, kernel: KernelInfo, index: int, user: Mapping[str, Value] | None) -> Footprint | str:
    """The kernel's footprint, shared with kernels of the same file whose definitions differ only in their
    name and that are launched the same way (generated code repeats kernels)."""
    function = kernel_function(ctx, kernel)
    if function is None:
        return footprint(ctx, kernel, index, user)
    text = ctx.src.data[function.start_byte : function.end_byte].replace(kernel.name.encode(), b"\0")
    launch = replace(kernel.launches[index], kernel="", line=0, grid_text="", block_text="", api="")
    key = (text, launch, kernel.adapter, kernel.decode is not None, kernel.tile_loop is not None, bindings_key(user))
    cached = ctx.footprints.get(key)
    if cached is not None:  # the same definition further down: move its lines
        fp, line = cached
        return replace(fp, kernel=kernel.name, accesses=tuple(replace(a, line=a.line + kernel.line - line) for a in fp.accesses))
    fp = footprint(ctx, kernel, index, user)
    if isinstance(fp, Footprint) and not fp.unknown:  # messages name lines: only a clean footprint is shared
        ctx.footprints[key] = (fp, kernel.line)
    return fp


def _shape_key(fp: Footprint) -> tuple:
    """What the model's numbers depend on: the grid, the block, every stream's shape (not the names) and
    whether the reads are staged (the coalescer merges only those)."""
    streams = sorted((a.write, a.elem_bytes, a.block_bytes, a.sectors.tobytes()) for a in fp.accesses)
    return fp.grid, fp.block, fp.tiles, tuple(streams), len(fp.unknown), fp.staged


def resident_at(running: Residency, kernel: KernelInfo, index: int, hw: HardwareModel) -> int:
    """Blocks (tiles, for a tile loop) in progress at once on the whole GPU."""
    resident = running.resident_blocks(hw)
    grid = kernel.launches[index].grid
    if kernel.tile_loop is not None and grid is not None:  # the launched blocks each walk one tile at a time
        resident = min(resident, max(1, grid[0] * grid[1] * grid[2]))
    return resident


def _rank(fp: Footprint, adapter: str, divisor: int, hw: HardwareModel, specs: list[SwizzleSpec], resident: int,
          orders: Orders | None = None, calibration: Calibration | None = None, memo: Memo | None = None) -> Ranking:
    shape = (*fp.grid, divisor)
    blocks = fp.grid[0] * fp.grid[1] * fp.grid[2]
    key = _figures_key(fp, adapter, divisor, hw, specs, resident, calibration) if memo is not None and memo.enabled else ""
    figures = _figures_read(memo.get(key), specs) if key and memo is not None else None
    if figures is None:
        known = [orders.get((s, adapter, shape)) for s in specs] if orders is not None else []
        maps = (known if known and all(m is not None for m in known) else  # type: ignore[misc]
                dispatch_maps([(s, adapter) for s in specs], shape, MAX_MODEL_BLOCKS))
        model = L2Model(fp, hw, resident, **(calibration.model_args() if calibration is not None else {}))
        window = maps[0].shape[0] if maps else 0
        # whether the window the model follows runs every candidate in identity's order (told where it decides)
        same = bool(maps) and blocks > window and all(np.array_equal(order, maps[0]) for order in maps)
        figures = ([model.predict(s.name, order, adapter, divisor) for s, order in zip(specs, maps)], window, same)
        if key and memo is not None:
            memo.put(key, _figures_data(figures))
    raw, window, same = figures
    scale = blocks / window if window else 1.0
    predictions = sorted((replace(p.scaled(scale), formula=s) for s, p in zip(specs, raw)),
                         key=lambda p: (-p.l2_hit_rate, p.dram_bytes, p.candidate != "identity"))
    base = next(p for p in predictions if p.candidate == "identity")
    best = next((p for p in predictions if pays(p, base)), None)  # the best by hits of those that pay
    partial = f" (writes not modelled: {_listed(fp.unknown)})" if fp.unknown else ""
    top = predictions[0]
    if best is None and top.l2_hit_rate >= base.l2_hit_rate + MARGIN_POINTS:  # it gains, but moves more bytes
        reason = (f"no candidate that moves no more bytes from DRAM than identity ({_mb(base)}) raises the predicted L2 hit "
                  f"rate by {MARGIN_POINTS:g} points: {top.candidate} would reach {top.l2_hit_rate:.1f} % against "
                  f"{base.l2_hit_rate:.1f} %, but with {_mb(top)} from DRAM{partial}")
        return Ranking(fp, tuple(predictions), None, reason)
    if best is None:
        best = next(p for p in predictions if p.dram_bytes <= base.dram_bytes)  # identity at worst
        reason = (f"no candidate raises the predicted L2 hit rate by {MARGIN_POINTS:g} points: identity {_mb(base)}, "
                  f"{base.l2_hit_rate:.1f} % L2 hits; best {best.candidate} {_mb(best)}, {best.l2_hit_rate:.1f} %{partial}")
        if same:  # the window the model follows decides this: say so (a grid past 2^32 blocks keeps its order, say)
            reason += (f"; the model follows the first {window:,} of the grid's {blocks:,} blocks, and every "
                       "candidate runs those in identity's order")
        return Ranking(fp, tuple(predictions), None, reason)
    reason = (f"predicted {_mb(best)} from DRAM and {best.l2_hit_rate:.1f} % L2 hits, against identity's "
              f"{_mb(base)} and {base.l2_hit_rate:.1f} %{partial}")
    return Ranking(fp, tuple(predictions), best.formula, reason)


Figures = tuple[list[Prediction], int, bool]  # each spec's prediction over the window, the window's blocks, all in one order
FIGURES_LAYOUT = 1  # of `_figures_data`'s document: a change makes the results cache miss


def _figures_key(fp: Footprint, adapter: str, divisor: int, hw: HardwareModel, specs: Sequence[SwizzleSpec],
                 resident: int, calibration: Calibration | None) -> str:
    """What the model's figures depend on, as text for the results cache (swzc.core.memo): the footprint's shape
    (`_shape_key`, as a run's kernels of one shape share a ranking), the GPU, the orders, the blocks at once and
    the measured inputs; '' (not cached) for an order that is not one of the built-in family's by its name."""
    if not all(type(s) is SwizzleSpec for s in specs):
        return ""
    grid, block, tiles, streams, unknown, staged = _shape_key(fp)
    streams = tuple((*head, hashlib.sha256(sectors).hexdigest()) for *head, sectors in streams)  # a digest, not megabytes
    return repr(("rank", FIGURES_LAYOUT, (grid, block, tiles, streams, unknown, staged), adapter, divisor, hw,
                 tuple(map(repr, specs)), resident, calibration.model_args() if calibration is not None else None,
                 MAX_MODEL_BLOCKS))


def _figures_data(figures: Figures) -> dict:
    raw, window, same = figures
    fields = [[p.l2_hit_rate, p.dram_bytes, p.requests, p.read_misses, p.reads, p.merged, p.fabric] for p in raw]
    return {"layout": FIGURES_LAYOUT, "predictions": fields, "window": window, "same": same}


def _figures_read(doc: Any, specs: Sequence[SwizzleSpec]) -> Figures | None:
    """Figures read back from the cache, checked field by field; None where anything is amiss."""
    if not isinstance(doc, dict):
        return None
    try:
        rows, window, same = doc["predictions"], doc["window"], doc["same"]
        if (doc["layout"] != FIGURES_LAYOUT or type(window) is not int or window < 0 or type(same) is not bool
                or len(rows) != len(specs)):
            return None
        raw = []
        for spec, (hit, dram, *counts) in zip(specs, rows):
            if len(counts) != 5 or not all(type(c) is int and c >= 0 for c in counts) or not all(
                    type(x) in (int, float) and math.isfinite(x) for x in (hit, dram)):
                return None
            raw.append(Prediction(spec.name, float(hit), float(dram), *counts))
    except (ValueError, TypeError, KeyError):
        return None
    return raw, window, same


Orders = Mapping[tuple[SwizzleSpec, str, Shape], np.ndarray]  # (spec, adapter, shape): its block order


class _Listed(Mapping):
    """The block orders of `block_orders`, listed by the prover the first time one is asked for."""

    def __init__(self, asks: Sequence[tuple[Sequence[SwizzleSpec], str, Shape]]) -> None:
        self._asks = asks
        self._found: dict | None = None

    def _all(self) -> dict:
        if self._found is None:
            maps = dispatch_maps_at([([(s, adapter) for s in specs], shape) for specs, adapter, shape in self._asks],
                                    MAX_MODEL_BLOCKS)
            self._found = {(s, adapter, shape): m for (specs, adapter, shape), found in zip(self._asks, maps)
                           for s, m in zip(specs, found)}
        return self._found

    def __getitem__(self, key: tuple) -> np.ndarray:
        return self._all()[key]

    def __iter__(self) -> Iterator:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def block_orders(asks: Sequence[tuple[Sequence[SwizzleSpec], str, Shape]]) -> Orders:
    """The block orders `rank` needs for each (specs, adapter, shape), listed by one run of the prover (a sweep
    asks for all its sizes at once) when the first is needed: where the results cache holds every figure, never."""
    return _Listed(asks)


def pays(p: Prediction, base: Prediction) -> bool:
    """Whether an order pays where `base` is the original's prediction (at the same size): it raises the predicted
    L2 hit rate by MARGIN_POINTS and moves no more bytes from DRAM, whatever its hits."""
    return p.l2_hit_rate >= base.l2_hit_rate + MARGIN_POINTS and p.dram_bytes <= base.dram_bytes


def _listed(unknown: Sequence[UnknownAccess], most: int = 3) -> str:
    """The first few unknown accesses, with their lines."""
    more = f"; and {len(unknown) - most} more" if len(unknown) > most else ""
    return "; ".join(str(u) for u in unknown[:most]) + more


def _mb(p: Prediction) -> str:
    return f"{p.dram_bytes / 1e6:,.0f} MB"
