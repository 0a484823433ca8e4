"""Byte-range edits against the original source, applied in one place."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from swzc.core.errors import ExitCode, SwzcError
from swzc.frontend.source import SourceFile, load_bytes


@dataclass(frozen=True, order=True)
class Edit:
    """Replace ``data[start:end]`` with ``text``; an insertion has start == end."""

    start: int
    end: int
    text: bytes

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(f"bad edit range {self.start}..{self.end}")

    @classmethod
    def insert(cls, at: int, text: str) -> Edit:
        return cls(at, at, text.encode("utf-8", "surrogateescape"))

    @classmethod
    def replace(cls, start: int, end: int, text: str) -> Edit:
        return cls(start, end, text.encode("utf-8", "surrogateescape"))


def overlapping(edits: list[Edit]) -> tuple[Edit, Edit] | None:
    """Two edits that touch the same bytes (insertions at one point count as overlapping), or None."""
    ordered = sorted(edits)
    for before, after in zip(ordered, ordered[1:]):
        if after.start < before.end or (after.start == before.start and before.start == before.end == after.end):
            return before, after
    return None


def apply_edits(data: bytes, edits: list[Edit]) -> bytes:
    """Apply non-overlapping edits in one pass; an overlap is a bug in a pass and is refused."""
    clash = overlapping(edits)
    if clash is not None:
        raise SwzcError(f"internal: overlapping edits {clash[0]} and {clash[1]}", ExitCode.CHECK_FAILED)
    if any(edit.end > len(data) for edit in edits):
        raise SwzcError("internal: an edit reaches past the end of the file", ExitCode.CHECK_FAILED)
    pieces = []
    at = 0
    for edit in sorted(edits):
        pieces += [data[at : edit.start], edit.text]
        at = edit.end
    pieces.append(data[at:])
    return b"".join(pieces)


def moved(edits: list[Edit], at: int, before: bool = True) -> int:
    """Where original byte offset `at` lands in the edited file.  An insertion exactly at `at` moves it
    when `before` (text inserted there comes before that byte), not when `at` is a range's exclusive end."""
    return _Shift(edits)(at, before)


class _Shift:
    """`moved` for many offsets against one list of edits: the edits sorted by end, with running sums of how
    much each lengthens the file."""

    def __init__(self, edits: list[Edit]) -> None:
        self.edits = sorted(edits, key=lambda e: e.end)
        self.ends = [e.end for e in self.edits]
        self.before = [0]
        for e in self.edits:
            self.before.append(self.before[-1] + len(e.text) - (e.end - e.start))

    def __call__(self, at: int, before: bool = True) -> int:
        first = bisect.bisect_left(self.ends, at)  # edits ending before `at` all count
        shift = self.before[first]
        for e in self.edits[first:bisect.bisect_right(self.ends, at)]:  # those ending at it: see `moved`
            if before or e.start < e.end:
                shift += len(e.text) - (e.end - e.start)
        return at + shift


def rewrite(src: SourceFile, edits: list[Edit]) -> SourceFile:
    """The edited file, re-parsed.  It may keep the original's syntax errors, moved by the edits, but must
    not have any other: a new one means an edit broke the file."""
    data = apply_edits(src.data, edits)
    shift = _Shift(edits)
    # not checked for depth: the original was, and only its bytes and syntax errors are read from this one
    new = load_bytes(src.path, data, tuple((shift(a), shift(b, before=False)) for a, b in src.blanked), max_nesting=None)
    carried = set()
    for e in src.errors:  # a zero-width issue at an insertion point may land on either side of it
        for start in {shift(e.start), shift(e.start, before=False)}:
            carried.add((start, start + shift(e.end, before=False) - shift(e.start, before=False), e.what))
    fresh = [e for e in new.errors if (e.start, e.end, e.what) not in carried]
    if fresh:
        raise SwzcError(
            f"{src.path}: the rewrite introduced a syntax error at output line {fresh[0].line}; nothing written",
            ExitCode.CHECK_FAILED,
        )
    return new
