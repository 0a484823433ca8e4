"""The block swizzle: which order each kernel gets, or why it gets none, before any pass runs.

`refusal` says why a kernel cannot be swizzled at all (its hazards, or what its pass cannot do: see the
registry in swzc.passes); `propose` takes the requested order or the L2 model's pick; `settle` keeps a
proposal only where every helper it rewrites is reached by kernels rewritten the same way.  The edits
themselves come from the registered passes (swzc.passes.run).

Choice without ``--swizzle``: the L2 model's best candidate (swzc.model.rank), or a decline when none cuts the
predicted DRAM traffic by the margin.  Where the model cannot rank (the grid or the footprint is not
known), nothing is rewritten blind: the kernel is left ``unranked``, with the candidates of the family
that are proven for it and what would settle the choice (a GPU run measures the family's spread).
"""

from __future__ import annotations

from collections.abc import Mapping

from swzc.analysis.records import READS_BLOCK_INDEX, FileAnalysis, KernelInfo
from swzc.formulas.swizzles import Step, SwizzleSpec
from swzc.model.rank import NO_DATA, Ranking
from swzc.passes import for_kernel
from swzc.passes.base import Decision, Proposal
from swzc.target.hw import HardwareModel


def family(kernel: KernelInfo, hw: HardwareModel) -> list[SwizzleSpec]:
    """The built-in family spread over its kinds, for a kernel the model cannot rank: a GPU run measures
    them in this order (as many as it has iterations), so a few tries already cover grouping of several
    heights, a space-filling order and the transposed raster.  On a chiplet GPU each goes after the chiplet
    remap; a 1D grid with no tiles gets the chiplet remap alone, or nothing on a monolithic GPU."""
    chiplet = (Step("xcd", hw.chiplets),) if hw.chiplets > 1 else ()
    if kernel.adapter == "linear":  # a 1D grid, or a tile loop that does not decode its tile into rows and columns
        return [SwizzleSpec(chiplet)] if chiplet else []
    orders = [(Step("grouped", 8),), (Step("hilbert", 8),), (Step("colmajor"),), (Step("grouped", 32),),
              (Step("grouped", 4),), (Step("hilbert", 4),), (Step("grouped", 16),), (Step("grouped", 64),)]
    return [SwizzleSpec((*chiplet, *order)) for order in orders]


def refusal(analysis: FileAnalysis, index: int) -> Decision | None:
    """Why a kernel cannot be swizzled at all, whatever the swizzle; None when it can."""
    kernel = analysis.kernels[index]
    if kernel.hazards and (kernel.reads_block_index or any(h.rule in READS_BLOCK_INDEX for h in kernel.hazards)):
        return Decision(index, "refused", "; ".join(h.reason for h in kernel.hazards),
                        tuple(dict.fromkeys(h.rule_id for h in kernel.hazards if h.rule_id)))
    if kernel.swizzled_by and (not kernel.uses or kernel.tile_loop is not None):
        return Decision(index, "untouched", f"already swizzled by swzc ({kernel.swizzled_by})")
    if not kernel.reads_block_index:
        return Decision(index, "untouched", "does not read the block index")
    if kernel.ignored:
        return Decision(index, "untouched", f"marked `swzc: ignore` at line {kernel.ignored}: its author wants no swizzle")
    return for_kernel(kernel).refusal(kernel, index)


def propose(analysis: FileAnalysis, index: int, hw: HardwareModel, requested: SwizzleSpec | None,
            ranked: Ranking | str | None = None) -> Proposal | Decision:
    """A swizzle for the kernel: the requested one, else the L2 model's pick; never a blind default."""
    refused = refusal(analysis, index)
    if refused is not None:
        return refused
    kernel = analysis.kernels[index]
    note = ""
    if requested is not None:
        spec = requested
    elif not family(kernel, hw):
        what = (f"tile loop over {kernel.tile_loop.var} with no decode" if kernel.tile_loop is not None
                else "1D grid with no tile decode")
        return Decision(index, "declined", f"{what}: on {hw.name} (one L2 domain) there are no tiles to regroup")
    elif isinstance(ranked, Ranking):
        if ranked.chosen is None:
            return Decision(index, "declined", ranked.reason)
        spec, note = ranked.chosen, ranked.reason
    elif isinstance(ranked, str) and ranked.startswith(NO_DATA):  # nothing read: no order can share anything
        return Decision(index, "declined", ranked)
    else:
        return Decision(index, "unranked", ranked or 'the L2 model has no launch of it to rank')
    if spec.is_identity:
        return Decision(index, "declined", "identity: nothing to change")
    if spec.needs_tiles and kernel.adapter == "linear":
        what = (f"the tile loop does not decode {kernel.tile_loop.var} into tile rows and columns" if kernel.tile_loop is not None
                else "this kernel reads only blockIdx.x and does not decode it into tiles")
        return Decision(index, "declined", f"{spec.name} needs a tile grid; {what}")
    if kernel.tile_loop is not None and not kernel.tile_loop.reads:
        return Decision(index, "declined", f"the tile loop's body does not read {kernel.tile_loop.var}: nothing to permute")
    shapes = kernel.shapes
    if shapes is None and isinstance(ranked, Ranking) and ranked.sweep is not None and requested is None:
        shapes = ranked.sweep.shapes  # proven on every grid swept (and, gated, at the gate: swzc.formulas.prove)
    return Proposal(index, spec, kernel.adapter, shapes, note)


def settle(analysis: FileAnalysis, proposals: Mapping[int, Proposal]) -> tuple[dict[int, Proposal], list[Decision]]:
    """Keep a proposal only if every helper it rewrites is reached by kernels rewritten the same way."""
    kept = dict(proposals)
    refused: list[Decision] = []
    index_of: dict[str, list[int]] = {}
    for i, k in enumerate(analysis.kernels):
        index_of.setdefault(k.name, []).append(i)
    changed = True
    while changed:
        changed = False
        for helper, callers in analysis.callers.items():
            indices = sorted(i for name in set(callers) for i in index_of.get(name, ()))
            ways = {(kept[i].spec, kept[i].adapter) if i in kept else None for i in indices}
            if len(ways) <= 1 and None not in ways:
                continue
            for i in indices:
                if i in kept:
                    other = next(analysis.kernels[j].name for j in indices if j != i and (j not in kept or (kept[j].spec, kept[j].adapter) != (kept[i].spec, kept[i].adapter)))
                    del kept[i]
                    refused.append(Decision(i, "refused", f"shares helper {helper} (which reads the block index) "
                                            f"with kernel {other}, which is not rewritten the same way"))
                    changed = True
    return kept, refused
