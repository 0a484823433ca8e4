"""How a file is read as the command line asks: in its build's context (a compilation database's -I and -D
flags, then the command line's) and within the input size limit.

Every command reads its FILE this way, and `suggest` reads many files one by one (swzc.report.suggest), so
this lives below the command line rather than in it: a per-file failure here is a record for the report,
not a click error.  `launches_between` reads what a run's FILEs say of each other's kernels (a header's, launched
by the files that include it) before each FILE is read on its own.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from swzc.analysis.context import FileContext
from swzc.analysis.kernels import launches_of_header_kernels, own_launched_kernels
from swzc.analysis.records import Launch, LaunchFact
from swzc.core.errors import SwzcError
from swzc.core.memo import Memo
from swzc.frontend import source
from swzc.frontend.build_context import HeaderParses, read_regular_file
from swzc.frontend.evaluate import Dim3, Macro, Value
from swzc.frontend.preprocess import (FUNCTION_LIKE_DEFINE, KERNEL_TEXT, UNPASSABLE, CompileContext, IncludeScan,
                                      context_from_database, context_from_flags, defines_of, find_compile_commands)
from swzc.frontend.source import max_input_bytes
from swzc.model.rank import size_bindings
from swzc.model.sweep import SIZES
from swzc.rewrite.patch import quoted


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
    for name, value in given.defines:
        if not name.isidentifier() and (value is None or FUNCTION_LIKE_DEFINE.fullmatch(name) is None):
            raise SwzcError(f"-D {name!r}: not a macro name (NAME, or NAME(a, b) for a function-like one)")
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


_LAUNCH = re.compile(rb"<<<|\bhipLaunchKernelGGL\b|\bcudaLaunch\w*Kernel|\bhipLaunch\w*Kernel")


_SAYABLE = re.compile(r"[\w \t+\-*/%()<>.,&|^~!=?:\[\]]{0,40}")  # a macro's body a message shows as it is


@dataclass(frozen=True)
class Included:
    """What a run's other FILEs say of one FILE's kernels (`launches_between`)."""

    facts: Mapping[str, tuple[LaunchFact, ...]] = field(default_factory=dict)  # their launches, by kernel
    # The macros the including files define where they include it that it (or a header it includes) reads (a
    # `#define TILE 32` before its `#ifndef TILE`, and a function-like one such a body calls): the FILE is read with
    # them, as -D NAME=VALUE or -D NAME(a, b)=VALUE, as the compiler reads its kernels (preprocess.defines_of).
    macros: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()  # what of them is not read, and why
    by: str = ""  # the including file whose macros those are, as a message names it

    @property
    def defines(self) -> tuple[str, ...]:
        """`macros` as -D values."""
        return tuple(f"{name}={body}" for name, body in self.macros)

    def said(self) -> str:
        """`macros` as a suggestion names them: a body that is not a short expression on one line (one with a `;`, a
        quote, a comment, a line break) is left out of the message, which the apply command's -D gives whole."""
        return ", ".join(f"{name} = {body if _SAYABLE.fullmatch(body) else '…'}" for name, body in self.macros)


def launches_between(files: Sequence[str], read: Callable[[str], tuple[CompileContext, Mapping[str, Value | str]]],
                     max_bytes: int) -> dict[str, Included]:
    """What the run's FILES say of each other's kernels: a runner that includes its kernels' header launches them,
    and swzc reads a kernel in the file that defines it.  For each FILE whose kernels another FILE launches
    through an #include and its own file does not: those launches ("included" facts, the same configuration
    once), by the FILE as given; each with the grid and block that FILE fixes, or the grid it sets at run time at
    each size of a sweep (`_sized_launches`); and the macros the including file defines where it includes the FILE
    that the FILE reads.  A run reads a FILE one way: where two including files define those macros differently,
    the first one's launches are read (in the order of FILES) and the others' are not, with a note.
    `read(FILE)`: its build's context and --set bindings.  Only a FILE that includes another FILE of the run that
    spells `__global__` and no launch (IncludeScan) is parsed here; one that cannot be read or parsed is left for
    the run to report."""
    wanted = {os.path.realpath(f): f for f in files}
    kernels = set()  # the FILEs that may define a kernel and launch none (a header of kernels)
    for real, file in wanted.items():
        data = read_regular_file(file, max_bytes)
        if not isinstance(data, str) and KERNEL_TEXT.search(data) and not _LAUNCH.search(data):
            kernels.add(real)
    found: dict[str, list[tuple[str, tuple[tuple[str, Macro | None], ...], LaunchFact]]] = {}
    scan = IncludeScan()
    for file in files if kernels and len(wanted) > 1 else ():
        try:
            context, bindings = read(file)
            if not scan.includes_any(file, context.include_dirs, kernels - {os.path.realpath(file)}):
                continue
            with input_limit(max_bytes):
                ctx = FileContext(source.load(file), context)
                launched = launches_of_header_kernels(ctx, bindings)
        except SwzcError:
            continue
        sized = _sized_launches(ctx, bindings, [(h, launch) for h, launch, fact in launched if fact is None and h in wanted])
        pre = ctx.prepared(bindings)[0]
        for header, launch, fact in [*launched, *sized]:
            if fact is not None and header in wanted and header != os.path.realpath(file):
                # a name with a newline stays on its line
                found.setdefault(wanted[header], []).append((file, pre.outside(header), replace(fact, where=f"{quoted(file)}:{launch.line}")))
    out: dict[str, Included] = {}
    for path, launches in found.items():  # a kernel its own file launches is read with that launch: none is given
        try:
            context, _ = read(path)
            with input_limit(max_bytes):
                own = own_launched_kernels(FileContext(source.load(path), context))
        except SwzcError:
            continue
        launches = [(file, macros, fact) for file, macros, fact in launches if fact.kernel not in own]
        if launches:
            out[path] = _included(path, launches, context)
    return out


