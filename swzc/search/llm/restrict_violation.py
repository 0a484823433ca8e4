"""What the checks of the safe subset (swzc.search.llm.restrict) report: a `Violation` for each way an LLM's
swizzle body leaves the subset, said by the body line it is on so that the LLM can fix it.  The text rules
(restrict_text), the parse (restrict) and the walk (restrict_tree) all say theirs this way; the names with a
leading underscore are for those modules only.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

MAX_REPORTED = 20  # violations kept: enough to fix a reply, short enough for a prompt


@dataclass(frozen=True)
class Violation:
    """One way the body leaves the subset, said so that the LLM can fix it."""

    line: int  # 1-based line within the body
    message: str  # "line 3: asm is not allowed (only integer arithmetic)"


def _violation(line: int, what: str) -> Violation:
    return Violation(line, f"line {line}: {what}")


def _line(node: Node, lines: int) -> int:
    """The body line a node starts on (row 0 is the wrapper's head), kept within the body."""
    return min(max(node.start_point.row, 1), lines)
