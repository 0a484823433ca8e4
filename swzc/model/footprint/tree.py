"""Reading the syntax tree for the footprint: the names of calls and their arguments, the loops and
scopes around a node, the contexts macro and helper bodies are read in, and the facts every kernel's
footprint reads from the whole file (its helpers, file-scope arrays and structs), found once per file."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tree_sitter import Node

from swzc.frontend.evaluate import Macro, Scope, expression_of
from swzc.frontend.source import SourceFile
from swzc.frontend.syntax import declared_name, function_name, functions, parameter_declarations, text, walk
from swzc.model.footprint.affine import _CannotFollow

if TYPE_CHECKING:
    from swzc.analysis.context import FileContext

_CASTS = {"reinterpret_cast", "static_cast", "const_cast"}
_MAX_NESTING = 4  # macro and helper expansions inside one another
_MAX_CHAIN = 64  # definitions followed one through another (`auto c = b;` where `auto b = a;` …)


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


def expression(source: str) -> Node | None:
    return expression_of(source) if source.strip() else None


# ---- the file's facts -----------------------------------------------------------------------------------


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
