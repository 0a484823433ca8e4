"""Pictures of block orders: a kernel's tile grid coloured by when each tile runs and by where.

A block order is easier to judge seen than read.  Each tile gets two colours:

- **When**: its *wave*, the dispatch position of the block that computes it divided by the blocks resident
  on the whole GPU at once.  Tiles of one wave run side by side and share L2; a good order makes each wave
  a compact patch of the grid (few distinct rows and columns of the operands), identity makes it a band of
  whole rows.  The blocks resident at once are the ranking's (swzc.model.residency: the launch bounds, the
  static shared memory, else a stated default; `show` does not compile the file), or, without a ranking,
  as many as the threads allow.
- **Where**: on a chiplet GPU the chiplet (XCD) the hardware deals the block to, position mod chiplets, each
  with its own L2; on a monolithic GPU the group of SMs the block lands on, from the hardware model's
  measured dispatch where it has one.  Tiles that share data but land on different chiplets fetch it twice.

The functions up to `render` are pure (arrays in, arrays or bytes out); `picture` and `kernel_picture` run
the prover to list the orders, and `draw` writes a file.  Nothing here prints.
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from swzc.core import clean
from swzc.analysis.records import FileAnalysis, KernelInfo
from swzc.verify.bench import KernelBench, size_table
from swzc.core.errors import SwzcError
from swzc.frontend.evaluate import Value
from swzc.target.hw import HardwareModel
from swzc.model.floor import Floor
from swzc.report.shared import product_text
from swzc.model.l2model import Prediction, default_resident
from swzc.passes import block_swizzle
from swzc.pipeline.driver import rank_kernels
from swzc.formulas.prove import Shape, dispatch_maps
from swzc.model.rank import MARGIN_POINTS, Ranking, rank
from swzc.model.residency import Residency
from swzc.analysis.context import FileContext
from swzc.formulas import steps
from swzc.formulas.swizzles import SwizzleSpec

# The largest tile grid drawn whole; a larger one is drawn by its top-left corner of this many tiles a side.
# Past it a tile would be less than a pixel of a picture that still fits a screen.
MAX_SIDE = 256
# Dispatch positions listed per order.  The corner of a huge grid may hold tiles dispatched later than this
# (colmajor reaches the top-right tile last); those are drawn as not listed.  48 MiB per order at most.
MAX_POSITIONS = 1 << 22
# The places are drawn over a corner of this many tiles a side, where a tile is large enough to see.
ZOOM_SIDE = 32
SM_GROUPS = 8
MAX_OUTLINE_SEGMENTS = 2000  # a monolithic GPU's SMs drawn in this many groups: more colours could not be told apart
FORMATS = ("png", "svg")
NOT_LISTED = -1
FIRST_WAVE_COLOUR = "#ff3030"


@dataclass(frozen=True)
class TileShape:
    """How a grid's blocks (or a tile loop's tiles) lay out as tiles: rows x cols, in `layers` z slices."""

    rows: int
    cols: int
    layers: int
    fold: int = 0  # a grid without tile structure, drawn in rows of this many tiles; 0 for a real tile grid

    def __post_init__(self) -> None:
        if min(self.rows, self.cols, self.layers) < 1 or self.fold < 0:
            raise ValueError(f"a tile grid needs at least one tile a side, not {self}")


def tile_shape(adapter: str, grid: tuple[int, int, int], divisor: int = 0) -> TileShape:
    """The tile grid an adapter reads from a grid: `2d` rows are blockIdx.y; `1d` decodes blockIdx.x as
    (x / divisor, x % divisor); `linear` has no rows, so its blocks are folded into a square-ish grid."""
    gx, gy, gz = grid
    if adapter == "2d":
        return TileShape(gy, gx, gz)
    if adapter == "1d":
        if divisor < 1:
            raise ValueError("a 1d grid needs its decode divisor")
        return TileShape(-(-gx // divisor), min(divisor, gx), gy * gz)
    if adapter == "linear":
        fold = min(math.isqrt(gx - 1) + 1, MAX_SIDE) if gx > 1 else 1
        return TileShape(-(-gx // fold), fold, gy * gz, fold)
    raise ValueError(f"unknown adapter {adapter!r}")


def order_grid(order: np.ndarray, adapter: str, grid: tuple[int, int, int], divisor: int = 0,
               side: int = MAX_SIDE) -> np.ndarray:
    """The dispatch position of each tile of the first z slice, as a (rows, cols) array cut to `side` x `side`.

    `order` is what swzc.formulas.prove.dispatch_maps gives for one spec: row p is the (x, y, z) block that dispatch
    position p runs (for a tile loop, the tile index in x).  It may list only the first positions; tiles it
    does not reach are NOT_LISTED."""
    shape = tile_shape(adapter, grid, divisor)
    x, y, z = (order[:, i].astype(np.int64) for i in range(3))
    if adapter == "2d":
        row, col, layer = y, x, z
    else:
        width = divisor if adapter == "1d" else shape.fold
        row, col, layer = x // width, x % width, z * grid[1] + y
    positions = np.full((min(shape.rows, side), min(shape.cols, side)), NOT_LISTED, dtype=np.int64)
    drawn = (layer == 0) & (row < positions.shape[0]) & (col < positions.shape[1])
    positions[row[drawn], col[drawn]] = np.nonzero(drawn)[0]
    return positions


def resident_blocks(hw: HardwareModel, threads: int | None) -> int:
    """Blocks resident at once on the whole GPU, counting threads only, as the L2 model does without a
    residency.  Unknown threads: the block limit."""
    return default_resident(hw, threads) if threads else hw.compute_units * hw.max_blocks_per_cu


def waves(positions: np.ndarray, concurrent: int) -> np.ndarray:
    """Each tile's wave: its dispatch position divided by the blocks running at once (NOT_LISTED kept)."""
    if concurrent < 1:
        raise ValueError("at least one block runs at a time")
    return np.where(positions >= 0, positions // concurrent, NOT_LISTED)


def place_count(hw: HardwareModel) -> int:
    return hw.chiplets if hw.chiplets > 1 else min(SM_GROUPS, hw.compute_units)


def places(positions: np.ndarray, hw: HardwareModel, launched: int | None = None) -> np.ndarray:
    """Where each tile runs: its chiplet (XCD) on a chiplet GPU, else its SM group (NOT_LISTED kept).

    The block at a dispatch position is the position itself, or for a tile loop of `launched` blocks the
    position mod `launched` (block b takes tiles b, b + gridDim.x, …).  A chiplet GPU deals block b to chiplet
    b mod chiplets.  On a monolithic GPU block b runs on SM block_to_cu[b mod its length] where the model
    measured a probe launch's dispatch, else on SM b mod SMs; SM s is in group s * groups // SMs, so the
    groups are runs of consecutive SM ids of (nearly) equal size."""
    blocks = positions if not launched else positions % launched
    if hw.chiplets > 1:
        where = blocks % hw.chiplets
    else:
        measured = np.asarray(hw.block_to_cu, dtype=np.int64)
        cu = measured[blocks % measured.size] if measured.size else blocks % hw.compute_units
        where = cu * place_count(hw) // hw.compute_units
    return np.where(positions >= 0, where, NOT_LISTED)


def place_labels(hw: HardwareModel) -> tuple[str, tuple[str, ...]]:
    """What the place colours are called, and a label per colour."""
    if hw.chiplets > 1:
        return "XCD", tuple(f"XCD {d}" for d in range(hw.chiplets))
    groups = place_count(hw)
    labels = []
    for g in range(groups):
        sms = [s for s in range(hw.compute_units) if s * groups // hw.compute_units == g]
        labels.append(f"SMs {sms[0]}–{sms[-1]}" if len(sms) > 1 else f"SM {sms[0]}")
    return "SM group", tuple(labels)


def place_note(hw: HardwareModel, launched: int | None = None) -> str:
    """The caption's sentence on how the place of a block was found."""
    loop = f" A tile's block is its position mod the {launched:,} blocks the tile loop launches." if launched else ""
    if hw.chiplets > 1:
        return (f"Bottom: where it runs: XCD = block mod {hw.chiplets}, as the hardware deals blocks round-robin; each XCD "
                f"has its own L2, so tiles sharing data on different XCDs fetch it twice: look for tiles that share rows or "
                f"columns sharing a colour.{loop}")
    if hw.block_to_cu:
        how = (f"the group of the SM that {hw.name}'s measured dispatch gives the block (a probe launch of "
               f"{len(hw.block_to_cu):,} blocks, repeated)")
    else:
        how = f"the group of SM block mod {hw.compute_units} (the model has no measured dispatch)"
    return (f"Bottom: where it runs: {how}; {place_count(hw)} groups of consecutive SM ids. Neighbouring tiles on different "
            f"groups are expected (blocks are dealt out one by one) and cost nothing: the SMs share one L2, so when a tile "
            f"runs (the top row) is what matters.{loop}")


@dataclass(frozen=True, eq=False)
class Panel:
    """One order: its name as --swizzle spells it, the model's predicted L2 hit rate, and per drawn tile its
    wave and place (NOT_LISTED where the order was not listed that far)."""

    name: str
    hit_rate: float | None  # percent; None where the model could not predict it
    wave: np.ndarray
    place: np.ndarray

    def __post_init__(self) -> None:
        if self.wave.shape != self.place.shape or self.wave.ndim != 2:
            raise ValueError("a panel's wave and place arrays must be the same (rows, cols) shape")

    @property
    def title(self) -> str:
        hits = f"{self.hit_rate:.1f} % L2 hits (predicted)" if self.hit_rate is not None else "L2 hits not predicted"
        return f"{self.name} — {hits}"


@dataclass(frozen=True, eq=False)
class Picture:
    title: str
    caption: str
    panels: tuple[Panel, ...]
    place_name: str  # "SM group" or "XCD"
    place_labels: tuple[str, ...]
    zoom: int = ZOOM_SIDE  # places are drawn over the top-left corner of this many tiles a side

    def __post_init__(self) -> None:
        if not self.panels:
            raise ValueError("a picture needs at least one panel")


def image_format(path: str) -> str:
    """The picture's format, from the output's suffix: .png or .svg."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise SwzcError(f"{path}: the picture is written as .png or .svg; the suffix {Path(path).suffix or '(none)'!r} "
                        "names neither")
    return suffix


SHOW_EXTRA = ("pictures are drawn with matplotlib, which swzc installs only with its `show` extra: pip install 'swzc[show]' "
              "(from a clone of swzc: pip install '.[show]')")


def _matplotlib() -> Any:
    """matplotlib, imported here only: without it (an install without the `show` extra), an error that says so."""
    try:
        import matplotlib
        import matplotlib.figure  # noqa: F401 - the parts the pictures use, imported together
    except ImportError:
        raise SwzcError(SHOW_EXTRA) from None
    return matplotlib


def _place_colours(count: int) -> list:
    from matplotlib import colormaps

    if count <= 10:
        return list(colormaps["tab10"].colors[:count])
    if count <= 20:
        return list(colormaps["tab20"].colors[:count])
    return [colormaps["turbo"](i / (count - 1)) for i in range(count)]


def outline(mask: np.ndarray, most: int = MAX_OUTLINE_SEGMENTS) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """The border of the tiles where `mask` is true, as straight segments along tile edges in image
    coordinates (tile (r, c) spans c - 0.5 .. c + 0.5); a run of edges in one line is one segment.  Empty
    when the border would take more than `most` segments: a set that scattered has no shape to show."""
    padded = np.pad(mask.astype(bool), 1)
    segments = []
    for horizontal in (True, False):
        grid = padded if horizontal else padded.T
        edges = grid[1:, :] != grid[:-1, :]  # edges[i, j]: between line i and i + 1 of the padded grid, at j
        for line in np.nonzero(edges.any(axis=1))[0]:
            runs = np.diff(np.concatenate(([0], edges[line].astype(np.int8), [0])))
            for start, stop in zip(np.nonzero(runs == 1)[0], np.nonzero(runs == -1)[0]):
                at, a, b = line - 0.5, start - 1.5, stop - 1.5  # back to unpadded image coordinates
                segments.append(((a, at), (b, at)) if horizontal else ((at, a), (at, b)))
                if len(segments) > most:
                    return []
    return segments


def render(picture: Picture, fmt: str) -> bytes:
    """The picture as PNG or SVG bytes; the same picture gives the same bytes (no dates, fixed SVG ids).

    Top row: every drawn tile coloured by its wave.  Bottom row: the top-left `picture.zoom` tiles a side
    coloured by place, outlined on the row above: places change from one tile to the next, and over a
    whole grid they would blur into noise."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    matplotlib = _matplotlib()
    from matplotlib.collections import LineCollection
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure
    from matplotlib.layout_engine import ConstrainedLayoutEngine
    from matplotlib.patches import Patch, Rectangle
    from matplotlib.ticker import MaxNLocator

    columns = len(picture.panels)
    caption = "\n".join(textwrap.fill(part, 58 + 56 * columns) for part in picture.caption.split("\n"))
    caption_lines = caption.count("\n") + 1
    width, height = 3.2 + 4.3 * columns, 9.4 + 0.16 * caption_lines
    bottom_margin = (0.16 * caption_lines + 0.2) / height
    settings = {"svg.hashsalt": "swzc", "svg.fonttype": "path", "font.size": 10, "axes.titlesize": 10.5,
                "image.interpolation": "nearest"}
    rows, cols = picture.panels[0].wave.shape
    zoom = (min(rows, picture.zoom), min(cols, picture.zoom))
    colours = _place_colours(len(picture.place_labels))
    with matplotlib.rc_context(settings):
        fig = Figure(figsize=(width, height), dpi=100,
                     layout=ConstrainedLayoutEngine(rect=(0, bottom_margin, 1, 1 - bottom_margin), h_pad=0.06, w_pad=0.06,
                                                    hspace=0.06, wspace=0.05))
        axes = fig.subplots(2, columns, squeeze=False)
        last_wave = max(0, *(int(p.wave.max()) for p in picture.panels))
        # one colour per wave, so that a wave's edge is an edge of colour
        wave_map = matplotlib.colormaps["viridis"].resampled(last_wave + 1).with_extremes(bad="#d9d9d9")
        place_map = ListedColormap(colours).with_extremes(bad="#d9d9d9")
        wave_image = None
        for column, panel in enumerate(picture.panels):
            top, bottom = axes[0][column], axes[1][column]
            wave_image = top.imshow(np.ma.masked_less(panel.wave, 0), cmap=wave_map, vmin=-0.5, vmax=last_wave + 0.5)
            top.set_title(panel.title)
            first = outline(panel.wave == 0)
            if first:
                top.add_collection(LineCollection(first, colors=FIRST_WAVE_COLOUR, linewidths=1.6))
            corner = panel.place[: zoom[0], : zoom[1]]
            bottom.imshow(np.ma.masked_less(corner, 0), cmap=place_map, vmin=-0.5, vmax=len(colours) - 0.5)
            if zoom != (rows, cols):
                top.add_patch(Rectangle((-0.5, -0.5), zoom[1], zoom[0], fill=False, edgecolor="white", linewidth=1.2,
                                        linestyle=(0, (3, 2))))
                bottom.set_title(f"{panel.name} — {picture.place_name}, top-left {zoom[0]} × {zoom[1]} tiles")
            else:
                bottom.set_title(f"{panel.name} — {picture.place_name}")
            for ax in (top, bottom):
                ax.set_xlabel("tile column")
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
                ax.yaxis.set_major_locator(MaxNLocator(integer=True))
                ax.tick_params(labelsize=8.5)
        for row in axes:
            row[0].set_ylabel("tile row")
        bar = fig.colorbar(wave_image, ax=list(axes[0]), shrink=0.92, pad=0.02, aspect=30)
        bar.set_label("wave (0 runs first)")
        bar.locator = MaxNLocator(integer=True)
        bar.update_ticks()
        handles = [Patch(facecolor=c, edgecolor="none", label=label) for c, label in zip(colours, picture.place_labels)]
        axes[1][-1].legend(handles=handles, title=picture.place_name, loc="upper left", bbox_to_anchor=(1.04, 1.0),
                           borderaxespad=0, fontsize=8.5, title_fontsize=9, frameon=False,
                           ncols=1 if len(handles) <= 16 else 2)
        fig.suptitle(picture.title, fontsize=12)
        fig.text(0.012, 0.012, caption, fontsize=8.5, ha="left", va="bottom", color="#333333")
        out = io.BytesIO()
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        fig.savefig(out, format=fmt, metadata=metadata)
    if fmt == "svg":  # the text drawn is also in the file, in comments: names from the user's files
        return clean.text(out.getvalue().decode("utf-8")).encode("utf-8")
    return out.getvalue()


def draw(picture: Picture, path: str) -> None:
    """Write the picture to `path`, in the format its suffix names (.png or .svg)."""
    Path(path).write_bytes(render(picture, image_format(path)))


def picture(title: str, shape: Shape, adapter: str, orders: Sequence[tuple[SwizzleSpec, float | None]],
            hw: HardwareModel, threads: int | None, launched: int | None = None, note: str = "",
            running: Residency | None = None) -> Picture:
    """The picture of some orders over one grid: `shape` (gx, gy, gz, divisor) is what the orders permute (a
    tile loop's (T, 1, 1, n)), `threads` the threads per block, `launched` a tile loop's blocks launched,
    `running` the kernel's residency where known (else the threads alone decide).

    Lists each order with the swizzle prover's compiled C++ (swzc.formulas.prove.dispatch_maps), so the picture
    shows exactly the order that would be spliced in."""
    gx, gy, gz, divisor = shape
    grid = (gx, gy, gz)
    whole = tile_shape(adapter, grid, divisor)
    concurrent = running.resident_blocks(hw) if running is not None else resident_blocks(hw, threads)
    if launched:
        concurrent = min(concurrent, launched)
    maps = dispatch_maps([(spec, adapter) for spec, _ in orders], shape, MAX_POSITIONS)
    panels = []
    for (spec, hit_rate), order in zip(orders, maps):
        positions = order_grid(order, adapter, grid, divisor)
        panels.append(Panel(spec.name, hit_rate, waves(positions, concurrent), places(positions, hw, launched)))
    place_name, labels = place_labels(hw)
    unlisted = any(bool((p.wave == NOT_LISTED).any()) for p in panels)
    ragged = bool(whole.fold) and whole.rows * whole.cols > gx  # a folded grid's last row, past its last block
    caption = _caption(hw, whole, panels[0].wave.shape, concurrent, threads, launched, unlisted, ragged, note, running)
    caption = "\n".join([LOOK_FOR, orders_said([spec for spec, _ in orders]), caption])
    # drawn as text (and kept as text in an SVG): a name from the user's files shows an unsafe character escaped
    return Picture(clean.text(title), clean.text(caption), tuple(panels), place_name, labels)


LOOK_FOR = ("What to look for: blocks resident at once form a wave; a block's dispatch position is its place in the "
            "order the GPU starts blocks (x fastest, then y, then z). A wave that is a compact patch of tiles reads a few "
            "rows and columns that its tiles share; a band across the grid reads a whole operand for itself. The more "
            "compact the waves (red outline: the first), the fewer bytes come from DRAM.")


def orders_said(specs: Sequence[SwizzleSpec | Any]) -> str:
    """One line on what each order drawn does, from the table of kinds (swzc.formulas.steps.KINDS), so that the
    panels tell their kinds apart at a glance."""
    said = []
    for spec in specs:
        if not isinstance(spec, SwizzleSpec):
            said.append(f"{spec.name}: an order from an LLM, proven a permutation")
            continue
        if spec.is_identity:
            said.append("identity: the hardware's own order")
            continue
        parts = []
        for step in spec.steps:
            kind = steps.KINDS[step.kind]
            text = kind.summary
            if not step.chunk:  # the chunked form's own clause ("; xcd:N:C: ...") is not this step's
                text = text.split(f"; {kind.name}:")[0]
            if kind.letter is not None:
                text = re.sub(rf"\b{kind.letter}\b", str(step.param), text)
            if step.chunk:
                text = re.sub(r"\bC\b", str(step.chunk), text)
            parts.append(text)
        gate = f" (the hardware's order under {spec.gate:,} tiles)" if spec.gate else ""
        said.append(f"{spec.name}: {', then '.join(parts)}{gate}")
    return "Orders: " + "; ".join(said) + "."


def _caption(hw: HardwareModel, whole: TileShape, drawn: tuple[int, int], concurrent: int, threads: int | None,
             launched: int | None, unlisted: bool, ragged: bool, note: str, running: Residency | None = None) -> str:
    per_cu = concurrent // hw.compute_units
    units = "SMs" if hw.vendor == "nvidia" else "CUs"
    if launched and concurrent == launched:
        why = f"the {launched:,} blocks the tile loop launches"
    elif running is not None:
        why = f"{hw.compute_units} {units} × {per_cu} blocks, bound by {running.limit}: {running.source}"
    else:
        limit = f"of {threads} threads" if threads else "(threads per block unknown: the block limit)"
        why = (f"{hw.compute_units} {units} × {per_cu} blocks {limit}; registers and shared memory are not counted, so a "
               "heavier kernel has thinner waves")
    marks = "red outline: the first wave" + ("; dashed square: the corner drawn below" if max(drawn) > ZOOM_SIDE else "")
    lines = [f"Top: when each tile runs: wave = dispatch position // {concurrent:,} blocks resident at once ({why}). "
             f"{marks[0].upper()}{marks[1:]}.",
             place_note(hw, launched)]
    shown = []
    if whole.fold:
        shown.append(f"the grid has no tile rows: its blocks are drawn in rows of {whole.fold}"
                     + ("; grey: past the last block" if ragged else ""))
    if drawn != (whole.rows, whole.cols):
        shown.append(f"the top-left {drawn[0]} × {drawn[1]} tiles of {whole.rows:,} × {whole.cols:,} are drawn")
    if whole.layers > 1:
        shown.append(f"z slice 0 of {whole.layers:,} is drawn")
    if unlisted and not ragged:
        shown.append(f"only the first {MAX_POSITIONS:,} dispatch positions are listed; grey tiles run later")
    if shown:
        said = "; ".join(shown)
        lines.append(said[0].upper() + said[1:] + ".")
    if note:
        lines.append(note)
    return "\n".join(lines)


_STYLE = ("<style>body{font-family:sans-serif;margin:1.5em}section{display:flex;flex-wrap:wrap;gap:2em;"
          "align-items:flex-start;margin-bottom:2em}figure{margin:0}figure img,figure svg{max-width:100%;height:auto}"
          "table{border-collapse:collapse;font-size:90%}th,td{padding:.25em .7em;border-bottom:1px solid #ddd;"
          "text-align:right}th:first-child,td:first-child{text-align:left}tr.shown td{font-weight:bold}"
          "h1{font-size:130%;width:100%;margin:0}</style>")


def html_page(image: bytes, fmt: str, title: str, predictions: Sequence[Prediction] = (), shown: Sequence[str] = (),
              bench: KernelBench | None = None, floor: Floor | None = None) -> str:
    """A self-contained HTML page: the picture (a data: URI for PNG, inline SVG) beside the model's predictions
    (with the DRAM floor, as a multiple of it) and, when given, the measured attempts.  Every string from
    outside is escaped: kernel and file names come from other people's files."""
    return html_report(title, [html_section(image, fmt, title, predictions, shown, bench, floor)])


def html_report(title: str, sections: Sequence[str]) -> str:
    """One page of several kernels' sections (html_section), written through swzc.core.clean."""
    e = html.escape
    page = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{e(title)}</title>", _STYLE,
            "</head><body>", *sections, "</body></html>", ""]
    return clean.text("\n".join(page))


def size_plot(bench: KernelBench) -> bytes:
    """A loop over several sizes as a PNG: each order's measured speedup against the size, the original at 1,
    the chosen order drawn thick; the same bench gives the same bytes."""
    matplotlib = _matplotlib()
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"font.size": 10}):
        fig = Figure(figsize=(6.4, 3.8), dpi=100, layout="constrained")
        ax = fig.subplots()
        names = list(dict.fromkeys(a.candidate for a in bench.by_size))
        for name in names:
            points = sorted((a.size, a.speedup) for a in bench.by_size if a.candidate == name and a.size and a.speedup)
            if points:
                ax.plot(*zip(*points), marker="o", linewidth=2.6 if name == bench.chosen else 1.2,
                        label=name + (" (accepted)" if name == bench.chosen else ""))
        ax.axhline(1.0, color="0.4", linestyle=":", linewidth=1)
        ax.set_xscale("log", base=2)
        sizes = sorted({a.size for a in bench.by_size if a.size})
        ax.set_xticks(sizes, [str(size) for size in sizes])
        ax.minorticks_off()
        ax.set_xlabel("size (every size name bound to it)")
        ax.set_ylabel("speedup over the original (measured)")
        ax.set_title(f"{bench.kernel}: measured speedup by size")
        ax.legend(fontsize=8)
        out = io.BytesIO()
        fig.savefig(out, format="png", metadata={"Software": None})
    return out.getvalue()


