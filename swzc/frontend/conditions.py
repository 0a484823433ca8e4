"""What an #if decides: the macros the compiler defines for every translation unit, `defined`, and a
condition's arithmetic with the macros known at that point (swzc.frontend.preprocess walks the parsed
directives with it, swzc.frontend.reparse the lines of a file that did not parse).

A condition it cannot decide is None.  An identifier no directive defines is 0, as in C, unless it looks like
a name the compiler or a system header defines (`__…`, `_X…`, `CUDA…`, `HIP…`): then it is unknown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from tree_sitter import Node

from swzc.frontend.evaluate import Budget, Evaluator, Macro, Scope, Value
from swzc.frontend.source import parse, too_deep

# Defined by the compiler for every CUDA (or HIP) translation unit.
_BUILTIN = {
    "cuda": {"__CUDACC__": "1", "__NVCC__": "1", "__cplusplus": "201703L", "__linux__": "1"},
    "hip": {"__HIPCC__": "1", "__HIP__": "1", "__cplusplus": "201703L", "__linux__": "1"},
}
# Undefined names in #if that the compiler, the device pass or a system header may define: unknown, not 0.
_SYSTEM_NAME = re.compile(r"^(__|(CUDA|CUDART|CUB|THRUST|HIP|NV|CUTLASS|CUTE|ROCM|HCC)(_|$))")


def _truth(branch: Node, condition: Node | None, table: Mapping[str, Macro | None], budget: Budget) -> bool | None:
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
    value = _ConditionEvaluator(Scope(macros=table, budget=budget)).value(condition)
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


def _condition_node(text: str) -> Node | None:
    """An #if condition as an expression tree; `defined X` and `defined(X)` become preproc_defined."""
    tree = parse(f"#if {text}\n#endif\n".encode("utf-8", "surrogateescape"))
    if too_deep(tree) is not None:
        return None  # unknown, as a condition the evaluator cannot decide
    node = tree.root_node.child(0)
    return node.child_by_field_name("condition") if node is not None and node.type == "preproc_if" else None


def _text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", "surrogateescape")
