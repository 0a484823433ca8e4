"""The run's report (--report PREFIX): every candidate each kernel's proposers offered and what became of it,
the measured attempts where a GPU judged them, and the LLM's exchanges (prompt, reply, verdict, tokens,
seconds), as PREFIX.json and PREFIX.md; with the benchmark, PREFIX.html, each measured kernel's order drawn
beside its numbers.  The API key is never part of any of it: the client keeps it out of its exchanges.  The
JSON and Markdown reports are written through swzc.core.clean: what the file, the hardware model and the LLM
said shows an invisible or control character as an escape."""

from __future__ import annotations

import html
import json
from dataclasses import asdict
from typing import Any

from swzc.core import clean
from swzc.core.errors import SwzcError
from swzc.verify.bench import report_json, report_markdown
from swzc.pipeline.driver import Options, RewriteResult, analyze_file
from swzc.formulas.swizzles import CustomSwizzle


def _tried(t: Any) -> dict[str, Any]:
    return {"name": t.name, "proposer": t.proposer, "status": t.status, "detail": t.detail, "predicted_l2_hit_rate": t.predicted,
            "speedup": t.speedup, "expected": t.note, "body": (t.formula.source or t.formula.body) if isinstance(t.formula, CustomSwizzle) else None}


def searches_json(result: RewriteResult) -> list[dict[str, Any]]:
    """Every kernel's candidates and their fate, as the JSON outputs hold them."""
    return [{"kernel": s.kernel, "history": [_tried(t) for t in s.history]} for s in result.searches]


def search_report_json(result: RewriteResult, meta: dict[str, Any]) -> str:
    doc = json.loads(report_json(list(result.bench), meta))
    doc["searches"] = searches_json(result)
    doc["llm"] = [{"kernel": t.kernel, "exchanges": [_exchange(e) for e in t.exchanges]} for t in result.transcripts]
    return clean.dumps(doc)


def _exchange(exchange: Any) -> dict[str, Any]:
    record = asdict(exchange)
    record["messages"] = list(record["messages"])
    return record


def search_report_markdown(result: RewriteResult, meta: dict[str, Any]) -> str:
    lines = [report_markdown(list(result.bench), meta)] if result.bench else [
        f"# swzc report: {meta.get('file', '')} (proposer {meta.get('proposer', 'builtin')}; not benchmarked)", ""]
    for s in result.searches:
        lines += [f"## Candidates for {s.kernel}", "", "| # | candidate | from | outcome | predicted L2 % | speedup | detail |",
                  "|---:|---|---|---|---:|---:|---|"]
        for n, t in enumerate(s.history, 1):
            predicted = f"{t.predicted:.1f}" if t.predicted is not None else "–"
            speedup = f"{t.speedup:.3f}" if t.speedup is not None else "–"
            detail = clean.one_line(t.detail).replace("|", "\\|")
            lines.append(f"| {n} | {t.name} | {t.proposer} | {t.status} | {predicted} | {speedup} | {detail} |")
        lines.append("")
    for t in result.transcripts:
        lines += [f"## LLM exchanges for {t.kernel}", ""]
        for n, e in enumerate(t.exchanges, 1):
            tokens = f"{e.prompt_tokens or 0} + {e.completion_tokens or 0} tokens" if e.prompt_tokens or e.completion_tokens else "tokens not reported"
            lines.append(f"{n}. {e.mode}, {e.tries} try(ies), {e.seconds:.1f} s, {tokens}: {clean.one_line(e.verdict or e.error or 'no verdict')}")
            if e.reply:  # split at line ends only: a separator the reply holds is shown, not obeyed
                block = clean.fenced("cpp", str(e.reply.get("body", "")).rstrip("\n"))
                lines += ["", *(f"   {line}" for line in block.split("\n")), ""]
        lines.append("")
    return clean.text("\n".join(lines))


def report_page(file: str, result: RewriteResult, options: Options) -> str:
    """The benchmark report as a page: per measured kernel, the picture of its order (the accepted one, else
    the first measured) beside the model's predictions and the measured table."""
    from swzc.report import picture

    ctx, analysis = analyze_file(file, options.bindings, options.context, options.facts)
    formulas = {t.name: t.formula for s in result.searches for t in s.history if t.formula is not None}
    sections = []
    for bench in result.bench:
        shown = bench.chosen or next((a.candidate for a in bench.attempts if a.speedup is not None), None)
        try:
            if shown is None or shown not in formulas:
                raise SwzcError("no measured order to draw")
            drawn = picture.kernel_picture(ctx, analysis, options.hw, options.bindings, bench.kernel, formulas[shown])  # type: ignore[arg-type]
            image = picture.render(drawn.picture, "png")
        except SwzcError as exc:
            measured = "\n".join(picture.measured_html(bench)) if bench.by_size else ""
            sections.append(f"<section><h1>{html.escape(bench.kernel)}</h1><p>not drawn: {html.escape(exc.message)}</p>"
                            f"{measured}</section>")
            continue
        predictions = drawn.ranking.predictions if drawn.ranking is not None else ()
        sections.append(picture.html_section(image, "png", drawn.picture.title, predictions,
                                             [p.name for p in drawn.picture.panels], bench, drawn.floor))
    return picture.html_report(f"swzc benchmark report: {result.path}", sections)
