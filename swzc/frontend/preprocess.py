"""What the compiler would see: the file's preprocessor directives, in order, with the headers it includes.

Sizes and element types often live in a local header (`#include "sizes.cuh"`) or behind a default
(`#ifndef N` / `#define N 4096`), and the build passes `-I` and `-D` flags (on the command line or in a
`compile_commands.json`).  This module walks the directives of the file in document order, follows
`#include "…"` into headers found next to the including file or on the include path, evaluates `#if`,
`#ifdef`, `#elif` and `#else` with the macros known at that point, and returns:

- the macro table after the whole file (a macro defined differently on paths it cannot tell apart is
  ambiguous: None);
- the byte ranges of branches the compiler never takes, so that declarations there are not read;
- the headers it followed, parsed, for their constants, enums and type aliases;
- notes on what it could not follow (a missing header, a cycle, a limit reached).  Nothing here fails.

Nothing is run: headers are read and parsed, never compiled.  A condition it cannot decide (one that
reads `__CUDA_ARCH__`, say, which differs between the host and device passes) takes every branch and
joins them.  An identifier no directive defines is 0 in `#if`, as in C, unless it looks like a name the
compiler or a system header defines (`__…`, `_X…`, `CUDA…`, `HIP…`): then it is unknown.

`refine` reads a file that did not parse whole again as the compiler reads it.  What an #if decides is
swzc.frontend.conditions, what `refine` sets aside swzc.frontend.reparse, and the build's context (-I, -D,
compile_commands.json) swzc.frontend.build_context, whose names are importable from here too.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from tree_sitter import Node

from swzc.core.errors import SwzcError
from swzc.frontend.build_context import (  # noqa: F401 - the build context's names, where they are imported today
    CompileContext, context_from_database, context_from_flags, find_compile_commands, read_regular_file)
from swzc.frontend.conditions import _BUILTIN, _text, _truth
from swzc.frontend.evaluate import Budget, Macro
from swzc.frontend.reparse import _decided_branches, _qualifier_macros, _statement_macros
from swzc.frontend.source import SourceFile, load_bytes

MAX_HEADERS = 256
MAX_DEPTH = 32
MAX_HEADER_BYTES = 8 << 20  # one header
MAX_TOTAL_BYTES = 64 << 20  # all headers of one file

# Statement-level nodes may hold directives; expressions, declarations and strings never need a look.
_LEAVES = re.compile(r"(_expression|argument_list|initializer_list|string_literal|_literal|declaration|"
                     r"parameter_list|type_descriptor|comment|identifier|primitive_type|preproc_arg)$")
_ABSENT = object()


@dataclass(frozen=True)
class Header:
    path: str  # resolved path
    spelled: str  # as the #include wrote it
    src: SourceFile
    inactive: tuple[tuple[int, int], ...]
    # Of a header that defines a kernel: the macros known where it was included that its code (or a header it
    # includes) names, and those their bodies name in turn, less those it sets anew or alike itself; None for one
    # defined differently on paths not told apart.  The compiler reads the header's kernels with them, and swzc reads
    # the header on its own with them where the including file launches its kernels (defines_of).
    outside: tuple[tuple[str, Macro | None], ...] = ()


@dataclass(frozen=True)
class Preprocessed:
    macros: Mapping[str, Macro | None]
    inactive: tuple[tuple[int, int], ...]  # byte ranges of the file in branches the compiler never takes
    headers: tuple[Header, ...] = ()
    notes: tuple[str, ...] = ()
    bodies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # every body a macro had on a path taken
    function_like: frozenset[str] = frozenset()  # macros defined with parameters, on some path taken

    def active(self, node: Node) -> bool:
        return not self.inactive_spans.holds(node.start_byte, node.end_byte)

    def outside(self, real: str) -> tuple[tuple[str, Macro | None], ...]:
        """`Header.outside` of the header at real path `real`, where the file first includes it; () if it does not."""
        return next((h.outside for h in self.headers if os.path.realpath(h.path) == real), ())

    @functools.cached_property
    def inactive_spans(self) -> Spans:
        return Spans(self.inactive)


class Spans:
    """Byte ranges [a, b), asked whether one of them holds a stretch or a byte: by bisection over the ranges
    sorted by start, with the furthest end reached so far, so that a file of many #if branches is not looked
    through range by range for each node."""

    def __init__(self, ranges: Iterable[tuple[int, int]]) -> None:
        ordered = sorted(ranges)
        self.starts = [a for a, _ in ordered]
        self.reach = list(itertools.accumulate((b for _, b in ordered), max))

    def holds(self, start: int, end: int) -> bool:
        """Whether one range holds all of [start, end)."""
        i = bisect.bisect_right(self.starts, start) - 1
        return i >= 0 and end <= self.reach[i]

    def has(self, at: int) -> bool:
        """Whether a range holds byte `at`."""
        i = bisect.bisect_right(self.starts, at) - 1
        return i >= 0 and at < self.reach[i]


@dataclass
class _State:
    context: CompileContext
    budget: Budget
    headers: list[Header] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    total_bytes: int = 0
    parsed: dict[str, SourceFile | None] = field(default_factory=dict)
    # A `#pragma once` header and the macro tables it was walked into: included again into one of them, it is
    # skipped, as the compiler does (a branch's own copy of the table walks it again: it may not have been taken)
    once: dict[str, list[dict[str, Macro | None]]] = field(default_factory=dict)
    bodies: dict[str, set[str]] = field(default_factory=dict)
    function_like: set[str] = field(default_factory=set)
    builtin: Mapping[str, str] = field(default_factory=dict)  # what the compiler defines itself (not the includer's)

    def define(self, table: dict[str, Macro | None], name: str, macro: Macro) -> None:
        """A #define.  Redefined differently without an #undef between, the macro has two values in one
        file (nvcc only warns): ambiguous."""
        table[name] = macro if name not in table or table[name] == macro else None
        self.bodies.setdefault(name, set()).add(macro.body)
        if macro.params is not None:
            self.function_like.add(name)


def preprocess(src: SourceFile, context: CompileContext | None = None, budget: Budget | None = None) -> Preprocessed:
    context = context or CompileContext()
    state = _State(context, budget or Budget(), builtin=_BUILTIN[src.dialect])
    table: dict[str, Macro | None] = {name: Macro(None, value) for name, value in _BUILTIN[src.dialect].items()}
    for name, value in context.defines:
        called = FUNCTION_LIKE_DEFINE.fullmatch(name)
        if value is None:
            table.pop(name, None)
        elif called is not None:  # -D'MAX(a, b)=((a) > (b) ? (a) : (b))'
            table[called.group(1)] = Macro(tuple(p.strip() for p in called.group(2).split(",") if p.strip()), value)
        else:
            table[name] = Macro(None, value)
    folder = os.path.dirname(os.path.abspath(src.path))
    inactive: list[tuple[int, int]] = []
    _run(_walk(src.tree.root_node, table, inactive, state, folder, [os.path.abspath(src.path)]))
    if state.budget.exhausted:
        state.notes.append("evaluation stopped at its work limit (deeply nested macros?); what it had not reached is unknown")
    return Preprocessed(table, tuple(inactive), tuple(state.headers), tuple(dict.fromkeys(state.notes)),
                        {name: tuple(sorted(bodies)) for name, bodies in state.bodies.items()}, frozenset(state.function_like))


# The walk nests as the file does (#if in #if, an #include in a namespace, a header's own includes).  Its
# steps are generators that yield the steps nested in them, run by _run from a stack of its own: however
# deep the file nests, Python's recursion limit is never reached.
_Steps = Iterator["_Steps"]


def _run(step: _Steps) -> None:
    """Run a step and, depth first and in order, every step it yields."""
    stack = [step]
    while stack:
        inner = next(stack[-1], None)
        if inner is None:
            stack.pop()
        else:
            stack.append(inner)


def _walk(node: Node, table: dict[str, Macro | None], inactive: list[tuple[int, int]], state: _State, folder: str,
          stack: list[str]) -> _Steps:
    for child in node.children:
        kind = child.type
        if kind == "preproc_def":
            state.define(table, _text(child.child_by_field_name("name")), Macro(None, _text(child.child_by_field_name("value")).strip()))
        elif kind == "preproc_function_def":
            params = child.child_by_field_name("parameters")
            names = tuple(_text(p) for p in params.named_children if p.type == "identifier") if params else ()
            state.define(table, _text(child.child_by_field_name("name")), Macro(names, _text(child.child_by_field_name("value")).strip()))
        elif kind == "preproc_call":
            if "".join(_text(child.child_by_field_name("directive")).split()) == "#undef":
                table.pop(_text(child.child_by_field_name("argument")).strip(), None)
        elif kind == "preproc_include":
            path = child.child_by_field_name("path")
            if path is not None and path.type == "string_literal":
                yield _include(_text(path)[1:-1], table, state, folder, stack)
            elif path is not None and path.type == "system_lib_string":  # <lib/x.cuh>: the project's -I folders only
                yield _include_angled(_text(path)[1:-1], table, state, stack)
        elif kind in ("preproc_if", "preproc_ifdef"):
            yield _conditional(child, table, inactive, state, folder, stack)
        elif not _LEAVES.search(kind) and child.child_count:
            yield _walk(child, table, inactive, state, folder, stack)


def _branches(node: Node) -> list[tuple[Node, Node | None]]:
    """The chain #if/#elif/#else as (branch node, condition node or the #ifdef name); #else has None."""
    chain = []
    current: Node | None = node
    while current is not None:
        chain.append(current)
        current = current.child_by_field_name("alternative")
    return [(b, b.child_by_field_name("condition") or b.child_by_field_name("name")) for b in chain]


