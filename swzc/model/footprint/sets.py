"""Sets of integers: the values a per-block form takes over one block's threads and loop iterations, and
the byte intervals and 32-byte sectors an access covers.

Terms that do not share a thread or loop variable are independent, so their sets of values are summed as
interval sets (Minkowski sums); the terms that do share one are enumerated over those variables, with
numpy.  Past the enumeration budget (MAX_POINTS, read here at each use) a set falls back to its interval
bounds."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from tree_sitter import Node

from swzc.model.footprint.affine import (BLOCK_SYMBOLS, Affine, Atom, Op, _Address, _atom_key, _apply, _cdiv,
                                         _CannotFollow, _Loop, _OverBudget, _symbols_of)

MAX_POINTS = 1 << 24  # enumeration budget per set (threads x loop iterations, or intervals)
MAX_SECTORS = 1 << 24  # 32-byte sectors one access of one block may touch (512 MiB): the model lists each
SECTOR = 32
_MAX_OFFSET = 1 << 62  # bytes from an array's start an access may reach (the sets of offsets are int64)


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
    if not bool(np.all(starts[1:] >= starts[:-1])):  # most often sorted already (see _intervals): one pass then
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
    return _spread(starts, starts + width, pieces)


def grid_intervals(sectors: np.ndarray, block_bytes: tuple[int, int, int], tiles: tuple[int, int, int]
                   ) -> tuple[np.ndarray, np.ndarray, bool]:
    """The byte intervals a whole grid touches through one access, merged: one block's `sectors` (32-byte
    sector ids), moved by `block_bytes` per unit of the tile grid's (row, column, z), over `tiles`; and whether
    they are exact (False: past the enumeration budget, the access's whole span stands in, an upper bound)."""
    if sectors.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), True
    cut = np.flatnonzero(np.diff(sectors) != 1) + 1  # runs of consecutive sectors
    starts = sectors[np.concatenate(([0], cut))].astype(np.int64) * SECTOR
    ends = (sectors[np.concatenate((cut - 1, [sectors.size - 1]))].astype(np.int64) + 1) * SECTOR
    pieces = [_Set(0, 1, n).scale(b) for b, n in zip(block_bytes, tiles) if b and n > 1]
    try:
        starts, ends = _spread(starts, ends, pieces)
        return starts, ends, True
    except _OverBudget:
        low = int(starts[0]) + sum(p.lo for p in pieces)
        high = int(ends[-1]) + sum(p.hi for p in pieces)
        return np.array([low], dtype=np.int64), np.array([high], dtype=np.int64), False


def merged(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Half-open intervals, sorted, with overlapping or touching ones joined."""
    return _merge(starts, ends)


def _spread(starts: np.ndarray, ends: np.ndarray, pieces: list[_Set]) -> tuple[np.ndarray, np.ndarray]:
    """The intervals [starts, ends) moved by every point of the Minkowski sum of `pieces`, merged."""
    starts, ends = _merge(starts, ends)
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
        # shift by shift: sorted as they come where the intervals so far lie within one shift (pieces go by
        # spacing, smallest first), which spares _merge its sort
        starts = np.concatenate([grown_s, (shifts[:, None] + short_s[None, :]).ravel()])
        ends = np.concatenate([grown_e, (shifts[:, None] + short_e[None, :]).ravel()])
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


# ---- the values of forms over one block --------------------------------------------------------------------


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


class BlockSets:
    """The symbols of one block (its thread indices, the digits a division splits one into, its loop
    variables, and the block's own row, column and z) with their ranges, and the sets of values forms over
    them take."""

    def __init__(self, block: tuple[int, int, int], tiles: tuple[int, int, int]) -> None:
        self.ranges = {"tx": block[0], "ty": block[1], "tz": block[2], "row": tiles[0], "col": tiles[1], "z": tiles[2]}
        self.loops: dict[str, _Loop] = {}  # in the order they are met: an enclosing loop before the loops inside it
        self.loop_nodes: dict[str, Node] = {}
        # A thread index divided by d and taken modulo d (warp and lane) becomes two independent digits:
        # t = d * (t / d) + t % d.  symbol -> (d, quotient symbol, remainder symbol)
        self.splits: dict[str, tuple[int, str, str]] = {}
        self.sets: dict[str, _Set] = {}
        self.reaches: dict[Atom, frozenset[str]] = {}
        self.bounds: dict[Atom, tuple[int, int]] = {}  # interval bounds of each atom (_atom_bounds)

    def is_thread(self, symbol: Atom) -> bool:
        return isinstance(symbol, str) and symbol in self.ranges and symbol not in BLOCK_SYMBOLS

    def split(self, t: str, d: int) -> None:
        """Read thread index `t` as two digits from now on, `t / d` and `t % d`: the sets found so far are
        forgotten, as they were found without the digits."""
        self.splits[t] = (d, f"{t}/{d}", f"{t}%{d}")
        self.ranges[f"{t}/{d}"], self.ranges[f"{t}%{d}"] = self.ranges[t] // d, d
        self.reaches.clear()
        self.sets.clear()
        self.bounds.clear()

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
            if self.is_thread(atom):
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
        slo, shi = self.bounds_of(loop.start)
        blo, bhi = self.bounds_of(loop.bound)
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
        axes += [(s, np.arange(self.ranges[s], dtype=np.int64)) for s in sorted(expand) if self.is_thread(s)]
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

    def bounds_of(self, form: Affine) -> tuple[int, int]:
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
            slo, shi = self.bounds_of(loop.start)
            blo, bhi = self.bounds_of(loop.bound)
            count = max(1, self._count(atom))
            if loop.step > 0:
                return slo, max(slo, min(bhi - (loop.op == "<"), shi + loop.step * (count - 1)))
            return min(shi, max(blo + (loop.op == ">"), slo + loop.step * (count - 1))), shi
        args = [self.bounds_of(a) for a in atom.args]
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
            lo, hi = self.bounds_of(local)
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
                lo, hi = self.bounds_of(group)
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

