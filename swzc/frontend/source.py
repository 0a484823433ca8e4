"""Reading and parsing a CUDA/HIP file with tree-sitter-cuda. Source stays bytes throughout."""

from __future__ import annotations

import bisect
import functools
import re
from contextvars import ContextVar
from dataclasses import dataclass

import tree_sitter_cuda
from tree_sitter import Language, Node, Parser, Tree

from swzc.core.errors import ExitCode, SwzcError
from swzc.core.inputs import read_regular
from swzc.frontend.syntax import walk

CUDA = Language(tree_sitter_cuda.language())

_HIP_HINT = re.compile(rb"#\s*include\s*[<\"]hip/|\bhipLaunchKernelGGL\b|\bhipBlockIdx_[xyz]\b|\bhipMalloc\b")


@functools.cache
def _parser() -> Parser:
    return Parser(CUDA)


def parse(data: bytes) -> Tree:
    """The tree of `data`.  A file whose last line has no newline is parsed as if it had one: a directive
    on that line (`#include <x.c>` at the very end of a file) is complete for the compiler, and the byte
    offsets of everything in the file stay the same."""
    if data and not data.endswith(b"\n"):
        return _parser().parse(data + b"\n")
    return _parser().parse(data)


@dataclass(frozen=True)
class SyntaxIssue:
    """A stretch tree-sitter could not parse (an ERROR node) or a token it had to assume (MISSING)."""

    start: int
    end: int
    line: int
    col: int
    what: str  # e.g. "cannot parse 'typeid(x)'" or "expected ';'"

    def overlaps(self, start: int, end: int) -> bool:
        """True when this issue touches the byte range [start, end] (a zero-width one at either edge too)."""
        return self.start <= end and start <= self.end if self.start == self.end else self.start < end and start < self.end


