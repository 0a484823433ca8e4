"""Unified patches: written with difflib, read back with unidiff and checked against both files."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import unidiff

from swzc.errors import ExitCode, SwzcError

_NO_NEWLINE = "\\ No newline at end of file\n"


def patch_path(path: str) -> str:
    """The path a/ and b/ headers carry: relative to the working directory where possible, '/'-separated."""
    p = Path(path)
    if p.is_absolute():
        try:
            p = p.resolve().relative_to(Path.cwd().resolve())
        except ValueError:
            p = Path(p.name)
    return os.path.normpath(p).replace(os.sep, "/")


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
    name = patch_path(path)
    out = []
    for line in difflib.unified_diff(_lines(old), _lines(new), f"a/{name}", f"b/{name}"):
        out.append(line)
        if not line.endswith("\n"):  # a last line without a newline, in either file
            out.append("\n" + _NO_NEWLINE)
    text = "".join(out)
    check_patch(text, old, new)
    return text


def _apply(patch: unidiff.PatchedFile, old_lines: list[str]) -> list[str]:
    """Apply one file's hunks to old_lines, checking every context and removed line."""
    result: list[str] = []
    at = 0
    for hunk in patch:
        start = hunk.source_start - 1 if hunk.source_length else hunk.source_start
        if start < at:
            raise ValueError("hunks out of order")
        result += old_lines[at:start]
        at = start
        for line in hunk:
            value = line.value
            if line.is_context or line.is_removed:
                if at >= len(old_lines) or old_lines[at].rstrip("\r\n") != value.rstrip("\r\n"):
                    raise ValueError(f"context does not match the original at line {at + 1}")
                at += 1
            if line.is_context or line.is_added:
                result.append(value)
    return result + old_lines[at:]


def check_patch(text: str, old: bytes, new: bytes) -> None:
    """unidiff reads prose as an empty patch and never checks context: check both here."""
    try:
        files = unidiff.PatchSet(text)
        if len(files) != 1 or len(files[0]) == 0:
            raise ValueError(f"expected one file with hunks, found {len(files)} file(s)")
        applied = _apply(files[0], _lines(old))
    except (ValueError, unidiff.UnidiffParseError) as exc:
        raise SwzcError(f"internal: the patch does not check out: {exc}", ExitCode.CHECK_FAILED) from None
    want = [line.rstrip("\r\n") for line in _lines(new)]
    if [line.rstrip("\r\n") for line in applied] != want:
        raise SwzcError("internal: the patch does not reproduce the rewritten file", ExitCode.CHECK_FAILED)