def html_section(image: bytes, fmt: str, title: str, predictions: Sequence[Prediction] = (), shown: Sequence[str] = (),
                 bench: KernelBench | None = None, floor: Floor | None = None) -> str:
    """One kernel: its picture, the model's predictions and the measured attempts."""
    if fmt == "png":
        figure = f'<img alt="block order" src="data:image/png;base64,{base64.b64encode(image).decode("ascii")}">'
    elif fmt == "svg":
        text = image.decode("utf-8")
        figure = text[text.index("<svg"):]  # the XML declaration and doctype may not stand inside HTML
    else:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    e = html.escape
    parts = ["<section>", f"<h1>{e(title)}</h1>", f"<figure>{figure}</figure>", "<div>"]
    if predictions:
        product = floor.product if floor is not None else None
        parts += ["<h2>L2 model (predicted)</h2>", "<table><tr><th>candidate</th><th>L2 hits</th><th>DRAM</th>"
                  + ("<th>× floor</th>" if floor is not None else "") + ("<th>× I/O bound</th>" if product else "") + "</tr>"]
        for p in predictions:
            mark = ' class="shown"' if p.candidate in shown else ""
            times = floor.times(p.dram_bytes) if floor is not None else None
            bound = f"<td>{_number(floor.over_bound(p.dram_bytes), '{:.2f}x')}</td>" if product and floor else ""
            parts.append(f"<tr{mark}><td>{e(p.candidate)}</td><td>{p.l2_hit_rate:.1f} %</td>"
                         f"<td>{p.dram_bytes / 1e6:,.0f} MB</td>" + (f"<td>{_number(times, '{:.2f}x')}</td>" if floor else "")
                         + bound + "</tr>")
        parts.append("</table>")
        if floor is not None:
            parts.append(f"<p>DRAM floor: {floor.bytes / 1e6:,.0f} MB, each sector the grid reads or writes moved once"
                         + ("" if floor.exact else " (at most: some access counted by its span)") + ".</p>")
        if product is not None:
            parts.append(f"<p>I/O bound: {product.bytes / 1e6:,.0f} MB, the least DRAM traffic any order of a "
                         f"{e(product_text(product))} can reach with the GPU's L2, registers and shared memory.</p>")
    if bench is not None:
        parts += measured_html(bench)
    parts += ["</div>", "</section>"]
    return "\n".join(parts)


