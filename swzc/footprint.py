"""Per-block footprints: what each block of a kernel reads and writes in global memory.

Each global access whose address is affine in the block index, the thread index and loop variables
becomes an `Access`: a block-dependent byte offset (a linear function of the block's logical tile row,
column and z) plus the set of 32-byte sectors one block touches over its whole life, relative to that
offset.  Translation invariance is what makes the L2 model fast: every block touches the same shape,
moved by its offset.  Accesses the analysis cannot express this way are listed as unknown, with why;
nothing is guessed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from tree_sitter import Node

from swzc.analysis import KernelInfo, declared_name, file_scope, kernel_function, local_scope, parameter_list, text, walk
from swzc.evaluate import Evaluator, Value, expression_of
from swzc.source import SourceFile

MAX_POINTS = 1 << 24  # enumeration budget per access (threads x loop iterations)
ELEMENT_BYTES = {"float": 4, "double": 8, "int": 4, "unsigned": 4, "half": 2, "__half": 2, "__nv_bfloat16": 2,
                 "char": 1, "uint8_t": 1, "int8_t": 1, "short": 2, "long": 8, "int64_t": 8, "uint32_t": 4,
                 "int32_t": 4, "float2": 8, "float4": 16, "double2": 16, "int2": 8, "int4": 16, "bf16": 2}
BLOCK_SYMBOLS = ("row", "col", "z")


class _Unknown(Exception):
    """An expression outside the affine subset; the message says why."""


@dataclass(frozen=True)
class Affine:
    """c0 + sum(coeff * symbol)."""

    terms: tuple[tuple[str, int], ...]
    const: int

    @staticmethod
    def of(value: int, symbol: str | None = None) -> Affine:
        return Affine(((symbol, value),), 0) if symbol else Affine((), value)

    def coeff(self, symbol: str) -> int:
        return dict(self.terms).get(symbol, 0)

    def __add__(self, other: Affine) -> Affine:
        merged = dict(self.terms)
        for s, c in other.terms:
            merged[s] = merged.get(s, 0) + c
        return Affine(tuple(sorted((s, c) for s, c in merged.items() if c)), self.const + other.const)

    def scale(self, k: int) -> Affine:
        return Affine(tuple((s, c * k) for s, c in self.terms if c * k), self.const * k)

    @property
    def is_const(self) -> bool:
        return not self.terms


@dataclass(frozen=True)
class Access:
    array: str
    write: bool
    elem_bytes: int
    block_bytes: tuple[int, int, int]  # bytes per unit of the block's (row, col, z)
    sectors: np.ndarray  # sorted relative 32-byte sector ids one block touches over its life
    line: int

    def __hash__(self) -> int:
        return hash((self.array, self.write, self.line, self.block_bytes))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Access) and (self.array, self.write, self.line, self.block_bytes) == (
            other.array, other.write, other.line, other.block_bytes) and np.array_equal(self.sectors, other.sectors)


@dataclass(frozen=True)
class Footprint:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    tiles: tuple[int, int, int]  # the logical tile grid (rows, columns, z) the swizzle permutes
    accesses: tuple[Access, ...]
    unknown: tuple[str, ...]  # "line N: why" for each access left out
    threads: int


class _Symbols:
    """Affine evaluation of index expressions inside one kernel body."""

    def __init__(self, body: Node, evaluator: Evaluator, grid: tuple[int, int, int], block: tuple[int, int, int],
                 adapter: str, divisor: int | None, pointers: Mapping[str, tuple[str, int, str]]) -> None:
        self.body = body
        self.ev = evaluator
        self.grid = grid
        self.block = block
        self.adapter = adapter
        self.divisor = divisor
        self.pointers = dict(pointers)  # name -> (array, elem bytes, element type), kernel pointer parameters
        self.aliases: dict[str, list[Node]] = {}  # local pointer -> offset terms from a parameter: `p = x + row * n`
        self.ranges: dict[str, tuple[int, int]] = {"tx": (0, block[0]), "ty": (0, block[1]), "tz": (0, block[2])}
        tiles = tile_grid(grid, adapter, divisor)
        self.ranges.update(row=(0, tiles[0]), col=(0, tiles[1]), z=(0, tiles[2]))
        self.loops: dict[str, tuple[Affine, Affine, int, bool]] = {}  # symbol -> start, bound, step, inclusive
        self.defs: dict[str, list[tuple[Node, Node | None]]] = {}  # name -> (where, value), in source order
        self.spoiled: set[str] = set()  # changed other than by a plain `x = …` (x += …, x++, &x)
        for node in walk(body):
            if node.type == "declaration":
                for decl in node.children_by_field_name("declarator"):
                    name = declared_name(decl)
                    if name:
                        value = decl.child_by_field_name("value") if decl.type == "init_declarator" else None
                        self.defs.setdefault(name, []).append((decl, value))
                        if value is not None and "*" in text(decl).split("=")[0]:
                            base, terms = _pointer_plus(value)
                            if base in self.pointers:
                                self.aliases[name] = terms
            elif node.type == "assignment_expression":
                target = node.child_by_field_name("left")
                if target is not None and target.type == "identifier":
                    if text(node.child_by_field_name("operator")) == "=":
                        self.defs.setdefault(text(target), []).append((node, node.child_by_field_name("right")))
                    elif _loop_update_of(node) is None:
                        self.spoiled.add(text(target))
            elif node.type == "update_expression":
                target = node.child_by_field_name("argument")
                if target is not None and _loop_update_of(node) is None:
                    self.spoiled.add(text(target))

    # -- expressions -------------------------------------------------------------------------------
    def affine(self, node: Node | None, depth: int = 0) -> Affine:
        if node is None or depth > 30:
            raise _Unknown("expression too deep")
        kind = node.type
        if kind in ("parenthesized_expression",) and node.named_child_count == 1:
            return self.affine(node.named_children[0], depth + 1)
        if kind == "cast_expression":
            return self.affine(node.child_by_field_name("value"), depth + 1)
        if kind == "number_literal":
            value = self.ev.value(node)
            if isinstance(value, int):
                return Affine.of(value)
            raise _Unknown(f"non-integer literal {text(node)}")
        if kind == "field_expression":
            return self._field(node)
        if kind == "identifier":
            return self._identifier(node, depth)
        if kind == "binary_expression":
            op = text(node.child_by_field_name("operator"))
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if op in ("+", "-"):
                a, b = self.affine(left, depth + 1), self.affine(right, depth + 1)
                return a + (b if op == "+" else b.scale(-1))
            if op == "*":
                a, b = self.affine(left, depth + 1), self.affine(right, depth + 1)
                if a.is_const:
                    return b.scale(a.const)
                if b.is_const:
                    return a.scale(b.const)
                raise _Unknown(f"product of two varying terms: {text(node)}")
            if op == "<<":
                a, b = self.affine(left, depth + 1), self.affine(right, depth + 1)
                if b.is_const and 0 <= b.const < 62:
                    return a.scale(1 << b.const)
            if op in ("/", "%", ">>"):
                a, b = self.affine(left, depth + 1), self.affine(right, depth + 1)
                if b.is_const and b.const > 0:
                    d = b.const if op != ">>" else 1 << b.const
                    return self._divide(a, d, "%" if op == "%" else "/", node)
        if kind == "call_expression":
            value = self.ev.value(node)
            if isinstance(value, int):
                return Affine.of(value)
        value = self.ev.value(node)
        if isinstance(value, int):
            return Affine.of(value)
        raise _Unknown(f"not affine: {' '.join(text(node).split())[:60]}")

    def _divide(self, a: Affine, d: int, op: str, node: Node) -> Affine:
        """Floor division and remainder of an affine form by a constant, where the small terms stay below d.

        A thread index divided by a constant that divides its range (`threadIdx.x / 32`) becomes two symbols,
        the quotient and the remainder; a footprint that mixes them with the index itself is a superset."""
        if a.is_const:
            return Affine.of(a.const // d if op == "/" else a.const % d) if a.const >= 0 else Affine.of(int(a.const / d) if op == "/" else int(math.fmod(a.const, d)))
        if len(a.terms) == 1 and a.const == 0 and a.terms[0][1] == 1 and a.terms[0][0] in self.ranges \
                and a.terms[0][0] not in BLOCK_SYMBOLS and self.ranges[a.terms[0][0]] == (0, self.ranges[a.terms[0][0]][1]):
            s = a.terms[0][0]
            r = self.ranges[s][1]
            if r % d == 0 and r > d:
                self.ranges[f"{s}/{d}"] = (0, r // d)
                self.ranges[f"{s}%{d}"] = (0, d)
                return Affine.of(1, f"{s}/{d}" if op == "/" else f"{s}%{d}")
        whole = Affine(tuple((s, c) for s, c in a.terms if c % d == 0), 0)
        q0, r0 = divmod(a.const, d)
        rest = Affine(tuple((s, c) for s, c in a.terms if c % d), r0)
        if any(s not in self.ranges for s, _ in rest.terms):
            raise _Unknown(f"division with a remainder that varies: {' '.join(text(node).split())[:60]}")
        lo = rest.const + sum(c * (self.ranges[s][0] if c > 0 else self.ranges[s][1] - 1) for s, c in rest.terms)
        hi = rest.const + sum(c * (self.ranges[s][1] - 1 if c > 0 else self.ranges[s][0]) for s, c in rest.terms)
        if lo < 0 or hi >= d:
            raise _Unknown(f"division with a remainder that varies: {' '.join(text(node).split())[:60]}")
        return rest if op == "%" else Affine(tuple((s, c // d) for s, c in whole.terms), q0)

    def _field(self, node: Node) -> Affine:
        obj = text(node.child_by_field_name("argument")).lstrip(":")
        axis = text(node.child_by_field_name("field"))
        if axis not in ("x", "y", "z"):
            raise _Unknown(f"field {text(node)}")
        i = "xyz".index(axis)
        if obj == "threadIdx":
            return Affine.of(1, "t" + axis)
        if obj == "blockDim":
            return Affine.of(self.block[i])
        if obj == "gridDim":
            return Affine.of(self.grid[i])
        if obj in ("blockIdx", "swzc_block"):
            return self.block_index(axis)
        value = self.ev.value(node)
        if isinstance(value, int):
            return Affine.of(value)
        raise _Unknown(f"field {text(node)}")

    def block_index(self, axis: str) -> Affine:
        if self.adapter == "1d" and axis == "x":
            assert self.divisor is not None
            return Affine((("col", 1), ("row", self.divisor)), 0)
        if self.adapter == "linear" and axis == "x":
            return Affine.of(1, "col")
        return Affine.of(1, {"x": "col", "y": "row", "z": "z"}[axis])

    def _identifier(self, node: Node, depth: int) -> Affine:
        name = text(node)
        hip = re.fullmatch(r"hip(ThreadIdx|BlockIdx|BlockDim|GridDim)_([xyz])", name)
        if hip:
            kind, axis = hip.groups()
            i = "xyz".index(axis)
            if kind == "ThreadIdx":
                return Affine.of(1, "t" + axis)
            if kind == "BlockIdx":
                return self.block_index(axis)
            return Affine.of((self.block if kind == "BlockDim" else self.grid)[i])
        defs = [d for d in self.defs.get(name, []) if d[0].end_byte <= node.start_byte or d[0].type == "init_declarator" and d[0].start_byte < node.start_byte]
        if defs:
            where, value = defs[-1]  # the definition that reaches this use in straight-line code
            loop = _loop_of(where)
            if loop is not None:
                return self._loop_symbol(name, where, loop, depth)
            if name in self.spoiled:
                raise _Unknown(f"{name} changes in a way swzc does not follow")
            if _conditional_between(where, node):
                raise _Unknown(f"{name} is assigned under a condition or in a loop")
            if value is None:
                raise _Unknown(f"{name} has no initialiser")
            return self.affine(value, depth + 1)
        value = self.ev.value(node)
        if isinstance(value, int):
            return Affine.of(value)
        raise _Unknown(f"{name} is not known")

    def _loop_symbol(self, name: str, decl: Node, loop: Node, depth: int) -> Affine:
        symbol = f"{name}@{decl.start_point.row + 1}"
        if symbol not in self.loops:
            start = self.affine(decl.child_by_field_name("value"), depth + 1)
            cond = loop.child_by_field_name("condition")
            update = loop.child_by_field_name("update")
            if cond is None or cond.type != "binary_expression" or text(cond.child_by_field_name("left")) != name:
                raise _Unknown(f"loop over {name} without a `{name} < bound` condition")
            op = text(cond.child_by_field_name("operator"))
            if op not in ("<", "<=", "!="):
                raise _Unknown(f"loop over {name} with condition {op}")
            bound = self.affine(cond.child_by_field_name("right"), depth + 1)
            step = _step(update, name, self)
            if step is None or step <= 0:
                raise _Unknown(f"loop over {name} with a step swzc cannot read")
            if any(s in BLOCK_SYMBOLS for s, _ in (*start.terms, *bound.terms)):
                raise _Unknown(f"loop over {name} whose bounds depend on the block index")
            self.loops[symbol] = (start, bound, step, op == "<=")
        start, _, step, _ = self.loops[symbol]
        return start + Affine.of(step, symbol + "#j")

    # -- enumeration -------------------------------------------------------------------------------
    def enumerate_offsets(self, index: Affine) -> np.ndarray:
        """Every value `index` takes over one block's threads and loop iterations (block terms dropped)."""
        free = {s for s, _ in index.terms if s not in BLOCK_SYMBOLS}
        while True:  # loop bounds may mention threads and outer loops: take those along
            more = {t for l in free if l.endswith("#j") for form in self.loops[l[:-2]][:2] for t, _ in form.terms}
            if more <= free:
                break
            free |= more
        if free & set(BLOCK_SYMBOLS):
            raise _Unknown("a loop bound depends on the block index")
        loops = sorted(s[:-2] for s in free if s.endswith("#j"))
        threads = sorted(s for s in free if s in self.ranges)
        axes: list[tuple[str, np.ndarray]] = [(t, np.arange(*self.ranges[t])) for t in threads]
        for loop in loops:
            start, bound, step, inclusive = self.loops[loop]
            lo = start.const + sum(c * (self.ranges[s][0] if c > 0 else self.ranges[s][1] - 1) for s, c in start.terms)
            hi = bound.const + sum(c * (self.ranges[s][1] - 1 if c > 0 else self.ranges[s][0]) for s, c in bound.terms) + int(inclusive)
            axes.append((loop + "#j", np.arange(max(0, math.ceil((hi - lo) / step)))))
        coeffs = dict(index.terms)
        if all(self.loops[l][0].is_const and self.loops[l][1].is_const for l in loops):
            # no bound depends on another symbol: a Minkowski sum, deduplicated as it grows
            out = np.array([index.const], dtype=np.int64)
            for name, values in sorted(axes, key=lambda a: -abs(coeffs.get(a[0], 0))):
                if coeffs.get(name, 0):
                    out = np.unique((out[:, None] + coeffs[name] * values[None, :]).ravel())
                    if out.size > MAX_POINTS:
                        raise _Unknown(f"more than {MAX_POINTS} distinct offsets")
            return out
        size = math.prod(len(a) for _, a in axes) if axes else 1
        if size > MAX_POINTS:
            raise _Unknown(f"{size} points to enumerate (over {MAX_POINTS})")
        grids = np.meshgrid(*[a for _, a in axes], indexing="ij", sparse=True) if axes else []
        values = {name: g for (name, _), g in zip(axes, grids)}
        out = np.full((1,) * max(1, len(axes)), index.const, dtype=np.int64)
        for s, c in index.terms:
            if s in values:
                out = out + c * values[s]
        keep = np.ones(out.shape, dtype=bool)
        for loop in loops:  # a loop variable must stay below its bound for the thread that runs it
            start, bound, step, inclusive = self.loops[loop]
            var = _eval_terms(start, values) + step * values[loop + "#j"]
            limit = _eval_terms(bound, values)
            keep = keep & ((var <= limit) if inclusive else (var < limit))
        return np.unique(np.broadcast_to(out, keep.shape)[keep])