def _included(path: str, launches: Sequence[tuple[str, tuple[tuple[str, Macro | None], ...], LaunchFact]],
              context: CompileContext) -> Included:
    """One FILE's launches from the files that include it (file, the macros it includes it with, fact), in the order
    of FILES, as the FILE is read: with the first one's macros, and the launches of the files that agree."""
    mine = set(context.defines)  # a -D the FILE is read with anyway is no macro of the includer's to name
    first = defines_of(launches[0][1], mine)
    facts: dict[str, list[LaunchFact]] = {}
    notes: list[str] = []
    for file, macros, fact in launches:
        passed = defines_of(macros, mine)
        if passed != first:
            differ = sorted({name for name, _ in {*passed} ^ {*first}})
            notes.append(f"{quoted(file)} includes {quoted(path)} with {', '.join(differ)} defined otherwise than "
                         f"{quoted(launches[0][0])} does; a run reads a file one way, so its launch of kernel {fact.kernel} is not read")
            continue
        unclear = [name for name, m in macros if m is None]
        if unclear:
            notes.append(f"{quoted(file)} defines {', '.join(unclear)} differently on paths swzc does not tell apart where it "
                         f"includes {quoted(path)}: those are read as {quoted(path)} defines them")
        unpassable = [name for name, m in macros if m is not None and UNPASSABLE.search(" ".join(m.body.split()))]
        if unpassable:
            notes.append(f"{quoted(file)} defines {', '.join(unpassable)} with a quote, $, ` or \\ in the body, which no -D can "
                         f"pass on: those are read as {quoted(path)} defines them")
        have = facts.setdefault(fact.kernel, [])
        if not any((f.grid, f.block, f.args, f.types, f.api) == (fact.grid, fact.block, fact.args, fact.types, fact.api) for f in have):
            have.append(fact)
    return Included({kernel: tuple(f) for kernel, f in facts.items()}, first, tuple(dict.fromkeys(notes)), quoted(launches[0][0]))


def _sized_launches(ctx: FileContext, bindings: Mapping[str, Value | str], launches: Sequence[tuple[str, Launch]]
                    ) -> list[tuple[str, Launch, LaunchFact]]:
    """The launches among `launches` (header, launch) whose grid this file sets at run time and whose block it fixes,
    each as an "included" fact for a sweep of the header's kernel: the names that set its grid bound to each of the
    sweep's sizes in turn (as the sweep binds a file's own), the grid and the kernel's parameter values at each; the
    parameters that take the size at every one are what the sweep binds.  A launch none of whose parameters takes the
    size gives none."""
    sized = [(header, launch) for header, launch in launches if launch.block is not None and launch.sizes]
    if not sized:
        return []
    names = sorted({name for _, launch in sized for name in launch.sizes})  # each launch's grid reads its own names alone
    tables: dict[tuple[str, int], list[tuple[int, Dim3, tuple[tuple[str, Value], ...]]]] = {}
    for size in SIZES:  # one evaluation of the file's launches a size
        for _, at, _ in launches_of_header_kernels(ctx, {**bindings, **size_bindings(names, size)}):
            if at.grid is not None:
                tables.setdefault((at.kernel, at.line), []).append((size, at.grid, at.bindings))
    out = []
    for header, launch in sized:
        table = tables.get((launch.kernel, launch.line), [])
        taking = tuple(n for n, _ in table[0][2] if all(dict(args).get(n) == size for size, _, args in table)) if table else ()
        if taking:
            common = tuple((n, v) for n, v in table[0][2] if n not in taking and all((n, v) in args for _, _, args in table))
            out.append((header, launch, LaunchFact(launch.kernel, None, launch.block, common, "included", types=launch.type_args,
                                                   sizes=taking, by_size=tuple(table), api=launch.api)))
    return out