def _conditional(node: Node, table: dict[str, Macro | None], inactive: list[tuple[int, int]], state: _State, folder: str,
                 stack: list[str]) -> _Steps:
    possible: list[dict[str, Macro | None]] = []
    decided = False
    for branch, condition in _branches(node):
        own_start = branch.start_byte
        own_end = branch.child_by_field_name("alternative").start_byte if branch.child_by_field_name("alternative") else branch.end_byte
        truth = None if decided else _truth(branch, condition, table, state.budget)
        if decided or truth is False:
            inactive.append((own_start, own_end))
            continue
        fork = dict(table)
        yield _walk_branch(branch, fork, inactive, state, folder, stack)
        possible.append(fork)
        if truth is True:
            decided = True
    if not decided:
        possible.append(dict(table))  # no branch taken at all
    table.clear()
    table.update(_join(possible))


def _walk_branch(branch: Node, table: dict[str, Macro | None], inactive: list[tuple[int, int]], state: _State, folder: str,
                 stack: list[str]) -> _Steps:
    """The statements of one branch, without its #elif/#else alternative (walked as its own branch)."""
    alternative = branch.child_by_field_name("alternative")
    condition = branch.child_by_field_name("condition") or branch.child_by_field_name("name")
    for child in branch.children:
        if child == alternative or child == condition:
            continue
        yield _walk(_Single(child), table, inactive, state, folder, stack)  # type: ignore[arg-type]


