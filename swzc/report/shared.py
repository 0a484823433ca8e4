"""Pieces that the outputs of several commands print alike: the parse errors swzc worked around, a table of the
L2 model's candidates, and an error as the one JSON document a --json command prints instead of its result.

Each command's own outputs are in the module named as the command (swzc.report.rewrite, .analyze, .suggest,
and swzc.report.emitters for review's formats); what two of them print the same way is here, once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swzc.core import clean
from swzc.frontend.source import SyntaxIssue
from swzc.model.floor import Floor, Product
from swzc.model.rank import SizeSweep


def syntax_lines(path: str, errors: tuple[SyntaxIssue, ...], shown: int = 3) -> list[str]:
    """The parse errors swzc worked around, as summary lines."""
    if not errors:
        return []
    lines = [f"  {len(errors)} part(s) of the file could not be parsed; kernels clear of them were analysed:"]
    lines += [f"      {path}:{e.line}:{e.col}: {e.what}" for e in errors[:shown]]
    if len(errors) > shown:
        lines.append(f"      … and {len(errors) - shown} more (--json lists them all)")
    return lines


def syntax_json(errors: tuple[SyntaxIssue, ...]) -> list[dict[str, Any]]:
    """Every parse error, as the JSON outputs list them."""
    return [{"line": e.line, "col": e.col, "message": e.what} for e in errors]


def candidates_json(table: tuple[tuple[str, float, float], ...], floor: Floor | None = None) -> list[dict[str, Any]]:
    """The L2 model's (name, predicted L2 hit %, predicted DRAM bytes) rows; with the DRAM floor
    (swzc.model.floor), each row's bytes as a multiple of it too, and of the matrix product's I/O bound where
    the kernel is one."""
    rows = [{"name": n, "predicted_l2_hit_rate": hit, "predicted_dram_bytes": dram} for n, hit, dram in table]
    if floor is not None:
        for row in rows:
            row["predicted_dram_over_floor"] = floor.times(row["predicted_dram_bytes"])
            if floor.product is not None:
                row["predicted_dram_over_io_bound"] = floor.over_bound(row["predicted_dram_bytes"])
    return rows


def floor_json(floor: Floor | None) -> dict[str, Any] | None:
    """The DRAM floor, and the matrix product's I/O bound where the kernel is one (swzc.model.floor)."""
    if floor is None:
        return None
    p = floor.product
    bound = None if p is None else {"bytes": p.bytes, "m": p.m, "n": p.n, "k": p.k, "batch": p.batch,
                                    "arrays": {"rows": p.arrays[0], "columns": p.arrays[1], "result": p.arrays[2]}}
    return {"bytes": floor.bytes, "exact": floor.exact, "io_bound": bound}


def product_text(p: Product) -> str:
    """'matrix product C = A B, 4096 x 4096 x 4096' (with ', 8 of them' where there are several)."""
    a, b, c = p.arrays
    return f"matrix product {c} = {a} {b}, {p.m} x {p.n} x {p.k}" + (f", {p.batch} of them" if p.batch > 1 else "")


def sweep_json(sweep: SizeSweep | None) -> dict[str, Any] | None:
    """A kernel ranked over sizes (swzc.model.sweep): the names swept, each size's grid and predictions (the
    original order, the chosen one ungated, the best), each order's crossover, and the gated choice."""
    if sweep is None:
        return None
    chosen = sweep.chosen.ungated.name if sweep.chosen is not None else None

    def numbers(point: Any, name: str | None) -> dict[str, Any] | None:
        p = point.prediction(name) if name is not None else None
        return None if p is None else {"name": p.candidate, "predicted_l2_hit_rate": p.l2_hit_rate,
                                       "predicted_dram_bytes": p.dram_bytes}

    return {
        "predicted": True,
        "names": list(sweep.names),
        "chosen": sweep.chosen.name if sweep.chosen is not None else None,
        "crossover": sweep.crossover,
        "gate_tiles": sweep.chosen.gate if sweep.chosen is not None else None,
        "writes_past_l2": sweep.writes_past_l2,
        "points": [{"size": pt.size, "grid": list(pt.grid), "tiles": pt.tiles, "data_bytes": pt.data_bytes,
                    "written_bytes": pt.written_bytes, "identity": numbers(pt, "identity"), "chosen": numbers(pt, chosen),
                    "best": numbers(pt, pt.ranking.predictions[0].candidate)} for pt in sweep.points],
        "crossovers": {name: size for name, size in sweep.crossovers},
        "reason": sweep.reason,
    }


def sweep_lines(sweep: SizeSweep | None, indent: str = "    ") -> list[str]:
    """The same as a table: per size, the grid and the predicted L2 hits of the original, the chosen and the best."""
    if sweep is None:
        return []
    chosen = sweep.chosen.ungated.name if sweep.chosen is not None else None
    what = f"sizes ({' = '.join(sweep.names)})" if sweep.names else "the grids it is launched with (size: tiles)"
    lines = [f"{indent}{what}, predicted, not measured:",
             f"{indent}  {'size':>7} {'grid':>15} {'tiles':>10} {'identity':>10} " + (f"{chosen:>22} " if chosen else "") + " best"]
    for pt in sweep.points:
        mine = pt.prediction(chosen) if chosen else None
        on = sweep.chosen is not None and pt.tiles >= sweep.chosen.gate
        shown = "" if mine is None else f"{mine.l2_hit_rate:6.1f} %" + ("" if on else " (gated off)")
        best = pt.ranking.predictions[0]
        lines.append(f"{indent}  {pt.size:>7} {'x'.join(map(str, pt.grid)):>15} {pt.tiles:>10,} "
                     f"{pt.ranking.identity.l2_hit_rate:8.1f} % " + (f"{shown:>22} " if chosen else "")
                     + f" {best.candidate} {best.l2_hit_rate:.1f} %")
    return lines


def error_json(file: str | None, code: int, message: str, details: Mapping[str, Any]) -> str:
    """With --json, an error as one document on stdout (a tool reading stdout gets the file's syntax errors,
    not nothing)."""
    return clean.dumps({"file": file, "exit_code": code, "error": message, **details})