@dataclass(frozen=True)
class SourceFile:
    path: str  # as the user gave it; used in messages and patch headers
    data: bytes
    tree: Tree
    dialect: str  # "cuda" or "hip"
    errors: tuple[SyntaxIssue, ...] = ()  # what tree-sitter could not parse, in document order
    blanked: tuple[tuple[int, int], ...] = ()  # ranges parsed as spaces: #if branches never taken, statement macros

    def line_col(self, byte: int) -> tuple[int, int]:
        """1-based line and column of a byte offset."""
        line = bisect.bisect_right(self.line_starts, byte)
        return line, byte - self.line_starts[line - 1] + 1

    def line_start(self, byte: int) -> int:
        """The offset of the line that holds a byte offset (found by bisection: a file of one long line holds
        many kernels, and looking back for the newline from each would cost the line's length each time)."""
        return self.line_starts[bisect.bisect_right(self.line_starts, byte) - 1]

    def line_end(self, byte: int) -> int:
        """The offset of the newline that ends the line holding a byte offset, or the file's length."""
        at = bisect.bisect_right(self.line_starts, byte)
        return self.line_starts[at] - 1 if at < len(self.line_starts) else len(self.data)

    @functools.cached_property
    def line_starts(self) -> list[int]:
        """The offset each line starts at (found once: a file with many errors asks for many lines)."""
        return _line_starts(self.data)

    @functools.cached_property
    def names(self) -> frozenset[str]:
        """Every identifier its code spells, in its directives' text too (`#define TS TILE`), not in comments or
        strings (found once: a header of kernels is asked which of its includer's macros it may read, by each file
        of a run that includes it)."""
        found: set[str] = set()
        for node in walk(self.tree.root_node, _NOT_CODE):
            if node.type in _CODE_NAMES:
                found.add(self.text(node))
            elif node.type in ("preproc_arg", "preproc_params"):
                found.update(m.decode("ascii") for m in _NAME.findall(_COMMENT.sub(b" ", self.data[node.start_byte:node.end_byte])))
        return frozenset(found)

    @functools.cached_property
    def defined(self) -> frozenset[tuple[str, str]]:
        """Every `#define` it writes, as (name, body with its spaces made one), on any branch (found once)."""
        found = set()
        for node in walk(self.tree.root_node, _NOT_CODE):
            if node.type not in ("preproc_def", "preproc_function_def") or node.child_by_field_name("name") is None:
                continue
            value = node.child_by_field_name("value")
            found.add((self.text(node.child_by_field_name("name")), " ".join(self.text(value).split()) if value is not None else ""))
        return frozenset(found)

    def where(self, node_or_byte: Node | int) -> str:
        byte = node_or_byte if isinstance(node_or_byte, int) else node_or_byte.start_byte
        line, col = self.line_col(byte)
        return f"{self.path}:{line}:{col}"

    def text(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", "surrogateescape")

    def error_message(self, issue: SyntaxIssue) -> str:
        return f"{self.path}:{issue.line}:{issue.col}: syntax error: {issue.what}"


_NAME = re.compile(rb"[A-Za-z_][A-Za-z_0-9]*")
_COMMENT = re.compile(rb"//[^\n]*|/\*.*?\*/", re.DOTALL)
_CODE_NAMES = frozenset({"identifier", "type_identifier", "field_identifier", "namespace_identifier", "statement_identifier"})
_NOT_CODE = frozenset({"comment", "string_literal", "raw_string_literal", "char_literal", "system_lib_string"})  # no names within


def _line_starts(data: bytes) -> list[int]:
    return [0, *(m.end() for m in re.finditer(rb"\n", data))]


def detect_dialect(path: str, data: bytes) -> str:
    if path.endswith(".hip") or _HIP_HINT.search(data):
        return "hip"
    return "cuda"


# Constructs that are whole by themselves: one found complete and clean inside an ERROR node was parsed as
# what it is, and only the pieces between such constructs are what tree-sitter could not parse.
WHOLE_CONSTRUCTS = frozenset({
    "function_definition", "template_declaration", "declaration", "type_definition", "namespace_definition",
    "linkage_specification", "alias_declaration", "using_declaration", "static_assert_declaration", "comment",
    "preproc_include", "preproc_def", "preproc_function_def", "preproc_call", "preproc_if", "preproc_ifdef",
})


def _broken_runs(node: Node) -> list[tuple[int, int, Node]]:
    """An ERROR node as the stretches between the whole, clean constructs among its children (tree-sitter,
    failing late in a file, may wrap every definition before the failure in one ERROR): (start, end, first
    node of the stretch).  With no such construct inside, the node itself."""
    runs: list[tuple[int, int, Node]] = []
    first: Node | None = None
    last: Node | None = None
    for child in node.children:
        if child.type in WHOLE_CONSTRUCTS and not child.has_error and not child.is_missing:
            if first is not None and last is not None:
                runs.append((first.start_byte, last.end_byte, first))
            first = last = None
        else:
            first, last = first or child, child
    if first is not None and last is not None:
        runs.append((first.start_byte, last.end_byte, first))
    if len(runs) == 1 and runs[0][:2] == (node.start_byte, node.end_byte):
        return [(node.start_byte, node.end_byte, node)]
    return runs


def error_nodes(root: Node) -> list[tuple[int, int, Node | None]]:
    """(start, end, node) of every ERROR and MISSING node, in document order.  A MISSING token that
    tree-sitter keeps hidden (it is in no node's children) is placed, zero-width, at the end of the
    smallest node that reports an error without a child that holds it; its node is then None.  An ERROR node
    that holds whole, clean definitions is given as the stretches between them (see _broken_runs)."""
    found: list[tuple[int, int, Node | None]] = []
    stack = [root] if root.has_error else []
    while stack:
        node = stack.pop()
        if node.is_error:
            found += _broken_runs(node)
            continue
        if node.is_missing:
            found.append((node.start_byte, node.start_byte, node))
            continue
        bad = [child for child in node.children if child.has_error or child.is_missing or child.is_error]
        if not bad:
            found.append((node.end_byte, node.end_byte, None))
        stack.extend(reversed(bad))
    return found


def syntax_issues(data: bytes, tree: Tree) -> tuple[SyntaxIssue, ...]:
    issues = []
    found = error_nodes(tree.root_node)
    starts = _line_starts(data) if len(found) > 8 else None  # many errors: index the lines once
    for start, end, node in found:
        start, end = min(start, len(data)), min(end, len(data))
        if starts is not None:
            line = bisect.bisect_right(starts, start)
            col = start - starts[line - 1] + 1
        else:
            line = data.count(b"\n", 0, start) + 1
            col = start - (data.rfind(b"\n", 0, start) + 1) + 1
        if node is not None and node.is_missing:
            what = f"expected '{node.type}'"
        elif node is None:
            what = "a token is missing here"
        else:
            snippet = data[start:end].decode("utf-8", "replace").strip().splitlines()
            what = f"cannot parse {snippet[0][:40]!r}" if snippet else "cannot parse this"
        issues.append(SyntaxIssue(start, end, line, col, f"{what} (or a construct the CUDA grammar does not cover)"))
    return tuple(issues)


# Spellings nvcc takes that the grammar does not, and that say nothing about blocks: blanked out (spaces of
# the same length, so every byte offset stays) in the text tree-sitter parses.  The file itself keeps them.
_BLANKED = re.compile(
    rb"\b__align__\s*\((?:[^()\n]|\([^()\n]*\))*\)"  # struct __align__(16) S { … }; __align__(sizeof(T))
    rb"|\b__maxnreg__\s*\([^()\n]*\)"  # __global__ __maxnreg__(64) void k(…): a register cap (the compiler reports its effect)
    rb"|\b__cluster_dims__\s*\([^()\n]*\)"  # __global__ void __cluster_dims__(2, 1, 1) k(…): the analysis reads it in the file
    rb"|\bCUDART_CB\b"  # void CUDART_CB callback(cudaStream_t, …)
    # an extended lambda's attributes, on the line of its capture list: [=] __device__ (int i) { … } and
    # [=](int i) __host__ __device__ { … }; never across a line end (a macro ending in `]` or `)`)
    rb"|(?<=\])[ \t]*(?:__device__|__host__)(?:[ \t]+(?:__device__|__host__))*(?=[ \t]*\()"
    rb"|(?<=\))[ \t]*(?:__device__|__host__)(?:[ \t]+(?:__device__|__host__))*(?=[ \t]*(?:->|mutable|\{))"
    # a #pragma line (unroll, nounroll, …): the grammar takes none between a loop's head and an unbraced body;
    # it says nothing about blocks, and an edit never lands between it and its loop (swzc.analysis.kernels._insertion)
    rb"|(?<![^\n])[ \t]*#[ \t]*pragma\b[^\n]*(?:\\\r?\n[^\n]*)*"
    rb'|(?<![^\n])[ \t]*_Pragma[ \t]*\([ \t]*"(?:[^"\\\n]|\\.)*"[ \t]*\)'  # the operator, _Pragma("unroll 1"), as a line
    # an explicit instantiation (or its extern declaration) of a class template, `template struct Acc<float>;`,
    # which the grammar reads as a declaration missing its name; the class's definition is elsewhere
    rb"|(?:\bextern[ \t]+)?\btemplate[ \t]+(?:class|struct|union)[ \t]+[\w:]+[ \t]*<[^;{}]{1,400};"
    # `typename` before a dependent type called as a function, `typename K::BlockScan(smem).Sum(x)` (CUB's
    # collectives), or made from braces, `f(typename M::Tag{})`: without it the expression is a call or a
    # braced construction, which is what it does
    rb"|\btypename(?=[ \t]+(?:(?:template[ \t]+)?[A-Za-z_]\w*[ \t]*(?:<[^<>;{}()\n]*>)?[ \t]*::[ \t]*)+[A-Za-z_]\w*[ \t]*(?:\((?![ \t]*\*)|\{))"
)


def blank(data: bytes, ranges: tuple[tuple[int, int], ...] = ()) -> bytes:
    """`data` with each range turned to spaces, line ends kept: every byte offset and line stays."""
    out = bytearray(data)
    for start, end in ranges:
        out[start:end] = bytes(c if c in b"\r\n" else 32 for c in data[start:end])
    return bytes(out)


# `#if defined(X) and not Y`: C++'s alternative tokens, which the grammar's directive conditions do not take,
# as the operators they stand for, padded to the same length.
_CONDITION_LINE = re.compile(rb"^[ \t]*#[ \t]*(?:el)?if\b[^\n]*", re.M)
_ALTERNATIVE_TOKEN = re.compile(rb"\b(?:and|or|not|bitand|bitor|xor|compl|not_eq)\b")
_OPERATOR = {b"and": b"&& ", b"or": b"||", b"not": b"!  ", b"bitand": b"&     ", b"bitor": b"|    ", b"xor": b"^  ",
             b"compl": b"~    ", b"not_eq": b"!=    "}
# `#include <x.h> ` with blanks after the path: the grammar wants the line to end at the path, so the
# blanks are moved in front of it (the same bytes, the same length).
_INCLUDE_TRAILING = re.compile(rb"^([ \t]*#[ \t]*include[ \t]*)([<\"][^>\"\n]*[>\"])([ \t]+)(?=\r?$)", re.M)


def parse_view(data: bytes, blanked: tuple[tuple[int, int], ...] = ()) -> bytes:
    """The bytes tree-sitter is given: `data` with the spellings in _BLANKED and the `blanked` ranges (see
    swzc.frontend.preprocess.refine) replaced by spaces, blanks after an #include's path moved before it, and a
    launch configuration's braced sizes (`<<<n, {16, 16, 1}>>>`, which the grammar does not take) in
    parentheses: the analysis reads such a size from the file's bytes, where it is still braced."""
    view = _INCLUDE_TRAILING.sub(lambda m: m.group(1) + m.group(3) + m.group(2), data)
    view = _CONDITION_LINE.sub(lambda m: _ALTERNATIVE_TOKEN.sub(lambda t: _OPERATOR[t.group()], m.group()), view)
    view = _LAUNCH_CONFIG.sub(lambda m: m.group(0).replace(b"{", b"(").replace(b"}", b")"), view)
    view = _HIP_DYNAMIC_SHARED.sub(_dynamic_shared, view)
    return blank(_BLANKED.sub(lambda m: bytes(c if c in b"\r\n" else 32 for c in m.group(0)), view), blanked)


def _dynamic_shared(match: re.Match[bytes]) -> bytes:
    """HIP's `HIP_DYNAMIC_SHARED(type, var)` as the declaration it expands to, in as many bytes (the type and
    the name keep their places to within a byte or two, on one line)."""
    declared = b"extern __shared__ " + match.group(1) + b" " + match.group(2) + b"[]"
    return declared + b" " * (len(match.group(0)) - len(declared))


# HIP's macro for a kernel's dynamic shared memory, used as a statement on one line
_HIP_DYNAMIC_SHARED = re.compile(rb"\bHIP_DYNAMIC_SHARED[ \t]*\([ \t]*([A-Za-z_][\w:<> \t*]*?)[ \t]*,[ \t]*([A-Za-z_]\w*)[ \t]*\)")


# A launch configuration with a brace in it, on at most 400 bytes and no statement end (linear in the file)
_LAUNCH_CONFIG = re.compile(rb"<<<(?=[^;>]{0,400}\{)[^;]{0,400}?>>>")


# A syntax tree deeper than this is refused (exit 2).  tree-sitter finds a node's parent by walking down from
# the root, so each step up costs time in proportion to the node's depth, and the analysis steps up from the
# nodes it reads (to the enclosing loop, statement or function): a file of 10,000 nested `if`s or a
# 100,000-term sum would cost time growing with the square of its depth.  Real code stays far below: at most
# 166 levels over 1,215 files of cuda-samples, ggml, rodinia and LeetCUDA (a long else-if chain), and clang
# itself stops at 256 nested brackets.  Each `if`, loop, block, namespace, `#if` or `#elif`, bracket, operator
# of a chain (`a + b + …`) or template argument list adds one level or two.
MAX_NESTING = 1000


def too_deep(tree: Tree, limit: int = MAX_NESTING) -> int | None:
    """The byte offset of the first node (in document order) more than `limit` levels below the root, or
    None when there is none.  A cursor walk: no recursion, and no more than the nodes up to that one."""
    cursor = tree.walk()
    depth = 1
    while True:
        if depth > limit:
            return cursor.node.start_byte  # type: ignore[union-attr]
        if cursor.goto_first_child():
            depth += 1
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return None
            depth -= 1


def nesting_error(path: str, data: bytes, at: int, limit: int = MAX_NESTING) -> SwzcError:
    line = data.count(b"\n", 0, at) + 1
    col = at - (data.rfind(b"\n", 0, at) + 1) + 1
    return SwzcError(f"{path}:{line}:{col}: nested more than {limit} levels deep (blocks, brackets, #if or else-if chains, "
                     f"chains of operators); swzc reads at most {limit} levels", ExitCode.BAD_INPUT)


def load_bytes(path: str, data: bytes, blanked: tuple[tuple[int, int], ...] = (), max_nesting: int | None = MAX_NESTING) -> SourceFile:
    """Parse bytes.  Parts tree-sitter cannot parse are kept as `errors`: the analysis refuses the kernels
    they touch and works on the rest.  A tree more than `max_nesting` levels deep is an input error
    (SwzcError, exit 2, naming the place); None: not checked."""
    tree = parse(parse_view(data, blanked))
    deep = too_deep(tree, max_nesting) if max_nesting is not None else None
    if deep is not None:
        raise nesting_error(path, data, deep, max_nesting)  # type: ignore[arg-type]
    return SourceFile(path=path, data=data, tree=tree, dialect=detect_dialect(path, data), errors=syntax_issues(data, tree),
                      blanked=blanked)


# Inputs above this many bytes are refused (see the README's Security section); --max-bytes raises it.
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
max_input_bytes: ContextVar[int] = ContextVar("max_input_bytes", default=DEFAULT_MAX_BYTES)


def load(path: str, max_bytes: int | None = None) -> SourceFile:
    """Read and parse a source file.  It must be a regular file of at most `max_bytes` (default: the
    `max_input_bytes` in effect, which the command line's --max-bytes sets)."""
    limit = max_input_bytes.get() if max_bytes is None else max_bytes
    data = read_regular(path, limit, " (raise it with --max-bytes)")
    nul = data.find(b"\0")
    if nul >= 0:  # no compiler reads it as source: a binary (or UTF-16) file named by mistake
        line = data.count(b"\n", 0, nul) + 1
        raise SwzcError(f"{path}:{line}: not source text: a NUL byte at offset {nul} (a binary file, or text in UTF-16?)",
                        ExitCode.BAD_INPUT)
    return load_bytes(path, data)
