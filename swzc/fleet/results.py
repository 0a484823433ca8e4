"""The store read back for a plan: each job's stored result (or none yet), and each file rewritten with the orders
its kernels' jobs accepted, for the review formats (SARIF, rdjson, GitHub's review, a patch).

The rewrite runs offline from the stored order's name: it is proven and spliced again, never measured, and
it covers only the file's bytes the results were measured on (the key holds them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from swzc.core.errors import SwzcError
from swzc.fleet.jobs import Job, Plan
from swzc.formulas.swizzles import Formula, parse_spec
from swzc.pipeline.driver import RewriteResult, RunPlan, analyze_file, rewrite_source
from swzc.pipeline.reading import input_limit


@dataclass(frozen=True)
class Found:
    job: Job
    row: Mapping[str, Any] | None  # the stored row (swzc.fleet.store), None: not tuned yet

    @property
    def result(self) -> Mapping[str, Any]:
        return self.row["result"] if self.row is not None else {}

    def as_dict(self) -> dict[str, Any]:
        """The job and its result as the report shows it; status "not tuned" where nothing is stored."""
        job, result = self.job, self.result
        attempts = [a for a in result.get("attempts", []) if isinstance(a, dict)]
        chosen = result.get("chosen")
        mine = [a for a in attempts if a.get("candidate") == chosen and _number(a.get("speedup")) is not None]
        largest = max(mine, key=lambda a: _number(a.get("size")) or 0) if mine else None
        row = self.row or {}
        return {"file": job.file, "line": job.line, "kernel": job.kernel, "card": job.card, "key": row.get("key", job.key),
                "status": str(result.get("status", "error")) if self.row is not None else "not tuned",
                "chosen": chosen, "reason": str(result.get("reason", "")), "code": result.get("code"),
                "speedup": _number(largest.get("speedup")) if largest else None,
                "size": int(_number(largest.get("size")) or 0) or None if largest else None, "measured_on": row.get("measured_on"),
                "host": row.get("host"), "node": result.get("node"), "tries": row.get("tries"), "stored_at": row.get("stored_at"),
                "seconds": result.get("seconds"), "attempts": attempts}


def _number(value: Any) -> float | None:
    """A stored figure as a number (None where the row holds something else)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def found(plan: Plan, stored: Mapping[str, Mapping[str, Any]]) -> list[Found]:
    """Each job of the plan with the result stored under its key."""
    return [Found(job, stored.get(job.key)) for job in plan.jobs]


def latest(plan: Plan, rows: Sequence[Mapping[str, Any]], card: str | None = None) -> list[Found]:
    """Each kernel of the plan with the newest result stored for its file's bytes, on each card model the rows
    hold (or on `card` alone), whatever settings measured it: what `tune --report` shows."""
    newest: dict[tuple[str, str, int, str], Mapping[str, Any]] = {}
    for row in rows:  # oldest first: the newest stays
        newest[(row["digest"], row["kernel"], row["kernel_index"], row["card"])] = row
    kernels = list(dict.fromkeys((job.file, job.digest, job.kernel, job.index) for job in plan.jobs))
    jobs = {(job.file, job.kernel, job.index): job for job in plan.jobs}
    cards = [card] if card else sorted({row["card"] for row in rows}) or [j.card for j in plan.jobs[:1]]
    out = []
    for model in cards:
        for file, digest, kernel, index in kernels:
            job = jobs[(file, kernel, index)].on(model)
            out.append(Found(job, newest.get((digest, kernel, index, model))))
    return out


def rewritten(plan: Plan, results: Sequence[Found], card: str) -> list[RewriteResult]:
    """Each file of the plan rewritten with the orders stored for its kernels on `card` (files with none: their
    kernels' outcomes only, refusals included, and no change)."""
    chosen: dict[str, dict[int, str]] = {}
    for item in results:
        if item.job.card == card and item.row is not None and item.result.get("status") == "rewritten" and item.result.get("chosen"):
            chosen.setdefault(item.job.file, {})[item.job.index] = str(item.result["chosen"])
    digests = {job.file: (job.digest, job.settings) for job in plan.jobs}
    out = []
    for file in dict.fromkeys(job.file for job in plan.jobs):
        digest, settings = digests[file]
        with input_limit(settings.max_bytes):
            options = replace(settings.options(file), bench=False, compile=False)
            ctx, analysis = analyze_file(file, options.bindings, options.context, options.facts, facts_elsewhere=True,
                                         digest=digest)
            only: dict[int, Formula] = {}
            for index, name in chosen.get(file, {}).items():
                try:
                    only[index] = parse_spec(name)
                except ValueError:
                    raise SwzcError(f"{file}: the store's order for kernel {analysis.kernels[index].name}, {name!r}, is not "
                                    "one swzc can read: tune it again with --retune") from None
            out.append(rewrite_source(ctx, analysis, options, RunPlan(only=only)))
    return out
