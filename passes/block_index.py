"""The block-index pass: the kernel declares the swizzled index once, before the first statement that reads
the block index, and every read is rewritten (``blockIdx.x`` -> ``swzc_block.x``).  Same-file helpers that read
the block index call the swizzle function themselves, provided every kernel reaching them is rewritten the
same way (swzc.passes.block_swizzle.settle)."""

from __future__ import annotations

from swzc.analysis.records import FileAnalysis, KernelInfo
from swzc.formulas.adapters import Adapter
from swzc.passes.base import Decision, Names, Proposal
from swzc.rewrite.edits import Edit


class BlockIndexPass:
    name = "block_index"

    def applies(self, kernel: KernelInfo) -> bool:
        return kernel.tile_loop is None

    def refusal(self, kernel: KernelInfo, index: int) -> Decision | None:
        """Why the swizzled index cannot be declared where the kernel needs it; None when it can."""
        if kernel.decode is not None and kernel.decode.splice_text is None:
            return Decision(index, "refused", f"cannot declare the swizzle before the first block-index read: the tile "
                            f"count {kernel.decode.divisor!r} is not known there")
        if kernel.decode is not None and kernel.helpers:
            return Decision(index, "refused", f"helper {kernel.helpers[0]} reads the block index, and the tile decode's "
                            f"divisor {kernel.decode.divisor!r} is not visible inside it")
        return None

    def edits(self, analysis: FileAnalysis, kernel: KernelInfo, proposal: Proposal, names: Names
              ) -> tuple[list[Edit], dict[str, list[Edit]]]:
        """The kernel's own edits, and each helper's by name (a helper reached by several kernels is rewritten
        once: the runner keeps the first)."""
        fn = proposal.spec.function_name(proposal.adapter)
        decode_text = kernel.decode.splice_text if kernel.decode is not None else None
        call = Adapter(proposal.adapter).kernel_call(fn, kernel.spelling == "hip", decode_text)
        edits: list[Edit] = []
        if kernel.uses:
            assert kernel.insert_at is not None
            decl = f"const uint3 {names.block} = {call};"
            if kernel.inline:
                edits.append(Edit.insert(kernel.insert_at, f"{decl} "))
            else:
                edits.append(Edit.insert(kernel.insert_at, f"{kernel.indent}{decl}  // swzc: {proposal.spec.name}\n"))
            for use in kernel.uses:
                edits.append(Edit.replace(use.start, use.end, f"{names.block}.{use.axis}" if use.axis else names.block))
        helpers = {name: [Edit.replace(use.start, use.end, f"{call}.{use.axis}" if use.axis else call)
                          for use in analysis.helpers[name].uses]
                   for name in kernel.helpers}
        return edits, helpers
