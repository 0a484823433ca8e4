"""What every pass shares: the proposal it carries out, the decision that leaves a kernel alone, the `Pass`
protocol the registry (swzc.passes.PASSES) holds, and the fresh names its edits declare."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from swzc.analysis.records import FileAnalysis, KernelInfo, Shape
from swzc.formulas.swizzles import SwizzleSpec
from swzc.rewrite.edits import Edit


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


@dataclass(frozen=True)
class Names:
    """The names a file's edits declare, each free in the file: the swizzled block index and the swizzled tile."""

    block: str
    tile: str


class Pass(Protocol):
    """A registered pass: the kernels it rewrites, why it cannot rewrite one, and its edits for one kernel.  A pass
    is a pure function of the analysis and the proposal: it returns edits, never writes or prints."""

    name: str

    def applies(self, kernel: KernelInfo) -> bool: ...

    def refusal(self, kernel: KernelInfo, index: int) -> Decision | None: ...

    def edits(self, analysis: FileAnalysis, kernel: KernelInfo, proposal: Proposal, names: Names
              ) -> tuple[list[Edit], dict[str, list[Edit]]]:
        """The kernel's own edits, and the edits of each same-file helper it rewrites, by the helper's name."""


def variable_name(analysis: FileAnalysis, base: str = "swzc_block") -> str:
    """`base`, or `base_1`, `base_2` … where the file already uses that name."""
    name, n = base, 0
    while name in analysis.identifiers:
        n += 1
        name = f"{base}_{n}"
    return name