class _Single:
    """A node seen as the only child of a parent, so that _walk handles it like any other."""

    def __init__(self, node: Node) -> None:
        self.children = [node]


def _join(tables: list[dict[str, Macro | None]]) -> dict[str, Macro | None]:
    if len(tables) == 1:
        return tables[0]
    joined: dict[str, Macro | None] = {}
    for name in {k for t in tables for k in t}:
        values = [t.get(name, _ABSENT) for t in tables]
        if all(v == values[0] for v in values):
            if values[0] is not _ABSENT:
                joined[name] = values[0]  # type: ignore[assignment]
        else:
            joined[name] = None  # defined differently, or only on some paths: ambiguous
    return joined


def _include(spelled: str, table: dict[str, Macro | None], state: _State, folder: str, stack: list[str]) -> _Steps:
    where = stack[-1]
    path = _find_header(spelled, folder, state.context.include_dirs)
    if path is None:
        if not system_header(spelled):  # `#include "cuda_fp16.h"`: the toolkit's, found by the compiler on its own
            state.notes.append(_not_found(f'"{spelled}"', where, f" next to it or in the -I folders{'' if state.context.include_dirs else ' (none given)'}",
                                          " (-I adds its folder)"))
        return
    if path in stack:
        state.notes.append(f"header \"{spelled}\" includes itself through {' -> '.join(_short(p) for p in stack[stack.index(path):])}; not followed again")
        return
    if any(walked is table for walked in state.once.get(path, ())):
        return
    if len(stack) > MAX_DEPTH or len(state.headers) >= MAX_HEADERS:
        state.notes.append(f"header \"{spelled}\" not followed: more than {MAX_DEPTH} levels or {MAX_HEADERS} headers")
        return
    if path not in state.parsed:
        state.parsed[path] = _read_header(path, spelled, state)
    header = state.parsed[path]
    if header is None:
        return
    if _PRAGMA_ONCE.search(header.data):
        state.once.setdefault(path, []).append(table)
    entry = dict(table) if KERNEL_TEXT.search(header.data) else None  # a header of kernels: what it may read of the includer's
    mark = len(state.headers)
    inactive: list[tuple[int, int]] = []
    yield _walk(header.tree.root_node, table, inactive, state, os.path.dirname(path), [*stack, path])
    outside: tuple[tuple[str, Macro | None], ...] = ()
    if entry is not None:  # the names it and the headers it includes spell, as they are where it is included
        closure = [header, *(h.src for h in state.headers[mark:])]
        names = frozenset().union(*(f.names for f in closure))
        same = frozenset().union(*(f.defined for f in closure))  # one it defines alike itself needs nothing from outside
        outside = tuple((n, m) for n, m in _outside(names, entry, state.builtin)
                        if table.get(n, _ABSENT) == m and (m is None or (n, " ".join(m.body.split())) not in same))
    state.headers.append(Header(path, spelled, header, tuple(inactive), outside))


