"""The names the evaluator may resolve in a file: its macros, global constants, enumerators and type aliases
(from the file and the local headers it includes, the compiler's untaken branches left out), the user's --set
bindings, and a function's locals whose value at a point is fixed by one visible definition."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from tree_sitter import Node

from swzc.frontend.build_context import CompileContext
from swzc.frontend.evaluate import Budget, Dim3, Evaluator, Function, Scope, Value, expression_of
from swzc.frontend.preprocess import Preprocessed, Spans, preprocess
from swzc.frontend.source import SourceFile
from swzc.frontend.syntax import _strip, declared_name, function_name, parameter_list, root_of, text, walk

_LOOPS = ("while_statement", "do_statement", "for_statement")


@dataclass(frozen=True)
class _Dim3Parts:
    base: Node | None
    parts: tuple[Node | None, Node | None, Node | None]


def prepare(src: SourceFile, user: Mapping[str, Value | str], context: CompileContext | None = None) -> tuple[Preprocessed, Scope]:
    """The file's directives run (swzc.frontend.preprocess) and the names the evaluator may resolve: macros, global
    constants, enumerators and type aliases, from the file and the local headers it includes, leaving out
    branches the compiler never takes.  `user` holds --set values (a string binds a type name, e.g.
    DATA_TYPE=float).  A FileContext makes it once per file and bindings (FileContext.prepared)."""
    budget = Budget()
    pre = preprocess(src, context, budget)
    names: dict[str, Node | None] = {}
    types: dict[str, str | None] = {}
    helpers: dict[str, Function | None] = {}

    def define(table: dict, name: str, value: object) -> None:
        if name in table and table[name] != value:
            table[name] = None  # defined twice, differently: ambiguous
        else:
            table[name] = value

    for tree_src, inactive in [*((h.src, h.inactive) for h in pre.headers), (src, pre.inactive)]:
        for node in _top_level(tree_src.tree.root_node, inactive):
            if node.type == "enumerator":
                value = node.child_by_field_name("value")
                if value is not None:
                    define(names, text(node.child_by_field_name("name")), value)
            elif node.type == "declaration" and re.search(r"\b(const|constexpr)\b", text(node).split("=")[0]):
                for decl in node.children_by_field_name("declarator"):
                    if decl.type == "init_declarator" and decl.child_by_field_name("value") is not None:
                        define(names, declared_name(decl), decl.child_by_field_name("value"))
            elif node.type == "type_definition":
                for decl in node.children_by_field_name("declarator"):
                    if decl.type == "type_identifier":  # a plain alias, not a pointer or function type
                        define(types, text(decl), " ".join(text(node.child_by_field_name("type")).split()))
            elif node.type == "alias_declaration":
                define(types, text(node.child_by_field_name("name")), " ".join(text(node.child_by_field_name("type")).split()))
            elif node.type == "function_definition":
                one = _returns_one_value(node)
                if one is not None:
                    define(helpers, *one)
    for name in ("blockIdx", "gridDim", "threadIdx", "blockDim"):
        names.pop(name, None)
    scope = Scope(user=dict(user), names={k: v for k, v in names.items() if v is not None},
                  macros=pre.macros, types={k: v for k, v in types.items() if v is not None}, budget=budget,
                  helpers={k: v for k, v in helpers.items() if v is not None},
                  untaken=Untaken(src.tree.root_node, pre.inactive_spans) if pre.inactive else None)
    return pre, scope


@dataclass(frozen=True)
class Untaken:
    """The branches the compiler never takes in one file: a function of that file's tree defines no local there
    (`#ifdef L20 constexpr int k = 4; #else constexpr int k = 8; #endif` defines k once)."""

    root: Node  # the file's tree: a function of a header's tree is another byte space
    spans: Spans

    def holds(self, node: Node) -> bool:
        return self.spans.holds(node.start_byte, node.end_byte)

    def for_tree_of(self, node: Node) -> Untaken | None:
        """These branches where `node` is of this file's tree and there are any; None otherwise."""
        return self if self.spans.starts and root_of(node) == self.root else None


def _returns_one_value(function: Node) -> tuple[str, Function] | None:
    """A host function whose body is one `return EXPR;` over scalar parameters (`ceil_div(a, b)`), for the
    evaluator to expand (swzc.frontend.evaluate.Function); None for any other function."""
    head = text(function)[: max(0, (function.child_by_field_name("body") or function).start_byte - function.start_byte)]
    if "__global__" in head or ("__device__" in head and "__host__" not in head):
        return None  # code of the GPU's alone: not what a launch's sizes are computed with
    body = function.child_by_field_name("body")
    statements = [c for c in body.named_children if c.type != "comment"] if body is not None else []
    if len(statements) != 1 or statements[0].type != "return_statement" or not statements[0].named_children:
        return None
    params = parameter_list(function)
    if any(p.pointer for p in params) or not all(p.name.isidentifier() for p in params):
        return None
    name = function_name(function).split("::")[-1]
    return (name, Function(tuple(p.name for p in params), text(statements[0].named_children[0]))) if name.isidentifier() else None


