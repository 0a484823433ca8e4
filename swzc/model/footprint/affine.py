"""Offsets as affine forms: a constant plus whole multiples of atoms, each atom a block, thread or loop
symbol or an operation on per-block values that is evaluated numerically, with C semantics.  Also the two
records built of forms (a loop's bounds, a global address) and the two exceptions every part of the
footprint raises."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

BLOCK_SYMBOLS = ("row", "col", "z")


class _CannotFollow(Exception):
    """An expression outside what the analysis follows; the message says why."""


class _OverBudget(Exception):
    """A set larger than MAX_POINTS: the caller falls back to interval bounds."""


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


def _symbols_of(atom: Atom) -> set[str]:
    if isinstance(atom, str):
        return {atom}
    return set().union(*(_symbols_of(s) for a in atom.args for s, _ in a.terms)) if atom.args else set()


def _symbols(form: Affine) -> set[str]:
    return set().union(*(_symbols_of(a) for a, _ in form.terms)) if form.terms else set()


# ---- records of forms -----------------------------------------------------------------------------------


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