KERNEL_TEXT = re.compile(rb"\b__global__\b")  # a file that may define a kernel
FUNCTION_LIKE_DEFINE = re.compile(r"([A-Za-z_]\w*)\(\s*((?:[A-Za-z_]\w*\s*(?:,\s*[A-Za-z_]\w*\s*)*)?)\)")  # -D NAME(a, b)=…


UNPASSABLE = re.compile(r'[$`"\\\x00-\x1f\x7f]')  # what no -D value may hold: nvcc's own shell reads it


def defines_of(outside: Iterable[tuple[str, Macro | None]], given: Iterable[tuple[str, str | None]] = ()
               ) -> tuple[tuple[str, str], ...]:
    """`Header.outside` as -D values (NAME, or NAME(a, b) for a function-like macro; and its body): not one defined
    ambiguously, nor a variadic one, nor one `given` (the -D a file is read with anyway) holds, nor one a compiler's
    shell would read (UNPASSABLE: `#define NAME "gemm"`; swzc.core.processes refuses such an argument)."""
    out = []
    for name, macro in outside:
        body = " ".join(macro.body.split()) if macro is not None else ""  # a tab is a space to the preprocessor
        if macro is None or "__VA_ARGS__" in body or UNPASSABLE.search(body):
            continue
        spelled = name if macro.params is None else f"{name}({', '.join(macro.params)})"
        if (spelled, body) not in set(given):
            out.append((spelled, body))
    return tuple(out)


def _outside(names: Iterable[str], table: Mapping[str, Macro | None], builtin: Mapping[str, str]
             ) -> tuple[tuple[str, Macro | None], ...]:
    """The macros of `table` (where a header is included) among `names` (those the header and its own headers spell),
    and those their bodies name, by name; none that the compiler defines itself with its own value.  (Its caller
    leaves out one the header sets anew: its own `#undef TILE` / `#define TILE 16` decides.)"""
    found: dict[str, Macro | None] = {}
    wanted = [n for n in names if n in table]
    while wanted:
        name = wanted.pop()
        if name in found:
            continue
        macro = found[name] = table[name]
        if macro is not None:
            wanted += [n for n in re.findall(r"[A-Za-z_]\w*", macro.body) if n in table and n not in found]
    return tuple(sorted(((n, m) for n, m in found.items()
                         if m is None or m.params is not None or builtin.get(n) != m.body), key=lambda item: item[0]))


_PRAGMA_ONCE = re.compile(rb"^[ \t]*#[ \t]*pragma[ \t]+once\b", re.MULTILINE)


def _include_angled(spelled: str, table: dict[str, Macro | None], state: _State, stack: list[str]) -> _Steps:
    """`#include <…>` as the compiler finds it in the -I folders, but not in a toolkit's own (the CUDA or HIP
    headers, which hold none of the project's helpers); one not found there is a system header, not read."""
    project = tuple(d for d in state.context.include_dirs if not _toolkit_folder(d))
    path = _find_header(spelled, project[0], project[1:]) if project else None
    if path is not None:
        yield _include(path, table, state, os.path.dirname(path), stack)  # found: an absolute path, found again at once
    elif not system_header(spelled):  # a project's own header (`<helper_cuda.h>`) the -I folders lack: say so
        state.notes.append(_not_found(f"<{spelled}>", stack[-1], f" in the -I folders{'' if state.context.include_dirs else ' (none given)'}",
                                      " (-I adds its folder)"))


HEADER_NOT_FOUND = re.compile(r"^header (\"[^\"]*\"|<[^>]*>) .* not found")  # `_not_found`'s notes, for a report to name them


