"""Line tracing for the mutation run: which lines of the mutated modules a test runs.

MUTATION_TRACE_FILES holds a JSON map from a file's real path to the line ranges worth tracing in it
(the functions that are mutated), or null for the whole file.  Only frames of code that starts in one of
those ranges are traced line by line; every other call costs one lookup.
"""

from __future__ import annotations

import json
import os


def _targets() -> dict[str, list[tuple[int, int]] | None]:
    raw = json.loads(os.environ.get("MUTATION_TRACE_FILES", "{}"))
    return {path: None if ranges is None else [tuple(r) for r in ranges] for path, ranges in raw.items()}


def tracer(lines: set[tuple[str, int]]):
    """A sys.settrace function that adds (file, line) to `lines` for the traced code."""
    targets = _targets()
    wanted: dict[object, bool] = {}
    real: dict[str, str | None] = {}

    def local(frame, event, arg):
        if event == "line":
            lines.add((frame.f_code.co_filename, frame.f_lineno))
        return local

    def on_call(frame, event, arg):
        code = frame.f_code
        ok = wanted.get(code)
        if ok is None:
            name = code.co_filename
            if name not in real:
                path = os.path.realpath(name)
                real[name] = path if path in targets else None
            path = real[name]
            ranges = targets.get(path) if path is not None else None
            ok = path is not None and (ranges is None or any(lo <= code.co_firstlineno <= hi for lo, hi in ranges))
            wanted[code] = ok
        if ok:
            lines.add((code.co_filename, frame.f_lineno))
            return local
        return None

    return on_call


def by_file(lines: set[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, set[int]] = {}
    for name, line in lines:
        out.setdefault(os.path.realpath(name), set()).add(line)
    return {name: sorted(numbers) for name, numbers in out.items()}
