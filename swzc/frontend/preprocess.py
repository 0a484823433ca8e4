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
"""

from __future__ import annotations

import bisect
import functools
import itertools
import json
import os
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tree_sitter import Node

from swzc.core.errors import SwzcError
from swzc.core.inputs import read_regular
from swzc.frontend.evaluate import Budget, Evaluator, Macro, Scope, Value
from swzc.frontend.source import SourceFile, load_bytes

MAX_HEADERS = 256
MAX_DEPTH = 32
MAX_HEADER_BYTES = 8 << 20  # one header
MAX_TOTAL_BYTES = 64 << 20  # all headers of one file
MAX_COMPILE_COMMANDS_BYTES = 64 << 20

# Defined by the compiler for every CUDA (or HIP) translation unit.
_BUILTIN = {
    "cuda": {"__CUDACC__": "1", "__NVCC__": "1", "__cplusplus": "201703L", "__linux__": "1"},
    "hip": {"__HIPCC__": "1", "__HIP__": "1", "__cplusplus": "201703L", "__linux__": "1"},
}
# Undefined names in #if that the compiler, the device pass or a system header may define: unknown, not 0.
_SYSTEM_NAME = re.compile(r"^(__|(CUDA|CUDART|CUB|THRUST|HIP|NV|CUTLASS|CUTE|ROCM|HCC)(_|$))")
# Statement-level nodes may hold directives; expressions, declarations and strings never need a look.
_LEAVES = re.compile(r"(_expression|argument_list|initializer_list|string_literal|_literal|declaration|"
                     r"parameter_list|type_descriptor|comment|identifier|primitive_type|preproc_arg)$")
_ABSENT = object()


@dataclass(frozen=True)
class CompileContext:
    """What the build adds to a file: include folders and -D/-U flags, and where they came from."""

    include_dirs: tuple[str, ...] = ()
    defines: tuple[tuple[str, str | None], ...] = ()  # (NAME, value text); value None: -U NAME
    origin: str = ""  # e.g. "compile_commands.json in build/", for the summary

    def compile_flags(self) -> tuple[str, ...]:
        """The same folders and defines as flags for the compile check."""
        flags = [f"-I{d}" for d in self.include_dirs]
        flags += [f"-D{name}" if value == "1" else f"-D{name}={value}" for name, value in self.defines if value is not None]
        flags += [f"-U{name}" for name, value in self.defines if value is None]
        return tuple(flags)

    def merged(self, other: CompileContext) -> CompileContext:
        """This context with `other`'s folders and defines after it (the command line after the database)."""
        return CompileContext(tuple(dict.fromkeys((*self.include_dirs, *other.include_dirs))), (*self.defines, *other.defines),
                              ", ".join(o for o in (self.origin, other.origin) if o))


@dataclass(frozen=True)
class Header:
    path: str  # resolved path
    spelled: str  # as the #include wrote it
    src: SourceFile
    inactive: tuple[tuple[int, int], ...]


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
    bodies: dict[str, set[str]] = field(default_factory=dict)
    function_like: set[str] = field(default_factory=set)

    def define(self, table: dict[str, Macro | None], name: str, macro: Macro) -> None:
        """A #define.  Redefined differently without an #undef between, the macro has two values in one
        file (nvcc only warns): ambiguous."""
        table[name] = macro if name not in table or table[name] == macro else None
        self.bodies.setdefault(name, set()).add(macro.body)
        if macro.params is not None:
            self.function_like.add(name)


def preprocess(src: SourceFile, context: CompileContext | None = None, budget: Budget | None = None) -> Preprocessed:
    context = context or CompileContext()
    state = _State(context, budget or Budget())
    table: dict[str, Macro | None] = {name: Macro(None, value) for name, value in _BUILTIN[src.dialect].items()}
    for name, value in context.defines:
        if value is None:
            table.pop(name, None)
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
        truth = None if decided else _truth(branch, condition, table, state)
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


def _truth(branch: Node, condition: Node | None, table: Mapping[str, Macro | None], state: _State) -> bool | None:
    directive = "".join(_text(branch.children[0]).split()) if branch.children else ""  # `# ifdef` is `#ifdef`
    if directive == "#else":
        return True
    if condition is None:
        return None
    if directive in ("#ifdef", "#ifndef", "#elifdef", "#elifndef"):
        name = _text(condition)
        first = next((c for c in branch.named_children if c != condition and c.type != "comment"), None)
        if directive == "#ifndef" and first is not None and first.type == "preproc_def" and _text(first.child_by_field_name("name")) == name:
            return name not in table  # an include guard: whatever its name, the file defines it itself
        known = _defined(name, table)
        return None if known is None else known == (directive in ("#ifdef", "#elifdef"))
    value = _ConditionEvaluator(Scope(macros=table, budget=state.budget)).value(condition)
    return None if value is None else bool(value)