def _eval_terms(form: Affine, values: Mapping[str, np.ndarray]) -> np.ndarray | int:
    out: np.ndarray | int = form.const
    for s, c in form.terms:
        out = out + c * values[s]
    return out


def _loop_of(decl: Node) -> Node | None:
    """The for statement whose initialiser declares `decl`."""
    parent = decl.parent
    if parent is not None and parent.type == "declaration" and parent.parent is not None and parent.parent.type == "for_statement":
        if parent.parent.child_by_field_name("initializer") == parent:
            return parent.parent
    return None


def _loop_update_of(node: Node) -> Node | None:
    """The for statement whose update clause `node` is, or None."""
    parent = node.parent
    if parent is not None and parent.type == "for_statement" and parent.child_by_field_name("update") == node:
        return parent
    return None


def _conditional_between(definition: Node, use: Node) -> bool:
    """True when the definition runs under a condition or loop that does not also hold the use."""
    node = definition.parent
    while node is not None and not (node.start_byte <= use.start_byte < node.end_byte):
        if node.type in ("if_statement", "for_statement", "while_statement", "do_statement", "switch_statement",
                         "conditional_expression", "for_range_loop"):
            return True
        node = node.parent
    return False


def _step(update: Node | None, name: str, symbols: _Symbols) -> int | None:
    if update is None:
        return None
    t = " ".join(text(update).split())
    if t in (f"{name}++", f"++{name}"):
        return 1
    if update.type == "assignment_expression" and text(update.child_by_field_name("left")) == name:
        op = text(update.child_by_field_name("operator"))
        right = update.child_by_field_name("right")
        try:
            if op == "+=":
                step = symbols.affine(right)
                return step.const if step.is_const else None
            if op == "=" and right is not None and right.type == "binary_expression" and text(right.child_by_field_name("left")) == name \
                    and text(right.child_by_field_name("operator")) == "+":
                step = symbols.affine(right.child_by_field_name("right"))
                return step.const if step.is_const else None
        except _Unknown:
            return None
    return None


