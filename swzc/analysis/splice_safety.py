"""Two rules of the rewrite itself: what it may copy, and which functions it may change; and the text an
expression is copied as where the swizzle is declared (`splice_text`).

- The spliced swizzle call repeats a tile count or a decode divisor, and where a local is declared after
  the insertion point, its initialiser (`num_pid_n` becomes `CDIV(N, BN)`).  That text runs once more, so
  it must be free of side effects: no call other than pure arithmetic (min, max, casts, macros that expand
  to arithmetic), no atomic, no `++`/`--`, no assignment.
- A rewritten `__device__` helper must not be reachable from a kernel swzc does not see.  With external
  linkage, a file compiled with `-rdc` can declare the helper and call it from its own kernel, which would
  then read the swizzled index of a grid that was never swizzled.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from tree_sitter import Node

from swzc.frontend.evaluate import Macro, expression_of
from swzc.analysis.records import Hazard
from swzc.frontend.scope import _inside_loop_with
from swzc.frontend.syntax import _callee, _line, _strip, declared_name, function_name, functions, text, walk
from swzc.frontend.syntax import text as node_text

# Calls that compute a value from their arguments and nothing else.
PURE_CALLS = frozenset({
    "min", "max", "umin", "umax", "llmin", "llmax", "ullmin", "ullmax", "fmin", "fmax", "fminf", "fmaxf",
    "abs", "labs", "llabs", "fabs", "fabsf", "ceil", "ceilf", "floor", "floorf", "round", "roundf",
    "static_cast", "reinterpret_cast", "const_cast", "__mul24", "__umul24", "__mulhi", "__umulhi",
    "__popc", "__popcll", "__clz", "__clzll", "__ffs", "__ffsll",
})
_FUNCTIONAL_CAST = re.compile(r"^(unsigned|signed|int|long|short|char|size_t|u?int(8|16|32|64)_t|float|double|uint|dim3)$")
_ASSIGNMENTS = ("assignment_expression", "update_expression", "new_expression", "delete_expression",
                "co_await_expression", "throw_expression")
_MAX_MACRO_DEPTH = 8


def side_effect_in(root: Node, macros: Mapping[str, Macro | None]) -> Callable[[Node], str | None]:
    """`side_effect` for expressions of this file: its macros, and its functions whose whole body is
    `return <expression without side effect>;` (such as `constexpr int cdiv(int a, int b)`), which are pure."""
    returns: dict[str, list[Node | None]] = {}
    for function, _ in functions(root):
        body = function.child_by_field_name("body")
        statements = [c for c in body.named_children if c.type != "comment"] if body is not None else []
        single = statements[0] if len(statements) == 1 and statements[0].type == "return_statement" else None
        value = single.named_children[0] if single is not None and single.named_child_count == 1 else None
        returns.setdefault(function_name(function), []).append(value)  # every overload must be pure
    # A pure function may call pure functions.  Each is read once, taking every function of the file for pure
    # and noting which it calls; then, from those that call none, each found pure frees its callers (a
    # function that calls itself, or a cycle of them, is never pure).  Linear in the file, where asking again
    # until nothing changes would read a chain of N such functions N times.
    waits: dict[str, set[str]] = {}
    names = frozenset(returns)
    for name, values in returns.items():
        assumed = _Assumed(names)
        if all(v is not None and side_effect(v, macros, assumed) is None for v in values):  # type: ignore[arg-type]
            waits[name] = assumed.asked
    callers: dict[str, set[str]] = {}
    for name, callees in waits.items():
        for callee in callees:
            callers.setdefault(callee, set()).add(name)
    pure: set[str] = set()
    ready = [name for name, callees in waits.items() if not callees]
    while ready:
        name = ready.pop()
        pure.add(name)
        for caller in callers.get(name, ()):
            waits[caller].discard(name)
            if not waits[caller]:
                ready.append(caller)
    known = frozenset(pure)
    return lambda expr: side_effect(expr, macros, known)


class _Assumed:
    """The names of `names`, each taken for a pure function, and the ones asked about noted in `asked`."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.asked: set[str] = set()

    def __contains__(self, name: object) -> bool:
        if name in self.names:
            self.asked.add(name)  # type: ignore[arg-type]
            return True
        return False