def _defined(name: str, table: Mapping[str, Macro | None]) -> bool | None:
    if name in table:
        return None if table[name] is None else True
    return None if _SYSTEM_NAME.match(name) else False


class _ConditionEvaluator(Evaluator):
    """#if arithmetic: `defined X`, macros expanded, undefined identifiers 0 (or unknown, see _SYSTEM_NAME)."""

    @property
    def table(self) -> Mapping[str, Macro | None]:
        return self.scope.macros

    def _value(self, node: Node, depth: int) -> Value | None:  # type: ignore[override]
        if node.type == "preproc_defined":
            names = [c for c in node.named_children if c.type == "identifier"]
            known = _defined(_text(names[0]), self.table) if names else None
            return None if known is None else int(known)
        return super()._value(node, depth)

    def _name(self, name: str, depth: int) -> Value | None:  # type: ignore[override]
        if name in ("true", "false"):
            return int(name == "true")
        if self.scope.find(name) is None and name not in self.table:
            return None if _SYSTEM_NAME.match(name) else 0
        return super()._name(name, depth)  # type: ignore[return-value]


def _include(spelled: str, table: dict[str, Macro | None], state: _State, folder: str, stack: list[str]) -> _Steps:
    where = stack[-1]
    path = _find_header(spelled, folder, state.context.include_dirs)
    if path is None:
        state.notes.append(f"header \"{spelled}\" (included from {_short(where)}) not found; macros and constants in it are unknown, and functions in it are taken not to read the block index")
        return
    if path in stack:
        state.notes.append(f"header \"{spelled}\" includes itself through {' -> '.join(_short(p) for p in stack[stack.index(path):])}; not followed again")
        return
    if len(stack) > MAX_DEPTH or len(state.headers) >= MAX_HEADERS:
        state.notes.append(f"header \"{spelled}\" not followed: more than {MAX_DEPTH} levels or {MAX_HEADERS} headers")
        return
    if path not in state.parsed:
        state.parsed[path] = _read_header(path, spelled, state)
    header = state.parsed[path]
    if header is None:
        return
    inactive: list[tuple[int, int]] = []
    yield _walk(header.tree.root_node, table, inactive, state, os.path.dirname(path), [*stack, path])
    state.headers.append(Header(path, spelled, header, tuple(inactive)))


def _include_angled(spelled: str, table: dict[str, Macro | None], state: _State, stack: list[str]) -> _Steps:
    """`#include <…>` as the compiler finds it in the -I folders, but not in a toolkit's own (the CUDA or HIP
    headers, which hold none of the project's helpers); one not found there is a system header, not read."""
    project = tuple(d for d in state.context.include_dirs if not _toolkit_folder(d))
    path = _find_header(spelled, project[0], project[1:]) if project else None
    if path is not None:
        yield _include(path, table, state, os.path.dirname(path), stack)  # found: an absolute path, found again at once


def _toolkit_folder(folder: str) -> bool:
    return any(os.path.exists(os.path.join(folder, name)) for name in ("cuda_runtime.h", "hip/hip_runtime.h"))


def _find_header(spelled: str, folder: str, include_dirs: tuple[str, ...]) -> str | None:
    for base in (folder, *include_dirs):
        candidate = os.path.abspath(os.path.join(base, spelled))
        if os.path.exists(candidate) and not os.path.isdir(candidate):
            return candidate
    return None


def _read_header(path: str, spelled: str, state: _State) -> SourceFile | None:
    data = read_regular_file(path, MAX_HEADER_BYTES)
    if isinstance(data, str):
        state.notes.append(f"header \"{spelled}\" ({path}) not read: {data}")
        return None
    if state.total_bytes + len(data) > MAX_TOTAL_BYTES:
        state.notes.append(f"header \"{spelled}\" not read: the headers of this file pass {MAX_TOTAL_BYTES >> 20} MiB")
        return None
    state.total_bytes += len(data)
    try:
        return load_bytes(path, data)
    except SwzcError as exc:  # nested too deeply to follow
        state.notes.append(f"header \"{spelled}\" not read: {exc.message}")
        return None


