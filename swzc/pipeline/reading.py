"""How a file is read as the command line asks: in its build's context (a compilation database's -I and -D
flags, then the command line's) and within the input size limit.

Every command reads its FILE this way, and `suggest` reads many files one by one (swzc.report.suggest), so
this lives below the command line rather than in it: a per-file failure here is a record for the report,
not a click error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from swzc.core.errors import SwzcError
from swzc.frontend.preprocess import CompileContext, context_from_database, context_from_flags, find_compile_commands
from swzc.core.memo import Memo
from swzc.frontend.build_context import HeaderParses
from swzc.frontend.source import max_input_bytes


def build_context(file: str, include_dirs: tuple[str, ...], defines: tuple[str, ...],
                  build_path: str | None, parses: HeaderParses | None = None, memo: Memo | None = None
                  ) -> tuple[CompileContext, list[str]]:
    """The compilation database's flags for FILE (never run), then the command line's; `parses`: the headers
    the run's other files parsed; `memo`: the run's results cache (swzc.core.memo), off when not given."""
    notes: list[str] = []
    context = CompileContext(parses=parses or HeaderParses(), memo=memo or Memo())
    database = find_compile_commands(file, build_path)
    if database is not None and database.is_file():
        context, notes = context_from_database(database, file)
        context = replace(context, parses=parses or context.parses, memo=memo or context.memo)
    elif build_path is not None:
        raise SwzcError(f"-p {build_path}: no compile_commands.json there")
    # folders from the working folder, as the user typed them: the compile check runs in the file's own folder
    given = context_from_flags([*(f"-I{d}" for d in include_dirs), *(f"-D{d}" for d in defines)], os.getcwd())
    notes += [f"-I {typed}: no such folder" for typed in dict.fromkeys(include_dirs) if not os.path.isdir(typed)]
    for name, _ in given.defines:
        if not name.isidentifier():
            raise SwzcError(f"-D {name!r}: not a macro name")
    return context.merged(CompileContext(given.include_dirs, given.defines, "the command line" if given.include_dirs or given.defines else "")), notes


NO_SUCH_FOLDER = re.compile(r"-I .*: no such folder$")  # how build_context's note on a missing -I folder reads


@contextmanager
def input_limit(max_bytes: int) -> Iterator[None]:
    """Reads inside refuse a file larger than `max_bytes` (--max-bytes)."""
    token = max_input_bytes.set(max_bytes)
    try:
        yield
    finally:
        max_input_bytes.reset(token)


SOURCE_SUFFIXES = (".cu", ".cuh", ".hip")  # what a folder given as FILE is searched for (as the pre-commit hook selects)


def source_files(paths: Sequence[str]) -> tuple[str, ...]:
    """FILES as given, each folder among them replaced by the CUDA and HIP sources under it (SOURCE_SUFFIXES),
    sorted, hidden folders and files left out and links not followed (a link in a stranger's folder may point at
    a file of the user's, whose text an error message would quote); a file named twice (under any name) is read
    once."""
    found: list[str] = []
    for path in paths:
        if not os.path.isdir(path):
            found.append(path)
            continue
        for folder, folders, files in os.walk(path):  # links to folders are listed, not entered
            folders[:] = sorted(f for f in folders if not f.startswith("."))
            found += [os.path.join(folder, f) for f in sorted(files)  # a link is not what the folder holds
                      if f.endswith(SOURCE_SUFFIXES) and not f.startswith(".") and not os.path.islink(os.path.join(folder, f))]
    seen: dict[str, str] = {}  # each file once, under the first name it was given by
    for path in found:
        seen.setdefault(os.path.realpath(path), path)
    return tuple(seen.values())
