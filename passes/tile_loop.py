"""The tile-loop pass: a persistent kernel, whose blocks walk a tile index
``for (t = blockIdx.x; t < T; t += gridDim.x)``, gets its swizzle inside that loop (found by
swzc.analysis.tileloop): the body declares ``const int swzc_tile = swzc_<spec>_1d(t, 0u, 0u, (unsigned)(T),
(unsigned)(n)).x;`` and reads ``swzc_tile`` where it read ``t``.  Its blocks are not permuted, its tiles are."""

from __future__ import annotations

from swzc.analysis.records import FileAnalysis, KernelInfo
from swzc.passes.base import Decision, Names, Proposal
from swzc.rewrite.edits import Edit


class TileLoopPass:
    name = "tile_loop"

    def applies(self, kernel: KernelInfo) -> bool:
        return kernel.tile_loop is not None

    def refusal(self, kernel: KernelInfo, index: int) -> Decision | None:
        """Why the swizzled tile cannot be declared at the top of the loop's body; None when it can."""
        loop = kernel.tile_loop
        assert loop is not None
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

    def edits(self, analysis: FileAnalysis, kernel: KernelInfo, proposal: Proposal, names: Names
              ) -> tuple[list[Edit], dict[str, list[Edit]]]:
        """Declare the swizzled tile at the top of the loop body and read it wherever the body read the loop
        variable; no helper is rewritten (a kernel with one is refused)."""
        loop = kernel.tile_loop
        assert loop is not None and loop.count_splice is not None
        var = names.tile
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
        return edits, {}