_SCOPE_ITEMS = frozenset({"enumerator", "declaration", "type_definition", "alias_declaration", "function_definition"})
_SCOPE_CONTAINERS = frozenset({"translation_unit", "declaration_list", "linkage_specification", "namespace_definition",
                               "template_declaration", "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif",
                               "preproc_elifdef", "enum_specifier", "enumerator_list", "type_definition"})


def _top_level(root: Node, inactive: tuple[tuple[int, int], ...]) -> Iterator[Node]:
    """File-level declarations, enumerators and aliases (not inside functions or classes), skipping the
    inactive branches."""
    skipped = Spans(inactive)
    stack = [root]
    while stack:
        node = stack.pop()
        if inactive and skipped.holds(node.start_byte, node.end_byte):
            continue
        if node.type in _SCOPE_ITEMS:
            yield node
        if node.type in _SCOPE_CONTAINERS or node.type == "declaration":
            stack.extend(reversed(node.children))


@dataclass(frozen=True)
class _LocalIndex:
    """Every definition of a local in one function body, walked once per function."""

    body: Node
    defs: Mapping[str, list[tuple[Node, Node | None, str]]]  # name -> (statement, value, how), in order
    ctor_args: Mapping[tuple[int, str], list[Node | None]]
    spoiled: frozenset[str]  # changed other than by `x = …` (x += …, x++, &x, cin >> x)


def _local_index(function: Node, body: Node, known: dict, untaken: Untaken | None = None) -> _LocalIndex:
    """The index of `function`'s locals, made once per function and file scope (`known` is the scope's), none
    defined in a branch the compiler never takes (`untaken`, where the function is of that file)."""
    found = known.get(function)
    if found is not None:
        return found
    defs: dict[str, list[tuple[Node, Node | None, str]]] = {}
    ctor_args: dict[tuple[int, str], list[Node | None]] = {}
    spoiled: set[str] = set()
    skip = untaken.for_tree_of(body) if untaken is not None else None
    for node in walk(body):
        if skip is not None and skip.holds(node):
            continue
        if node.type == "declaration":
            dim3 = text(node.child_by_field_name("type")) in ("dim3", "uint3")
            for decl in node.children_by_field_name("declarator"):
                name = declared_name(decl)
                if decl.type == "init_declarator":
                    value = decl.child_by_field_name("value")
                    defs.setdefault(name, []).append((node, value, "init"))
                elif decl.type == "identifier" and dim3:
                    defs.setdefault(name, []).append((node, None, "dim3"))
                elif decl.type == "function_declarator" and dim3:
                    # `dim3 block(X, Y);` with macro arguments parses as a function declaration
                    params = decl.child_by_field_name("parameters")
                    args = [expression_of(text(p)) for p in params.named_children] if params is not None else []
                    if 1 <= len(args) <= 3:
                        defs.setdefault(name, []).append((node, None, "dim3:" + ",".join(str(i) for i in range(len(args)))))
                        ctor_args[node.start_byte, name] = args
        elif node.type == "assignment_expression":
            left = node.child_by_field_name("left")
            op = text(node.child_by_field_name("operator"))
            if left is not None and left.type == "identifier":
                if op == "=":
                    defs.setdefault(text(left), []).append((node, node.child_by_field_name("right"), "assign"))
                else:
                    spoiled.add(text(left))
            elif left is not None and left.type == "field_expression" and op == "=":
                base = left.child_by_field_name("argument")
                if base is not None and base.type == "identifier":
                    defs.setdefault(text(base), []).append((node, node.child_by_field_name("right"), "field:" + text(left.child_by_field_name("field"))))
        elif node.type == "update_expression":
            spoiled.add(text(_strip(node.child_by_field_name("argument"))))
        elif node.type == "pointer_expression" and text(node.child_by_field_name("operator")) == "&":
            spoiled.add(text(_strip(node.child_by_field_name("argument"))))
        elif node.type == "binary_expression" and text(node.child_by_field_name("operator")) == ">>" and text(node.child_by_field_name("left")).endswith("cin"):
            spoiled.add(text(node.child_by_field_name("right")))
    index = known[function] = _LocalIndex(body, defs, ctor_args, frozenset(spoiled))
    return index