def _not_found(shown: str, where: str, searched: str, hint: str = "") -> str:
    """The note on a header not found: `shown` as the #include spelled it, `searched` where it was looked for."""
    return (f"header {shown} (included from {_short(where)}) not found{searched}; macros and constants in it are unknown, "
            f"and functions in it are taken not to read the block index{hint}")


# Headers of the C and C++ libraries, the system and the CUDA and HIP toolkits: an `#include <…>` of one that no -I
# folder holds is not the project's, and is not read (nor said).
_SYSTEM_NAMES = frozenset("""
assert.h complex.h ctype.h errno.h fenv.h float.h inttypes.h iso646.h limits.h locale.h math.h setjmp.h signal.h
stdalign.h stdarg.h stdatomic.h stdbool.h stddef.h stdint.h stdio.h stdlib.h stdnoreturn.h string.h tgmath.h
threads.h time.h uchar.h wchar.h wctype.h unistd.h fcntl.h dirent.h dlfcn.h getopt.h malloc.h memory.h pthread.h
sched.h semaphore.h strings.h syslog.h termios.h libgen.h glob.h pwd.h grp.h poll.h omp.h mpi.h alloca.h
execinfo.h cpuid.h numa.h
algorithm any array atomic barrier bit bitset cassert ccomplex cctype cerrno cfenv cfloat charconv chrono cinttypes
ciso646 climits clocale cmath codecvt compare complex concepts condition_variable coroutine csetjmp csignal
cstdalign cstdarg cstdbool cstddef cstdint cstdio cstdlib cstring ctgmath ctime cuchar cwchar cwctype deque
exception execution expected filesystem format forward_list fstream functional future initializer_list iomanip
ios iosfwd iostream istream iterator latch limits list locale map memory memory_resource mutex new numbers
numeric optional ostream print queue random ranges ratio regex scoped_allocator semaphore set shared_mutex
source_location span sstream stack stacktrace stdexcept stop_token streambuf string string_view strstream
syncstream system_error thread tuple type_traits typeindex typeinfo unordered_map unordered_set utility valarray
variant vector version
mma.h cooperative_groups.h vector_types.h vector_functions.h math_constants.h builtin_types.h driver_types.h
host_defines.h channel_descriptor.h texture_types.h surface_types.h texture_fetch_functions.h surface_functions.h
""".split())
_SYSTEM_PREFIXES = ("sys/", "bits/", "linux/", "asm/", "netinet/", "arpa/", "net/", "cuda/", "thrust/", "cub/", "crt/",
                    "nvtx3/", "cooperative_groups/", "hip/", "hipcub/", "rocprim/", "rocblas/", "hipblas/", "rocrand/",
                    "hiprand/", "rocwmma/", "CL/", "cuda", "cu", "nv", "hip", "roc", "device_", "sm_", "__")


def system_header(spelled: str) -> bool:
    """Whether `#include <spelled>` names a header of the C or C++ library, the system, or the CUDA or HIP toolkit
    (`cuda_runtime.h`, `cublas_v2.h`, `thrust/…`, `hip/…`, `x86intrin.h`)."""
    return spelled in _SYSTEM_NAMES or spelled.startswith(_SYSTEM_PREFIXES) or spelled.endswith("intrin.h")


def _toolkit_folder(folder: str) -> bool:
    return any(os.path.exists(os.path.join(folder, name)) for name in ("cuda_runtime.h", "hip/hip_runtime.h"))


def _find_header(spelled: str, folder: str, include_dirs: tuple[str, ...]) -> str | None:
    for base in (folder, *include_dirs):
        candidate = os.path.abspath(os.path.join(base, spelled))
        if os.path.exists(candidate) and not os.path.isdir(candidate):
            return candidate
    return None


_INCLUDE_LINE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)', re.MULTILINE)


