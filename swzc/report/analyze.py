"""What `swzc analyze` reports: per kernel, what the analysis found and what the pass would do, as text or as
one JSON document (--json).

One module per command's outputs (see swzc.report.rewrite): the records here are computed once, from the
analysis, the L2 model's ranking and the block-swizzle pass's proposal, and both emitters read them, so the
text and the JSON cannot disagree.  Nothing is rewritten: `analyzed` asks the pass what it would do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from swzc.analysis.context import FileContext
from swzc.analysis.records import BlockUse, FileAnalysis, KernelInfo
from swzc.core import clean
from swzc.core.errors import ExitCode
from swzc.frontend.evaluate import Value
from swzc.frontend.source import SyntaxIssue
from swzc.model.rank import Ranking
from swzc.model.residency import Residency
from swzc.passes import block_swizzle
from swzc.pipeline.driver import rank_kernels
from swzc.model.floor import Floor, fast_memory
from swzc.report.shared import candidates_json, floor_json, product_text, sweep_json, sweep_lines, syntax_json, syntax_lines
from swzc.target.hw import HardwareModel


@dataclass(frozen=True)
class AnalyzedKernel:
    """One kernel: the analysis's record, its block-index reads (its helpers' too), the L2 model's ranking (a
    reason where it cannot rank, None where the kernel is not ranked at all) and the pass's verdict."""

    kernel: KernelInfo
    reads: tuple[BlockUse, ...]
    ranking: Ranking | str | None
    verdict: block_swizzle.Proposal | block_swizzle.Decision

    @property
    def proposed(self) -> bool:
        return isinstance(self.verdict, block_swizzle.Proposal)

    @property
    def status(self) -> str:
        """"candidate" (would be rewritten), or the pass's "refused", "declined", "unranked", "untouched"."""
        return "candidate" if isinstance(self.verdict, block_swizzle.Proposal) else self.verdict.status

    @property
    def reason(self) -> str:
        return "" if isinstance(self.verdict, block_swizzle.Proposal) else self.verdict.reason

    @property
    def rules(self) -> tuple[str, ...]:
        """The hazard rules that refuse it (swzc.analysis.records.HAZARDS)."""
        return () if isinstance(self.verdict, block_swizzle.Proposal) else self.verdict.rules

    @property
    def chosen(self) -> str | None:
        return self.verdict.spec.name if isinstance(self.verdict, block_swizzle.Proposal) else None

    @property
    def chosen_by(self) -> str:
        return self.verdict.note if isinstance(self.verdict, block_swizzle.Proposal) else ""

    @property
    def candidates(self) -> tuple[tuple[str, float, float], ...]:
        """The model's (name, predicted L2 hit %, predicted DRAM bytes), best first."""
        if not isinstance(self.ranking, Ranking):
            return ()
        return tuple((p.candidate, p.l2_hit_rate, p.dram_bytes) for p in self.ranking.predictions)

    @property
    def floor(self) -> Floor | None:
        """The DRAM traffic no order goes below (swzc.model.floor), where the model ranked the kernel."""
        return self.ranking.floor if isinstance(self.ranking, Ranking) else None

    @property
    def unranked_because(self) -> str:
        """Why the model could not rank it ("" where it ranked it, or was not asked)."""
        return self.ranking if isinstance(self.ranking, str) else ""

    @property
    def residency(self) -> Residency | None:
        return self.ranking.residency if isinstance(self.ranking, Ranking) and self.ranking.residency else None

    @property
    def staged_reads(self) -> bool | None:
        """Reads copied to shared memory behind a barrier, pass after pass: what the model's coalescer term
        needs (None where the model did not rank the kernel)."""
        return self.ranking.footprint.staged if isinstance(self.ranking, Ranking) else None


@dataclass(frozen=True)
class Analyzed:
    """A file's kernels as `swzc analyze` reports them."""

    path: str
    dialect: str
    hw: HardwareModel
    kernels: tuple[AnalyzedKernel, ...]
    syntax_errors: tuple[SyntaxIssue, ...]
    notes: tuple[str, ...]  # the build context's, then the analysis's

    @property
    def exit_code(self) -> ExitCode:
        """As `rewrite` would end: DECLINED when kernels read the block index and none would be rewritten."""
        statuses = [k.status for k in self.kernels]
        if any(s in ("refused", "declined", "unranked") for s in statuses) and "candidate" not in statuses:
            return ExitCode.DECLINED
        return ExitCode.OK


def analyzed(ctx: FileContext, analysis: FileAnalysis, hw: HardwareModel, bindings: Mapping[str, Value],
             compiler: bool, flags: tuple[str, ...], notes: tuple[str, ...]) -> Analyzed:
    """Rank every kernel the pass could swizzle and ask the pass what it would do with each.  `compiler`: the
    model's blocks resident at once come from compiling the file with `flags` (never running it)."""
    ranked = rank_kernels(ctx, analysis, hw, bindings, compiler, flags)
    kernels = []
    for index, k in enumerate(analysis.kernels):
        ranking = ranked.get(index)
        reads = (*k.uses, *(u for h in k.helpers for u in analysis.helpers[h].uses))
        kernels.append(AnalyzedKernel(k, reads, ranking, block_swizzle.propose(analysis, index, hw, None, ranking)))
    return Analyzed(analysis.path, analysis.dialect, hw, tuple(kernels), ctx.src.errors, notes)