class _LocalNames(Mapping):
    """The locals visible at byte `at` with one fixed value, looked up name by name: a scope per launch
    costs what its expressions name, not the size of the function."""

    def __init__(self, index: _LocalIndex, at: int) -> None:
        self.index = index
        self.at = at
        self.found: dict[str, object] = {}
        self._enclosing: set[Node] | None = None

    def __getitem__(self, name: str) -> Node | Value | Dim3 | _Dim3Parts:
        if name not in self.found:
            self.found[name] = self._resolve(name)
        value = self.found[name]
        if value is None:
            raise KeyError(name)
        return value  # type: ignore[return-value]

    def __iter__(self) -> Iterator[str]:
        return (name for name in self.index.defs if name in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        try:
            self[name]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def _resolve(self, name: str) -> Node | Value | Dim3 | _Dim3Parts | None:
        found, at, body = self.index.defs.get(name), self.at, self.index.body
        if not found or name in self.index.spoiled:
            return None
        if self._enclosing is None:
            self._enclosing = _ancestors_of_byte(body, at)
        before = [d for d in found if d[0].end_byte <= at or d[2] == "init" and d[0].start_byte <= at]
        if len(before) != len(found) and any(_inside_loop_with(d[0], at, body) for d in found):
            return None  # redefined later inside a loop that also runs the use: not one value
        if not before or any(_block_of(d[0]) not in self._enclosing for d in before):
            return None  # defined conditionally, or not before the use
        if any(_inside_loop_with(d[0], at, body) and not (d[2] == "init" or d[2].startswith("dim3")) for d in before):
            return None  # assigned in a loop that runs the use (a declaration there is made anew each time round)
        last_whole = max((i for i, d in enumerate(before) if not d[2].startswith("field:")), default=None)
        if last_whole is None:
            return None
        stmt, value, how = before[last_whole]
        fields_after = [d for d in before[last_whole + 1 :] if d[2].startswith("field:")]
        if how == "dim3" or how.startswith("dim3:") or fields_after:
            parts: list[Node | None] = [None, None, None]
            if how.startswith("dim3:"):
                args = self.index.ctor_args[stmt.start_byte, name]
                if any(a is None for a in args):
                    return None
                parts[: len(args)] = args
            for _, fvalue, fhow in fields_after:
                axis = fhow.split(":")[1]
                if axis in ("x", "y", "z"):
                    parts["xyz".index(axis)] = fvalue
            return _Dim3Parts(value, (parts[0], parts[1], parts[2]))
        return value


def local_scope(function: Node, at: int, outer: Scope) -> Scope:
    """Locals of `function` whose value at byte `at` is fixed by one visible definition."""
    body = function.child_by_field_name("body")
    if body is None:
        return outer
    return outer.child(_LocalNames(_local_index(function, body, outer.functions, outer.untaken), at))  # type: ignore[arg-type]


_CONDITIONAL = frozenset({"if_statement", "else_clause", "for_statement", "for_range_loop", "while_statement",
                          "do_statement", "switch_statement", "case_statement", "conditional_expression",
                          "binary_expression", "lambda_expression"})


def _block_of(node: Node) -> Node | None:
    """The block a definition always runs in, or None when it runs only under a condition or in a loop
    header (an unbraced `if (c) n = 8;`, `c && (n = 8)`, `c ? (n = 8) : 0`, `for (int i = 0; …)`)."""
    parent = node.parent
    while parent is not None and parent.type != "compound_statement":
        if parent.type in _CONDITIONAL:
            return None
        parent = parent.parent
    return parent


def _ancestors_of_byte(body: Node, at: int) -> set[Node]:
    found = set()
    node: Node | None = body.descendant_for_byte_range(at, at)
    while node is not None:
        if node.type == "compound_statement":
            found.add(node)
        node = node.parent
    found.add(body)
    return found


def _inside_loop_with(node: Node, at: int, body: Node) -> bool:
    parent = node.parent
    while parent is not None and parent != body.parent:
        if parent.type in _LOOPS and parent.start_byte <= at < parent.end_byte:
            return True
        parent = parent.parent
    return False


class _Evaluator(Evaluator):
    """The evaluator, plus dim3 variables assembled from `dim3 g; g.x = …` and `dim3 g(a, b)`."""

    def dim3(self, node: Node | None, depth: int = 0) -> Dim3 | None:
        if node is not None and node.type == "argument_list":  # the arguments of `dim3 g(a, b)`
            return self._components([c for c in node.named_children if c.type != "comment"], depth)
        if node is not None and node.type == "identifier":
            bound = self.scope.find(text(node))
            if isinstance(bound, _Dim3Parts):
                base = self.dim3(bound.base, depth + 1) if bound.base is not None else (1, 1, 1)
                # every part is evaluated before giving up, so that each name the grid needs is traced
                values = [None if part is None else self.value(part, depth + 1) for part in bound.parts]
                if base is None or any(v is None for v, part in zip(values, bound.parts) if part is not None):
                    return None
                dims = [d if v is None else int(v) for d, v in zip(base, values)]
                return dims[0], dims[1], dims[2]
            if isinstance(bound, Node) and bound.type == "argument_list":
                return self.dim3(bound, depth + 1)
        return super().dim3(node, depth)
