"""Pieces that the outputs of several commands print alike: the parse errors swzc worked around, a table of the
L2 model's candidates, and an error as the one JSON document a --json command prints instead of its result.

Each command's own outputs are in the module named as the command (swzc.report.rewrite, .analyze, .suggest,
and swzc.report.emitters for review's formats); what two of them print the same way is here, once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swzc.core import clean
from swzc.frontend.source import SyntaxIssue


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


def candidates_json(table: tuple[tuple[str, float, float], ...]) -> list[dict[str, Any]]:
    """The L2 model's (name, predicted L2 hit %, predicted DRAM bytes) rows."""
    return [{"name": n, "predicted_l2_hit_rate": hit, "predicted_dram_bytes": dram} for n, hit, dram in table]


def error_json(file: str | None, code: int, message: str, details: Mapping[str, Any]) -> str:
    """With --json, an error as one document on stdout (a tool reading stdout gets the file's syntax errors,
    not nothing)."""
    return clean.dumps({"file": file, "exit_code": code, "error": message, **details})