def measured_html(bench: KernelBench) -> list[str]:
    """A kernel's measured attempts as HTML; measured at several sizes, the size x order table and its plot."""
    e = html.escape
    parts = [f"<h2>Measured: {e(bench.kernel)} (line {bench.line})</h2>",
             "<table><tr><th>candidate</th><th>status</th><th>speedup</th><th>L2 hits</th><th>ms</th></tr>"]
    for a in bench.attempts:
        mark = ' class="shown"' if a.candidate == bench.chosen else ""
        parts.append(f"<tr{mark}><td>{e(a.candidate)}</td><td>{e(a.status)}</td><td>{_number(a.speedup, '{:.3f}x')}</td>"
                     f"<td>{_number(a.l2_hit_rate, '{:.1f} %')}</td><td>{_number(a.ms, '{:.3f}')}</td></tr>")
    parts += ["</table>", f"<p>{e(bench.reason)}</p>"]
    if bench.calibration is not None:
        parts.append(f"<p>Calibration (one instrumented run of the original): {e(bench.calibration.text())}</p>")
    if bench.by_size:
        cells = lambda row, tag: "".join(f"<{tag}>{e(cell)}</{tag}>" for cell in row)  # noqa: E731
        table = size_table(bench)
        try:
            plot = f'<img alt="speedup by size" src="data:image/png;base64,{base64.b64encode(size_plot(bench)).decode("ascii")}">'
        except SwzcError as exc:  # no matplotlib: the table without its plot
            plot = f"<p>not drawn: {e(exc.message)}</p>"
        parts += ["<h2>Measured by size</h2>", "<table><tr>" + cells(table[0], "th") + "</tr>"
                  + "".join("<tr>" + cells(row, "td") + "</tr>" for row in table[1:]) + "</table>", plot]
    return parts


