"""Unified patches: built from the byte edits (or, for two whole files, with difflib), read back with
unidiff and checked against both files."""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import unidiff

from swzc.core import clean
from swzc.rewrite.edits import Edit
from swzc.core.errors import ExitCode, SwzcError

_NO_NEWLINE = "\\ No newline at end of file\n"
_MARKER = "\\"  # unidiff's line type of that line
CONTEXT = 3  # lines of context around a change, as `diff -U3` and git give

# git's C-style quoting of a path in a patch header (quote_c_style); git apply reads it back
_ESCAPES = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f", "\r": "\\r",
            '"': '\\"', "\\": "\\\\"}


def _work_tree(folder: str) -> str | None:
    """The root of the git work tree holding `folder`: the nearest folder upwards with a `.git`."""
    while True:
        if os.path.lexists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def header_path(path: str) -> tuple[str, str]:
    """The path the a/ and b/ headers carry, and a note when it is not the file's path.

    It is relative to the root of the git work tree that holds the file (git is not run: the root is the
    nearest folder upwards with a `.git`), else to the working folder; '/'-separated, without '..'.  A file
    outside both is named by its base name, and the note says so."""
    absolute = os.path.abspath(path)
    full = os.path.join(os.path.realpath(os.path.dirname(absolute)), os.path.basename(absolute))
    for base in (_work_tree(os.path.dirname(full)), os.path.realpath(os.getcwd())):
        if base is not None:
            relative = os.path.relpath(full, base)
            if relative != os.pardir and not relative.startswith(os.pardir + os.sep):
                return relative.replace(os.sep, "/"), ""
    name = os.path.basename(full)
    return name, f"{path} is outside the working folder and any git work tree; the patch calls it {name}"


def patch_path(path: str) -> str:
    """The path a/ and b/ headers carry (see header_path)."""
    return header_path(path)[0]


def _headers(path: str) -> str:
    name = patch_path(path)
    a, b = f"a/{name}", f"b/{name}"
    return f"--- {quoted(a)}\n+++ {quoted(b)}\n"


def quoted(name: str) -> str:
    """`name` as git shows a path: in quotes, escaped, when it holds a quote, a backslash, a control character
    or another character swzc.core.clean finds unsafe to show (a newline in a name cannot then start a line of its
    own, nor a bidi control reorder the header), else as it is.  An unsafe character is written as the octal
    escapes of its UTF-8 bytes, as git writes every byte past ASCII; git apply reads the name back exactly."""
    return _quote(name) if any(c in _ESCAPES or ord(c) < 0x20 for c in name) or not clean.is_clean(name) else name


def _quote(name: str) -> str:
    def spelled(c: str) -> str:
        if c in _ESCAPES:
            return _ESCAPES[c]
        if ord(c) < 0x20 or not clean.is_clean(c):
            return "".join(f"\\{b:03o}" for b in c.encode("utf-8", "surrogateescape"))
        return c

    return '"' + "".join(map(spelled, name)) + '"'


def _lines(data: bytes) -> list[str]:
    """Lines as diff tools see them: split at '\n' only (str.splitlines would also split at form feeds,
    lone '\r' and other separators that git does not treat as line ends)."""
    parts = data.decode("utf-8", "surrogateescape").split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    return lines + [parts[-1]] if parts[-1] else lines


def unified_patch(path: str, old: bytes, new: bytes) -> str:
    """A patch `git apply` accepts; the empty string when nothing changed."""
    if old == new:
        return ""
    out = [_headers(path)]
    for line in list(difflib.unified_diff(_lines(old), _lines(new), "a", "b"))[2:]:
        out.append(line)
        if not line.endswith("\n"):  # a last line without a newline, in either file
            out.append("\n" + _NO_NEWLINE)
    text = "".join(out)
    check_patch(text, old, new)
    return text


@dataclass(frozen=True)
class _Change:
    line: int  # 0-based index of the first old line it replaces
    old: list[str]  # the old lines it replaces
    new: list[str]  # the lines that take their place
    start: int  # old[start:end] are the replaced lines' bytes
    end: int


def _line_end(data: bytes, at: int) -> int:
    """The offset just past the line that holds offset `at` (past its newline, or the end of the data)."""
    found = data.find(b"\n", at)
    return len(data) if found < 0 else found + 1


def _size(lines: list[str]) -> int:
    return sum(len(line.encode("utf-8", "surrogateescape")) for line in lines)


def _changes(old: bytes, edits: list[Edit]) -> list[_Change]:
    """The changed lines of each run of edits that share lines, with the lines both sides have in common
    at either end left out (an insertion of whole lines is then a pure addition, as diff shows it)."""
    changes: list[_Change] = []
    line, counted = 0, 0  # `line` is the index of the line that starts at offset `counted`
    i = 0
    while i < len(edits):
        start = old.rfind(b"\n", 0, edits[i].start) + 1
        end = _line_end(old, edits[i].end)
        j = i + 1
        while j < len(edits) and (edits[j].start < end or end == len(old)):
            if edits[j].end >= end:  # (an edit inside the run's lines ends no later: no scan of a long line each time)
                end = _line_end(old, edits[j].end)
            j += 1
        pieces, at = [], start
        for edit in edits[i:j]:
            pieces += [old[at : edit.start], edit.text]
            at = edit.end
        pieces.append(old[at:end])
        before, after = _lines(old[start:end]), _lines(b"".join(pieces))
        same_head = 0
        while same_head < min(len(before), len(after)) and before[same_head] == after[same_head]:
            same_head += 1
        same_tail = 0
        while (same_tail < min(len(before), len(after)) - same_head
               and before[len(before) - 1 - same_tail] == after[len(after) - 1 - same_tail]):
            same_tail += 1
        line += old.count(b"\n", counted, start)
        counted = start
        removed, added = before[same_head : len(before) - same_tail], after[same_head : len(after) - same_tail]
        if removed or added:
            change = _Change(line + same_head, removed, added, start + _size(before[:same_head]),
                             end - _size(before[len(before) - same_tail :]))
            if changes and changes[-1].end == change.start:  # adjacent: one block, removals before additions
                last = changes.pop()
                change = _Change(last.line, last.old + change.old, last.new + change.new, last.start, change.end)
            changes.append(change)
        i = j
    return changes