def render_text(report: Analyzed) -> str:
    """Per kernel: its status, grid shape, block-index reads, launches, hazards, residency and the model's table."""
    hw = report.hw
    lines = [f"{report.path} ({report.dialect}, hw {hw.name}): {len(report.kernels)} kernel(s)"]
    for r in report.kernels:
        k = r.kernel
        status = f"would rewrite with {r.chosen}" if r.proposed else f"{r.status}: {r.reason}"
        lines.append(f"\n  kernel {k.name} (line {k.line}): {status}")
        adapter = _adapter(r)
        if adapter:
            lines.append(f"    grid shape: {adapter}" + (f", decoded as blockIdx.x / {k.decode.divisor} (lines "
                                                           f"{', '.join(map(str, k.decode.lines))})" if k.decode is not None else ""))
        for u in r.reads:
            lines.append(f"    reads {u.text} at line {u.line}" + (f" (in helper {u.function})" if u.function != k.name else ""))
        for la in k.launches:
            grid = "x".join(map(str, la.grid)) if la.grid else "unknown"
            extra = f", tile columns {la.divisor}" if la.divisor is not None else ""
            lines.append(f"    launched at line {la.line} via {la.api}: grid {la.grid_text} = {grid}{extra}")
        if not k.launches:
            lines.append("    no launch in this file")
        for h in k.hazards:
            lines.append(f"    hazard: {h.reason}")
        res = r.residency
        if res is not None:
            lines.append(f"    resident: {res.blocks_per_cu} blocks per SM or CU, bound by {res.limit} ({res.source})")
        if r.staged_reads:
            lines.append("    reads staged: a loop copies them to shared memory behind a barrier; "
                         + ("the model counts the reads the L2 request coalescer merges" if hw.l2_request_coalescer
                            else f"{hw.name} has no L2 request coalescer in its model"))
        lines += sweep_lines(r.ranking.sweep if isinstance(r.ranking, Ranking) else None)
        if r.candidates:
            size = f" (at the largest size, {r.ranking.sweep.points[-1].size})" if isinstance(r.ranking, Ranking) and r.ranking.sweep else ""
            floor = r.floor
            product = floor.product if floor is not None else None
            lines.append(f"    L2 model{size}:  candidate            L2 hits   DRAM bytes   x floor" + ("   x bound" if product else ""))
            for name, hit, dram in r.candidates:
                mark = "  <- chosen" if name == r.chosen else ""
                times = floor.times(dram) if floor is not None else None
                bound = f"{dram / product.bytes:9.2f}x" if product is not None else ""
                lines.append(f"               {name:<20} {hit:6.1f} % {dram / 1e6:10,.0f} MB "
                             + (f"{times:8.2f}x" if times is not None else f"{'–':>9}") + bound + mark)
            if floor is not None:
                lines.append(f"    DRAM floor: {floor.bytes / 1e6:,.0f} MB, each sector the grid reads or writes moved once"
                             + ("" if floor.exact else " (at most: some access counted by its span)"))
            if product is not None:
                lines.append(f"    I/O bound: {product.bytes / 1e6:,.0f} MB, the least any order of a {product_text(product)} "
                             f"moves with {fast_memory(hw) / 1e6:,.0f} MB of L2, registers and shared memory")
        elif r.unranked_because:
            lines.append(f"    L2 model: not ranked: {r.unranked_because}")
        for n in k.notes:
            lines.append(f"    note: {n}")
    text = "\n".join(lines)
    return "\n".join([text, *syntax_lines(report.path, report.syntax_errors), *(f"  note: {n}" for n in report.notes)])


def render_json(report: Analyzed) -> str:
    """The same as one JSON document, every kernel with all its records."""
    return clean.dumps({"file": report.path, "dialect": report.dialect, "hw": report.hw.name,
                        "kernels": [_kernel_json(r) for r in report.kernels],
                        "syntax_errors": syntax_json(report.syntax_errors), "notes": list(report.notes)})


def _adapter(r: AnalyzedKernel) -> Any:
    """The kernel's grid shape, where it reads the block index."""
    return r.kernel.adapter if r.kernel.reads_block_index else None


def _kernel_json(r: AnalyzedKernel) -> dict[str, Any]:
    k = r.kernel
    grids = [launch.grid for launch in k.launches if launch.grid is not None]
    res = r.residency
    return {
        "name": k.name,
        "line": k.line,
        "status": r.status,
        "reason": r.reason,
        "rules": list(r.rules),
        "grid": list(grids[0]) if grids else None,
        "adapter": _adapter(r),
        "chosen": r.chosen,
        "chosen_by": r.chosen_by,
        "candidates": candidates_json(r.candidates, r.floor),
        "dram_floor": floor_json(r.floor),
        "model": r.unranked_because,
        "sizes": sweep_json(r.ranking.sweep if isinstance(r.ranking, Ranking) else None),
        "residency": None if res is None else {
            "blocks_per_cu": res.blocks_per_cu, "limit": res.limit, "source": res.source,
            "registers_per_thread": res.registers_per_thread, "shared_bytes_per_block": res.shared_bytes_per_block},
        "staged_reads": r.staged_reads,
        "block_index_reads": [{"line": u.line, "text": u.text, "axis": u.axis, "in": u.function} for u in r.reads],
        "helpers": list(k.helpers),
        "launches": [{"line": la.line, "api": la.api, "grid": la.grid_text, "grid_value": list(la.grid) if la.grid else None,
                      "block": la.block_text, "block_value": list(la.block) if la.block else None,
                      "decode_divisor_value": la.divisor} for la in k.launches],
        "decode": None if k.decode is None else {"divisor": k.decode.divisor, "lines": list(k.decode.lines)},
        "hazards": [{"line": h.line, "reason": h.reason, "rule": h.rule, "id": h.rule_id} for h in k.hazards],
        "notes": list(k.notes),
    }
