"""Sizes as a range: a kernel whose grid is set at run time is ranked over a sweep of sizes, and an order is
chosen only with the gate that keeps it off the sizes where it does not pay.

Where no launch in the file fixes a kernel's grid, the analysis names what would (`Launch.sizes`: the
launching function's parameters, a variable read from argv, ...).  Each is bound to one value `s` (a square
problem: M = N = K = s), for `s` in `SIZES`, and the file's launch is evaluated again and ranked by the L2
model as if the file had fixed it (swzc.model.rank): the whole family at the largest size; at the others the
original and those of the family's best `TOP_ORDERS` that pay at the largest size (only those can have a
crossover).  The sweep begins where the grid fills the GPU
`MIN_WAVES` times over and ends once the kernel's arrays span `PAST_L2` times the L2 (after `MIN_POINTS`
sizes at least), or at `MAX_POINTS` sizes.

An order *pays* at a size when it raises the predicted L2 hit rate by rank.MARGIN_POINTS and moves no more
bytes from DRAM than the original order.  Its *crossover* is the smallest size swept from which it pays at
every larger size swept.  The chosen order is the one with the largest mean gain over the sweep once gated
at its crossover (ties: the earlier crossover, then the better at the largest size); its gate is the tile
count of the grid at its crossover (swzc.formulas.swizzles.SwizzleSpec.gate), below which the kernel keeps
its own order.  Where it pays from the first size swept, it needs no gate.  These are predictions: a GPU run
measures them (swzc.verify).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from swzc.analysis.context import bindings_key
from swzc.analysis.kernels import integer_arguments, relaunched
from swzc.analysis.templates import TemplateParameter
from swzc.analysis.records import KernelInfo, Launch
from swzc.frontend.evaluate import FIELD_PATH, Value
from swzc.model.calibration import Calibration
from swzc.model.footprint import Footprint
from swzc.model.footprint.values import UNFIXED_PARAMETER
from swzc.model.l2model import Prediction
from swzc.model.rank import (NO_DATA, Orders, Ranking, SizePoint, SizeSweep, block_orders, gate_from, pays, rank,
                             resident_at, size_bindings, survey)
from swzc.model.residency import Residency, residency
from swzc.formulas.swizzles import SwizzleSpec
from swzc.target.hw import HardwareModel

if TYPE_CHECKING:
    from swzc.analysis.context import FileContext

SIZES = (64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 65536)
MIN_WAVES = 2  # the sweep starts at the first size whose grid fills the GPU this many times over
PAST_L2 = 8  # and ends at the first size whose arrays span this many times the L2
TOP_ORDERS = 4  # the family is ranked whole at the largest size; its best this many at the others
IDENTITY = SwizzleSpec(())
MIN_POINTS = 4  # but not before this many sizes (a wide tile's sweep would be two sizes long)
MAX_POINTS = 8  # or after this many sizes


def sized_launch(kernel: KernelInfo) -> Launch | None:
    """The launch a sweep ranges over: the first, where no launch fixes the grid and it names what would."""
    if any(la.grid is not None for la in kernel.launches) or not kernel.launches:
        return None
    first = kernel.launches[0]
    return first if first.sizes and (first.block is not None or first.block_sizes) else None


def rank_over_sizes(ctx: FileContext, kernel: KernelInfo, hw: HardwareModel, user: Mapping[str, Value | str] | None = None,
                    compiler: bool = False, flags: tuple[str, ...] = (), calibration: Calibration | None = None
                    ) -> Ranking | str:
    """The ranking at the largest size swept, with the sweep (`Ranking.sweep`) and its gated choice; a reason
    string when the kernel cannot be ranked at the sizes swept.  `calibration`: the model's inputs measured on
    a run of the original order, used at every size (swzc.model.calibration)."""
    launch = sized_launch(kernel)
    if launch is None:
        return "no launch names the sizes its grid is set by"
    user = dict(user or {})
    names = tuple(n for n in launch.sizes if n not in user and n.partition(".")[0] not in user)
    if not names:
        return f"the sizes {', '.join(launch.sizes)} are given with --set and still do not fix the grid"
    said = " = ".join(names)
    calls = [n for n in (*names, *launch.block_sizes) if n.endswith("()")]
    fields = [n for n in (*names, *launch.block_sizes) if not _bindable(n) and n not in calls]
    if calls or fields:
        why = (f"its launch at {launch.at} calls {', '.join(calls)}, whose body is in neither this file nor a header "
               "it reads (-I adds a header's folder)" if calls else
               f"the grid is set at run time through {', '.join(fields)}, which a sweep of sizes cannot bind (--set takes names)")
        return _unfollowed(ctx, kernel, hw, user, tuple(n for n in names if _bindable(n))) or \
            f"{why}; give the grid with --grid {kernel.name}=X,Y"
    assumed: tuple[tuple[str, int], ...] = ()
    if launch.block is None:
        assumed = _block(ctx, kernel, names, tuple(n for n in launch.block_sizes if n not in user), user)
        if not assumed:
            return _unfollowed(ctx, kernel, hw, user, names) or (
                f"its block is set at run time by {', '.join(launch.block_sizes)} too, and no value of those gives a "
                f"block; give it with --block {kernel.name}=X,Y")
    points: list[SizePoint] = []
    kernels: list[tuple[KernelInfo, dict]] = []  # each point's kernel and bindings
    misses = 0
    running: Residency | None = None
    first_failure = ""
    for size in SIZES:
        bound = {**user, **size_bindings(names, size, assumed)}
        at = kernel_at(ctx, kernel, bound)
        if at is None:
            break
        grid = next((la.grid for la in at.launches if la.grid is not None), None)
        if grid is None:  # too small (a grid of 0), past CUDA's limits, or the sizes named do not decide it
            misses += size >= 2048
            if points or misses >= 3:
                break
            first_failure = first_failure or f"at {said} = {size} the grid is still not fixed ({launch.grid_text.strip()[:60]})"
            continue
        blocks = grid[0] * grid[1] * grid[2]
        if blocks < MIN_WAVES * hw.compute_units and size != SIZES[-1]:
            continue  # fewer blocks than MIN_WAVES per SM: under MIN_WAVES waves whatever the residency, no footprint needed
        index = next(i for i, la in enumerate(at.launches) if la.grid is not None)
        block = at.launches[index].block
        if running is None and block is not None:  # the residency needs the block only: found before the footprint
            running = residency(ctx, at, hw, block[0] * block[1] * block[2], use_compiler=compiler, flags=flags)
        if running is not None and blocks < MIN_WAVES * resident_at(running, at, index, hw) and size != SIZES[-1]:
            continue  # under MIN_WAVES waves
        got = survey(ctx, at, hw, bound, compiler, flags, running)  # the sizes first, the model after
        if isinstance(got, str):
            if points:
                break
            if got.startswith(NO_DATA):
                return got  # nothing read: a decline at every size
            if not got.startswith("no launch"):
                return f"at {said} = {size}: {got}"  # the model cannot follow the kernel at any size: say which access
            first_failure = first_failure or f"at {said} = {size}: {got}"
            continue
        fp, running, resident = got
        blocks = fp.grid[0] * fp.grid[1] * fp.grid[2]
        span = data_bytes(fp)
        if blocks < MIN_WAVES * resident and size != SIZES[-1]:
            continue
        rows, cols, _ = fp.tiles
        points.append(SizePoint(size, grid, rows * cols, span, None, data_bytes(fp, written=True)))  # type: ignore[arg-type]  # ranked below
        kernels.append((at, bound, fp.adapter, (*fp.grid, fp.divisor)))
        if span >= PAST_L2 * hw.l2_bytes and len(points) >= MIN_POINTS or len(points) >= MAX_POINTS:
            break
    if not points:
        return _unfollowed(ctx, kernel, hw, user, names, assumed) or \
            first_failure or f"no size from {SIZES[0]} to {SIZES[-1]} of {said} gives a grid the model can rank"
    # The whole family at the largest size; at the others, those of its best TOP_ORDERS that pay there (only an
    # order that pays at the largest size has a crossover), and identity.  The block orders of the smaller
    # sizes are listed in one prover run.
    ranked: list[SizePoint] = []
    specs: list[SwizzleSpec] | None = None
    orders: Orders | None = None
    for point, (at, bound, _, _) in reversed(list(zip(points, kernels))):
        got = rank(ctx, at, hw, bound, specs, compiler=compiler, flags=flags, running=running, orders=orders,
                   calibration=calibration)
        if isinstance(got, str):
            return f"at {said} = {point.size}: {got}"
        if specs is None:
            top = [p.formula for p in got.predictions if isinstance(p.formula, SwizzleSpec) and not p.formula.is_identity]
            specs = [IDENTITY, *(s for s in top[:TOP_ORDERS] if pays(got.prediction(s.name), got.identity))]  # type: ignore[arg-type]
            orders = block_orders([(specs, adapter, shape) for _, _, adapter, shape in kernels[:-1]])
        ranked.insert(0, replace(point, ranking=got))
    ranking = _choose(names, tuple(ranked), hw)
    if assumed and ranking.sweep is not None:  # say what the block was taken to be
        block = "x".join(map(str, ranking.footprint.block))
        note = (f" (its block is set at run time: ranked with {', '.join(f'{n} = {v}' for n, v in assumed)}, a {block} "
                f"block; --set {assumed[0][0]}=N ranks another)")
        ranking = replace(ranking, reason=ranking.reason + note,
                          sweep=replace(ranking.sweep, assumed=assumed, reason=ranking.sweep.reason + note))
    return ranking


BLOCK_VALUES = (16, 256, 32, 128, 64, 512, 8, 1024)  # tried in turn for a block's names: the first nearest 256 threads


def _block(ctx: FileContext, kernel: KernelInfo, names: tuple[str, ...], block: tuple[str, ...],
           user: Mapping[str, Value | str]) -> tuple[tuple[str, int], ...]:
    """Values for the names a block is set by at run time: the first of BLOCK_VALUES whose block has nearest
    256 threads (16 for a square 2D block of one name, 256 for a 1D one); () when none gives a block."""
    best: tuple[int, tuple[tuple[str, int], ...]] | None = None
    for value in BLOCK_VALUES:
        assumed = tuple((n, value) for n in block)
        at = kernel_at(ctx, kernel, {**user, **size_bindings(names, 4096, assumed)})
        dims = at.launches[0].block if at is not None and at.launches else None
        if dims is None:
            continue
        distance = abs(dims[0] * dims[1] * dims[2] - 256)
        if best is None or distance < best[0]:
            best = (distance, assumed)
        if distance == 0:
            break
    return best[1] if best is not None else ()


PROBE_GRID = {1: (4096, 1, 1), 2: (64, 64, 1), 3: (16, 16, 16)}  # by the highest block-index axis the kernel reads
PROBE_BLOCK = {1: (256, 1, 1), 2: (16, 16, 1), 3: (8, 8, 4)}


def unsized(ctx: FileContext, kernel: KernelInfo, hw: HardwareModel, user: Mapping[str, Value | str] | None = None) -> str:
    """Why a kernel whose grid no launch in the file fixes, and which no sweep ranges over, stays unranked,
    where more can be said than that: the model cannot follow a read (whatever the grid), or the launch's
    block is what swzc does not evaluate; '' otherwise."""
    if kernel.tile_loop is not None or any(la.grid is not None for la in kernel.launches):
        return ""
    user = dict(user or {})
    first = kernel.launches[0] if kernel.launches else None
    names = tuple(n for n in first.sizes if _bindable(n) and n not in user and n.partition(".")[0] not in user) if first else ()
    followed = _unfollowed(ctx, kernel, hw, user, names)
    if followed or first is None:
        return followed
    if first.sizes and first.block is None and not first.block_sizes:
        return (f"its block at {first.at} ({' '.join(first.block_text.split())[:60]}) is what swzc does not "
                f"evaluate; give it with --block {kernel.name}=X,Y, and the sizes with --set")
    return ""


def _unfollowed(ctx: FileContext, kernel: KernelInfo, hw: HardwareModel, user: Mapping[str, Value | str],
                names: tuple[str, ...], assumed: tuple[tuple[str, int], ...] = ()) -> str:
    """Where no size decides the grid, whether the model could follow the kernel's reads at all: its first
    launch at 4096 (a kernel launched nowhere in the file: a launch of no arguments) with a stand-in grid, and
    block where none is known, is surveyed only to say which read the model cannot follow ('' where it can,
    where the kernel's definition is not in the file, or where the reads depend on what is not known).
    Nothing is ranked from the stand-in."""
    probe = _probe(ctx, kernel, user, names, assumed)
    if probe is None:
        return ""
    at, first, unset = probe
    got = survey(ctx, _stand_in(at, first, unset, kernel.dims), hw, dict(user), False, (), None)
    if isinstance(got, str) and got.startswith("the model cannot follow"):
        where = (f"set at run time at {first.at}" if first.line or first.by_size else
                 f"launched at {first.where}" if first.where else "launched nowhere in this file")
        return f"{got} (whatever its grid, {where})"
    return ""


def parameters_read(ctx: FileContext, kernel: KernelInfo, hw: HardwareModel, user: Mapping[str, Value | str]
                    ) -> tuple[list[str], list[str]]:
    """The kernel's integer parameters that no launch here fixes and without which the model cannot follow its
    reads, whatever the grid, then those its writes use (without them the writes are not modelled, and the
    verdict can change): what --set must give besides --grid, said at once rather than one per run.  Found as a
    user would, one run at a time, each naming the next one missing; ([], []) where something else stops the
    reads."""
    probe = _probe(ctx, kernel, dict(user), (), ())
    if probe is None:
        return [], []
    at, first, unset = probe
    needed: list[str] = []
    reads: list[str] | None = None  # the parameters the reads needed, once they are followed
    for _ in range(len(unset) + 1):
        got = survey(ctx, _stand_in(at, first, {n: unset[n] for n in needed}, kernel.dims), hw, dict(user), False, (), None)
        if isinstance(got, str):
            said = got
        else:  # the reads followed; then the writes not followed for want of a parameter (not for an index read, say)
            reads = list(needed) if reads is None else reads
            said = "; ".join(m.group(0) for u in got[0].unknown for m in UNFIXED_PARAMETER.finditer(str(u)))
        # the parameter the reason names first ("K is a kernel parameter the launch does not fix"): a one-letter
        # name may also stand in its prose
        spelled = [(found.start(), n) for n in unset if n not in needed
                   for found in [re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", said)] if found]
        if not spelled:  # followed, or stopped by what no --set of a parameter gives
            break
        needed.append(min(spelled)[1])
    if reads is None:
        return [], []
    order = list(unset).index  # in the kernel's parameter order
    return sorted(reads, key=order), sorted((n for n in needed if n not in reads), key=order)


def template_stand_ins(params: Sequence[TemplateParameter]) -> dict[str, Value | str]:
    """Arguments for template parameters nothing gives, with which a probe looks for what else the reads need
    (`float` for a type, 1 for a bool, 16 for a number): never ranked from, and what they alone make unknown (a
    division that is 0 at these values, say) is not said."""
    return {p.name: "float" if p.kind == "type" else 1 if p.type == "bool" else 16 for p in params}


def _probe(ctx: FileContext, kernel: KernelInfo, user: Mapping[str, Value | str], names: tuple[str, ...],
           assumed: tuple[tuple[str, int], ...]) -> tuple[KernelInfo, Launch, dict[str, int]] | None:
    """The kernel at 4096 for `names`, its first launch (one of no arguments where it is launched nowhere here),
    and its integer arguments no launch fixes, each at 4096 as the sizes are."""
    at = kernel_at(ctx, kernel, {**user, **size_bindings(names, 4096, assumed)}) if kernel.launches else kernel
    if at is None:
        return None
    first = at.launches[0] if at.launches else Launch(kernel.name, 0, "", "", "", None, None)
    given = dict(first.bindings)
    return at, first, {n: 4096 for n in integer_arguments(ctx, kernel) if n not in given and n not in user}


def _stand_in(at: KernelInfo, first: Launch, unset: Mapping[str, int], dims: int) -> KernelInfo:
    """The kernel launched once with a stand-in grid (and block, where none is known) and `unset` bound."""
    axes = max(1, min(3, dims))
    launch = replace(first, grid=PROBE_GRID[axes], block=first.block or PROBE_BLOCK[axes],
                     bindings=tuple(sorted({**unset, **dict(first.bindings)}.items())))
    return replace(at, launches=(launch,))


def _bindable(name: str) -> bool:
    """A name a sweep can bind: an identifier, a dim3's field (`dims.x`), whose dim3 it binds, or a struct's field
    read through names (`p.n`, `args->dims.m`), which it binds as the file names it (`--set p.n=4096` alike)."""
    return name.isidentifier() or FIELD_PATH.fullmatch(name) is not None


def kernel_at(ctx: FileContext, kernel: KernelInfo, bound: Mapping[str, Value | str]) -> KernelInfo | None:
    """The kernel with its launches evaluated with `bound` (swzc.analysis.kernels.relaunched), made once per
    kernel and set of bindings."""
    key = (kernel.name, kernel.line, bindings_key(bound))
    if key not in ctx.sized:
        ctx.sized[key] = relaunched(ctx, kernel, bound)
    return ctx.sized[key]


def measured_sizes(sweep: SizeSweep, most: int = 4) -> list[int]:
    """The sizes a GPU measures a swept kernel at: the first (a few waves, below the L2 for most kernels), the
    sizes on both sides of the chosen order's crossover (where none is chosen, of the size the writes exceed the
    L2 at) and the largest; without either, the first, the middle and the largest; all of them where there are no
    more than `most`."""
    sizes = [pt.size for pt in sweep.points]
    if len(sizes) <= most:
        return sizes
    edge = sweep.crossover if sweep.chosen is not None else sweep.writes_past_l2
    at = sizes.index(edge) if edge in sizes else 0
    picked = {sizes[0], sizes[at - 1], sizes[at], sizes[-1]} if at > 0 else {sizes[0], sizes[len(sizes) // 2], sizes[-1]}
    for size in reversed(sizes):  # fewer than `most` picked (a crossover at an end): more sizes from the top
        if len(picked) >= most:
            break
        picked.add(size)
    return sorted(picked)


def data_bytes(fp: Footprint, written: bool = False) -> int:
    """The bytes the kernel's arrays span over the whole grid: each array's first to last byte touched (the
    widest of its accesses); `written`: of its writes only."""
    rows, cols, z = fp.tiles
    widest: dict[str, int] = {}
    for a in fp.accesses:
        if not a.sectors.size or written and not a.write:
            continue
        reach = sum(abs(b) * (n - 1) for b, n in zip(a.block_bytes, (rows, cols, z)))
        span = reach + (int(a.sectors[-1]) - int(a.sectors[0]) + 1) * 32
        widest[a.array] = max(widest.get(a.array, 0), span)
    return sum(widest.values())


def crossovers(points: Sequence[SizePoint]) -> dict[str, int | None]:
    """For each order ranked at the largest size: the smallest size swept from which it pays at every larger
    size swept (None: it does not pay at the largest)."""
    found: dict[str, int | None] = {}
    for p in points[-1].ranking.predictions:
        if p.candidate == "identity":
            continue
        start = None
        for point in reversed(points):
            mine = point.prediction(p.candidate)
            if mine is None or not pays(mine, point.ranking.identity):
                break
            start = point.size
        found[p.candidate] = start
    return found


def _choose(names: tuple[str, ...], points: tuple[SizePoint, ...], hw: HardwareModel) -> Ranking:
    largest = points[-1].ranking
    crossing = crossovers(points)

    def gain(candidate: str, start: int) -> float:  # mean predicted points over the sweep, gated at `start`
        total = 0.0
        for point in points:
            mine = point.prediction(candidate)
            if point.size >= start and mine is not None:
                total += mine.l2_hit_rate - point.ranking.identity.l2_hit_rate
        return total / len(points)

    order = [p.candidate for p in largest.predictions]
    paying = [(gain(c, s), -s, -order.index(c), c) for c, s in crossing.items() if s is not None]
    said = " = ".join(names)
    swept = (f"{said} = {points[0].size}, the only size swept" if names and len(points) == 1 else
             f"{said} swept from {points[0].size} to {points[-1].size}" if names else
             f"the {len(points)} grids it is launched with, {points[0].tiles:,} to {points[-1].tiles:,} tiles")
    if not paying:
        best = largest.predictions[0]
        some = [c for c in order if any((q := pt.prediction(c)) is not None and pays(q, pt.ranking.identity) for pt in points)]
        tail = (f"; {', '.join(some[:3])} pay at some sizes but not at every larger one" if some else "")
        reason = (f"no order pays from any size up ({swept}, predicted): at {points[-1].size} the kernel's own order has "
                  f"{largest.identity.l2_hit_rate:.1f} % L2 hits and the best, {best.candidate}, {best.l2_hit_rate:.1f} %{tail}")
        past = next((pt.size for pt in points if pt.written_bytes > hw.l2_bytes), None)
        sweep = SizeSweep(names, points, tuple(crossing.items()), None, None, reason, writes_past_l2=past)
        return replace(largest, chosen=None, reason=reason, sweep=sweep)
    ranked = [c for _, _, _, c in sorted(paying, reverse=True)]
    candidate = ranked[0]
    start = crossing[candidate]
    assert start is not None
    every = tuple(_gated(points, largest.prediction(c), crossing[c]) for c in ranked)
    gated = every[0]
    at = next(pt for pt in points if pt.size == start)
    where = (f"from {said + ' = ' + str(start) + ' (' if names else ''}{at.tiles:,} tiles{')' if names else ''} up, the "
             "kernel's own order below" if gated.gate else "at every size swept" if names else "at every grid it is launched with")
    shown = _three(points, start)
    numbers = "; ".join(f"at {pt.size if names else 'x'.join(map(str, pt.grid))}: DRAM {_mb(pt.ranking.identity)} -> {_mb(pt.prediction(candidate))}, L2 hits "
                        f"{pt.ranking.identity.l2_hit_rate:.1f} % -> {pt.prediction(candidate).l2_hit_rate:.1f} %" for pt in shown)
    reason = f"predicted over {swept} (not measured): {gated.ungated.name} pays {where}; {numbers}"
    sweep = SizeSweep(names, points, tuple(crossing.items()), gated, start, reason, every)
    return replace(largest, chosen=gated, reason=reason, sweep=sweep)


def rank_over_launches(ctx: FileContext, kernel: KernelInfo, hw: HardwareModel, user: Mapping[str, Value | str] | None = None,
                       compiler: bool = False, flags: tuple[str, ...] = (), calibration: Calibration | None = None
                       ) -> Ranking | None:
    """Where a kernel is launched (or was seen launched: swzc.verify.observe) with several grids: each ranked, and
    the order chosen as over a sweep, so that it pays at each grid it runs at or is gated off it.  None where it
    has one grid, or one of them cannot be ranked (the first launch's ranking stands then)."""
    distinct: dict[tuple, Launch] = {}
    for la in kernel.launches:
        if la.grid is not None and la.block is not None:
            distinct.setdefault((la.grid, la.block, la.divisor, la.bindings), la)
    if len(distinct) < 2:
        return None
    points: dict[int, SizePoint] = {}
    running: Residency | None = None
    for la in distinct.values():
        got = rank(ctx, replace(kernel, launches=(la,)), hw, user, compiler=compiler, flags=flags, running=running,
                   calibration=calibration)
        if isinstance(got, str):
            return None
        running = got.residency
        rows, cols, _ = got.footprint.tiles
        span = data_bytes(got.footprint)
        if rows * cols not in points or span > points[rows * cols].data_bytes:
            points[rows * cols] = SizePoint(rows * cols, got.footprint.grid, rows * cols, span, got,
                                            data_bytes(got.footprint, written=True))
    if len(points) < 2:
        return None
    return _choose((), tuple(points[t] for t in sorted(points)), hw)


def _gated(points: Sequence[SizePoint], prediction: Prediction | None, start: int | None) -> SwizzleSpec:
    """An order gated at the tile count of the grid at its crossover (no gate where that is the first size)."""
    assert prediction is not None and isinstance(prediction.formula, SwizzleSpec) and start is not None
    return prediction.formula.gated(gate_from(points, start))


def _three(points: Sequence[SizePoint], start: int) -> list[SizePoint]:
    """Three sizes to quote: the crossover, the largest and one between (or the sizes there are)."""
    above = [pt for pt in points if pt.size >= start]
    if len(above) <= 3:
        return above
    return [above[0], above[len(above) // 2], above[-1]]


def _mb(p: Prediction | None) -> str:
    return "?" if p is None else f"{p.dram_bytes / 1e6:,.0f} MB"