class IncludeScan:
    """Which files a file includes through its #include lines and theirs, read as text (every branch of an #if, so a
    header a branch leaves out counts too), each found as the preprocessor finds it: for a run over many files, each
    file read once (by device and inode, whatever links name it) and MAX_TOTAL_BYTES read in all."""

    def __init__(self) -> None:
        self.budget = MAX_TOTAL_BYTES
        self._named: dict[tuple[int, int, tuple[str, ...]], list[str]] = {}  # (dev, inode, -I folders) -> the files it names

    def includes_any(self, path: str, include_dirs: tuple[str, ...], targets: Iterable[str]) -> bool:
        """Whether the file at `path` includes one of `targets` (real paths)."""
        wanted = set(targets)
        seen: set[tuple[int, int]] = set()
        todo = [path]
        while todo:
            current = todo.pop()
            try:
                info = os.stat(current)
            except (OSError, ValueError):
                continue
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            named = self._names(current, (info.st_dev, info.st_ino, include_dirs))
            if any(os.path.realpath(found) in wanted for found in named):
                return True
            todo += named
        return False

    def _names(self, path: str, key: tuple[int, int, tuple[str, ...]]) -> list[str]:
        if key not in self._named:
            data = read_regular_file(path, min(MAX_HEADER_BYTES, self.budget)) if self.budget > 0 else ""
            names: list[str] = []
            if not isinstance(data, str):
                self.budget -= len(data)
                project = tuple(d for d in key[2] if not _toolkit_folder(d))
                for match in _INCLUDE_LINE.finditer(data):
                    quoted, angled = (g.decode("utf-8", "replace") if g else None for g in match.groups())
                    found = (_find_header(quoted, os.path.dirname(os.path.abspath(path)), key[2]) if quoted else
                             _find_header(angled, project[0], project[1:]) if project else None)
                    names += [found] if found is not None else []
            self._named[key] = names
        return self._named[key]


def _read_header(path: str, spelled: str, state: _State) -> SourceFile | None:
    data = read_regular_file(path, MAX_HEADER_BYTES)
    if isinstance(data, str):
        state.notes.append(f"header \"{spelled}\" ({path}) not read: {data}")
        return None
    if state.total_bytes + len(data) > MAX_TOTAL_BYTES:
        state.notes.append(f"header \"{spelled}\" not read: the headers of this file pass {MAX_TOTAL_BYTES >> 20} MiB")
        return None
    state.total_bytes += len(data)
    known = state.context.parses.get(path, data)
    if known is not None:  # the same bytes, included by another file of the run
        return known
    try:
        parsed = load_bytes(path, data)
        state.context.parses.keep(path, data, parsed)
        return parsed
    except SwzcError as exc:  # nested too deeply to follow
        state.notes.append(f"header \"{spelled}\" not read: {exc.message}")
        return None


def _short(path: str) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


# ---- a broken parse, read again as the compiler reads it --------------------------------------------------


def refine(src: SourceFile, context: CompileContext | None = None, seen: Preprocessed | None = None) -> SourceFile:
    """A file tree-sitter could not parse whole, parsed again as the compiler reads it: an `#if` chain the
    build's macros decide keeps only its branch (its directives and the other branches are parsed as
    spaces), a statement macro used without a semicolon (`TIMER_START` on a line of its own) and a macro
    that is only qualifiers (`RESTRICT`) are parsed as spaces.  The file's bytes do not change, only what
    tree-sitter is given; kept only when it leaves fewer lines unparsed (or as many, in fewer errors).
    `seen` is what `preprocess` made of the broken parse: the macros the local headers define."""
    if not src.errors:
        return src
    table: dict[str, Macro | None] = {name: Macro(None, value) for name, value in _BUILTIN[src.dialect].items()}
    # what the headers define; the file's own #defines are replayed in order below
    own = {m.decode() for m in re.findall(rb"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", src.data, re.M)}
    table.update({k: v for k, v in (seen.macros if seen is not None else {}).items() if k not in own})
    for name, value in (context or CompileContext()).defines:
        if value is None:
            table.pop(name, None)
        else:
            table[name] = Macro(None, value)
    ranges = _decided_branches(src.data, table)
    bodies = {name: (m.body,) for name, m in table.items() if m is not None}
    bodies.update(seen.bodies if seen is not None else {})
    ranges += _statement_macros(src.data, bodies, ranges)
    function_like = {name for name, m in table.items() if m is not None and m.params is not None}
    function_like |= seen.function_like if seen is not None else set()
    ranges += _qualifier_macros(src.data, bodies, function_like, ranges)
    if not ranges:
        return src
    refined = load_bytes(src.path, src.data, tuple(sorted(set(ranges))))
    return refined if _unparsed(refined) < _unparsed(src) else src


def _unparsed(src: SourceFile) -> tuple[int, int]:
    """How much of a file tree-sitter could not parse: the lines its errors touch, then how many errors."""
    lines = set()
    for issue in src.errors:
        lines.update(range(issue.line, src.line_col(issue.end)[0] + 1))
    return len(lines), len(src.errors)
