"""What `swzc rewrite` prints: its summary as text, or as one JSON document (--json).

One module per command's outputs (rewrite, analyze, suggest here; review's formats in swzc.report.emitters):
a newcomer asking "where does `swzc rewrite --json` come from" opens the file named as the command, and the
text and the JSON, which say the same things, change side by side.  Both are pure functions of the
pipeline's RewriteResult (swzc.pipeline.driver) and of which outputs the command line named; the command
(swzc.commands.cli) prints them and writes the files.
"""

from __future__ import annotations

import json
from typing import Any

from swzc.core import clean
from swzc.core.errors import ExitCode
from swzc.pipeline.driver import KernelOutcome, RewriteResult
from swzc.report.run_report import searches_json
from swzc.report.shared import candidates_json, sweep_json, sweep_lines, syntax_json, syntax_lines
from swzc.verify.bench import PROFILERS, report_json, size_table


def render_text(result: RewriteResult, wrote: bool, patch_note: str = "", verbose: bool = False, notes: bool = True) -> str:
    """The summary: each kernel's outcome, the syntax errors worked around, notes, the compile check, the
    benchmark and (verbose, or where an LLM took part) every candidate tried.  `wrote`: an output was named.
    Without `notes` (-q), only the findings: each rewritten kernel's line, a compile check that did not pass and the
    benchmark's verdicts."""
    lines = [f"{result.path} ({result.dialect}, hw {result.hw})"]
    for o in result.outcomes:
        head = f"  {o.name} (line {o.line}): {o.status}"
        if not notes:
            lines += [f"{head} with {o.swizzle}"] if o.status == "rewritten" else []
            continue
        if o.status == "rewritten":
            lines.append(f"{head} with {o.swizzle}")
            lines.append(f"      {o.reason}")
            if o.chosen_by:
                lines.append(f"      chosen: {o.chosen_by}")
            lines.append(f"      proof: {o.proof}")
            if verbose:
                lines += sweep_lines(o.sizes, "      ")
        else:
            lines.append(f"{head}: {o.reason}")
            if verbose:
                lines += sweep_lines(o.sizes, "      ")
    if not result.outcomes and notes:
        lines.append("  no __global__ kernels in this file")
    lines += syntax_lines(result.path, result.syntax_errors) if notes else []
    lines += [f"  note: {note}" for note in result.notes] if notes else []
    if result.compile is not None and (notes or result.compile.status != "ok"):
        c = result.compile
        lines.append(f"  compile check: {c.status}" + (f" ({c.detail})" if c.detail else ""))
        if c.command and c.status != "ok":
            lines.append(f"      {c.command}")
    if not result.changed and notes:
        lines.append("  nothing to do: no kernel was rewritten" if result.exit_code == ExitCode.OK else "  no kernel was rewritten")
    for b in result.bench:
        reason = b.reason.replace("\n", "\n      ")  # a failed check carries the harness's own lines
        lines.append(f"  benchmark {b.kernel}: {b.chosen + ' accepted' if b.chosen else 'declined'}: {reason}")
        if b.profiler not in PROFILERS.values():  # no L2 figures: say why
            lines.append(f"      profiler: {b.profiler}")
        if b.calibration is not None:
            lines.append(f"      calibration: {b.calibration.text()}")
        if b.by_size:  # measured at several sizes: the speedup of each order at each
            table = size_table(b)
            widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
            lines.append("      measured speedup by size:")
            lines += ["        " + "  ".join(cell.rjust(w) for cell, w in zip(row, widths)) for row in table]
    for search in result.searches:
        if not verbose and not any(t.proposer == "llm" for t in search.history):
            continue
        lines.append(f"  candidates for {search.kernel}:")
        for t in search.history:
            lines.append(f"      {t.name} ({t.proposer}): {t.status}: {t.detail.splitlines()[0] if t.detail else ''}")
    if patch_note and notes:
        lines.append(f"  note: {patch_note}")
    if result.changed and not result.benchmarked and notes:
        lines.append("  not benchmarked: no GPU run was made for this patch")
        if not wrote:
            lines.append("  dry run: nothing written (use -o OUT, --in-place or --patch FILE)")
    return "\n".join(lines) if notes or len(lines) > 1 else ""  # -q and nothing found: nothing


def render_json(result: RewriteResult, output: str | None, in_place: bool, patch_out: str | None) -> str:
    """The same as one JSON document, with every syntax error and candidate, and the outputs written."""
    doc = {
        "file": result.path,
        "dialect": result.dialect,
        "hw": result.hw,
        "changed": result.changed,
        "exit_code": int(result.exit_code),
        "benchmarked": result.benchmarked,
        "bench": json.loads(report_json(list(result.bench), {}))["kernels"] if result.benchmarked else [],
        "kernels": [_kernel(o) for o in result.outcomes],
        "syntax_errors": syntax_json(result.syntax_errors),
        "notes": list(result.notes),
        "llm_failure": result.llm_failure or None,
        "searches": searches_json(result),
        "compile": None if result.compile is None else {"status": result.compile.status, "command": result.compile.command,
                                                         "detail": result.compile.detail},
        "outputs": {"file": output if output else (result.path if in_place and result.changed else None), "patch": patch_out},
    }
    return clean.dumps(doc)


def _kernel(o: KernelOutcome) -> dict[str, Any]:
    return {"name": o.name, "line": o.line, "status": o.status, "reason": o.reason, "swizzle": o.swizzle,
            "adapter": o.adapter, "grids": [list(g) for g in o.grids], "proof": o.proof, "chosen_by": o.chosen_by,
            "candidates": candidates_json(o.candidates), "rules": list(o.rules), "sizes": sweep_json(o.sizes)}