def _number(value: float | None, fmt: str) -> str:
    return "–" if value is None else fmt.format(value)


# ---- a kernel of a file --------------------------------------------------------------------------------------


IDENTITY = SwizzleSpec(())


@dataclass(frozen=True)
class KernelPicture:
    """One kernel's picture, and the model's ranking where it had one."""

    kernel: str
    picture: Picture
    ranking: Ranking | None
    note: str  # why the orders drawn are these

    @property
    def floor(self) -> Floor | None:
        """The DRAM floor of the kernel the model ranked (swzc.model.floor)."""
        return self.ranking.floor if self.ranking is not None else None


SHOWN_REASONS = 3  # kernels whose reasons an error that none can be drawn gives


def kernel_index(analysis: FileAnalysis, ranked: Mapping[int, Ranking | str], name: str | None, forced: bool) -> int:
    """The kernel to draw: the one named, else the first the model would swizzle, else the first it ranks,
    else (with --swizzle) the first that can be swizzled."""
    kernels = analysis.kernels
    if name is not None:
        named = [i for i, k in enumerate(kernels) if k.name == name]
        if not named:
            known = ", ".join(dict.fromkeys(k.name for k in kernels)) or "none"
            raise SwzcError(f"--kernel {name}: no such kernel in {analysis.path} (kernels: {known})")
        return next((i for i in named if isinstance(ranked.get(i), Ranking)), next((i for i in named if i in ranked), named[0]))
    chosen = next((i for i in sorted(ranked) if isinstance(ranked[i], Ranking) and ranked[i].chosen is not None), None)  # type: ignore[union-attr]
    first = chosen if chosen is not None else next((i for i in sorted(ranked) if isinstance(ranked[i], Ranking)), None)
    if first is not None:
        return first
    if forced and ranked:
        return min(ranked)
    shown = SHOWN_REASONS
    why = "; ".join(f"{k.name}: {ranked[i] if i in ranked else _refusal(analysis, i)}" for i, k in enumerate(kernels[:shown]))
    if len(kernels) > shown:  # one error line, not one reason per kernel of a large file
        why += f"; and {len(kernels) - shown} more kernel(s): `swzc analyze {analysis.path}` says why for each"
    gridless = [k.name for i, k in enumerate(kernels) if i in ranked and not any(la.grid is not None for la in k.launches)]
    hint = ("; give the order to draw with --swizzle SPEC" + (f", and a grid with --grid {gridless[0]}=X,Y where no launch "
            "here fixes one" if gridless else "")) if ranked else ""
    raise SwzcError(f"no kernel in {analysis.path} that the L2 model can rank ({why or 'no __global__ kernels'}){hint}")


