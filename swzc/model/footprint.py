"""Per-block footprints: what each block of a kernel reads and writes in global memory.

An address is a kernel pointer parameter (or a file-scope ``__device__`` array) plus a byte offset, with
the type it points to.  Pointer arithmetic scales by that type's size and casts change it, so ``A[i]``,
``*(int4*)&A[i]``, ``reinterpret_cast<const float4*>(A + off)[j]``, a local pointer ``p = A + off``,
``__ldg(p + i)``, ``C[i] += v``, atomics, wmma fragment loads and ``cp.async`` all become an `Access`:
the byte offset the block index moves it by (a linear function of the block's logical tile row, column
and z) plus the set of 32-byte sectors one block touches over its whole life, relative to that offset.
Translation invariance is what makes the L2 model fast: every block touches the same shape, moved by
its offset.

Inside a block an offset may be any expression of the thread index and loop variables whose C value
can be computed (``/``, ``%``, shifts, masks, min/max, ternaries).  Terms that do not share a thread or
loop variable are independent, so their sets of values are summed as interval sets (Minkowski sums);
the terms that do share one are enumerated over those variables, with numpy.  Past the enumeration
budget an access falls back to its interval bounds, a contiguous superset flagged approximate.  An
access the analysis cannot follow is never dropped: it is listed in `Footprint.unknown` with its line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Union

import numpy as np
from tree_sitter import Node

from swzc.analysis.kernels import kernel_function
from swzc.analysis.records import KernelInfo, Launch, TileLoop
from swzc.frontend.scope import local_scope
from swzc.frontend.syntax import declared_name, function_name, functions, parameter_declarations, parameter_list, text, walk
from swzc.frontend.evaluate import Evaluator, Macro, Scope, Value, expression_of
from swzc.frontend.source import SourceFile

if TYPE_CHECKING:
    from swzc.analysis.context import FileContext

MAX_POINTS = 1 << 24  # enumeration budget per set (threads x loop iterations, or intervals)
MAX_SECTORS = 1 << 24  # 32-byte sectors one access of one block may touch (512 MiB): the model lists each
ELEMENT_BYTES = {
    "char": 1, "signed char": 1, "unsigned char": 1, "bool": 1, "int8_t": 1, "uint8_t": 1, "void": 1,
    "short": 2, "unsigned short": 2, "int16_t": 2, "uint16_t": 2,
    "int": 4, "signed": 4, "unsigned": 4, "unsigned int": 4, "uint": 4, "int32_t": 4, "uint32_t": 4,
    "long": 8, "unsigned long": 8, "long long": 8, "unsigned long long": 8, "int64_t": 8, "uint64_t": 8,
    "size_t": 8, "ptrdiff_t": 8, "float": 4, "double": 8,
    "half": 2, "__half": 2, "half2": 4, "__half2": 4,
    "__nv_bfloat16": 2, "nv_bfloat16": 2, "__nv_bfloat162": 4, "nv_bfloat162": 4, "bf16": 2, "bfloat16": 2,
    "hip_bfloat16": 2, "__hip_bfloat16": 2, "__hip_bfloat162": 4,
    "__nv_fp8_e4m3": 1, "__nv_fp8_e5m2": 1, "__nv_fp8_storage_t": 1, "__nv_fp8x2_e4m3": 2, "__nv_fp8x2_e5m2": 2,
    "__nv_fp8x4_e4m3": 4, "__nv_fp8x4_e5m2": 4, "__hip_fp8_e4m3": 1, "__hip_fp8_e5m2": 1,
    "__hip_fp8_e4m3_fnuz": 1, "__hip_fp8_e5m2_fnuz": 1,
    "char2": 2, "uchar2": 2, "char4": 4, "uchar4": 4, "short2": 4, "ushort2": 4, "short4": 8, "ushort4": 8,
    "int2": 8, "uint2": 8, "int3": 12, "uint3": 12, "int4": 16, "uint4": 16,
    "float2": 8, "float3": 12, "float4": 16, "double2": 16, "longlong2": 16, "ulonglong2": 16,
}
BLOCK_SYMBOLS = ("row", "col", "z")
SECTOR = 32
_READ_CALLS = {"__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv"}
_WRITE_CALLS = {"__stcg", "__stcs", "__stwb", "__stwt"}
_ATOMIC = re.compile(r"^(atomic[A-Z]\w*|__hip_atomic\w*|unsafeAtomic\w*|safeAtomic\w*)$")
_CASTS = {"reinterpret_cast", "static_cast", "const_cast"}
_TEXTURE = re.compile(r"^(tex(1D|2D|3D|Cubemap)\w*|tex1Dfetch|tex2Dgather|surf(1D|2D|3D|Cubemap)\w*(read|write))$")
_PASSIVE = {"printf", "assert", "__syncthreads", "__syncwarp", "__threadfence", "__cvta_generic_to_shared"}
_MAX_NESTING = 4  # macro and helper expansions inside one another
_MAX_CHAIN = 64  # definitions followed one through another (`auto c = b;` where `auto b = a;` …)
_MAX_OFFSET = 1 << 62  # bytes from an array's start an access may reach (the sets of offsets are int64)


class _CannotFollow(Exception):
    """An expression outside what the analysis follows; the message says why."""


class _OverBudget(Exception):
    """A set larger than MAX_POINTS: the caller falls back to interval bounds."""


# ---- offsets: affine forms over atoms ------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """A per-block operation the analysis evaluates numerically, with C semantics: ``/`` ``%`` ``>>``
    ``<<`` ``&`` ``|`` ``^`` ``*`` ``min`` ``max`` ``?:``, comparisons, ``!`` and ``~``."""

    name: str
    args: tuple[Affine, ...]


Atom = Union[str, Op]  # a block, thread or loop symbol, or an operation on per-block values


def _atom_key(term: tuple[Atom, int]) -> tuple[bool, str]:
    """Symbols by name, then operations in the order they came (a stable sort keeps it)."""
    atom = term[0]
    return (False, atom) if isinstance(atom, str) else (True, atom.name)


@dataclass(frozen=True)
class Affine:
    """const + sum(coeff * atom).  Block symbols (row, col, z) only ever appear as plain terms: what a
    block touches is the same shape for every block, moved by the block terms."""

    terms: tuple[tuple[Atom, int], ...]
    const: int

    @staticmethod
    def of(value: int, atom: Atom | None = None) -> Affine:
        return Affine(((atom, value),), 0) if atom is not None and value else Affine((), value if atom is None else 0)

    def coeff(self, atom: Atom) -> int:
        return dict(self.terms).get(atom, 0)

    def __add__(self, other: Affine) -> Affine:
        if not other.terms:
            return Affine(self.terms, self.const + other.const)
        merged = dict(self.terms)
        for s, c in other.terms:
            merged[s] = merged.get(s, 0) + c
        return Affine(tuple(sorted(((s, c) for s, c in merged.items() if c), key=_atom_key)), self.const + other.const)

    def __sub__(self, other: Affine) -> Affine:
        return self + other.scale(-1)

    def scale(self, k: int) -> Affine:
        return Affine(tuple((s, c * k) for s, c in self.terms if c * k), self.const * k)

    @property
    def is_const(self) -> bool:
        return not self.terms

    @property
    def block(self) -> Affine:
        return Affine(tuple(t for t in self.terms if t[0] in BLOCK_SYMBOLS), 0)

    @property
    def local(self) -> Affine:
        return Affine(tuple(t for t in self.terms if t[0] not in BLOCK_SYMBOLS), self.const)


def _op(name: str, *args: Affine) -> Affine:
    """An operation on per-block values, folded when every argument is a constant."""
    if any(a.block.terms for a in args):
        raise _CannotFollow(f"{name} of a value that depends on the block index")
    if all(a.is_const for a in args):
        return Affine.of(int(_apply(name, [np.int64(a.const) for a in args])))
    return Affine.of(1, Op(name, args))


def _cdiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C division: truncates toward zero."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if np.any(b == 0):
        raise _CannotFollow("division by zero")
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def _apply(name: str, v: list) -> np.ndarray:
    if name == "/":
        return _cdiv(v[0], v[1])
    if name == "%":
        return np.asarray(v[0], dtype=np.int64) - np.asarray(v[1], dtype=np.int64) * _cdiv(v[0], v[1])
    if name == "?:":
        return np.where(np.asarray(v[0]) != 0, v[1], v[2])
    if name in ("!", "~"):
        return (np.asarray(v[0]) == 0).astype(np.int64) if name == "!" else ~np.asarray(v[0], dtype=np.int64)
    a, b = np.asarray(v[0], dtype=np.int64), np.asarray(v[1], dtype=np.int64)
    functions_ = {
        "*": np.multiply, ">>": np.right_shift, "<<": np.left_shift, "&": np.bitwise_and, "|": np.bitwise_or,
        "^": np.bitwise_xor, "min": np.minimum, "max": np.maximum, "<": np.less, ">": np.greater,
        "<=": np.less_equal, ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal,
        "&&": np.logical_and, "||": np.logical_or,
    }
    return np.asarray(functions_[name](a, b)).astype(np.int64)


# ---- sets of integers and interval sets ----------------------------------------------------------------


@dataclass(frozen=True)
class _Set:
    """A finite set of integers: the progression start + step * k for k < count, or sorted points."""

    start: int = 0
    step: int = 1
    count: int = 1
    points: np.ndarray | None = field(default=None, compare=False)

    @staticmethod
    def of_points(values: np.ndarray) -> _Set:
        values = _unique(values)
        if values.size == 0:
            return _Set(0, 1, 0)
        if values.size == 1:
            return _Set(int(values[0]), 1, 1)
        gaps = np.diff(values)
        if np.all(gaps == gaps[0]):
            return _Set(int(values[0]), int(gaps[0]), int(values.size))
        return _Set(int(values[0]), 0, int(values.size), values)

    @property
    def lo(self) -> int:
        return self.start

    @property
    def hi(self) -> int:
        return int(self.points[-1]) if self.points is not None else self.start + self.step * (self.count - 1)

    @property
    def spacing(self) -> int:
        if self.points is not None:
            return int(np.diff(self.points).min())
        return self.step if self.count > 1 else 0

    def array(self) -> np.ndarray:
        if self.points is not None:
            return self.points
        if self.count > MAX_POINTS:
            raise _OverBudget
        return self.start + self.step * np.arange(self.count, dtype=np.int64)

    def scale(self, c: int) -> _Set:
        if c == 0 or self.count == 0:
            return _Set(0, 1, min(self.count, 1))
        if self.points is not None:
            return _Set.of_points(self.points * c)
        if c >= 0 or self.count <= 1:
            return _Set(self.start * c, self.step * c if self.count > 1 else 1, self.count)
        return _Set(self.hi * c, -self.step * c, self.count)

    def clip(self, lo: int | None, hi: int | None) -> _Set:
        """The members within [lo, hi] (None: unbounded)."""
        if self.points is not None:
            keep = self.points
            keep = keep[keep >= lo] if lo is not None else keep
            keep = keep[keep <= hi] if hi is not None else keep
            return _Set.of_points(keep)
        first, last = 0, self.count - 1
        if lo is not None and self.start < lo:
            first = -((self.start - lo) // self.step)  # ceil((lo - start) / step)
        if hi is not None and self.hi > hi:
            last = (hi - self.start) // self.step
        if last < first:
            return _Set(0, 1, 0)
        return _Set(self.start + first * self.step, self.step, last - first + 1)


def _plus(a: _Set, b: _Set) -> _Set:
    """{x + y : x in a, y in b}."""
    if a.count == 0 or b.count == 0:
        return _Set(0, 1, 0)
    for x, y in ((a, b), (b, a)):
        if x.count == 1:
            return replace(y, start=y.start + x.start, points=None if y.points is None else y.points + x.start)
    if a.points is None and b.points is None:
        for x, y in ((a, b), (b, a)):
            if y.step == x.step * x.count:  # y's steps tile x's run: one longer progression
                return _Set(x.start + y.start, x.step, x.count * y.count)
    if a.count * b.count > MAX_POINTS:
        raise _OverBudget
    return _Set.of_points((a.array()[:, None] + b.array()[None, :]).ravel())


def _unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a sort: numpy's hashing unique is far slower on large integer arrays)."""
    flat = np.sort(values, axis=None)
    if flat.size <= 1:
        return flat
    keep = np.empty(flat.size, dtype=bool)
    keep[0] = True
    np.not_equal(flat[1:], flat[:-1], out=keep[1:])
    return flat[keep]


def _merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Half-open intervals, sorted and with overlapping or touching ones joined."""
    if starts.size <= 1:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    new = np.ones(starts.size, dtype=bool)
    new[1:] = starts[1:] > reach[:-1]
    at = np.flatnonzero(new)
    return starts[at], np.maximum.reduceat(ends, at)


def _intervals(pieces: list[_Set], const: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The bytes [x, x + width) for every x in const + (Minkowski sum of pieces), as merged intervals."""
    starts = np.array([const], dtype=np.int64)
    ends = starts + width
    for p in sorted(pieces, key=lambda s: s.spacing):
        if p.count == 0:
            return starts[:0], ends[:0]
        if p.count == 1:
            starts, ends = starts + p.start, ends + p.start
            continue
        if p.points is None:
            long = (ends - starts) >= p.step  # an interval at least one step long: the steps join into one
            grown_s, grown_e = starts[long] + p.start, ends[long] + p.start + p.step * (p.count - 1)
            short_s, short_e = starts[~long], ends[~long]
            shifts = p.array() if short_s.size else np.zeros(0, dtype=np.int64)
        else:
            grown_s = grown_e = np.zeros(0, dtype=np.int64)
            short_s, short_e, shifts = starts, ends, p.points
        if short_s.size * shifts.size > MAX_POINTS:
            raise _OverBudget
        starts = np.concatenate([grown_s, (short_s[:, None] + shifts[None, :]).ravel()])
        ends = np.concatenate([grown_e, (short_e[:, None] + shifts[None, :]).ravel()])
        starts, ends = _merge(starts, ends)
    return starts, ends


