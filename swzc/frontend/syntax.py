"""Helpers over tree-sitter's syntax trees that every stage shares: walking a tree, a node's text, the names a
declaration or a function declares, the function definitions of a file (through namespaces, templates and #if
blocks), and looking through parentheses and casts."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass

from tree_sitter import Node


# The node types that name something the file declares or uses (a variable, a function, a type, a field).
NAME_TYPES = ("identifier", "type_identifier", "field_identifier")


def walk(node: Node, skip: Collection[str] = ()) -> Iterator[Node]:
    """`node` and every node under it, in document order; not what is under a node of a type in `skip` (a comment,
    a string).  A tree cursor steps through the tree without making a list of each node's children (four times
    faster: a file of 10,000 kernels walks each of them a dozen times)."""
    cursor = node.walk()
    while True:
        yield cursor.node  # type: ignore[misc]
        if cursor.node.type not in skip and cursor.goto_first_child():  # type: ignore[union-attr]
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return


def root_of(node: Node) -> Node:
    """The root of the tree `node` is in (a file's, or a header's: another byte space)."""
    while node.parent is not None:
        node = node.parent
    return node


def ancestors(root: Node, node: Node) -> list[Node]:
    """The nodes from `root` down to `node`'s parent (`node` must lie under `root`), found from the top.
    tree-sitter finds a node's parent by walking down from the root, so stepping up one parent at a time
    costs the square of the depth; this costs the depth."""
    path = []
    current: Node | None = root
    while current is not None and current != node:
        path.append(current)
        current = current.child_with_descendant(node)
    return path


def text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", "surrogateescape")


def _line(node: Node) -> int:
    return node.start_point.row + 1


def _strip(node: Node) -> Node:
    """Look through parentheses and casts."""
    while True:
        if node.type == "parenthesized_expression" and node.named_child_count == 1:
            node = node.named_children[0]
        elif node.type == "cast_expression" and node.child_by_field_name("value") is not None:
            node = node.child_by_field_name("value")  # type: ignore[assignment]
        else:
            return node


def _callee(call: Node) -> str:
    function = call.child_by_field_name("function")
    if function is None:
        return ""
    if function.type == "template_function":
        function = function.child_by_field_name("name")
    if function is not None and function.type == "field_expression":  # obj.load(): the method's name
        return text(function.child_by_field_name("field"))
    if function is not None and function.type == "qualified_identifier":
        return text(function).split("::")[-1].strip()
    return text(function)


def declared_name(declarator: Node | None) -> str:
    while declarator is not None and declarator.type not in ("identifier", "field_identifier", "qualified_identifier", "template_function", "operator_name", "destructor_name"):
        declarator = declarator.child_by_field_name("declarator")
    if declarator is None:
        return ""
    if declarator.type == "template_function":
        declarator = declarator.child_by_field_name("name")
    return text(declarator).split("::")[-1].strip()


def function_name(function: Node) -> str:
    return declared_name(function.child_by_field_name("declarator"))


def _has_token(node: Node, token: str) -> bool:
    return any(child.type == token for child in node.children)


def functions(root: Node) -> Iterator[tuple[Node, Node]]:
    """(function_definition, its top-level item), through namespaces, extern "C", templates, #if blocks."""
    containers = {"translation_unit", "declaration_list", "linkage_specification", "namespace_definition",
                  "template_declaration", "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef"}
    stack: list[tuple[Iterator[Node], Node | None]] = [(iter(root.children), None)]  # no recursion: namespaces nest deep
    while stack:
        children, top = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            continue
        item = top or child
        if child.type == "function_definition":
            yield child, item
        elif child.type in containers:
            stack.append((iter(child.children), item))


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str  # the declared base type, e.g. "float" (qualifiers are separate nodes)
    pointer: bool  # a pointer or array parameter


def parameter_declarations(function: Node) -> list[Node]:
    """The parameter declarations of a function definition, in order (`T x`, `T* x`, `const T& x`, `T x = 1`)."""
    declarator = function.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    plist = declarator.child_by_field_name("parameters") if declarator is not None else None
    return [p for p in (plist.named_children if plist is not None else []) if p.type.endswith("parameter_declaration")]


def parameter_list(function: Node) -> list[Parameter]:
    """The value parameters of a function definition, in order."""
    found = []
    for p in parameter_declarations(function):
        decl = p.child_by_field_name("declarator")
        found.append(Parameter(declared_name(decl), " ".join(text(p.child_by_field_name("type")).split()),
                               "*" in text(decl) or "[" in text(decl)))
    return found