def side_effect(expr: Node, macros: Mapping[str, Macro | None], pure: frozenset[str] = frozenset(), depth: int = 0) -> str | None:
    """What in `expr` does more than compute a value (e.g. "a call to next_tile()"), or None.  `pure` names
    functions of the file known to compute a value and nothing else."""
    for node in walk(expr):
        kind = node.type
        if kind in _ASSIGNMENTS:
            what = {"assignment_expression": "an assignment", "update_expression": "++ or --"}.get(kind, kind.replace("_", " "))
            return f"{what} ({' '.join(node_text(node).split())})"
        if kind == "call_expression":
            function = node.child_by_field_name("function")
            name = _callee(node)
            if function is not None and function.type in ("primitive_type", "sized_type_specifier", "type_identifier") \
                    or _FUNCTIONAL_CAST.match(name):
                continue  # int(x): a cast written as a call
            if function is not None and function.type == "identifier" and name in macros:
                continue  # a function-like macro: its body is checked where its name is met below
            if name in PURE_CALLS or name in pure:
                continue
            if name.startswith(("atomic", "__atomic", "__hip_atomic")):
                return f"an atomic ({name})"
            return f"a call to {name}()"
        if kind == "identifier" and node_text(node) in macros:
            name = node_text(node)
            macro = macros[name]
            if macro is None:
                return f"macro {name}, which is defined more than once"
            if depth >= _MAX_MACRO_DEPTH:
                return f"macro {name}, which expands too deeply to check"
            body = expression_of(macro.body) if macro.body.strip() else None
            if body is None:
                if macro.body.strip() == "":
                    continue
                return f"macro {name}, which does not expand to an expression"
            inner = side_effect(body, macros, pure, depth + 1)
            if inner is not None:
                return f"macro {name}, which expands to {inner}"
    return None


def external_linkage(function: Node) -> bool:
    """A function another file could call: not static, not in an anonymous namespace, not a template."""
    if any(child.type == "storage_class_specifier" and node_text(child) == "static" for child in function.children):
        return False
    parent = function.parent
    while parent is not None:
        if parent.type == "template_declaration":
            return False
        if parent.type == "namespace_definition" and parent.child_by_field_name("name") is None:
            return False
        parent = parent.parent
    return True


def splice_text(expr: Node, function: Node, insert_at: int, side_effect: Callable[[Node], str | None] = lambda _: None,
                 label: str = "the divisor") -> tuple[str | None, Hazard | None]:
    """`expr` written so that it is valid at `insert_at`: locals declared later are replaced by their
    initialiser (when it is their only definition), recursively.  (None, None) when it cannot be written
    there; (None, hazard) when the text it would copy has a side effect (`side_effect` says which): the
    copy would run it again."""
    body = function.child_by_field_name("body")
    locals_: dict[str, list[Node]] = {}
    writes: dict[str, list[Node]] = {}
    for node in walk(body):
        if node.type == "declaration":
            for decl in node.children_by_field_name("declarator"):
                locals_.setdefault(declared_name(decl), []).append(decl)
        elif node.type in ("assignment_expression", "update_expression"):
            target = node.child_by_field_name("left") or node.child_by_field_name("argument")
            writes.setdefault(text(_strip(target)) if target is not None else "", []).append(node)
    found: list[Hazard] = []

    def visible(decl: Node) -> bool:
        """Declared in a block (or loop header) around `insert_at`, before it, and not changed from there on."""
        statement = decl.parent
        around = statement.parent if statement is not None else None
        return (around is not None and statement.end_byte <= insert_at and around.start_byte <= insert_at < around.end_byte
                and all(w.end_byte <= insert_at and not _inside_loop_with(w, insert_at, body) for w in writes.get(declared_name(decl), ())))

    def render(expr: Node, depth: int, copied_from: str) -> str | None:
        if depth > 6:
            return None
        effect = side_effect(expr)
        if effect is not None:
            where = "has a side effect" if not copied_from else f"would be copied from the initialiser of {copied_from}, which has a side effect"
            found.append(Hazard(_line(expr), f"{label} {where} ({effect}, line {_line(expr)}): the swizzle call would "
                                "run it again", "side-effect"))
            return None
        pieces: list[tuple[int, int, str]] = []
        for node in walk(expr):
            if node.type != "identifier" or node.parent is not None and node.parent.type == "call_expression" and node.parent.child_by_field_name("function") == node:
                continue
            name = text(node)
            decls = locals_.get(name)
            if not decls:
                continue  # a parameter, template parameter, global or macro: visible everywhere in the body
            decl = decls[0]
            if len(decls) == 1 and visible(decl):
                continue
            value = decl.child_by_field_name("value") if decl.type == "init_declarator" else None
            if len(decls) != 1 or name in writes or value is None or value.type in ("argument_list", "initializer_list"):
                return None
            inner = render(value, depth + 1, name)
            if inner is None:
                return None
            whole = (node.start_byte, node.end_byte) == (expr.start_byte, expr.end_byte)
            pieces.append((node.start_byte - expr.start_byte, node.end_byte - expr.start_byte, inner if whole else f"({inner})"))
        out = text(expr)
        for start, end, repl in sorted(pieces, reverse=True):
            out = out[:start] + repl + out[end:]
        return " ".join(out.split())

    rendered = render(expr, 0, "")
    return rendered, (found[0] if found else None)