def read_regular_file(path: str, limit: int) -> bytes | str:
    """The bytes of a regular file of at most `limit` bytes, or why not (a FIFO or device never blocks): swzc's
    one bounded read (swzc.core.inputs), its refusal said without the path."""
    try:
        return read_regular(path, limit)
    except SwzcError as exc:
        return exc.message.removeprefix(f"{path}: ")


def _short(path: str) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


def _text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", "surrogateescape")


# ---- compile_commands.json ------------------------------------------------------------------------------


def find_compile_commands(path: str, where: str | None = None) -> Path | None:
    """`where`/compile_commands.json when given (a folder, as clang-tidy's -p), else the first one found in
    the file's folder or a folder above it."""
    if where is not None:
        candidate = Path(where)
        return candidate if candidate.is_file() else candidate / "compile_commands.json"
    folder = Path(path).resolve().parent
    for candidate in (folder, *folder.parents):
        if (candidate / "compile_commands.json").is_file():
            return candidate / "compile_commands.json"
    return None


def context_from_database(database: Path, path: str) -> tuple[CompileContext, list[str]]:
    """The include folders and defines the database gives for `path` (never run), and notes."""
    data = read_regular_file(str(database), MAX_COMPILE_COMMANDS_BYTES)
    if isinstance(data, str):
        return CompileContext(), [f"{database}: not read: {data}"]
    try:
        entries = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError) as exc:
        return CompileContext(), [f"{database}: not valid JSON ({exc}); ignored"]
    if not isinstance(entries, list):
        return CompileContext(), [f"{database}: not a list of entries; ignored"]
    target = os.path.realpath(path)
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            continue
        directory = entry.get("directory") if isinstance(entry.get("directory"), str) else str(database.parent)
        if os.path.realpath(os.path.join(directory, entry["file"])) != target:
            continue
        args = entry.get("arguments")
        if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
            try:
                args = shlex.split(entry.get("command", "")) if isinstance(entry.get("command"), str) else []
            except ValueError:
                return CompileContext(), [f"{database}: the command for {entry['file']} cannot be split; ignored"]
        context = context_from_flags(args, directory)
        return CompileContext(context.include_dirs, context.defines, f"{database}"), []
    return CompileContext(), [f"{database}: no entry for {path}"]


_FLAGS = {"-I": "include", "-isystem": "include", "-iquote": "include", "-idirafter": "include", "--include-path": "include",
          "-D": "define", "--define-macro": "define", "-U": "undefine", "--undefine-macro": "undefine"}


def context_from_flags(args: list[str], directory: str = ".") -> CompileContext:
    """-I/-isystem/--include-path folders and -D/-U defines of a compiler command line (`-Ifoo`, `-I foo`,
    `--include-path=foo` alike); every other argument is passed over."""
    includes: list[str] = []
    defines: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg in _FLAGS and i < len(args):
            kind, value = _FLAGS[arg], args[i]
            i += 1
        elif arg.startswith("--") and arg.partition("=")[0] in _FLAGS:
            kind, value = _FLAGS[arg.partition("=")[0]], arg.partition("=")[2]
        elif arg[:2] in ("-I", "-D", "-U") and len(arg) > 2:
            kind, value = _FLAGS[arg[:2]], arg[2:]
        elif arg.startswith(("-isystem", "-iquote", "-idirafter")):
            kind, value = "include", arg[len(next(f for f in ("-isystem", "-iquote", "-idirafter") if arg.startswith(f))):]
        else:
            continue
        if kind == "include":
            includes.append(os.path.normpath(os.path.join(directory, value)))
        elif kind == "define":
            name, sep, text = value.partition("=")
            defines.append((name, text if sep else "1"))
        else:
            defines.append((value, None))
    return CompileContext(tuple(dict.fromkeys(includes)), tuple(defines))


# ---- a broken parse, read again as the compiler reads it --------------------------------------------------

_DIRECTIVE_LINE = re.compile(rb"[ \t]*#[ \t]*([A-Za-z_]\w*)(.*)", re.S)


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


def _logical_lines(data: bytes) -> list[tuple[int, int, bytes]]:
    """(start, end, text) of each line, a backslash-newline joining lines, outside block comments."""
    lines = []
    at = 0
    in_comment = False
    while at < len(data):
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        while end < len(data) and data[at:end].rstrip(b"\r").endswith(b"\\"):
            nxt = data.find(b"\n", end + 1)
            end = len(data) if nxt < 0 else nxt
        text = data[at:end]
        if in_comment:
            close = text.find(b"*/")
            in_comment = close < 0
        else:
            opened = text.rfind(b"/*")
            in_comment = opened >= 0 and text.find(b"*/", opened) < 0
            lines.append((at, end, text))
        at = end + 1
    return lines