def _refusal(analysis: FileAnalysis, index: int) -> str:
    decision = block_swizzle.refusal(analysis, index)
    return f"{decision.status}: {decision.reason}" if decision is not None else "not ranked"


def kernel_picture(ctx: FileContext, analysis: FileAnalysis, hw: HardwareModel, bindings: Mapping[str, Value],
                   kernel: str | None = None, swizzle: SwizzleSpec | None = None, runner_up: bool = False) -> KernelPicture:
    """The picture of one kernel's order: identity, the model's choice (or `swizzle`), and optionally the
    model's next best.  An input error (exit 2) where there is nothing to draw, saying why.

    The kernel is the one named, else the first the model ranks.  Without `swizzle` the second order is the
    model's choice, or where it keeps identity (no gain of MARGIN_POINTS) its best candidate all the same:
    identity beside identity would show nothing."""
    ranked = rank_kernels(ctx, analysis, hw, bindings)
    index = kernel_index(analysis, ranked, kernel, swizzle is not None)
    info = analysis.kernels[index]
    if index not in ranked:
        raise SwzcError(f"kernel {info.name} (line {info.line}) is {_refusal(analysis, index)}; its order cannot change")
    ranking = ranked[index]
    if isinstance(ranking, str) and swizzle is None:
        grid = "" if any(la.grid is not None for la in info.launches) else f" and its grid with --grid {info.name}=X,Y"
        raise SwzcError(f"the L2 model cannot rank kernel {info.name} (line {info.line}): {ranking}; "
                        f"give the order to draw with --swizzle SPEC{grid}")
    shape, adapter, threads, launched = _grid(info, ranking)
    if swizzle is not None and swizzle.needs_tiles and adapter == "linear":
        raise SwzcError(f"--swizzle {swizzle.name}: kernel {info.name} has no tile rows to regroup (a 1D grid without "
                        "a tile decode); only xcd:N and xcd:N:C apply")
    hits = {p.candidate: p.l2_hit_rate for p in ranking.predictions} if isinstance(ranking, Ranking) else {}
    orders, note = _orders(ranking, swizzle, runner_up)
    if isinstance(ranking, Ranking) and any(spec.name not in hits for spec in orders):
        forced = rank(ctx, info, hw, bindings, specs=list(dict.fromkeys([IDENTITY, *orders])), running=ranking.residency)
        if isinstance(forced, Ranking):
            hits.update({p.candidate: p.l2_hit_rate for p in forced.predictions})
    title = f"{os.path.basename(analysis.path)}: kernel {info.name} on {hw.name}, {_tiles_text(shape, adapter, info)}"
    caption_note = note if isinstance(ranking, Ranking) else f"{note} The L2 model cannot rank this kernel: {ranking}."
    # a gated order at the size drawn (a sweep's largest, past its gate) is its order ungated: that one's prediction
    predicted = [(spec, hits.get(spec.name, hits.get(getattr(spec, "ungated", spec).name))) for spec in orders]
    drawn = picture(title, shape, adapter, predicted, hw, threads, launched, caption_note,
                    ranking.residency if isinstance(ranking, Ranking) else None)
    return KernelPicture(info.name, drawn, ranking if isinstance(ranking, Ranking) else None, note)