def _range(start: int, length: int) -> str:
    """A hunk header's range, written as difflib and diff write it."""
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _hunk(old: bytes, group: list[_Change], shift: int, context: int) -> list[str]:
    """One hunk: the changes of `group` with `context` lines around them; `shift` is how many lines the
    changes before it added (less those they removed)."""
    first, last = group[0], group[-1]
    head = first.start
    for _ in range(context):
        if head == 0:
            break
        head = old.rfind(b"\n", 0, head - 1) + 1
    tail = last.end
    for _ in range(context):
        if tail == len(old):
            break
        tail = _line_end(old, tail)
    body = [" " + line for line in _lines(old[head : first.start])]
    old_start = first.line - len(body)
    old_len = new_len = len(body)
    for index, change in enumerate(group):
        if index:
            between = _lines(old[group[index - 1].end : change.start])
            body += [" " + line for line in between]
            old_len += len(between)
            new_len += len(between)
        body += ["-" + line for line in change.old] + ["+" + line for line in change.new]
        old_len += len(change.old)
        new_len += len(change.new)
    after = _lines(old[last.end : tail])
    body += [" " + line for line in after]
    old_len += len(after)
    new_len += len(after)
    out = [f"@@ -{_range(old_start, old_len)} +{_range(old_start + shift, new_len)} @@\n"]
    for line in body:
        out.append(line if line.endswith("\n") else line + "\n" + _NO_NEWLINE)
    return out


def patch_from_edits(path: str, old: bytes, edits: Sequence[Edit], new: bytes, context: int = CONTEXT) -> str:
    """The patch that takes `old` to `new` (`old` with `edits` applied), built from the edits alone: each
    edit's lines with `context` lines around them, hunks closer than 2 x `context` lines merged, as
    `diff -U3` groups them.  No whole-file diff, so its cost follows the edits, not the file's size.
    Checked like unified_patch; the empty string when nothing changed."""
    if old == new:
        return ""
    changes = _changes(old, sorted(edits))
    if not changes:
        raise SwzcError("internal: the edits change no line, yet the file changed", ExitCode.CHECK_FAILED)
    out = [_headers(path)]
    shift, group = 0, [changes[0]]
    for change in changes[1:]:
        gap = change.line - (group[-1].line + len(group[-1].old))
        if gap > 2 * context:
            out += _hunk(old, group, shift, context)
            shift += sum(len(c.new) - len(c.old) for c in group)
            group = []
        group.append(change)
    out += _hunk(old, group, shift, context)
    text = "".join(out)
    check_patch(text, old, new)
    return text


def _line_bounds(data: bytes) -> list[int]:
    """Where each line starts, and the end: line k is data[bounds[k]:bounds[k + 1]] (lines end at '\n' only)."""
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 0x0A) + 1
    bounds = [0, *ends.tolist()]
    if bounds[-1] != len(data):
        bounds.append(len(data))
    return bounds


def _apply(patch: unidiff.PatchedFile, old: bytes) -> bytes:
    """Apply one file's hunks to `old`, checking every context and removed line byte for byte."""
    bounds = _line_bounds(old)
    count = len(bounds) - 1
    out: list[bytes] = []
    at = 0
    for hunk in patch:
        start = hunk.source_start - 1 if hunk.source_length else hunk.source_start
        if start < at or start > count:
            raise ValueError("hunks out of order or past the end of the file")
        out.append(old[bounds[at] : bounds[start]])
        at = start
        lines = list(hunk)
        for index, line in enumerate(lines):
            if line.line_type == _MARKER:
                continue
            value = line.value.encode("utf-8", "surrogateescape")
            if index + 1 < len(lines) and lines[index + 1].line_type == _MARKER:
                value = value.removesuffix(b"\n")
            if line.is_context or line.is_removed:
                if at >= count or old[bounds[at] : bounds[at + 1]] != value:
                    raise ValueError(f"context does not match the original at line {at + 1}")
                at += 1
            if line.is_context or line.is_added:
                out.append(value)
    out.append(old[bounds[at] :])
    return b"".join(out)


def check_patch(text: str, old: bytes, new: bytes) -> None:
    """unidiff reads prose as an empty patch and never checks context: check both here, and that the
    patch gives exactly `new`, byte for byte."""
    try:
        files = unidiff.PatchSet(text)
        if len(files) != 1 or len(files[0]) == 0:
            raise ValueError(f"expected one file with hunks, found {len(files)} file(s)")
        applied = _apply(files[0], old)
    except (ValueError, unidiff.UnidiffParseError) as exc:
        raise SwzcError(f"internal: the patch does not check out: {exc}", ExitCode.CHECK_FAILED) from None
    if applied != new:
        raise SwzcError("internal: the patch does not reproduce the rewritten file", ExitCode.CHECK_FAILED)