def _decided_branches(data: bytes, table: dict[str, Macro | None]) -> list[tuple[int, int]]:
    """Byte ranges to parse as spaces: every directive line of an #if chain the macros decide, and the
    branches it does not take.  A chain with a condition that cannot be decided is left whole."""
    ranges: list[tuple[int, int]] = []
    stack: list[dict] = []  # per open chain: directive lines, branches (start, truth), decided, undecidable
    budget = Budget()

    def live() -> bool | None:
        """Whether code at this point is compiled: True, False, or None (it depends on an undecided #if).
        Each open chain keeps what held around it when it opened (the chains outside it do not change while
        it is open), so only the innermost is looked at, however deep the #ifs nest."""
        if not stack:
            return True
        frame = stack[-1]
        truth = frame["branches"][-1][1]
        if truth is False or frame["outer"] is False:
            return False
        return None if truth is None or frame["unknown"] or frame["outer"] is None else True

    def condition(kind: str, rest: bytes) -> bool | None:
        text = re.sub(rb"/\*.*?\*/|//.*", b" ", rest, flags=re.S).replace(b"\\\n", b" ").strip().decode("utf-8", "replace")
        if kind in ("ifdef", "ifndef", "elifdef", "elifndef"):
            known = _defined(text.split()[0], table) if text.split() else None
            return None if known is None else known == (kind in ("ifdef", "elifdef"))
        node = _condition_node(text)
        value = _ConditionEvaluator(Scope(macros=table, budget=budget)).value(node) if node is not None else None
        return None if value is None else bool(value)

    lines = _logical_lines(data)
    for at, (start, end, text) in enumerate(lines):
        match = _DIRECTIVE_LINE.fullmatch(text.rstrip(b"\r"))
        if match is None:
            continue
        kind, rest = match.group(1).decode(), match.group(2)
        if kind in ("if", "ifdef", "ifndef"):
            outer = live()
            truth = condition(kind, rest) if outer is not False else False  # under a dead branch: dead too
            guard = rest.split()[:1]
            following = _DIRECTIVE_LINE.fullmatch(lines[at + 1][2].rstrip(b"\r")) if at + 1 < len(lines) else None
            if kind == "ifndef" and guard and following is not None and following.group(1) == b"define" \
                    and following.group(2).split()[:1] == guard and outer is not False:
                truth = guard[0].decode() not in table  # an include guard: whatever its name, the file defines it
            stack.append({"lines": [(start, end)], "branches": [(end, truth)], "decided": truth is True,
                          "unknown": truth is None, "dead": outer is False, "outer": outer})
        elif kind in ("elif", "elifdef", "elifndef", "else") and stack:
            frame = stack[-1]
            if frame["decided"] or frame["dead"]:
                truth: bool | None = False
            elif kind == "else":
                truth = None if frame["unknown"] else True
            else:
                truth = condition(kind, rest)
            frame["lines"].append((start, end))
            frame["branches"].append((end, truth))
            frame["decided"] |= truth is True and not frame["unknown"]
            frame["unknown"] |= truth is None
        elif kind == "endif" and stack:
            frame = stack.pop()
            frame["lines"].append((start, end))
            if not frame["unknown"] and not frame["dead"]:
                ranges += frame["lines"]
                bounds = [b for b, _ in frame["branches"]] + [start]
                ranges += [(bounds[i], bounds[i + 1]) for i, (_, truth) in enumerate(frame["branches"]) if truth is not True]
        elif kind in ("define", "undef") and live() is not False:
            name = re.match(rb"[ \t]*([A-Za-z_]\w*)(\()?", rest)
            if name is None:
                continue
            key = name.group(1).decode()
            if kind == "undef":
                table.pop(key, None)
                continue
            body = rest[name.end():]
            params = None
            if name.group(2):
                close = body.find(b")")
                params = tuple(p.strip().decode() for p in body[:close].split(b",") if p.strip()) if close >= 0 else ()
                body = body[close + 1:] if close >= 0 else b""
            macro = Macro(params, re.sub(rb"\\\r?\n", b" ", body).strip().decode("utf-8", "replace"))
            table[key] = macro if live() is True and (key not in table or table[key] in (None, macro)) else None
    return [(a, b) for a, b in ranges if a < b]


