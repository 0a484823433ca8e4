"""C++'s integer rules as both targets have them (LP64 host, CUDA/HIP device), for what the safe subset
(swzc.search.llm.restrict) must work out from the text alone: the value and type of an integer literal, the
usual arithmetic conversions, and a for loop's header run step by step to count its trips.  No tree here: the
walk (restrict_tree) reads the header and asks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_TRIPS = 64  # per for loop


@dataclass(frozen=True)
class _IntType:
    """An integer type as both targets have it (LP64 host, CUDA/HIP device): enough to run a loop header."""

    bits: int
    signed: bool

    def fits(self, value: int) -> bool:
        if self.signed:
            return -(1 << (self.bits - 1)) <= value < 1 << (self.bits - 1)
        return 0 <= value < 1 << self.bits

    def convert(self, value: int) -> int | None:
        """`value` converted to this type: wrapped when unsigned, None when a signed type cannot hold it
        (implementation-defined before C++20, so the host and the device might disagree)."""
        if not self.signed:
            return value % (1 << self.bits)
        return value if self.fits(value) else None


_INT = _IntType(32, True)
_UINT = _IntType(32, False)
_LLONG = _IntType(64, True)
_ULLONG = _IntType(64, False)

_INTEGER_TYPES = {"int": _INT, "unsigned": _UINT, "long long": _LLONG, "unsigned long long": _ULLONG}


def _common(a: _IntType, b: _IntType) -> _IntType:
    """The usual arithmetic conversions, for the four integer types above."""
    if a.signed == b.signed:
        return a if a.bits >= b.bits else b
    unsigned, signed = (b, a) if a.signed else (a, b)
    return unsigned if unsigned.bits >= signed.bits else signed


_INTEGER_LITERAL = re.compile(
    r"(?P<digits>0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)(?P<suffix>[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)?")


def _literal(text: str) -> tuple[int, _IntType] | str:
    """The value and type of an integer literal, or why it is not one swzc accepts.  tree-sitter reads a sign
    written against the digits (`-1`) as part of the literal; it is the unary operator applied to it."""
    sign = text[:1] if text[:1] in ("-", "+") else ""
    literal = _unsigned_literal(text[len(sign) :])
    if isinstance(literal, str) or sign != "-":
        return literal
    value, kind = literal
    negated = kind.convert(-value)  # the promoted literal's type is its own: all four are int or wider
    return (negated, kind) if negated is not None else f"{text[:24]} overflows"


def _unsigned_literal(text: str) -> tuple[int, _IntType] | str:
    match = _INTEGER_LITERAL.fullmatch(text)
    if match is None:
        return f"{text[:20]} is not an integer literal (no floats)"
    digits, suffix = match["digits"], (match["suffix"] or "").lower()
    if digits[:2].lower() in ("0x", "0b"):
        value = int(digits, 0)
    else:
        value = int(digits, 8 if digits.startswith("0") else 10)
    decimal = not digits.startswith("0") or digits == "0"
    if "u" in suffix:
        candidates = [_ULLONG] if "l" in suffix else [_UINT, _ULLONG]
    elif decimal:
        candidates = [_LLONG] if "l" in suffix else [_INT, _LLONG]
    else:
        candidates = [_LLONG, _ULLONG] if "l" in suffix else [_INT, _UINT, _LLONG, _ULLONG]
    for candidate in candidates:
        if candidate.fits(value):
            return value, candidate
    return f"the literal {text[:24]} is too large"


def _trips(start: int, kind: _IntType, condition: tuple[str, tuple[int, _IntType]],
           step: tuple[str, tuple[int, _IntType]]) -> int | str:
    """How many times a loop's body runs, found by running the header with C++'s integer rules (so an
    unsigned counter that wraps is seen to wrap), or why it cannot be accepted: more than MAX_TRIPS, or
    undefined behaviour in the header."""
    compare, (bound, bound_kind) = condition
    operator, (amount, amount_kind) = step
    value = start
    for trips in range(MAX_TRIPS + 1):
        common = _common(kind, bound_kind)
        a, b = common.convert(value), common.convert(bound)
        assert a is not None and b is not None  # a signed common type is wider than the unsigned one it takes
        if not {"<": a < b, "<=": a <= b, "!=": a != b, ">": a > b, ">=": a >= b}[compare]:
            return trips
        stepped = _step(value, kind, operator, amount, amount_kind)
        if isinstance(stepped, str):
            return stepped
        value = stepped
    return f"this loop runs more than {MAX_TRIPS} times (or never stops)"


def _step(value: int, kind: _IntType, operator: str, amount: int, amount_kind: _IntType) -> int | str:
    """The counter after one step, or why the step is undefined (or implementation-defined) behaviour."""
    if operator in ("<<=", ">>="):
        if not 0 <= amount < kind.bits:
            return f"the loop shifts by {amount}, not less than the counter's {kind.bits} bits"
        if kind.signed and value < 0:
            return "the loop shifts a negative counter"
        result = value << amount if operator == "<<=" else value >> amount
        if kind.signed and not kind.fits(result):
            return "the loop's counter overflows"
        return result % (1 << kind.bits)
    common = _common(kind, amount_kind)
    a, b = common.convert(value), common.convert(amount)
    assert a is not None and b is not None
    if operator == "/=":
        if b == 0:
            return "the loop divides by zero"
        result = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    else:
        result = {"+=": a + b, "-=": a - b, "*=": a * b}[operator]
    if common.signed and not common.fits(result):
        return "the loop's counter overflows"
    back = kind.convert(result if common.signed else result % (1 << common.bits))
    if back is None:
        return "the loop's counter no longer fits its type"
    return back
