"""The footprint record and its public entry point: `footprint` reads one kernel under one of its launches
(per tile, for a kernel with a tile loop) into a `Footprint`, or says why it has none."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from swzc.analysis.kernels import kernel_function
from swzc.analysis.records import KernelInfo, Launch
from swzc.frontend.evaluate import Evaluator, Value
from swzc.frontend.scope import local_scope
from swzc.model.footprint.sets import _unique
from swzc.model.footprint.sites import Access, Kernel, UnknownAccess, _fragments, _Sites
from swzc.model.footprint.staging import stages_reads

if TYPE_CHECKING:
    from swzc.analysis.context import FileContext


@dataclass(frozen=True)
class Footprint:
    kernel: str
    grid: tuple[int, int, int]  # the blocks (or, for a tile loop, the tiles (T, 1, 1)) the order permutes
    block: tuple[int, int, int]
    tiles: tuple[int, int, int]  # the logical tile grid (rows, columns, z) the swizzle permutes
    accesses: tuple[Access, ...]
    unknown: tuple[UnknownAccess, ...]  # each global access left out, with its line and why
    threads: int
    adapter: str = "linear"  # how the grid maps to tiles: "2d", "1d" (decoded by `divisor`) or "linear"
    divisor: int = 0
    staged: bool = False  # a loop copies global data to shared memory and waits at a block barrier each pass


def tile_grid(grid: tuple[int, int, int], adapter: str, divisor: int | None) -> tuple[int, int, int]:
    """The logical (rows, columns, z) tile grid a swizzle permutes."""
    if adapter == "2d":
        return grid[1], grid[0], grid[2]
    if adapter == "1d" and divisor:
        return grid[0] // divisor, divisor, grid[2] * grid[1]
    return 1, grid[0], grid[2] * grid[1]


def _unfixed_launch(kernel: str, launch: Launch) -> str:
    """Why a launch's sizes are not known, and what the user can give."""
    missing = [what for what, size in (("grid", launch.grid), ("block", launch.block)) if size is None]
    if not launch.line:  # given on the command line, or seen in a run, without the other size
        return (f"the {' and '.join(missing)} size of {kernel} is not known: the file does not fix it; give it with "
                + " and ".join(f"--{what} {kernel}=X,Y" for what in missing))
    texts = {"grid": launch.grid_text, "block": launch.block_text}
    what = "; ".join(f"its {m} ({' '.join(texts[m].split())[:60] or '?'}) is not fixed by the file" for m in missing)
    return (f"the launch at line {launch.line}: {what} (use --set NAME=VALUE for the sizes it names, or "
            + " and ".join(f"--{m} {kernel}=X,Y" for m in missing) + ")")


def footprint(ctx: FileContext, kernel: KernelInfo, launch_index: int = 0, user: Mapping[str, Value] | None = None) -> Footprint | str:
    """The kernel's per-block footprint under one of its launches (per tile, for a kernel with a tile
    loop), or a reason it has none."""
    if not kernel.launches:
        return "no launch in this file: the grid is not known"
    launch = kernel.launches[launch_index]
    if launch.grid is None or launch.block is None:
        return _unfixed_launch(kernel.name, launch)
    tile = kernel.tile_loop
    if tile is not None:
        if launch.tiles is None:
            return f"the tile count {tile.count!r} of the tile loop is not known at {launch.at}"
        if tile.decode is not None and launch.divisor is None:
            return f"the tile decode divisor {tile.decode.divisor!r} is not known at {launch.at}"
        # One tile plays one block: the loop variable is the linear tile index over a (T, 1, 1) tile space.
        grid = (launch.tiles, 1, 1)
        adapter, divisor = ("1d", launch.divisor) if tile.decode is not None else ("linear", None)
    else:
        if kernel.decode is not None and launch.divisor is None:
            return f"the tile decode divisor {kernel.decode.divisor!r} is not known at {launch.at}"
        grid, adapter, divisor = launch.grid, kernel.adapter, launch.divisor
    function = kernel_function(ctx, kernel)
    if function is None:
        return "kernel not found"
    body = function.child_by_field_name("body")
    scope = ctx.scope(user).child(dict(launch.bindings))
    ev = Evaluator(local_scope(function, body.end_byte - 1, scope))
    tiles = tile_grid(grid, adapter, divisor)
    k = Kernel(ctx, function, ev, scope, dict(launch.type_args), launch.grid, launch.block, tiles, adapter, divisor, tile)
    fragments = _fragments([body, *(f.child_by_field_name("body") for f in k.names.reached)], ev)
    sites = _Sites(k, fragments)
    sites.scan(body, None)
    threads = launch.block[0] * launch.block[1] * launch.block[2]
    staged = stages_reads(ctx, kernel)
    return Footprint(kernel.name, grid, launch.block, tiles, tuple(_merged(sites.accesses)),
                     tuple(dict.fromkeys(sites.unknown)), threads, adapter, divisor or 0, staged)


def _merged(accesses: list[Access]) -> list[Access]:
    """Accesses of one array with the same block offsets touch one footprint: x[i-1], x[i], x[i+1] are one."""
    groups: dict[tuple[str, bool, tuple[int, int, int]], list[Access]] = {}
    for a in accesses:
        groups.setdefault((a.array, a.write, a.block_bytes), []).append(a)
    merged = []
    for (array, write, block_bytes), group in groups.items():
        sectors = group[0].sectors if len(group) == 1 else _unique(np.concatenate([a.sectors for a in group]))
        merged.append(Access(array, write, group[0].elem_bytes, block_bytes, sectors, min(a.line for a in group),
                             any(a.approximate for a in group), all(a.scalar for a in group)))
    return merged