def _tiles_text(shape: tuple[int, int, int, int], adapter: str, info: KernelInfo) -> str:
    """The tile grid in words, for the picture's title."""
    tiles = tile_shape(adapter, shape[:3], shape[3])
    text = f"{tiles.rows:,} × {tiles.cols:,} tiles" + (f" × {tiles.layers:,} z slices" if tiles.layers > 1 else "")
    if info.tile_loop is not None:
        return text + f" walked by a tile loop over {info.tile_loop.var}"
    return text + {"2d": "", "1d": f", blockIdx.x decoded by {shape[3]}", "linear": ", a 1D grid"}[adapter]


def _grid(info: KernelInfo, ranking: Ranking | str) -> tuple[tuple[int, int, int, int], str, int | None, int | None]:
    """(gx, gy, gz, divisor) of what the order permutes, the adapter, threads per block, and a tile loop's
    blocks launched."""
    launch = next((la for la in info.launches if la.grid is not None), None)
    launched = math.prod(launch.grid) if launch is not None and launch.grid is not None and info.tile_loop else None
    if isinstance(ranking, Ranking):
        fp = ranking.footprint
        return (*fp.grid, fp.divisor), fp.adapter, fp.threads, launched
    if launch is None or launch.grid is None:
        raise SwzcError(f"kernel {info.name}: {ranking}")
    adapter = info.adapter
    threads = math.prod(launch.block) if launch.block is not None else None
    if info.tile_loop is not None:
        if launch.tiles is None:
            raise SwzcError(f"kernel {info.name}: the tile count {info.tile_loop.count!r} of its tile loop is not known "
                            "(give its sizes with --set)")
        grid = (launch.tiles, 1, 1)
    else:
        grid = launch.grid
    if adapter == "1d" and not launch.divisor:
        raise SwzcError(f"kernel {info.name}: the divisor of its tile decode is not known (give its sizes with --set)")
    return (*grid, (launch.divisor or 0) if adapter == "1d" else 0), adapter, threads, launched