def _condition_node(text: str) -> Node | None:
    """An #if condition as an expression tree; `defined X` and `defined(X)` become preproc_defined."""
    from swzc.frontend.source import parse, too_deep

    tree = parse(f"#if {text}\n#endif\n".encode("utf-8", "surrogateescape"))
    if too_deep(tree) is not None:
        return None  # unknown, as a condition the evaluator cannot decide
    node = tree.root_node.child(0)
    return node.child_by_field_name("condition") if node is not None and node.type == "preproc_if" else None


def _statement_macros(data: bytes, bodies: Mapping[str, tuple[str, ...]], blanked: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Uses of a macro on lines of their own, its arguments spanning lines or not, with no semicolon after it,
    where every definition of the macro expands to whole statements (see _statements) and reads no block
    index: parsed as spaces."""
    found = []
    lines = _logical_lines(data)
    skip_to = 0
    budget = 2 * len(data) + (1 << 16)  # bytes the argument scans may cover in all: linear in the file
    aside = _Ranges(blanked)
    memo: dict = {}  # which macros read the block index, shared by every use
    for start, end, text in lines:
        if start < skip_to or aside.holds(start):
            continue
        head = _MACRO_USE.match(text)
        if head is None or head.group(2).decode() not in bodies:
            continue
        name = head.group(2).decode()
        stop = start + head.end(2)
        if head.group(3):  # the arguments: to the matching parenthesis, over lines if they go on
            close, budget = _arguments_end(data, start + head.end(3) - 1, budget)
            if close < 0:
                continue
            stop = close + 1
        line_end = data.find(b"\n", stop)
        rest = data[stop:len(data) if line_end < 0 else line_end]
        if not _NOTHING_AFTER.fullmatch(rest) or aside.meets(start, stop):
            continue
        if not all(_statements(_joined(body), bodies, memo=memo) for body in bodies[name]):
            continue
        found.append((start + head.start(2), stop))
        skip_to = stop
    return found


_MOST_ARGUMENT_BYTES = 4096  # a statement macro's arguments, over all their lines
_MACRO_USE = re.compile(rb"([ \t]*)([A-Za-z_]\w*)[ \t]*(\()?")
_NOTHING_AFTER = re.compile(rb"[ \t]*(?://[^\n]*)?\r?")
_LAST_USE = re.compile(r"\b([A-Za-z_]\w*)\s*\([^;{}]*\)$")


def _arguments_end(data: bytes, opening: int, budget: int) -> tuple[int, int]:
    """The parenthesis that closes the one at `opening` (-1 when none within _MOST_ARGUMENT_BYTES, or within
    what is left of `budget`, the bytes all such scans of a file may cover), and the budget left."""
    limit = min(len(data), opening + min(_MOST_ARGUMENT_BYTES, budget))
    close = _closing(data, opening, limit)
    return close, budget - ((close if close >= 0 else limit) - opening)


def _closing(data: bytes, opening: int, limit: int) -> int:
    """The offset of the parenthesis that closes the one at `opening`, before `limit` and past string and
    character literals (-1 when there is none, or a comment or an unclosed literal on the way makes it
    unsure)."""
    depth = 0
    for token in _ARGUMENT_TOKEN.finditer(data, opening, limit):
        kind = token.group()
        if kind == b"(":
            depth += 1
        elif kind == b")":
            depth -= 1
            if depth == 0:
                return token.start()
        elif len(kind) < 3:  # a comment, or a quote that does not close on its line
            return -1
    return -1


_ARGUMENT_TOKEN = re.compile(rb'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|//|/\*|["\'()]')


def _statements(text: str, bodies: Mapping[str, tuple[str, ...]], depth: int = 4, memo: dict | None = None) -> bool:
    """Whether a macro body expands to whole statements: empty, ending in `;` or `}`, or ending in a use of a
    macro whose bodies do (`#define ALL(t) CASE(1, t) CASE(2, t)`), and reading no block index, itself or
    through the macros it uses."""
    memo = {} if memo is None else memo
    if _reads_block(text, bodies, depth, memo):
        return False
    if not text or text.endswith((";", "}")) or _PRAGMAS.fullmatch(text):
        return True
    last = _LAST_USE.search(text)
    return depth > 0 and last is not None and last.group(1) in bodies and \
        all(_statements(_joined(b), bodies, depth - 1, memo) for b in bodies[last.group(1)])


_PRAGMAS = re.compile(r'(?:\s*(?:_Pragma|__pragma)\s*\(\s*"(?:[^"\\]|\\.)*"\s*\))+\s*')  # _Pragma("unroll 1")


def _reads_block(text: str, bodies: Mapping[str, tuple[str, ...]], depth: int, memo: dict | None = None) -> bool:
    """Whether a macro body reads the block index, or may through a macro it names (nested deeper than
    `depth`: taken as reading it).  `memo` keeps each macro's answer: a body is looked at once per depth."""
    if _BLOCK_READ.search(text):
        return True
    named = {w for w in _WORD.findall(text) if w in bodies}
    if named and depth <= 0:
        return True
    memo = {} if memo is None else memo
    for word in named:
        if (word, depth) not in memo:
            memo[(word, depth)] = any(_reads_block(_joined(b), bodies, depth - 1, memo) for b in bodies[word])
        if memo[(word, depth)]:
            return True
    return False


_WORD = re.compile(r"[A-Za-z_]\w*")


def _joined(body: str) -> str:
    """A macro body as one line: continuations joined, and a last backslash (before an empty line) dropped."""
    return re.sub(r"\\\r?\n", " ", body).rstrip("\\ \t\r\n").strip()


# What an object-like macro may expand to, to be read as nothing: qualifiers that say nothing about blocks
# (`#define RESTRICT __restrict__` in `const float * RESTRICT x`, where the grammar wants a declarator).
# A function's `__device__` and `__host__` are among them: every function a kernel calls is taken for device
# code whatever spells its qualifiers (swzc.analysis.kernels); `__global__` never is.
_QUALIFIER_WORD = (r'\b(?:__restrict__|__restrict|restrict|const|volatile|inline|__inline__|__forceinline__|__noinline__|'
                   r'static|constexpr|__device__|__host__|__grid_constant__|__shared__)\b|\bextern\s*"C"')


def _qualifier_macros(data: bytes, bodies: Mapping[str, tuple[str, ...]], function_like: set[str],
                      blanked: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Every use, outside directives, of a macro each definition of which is empty or only such qualifiers
    (launch bounds among them): parsed as spaces, as the compiler reads an empty one.  An object-like one is
    its name (`const float * RESTRICT x`); a function-like one is its name and its arguments, over lines if
    they go on (`#define LB(n) __launch_bounds__(n)`, in `__global__ LB(256) void k(…)`; the bounds then come
    from the compiler's report, or the default)."""
    names = {name.encode(): name in function_like for name, texts in bodies.items()
             if texts and all(_BOUNDS.fullmatch(_joined(t)) for t in texts)}
    if not names:
        return []
    found = []
    aside = _Ranges(blanked)
    budget = 2 * len(data) + (1 << 16)  # bytes the argument scans may cover in all: linear in the file
    for start, end, text in _logical_lines(data):
        if _DIRECTIVE_LINE.fullmatch(text.rstrip(b"\r")) or aside.holds(start):
            continue
        for m in _IDENTIFIER.finditer(text):  # one pass, however many names
            called = m.group() in names and _CALL_AFTER.match(text, m.end())
            if m.group() not in names or names[m.group()] != bool(called):
                continue
            if not called:
                found.append((start + m.start(), start + m.end()))
                continue
            close, budget = _arguments_end(data, start + text.index(b"(", m.end()), budget)
            if close >= 0:
                found.append((start + m.start(), close + 1))
    return found


_BOUNDS = re.compile(rf"(?:\s*(?:\b__launch_bounds__\s*\([^()]*\)|{_QUALIFIER_WORD}))*\s*")
_IDENTIFIER = re.compile(rb"(?<!\w)[A-Za-z_]\w*")
_CALL_AFTER = re.compile(rb"\s*\(")


class _Ranges:
    """Byte ranges [a, b), merged and sorted once, asked about by bisection."""

    def __init__(self, ranges: list[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for a, b in sorted(r for r in ranges if r[0] < r[1]):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        self.starts = [a for a, _ in merged]
        self.ends = [b for _, b in merged]

    def holds(self, at: int) -> bool:
        """Whether a range holds byte `at`."""
        i = bisect.bisect_right(self.starts, at) - 1
        return i >= 0 and at < self.ends[i]

    def meets(self, start: int, stop: int) -> bool:
        """Whether a range overlaps [start, stop)."""
        i = bisect.bisect_left(self.starts, stop) - 1  # the last range starting before stop
        return start < stop and i >= 0 and self.ends[i] > start


_BLOCK_READ = re.compile(r"\b(blockIdx|hipBlockIdx_[xyz]|gridDim|hipGridDim_[xyz])\b")