def _sectors(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Sorted ids of the 32-byte sectors the byte intervals cover."""
    if starts.size == 0:
        return np.zeros(0, dtype=np.int64)
    first, last = _merge(starts // SECTOR, (ends - 1) // SECTOR + 1)
    lengths = last - first
    total = int(lengths.sum())
    if total > MAX_SECTORS:  # the sizes in the file, not the machine, say how many: past this, a list would not fit
        raise _CannotFollow(f"one block touches {total:,} sectors of {SECTOR} bytes, more than the model lists ({MAX_SECTORS:,})")
    before = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.repeat(first - before, lengths) + np.arange(total, dtype=np.int64)


# ---- records ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Access:
    array: str
    write: bool
    elem_bytes: int  # bytes per element of the array as declared
    block_bytes: tuple[int, int, int]  # bytes per unit of the block's (row, col, z)
    sectors: np.ndarray  # sorted relative 32-byte sector ids one block touches over its life
    line: int
    approximate: bool = False  # the sectors are a superset (interval bounds, or loop counts of the first block)

    def __hash__(self) -> int:
        return hash((self.array, self.write, self.line, self.block_bytes))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Access) and (self.array, self.write, self.line, self.block_bytes) == (
            other.array, other.write, other.line, other.block_bytes) and np.array_equal(self.sectors, other.sectors)


@dataclass(frozen=True)
class UnknownAccess:
    """A global access the analysis could not follow, left out of the footprint."""

    line: int
    array: str  # the array's name, or the expression's text
    mode: str  # "read", "write" or "read-write"
    why: str

    @property
    def reads(self) -> bool:
        return self.mode != "write"

    def __str__(self) -> str:
        return f"line {self.line}: {self.array}: {self.why}"


@dataclass(frozen=True)
class Footprint:
    kernel: str
    grid: tuple[int, int, int]  # the blocks (or, for a tile loop, the tiles (T, 1, 1)) the order permutes
    block: tuple[int, int, int]
    tiles: tuple[int, int, int]  # the logical tile grid (rows, columns, z) the swizzle permutes
    accesses: tuple[Access, ...]
    unknown: tuple[UnknownAccess, ...]  # each global access left out, with its line and why
    threads: int
    adapter: str = "linear"  # how the grid maps to tiles: "2d", "1d" (decoded by `divisor`) or "linear"
    divisor: int = 0
    staged: bool = False  # a loop copies global data to shared memory and waits at a block barrier each pass


# ---- the kernel's expressions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Loop:
    """``for (v = start; v OP bound; v += step)``: the per-block parts of start and bound."""

    start: Affine
    bound: Affine
    step: int
    op: str  # "<", "<=", ">", ">="
    block: Affine  # the block terms of start (and of bound, when they are the same)
    approximate: bool  # a grid-stride loop: iterations counted for the first block


@dataclass(frozen=True)
class _Address:
    array: str
    offset: Affine  # bytes
    pointee: str  # the type it points to, as written


@dataclass
class _Ctx:
    """Where a macro body or an inlined helper is read: its parameters bound to the caller's argument
    expressions (read in the caller's context), anchored at the call."""

    env: dict[str, tuple[Node, _Ctx | None]]
    call: Node  # the call, in the file's tree (or, for a macro inside a macro, the outer call's anchor)
    real: bool  # the body's nodes are in the file's tree (a helper), not a parsed macro body
    depth: int
    helper: str = ""
    outer: _Ctx | None = None  # the context the call itself is in

    def anchor(self, node: Node) -> Node:
        """The node of the file's tree that stands for `node` in positions and lines."""
        return node if self.real else self.call


def _nested(env: dict[str, tuple[Node, _Ctx | None]], call: Node, real: bool, outer: _Ctx | None, helper: str = "") -> _Ctx:
    return _Ctx(env, call, real, (outer.depth if outer else 0) + 1, helper, outer)


def _where(node: Node, ctx: _Ctx | None) -> Node:
    return node if ctx is None else ctx.anchor(node)


def _home(ctx: _Ctx | None) -> _Ctx | None:
    """The helper whose body holds the code a context reads (None: the kernel's own body): where the
    definitions of its locals are read."""
    while ctx is not None and not ctx.real:
        ctx = ctx.outer
    return ctx


def _kernel_line(node: Node, ctx: _Ctx | None) -> int:
    """The line in the kernel's own body: inside a macro or helper, the line of the call."""
    while ctx is not None:
        node, ctx = ctx.call, ctx.outer
    return node.start_point.row + 1


_SCOPES = ("compound_statement", "for_statement", "function_definition", "for_range_loop", "if_statement",
           "while_statement", "do_statement", "switch_statement", "case_statement")
_BRANCHES = ("if_statement", "for_statement", "while_statement", "do_statement", "switch_statement",
             "conditional_expression", "for_range_loop", "case_statement")


class _Kernel:
    """Offsets, addresses and sets of values of expressions inside one kernel."""

    def __init__(self, file: FileContext, function: Node, ev: Evaluator, scope: Scope, type_args: Mapping[str, str],
                 launch_grid: tuple[int, int, int], block: tuple[int, int, int], tiles: tuple[int, int, int],
                 adapter: str, divisor: int | None, tile_loop: TileLoop | None) -> None:
        self.src = file.src
        self.function = function
        self.body = function.child_by_field_name("body")
        self.ev = ev
        self.scope = scope
        self.type_args = dict(type_args)
        self.launch_grid = launch_grid
        self.block = block
        self.adapter = adapter
        self.divisor = divisor
        self.tile_loop = tile_loop
        self.ranges = {"tx": block[0], "ty": block[1], "tz": block[2], "row": tiles[0], "col": tiles[1], "z": tiles[2]}
        self.loops: dict[str, _Loop] = {}
        self.loop_nodes: dict[str, Node] = {}
        self.cache: dict[tuple[int, int, str], Affine] = {}
        self.params = {p.name: p for p in parameter_list(function)}
        # pointer parameter -> the type it points to
        self.param_types = {declared_name(decl): t for decl, t in _pointer_parameters(function)}
        facts = _file_facts(file)
        self.helpers: dict[str, Node] = facts.helpers
        self.globals: dict[str, str | None] = facts.globals  # file-scope arrays: name -> element type (None: not global memory)
        # Locals of the kernel and of the helpers it can reach: definitions, moves, and what kind of thing each
        # name is.  Helpers no call can reach are left out, so each kernel costs what it reads, not the file.
        self.defs: dict[str, list[tuple[Node, Node | None]]] = {}  # name -> (where, value), in source order
        self.moves: dict[str, list[tuple[Node, Node | None, int]]] = {}  # name -> (where, step expression, sign)
        self.kinds: dict[str, list[tuple[Node, str, str]]] = {}  # name -> (declaration, "pointer"/"auto"/"local", type)
        self.reached = _reachable_helpers(self.body, self.helpers, scope)
        for root in (self.body, *(f.child_by_field_name("body") for f in self.reached)):
            self._collect(root)
        for helper in self.reached:  # a helper's pointer parameters are pointers (bound at each call)
            for decl, type_text in _pointer_parameters(helper):
                self.kinds.setdefault(declared_name(decl), []).append((decl, "pointer", type_text))
        self.sets: dict[str, _Set] = {}
        self.reaches: dict[Atom, frozenset[str]] = {}
        self.bounds: dict[Atom, tuple[int, int]] = {}  # interval bounds of each atom (_atom_bounds)
        self.structs: dict[str, tuple[int, int]] = {}  # struct name -> (size, alignment), C layout
        self.shared_structs: set[str] = set()  # structs whose methods hand out shared memory
        self.struct_nodes = facts.structs
        self.array_fields: dict[str, bool] = {}  # field name -> every field of that name is an array
        self.written: dict[tuple[str, int], bool] = {}  # (vector, its definition) -> written after it
        for node in facts.structs:
            name = text(node.child_by_field_name("name"))
            if name and b"__shared__" in (node.text or b""):
                self.shared_structs.add(name)
            parent = node.parent
            if not name and parent is not None and parent.type == "type_definition":
                names = [text(d) for d in parent.children_by_field_name("declarator") if d.type == "type_identifier"]
                name = names[0] if names else ""
            layout = self._layout(node.child_by_field_name("body"))
            if name and layout is not None:
                self.structs[name] = layout
        # A thread index divided by d and taken modulo d (warp and lane) becomes two independent digits:
        # t = d * (t / d) + t % d.  symbol -> (d, quotient symbol, remainder symbol)
        self.splits: dict[str, tuple[int, str, str]] = {}
        self.deducing: set[int] = set()  # `auto` declarations whose type is being deduced
        self.function_at: dict[Node, int] = {}  # node -> where the function holding it starts (_function_of)

    def _collect(self, root: Node) -> None:
        for node in walk(root):
            if node.type == "declaration":
                shared = any(c.type == "type_qualifier" and "__shared__" in text(c) for c in node.children)
                type_text = " ".join(text(node.child_by_field_name("type")).split())
                for decl in node.children_by_field_name("declarator"):
                    name = declared_name(decl)
                    if not name:
                        continue
                    head = decl.child_by_field_name("declarator") if decl.type == "init_declarator" else decl
                    stars = text(head).count("*") if head is not None else 0
                    kind = "local" if shared or (head is not None and "[" in text(head)) else (
                        "pointer" if stars else ("auto" if type_text == "auto" else "local"))
                    self.kinds.setdefault(name, []).append((decl, kind, type_text + "*" * max(0, stars - 1)))
                    value = decl.child_by_field_name("value") if decl.type == "init_declarator" else None
                    if value is not None and value.type in ("argument_list", "initializer_list"):
                        value = None
                    self.defs.setdefault(name, []).append((decl, value))
            elif node.type == "assignment_expression":
                target = node.child_by_field_name("left")
                if target is None or target.type != "identifier":
                    continue
                name, op = text(target), text(node.child_by_field_name("operator"))
                right = node.child_by_field_name("right")
                if _loop_update_of(node) is not None and name in _loop_var_names(_loop_update_of(node)):
                    continue  # the loop's own step
                if op == "=" and right is not None and right.type == "binary_expression" \
                        and text(right.child_by_field_name("operator")) in ("+", "-") \
                        and text(right.child_by_field_name("left")) == name:  # x = x + e: a move
                    sign = 1 if text(right.child_by_field_name("operator")) == "+" else -1
                    self.moves.setdefault(name, []).append((node, right.child_by_field_name("right"), sign))
                elif op == "=":
                    self.defs.setdefault(name, []).append((node, right))
                else:
                    self.moves.setdefault(name, []).append((node, right, {"+=": 1, "-=": -1}.get(op, 0)))
            elif node.type == "update_expression":
                target = node.child_by_field_name("argument")
                if target is None or target.type != "identifier":
                    continue
                loop = _loop_update_of(node)
                if loop is not None and text(target) in _loop_var_names(loop):
                    continue
                self.moves.setdefault(text(target), []).append((node, None, -1 if "--" in text(node) else 1))

    # -- types -------------------------------------------------------------------------------------------
    def sizeof(self, type_text: str) -> int:
        """Bytes of a type as written (0 when unknown): aliases, macros and template arguments followed."""
        if "*" in type_text:
            return 8
        return self._type_facts(type_text)[0]

    def _type_facts(self, type_text: str) -> tuple[int, int]:
        """(size, alignment) of a non-pointer type; (0, 0) when unknown."""
        written = " ".join(w for w in type_text.split() if w not in ("const", "volatile", "struct", "__restrict__"))
        name = self.scope.resolve_type(type_text)
        for _ in range(4):
            if name in self.type_args:
                name = self.scope.resolve_type(self.type_args[name])
        for candidate in (name, name.split("::")[-1].strip(), written, written.split("::")[-1].strip()):
            if candidate in ELEMENT_BYTES:
                size = ELEMENT_BYTES[candidate]
                return size, 4 if candidate.endswith("3") else size  # float3 and its kin align as their element
            if candidate in self.structs:  # a typedef'd struct resolves to its body: look its name up first
                return self.structs[candidate]
        return 0, 0

    def alignment(self, type_text: str) -> int:
        return 8 if "*" in type_text else self._type_facts(type_text)[1]

    def _layout(self, body: Node) -> tuple[int, int] | None:
        """(size, alignment) of a struct's fields in C layout; None when a field's size is not known."""
        size, align = 0, 1
        for field_node in body.named_children:
            if field_node.type == "comment":
                continue
            if field_node.type != "field_declaration":
                return None if field_node.type not in ("access_specifier", "function_definition", "declaration") else (size, align)
            type_text = " ".join(text(field_node.child_by_field_name("type")).split())
            for decl in field_node.children_by_field_name("declarator"):
                stars = "*" * text(decl).count("*")
                count = 1
                node = decl
                while node is not None and node.type == "array_declarator":
                    extent = self.ev.value(node.child_by_field_name("size"))
                    if not isinstance(extent, int):
                        return None
                    count *= extent
                    node = node.child_by_field_name("declarator")
                unit, unit_align = self.sizeof(type_text + stars), self.alignment(type_text + stars)
                if not unit or not unit_align or "bitfield_clause" in {c.type for c in field_node.children}:
                    return None
                size = -(-size // unit_align) * unit_align + unit * count
                align = max(align, unit_align)
        return -(-size // align) * align, align

    # -- integer values -----------------------------------------------------------------------------------
    def value(self, node: Node | None, ctx: _Ctx | None = None, depth: int = 0) -> Affine:
        if node is None or depth > 60:
            raise _CannotFollow("expression too deep")
        key = (node.start_byte, node.end_byte, node.type)
        if ctx is None and key in self.cache:
            return self.cache[key]
        result = self._value(node, ctx, depth + 1)
        if ctx is None:
            self.cache[key] = result
        return result

    def _value(self, node: Node, ctx: _Ctx | None, depth: int) -> Affine:
        kind = node.type
        if kind == "parenthesized_expression" and node.named_child_count == 1:
            return self.value(node.named_children[0], ctx, depth)
        if kind in ("number_literal", "true", "false", "sizeof_expression", "char_literal"):
            if kind == "sizeof_expression" and node.child_by_field_name("type") is not None:
                size = self.sizeof(text(node.child_by_field_name("type")))
                if size:
                    return Affine.of(size)
            return self._constant(node)
        if kind == "cast_expression":
            folded = self.ev.value(node) if ctx is None else None
            if isinstance(folded, int):
                return Affine.of(folded)
            return self.value(node.child_by_field_name("value"), ctx, depth)
        if kind == "field_expression":
            return self._field(node, ctx)
        if kind == "identifier":
            return self._identifier(node, ctx, depth)
        if kind == "unary_expression":
            op = text(node.child_by_field_name("operator"))
            arg = self.value(node.child_by_field_name("argument"), ctx, depth)
            if op in ("-", "+"):
                return arg.scale(-1 if op == "-" else 1)
            return _op(op, arg)
        if kind == "binary_expression":
            return self._binary(node, ctx, depth)
        if kind == "conditional_expression":
            cond = self.value(node.child_by_field_name("condition"), ctx, depth)
            yes = self.value(node.child_by_field_name("consequence"), ctx, depth)
            no = self.value(node.child_by_field_name("alternative"), ctx, depth)
            if cond.is_const:
                return yes if cond.const else no
            if yes.block != no.block:
                raise _CannotFollow(f"a choice between block-dependent values: {_short(node)}")
            return yes.block + _op("?:", cond, yes.local, no.local)
        if kind == "call_expression":
            return self._call_value(node, ctx, depth)
        if kind in ("subscript_expression", "pointer_expression") or kind == "field_expression" and "->" in text(node):
            raise _CannotFollow(f"an index read from memory: {_short(node)}")
        return self._constant(node)

    def _constant(self, node: Node) -> Affine:
        value = self.ev.value(node)
        if isinstance(value, int):
            return Affine.of(value)
        if isinstance(value, float) and value.is_integer() and node.type != "number_literal":
            return Affine.of(int(value))
        raise _CannotFollow(f"not an integer the file fixes: {_short(node)}")

    def _binary(self, node: Node, ctx: _Ctx | None, depth: int) -> Affine:
        op = text(node.child_by_field_name("operator"))
        a = self.value(node.child_by_field_name("left"), ctx, depth)
        b = self.value(node.child_by_field_name("right"), ctx, depth)
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            if a.is_const or b.is_const:
                return b.scale(a.const) if a.is_const else a.scale(b.const)
            if a.block.terms or b.block.terms:
                raise _CannotFollow(f"product of a block-dependent and a varying term: {_short(node)}")
            return _op("*", a, b)
        if op == "<<" and b.is_const and 0 <= b.const < 62:
            return a.scale(1 << b.const)
        if op in ("/", "%") and b.is_const and b.const > 0:
            return self._divide(a, b.const, op, node)
        if op == ">>" and b.is_const and 0 <= b.const < 62:
            return self._divide(a, 1 << b.const, ">>", node)
        if op == "&" and (b.is_const or a.is_const):
            mask, other = (b.const, a) if b.is_const else (a.const, b)
            if mask >= 0 and ((mask + 1) & mask) == 0:  # a low-bit mask is a remainder
                return self._divide(other, mask + 1, "&", node)
            return _op("&", other, Affine.of(mask))
        if op in ("<", ">", "<=", ">=", "==", "!=", "&&", "||", "|", "^", "&", "<<", ">>", "/", "%"):
            return _op(op, a, b)
        raise _CannotFollow(f"operator {op}: {_short(node)}")

    def _divide(self, a: Affine, d: int, op: str, node: Node) -> Affine:
        """a / d or a % d (op "/" or "%", C truncation; ">>" and "&" floor, the same on values >= 0).

        The block terms must stay outside the per-block part: exact when the block coefficients are
        multiples of d and the rest is not negative, or when the block terms that are not multiples,
        with the rest, stay in [0, d) (``blockIdx.x / n`` over a decoded grid)."""
        quotient = op in ("/", ">>")
        if not a.block.terms:
            digit = self._digit(a, d, quotient)
            if digit is not None:
                return digit
            if all(c % d == 0 for _, c in a.terms) and a.const % d == 0:
                return Affine(tuple((s, c // d) for s, c in a.terms), a.const // d) if quotient else Affine.of(0)
            operand = {"/": d, "%": d, "&": d - 1, ">>": d.bit_length() - 1}[op]
            return _op(op, a, Affine.of(operand))
        if any(c < 0 for _, c in a.block.terms):
            raise _CannotFollow(f"division of a value that falls as the block index grows: {_short(node)}")
        whole = Affine(tuple((s, c) for s, c in a.block.terms if c % d == 0), 0)
        rest = Affine(tuple((s, c) for s, c in a.block.terms if c % d), 0)
        lo, hi = self._bounds(a.local)
        rlo, rhi = self._bounds(rest)
        if rest.terms:
            if rlo + lo >= 0 and rhi + hi < d:
                return Affine(tuple((s, c // d) for s, c in whole.terms), 0) if quotient else rest + a.local
        elif lo >= 0:
            inner = self._divide(a.local, d, op, node)
            return Affine(tuple((s, c // d) for s, c in whole.terms), 0) + inner if quotient else inner
        raise _CannotFollow(f"division with a remainder that varies: {_short(node)}")

    def _digit(self, a: Affine, d: int, quotient: bool) -> Affine | None:
        """a / d and a % d of a value in [0, d), or of a thread index whose range d divides."""
        try:
            lo, hi = self._bounds(a)
        except _CannotFollow:
            return None
        if 0 <= lo and hi < d:
            return Affine.of(0) if quotient else a
        if len(a.terms) != 1 or a.const or a.terms[0][1] != 1 or not self._is_thread(a.terms[0][0]):
            return None
        t = a.terms[0][0]
        if self.ranges[t] % d or self.splits.get(t, (d,))[0] != d:
            return None
        if t not in self.splits:
            self.splits[t] = (d, f"{t}/{d}", f"{t}%{d}")
            self.ranges[f"{t}/{d}"], self.ranges[f"{t}%{d}"] = self.ranges[t] // d, d
            self.reaches.clear()
            self.sets.clear()
            self.bounds.clear()
        return Affine.of(1, self.splits[t][1 if quotient else 2])

    def _is_thread(self, symbol: Atom) -> bool:
        return isinstance(symbol, str) and symbol in self.ranges and symbol not in BLOCK_SYMBOLS

    def _field(self, node: Node, ctx: _Ctx | None) -> Affine:
        obj = text(node.child_by_field_name("argument")).lstrip(":")
        axis = text(node.child_by_field_name("field"))
        if axis in ("x", "y", "z"):
            i = "xyz".index(axis)
            if obj == "threadIdx":
                return Affine.of(1, "t" + axis)
            if obj == "blockDim":
                return Affine.of(self.block[i])
            if obj == "gridDim":
                return Affine.of(self.launch_grid[i])
            if obj in ("blockIdx", "swzc_block"):
                return self.block_index(axis)
        made = self._made_vector_part(node, axis, ctx)
        if made is not None:
            return made
        return self._constant(node)

    def _made_vector_part(self, node: Node, axis: str, ctx: _Ctx | None) -> Affine | None:
        """`p.y` of a local `int2 p = make_int2(a, b)` that nothing writes after: b.  None where it is not one."""
        base = node.child_by_field_name("argument")
        if axis not in ("x", "y", "z", "w") or base is None or base.type != "identifier" or ctx is not None and text(base) in ctx.env:
            return None
        name, at = text(base), _where(node, ctx)
        found = self._reaching(name, at)
        if found is None or found[1] is None or found[1].type != "call_expression" or _callee(found[1]) not in _VECTOR_MAKERS:
            return None
        where, value = found
        if _loop_of(where) is not None or _conditional_between(where, at) or self._written(name, where):
            raise _CannotFollow(f"{name} is a vector whose parts change after it is made")
        args = _arguments(value)
        index = "xyzw".index(axis)
        if index >= len(args):
            raise _CannotFollow(f"{_short(node)}: {name} has no part {axis}")
        return self.value(args[index], _home(ctx))

    def _written(self, name: str, where: Node) -> bool:
        """Whether the function holding `where` assigns to `name` or a part of it, or takes its address, after
        its definition (found once per definition: a kernel may read p.x many times)."""
        key = (name, where.start_byte)
        if key not in self.written:
            self.written[key] = self._writes_after(name, where)
        return self.written[key]

    def _writes_after(self, name: str, where: Node) -> bool:
        function = where
        while function.parent is not None and function.type != "function_definition":
            function = function.parent
        target = re.compile(rf"\s*\(*\s*{re.escape(name)}\s*\)*\s*(?:$|[.\[])")
        for n in walk(function):
            if n.start_byte < where.end_byte:
                continue
            if n.type == "assignment_expression" and target.match(text(n.child_by_field_name("left"))) \
                    or n.type == "update_expression" and target.match(text(n.child_by_field_name("argument"))) \
                    or n.type == "pointer_expression" and text(n.child_by_field_name("operator")) == "&" \
                    and target.match(text(n.child_by_field_name("argument"))):
                return True
        return False

    def block_index(self, axis: str) -> Affine:
        if self.tile_loop is not None:
            raise _CannotFollow("reads the block index inside the tile loop")
        return self._tile_index(axis)

    def _tile_index(self, axis: str) -> Affine:
        if self.adapter == "1d" and axis == "x":
            assert self.divisor is not None
            return Affine((("col", 1), ("row", self.divisor)), 0)
        if self.adapter == "linear" and axis == "x":
            return Affine.of(1, "col")
        if self.adapter in ("1d", "linear") and axis in ("y", "z"):
            # A 1D grid's tiles are all in x; y and z are slices, counted as z * gridDim.y + y (l2model._tiles_of).
            # That count is affine in y alone or in z alone, not in both.
            if self.launch_grid[1] > 1 and self.launch_grid[2] > 1:
                raise _CannotFollow("blockIdx.y and blockIdx.z both vary beside a 1D grid's tiles")
            return Affine.of(1 if axis == "y" else self.launch_grid[1], "z")
        return Affine.of(1, {"x": "col", "y": "row", "z": "z"}[axis])

    def _identifier(self, node: Node, ctx: _Ctx | None, depth: int) -> Affine:
        name = text(node)
        if ctx is not None and name in ctx.env:
            arg, outer = ctx.env[name]
            return self.value(arg, outer, depth)
        at = _where(node, ctx)
        hip = re.fullmatch(r"hip(ThreadIdx|BlockIdx|BlockDim|GridDim)_([xyz])", name)
        if hip:
            kind, axis = hip.groups()
            i = "xyz".index(axis)
            if kind == "ThreadIdx":
                return Affine.of(1, "t" + axis)
            if kind == "BlockIdx":
                return self.block_index(axis)
            return Affine.of((self.block if kind == "BlockDim" else self.launch_grid)[i])
        tile = self.tile_loop
        if tile is not None and name == tile.var and tile.body_start <= at.start_byte < tile.body_end:
            return self._tile_index("x")  # inside the tile loop, its variable is the linear tile index
        found = self._reaching(name, at)
        home = _home(ctx)
        if found is not None:
            where, value = found
            loop = _loop_of(where)
            if loop is not None:
                base = self._loop_var(name, where, loop, depth, home)
            else:
                if _conditional_between(where, at):
                    raise _CannotFollow(f"{name} is assigned under a condition or in a loop")
                if value is None:
                    raise _CannotFollow(f"{name} has no initialiser")
                base = self.value(value, home, depth)
            return base + self._moved(name, where, at, 1, depth, home)
        if name in self.params and name not in self.param_types and self.moves.get(name):
            base = self._constant(node)
            return base + self._moved(name, None, at, 1, depth, home)
        if name == "warpSize":
            return Affine.of(64 if self.src.dialect == "hip" else 32)  # HIP's target here: the 64-wide CDNA GPUs
        try:
            return self._constant(node)
        except _CannotFollow:
            if name in self.params and ctx is None:
                raise _CannotFollow(f"{name} is a kernel parameter the launch does not fix (use --set)") from None
            macro = self.scope.find(name)
            if isinstance(macro, Macro) and macro.params is None and expression_of(macro.body) is not None \
                    and (ctx.depth if ctx else 0) < _MAX_NESTING:
                return self.value(expression_of(macro.body), _nested({}, at, False, ctx), depth)
            raise _CannotFollow(f"{name} is not known") from None

    def _call_value(self, node: Node, ctx: _Ctx | None, depth: int) -> Affine:
        callee = _callee(node)
        args = _arguments(node)
        function = node.child_by_field_name("function")
        if function is not None and function.type == "template_function" and callee in _CASTS and len(args) == 1:
            return self.value(args[0], ctx, depth)
        if callee in ("min", "max", "umin", "umax", "__mul24", "__umul24") and len(args) == 2:
            a, b = (self.value(x, ctx, depth) for x in args)
            if callee in ("__mul24", "__umul24"):
                return self._binary_values("*", a, b, node)
            return _op(callee.lstrip("u"), a, b)
        if ctx is None:
            folded = self.ev.value(node)
            if isinstance(folded, int):
                return Affine.of(folded)
        group = self._group_call(node, ctx)
        if group is not None:
            return group
        expansion = self._expansion(node, ctx)
        if expansion is not None:
            body, inner = expansion
            return self.value(body, inner, depth)
        raise _CannotFollow(f"call to {callee}(): {_short(node)}")

    def _group_call(self, node: Node, ctx: _Ctx | None) -> Affine | None:
        """Ranks and sizes of cooperative groups: the block, a tile of N threads, the grid."""
        function = node.child_by_field_name("function")
        if function is None or function.type != "field_expression":
            return None
        group = self._group_of(function.child_by_field_name("argument"), ctx)
        if group is None:
            return None
        kind, n = group
        method = text(function.child_by_field_name("field"))
        bx, by, bz = self.block
        threads = bx * by * bz
        rank = Affine((("tx", 1), ("ty", bx), ("tz", bx * by)), 0)
        rank = Affine(tuple(t for t in rank.terms if self.ranges[t[0]] > 1), 0)
        sizes = {"block": threads, "tile": n, "grid": threads * math.prod(self.launch_grid)}
        if method in ("size", "num_threads"):
            return Affine.of(sizes[kind])
        if kind == "tile" and method in ("thread_rank", "meta_group_rank"):
            return self._divide(rank, n, "%" if method == "thread_rank" else "/", node)
        if kind == "tile" and method == "meta_group_size":
            return Affine.of(-(-threads // n))
        if kind == "block" and method == "thread_rank":
            return rank
        if kind == "grid" and method in ("thread_rank", "block_rank"):
            gx, gy, _ = self.launch_grid
            block = self.block_index("x") + self.block_index("y").scale(gx) + self.block_index("z").scale(gx * gy)
            return block.scale(threads) + rank if method == "thread_rank" else block
        return None

    def _group_of(self, obj: Node | None, ctx: _Ctx | None, depth: int = 0) -> tuple[str, int] | None:
        """("block" | "tile" | "grid", tile size) of a cooperative group expression."""
        if obj is None:
            return None
        if depth > _MAX_CHAIN:
            raise _CannotFollow(f"{_short(obj)}: a group named through more than {_MAX_CHAIN} definitions")
        if obj.type == "identifier":
            name = text(obj)
            if ctx is not None and name in ctx.env:
                return self._group_of(*ctx.env[name], depth + 1)
            found = self._kind(name, _where(obj, ctx))
            if found is None:  # `cg::thread_block_tile<32> warp = …` can parse as a comparison: read the value
                reaching = self._reaching(name, _where(obj, ctx))
                return self._group_of(reaching[1], _home(ctx), depth + 1) if reaching is not None else None
            declaration = found[0].parent
            type_text = text(declaration.child_by_field_name("type")) if declaration is not None else ""
            value = found[0].child_by_field_name("value")
            if "auto" in type_text and value is not None:
                return self._group_of(value, _home(ctx), depth + 1)
            return self._group_type(type_text, ctx)
        if obj.type == "call_expression":
            callee = _callee(obj)
            if callee.endswith("this_thread_block"):
                return "block", 0
            if callee.endswith("this_grid"):
                return "grid", 0
            if callee.endswith("tiled_partition"):
                function = obj.child_by_field_name("function")
                while function is not None and function.type == "qualified_identifier":
                    function = function.child_by_field_name("name")
                targs = function.child_by_field_name("arguments") if function is not None and function.type == "template_function" else None
                return self._group_type(f"thread_block_tile{text(targs)}", ctx) if targs is not None else None
        return None

    def _group_type(self, type_text: str, ctx: _Ctx | None) -> tuple[str, int] | None:
        tile = re.search(r"thread_block_tile\s*<\s*([^,>]+)", type_text)
        if tile:
            size = expression(tile.group(1))
            value = self.ev.value(size) if size is not None else None
            return ("tile", int(value)) if isinstance(value, int) and value > 0 else None
        if re.search(r"\bthread_block\b", type_text):
            return "block", 0
        if re.search(r"\bgrid_group\b", type_text):
            return "grid", 0
        return None

    def _binary_values(self, op: str, a: Affine, b: Affine, node: Node) -> Affine:
        if a.is_const or b.is_const:
            return b.scale(a.const) if a.is_const else a.scale(b.const)
        if a.block.terms or b.block.terms:
            raise _CannotFollow(f"product of a block-dependent and a varying term: {_short(node)}")
        return _op(op, a, b)

    def _expansion(self, call: Node, ctx: _Ctx | None) -> tuple[Node, _Ctx] | None:
        """The body of a function-like macro, or the returned expression of a one-statement helper, with
        its parameters bound to the call's arguments."""
        callee = _callee(call)
        args = _arguments(call)
        depth = ctx.depth if ctx else 0
        if depth >= _MAX_NESTING:
            return None
        macro = self.scope.find(callee)
        if isinstance(macro, Macro) and macro.params is not None and len(macro.params) == len(args):
            body = expression_of(macro.body)
            if body is not None:
                return body, _nested({p: (a, ctx) for p, a in zip(macro.params, args)}, _where(call, ctx), False, ctx)
        helper = self.helpers.get(callee)
        if helper is not None:
            statements = [s for s in helper.child_by_field_name("body").named_children if s.type != "comment"]
            if len(statements) == 1 and statements[0].type == "return_statement" and statements[0].named_child_count == 1:
                names = _parameter_names(helper)
                if len(names) == len(args):
                    return statements[0].named_children[0], _nested({p: (a, ctx) for p, a in zip(names, args)}, _where(call, ctx), True, ctx, callee)
        return None

    # -- definitions and moves ------------------------------------------------------------------------------
    def _function_of(self, node: Node) -> int:
        """Where the function holding `node` starts (-1: none, as in a macro's body), remembered for every node
        on the way up: tree-sitter finds a parent by walking down from the root, so walking up a deep tree
        again for each read would cost the square of its depth every time."""
        path = []
        at: Node | None = node
        found: int | None = None
        while at is not None and at.type != "function_definition":
            found = self.function_at.get(at)
            if found is not None:
                break
            path.append(at)
            at = at.parent
        if found is None:
            found = at.start_byte if at is not None else -1
        for passed in path:
            self.function_at[passed] = found
        return found

    def _reaching(self, name: str, use: Node) -> tuple[Node, Node | None] | None:
        """The definition of `name` that reaches `use` in straight-line code: the last one before it, in
        the same function, whose declaration's scope holds the use."""
        function_at = self._function_of(use)
        found = None
        for where, value in self.defs.get(name, []):
            if where.start_byte >= use.start_byte or self._function_of(where) != function_at:
                continue
            if where.end_byte > use.start_byte and where.type != "init_declarator":
                continue
            if where.type == "init_declarator":
                scope = _scope_of(where)
                if scope is not None and not (scope.start_byte <= use.start_byte < scope.end_byte):
                    continue
            found = (where, value)
        return found

    def _moved(self, name: str, where: Node | None, use: Node, unit: int, depth: int, home: _Ctx | None) -> Affine:
        """How far `name` has moved from its definition `where` (None: the start of the kernel) by `use`,
        through `x += e`, `x++`, `x = x + e` in straight-line code or once per iteration of a loop that
        holds the use; in units of `unit` (the pointee's size for a pointer)."""
        total = Affine.of(0)
        function_at = self._function_of(use)
        for move, step_node, sign in self.moves.get(name, []):
            if self._function_of(move) != function_at or (where is not None and move.start_byte < where.end_byte):
                continue
            if not sign:
                raise _CannotFollow(f"{name} changes at line {_line(move)} in a way the analysis does not follow")
            if where is not None and _loop_of(where) is not None:
                raise _CannotFollow(f"loop variable {name} also changes at line {_line(move)}")
            loop, guarded = _loop_holding(move)
            if guarded:
                raise _CannotFollow(f"{name} moves under a condition at line {_line(move)}")
            if loop is None or (where is not None and loop.start_byte <= where.start_byte < loop.end_byte):
                if move.end_byte <= use.start_byte:
                    total = total + self._step_of(step_node, sign, unit, depth, home)
                continue
            if not (loop.start_byte <= use.start_byte < loop.end_byte):
                if loop.start_byte > use.start_byte and not _inside_loop_with(use, loop):
                    continue  # moves only after this use
                raise _CannotFollow(f"{name} moves in the loop at line {_line(loop)}, before this use")
            if where is not None and any(not (o.start_byte <= where.start_byte < o.end_byte) for o in _loops_around(loop)):
                raise _CannotFollow(f"{name} moves in a nested loop at line {_line(loop)}")
            if where is None and _loops_around(loop):
                raise _CannotFollow(f"{name} moves in a nested loop at line {_line(loop)}")
            step = self._step_of(step_node, sign, unit, depth, home)
            if any(s in self.loop_nodes and loop.start_byte <= self.loop_nodes[s].start_byte < loop.end_byte
                   for s in _symbols(step)):
                raise _CannotFollow(f"{name} moves by a step that changes in the loop at line {_line(loop)}")
            iterations = self._iterations(loop, depth, home)
            total = total + self._binary_values("*", iterations, step, move)
            header = loop.child_by_field_name("body")
            in_header = header is not None and not (header.start_byte <= move.start_byte < header.end_byte)
            if not in_header and move.end_byte <= use.start_byte:
                total = total + step  # already moved in this iteration
        return total

    def _step_of(self, node: Node | None, sign: int, unit: int, depth: int, home: _Ctx | None) -> Affine:
        step = Affine.of(1) if node is None else self.value(node, home, depth)
        return step.scale(sign * unit)

    def _iterations(self, loop: Node, depth: int, home: _Ctx | None) -> Affine:
        """Completed iterations of a `for` loop, at a point inside it."""
        if loop.type != "for_statement":
            raise _CannotFollow(f"moves in a loop at line {_line(loop)} without a counter")
        init = loop.child_by_field_name("initializer")
        where = None
        if init is not None and init.type == "declaration":
            where = next(iter(init.children_by_field_name("declarator")), None)
        elif init is not None and init.type in ("assignment_expression", "comma_expression"):
            where = init
            while where is not None and where.type == "comma_expression":  # `a = 0, b = 4`: the counter, a
                where = where.child_by_field_name("left")
        name = _loop_var_name(loop)
        if where is None or not name:
            raise _CannotFollow(f"moves in the loop at line {_line(loop)}, which has no counter")
        var = self._loop_var(name, where, loop, depth, home)
        record = self.loops[_loop_symbol(name, where, home)]
        moved = var - record.block - record.start
        step = abs(record.step)
        moved = moved.scale(1 if record.step > 0 else -1)
        if all(c % step == 0 for _, c in moved.terms) and moved.const % step == 0:
            return Affine(tuple((s, c // step) for s, c in moved.terms), moved.const // step)
        return _op("/", moved, Affine.of(step))

    def _loop_var(self, name: str, where: Node, loop: Node, depth: int, home: _Ctx | None) -> Affine:
        names = _loop_var_names(loop)
        if names and name != names[0] and name in names[1:]:  # `for (a = …, b = …; a < n; a += s, b += t)`
            value = where.child_by_field_name("value") if where.type == "init_declarator" else where.child_by_field_name("right")
            step = _step(loop.child_by_field_name("update"), name, self, home)
            if value is None or step is None:
                raise _CannotFollow(f"loop variable {name} with a start or step the analysis cannot read")
            return self.value(value, home, depth) + self._iterations(loop, depth, home).scale(step)
        symbol = _loop_symbol(name, where, home)
        if symbol not in self.loops:
            self.loop_nodes[symbol] = loop
            value = where.child_by_field_name("value") if where.type == "init_declarator" else where.child_by_field_name("right")
            start = self.value(value, home, depth)
            cond = loop.child_by_field_name("condition")
            if cond is not None and cond.type == "condition_clause":
                cond = cond.named_children[-1] if cond.named_children else None
            while cond is not None and cond.type == "parenthesized_expression" and cond.named_child_count == 1:
                cond = cond.named_children[0]
            if cond is None or cond.type != "binary_expression":
                raise _CannotFollow(f"loop over {name} without a `{name} < bound` condition")
            op = text(cond.child_by_field_name("operator"))
            left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
            if text(right) == name and text(left) != name:
                left, right, op = right, left, {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
            if text(left) != name or op not in ("<", "<=", ">", ">=", "!="):
                raise _CannotFollow(f"loop over {name} with the condition {_short(cond)}")
            bound = self.value(right, home, depth)
            step = _step(loop.child_by_field_name("update"), name, self, home)
            if not step:
                raise _CannotFollow(f"loop over {name} with a step the analysis cannot read")
            if op == "!=":
                op = "<" if step > 0 else ">"
            if (op in ("<", "<=")) != (step > 0):
                raise _CannotFollow(f"loop over {name} that steps away from its bound")
            if bound.block.terms and bound.block != start.block:
                raise _CannotFollow(f"loop over {name} whose bound depends on the block index")
            self.loops[symbol] = _Loop(start.local, bound.local, step, op, start.block,
                                       bool(start.block.terms) and not bound.block.terms)
        return self.loops[symbol].block + Affine.of(1, symbol)

    # -- addresses ------------------------------------------------------------------------------------------------
    def address(self, node: Node | None, ctx: _Ctx | None = None, depth: int = 0) -> _Address | None:
        """The global address a pointer expression holds; None when it points to local or shared memory."""
        if node is None or depth > 60:
            raise _CannotFollow("pointer expression too deep")
        depth += 1
        kind = node.type
        if kind == "parenthesized_expression" and node.named_child_count == 1:
            return self.address(node.named_children[0], ctx, depth)
        if kind == "cast_expression":
            pointee = _pointee_of_cast(text(node.child_by_field_name("type")))
            inner = self.address(node.child_by_field_name("value"), ctx, depth)
            return replace(inner, pointee=pointee) if inner is not None else None
        if kind == "call_expression":
            callee = _callee(node)
            args = _arguments(node)
            function = node.child_by_field_name("function")
            if function is not None and function.type == "template_function" and callee in _CASTS and len(args) == 1:
                targs = function.child_by_field_name("arguments")
                inner = self.address(args[0], ctx, depth)
                return replace(inner, pointee=_pointee_of_cast(text(targs)[1:-1])) if inner is not None else None
            if callee == "__builtin_assume_aligned" and args:
                return self.address(args[0], ctx, depth)
            expansion = self._expansion(node, ctx)
            if expansion is not None:
                return self.address(expansion[0], expansion[1], depth)
            if callee in self.shared_structs:
                return None  # `SharedMemory<T>()`: a struct whose conversion hands out dynamic shared memory
            raise _CannotFollow(f"a pointer returned by {callee}()")
        if kind == "binary_expression" and text(node.child_by_field_name("operator")) in ("+", "-"):
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            minus = text(node.child_by_field_name("operator")) == "-"
            if not self.is_pointer(left, ctx) and not minus and self.is_pointer(right, ctx):
                left, right = right, left
            base = self.address(left, ctx, depth)
            if base is None:
                return None
            index = self.value(right, ctx, depth)
            return self._offset(base, index.scale(-1) if minus else index)
        if kind == "pointer_expression":
            op = text(node.child_by_field_name("operator"))
            arg = node.child_by_field_name("argument")
            if op == "&":
                return self._address_of(arg, ctx, depth)
            base = self.address(arg, ctx, depth)
            if base is None:
                return None
            raise _CannotFollow(f"a pointer read from memory: {_short(node)}")
        if kind == "subscript_expression":
            base = self.address(node.child_by_field_name("argument"), ctx, depth)
            if base is None:
                return None
            raise _CannotFollow(f"a pointer read from memory: {_short(node)}")
        if kind == "identifier":
            return self._pointer_identifier(node, ctx, depth)
        if kind == "field_expression":
            obj = node.child_by_field_name("argument")
            if text(node.child_by_field_name("operator")) == "." and obj is not None and self._is_local(obj, ctx):
                field = text(node.child_by_field_name("field"))
                if self._array_field(field) or field == "x" and "fragment" in self._declared_type(obj, ctx):
                    return None  # an array inside a local or shared struct (a WMMA fragment's elements: x[])
                raise _CannotFollow(f"a pointer held in a local struct: {_short(node)}")
            raise _CannotFollow(f"a pointer held in a struct: {_short(node)}")
        if kind == "conditional_expression":
            yes = self.address(node.child_by_field_name("consequence"), ctx, depth)
            no = self.address(node.child_by_field_name("alternative"), ctx, depth)
            if yes is None and no is None:
                return None
            raise _CannotFollow(f"a pointer chosen at run time: {_short(node)}")
        raise _CannotFollow(f"a pointer the analysis does not follow: {_short(node)}")

    def _address_of(self, arg: Node | None, ctx: _Ctx | None, depth: int) -> _Address | None:
        while arg is not None and arg.type == "parenthesized_expression" and arg.named_child_count == 1:
            arg = arg.named_children[0]
        if arg is None:
            raise _CannotFollow("address of nothing")
        if arg.type == "subscript_expression":
            return self.element(arg, ctx, depth)[0]
        if arg.type == "pointer_expression" and text(arg.child_by_field_name("operator")) == "*":
            return self.address(arg.child_by_field_name("argument"), ctx, depth)
        if self._is_local(arg, ctx):
            return None
        raise _CannotFollow(f"the address of {_short(arg)}")

    def element(self, node: Node, ctx: _Ctx | None, depth: int = 0) -> tuple[_Address | None, int]:
        """The address of `base[index]` and the element's size."""
        base = self.address(node.child_by_field_name("argument"), ctx, depth)
        if base is None:
            return None, 0
        size = self.sizeof(base.pointee)
        if not size:
            raise _CannotFollow(_size_unknown(base.pointee))
        indices = node.child_by_field_name("indices")
        items = [c for c in indices.named_children if c.type != "comment"] if indices is not None else []
        if len(items) != 1:
            raise _CannotFollow(f"subscript {_short(node)}")
        return self._offset(base, self.value(items[0], ctx, depth)), size

    def _offset(self, base: _Address, index: Affine) -> _Address:
        if index.is_const and index.const == 0:
            return base
        size = self.sizeof(base.pointee)
        if not size:
            raise _CannotFollow(_size_unknown(base.pointee))
        return replace(base, offset=base.offset + index.scale(size))

    def _pointer_identifier(self, node: Node, ctx: _Ctx | None, depth: int) -> _Address | None:
        name = text(node)
        if ctx is not None and name in ctx.env:
            arg, outer = ctx.env[name]
            return self.address(arg, outer, depth)
        at = _where(node, ctx)
        kind = self._kind(name, at)
        if kind is not None and kind[1] == "local":
            return None
        if kind is not None and kind[1] == "self":
            raise _CannotFollow(f"{name} is defined in terms of itself")
        found = self._reaching(name, at)
        home = _home(ctx)
        if found is not None and (kind is not None or name in self.param_types):
            where, value = found
            if _loop_of(where) is not None:
                raise _CannotFollow(f"a pointer that is a loop variable: {name}")
            if _conditional_between(where, at):
                defs = [v for w, v in self.defs.get(name, []) if self._function_of(w) == self._function_of(at)]
                if all(v is not None and self._points_local(v, home) for v in defs):
                    return None
                raise _CannotFollow(f"{name} is assigned under a condition or in a loop")
            if value is None:
                raise _CannotFollow(f"{name} has no initialiser")
            base = self.address(value, home, depth)
            if base is None:
                return None
            if kind is not None and kind[1] == "pointer":
                base = replace(base, pointee=kind[2])
            return self._moved_address(base, name, where, at, depth, home)
        if name in self.param_types and self._function_of(at) == self.function.start_byte:
            base = _Address(name, Affine.of(0), self.param_types[name])
            return self._moved_address(base, name, None, at, depth, home)
        if name in self.globals:
            element = self.globals[name]
            return None if element is None else _Address(name, Affine.of(0), element)
        if kind is not None:
            raise _CannotFollow(f"{name} has no definition before this use")
        macro = self.scope.find(name)
        if isinstance(macro, Macro) and macro.params is None and expression_of(macro.body) is not None \
                and (ctx.depth if ctx else 0) < _MAX_NESTING:
            return self.address(expression_of(macro.body), _nested({}, at, False, ctx), depth)
        raise _CannotFollow(f"{name} is not a kernel parameter or a local")

    def _moved_address(self, base: _Address, name: str, where: Node | None, at: Node, depth: int,
                       home: _Ctx | None) -> _Address:
        if not self.moves.get(name):
            return base
        size = self.sizeof(base.pointee)
        if not size:
            raise _CannotFollow(_size_unknown(base.pointee))
        return replace(base, offset=base.offset + self._moved(name, where, at, size, depth, home))

    def _kind(self, name: str, at: Node) -> tuple[Node, str, str] | None:
        """The declaration of a local `name` visible at `at`: (declaration, kind, pointee type)."""
        function_at = self._function_of(at)
        found = None
        for decl, kind, type_text in self.kinds.get(name, []):
            if decl.start_byte >= at.start_byte or self._function_of(decl) != function_at:
                continue
            scope = _scope_of(decl)
            if scope is not None and not (scope.start_byte <= at.start_byte < scope.end_byte):
                continue
            found = (decl, kind, type_text)
        if found is not None and found[1] == "auto":
            value = found[0].child_by_field_name("value")
            if value is None:
                return found[0], "local", ""
            if found[0].start_byte in self.deducing:  # `auto p = p + 1` names itself
                return found[0], "self", ""
            if len(self.deducing) >= _MAX_CHAIN:  # `auto b = a; auto c = b; …`, each deduced from the one before
                raise _CannotFollow(f"{name}: its type is deduced through more than {_MAX_CHAIN} `auto` definitions")
            self.deducing.add(found[0].start_byte)
            try:
                pointer = self.is_pointer(value, None)
            finally:
                self.deducing.discard(found[0].start_byte)
            return found[0], "auto-pointer" if pointer else "local", ""
        return found

    def _declared_type(self, obj: Node, ctx: _Ctx | None) -> str:
        """The type a local's declaration spells (`wmma::fragment<…>` of `acc.x`), or ""."""
        while obj.type in ("field_expression", "subscript_expression") and obj.child_by_field_name("argument") is not None:
            obj = obj.child_by_field_name("argument")
        if obj.type != "identifier" or ctx is not None and text(obj) in ctx.env:
            return ""
        kind = self._kind(text(obj), _where(obj, ctx))
        return kind[2] if kind is not None else ""

    def _array_field(self, field: str) -> bool:
        """Every field named `field` in the file's structs is an array (its storage is the struct's own, so a
        local struct's is local memory).  A pointer field, or one not found, may hold a global address."""
        if field in self.array_fields:
            return self.array_fields[field]
        self.array_fields[field] = found = self._every_field_an_array(field)
        return found

    def _every_field_an_array(self, field: str) -> bool:
        found = False
        for struct in self.struct_nodes:
            for decl in walk(struct.child_by_field_name("body")):
                if decl.type != "field_declaration":
                    continue
                for declarator in decl.children_by_field_name("declarator"):
                    if declared_name(declarator) != field:
                        continue
                    if declarator.type != "array_declarator":
                        return False
                    found = True
        return found

    def _is_local(self, node: Node, ctx: _Ctx | None) -> bool:
        """A local variable (scalar, struct, array, shared array), or a member or element of one."""
        while node.type in ("field_expression", "subscript_expression", "parenthesized_expression"):
            inner = node.child_by_field_name("argument") if node.type != "parenthesized_expression" else (
                node.named_children[0] if node.named_child_count == 1 else None)
            if inner is None:
                return False
            if node.type == "field_expression" and text(node.child_by_field_name("operator")) == "->":
                return False
            node = inner
        if node.type != "identifier":
            return False
        name = text(node)
        if ctx is not None and name in ctx.env:
            arg, outer = ctx.env[name]
            return self._is_local(arg, outer)
        kind = self._kind(name, _where(node, ctx))
        if kind is not None:
            return kind[1] == "local"
        return name in self.globals and self.globals[name] is None

    def _points_local(self, value: Node, home: _Ctx | None) -> bool:
        try:
            return self.address(value, home) is None
        except _CannotFollow:
            return False

    def is_pointer(self, node: Node | None, ctx: _Ctx | None) -> bool:
        """Whether an expression is a pointer (or an array), by its form and the declarations it names.  The
        parts that may make it one (`(p)`, `p + i`, `i + p`, `c ? p : q`) are looked at left to right from a
        stack of their own: a 100,000-term sum nests as deep as it is long."""
        todo: list[tuple[Node | None, _Ctx | None]] = [(node, ctx)]
        while todo:
            node, ctx = todo.pop()
            if node is None:
                continue
            kind = node.type
            if kind == "parenthesized_expression":
                if node.named_child_count == 1:
                    todo.append((node.named_children[0], ctx))
            elif kind == "binary_expression" and text(node.child_by_field_name("operator")) in ("+", "-"):
                if text(node.child_by_field_name("operator")) == "+":
                    todo.append((node.child_by_field_name("right"), ctx))
                todo.append((node.child_by_field_name("left"), ctx))
            elif kind == "conditional_expression":
                todo.append((node.child_by_field_name("consequence"), ctx))
            elif kind == "identifier" and ctx is not None and text(node) in ctx.env:
                todo.append(ctx.env[text(node)])
            elif self._pointer_form(node, ctx):
                return True
        return False

    def _pointer_form(self, node: Node, ctx: _Ctx | None) -> bool:
        """is_pointer for an expression that is not made of others that may be pointers."""
        kind = node.type
        if kind == "cast_expression":
            return "*" in text(node.child_by_field_name("type"))
        if kind == "call_expression":
            function = node.child_by_field_name("function")
            if function is not None and function.type == "template_function" and _callee(node) in _CASTS:
                return "*" in text(function.child_by_field_name("arguments"))
            return _callee(node) == "__builtin_assume_aligned"
        if kind == "pointer_expression":
            return text(node.child_by_field_name("operator")) == "&"
        if kind == "identifier":
            name = text(node)
            at = _where(node, ctx)
            found = self._kind(name, at)
            if found is not None:
                return found[1] in ("pointer", "auto-pointer", "self") or (found[1] == "local" and "[" in text(found[0]).split("=")[0])
            return (name in self.param_types and self._function_of(at) == self.function.start_byte) or name in self.globals
        return False

    # -- sets of values ---------------------------------------------------------------------------------------------
    def _reach(self, atom: Atom) -> frozenset[str]:
        """The thread and loop symbols an atom's value depends on (a loop through its start and bound)."""
        if atom in self.reaches:
            return self.reaches[atom]
        if isinstance(atom, Op):
            found = frozenset().union(*(self._reach(s) for a in atom.args for s, _ in a.terms)) if atom.args else frozenset()
        elif atom in self.loops:
            loop = self.loops[atom]
            found = frozenset({atom}).union(*(self._reach(s) for form in (loop.start, loop.bound) for s, _ in form.terms))
        elif atom in self.splits:
            found = self._reach(self.splits[atom][1]) | self._reach(self.splits[atom][2])
        else:
            found = frozenset({atom})
        self.reaches[atom] = found
        return found

    def _groups(self, form: Affine) -> list[Affine]:
        """The terms of a per-block form, grouped so that no two groups share a thread or loop symbol."""
        groups: list[tuple[frozenset[str], list[tuple[Atom, int]]]] = []
        for term in form.terms:
            reach = self._reach(term[0])
            joined = [g for g in groups if g[0] & reach]
            rest = [g for g in groups if not g[0] & reach]
            merged = frozenset(reach).union(*(g[0] for g in joined))
            groups = rest + [(merged, [t for g in joined for t in g[1]] + [term])]
        return [Affine(tuple(sorted(terms, key=_atom_key)), 0) for _, terms in groups]

    def _group_set(self, form: Affine) -> _Set:
        if len(form.terms) == 1 and isinstance(form.terms[0][0], str):
            atom, c = form.terms[0]
            if self._is_thread(atom):
                return _Set(0, 1, self.ranges[atom]).scale(c)
            return self._loop_set(atom).scale(c)
        return _Set.of_points(self._enumerate(form))

    def set_of(self, form: Affine) -> _Set:
        """Every value a per-block form takes over the block's threads and loop iterations."""
        result = _Set(form.const, 1, 1)
        for piece in sorted((self._group_set(g) for g in self._groups(form)), key=lambda s: s.spacing):
            result = _plus(result, piece)
        return result

    def _loop_set(self, symbol: str) -> _Set:
        """The values a loop variable takes, over every thread and every iteration of enclosing loops."""
        if symbol in self.sets:
            return self.sets[symbol]
        loop = self.loops[symbol]
        count = self._count(symbol)
        if count == 0:
            result = _Set(0, 1, 0)
        elif loop.bound.is_const:
            # each thread runs while below the bound: the union is every start + k * step below it
            runs = _Set(0, loop.step, count) if loop.step > 0 else _Set(loop.step * (count - 1), -loop.step, count)
            whole = _plus(self.set_of(loop.start), runs)
            limit = loop.bound.const
            result = whole.clip(None, limit - (loop.op == "<")) if loop.step > 0 else whole.clip(limit + (loop.op == ">"), None)
        else:
            result = _Set.of_points(self._enumerate(Affine.of(1, symbol), frozenset({symbol})))
        self.sets[symbol] = result
        return result

    def _count(self, symbol: str) -> int:
        """Iterations of a loop: enough for every thread and every value of the enclosing loops."""
        loop = self.loops[symbol]
        slo, shi = self._bounds(loop.start)
        blo, bhi = self._bounds(loop.bound)
        if loop.step > 0:
            span = bhi + (loop.op == "<=") - slo
        else:
            span = shi - (blo - (loop.op == ">="))
        return max(0, -(-span // abs(loop.step)))

    def _enumerate(self, form: Affine, expand_only: frozenset[str] = frozenset()) -> np.ndarray:
        """The values of a per-block form over a grid of the symbols it depends on, with loop masks.  A
        loop variable whose own dependencies nothing else in the form uses is one axis of its values."""
        direct: set[str] = set()
        for atom, _ in form.terms:
            direct |= _symbols_of(atom)
        collapsed = []
        for s in sorted(direct):
            if s in self.loops and s not in expand_only:
                others = frozenset().union(*(self._reach(t) for t in direct if t != s))
                if s not in others and not (self._reach(s) - {s}) & others:
                    collapsed.append(s)
        expand = frozenset().union(*(self._reach(s) for s in direct if s not in collapsed))
        axes: list[tuple[str, np.ndarray]] = [(s, self._loop_set(s).array()) for s in collapsed]
        axes += [(s, np.arange(self.ranges[s], dtype=np.int64)) for s in sorted(expand) if self._is_thread(s)]
        ordered = [s for s in self.loops if s in expand]  # outer loops were recorded first
        axes += [("#" + s, np.arange(self._count(s), dtype=np.int64)) for s in ordered]
        size = math.prod(a.size for _, a in axes)
        if size > MAX_POINTS:
            raise _OverBudget
        if size == 0:
            return np.zeros(0, dtype=np.int64)
        grids = np.meshgrid(*[a for _, a in axes], indexing="ij", sparse=True) if axes else []
        env: dict[str, np.ndarray] = {name: g for (name, _), g in zip(axes, grids)}
        for t in reversed(self.splits):  # a split thread index from its digits, innermost split first
            d, q, r = self.splits[t]
            if q in env and r in env:
                env[t] = d * env[q] + env[r]
        keep: np.ndarray | bool = True
        for s in ordered:
            loop = self.loops[s]
            env[s] = _evaluate(loop.start, env) + loop.step * env["#" + s]
            limit = _evaluate(loop.bound, env)
            keep = keep & _compare(loop.op, env[s], limit)
        values = np.broadcast_to(_evaluate(form, env), tuple(a.size for _, a in axes) or (1,))
        if keep is True:
            return _unique(values)
        return _unique(values[np.broadcast_to(keep, values.shape)])

    def _bounds(self, form: Affine) -> tuple[int, int]:
        """Interval bounds of a form over one block (block symbols over the tile grid)."""
        lo = hi = form.const
        for atom, c in form.terms:
            alo, ahi = self._atom_bounds(atom)
            lo, hi = lo + min(c * alo, c * ahi), hi + max(c * alo, c * ahi)
        return lo, hi

    def _atom_bounds(self, atom: Atom) -> tuple[int, int]:
        """Interval bounds of one atom, found once: a loop's bounds read the enclosing loop's twice (its start
        and its trip count), so nested loops that start where the enclosing one is would cost 4^depth."""
        if atom not in self.bounds:
            self.bounds[atom] = self._new_atom_bounds(atom)
        return self.bounds[atom]

    def _new_atom_bounds(self, atom: Atom) -> tuple[int, int]:
        if isinstance(atom, str):
            if atom in self.ranges:
                return 0, self.ranges[atom] - 1
            loop = self.loops[atom]
            slo, shi = self._bounds(loop.start)
            blo, bhi = self._bounds(loop.bound)
            count = max(1, self._count(atom))
            if loop.step > 0:
                return slo, max(slo, min(bhi - (loop.op == "<"), shi + loop.step * (count - 1)))
            return min(shi, max(blo + (loop.op == ">"), slo + loop.step * (count - 1))), shi
        args = [self._bounds(a) for a in atom.args]
        name = atom.name
        if name in ("<", ">", "<=", ">=", "==", "!=", "&&", "||", "!"):
            return 0, 1
        if name == "?:":
            return min(args[1][0], args[2][0]), max(args[1][1], args[2][1])
        if name in ("min", "max"):
            pick = min if name == "min" else max
            return pick(args[0][0], args[1][0]), pick(args[0][1], args[1][1])
        if name == "~":
            return ~args[0][1], ~args[0][0]
        (alo, ahi), (blo, bhi) = args[0], args[1] if len(args) > 1 else (0, 0)
        if name == "*":
            corners = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
            return min(corners), max(corners)
        if name == "/" and blo > 0:
            return min(int(_cdiv(alo, blo)), int(_cdiv(alo, bhi))), max(int(_cdiv(ahi, blo)), int(_cdiv(ahi, bhi)))
        if name == "%" and blo > 0:
            if alo >= 0:
                return (alo, ahi) if ahi < blo else (0, bhi - 1)
            return -(bhi - 1), bhi - 1
        if name == ">>" and blo >= 0:
            return alo >> bhi if alo >= 0 else alo >> blo, ahi >> blo if ahi >= 0 else ahi >> bhi
        if name == "<<" and blo >= 0 and alo >= 0:
            return alo << blo, ahi << bhi
        if name == "&" and (blo >= 0 or alo >= 0):
            return 0, min(x for x in (ahi if alo >= 0 else None, bhi if blo >= 0 else None) if x is not None)
        if name in ("|", "^") and alo >= 0 and blo >= 0:
            return 0, (1 << max(ahi, bhi).bit_length()) - 1
        raise _CannotFollow(f"no bounds for {name}")

    def touched(self, address: _Address, width: int, rows: tuple[int, int] | None = None) -> tuple[tuple[int, int, int], np.ndarray, bool]:
        """(block bytes, sectors one block touches, approximate) for `width` bytes at `address`; `rows`:
        (count, stride in bytes) of a fragment's rows."""
        form = address.offset
        block_bytes = (form.coeff("row"), form.coeff("col"), form.coeff("z"))
        local = form.local
        try:
            lo, hi = self._bounds(local)
        except _CannotFollow:  # no interval for it: its values are enumerated below, where none is needed
            lo = hi = 0
        reach = sum(abs(c) * self.ranges[s] for c, s in zip(block_bytes, BLOCK_SYMBOLS)) + max(abs(lo), abs(hi)) + width
        if reach >= _MAX_OFFSET:  # sizes no memory has, which 64-bit sets of offsets would not hold either
            raise _CannotFollow(f"offsets of {reach:,} bytes from the array's start, past 2^62")
        approximate = any(self.loops[s].approximate for atom, _ in local.terms for s in self._reach(atom) if s in self.loops)
        extra = [_Set(0, rows[1], rows[0])] if rows is not None and rows[0] > 1 else []
        pieces = []
        for group in self._groups(Affine(local.terms, 0)):
            try:
                pieces.append(self._group_set(group))
            except _OverBudget:  # a contiguous superset of this group's values
                lo, hi = self._bounds(group)
                pieces.append(_Set(lo, 1, hi - lo + 1))
                approximate = True
        try:
            try:
                starts, ends = _intervals(pieces + extra, local.const, width)
            except _OverBudget:
                lo = local.const + sum(p.lo for p in pieces + extra)
                hi = local.const + sum(p.hi for p in pieces + extra) + width
                starts, ends = np.array([lo], dtype=np.int64), np.array([hi], dtype=np.int64)
                approximate = True
            return block_bytes, _sectors(starts, ends), approximate  # type: ignore[return-value]
        except OverflowError:  # an offset past int64 on the way, where the bounds above were not known
            raise _CannotFollow("offsets past what 64 bits hold") from None


def _evaluate(form: Affine, env: Mapping[str, np.ndarray]) -> np.ndarray | int:
    out: np.ndarray | int = form.const
    for atom, c in form.terms:
        if isinstance(atom, Op):
            value = _apply(atom.name, [_evaluate(a, env) for a in atom.args])
        else:
            value = env[atom]
        out = out + c * value
    return out


def _compare(op: str, a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
    return {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}[op](a, b)


def _symbols_of(atom: Atom) -> set[str]:
    if isinstance(atom, str):
        return {atom}
    return set().union(*(_symbols_of(s) for a in atom.args for s, _ in a.terms)) if atom.args else set()


def _symbols(form: Affine) -> set[str]:
    return set().union(*(_symbols_of(a) for a, _ in form.terms)) if form.terms else set()


# ---- tree helpers ---------------------------------------------------------------------------------------------


def _line(node: Node) -> int:
    return node.start_point.row + 1


def _short(node: Node) -> str:
    return " ".join(text(node).split())[:60]


# the CUDA vector makers whose arguments are the parts x, y, z, w in order
_VECTOR_MAKERS = frozenset(f"make_{t}{n}" for t in ("int", "uint", "short", "ushort", "long", "ulong", "longlong", "ulonglong",
                                                    "char", "uchar") for n in (1, 2, 3, 4))


def _callee(call: Node) -> str:
    """The called function's own name: no namespace, no template arguments (`wmma::load_matrix_sync`,
    `cg::tiled_partition<32>` -> `load_matrix_sync`, `tiled_partition`); `obj.f` for a method."""
    function = call.child_by_field_name("function")
    while function is not None and function.type in ("qualified_identifier", "template_function"):
        function = function.child_by_field_name("name")
    return text(function)


def _arguments(call: Node) -> list[Node]:
    args = call.child_by_field_name("arguments")
    return [c for c in args.named_children if c.type != "comment"] if args is not None else []


def _pointee_of_cast(type_text: str) -> str:
    """`const float4*` -> `const float4`; a cast to a non-pointer type is not followed."""
    stripped = " ".join(type_text.split())
    if not stripped.endswith("*"):
        raise _CannotFollow(f"a pointer cast to {stripped}")
    return stripped[:-1].strip()


def _parameter_names(function: Node) -> list[str]:
    """Names of a function's parameters, references (`const T& x`) included."""
    names = []
    for p in parameter_declarations(function):
        decl = p.child_by_field_name("declarator")
        found = [text(n) for n in walk(decl) if n.type == "identifier"] if decl is not None else []
        names.append(declared_name(decl) or (found[0] if found else ""))  # `const T& x`: the first identifier
    return names


def _file_scope_declarations(root: Node) -> Iterator[Node]:
    """Declarations outside any function: at the top, in namespaces, in #if blocks and include guards."""
    stack = list(reversed(root.children))
    while stack:
        node = stack.pop()
        if node.type == "declaration":
            yield node
        elif node.type not in ("function_definition", "struct_specifier", "class_specifier", "field_declaration_list"):
            stack.extend(reversed(node.children))


@dataclass(frozen=True)
class _FileFacts:
    """What every kernel's footprint reads from the whole file, found once per file."""

    helpers: dict[str, Node]  # __device__ functions with a body (not kernels), by name: the first definition
    globals: dict[str, str | None]  # file-scope arrays: name -> element type (None: shared or constant memory)
    structs: tuple[Node, ...]  # struct and class definitions with a body
    shared: frozenset[str] = frozenset()  # file-scope __shared__ arrays (extern __shared__ buffers, say)


def _file_facts(ctx: FileContext) -> _FileFacts:
    """The file's facts, found once per file (kept in its context: one analysis asks for many kernels)."""
    if ctx.footprint_facts is None:
        ctx.footprint_facts = _find_file_facts(ctx.src)
    return ctx.footprint_facts


def _find_file_facts(src: SourceFile) -> _FileFacts:
    helpers: dict[str, Node] = {}
    for f, _ in functions(src.tree.root_node):
        if f.child_by_field_name("body") is not None and any(c.type == "__device__" for c in f.children) \
                and not any(c.type == "__global__" for c in f.children):
            helpers.setdefault(function_name(f), f)
    arrays: dict[str, str | None] = {}
    shared: set[str] = set()
    for node in _file_scope_declarations(src.tree.root_node):
        if node.type == "declaration":
            words = {c.type for c in node.children} | set(text(node).split("=")[0].split())
            local = "__shared__" in words or "__constant__" in words
            if "__shared__" in words:
                shared.update(declared_name(d) for d in node.children_by_field_name("declarator"))
            for decl in node.children_by_field_name("declarator"):
                if decl.type in ("array_declarator", "pointer_declarator", "init_declarator") and ("[" in text(decl).split("=")[0]):
                    arrays[declared_name(decl)] = None if local else " ".join(text(node.child_by_field_name("type")).split())
    structs = tuple(node for node in walk(src.tree.root_node)
                    if node.type in ("struct_specifier", "class_specifier") and node.child_by_field_name("body") is not None)
    return _FileFacts(helpers, arrays, structs, frozenset(shared))


_WORD = re.compile(r"[A-Za-z_]\w*")


def _reachable_helpers(body: Node | None, helpers: Mapping[str, Node], scope: Scope) -> list[Node]:
    """The helpers a kernel body can reach: named in it, in a helper it reaches, or in the body of a macro
    named there (a superset of the calls the footprint follows), in the file's order."""
    found: dict[str, Node] = {}
    macros_seen: set[str] = set()
    pending = [text(body)] if body is not None else []
    while pending:
        for word in set(_WORD.findall(pending.pop())):
            if word in helpers and word not in found:
                found[word] = helpers[word]
                pending.append(text(helpers[word].child_by_field_name("body")))
            elif word not in macros_seen:
                macros_seen.add(word)
                macro = scope.find(word)
                if isinstance(macro, Macro):
                    pending.append(macro.body)
    return sorted(found.values(), key=lambda f: f.start_byte)


def _pointer_parameters(function: Node) -> list[tuple[Node, str]]:
    """(declarator, the type it points to) of each pointer or array parameter of a function."""
    declarator = function.child_by_field_name("declarator")
    plist = None
    while declarator is not None and plist is None:
        plist = declarator.child_by_field_name("parameters") if declarator.type == "function_declarator" else None
        declarator = declarator.child_by_field_name("declarator")
    found = []
    for p in plist.named_children if plist is not None else []:
        decl = p.child_by_field_name("declarator") if p.type.endswith("parameter_declaration") else None
        stars = text(decl).count("*") + text(decl).count("[") if decl is not None else 0
        if stars:
            found.append((decl, " ".join(text(p.child_by_field_name("type")).split()) + "*" * (stars - 1)))
    return found


def _scope_of(decl: Node) -> Node | None:
    """The block a declaration is visible in."""
    node = decl.parent
    if node is not None and node.type == "declaration":
        node = node.parent
    while node is not None and node.type not in _SCOPES:
        node = node.parent
    return node


def _loop_of(where: Node) -> Node | None:
    """The for statement whose initialiser defines a variable at `where` (`a = 0` in `for (a = 0, b = 4; …)` too)."""
    while where.parent is not None and where.parent.type == "comma_expression":
        where = where.parent
    parent = where.parent
    if parent is not None and parent.type == "for_statement" and parent.child_by_field_name("initializer") == where:
        return parent
    if parent is not None and parent.type == "declaration" and parent.parent is not None and parent.parent.type == "for_statement":
        if parent.parent.child_by_field_name("initializer") == parent:
            return parent.parent
    return None


def _loop_symbol(name: str, where: Node, home: _Ctx | None) -> str:
    """A loop variable's symbol: one per loop, and per call of the helper that holds it."""
    calls = []
    while home is not None:
        calls.append(str(home.call.start_byte))
        home = home.outer
    return f"{name}@{where.start_point.row + 1}:{where.start_point.column}" + "".join("/" + c for c in calls)


def _loop_var_name(loop: Node) -> str:
    """A `for` loop's counter: the first variable its initializer declares or assigns."""
    names = _loop_var_names(loop)
    return names[0] if names else ""


def _loop_update_of(node: Node) -> Node | None:
    """The `for` loop whose update `node` is, or is a part of (`a += s, b += t`)."""
    while node.parent is not None and node.parent.type == "comma_expression":
        node = node.parent
    parent = node.parent
    if parent is not None and parent.type == "for_statement" and parent.child_by_field_name("update") == node:
        return parent
    return None


def _loop_var_names(loop: Node) -> list[str]:
    """Every variable a `for` loop's initializer declares or assigns (`int a = 0, b = 4`), the counter first."""
    init = loop.child_by_field_name("initializer")
    if init is not None and init.type == "declaration":
        return [declared_name(d) for d in init.children_by_field_name("declarator")]
    parts = []
    while init is not None and init.type == "comma_expression":
        parts.append(init.child_by_field_name("right"))
        init = init.child_by_field_name("left")
    parts.append(init)
    names = [text(p.child_by_field_name("left")) for p in reversed(parts)
             if p is not None and p.type == "assignment_expression" and p.child_by_field_name("left").type == "identifier"]
    return names


def _loops_around(node: Node) -> list[Node]:
    """The loops enclosing `node` (not counting `node` itself), innermost first."""
    found = []
    parent = node.parent
    while parent is not None and parent.type != "function_definition":
        if parent.type in ("for_statement", "while_statement", "do_statement", "for_range_loop"):
            found.append(parent)
        parent = parent.parent
    return found


def _loop_holding(move: Node) -> tuple[Node | None, bool]:
    """The innermost loop around a move, and whether a condition lies between the two."""
    node = move.parent
    guarded = False
    while node is not None and node.type != "function_definition":
        if node.type in ("for_statement", "while_statement", "do_statement", "for_range_loop"):
            return node, guarded
        if node.type in _BRANCHES:
            guarded = True
        node = node.parent
    return None, guarded


def _inside_loop_with(use: Node, loop: Node) -> bool:
    """Whether some loop holds both `use` and `loop` (so a later move comes round again)."""
    return any(o.start_byte <= use.start_byte < o.end_byte for o in _loops_around(loop))


def _conditional_between(definition: Node, use: Node) -> bool:
    """True when the definition runs under a condition or loop that does not also hold the use."""
    node = definition.parent
    while node is not None and not (node.start_byte <= use.start_byte < node.end_byte):
        if node.type in _BRANCHES:
            return True
        node = node.parent
    return False


def _step(update: Node | None, name: str, kernel: _Kernel, home: _Ctx | None) -> int | None:
    if update is None:
        return None
    if update.type == "comma_expression":  # `a += s, b += t`: the part that moves `name`, if only one does
        steps = [_step(update.child_by_field_name(side), name, kernel, home) for side in ("left", "right")]
        moving = [step for step in steps if step is not None]
        mentions = sum(bool(re.search(rf"\b{re.escape(name)}\b", text(update.child_by_field_name(side)))) for side in ("left", "right"))
        return moving[0] if len(moving) == 1 and mentions == 1 else None
    t = " ".join(text(update).split())
    if t in (f"{name}++", f"++{name}"):
        return 1
    if t in (f"{name}--", f"--{name}"):
        return -1
    if update.type == "assignment_expression" and text(update.child_by_field_name("left")) == name:
        op = text(update.child_by_field_name("operator"))
        right = update.child_by_field_name("right")
        try:
            if op in ("+=", "-="):
                step = kernel.value(right, home)
                return (step.const if op == "+=" else -step.const) if step.is_const else None
            if op == "=" and right is not None and right.type == "binary_expression" and text(right.child_by_field_name("left")) == name \
                    and text(right.child_by_field_name("operator")) in ("+", "-"):
                step = kernel.value(right.child_by_field_name("right"), home)
                sign = 1 if text(right.child_by_field_name("operator")) == "+" else -1
                return sign * step.const if step.is_const else None
        except _CannotFollow:
            return None
    return None


def tile_grid(grid: tuple[int, int, int], adapter: str, divisor: int | None) -> tuple[int, int, int]:
    """The logical (rows, columns, z) tile grid a swizzle permutes."""
    if adapter == "2d":
        return grid[1], grid[0], grid[2]
    if adapter == "1d" and divisor:
        return grid[0] // divisor, divisor, grid[2] * grid[1]
    return 1, grid[0], grid[2] * grid[1]


def expression(source: str) -> Node | None:
    return expression_of(source) if source.strip() else None


# ---- access sites -----------------------------------------------------------------------------------------------

_FRAGMENT = re.compile(r"fragment\s*<\s*(?:\w+::)*(matrix_a|matrix_b|accumulator)\s*,\s*([^,]+),\s*([^,]+),\s*([^,>]+)"
                       r"(?:,\s*([^,>]+))?(?:,\s*(?:\w+::)*(row_major|col_major))?")
_ASM_WIDTH = re.compile(r"(?:\.v(\d))?\.[bsuf](8|16|32|64|128)\b")


class _Sites:
    """Walks a kernel (and the macros and helpers it calls) for global accesses."""

    def __init__(self, kernel: _Kernel, fragments: Mapping[str, tuple[int, int, bool]]) -> None:
        self.k = kernel
        self.fragments = fragments
        self.accesses: list[Access] = []
        self.unknown: list[UnknownAccess] = []

    def scan(self, root: Node, ctx: _Ctx | None) -> None:
        tile = self.k.tile_loop
        stack = [root]
        while stack:
            node = stack.pop()
            at = _where(node, ctx)
            if ctx is None and tile is not None and not (tile.body_start <= node.start_byte < tile.body_end) \
                    and not (node.start_byte <= tile.body_start and tile.body_end <= node.end_byte):
                continue  # outside the tile loop's body: once per block, not per tile, so not in a tile's footprint
            try:
                self._visit(node, ctx, at)
            except _CannotFollow as why:  # outside an access (a call's arguments, a macro's name): what it may touch is unknown
                self.unknown.append(UnknownAccess(_kernel_line(at, ctx), _short(node), "read-write", str(why)))
                continue
            except RecursionError:  # definitions that refer to themselves, in code that parses but cannot compile
                self.unknown.append(UnknownAccess(_kernel_line(at, ctx), _short(node), "read-write",
                                                  "an expression that refers to itself"))
                continue
            stack.extend(reversed(node.children))

    def _visit(self, node: Node, ctx: _Ctx | None, at: Node) -> None:
        kind = node.type
        if kind == "subscript_expression":
            parent = node.parent
            if parent is not None and parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node:
                return  # a row of a multi-dimensional array: the outer subscript is the access
            if _under_address_of(node):
                return
            self._site(node, ctx, at, _mode(node, ctx), lambda: self.k.element(node, ctx))
        elif kind == "pointer_expression" and text(node.child_by_field_name("operator")) == "*":
            if _under_address_of(node):
                return
            arg = node.child_by_field_name("argument")
            self._site(node, ctx, at, _mode(node, ctx), lambda: self._pointee(arg, ctx))
        elif kind == "field_expression" and text(node.child_by_field_name("operator")) == "->":
            obj = node.child_by_field_name("argument")
            self._site(node, ctx, at, _mode(node, ctx), lambda: self._member(obj, ctx))
        elif kind == "call_expression":
            self._call(node, ctx, at)
        elif kind == "gnu_asm_expression":
            self._asm(node, ctx, at)
        elif kind == "identifier" and (ctx.depth if ctx else 0) < _MAX_NESTING and not _is_callee(node):
            macro = self.k.scope.find(text(node))
            if isinstance(macro, Macro) and macro.params is None and re.search(r"[\[*]|->", macro.body) \
                    and self.k._kind(text(node), at) is None:
                body = expression_of(macro.body)
                if body is not None:
                    self.scan(body, _nested({}, at, False, ctx))

    def _pointee(self, pointer: Node, ctx: _Ctx | None) -> tuple[_Address | None, int]:
        address = self.k.address(pointer, ctx)
        if address is None:
            return None, 0
        size = self.k.sizeof(address.pointee)
        if not size:
            raise _CannotFollow(_size_unknown(address.pointee))
        return address, size

    def _member(self, obj: Node, ctx: _Ctx | None) -> tuple[_Address | None, int]:
        if self.k.address(obj, ctx) is None:
            return None, 0
        raise _CannotFollow("a member read through a pointer is not followed")

    def _site(self, node: Node, ctx: _Ctx | None, at: Node, mode: str, locate, rows: tuple[int, int] | None = None,
              width: int | None = None) -> None:
        """Record the access `locate()` finds (its address and size), or why it cannot be followed."""
        try:
            address, size = locate()
            if address is None:
                return  # local or shared memory
            block_bytes, sectors, approximate = self.k.touched(address, width or size, rows)
        except _CannotFollow as why:
            self.unknown.append(UnknownAccess(_kernel_line(at, ctx), _label(node, self.k, ctx), mode, str(why)))
            return
        if sectors.size == 0:
            return  # inside a loop that never runs
        elem = self.k.sizeof(self.k.param_types.get(address.array, self.k.globals.get(address.array) or "")) or size
        for write in {"read": (False,), "write": (True,), "read-write": (False, True)}[mode]:
            self.accesses.append(Access(address.array, write, elem, block_bytes, sectors, _kernel_line(at, ctx), approximate))  # type: ignore[arg-type]

    def _call(self, node: Node, ctx: _Ctx | None, at: Node) -> None:
        callee = _callee(node)
        args = _arguments(node)
        function = node.child_by_field_name("function")
        if function is not None and function.type == "template_function" and callee in _CASTS:
            return
        if callee in _READ_CALLS | _WRITE_CALLS or _ATOMIC.match(callee):
            mode = "read" if callee in _READ_CALLS else "write" if callee in _WRITE_CALLS else "read-write"
            if args:
                self._site(node, ctx, at, mode, lambda: self._pointee(args[0], ctx))
            return
        if callee in ("load_matrix_sync", "store_matrix_sync") and len(args) >= 3:
            self._fragment(node, callee, args, ctx, at)
            return
        if callee in ("__pipeline_memcpy_async", "memcpy_async") and len(args) >= 3:
            # (dst, src, size[, pipe]) or, for a group's collective copy, (group, dst, src, size[, barrier])
            first = 0 if callee == "__pipeline_memcpy_async" or self.k.is_pointer(args[0], ctx) else 1
            if len(args) >= first + 3:
                src, size = args[first + 1], args[first + 2]
                self._site(node, ctx, at, "read", lambda: (self.k.address(src, ctx), self._width(size, ctx)))
                return
        if _TEXTURE.match(callee) and args:
            mode = "write" if callee.startswith("surf") and "write" in callee else "read"
            self.unknown.append(UnknownAccess(_kernel_line(at, ctx), _short(node), mode, "a texture or surface access is not followed"))
            return
        if callee in _PASSIVE:
            return
        expansion = self.k._expansion(node, ctx)
        if expansion is None and callee in self.k.helpers and (ctx.depth if ctx else 0) < _MAX_NESTING:
            helper = self.k.helpers[callee]
            names = _parameter_names(helper)
            if len(names) == len(args) and callee != (ctx.helper if ctx else ""):
                expansion = (helper.child_by_field_name("body"),
                             _nested({p: (a, ctx) for p, a in zip(names, args)}, at, True, ctx, callee))
        if expansion is not None:
            self.scan(expansion[0], expansion[1])
            return
        for arg in args:  # a global pointer handed to code the analysis does not read
            if self.k.is_pointer(arg, ctx):
                self._site(arg, ctx, at, "read-write", lambda a=arg: self._escape(a, callee, ctx))

    def _escape(self, arg: Node, callee: str, ctx: _Ctx | None) -> tuple[_Address | None, int]:
        if self.k.address(arg, ctx) is None:
            return None, 0
        raise _CannotFollow(f"passed to {callee}(), which the analysis does not read")

    def _width(self, node: Node, ctx: _Ctx | None) -> int:
        size = self.k.value(node, ctx)
        if not size.is_const or size.const <= 0:
            raise _CannotFollow(f"copy size {_short(node)} is not known")
        return size.const

    def _fragment(self, node: Node, callee: str, args: list[Node], ctx: _Ctx | None, at: Node) -> None:
        frag, ptr = (args[0], args[1]) if callee == "load_matrix_sync" else (args[1], args[0])
        while frag.type in ("subscript_expression", "parenthesized_expression"):  # a[i]: an array of fragments
            frag = frag.child_by_field_name("argument") if frag.type == "subscript_expression" else frag.named_children[0]
        mode = "read" if callee == "load_matrix_sync" else "write"

        def locate() -> tuple[_Address | None, int]:
            address = self.k.address(ptr, ctx)
            if address is None:
                return None, 0
            shape = self.fragments.get(text(frag))
            if shape is None:
                raise _CannotFollow(f"the shape of fragment {text(frag)} is not known")
            return address, self.k.sizeof(address.pointee)

        try:
            address, size = locate()
        except _CannotFollow as why:
            self.unknown.append(UnknownAccess(_kernel_line(at, ctx), _label(ptr, self.k, ctx), mode, str(why)))
            return
        if address is None:
            return
        rows, cols, col_major = self.fragments[text(frag)]
        layout = text(args[3]) if len(args) > 3 else ""
        if "col_major" in layout or (len(args) == 3 and col_major):
            rows, cols = cols, rows
        try:
            ld = self.k.value(args[2], ctx)
            if not ld.is_const or not size:
                raise _CannotFollow(f"leading dimension {_short(args[2])} is not known")
        except _CannotFollow as why:
            self.unknown.append(UnknownAccess(_kernel_line(at, ctx), address.array, mode, str(why)))
            return
        self._site(node, ctx, at, mode, lambda: (address, size), rows=(rows, ld.const * size), width=cols * size)

    def _asm(self, node: Node, ctx: _Ctx | None, at: Node) -> None:
        code = "".join(text(c) for c in node.children_by_field_name("assembly_code")) or text(node)
        operands = [op for part in ("output_operands", "input_operands")
                    for lst in node.children_by_field_name(part) for op in lst.named_children if op.type.endswith("_operand")]
        pointers = [op.child_by_field_name("value") for op in operands
                    if "l" in text(op.child_by_field_name("constraint")).strip('"')]
        for ptr in pointers:
            if ptr is None:
                continue
            if "cp.async.bulk" in code:
                mode, width, why = "read", 0, "a bulk (TMA) copy is not followed"
            elif "cp.async" in code:
                mode, width, why = "read", 16, ""  # 4, 8 or 16 aligned bytes: one sector whichever
            elif re.search(r"\b(ld|st|red|atom)\.(\w+\.)*global", code):
                op = re.search(r"\b(ld|st|red|atom)\.(\w+\.)*global[\w.]*", code)
                assert op is not None
                vec = _ASM_WIDTH.findall(op.group(0))
                width = (int(vec[-1][0] or 1) * int(vec[-1][1]) // 8) if vec else 0
                mode = {"ld": "read", "st": "write"}.get(op.group(1), "read-write")
                why = "" if width else "the width of an inline-asm access is not known"
            else:
                mode, width, why = "read-write", 0, "inline asm with a global pointer is not followed"

            def locate(p: Node = ptr, why: str = why) -> tuple[_Address | None, int]:
                address = self.k.address(p, ctx)
                if address is None or not why:
                    return address, 1
                raise _CannotFollow(why)

            self._site(ptr, ctx, at, mode, locate, width=width or 1)


def _is_callee(node: Node) -> bool:
    parent = node.parent
    return parent is not None and parent.type == "call_expression" and parent.child_by_field_name("function") == node


def _under_address_of(node: Node) -> bool:
    """`&A[i]` computes an address; the access, if any, is where that address is used."""
    parent = node.parent
    while parent is not None and parent.type == "parenthesized_expression":
        parent = parent.parent
    return parent is not None and parent.type == "pointer_expression" and text(parent.child_by_field_name("operator")) == "&"


def _mode(node: Node, ctx: _Ctx | None) -> str:
    """Whether the element at `node` is read, written or both, from where it stands."""
    child, parent = node, node.parent
    while True:
        while parent is not None and (parent.type == "parenthesized_expression" or (
                parent.type == "field_expression" and parent.child_by_field_name("argument") == child
                and text(parent.child_by_field_name("operator")) == ".")):
            child, parent = parent, parent.parent
        if parent is None or (parent.type == "init_declarator" and ctx is not None and not ctx.real
                              and text(parent.child_by_field_name("declarator")) == "swzc_probe_"):
            if ctx is None or ctx.real:
                return "read"
            child, parent = ctx.call, ctx.call.parent  # the whole macro body stands where the call does
            continue
        break
    if parent.type == "assignment_expression" and parent.child_by_field_name("left") == child:
        return "write" if text(parent.child_by_field_name("operator")) == "=" else "read-write"
    if parent.type == "update_expression":
        return "read-write"
    return "read"


def _label(node: Node, kernel: _Kernel, ctx: _Ctx | None) -> str:
    """The array an access goes to, as far as its text says: the first pointer it names."""
    for inner in walk(node):
        if inner.type == "identifier" and not _is_callee(inner):
            name = text(inner)
            if ctx is not None and name in ctx.env:
                return _label(ctx.env[name][0], kernel, ctx.env[name][1])
            if name in kernel.param_types or name in kernel.globals or kernel.is_pointer(inner, ctx):
                return name
    return _short(node)


def _fragments(bodies: list[Node], ev: Evaluator) -> dict[str, tuple[int, int, bool]]:
    """wmma fragment variables -> (rows, cols, column-major) of the tile they load."""
    out = {}
    for node in (n for body in bodies for n in walk(body)):
        if node.type == "declaration" and "fragment" in text(node.child_by_field_name("type")):
            match = _FRAGMENT.search(" ".join(text(node.child_by_field_name("type")).split()))
            if not match:
                continue
            use, m, n, k = match.group(1), *(ev.value(expression(g)) for g in match.group(2, 3, 4))
            if not all(isinstance(v, (int, float)) for v in (m, n, k)):
                continue
            m, n, k = int(m), int(n), int(k)  # type: ignore[arg-type]
            rows, cols = {"matrix_a": (m, k), "matrix_b": (k, n), "accumulator": (m, n)}[use]
            for decl in node.children_by_field_name("declarator"):
                out[declared_name(decl)] = (rows, cols, match.group(6) == "col_major")
    return out


def _size_unknown(pointee: str) -> str:
    """Why an element's size is not known, with the --set that gives a type name one."""
    name = " ".join(pointee.replace("const", " ").replace("volatile", " ").split())
    if re.fullmatch(r"[A-Za-z_][\w:]*", name):
        return f"the size of {name} is not known (a type swzc cannot see: give it with --set {name}=TYPE, e.g. float2)"
    return f"the size of {pointee or 'its element type'} is not known"


def _unfixed_launch(kernel: str, launch: Launch) -> str:
    """Why a launch's sizes are not known, and what the user can give."""
    missing = [what for what, size in (("grid", launch.grid), ("block", launch.block)) if size is None]
    if not launch.line:  # given on the command line, or seen in a run, without the other size
        return (f"the {' and '.join(missing)} size of {kernel} is not known: the file does not fix it; give it with "
                + " and ".join(f"--{what} {kernel}=X,Y" for what in missing))
    texts = {"grid": launch.grid_text, "block": launch.block_text}
    what = "; ".join(f"its {m} ({' '.join(texts[m].split())[:60] or '?'}) is not fixed by the file" for m in missing)
    return (f"the launch at line {launch.line}: {what} (use --set NAME=VALUE for the sizes it names, or "
            + " and ".join(f"--{m} {kernel}=X,Y" for m in missing) + ")")


def footprint(ctx: FileContext, kernel: KernelInfo, launch_index: int = 0, user: Mapping[str, Value] | None = None) -> Footprint | str:
    """The kernel's per-block footprint under one of its launches (per tile, for a kernel with a tile
    loop), or a reason it has none."""
    if not kernel.launches:
        return "no launch in this file: the grid is not known"
    launch = kernel.launches[launch_index]
    if launch.grid is None or launch.block is None:
        return _unfixed_launch(kernel.name, launch)
    tile = kernel.tile_loop
    if tile is not None:
        if launch.tiles is None:
            return f"the tile count {tile.count!r} of the tile loop is not known at line {launch.line}"
        if tile.decode is not None and launch.divisor is None:
            return f"the tile decode divisor {tile.decode.divisor!r} is not known at line {launch.line}"
        # One tile plays one block: the loop variable is the linear tile index over a (T, 1, 1) tile space.
        grid = (launch.tiles, 1, 1)
        adapter, divisor = ("1d", launch.divisor) if tile.decode is not None else ("linear", None)
    else:
        if kernel.decode is not None and launch.divisor is None:
            return f"the tile decode divisor {kernel.decode.divisor!r} is not known at line {launch.line}"
        grid, adapter, divisor = launch.grid, kernel.adapter, launch.divisor
    function = kernel_function(ctx, kernel)
    if function is None:
        return "kernel not found"
    body = function.child_by_field_name("body")
    scope = ctx.scope(user).child(dict(launch.bindings))
    ev = Evaluator(local_scope(function, body.end_byte - 1, scope))
    tiles = tile_grid(grid, adapter, divisor)
    k = _Kernel(ctx, function, ev, scope, dict(launch.type_args), launch.grid, launch.block, tiles, adapter, divisor, tile)
    fragments = _fragments([body, *(f.child_by_field_name("body") for f in k.reached)], ev)
    sites = _Sites(k, fragments)
    sites.scan(body, None)
    threads = launch.block[0] * launch.block[1] * launch.block[2]
    staged = stages_reads(ctx, kernel)
    return Footprint(kernel.name, grid, launch.block, tiles, tuple(_merged(sites.accesses)),
                     tuple(dict.fromkeys(sites.unknown)), threads, adapter, divisor or 0, staged)


def stages_reads(ctx: FileContext, kernel: KernelInfo) -> bool:
    """Whether the kernel stages its reads through shared memory behind a barrier (see `_staged`); it needs
    no launch."""
    function = kernel_function(ctx, kernel)
    if function is None:
        return False
    body = function.child_by_field_name("body")
    facts = _file_facts(ctx)
    scope = ctx.scope()
    reached = _reachable_helpers(body, facts.helpers, scope)
    bodies = [body, *(f.child_by_field_name("body") for f in reached)]
    pointers = {declared_name(d) for f in (function, *reached) for d, _ in _pointer_parameters(f)}
    for node in (n for b in bodies if b is not None for n in walk(b)):
        if node.type == "declaration" and "*" in text(node).split("=")[0]:
            pointers.update(declared_name(d) for d in node.children_by_field_name("declarator"))
    return _staged(bodies, facts.shared, pointers, facts.helpers, scope.macros)


# Block-wide barriers, and copies that land in shared memory without a store the code spells out.
_BARRIERS = {"__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or", "__barrier_sync",
             "__builtin_amdgcn_s_barrier", "sync", "arrive_and_wait"}
_ASYNC_COPIES = {"__pipeline_memcpy_async", "memcpy_async", "cp_async", "__builtin_amdgcn_global_load_lds"}
_ASM_BARRIERS = (b"bar.sync", b"barrier.sync", b"s_barrier")
_ASM_COPIES = (b"cp.async",)
_LOOPS = ("for_statement", "for_range_loop", "while_statement", "do_statement")


def _staged(bodies: list[Node | None], file_shared: frozenset[str], pointers: set[str], helpers: Mapping[str, Node],
            macros: Mapping[str, Macro | None]) -> bool:
    """Whether the kernel stages its reads: a loop that copies from a global pointer into shared memory
    (or starts an asynchronous copy to it) and waits at a block barrier, pass after pass, as tiled GEMMs do.
    The copy may go through a local (`float4 t = A[i]; tile[j] = t.x;`) or a helper the loop calls with the
    shared array as an argument.  The blocks of such a kernel issue each pass's loads together, right after
    the barrier.  Macros in a store (`AS(i, j) = A[k]`, with `#define AS(i, j) As[i][j]`) count by their
    bodies."""
    def words(node: Node | None) -> set[str]:
        found, todo = set(), _WORD.findall(text(node))
        for _ in range(4):  # macros in macros, a few levels deep
            found.update(todo)
            todo = [w for name in todo if (m := macros.get(name)) is not None for w in _WORD.findall(m.body) if w not in found]
        return found

    shared = set(file_shared)
    nodes = [n for body in bodies if body is not None for n in walk(body)]
    for node in nodes:
        if node.type == "declaration" and any(c.type == "type_qualifier" and text(c) == "__shared__" for c in node.children):
            shared.update(declared_name(d) for d in node.children_by_field_name("declarator"))
    for node in nodes:  # pointers into shared memory: T* p = tile + k, T* p = &tile[k][0]
        if node.type == "init_declarator" and shared & words(node.child_by_field_name("value")):
            shared.add(declared_name(node))
    shared.discard("")
    helper_nodes: dict[int, list[Node]] = {}  # each helper's body, walked once
    copies: dict[tuple[int, frozenset[str], frozenset[str]], bool] = {}  # a helper's answer, per binding
    # A loop that stages holds everything an inner one does: the outermost loops are enough, and each
    # node is read once however deep the loops nest.
    for loop in _outermost_loops(bodies):
        inside = list(walk(loop))
        calls = [c for c in inside if c.type == "call_expression"]
        names = _called(calls)
        asm = b" ".join(n.text or b"" for n in inside if "asm" in n.type)
        if not (names & _BARRIERS or any(b in asm for b in _ASM_BARRIERS)):
            continue
        if names & _ASYNC_COPIES or any(c in asm for c in _ASM_COPIES) or _copies_into(inside, shared, pointers - shared, words):
            return True
        for call in calls:  # a helper handed the shared array: its parameter is shared memory there
            helper = helpers.get(_callee(call))
            if helper is None:
                continue
            bound = list(zip(_parameter_names(helper), _arguments(call)))
            into = {p for p, arg in bound if shared & words(arg)}
            if not into:
                continue
            # the helper's own pointers, and what the call hands it from a global pointer (st(&tile[i], ld(A + i)))
            sources = ({declared_name(d) for d, _ in _pointer_parameters(helper)}
                       | {p for p, arg in bound if words(arg) & (pointers - shared)}) - into
            key = (id(helper), frozenset(into), frozenset(sources))
            if key not in copies:
                body = helper_nodes.setdefault(id(helper), list(walk(helper.child_by_field_name("body"))))
                copies[key] = bool(_called(body) & _ASYNC_COPIES) or _copies_into(body, into, sources, words)
            if copies[key]:
                return True
    return False


def _called(nodes: list[Node]) -> set[str]:
    """The functions the calls among `nodes` name, without an object or namespace (`bar.sync()` -> `sync`)."""
    return {_callee(c).rsplit(".", 1)[-1] for c in nodes if c.type == "call_expression"}


def _outermost_loops(bodies: list[Node | None]) -> Iterator[Node]:
    stack = [b for b in reversed(bodies) if b is not None]
    while stack:
        node = stack.pop()
        if node.type in _LOOPS:
            yield node
        else:
            stack.extend(reversed(node.children))


def _copies_into(nodes: list[Node], shared: set[str], pointers: set[str], words: Callable[[Node | None], set[str]]) -> bool:
    """Whether one of `nodes` stores into `shared` a value read through `pointers`, directly or through a
    local loaded from one (two steps at most).  A local that accumulates (`acc += a[i]`) is computed, not
    loaded: a block that sums global data and then combines it in shared memory does not stage it."""
    stores = []  # (the name stored to, if a plain one; the words of the target; the words of the value)
    for node in nodes:
        if node.type == "init_declarator":
            stores.append((declared_name(node), {declared_name(node)}, words(node.child_by_field_name("value"))))
        elif node.type == "assignment_expression" and text(node.child_by_field_name("operator")) == "=":
            target = node.child_by_field_name("left")
            stores.append((text(target), words(target), words(node.child_by_field_name("right"))))
    loaded = set(pointers)
    for _ in range(2):
        loaded |= {name for name, _, read in stores if name.isidentifier() and name not in shared and read & loaded}
    return any(target & shared and read & loaded for _, target, read in stores)


def _merged(accesses: list[Access]) -> list[Access]:
    """Accesses of one array with the same block offsets touch one footprint: x[i-1], x[i], x[i+1] are one."""
    groups: dict[tuple[str, bool, tuple[int, int, int]], list[Access]] = {}
    for a in accesses:
        groups.setdefault((a.array, a.write, a.block_bytes), []).append(a)
    merged = []
    for (array, write, block_bytes), group in groups.items():
        sectors = group[0].sectors if len(group) == 1 else _unique(np.concatenate([a.sectors for a in group]))
        merged.append(Access(array, write, group[0].elem_bytes, block_bytes, sectors, min(a.line for a in group),
                             any(a.approximate for a in group)))
    return merged


__all__ = ["Access", "Footprint", "UnknownAccess", "ELEMENT_BYTES", "footprint", "tile_grid"]
