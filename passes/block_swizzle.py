"""The block-swizzle pass: give each kernel a permutation of its block index, spliced in at the source.

For a kernel it can rewrite, the pass declares the swizzled index once, before the first statement that
reads the block index, and rewrites every read (``blockIdx.x`` -> ``swzc_block.x``).  Same-file helpers
that read the block index call the swizzle function themselves, provided every kernel reaching them is
rewritten the same way.  The swizzle functions go in once, before the first rewritten function.

A persistent kernel, whose blocks walk a tile index ``for (t = blockIdx.x; t < T; t += gridDim.x)``, gets
its swizzle inside that loop instead (swzc.analysis.tileloop): the body declares
``const int swzc_tile = swzc_<spec>_1d(t, 0u, 0u, (unsigned)(T), (unsigned)(n)).x;`` and reads
``swzc_tile`` where it read ``t``.  Its blocks are not permuted.

Choice without ``--swizzle``: the L2 model's best candidate (swzc.model.rank), or a decline when none cuts the
predicted DRAM traffic by the margin.  Where the model cannot rank (the grid or the footprint is not
known), nothing is rewritten blind: the kernel is left ``unranked``, with the candidates of the family
that are proven for it and what would settle the choice (a GPU run measures the family's spread).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from swzc.analysis import tileloop
from swzc.analysis.records import READS_BLOCK_INDEX, FileAnalysis, KernelInfo, Shape
from swzc.rewrite.edits import Edit
from swzc.target.hw import HardwareModel
from swzc.model.rank import NO_DATA, Ranking
from swzc.formulas.swizzles import Step, SwizzleSpec, cxx_library, parse_spec

LIBRARY_HEADER = ("// swzc: block swizzles; each is a permutation (of the blocks, or of the tiles a tile loop walks), "
                  "proven before it was spliced in.\n")


@dataclass(frozen=True)
class Proposal:
    kernel: int  # index into FileAnalysis.kernels
    spec: SwizzleSpec
    adapter: str
    shapes: tuple[Shape, ...] | None  # None: the file does not fix the grid
    note: str = ""  # how it was chosen (the L2 model's numbers, or the measured result)


@dataclass(frozen=True)
class Decision:
    kernel: int
    status: str  # "refused", "declined", "unranked" (safe, but nothing chose an order) or "untouched"
    reason: str
    rules: tuple[str, ...] = ()  # the ids of the hazard rules that refuse the kernel (swzc.analysis.records.HAZARDS)


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
    loop = kernel.tile_loop
    if loop is not None:
        where = f"at the top of the tile loop's body (line {loop.line})"
        if kernel.helpers:
            return Decision(index, "refused", f"helper {kernel.helpers[0]} reads the block index inside a kernel whose tiles "
                            "the swizzle would permute: swzc cannot tell whether it follows the tile order")
        if loop.count_splice is None:
            return Decision(index, "refused", f"cannot declare the swizzled tile {where}: the tile count {loop.count!r} "
                            "cannot be written there")
        if loop.decode is not None and loop.decode.splice_text is None:
            return Decision(index, "refused", f"cannot declare the swizzled tile {where}: the decode divisor "
                            f"{loop.decode.divisor!r} cannot be written there")
        return None
    if kernel.decode is not None and kernel.decode.splice_text is None:
        return Decision(index, "refused", f"cannot declare the swizzle before the first block-index read: the tile "
                        f"count {kernel.decode.divisor!r} is not known there")
    if kernel.decode is not None and kernel.helpers:
        return Decision(index, "refused", f"helper {kernel.helpers[0]} reads the block index, and the tile decode's "
                        f"divisor {kernel.decode.divisor!r} is not visible inside it")
    return None


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
        spec, note = parse_spec(ranked.chosen), ranked.reason
    elif isinstance(ranked, str) and ranked.startswith(NO_DATA):  # nothing read: no order can share anything
        return Decision(index, "declined", ranked)
    else:
        return Decision(index, "unranked", f"not ranked: {ranked or 'the L2 model has no launch of it to rank'}")
    if spec.is_identity:
        return Decision(index, "declined", "identity: nothing to change")
    if spec.needs_tiles and kernel.adapter == "linear":
        what = (f"the tile loop does not decode {kernel.tile_loop.var} into tile rows and columns" if kernel.tile_loop is not None
                else "this kernel reads only blockIdx.x and does not decode it into tiles")
        return Decision(index, "declined", f"{spec.name} needs a tile grid; {what}")
    if kernel.tile_loop is not None and not kernel.tile_loop.reads:
        return Decision(index, "declined", f"the tile loop's body does not read {kernel.tile_loop.var}: nothing to permute")
    return Proposal(index, spec, kernel.adapter, kernel.shapes, note)


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


def _call_args(kernel: KernelInfo, adapter: str, decode_text: str | None) -> str:
    if kernel.spelling == "hip":
        blocks, grid = "hipBlockIdx_x, hipBlockIdx_y, hipBlockIdx_z", "hipGridDim_x"
        grid_y = "hipGridDim_y"
    else:
        blocks, grid, grid_y = "blockIdx.x, blockIdx.y, blockIdx.z", "gridDim.x", "gridDim.y"
    if adapter == "2d":
        return f"{blocks}, {grid}, {grid_y}"
    if adapter == "1d":
        return f"{blocks}, {grid}, (unsigned)({decode_text})"
    return f"{blocks}, {grid}"


def variable_name(analysis: FileAnalysis, base: str = "swzc_block") -> str:
    """`base`, or `base_1`, `base_2` … where the file already uses that name."""
    name, n = base, 0
    while name in analysis.identifiers:
        n += 1
        name = f"{base}_{n}"
    return name


def _tile_loop_edits(kernel: KernelInfo, proposal: Proposal, var: str) -> list[Edit]:
    """Declare the swizzled tile at the top of the loop body and read it wherever the body read the loop variable."""
    loop = kernel.tile_loop
    assert loop is not None and loop.count_splice is not None
    args = f"{loop.var}, 0u, 0u, (unsigned)({loop.count_splice})"
    if proposal.adapter == "1d":
        assert loop.decode is not None
        args += f", (unsigned)({loop.decode.splice_text})"
    decl = f"const {loop.index_type} {var} = {proposal.spec.function_name(proposal.adapter)}({args}).x;"
    edits = [Edit.replace(start, end, var) for start, end in loop.reads]
    if not loop.braced:
        edits += [Edit.insert(loop.insert_at, f"{{ {decl} "), Edit.insert(loop.body_end, " }")]
    elif loop.inline:
        edits.append(Edit.insert(loop.insert_at, f"{decl} "))
    else:
        edits.append(Edit.insert(loop.insert_at, f"{loop.indent}{decl}  // swzc: {proposal.spec.name}\n"))
    return edits


def splice(analysis: FileAnalysis, accepted: Mapping[int, Proposal]) -> list[Edit]:
    """The edits for the accepted proposals (decisions already taken on the original tree); the last one
    inserts the swizzle functions they need (swzc.pipeline.driver reads a kernel's own fix that way)."""
    if not accepted:
        return []
    var = variable_name(analysis)
    tile_var = variable_name(analysis, tileloop.VARIABLE)
    edits: list[Edit] = []
    library_at: list[int] = []
    helpers_done: set[str] = set()
    for index, proposal in sorted(accepted.items()):
        kernel = analysis.kernels[index]
        fn = proposal.spec.function_name(proposal.adapter)
        decode_text = kernel.decode.splice_text if kernel.decode is not None else None
        call = f"{fn}({_call_args(kernel, proposal.adapter, decode_text)})"
        library_at.append(kernel.library_at)
        if kernel.tile_loop is not None:
            edits += _tile_loop_edits(kernel, proposal, tile_var)
            continue
        if kernel.uses:
            assert kernel.insert_at is not None
            decl = f"const uint3 {var} = {call};"
            if kernel.inline:
                edits.append(Edit.insert(kernel.insert_at, f"{decl} "))
            else:
                edits.append(Edit.insert(kernel.insert_at, f"{kernel.indent}{decl}  // swzc: {proposal.spec.name}\n"))
            for use in kernel.uses:
                edits.append(Edit.replace(use.start, use.end, f"{var}.{use.axis}" if use.axis else var))
        for name in kernel.helpers:
            if name in helpers_done:
                continue
            helpers_done.add(name)
            helper = analysis.helpers[name]
            library_at.append(helper.library_at)
            for use in helper.uses:
                edits.append(Edit.replace(use.start, use.end, f"{call}.{use.axis}" if use.axis else call))
    uses = [(p.spec, p.adapter) for p in accepted.values()]
    edits.append(Edit.insert(min(library_at), LIBRARY_HEADER + cxx_library(uses) + "\n"))
    if analysis.newline != "\n":
        edits = [Edit(e.start, e.end, e.text.replace(b"\n", analysis.newline.encode())) for e in edits]
    return edits