def _orders(ranking: Ranking | str, swizzle: SwizzleSpec | None, runner_up: bool) -> tuple[list[SwizzleSpec], str]:
    """The orders to draw, identity first, and a note on why the second is the one drawn."""
    ranked = [p.formula for p in ranking.predictions if p.formula is not None and not p.formula.is_identity] \
        if isinstance(ranking, Ranking) else []
    if swizzle is not None and swizzle.is_identity:
        chosen, note = swizzle, "Identity, as given by --swizzle."
    elif swizzle is not None:
        chosen, note = swizzle, f"Beside identity: {swizzle.name}, given by --swizzle."
    elif isinstance(ranking, Ranking) and ranking.chosen is not None:
        chosen, note = ranking.chosen, f"Beside identity: {ranking.chosen.name}, the L2 model's choice."
    elif ranked:
        chosen = ranked[0]
        note = (f"Beside identity: {ranked[0].name}, the L2 model's best candidate; the model keeps identity, as no candidate "
                f"gains {MARGIN_POINTS:g} points of L2 hits.")
    else:
        return [IDENTITY], "The L2 model has no candidate but identity for this grid."
    orders = [IDENTITY] + ([chosen] if not chosen.is_identity else [])
    if runner_up:
        nxt = next((spec for spec in ranked if spec not in orders), None)
        if nxt is not None:
            orders.append(nxt)
            note += f" Third: {nxt.name}, the runner-up."
    return orders, note