def tile_grid(grid: tuple[int, int, int], adapter: str, divisor: int | None) -> tuple[int, int, int]:
    """The logical (rows, columns, z) tile grid a swizzle permutes."""
    if adapter == "2d":
        return grid[1], grid[0], grid[2]
    if adapter == "1d" and divisor:
        return grid[0] // divisor, divisor, grid[2] * grid[1]
    return 1, grid[0], grid[2] * grid[1]


def _pointer_params(function: Node) -> dict[str, tuple[str, int, str]]:
    """Pointer parameters: name -> (array, element bytes (0 if unknown), element type)."""
    out = {}
    for p in parameter_list(function):
        if p.pointer:
            base = p.type.split("::")[-1].strip()
            out[p.name] = (p.name, ELEMENT_BYTES.get(base, 0), base)
    return out


def expression(source: str) -> Node | None:
    return expression_of(source) if source.strip() else None


_FRAGMENT = re.compile(r"fragment\s*<\s*(?:\w+::)*(matrix_a|matrix_b|accumulator)\s*,\s*([^,]+),\s*([^,]+),\s*([^,>]+)(?:,\s*([^,>]+))?(?:,\s*(?:\w+::)*(row_major|col_major))?")


def footprint(src: SourceFile, kernel: KernelInfo, launch_index: int = 0, user: Mapping[str, Value] | None = None) -> Footprint | str:
    """The kernel's per-block footprint under one of its launches, or a reason it has none."""
    if not kernel.launches:
        return "no launch in this file: the grid is not known"
    launch = kernel.launches[launch_index]
    if launch.grid is None or launch.block is None:
        return f"the launch at line {launch.line} has a grid or block size the file does not fix (use --set)"
    if kernel.decode is not None and launch.divisor is None:
        return f"the tile decode divisor {kernel.decode.divisor!r} is not known at line {launch.line}"
    function = kernel_function(src, kernel)
    if function is None:
        return "kernel not found"
    body = function.child_by_field_name("body")
    scope = file_scope(src, user or {}).child(dict(launch.bindings))
    ev = Evaluator(local_scope(function, body.end_byte - 1, scope))
    pointers = _pointer_params(function)
    symbols = _Symbols(body, ev, launch.grid, launch.block, kernel.adapter, launch.divisor, pointers)
    fragments = _fragments(body, ev)
    accesses: list[Access] = []
    unknown: list[str] = []
    seen: set[tuple[str, bool, int]] = set()
    for node in walk(body):
        found = _access_of(node, symbols, fragments)
        if found is None:
            continue
        array, index_node, write, shape = found
        line = node.start_point.row + 1
        try:
            index = sum((symbols.affine(n) for n in index_node), Affine.of(0))
            if array not in pointers:
                raise _Unknown(f"local pointer {array} changes, or does not point into a parameter")
            elem = pointers[array][1] or ELEMENT_BYTES.get(dict(launch.type_args).get(pointers[array][2], ""), 0)
            if not elem:
                raise _Unknown(f"element type of {array} unknown")
            offsets = symbols.enumerate_offsets(index)
            if shape is not None:  # a wmma fragment: rows x cols elements at ld apart
                rows, cols, ld = shape
                offsets = np.unique((offsets[:, None] + (np.arange(rows)[:, None] * ld + np.arange(cols)).ravel()[None, :]).ravel())
        except _Unknown as why:
            unknown.append(f"line {line}: {array}: {why}")
            continue
        block_bytes = tuple(index.coeff(s) * elem for s in BLOCK_SYMBOLS)
        sectors = np.unique(offsets * elem // 32)
        key = (array, write, hash(sectors.tobytes()) ^ hash(block_bytes))
        if key in seen:
            continue
        seen.add(key)
        accesses.append(Access(array, write, elem, block_bytes, sectors, line))  # type: ignore[arg-type]
    threads = launch.block[0] * launch.block[1] * launch.block[2]
    return Footprint(kernel.name, launch.grid, launch.block, tile_grid(launch.grid, kernel.adapter, launch.divisor),
                     tuple(_merge(accesses)), tuple(unknown), threads)


def _merge(accesses: list[Access]) -> list[Access]:
    """Reads of one array with the same block offsets touch one footprint: x[i-1], x[i], x[i+1] are one."""
    groups: dict[tuple[str, bool, tuple[int, int, int]], list[Access]] = {}
    for a in accesses:
        groups.setdefault((a.array, a.write, a.block_bytes), []).append(a)
    merged = []
    for (array, write, block_bytes), group in groups.items():
        sectors = np.unique(np.concatenate([a.sectors for a in group]))
        merged.append(Access(array, write, group[0].elem_bytes, block_bytes, sectors, min(a.line for a in group)))
    return merged


def _fragments(body: Node, ev: Evaluator) -> dict[str, tuple[int, int]]:
    """wmma fragment variables -> (rows, cols) of the tile they load."""
    out = {}
    for node in walk(body):
        if node.type == "declaration":
            match = _FRAGMENT.search(" ".join(text(node.child_by_field_name("type")).split()))
            if not match:
                continue
            use, m, n, k = match.group(1), *(ev.value(expression(g)) for g in match.group(2, 3, 4))
            if not all(isinstance(v, (int, float)) for v in (m, n, k)):
                continue
            m, n, k = int(m), int(n), int(k)  # type: ignore[arg-type]
            shape = {"matrix_a": (m, k), "matrix_b": (k, n), "accumulator": (m, n)}[use]
            for decl in node.children_by_field_name("declarator"):
                out[declared_name(decl)] = shape
    return out


def _access_of(node: Node, symbols: _Symbols, fragments: Mapping[str, tuple[int, int]]) -> tuple[str, list[Node], bool, tuple[int, int, int] | None] | None:
    """(array, index expression, is a write, fragment shape) for a global access at `node`, else None."""
    if node.type == "subscript_expression":
        base = node.child_by_field_name("argument")
        if base is None or base.type != "identifier":
            return None
        name, offset = text(base), []
        if name in symbols.aliases and name in symbols.spoiled | {n for n, d in symbols.defs.items() if len(d) > 1}:
            return name, [], False, None  # a pointer that moves: reported as unknown (it is not a parameter)
        if name in symbols.aliases:  # a local pointer into a parameter: p[i] is x[offset + i]
            offset = symbols.aliases[name]
            name = _pointer_plus(_alias_value(symbols, name))[0]
        if name not in symbols.pointers:
            return None
        indices = node.child_by_field_name("indices")
        index = indices.named_children[0] if indices is not None and indices.named_child_count == 1 else None
        if index is None:
            return None
        parent = node.parent
        write = parent is not None and parent.type == "assignment_expression" and parent.child_by_field_name("left") == node
        return name, [*offset, index], write, None
    if node.type == "call_expression":
        callee = text(node.child_by_field_name("function")).split("::")[-1]
        if callee not in ("load_matrix_sync", "store_matrix_sync"):
            return None
        args = [c for c in node.child_by_field_name("arguments").named_children if c.type != "comment"]
        if len(args) < 3:
            return None
        frag, ptr = (args[0], args[1]) if callee == "load_matrix_sync" else (args[1], args[0])
        while frag.type == "subscript_expression":  # a[i]: an array of fragments
            frag = frag.child_by_field_name("argument")
        shape = fragments.get(text(frag))
        if shape is None:
            return None
        try:
            ld = symbols.affine(args[2])
        except _Unknown:
            return None
        base, offset = _pointer_plus(ptr)
        if base not in symbols.pointers or not ld.is_const:
            return None
        layout = text(args[3]) if len(args) > 3 else ""
        rows, cols = shape if "col_major" not in layout else shape[::-1]
        return base, offset, callee == "store_matrix_sync", (rows, cols, ld.const)
    return None


def _alias_value(symbols: _Symbols, name: str) -> Node:
    return next(value for _, value in symbols.defs[name] if value is not None)


def _strip_cast(node: Node) -> Node:
    while node.type in ("parenthesized_expression", "cast_expression"):
        node = node.named_children[-1] if node.type == "parenthesized_expression" else node.child_by_field_name("value")
    return node


def _pointer_plus(node: Node) -> tuple[str, list[Node]]:
    """`A + i + j` -> ("A", [i, j]); `&A[i]` -> ("A", [i]); `A` -> ("A", [])."""
    node = _strip_cast(node)
    if node.type == "binary_expression" and text(node.child_by_field_name("operator")) == "+":
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        base, terms = _pointer_plus(left)
        if base:
            return base, [*terms, right]
        base, terms = _pointer_plus(right)
        return (base, [*terms, left]) if base else ("", [])
    if node.type == "pointer_expression" and text(node.child_by_field_name("operator")) == "&":
        inner = node.child_by_field_name("argument")
        if inner is not None and inner.type == "subscript_expression":
            indices = inner.child_by_field_name("indices")
            return text(inner.child_by_field_name("argument")), [indices.named_children[0]]
    if node.type == "identifier":
        return text(node), []
    return "", []


__all__ = ["Access", "Footprint", "footprint", "tile_grid"]
