"""Integer (and float) evaluation of C/C++ expressions the file fixes: literals, macros, constants, casts.

Values follow C: integer division truncates toward zero, casts to integral types truncate.  Anything the
evaluator cannot pin down is ``None``, never a guess.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tree_sitter import Node

from swzc.frontend.source import parse, too_deep

Value = int | float
Dim3 = tuple[int, int, int]

_INT_TYPES = re.compile(
    r"^(const\s+)?(unsigned|signed|int|long|short|char|size_t|ssize_t|ptrdiff_t|u?int(8|16|32|64)_t|"
    r"unsigned\s+int|unsigned\s+long|long\s+long|unsigned\s+long\s+long|std::size_t|uint)\s*$"
)
_FLOAT_TYPES = re.compile(r"^(const\s+)?(float|double|long\s+double)\s*$")
_SIZEOF = {"char": 1, "short": 2, "int": 4, "unsigned": 4, "unsigned int": 4, "float": 4, "double": 8,
           "long": 8, "long long": 8, "size_t": 8, "half": 2, "__half": 2, "int64_t": 8, "int32_t": 4,
           "uint32_t": 4, "uint64_t": 8, "float2": 8, "float4": 16, "double2": 16, "int2": 8, "int4": 16}
_MAX_DEPTH = 40
_QUALIFIERS = frozenset({"const", "volatile", "__restrict__", "__restrict", "restrict", "struct", "typename"})


def c_int(text: str) -> int | None:
    text = text.replace("'", "").lower().rstrip("ul")
    try:
        if text.startswith(("0x", "0b")):
            return int(text, 0)
        if len(text) > 1 and text.startswith("0") and text.isdigit():
            return int(text, 8)
        return int(text)
    except ValueError:
        return None


def number(text: str) -> Value | None:
    value = c_int(text)
    if value is not None:
        return value
    try:
        return float(text.replace("'", "").lower().rstrip("fl"))
    except ValueError:
        return None


def _div(a: Value, b: Value) -> Value | None:
    if b == 0:
        return None
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b > 0) else -q
    return a / b


def _mod(a: Value, b: Value) -> Value | None:
    if not (isinstance(a, int) and isinstance(b, int)) or b == 0:
        return None
    q = _div(a, b)
    assert isinstance(q, int)
    return a - b * q


_BINARY: dict[str, Callable[[Value, Value], Value | None]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _div,
    "%": _mod,
    "<<": lambda a, b: a << b if isinstance(a, int) and isinstance(b, int) and 0 <= b < 64 else None,
    ">>": lambda a, b: a >> b if isinstance(a, int) and isinstance(b, int) and 0 <= b < 64 else None,
    "&": lambda a, b: a & b if isinstance(a, int) and isinstance(b, int) else None,
    "|": lambda a, b: a | b if isinstance(a, int) and isinstance(b, int) else None,
    "^": lambda a, b: a ^ b if isinstance(a, int) and isinstance(b, int) else None,
    "<": lambda a, b: int(a < b),
    ">": lambda a, b: int(a > b),
    "<=": lambda a, b: int(a <= b),
    ">=": lambda a, b: int(a >= b),
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
    "&&": lambda a, b: int(bool(a) and bool(b)),
    "||": lambda a, b: int(bool(a) or bool(b)),
}

_CALLS: dict[str, Callable[..., Value | None]] = {
    "min": min, "max": max, "std::min": min, "std::max": max, "fmin": min, "fmax": max, "fminf": min, "fmaxf": max,
    "ceil": math.ceil, "ceilf": math.ceil, "std::ceil": math.ceil, "floor": math.floor, "floorf": math.floor,
    "std::floor": math.floor, "abs": abs, "std::abs": abs,
}


@dataclass(frozen=True)
class Macro:
    params: tuple[str, ...] | None  # None for an object-like macro
    body: str


@dataclass(frozen=True)
class Function(Macro):
    """A host function whose body is one `return EXPR;` (`ceil_div`): expanded like a function-like macro, but
    in the file's scope (a function does not see its caller's names), once per argument values, and never
    within itself (a recursive function is not followed)."""


class Budget:
    """A limit on evaluation work shared by every evaluator of one analysis, and the memo that keeps
    nested function-like macros from costing exponential time.  Spent: every later value is unknown."""

    def __init__(self, steps: int = 2_000_000) -> None:
        self.left = steps
        self.memo: dict[tuple, tuple[object, Value | None]] = {}

    @property
    def exhausted(self) -> bool:
        return self.left <= 0

    def spend(self) -> bool:
        self.left -= 1
        return self.left > 0


@dataclass
class Scope:
    """Names the evaluator may resolve.  `lookup` maps a name to an expression node (or a known value)."""

    user: Mapping[str, Value | str] = field(default_factory=dict)  # --set: a value, or a type name
    names: Mapping[str, Node | Value | Dim3] = field(default_factory=dict)
    macros: Mapping[str, Macro | None] = field(default_factory=dict)  # None: defined ambiguously
    parent: Scope | None = None
    types: Mapping[str, str] = field(default_factory=dict)  # type aliases: typedef/using, --set NAME=TYPE
    budget: Budget = field(default_factory=Budget, repr=False, compare=False)
    # each function's index of locals, made once for this scope and the scopes below it (swzc.analysis.kernels)
    functions: dict = field(default_factory=dict, repr=False, compare=False)
    # host functions whose body is one `return EXPR;` (`ceil_div`)
    helpers: Mapping[str, Function] = field(default_factory=dict)
    # the branches the compiler never takes in the file, for a function's locals (swzc.frontend.scope.Untaken)
    untaken: Any = field(default=None, repr=False, compare=False)
    # what is found once for the file and every scope below it whatever the bindings (its calls by name:
    # swzc.analysis.launches)
    indexes: dict = field(default_factory=dict, repr=False, compare=False)

    def once(self, key: object, make: Callable[[], Any]) -> Any:
        """`indexes[key]`, made by `make()` the first time it is asked for."""
        if key not in self.indexes:
            self.indexes[key] = make()
        return self.indexes[key]

    def child(self, names: Mapping[str, Node | Value | Dim3]) -> Scope:
        return Scope(self.user, names, self.macros, self, self.types, self.budget, self.functions, self.helpers, self.untaken,
                     self.indexes)

    def resolve_type(self, name: str) -> str:
        """A type name with aliases and object-like macros followed (`DATA_TYPE` -> `float`), qualifiers
        (const, volatile, __restrict__) dropped; the name itself when nothing is known about it."""
        words = [w for w in name.replace("*", " ").split() if w not in _QUALIFIERS]
        current = " ".join(words)
        for _ in range(16):
            macro = self.macros.get(current)
            bound = self.user.get(current)
            following = bound if isinstance(bound, str) else self.types.get(current) or (
                macro.body if macro is not None and macro.params is None else None)
            if not following or following == current:
                break
            current = " ".join(w for w in following.split() if w not in _QUALIFIERS)
        return current

    def find(self, name: str) -> Node | Value | Dim3 | Macro | None:
        if name in self.user:
            # a number the file writes for it where it is used (`bs = 16;` before a launch, a literal argument)
            # is what runs there: --set binds only what the file leaves open
            written = self._written_locally(name)
            return written if written is not None else self.user[name]
        scope: Scope | None = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        if name in self.macros:
            return self.macros[name]
        return self.helpers.get(name)


    def _written_locally(self, name: str) -> Node | Value | None:
        """The number a scope below the file's (a function's locals, a launch's arguments) gives `name`, if it
        gives a literal one."""
        scope: Scope | None = self
        while scope is not None and scope.parent is not None:
            if name in scope.names:
                found = scope.names[name]
                if isinstance(found, (int, float)) and not isinstance(found, bool):
                    return found
                return found if isinstance(found, Node) and found.type == "number_literal" else None
            scope = scope.parent
        return None


@functools.lru_cache(maxsize=1024)
def expression_of(text: str) -> Node | None:
    """Parse macro body text as an expression (None when it is not one, or is nested too deeply to follow)."""
    tree = parse(b"int swzc_probe_ = (" + text.encode("utf-8", "surrogateescape") + b"\n);")
    if tree.root_node.has_error or too_deep(tree) is not None:
        return None
    node = tree.root_node.child(0)
    while node is not None and node.type != "parenthesized_expression":
        node = node.child_by_field_name("declarator") if node.type == "declaration" else node.child_by_field_name("value")
    return node


FIELD_PATH = re.compile(r"[A-Za-z_]\w*(?:(?:\.|->)[A-Za-z_]\w*)+")  # a field read through names, as field_name spells it


def field_name(node: Node) -> str | None:
    """A field read through names alone (`p.n`, `args->dims.m`) as --set and a sweep name it, spaces left out; None
    for one read through anything else (a call, an index)."""
    parts = []
    while node.type == "field_expression":
        parts.append(_text(node.child_by_field_name("operator")) + _text(node.child_by_field_name("field")))
        node = node.child_by_field_name("argument")
        if node is None:
            return None
    if node.type != "identifier":
        return None
    return _text(node) + "".join(reversed(parts))


def _named(node: Node) -> list[Node]:
    return [c for c in node.named_children if c.type != "comment"]


class Evaluator:
    """Values of expressions in `scope`.  Given a list as `free`, it also records the names a value could not
    be found for (swzc.analysis.launches reads a launch's sizes from them): a name nothing defines, or one
    defined by what only a run decides (a call, a choice, a read through a pointer or a field), where that
    name, not what its definition names, is the size."""

    def __init__(self, scope: Scope, free: list[str] | None = None) -> None:
        self.scope = scope
        self.free = free

    def value(self, node: Node | None, depth: int = 0) -> Value | None:
        if node is None or depth > _MAX_DEPTH or not self.scope.budget.spend():
            return None
        try:
            result = self._value(node, depth + 1)
        except (OverflowError, ValueError, ZeroDivisionError):
            return None
        if isinstance(result, float) and not math.isfinite(result):
            return None
        return result if isinstance(result, (int, float)) else None

    def dim3(self, node: Node | None, depth: int = 0) -> Dim3 | None:
        """A grid or block size: dim3(...), {...}, a dim3 variable, or a scalar (x, 1, 1)."""
        if node is None or depth > _MAX_DEPTH:
            return None
        if node.type == "parenthesized_expression" and len(_named(node)) == 1:
            return self.dim3(_named(node)[0], depth + 1)
        if node.type == "call_expression" and _text(node.child_by_field_name("function")) in ("dim3", "make_uint3"):
            return self._components(_named(node.child_by_field_name("arguments")), depth)
        if node.type == "initializer_list":
            return self._components(_named(node), depth)
        if node.type == "identifier":
            bound = self.scope.find(_text(node))
            if isinstance(bound, tuple):
                return bound
            if isinstance(bound, Node):
                return self.dim3(bound, depth + 1)
        scalar = self.value(node, depth)
        return (int(scalar), 1, 1) if scalar is not None else None

    def _components(self, args: list[Node], depth: int) -> Dim3 | None:
        if not 1 <= len(args) <= 3:
            return None
        values = [self.value(a, depth) for a in args]
        if any(v is None for v in values):
            return None
        dims = [int(v) for v in values if v is not None] + [1] * (3 - len(values))
        return dims[0], dims[1], dims[2]

    def _value(self, node: Node, depth: int) -> Value | Dim3 | None:
        kind = node.type
        if kind == "number_literal":
            return number(_text(node))
        if kind in ("true", "false"):
            return int(kind == "true")
        if kind in ("parenthesized_expression", "condition_clause"):
            inner = _named(node)
            return self.value(inner[-1], depth) if inner else None
        if kind == "unary_expression":
            op = _text(node.child_by_field_name("operator"))
            arg = self.value(node.child_by_field_name("argument"), depth)
            if arg is None:
                return None
            if op == "-":
                return -arg
            if op == "+":
                return arg
            if op == "!":
                return int(not arg)
            if op == "~" and isinstance(arg, int):
                return ~arg
            return None
        if kind == "binary_expression":
            op = _text(node.child_by_field_name("operator"))
            left = self.value(node.child_by_field_name("left"), depth)
            right = self.value(node.child_by_field_name("right"), depth)
            if left is None or right is None or op not in _BINARY:
                return None
            return _BINARY[op](left, right)
        if kind == "conditional_expression":
            mark = len(self.free) if self.free is not None else 0
            cond = self.value(node.child_by_field_name("condition"), depth)
            if cond is not None:
                return self.value(node.child_by_field_name("consequence" if cond else "alternative"), depth)
            either = self.value(node.child_by_field_name("consequence"), depth)
            other = self.value(node.child_by_field_name("alternative"), depth)
            if either is not None and either == other:
                if self.free is not None:  # the same either way: what the condition names does not set it
                    del self.free[mark:]
                return either
            return None
        if kind == "cast_expression":
            return self._cast(_text(node.child_by_field_name("type")), self.value(node.child_by_field_name("value"), depth))
        if kind == "sizeof_expression":
            inner = node.child_by_field_name("type")
            return _SIZEOF.get(_text(inner).strip()) if inner is not None else None
        if kind == "call_expression":
            return self._call(node, depth)
        if kind == "assignment_expression" and _text(node.child_by_field_name("operator")) == "=":
            return self.value(node.child_by_field_name("right"), depth)  # N = M = 4096: N is what M is given
        if kind in ("identifier", "qualified_identifier"):
            return self._name(_text(node), depth)
        if kind == "field_expression":
            base = node.child_by_field_name("argument")
            axis = _text(node.child_by_field_name("field"))
            whole = field_name(node)
            bound = self.scope.user.get(whole) if whole is not None else None
            if isinstance(bound, (int, float)) and not isinstance(bound, bool):  # --set p.n=4096, or a sweep's size
                return bound
            if self.free is not None and axis not in ("x", "y", "z"):  # a struct's field: named whole (`p.n`)
                self.free.append(whole or " ".join(_text(node).split()))
                return None
            if self.free is not None and base is not None and base.type == "identifier" and self.scope.find(_text(base)) is None:
                self.free.append(f"{_text(base)}.{axis}")  # a dim3 nothing fixes (`dims.x`): the dim3 is the size
                return None
            dims = self.dim3(base, depth) if base is not None and base.type == "identifier" else None
            if dims is not None and axis in ("x", "y", "z"):
                return dims["xyz".index(axis)]
        return None

    def _cast(self, type_text: str, value: Value | None) -> Value | None:
        if value is None:
            return None
        type_text = " ".join(type_text.split())
        if _INT_TYPES.match(type_text):
            return math.trunc(value)
        if _FLOAT_TYPES.match(type_text):
            return float(value)
        return None

    def _call(self, node: Node, depth: int) -> Value | None:
        function = node.child_by_field_name("function")
        args = _named(node.child_by_field_name("arguments"))
        if function is None:
            return None
        if function.type == "template_function":  # static_cast<int>(x) and friends
            name = _text(function.child_by_field_name("name"))
            targs = function.child_by_field_name("arguments")
            if name in ("static_cast", "int", "unsigned") and len(args) == 1 and targs is not None:
                return self._cast(_text(targs)[1:-1], self.value(args[0], depth))
            return None
        name = _text(function)
        if self._cast(name, 1) is not None and len(args) == 1:  # functional cast: int(x), float(x)
            return self._cast(name, self.value(args[0], depth))
        bound = self.scope.find(name)
        if isinstance(bound, Macro) and bound.params is not None and len(bound.params) == len(args):
            values = [self.value(a, depth) for a in args]
            if any(v is None for v in values):
                return None
            if isinstance(bound, Function):
                return self._function(bound, values, depth)
            # The body's free names resolve where the macro is used, so the memo is per scope (kept alive
            # in the memo, so that its id is not reused).
            key = (bound, tuple(values), id(self.scope))
            if key not in self.scope.budget.memo:
                body = expression_of(bound.body)
                inner = type(self)(self.scope.child(dict(zip(bound.params, values))))  # type: ignore[arg-type]
                self.scope.budget.memo[key] = (self.scope, inner.value(body, depth) if body is not None else None)
            return self.scope.budget.memo[key][1]
        if name in _CALLS and args:
            values = [self.value(a, depth) for a in args]
            if any(v is None for v in values):
                return None
            try:
                return _CALLS[name](*values)
            except (TypeError, ValueError, OverflowError):
                return None
        if self.free is not None:  # a function nothing here defines: named as a call (`f()`), which no size binds
            for a in args:
                self.value(a, depth)
            said = " ".join(name.split())
            self.free.append(f"{said if len(said) <= 60 else said[:57] + '...'}()")
        return None

    def _function(self, function: Function, values: list[Value], depth: int) -> Value | None:
        """A host function's value for `values`, in the file's scope; a call already being evaluated (recursion)
        has none, and each is evaluated once per set of values."""
        root = self.scope
        while root.parent is not None:
            root = root.parent
        key = (function, tuple(values), id(root))
        memo = self.scope.budget.memo
        if key not in memo:
            memo[key] = (root, None)  # in progress: a recursive call finds no value
            body = expression_of(function.body)
            inner = type(self)(root.child(dict(zip(function.params or (), values))))  # type: ignore[arg-type]
            memo[key] = (root, inner.value(body, depth) if body is not None else None)
        return memo[key][1]

    def _name(self, name: str, depth: int) -> Value | Dim3 | None:
        bound = self.scope.find(name)
        if isinstance(bound, (int, float, tuple)):
            return bound
        if isinstance(bound, Node):
            if self.free is None:
                return self.value(bound, depth)
            mark = len(self.free)
            found = self.value(bound, depth)
            if found is None and (len(self.free) == mark or _run_time(bound, self.scope)):
                del self.free[mark:]
                self.free.append(name)
            return found
        if bound is None:
            if self.free is not None:
                self.free.append(name)
            return None
        if isinstance(bound, Macro) and bound.params is None:
            if self.free is not None:  # traced: through the body itself (the memo would hide its names)
                body = expression_of(bound.body)
                return self.value(body, depth) if body is not None else None
            key = (bound, id(self.scope))
            if key not in self.scope.budget.memo:
                body = expression_of(bound.body)
                self.scope.budget.memo[key] = (self.scope, self.value(body, depth) if body is not None else None)
            return self.scope.budget.memo[key][1]
        return None


_RUN_TIME = frozenset({"call_expression", "conditional_expression", "field_expression", "subscript_expression",
                       "pointer_expression"})


def _run_time(node: Node, scope: Scope) -> bool:
    """Whether an expression holds what only a run decides: a call (not of a function or macro evaluated here),
    a choice, a read through a pointer or field."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "call_expression" and _evaluated(n, scope):
            stack.extend(_named(n.child_by_field_name("arguments")) if n.child_by_field_name("arguments") else ())
            continue
        if n.type in _RUN_TIME:
            return True
        stack.extend(n.named_children)
    return False


def _evaluated(call: Node, scope: Scope) -> bool:
    """Whether a call is one the evaluator computes: a macro or host function of the file, or a known one."""
    function = call.child_by_field_name("function")
    if function is None or function.type != "identifier":
        return False
    name = _text(function)
    bound = scope.find(name)
    return name in _CALLS or isinstance(bound, Macro) and bound.params is not None


def _text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", "surrogateescape")
