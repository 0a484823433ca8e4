"""What each name in a kernel is: its parameters (pointers with the type they point to), the file-scope
arrays and helpers it reaches, and its locals, with their declarations, the definitions that reach a use
and the moves (`x += e`, `x++`) made after them; whether an expression is a pointer."""

from __future__ import annotations

import re

from tree_sitter import Node

from swzc.frontend.evaluate import Scope
from swzc.frontend.syntax import declared_name, parameter_list, text, walk
from swzc.model.footprint.affine import _CannotFollow
from swzc.model.footprint.tree import (_CASTS, _MAX_CHAIN, _Ctx, _FileFacts, _callee, _loop_update_of, _loop_var_names,
                                       _pointer_parameters, _reachable_helpers, _scope_of, _where)


class KernelNames:
    """The names of one kernel and of the helpers it can reach."""

    def __init__(self, function: Node, facts: _FileFacts, scope: Scope) -> None:
        self.function = function
        body = function.child_by_field_name("body")
        self.params = {p.name: p for p in parameter_list(function)}
        # pointer parameter -> the type it points to
        self.param_types = {declared_name(decl): t for decl, t in _pointer_parameters(function)}
        self.helpers: dict[str, Node] = facts.helpers
        self.globals: dict[str, str | None] = facts.globals  # file-scope arrays: name -> element type (None: not global memory)
        # Locals of the kernel and of the helpers it can reach: definitions, moves, and what kind of thing each
        # name is.  Helpers no call can reach are left out, so each kernel costs what it reads, not the file.
        self.defs: dict[str, list[tuple[Node, Node | None]]] = {}  # name -> (where, value), in source order
        self.moves: dict[str, list[tuple[Node, Node | None, int]]] = {}  # name -> (where, step expression, sign)
        self.kinds: dict[str, list[tuple[Node, str, str]]] = {}  # name -> (declaration, "pointer"/"auto"/"local", type)
        self.reached = _reachable_helpers(body, self.helpers, scope)
        for root in (body, *(f.child_by_field_name("body") for f in self.reached)):
            self._collect(root)
        for helper in self.reached:  # a helper's pointer parameters are pointers (bound at each call)
            for decl, type_text in _pointer_parameters(helper):
                self.kinds.setdefault(declared_name(decl), []).append((decl, "pointer", type_text))
        self.written: dict[tuple[str, int], bool] = {}  # (vector, its definition) -> written after it
        self.deducing: set[int] = set()  # `auto` declarations whose type is being deduced
        self.function_at: dict[Node, int] = {}  # node -> where the function holding it starts (function_of)

    def _collect(self, root: Node) -> None:
        for node in walk(root):
            if node.type == "declaration":
                shared = any(c.type == "type_qualifier" and "__shared__" in text(c) for c in node.children)
                type_text = " ".join(text(node.child_by_field_name("type")).split())
                for decl in node.children_by_field_name("declarator"):
                    name = declared_name(decl)
                    if not name:
                        continue
                    head = decl.child_by_field_name("declarator") if decl.type == "init_declarator" else decl
                    stars = text(head).count("*") if head is not None else 0
                    kind = "local" if shared or (head is not None and "[" in text(head)) else (
                        "pointer" if stars else ("auto" if type_text == "auto" else "local"))
                    self.kinds.setdefault(name, []).append((decl, kind, type_text + "*" * max(0, stars - 1)))
                    value = decl.child_by_field_name("value") if decl.type == "init_declarator" else None
                    if value is not None and value.type in ("argument_list", "initializer_list"):
                        value = None
                    self.defs.setdefault(name, []).append((decl, value))
            elif node.type == "assignment_expression":
                target = node.child_by_field_name("left")
                if target is None or target.type != "identifier":
                    continue
                name, op = text(target), text(node.child_by_field_name("operator"))
                right = node.child_by_field_name("right")
                if _loop_update_of(node) is not None and name in _loop_var_names(_loop_update_of(node)):
                    continue  # the loop's own step
                if op == "=" and right is not None and right.type == "binary_expression" \
                        and text(right.child_by_field_name("operator")) in ("+", "-") \
                        and text(right.child_by_field_name("left")) == name:  # x = x + e: a move
                    sign = 1 if text(right.child_by_field_name("operator")) == "+" else -1
                    self.moves.setdefault(name, []).append((node, right.child_by_field_name("right"), sign))
                elif op == "=":
                    self.defs.setdefault(name, []).append((node, right))
                else:
                    self.moves.setdefault(name, []).append((node, right, {"+=": 1, "-=": -1}.get(op, 0)))
            elif node.type == "update_expression":
                target = node.child_by_field_name("argument")
                if target is None or target.type != "identifier":
                    continue
                loop = _loop_update_of(node)
                if loop is not None and text(target) in _loop_var_names(loop):
                    continue
                self.moves.setdefault(text(target), []).append((node, None, -1 if "--" in text(node) else 1))

    def function_of(self, node: Node) -> int:
        """Where the function holding `node` starts (-1: none, as in a macro's body), remembered for every node
        on the way up: tree-sitter finds a parent by walking down from the root, so walking up a deep tree
        again for each read would cost the square of its depth every time."""
        path = []
        at: Node | None = node
        found: int | None = None
        while at is not None and at.type != "function_definition":
            found = self.function_at.get(at)
            if found is not None:
                break
            path.append(at)
            at = at.parent
        if found is None:
            found = at.start_byte if at is not None else -1
        for passed in path:
            self.function_at[passed] = found
        return found

    def reaching(self, name: str, use: Node) -> tuple[Node, Node | None] | None:
        """The definition of `name` that reaches `use` in straight-line code: the last one before it, in
        the same function, whose declaration's scope holds the use."""
        function_at = self.function_of(use)
        found = None
        for where, value in self.defs.get(name, []):
            if where.start_byte >= use.start_byte or self.function_of(where) != function_at:
                continue
            if where.end_byte > use.start_byte and where.type != "init_declarator":
                continue
            if where.type == "init_declarator":
                scope = _scope_of(where)
                if scope is not None and not (scope.start_byte <= use.start_byte < scope.end_byte):
                    continue
            found = (where, value)
        return found

    def kind(self, name: str, at: Node) -> tuple[Node, str, str] | None:
        """The declaration of a local `name` visible at `at`: (declaration, kind, pointee type)."""
        function_at = self.function_of(at)
        found = None
        for decl, kind, type_text in self.kinds.get(name, []):
            if decl.start_byte >= at.start_byte or self.function_of(decl) != function_at:
                continue
            scope = _scope_of(decl)
            if scope is not None and not (scope.start_byte <= at.start_byte < scope.end_byte):
                continue
            found = (decl, kind, type_text)
        if found is not None and found[1] == "auto":
            value = found[0].child_by_field_name("value")
            if value is None:
                return found[0], "local", ""
            if found[0].start_byte in self.deducing:  # `auto p = p + 1` names itself
                return found[0], "self", ""
            if len(self.deducing) >= _MAX_CHAIN:  # `auto b = a; auto c = b; …`, each deduced from the one before
                raise _CannotFollow(f"{name}: its type is deduced through more than {_MAX_CHAIN} `auto` definitions")
            self.deducing.add(found[0].start_byte)
            try:
                pointer = self.is_pointer(value, None)
            finally:
                self.deducing.discard(found[0].start_byte)
            return found[0], "auto-pointer" if pointer else "local", ""
        return found

    def is_pointer(self, node: Node | None, ctx: _Ctx | None) -> bool:
        """Whether an expression is a pointer (or an array), by its form and the declarations it names.  The
        parts that may make it one (`(p)`, `p + i`, `i + p`, `c ? p : q`) are looked at left to right from a
        stack of their own: a 100,000-term sum nests as deep as it is long."""
        todo: list[tuple[Node | None, _Ctx | None]] = [(node, ctx)]
        while todo:
            node, ctx = todo.pop()
            if node is None:
                continue
            kind = node.type
            if kind == "parenthesized_expression":
                if node.named_child_count == 1:
                    todo.append((node.named_children[0], ctx))
            elif kind == "binary_expression" and text(node.child_by_field_name("operator")) in ("+", "-"):
                if text(node.child_by_field_name("operator")) == "+":
                    todo.append((node.child_by_field_name("right"), ctx))
                todo.append((node.child_by_field_name("left"), ctx))
            elif kind == "conditional_expression":
                todo.append((node.child_by_field_name("consequence"), ctx))
            elif kind == "identifier" and ctx is not None and text(node) in ctx.env:
                todo.append(ctx.env[text(node)])
            elif self._pointer_form(node, ctx):
                return True
        return False

    def _pointer_form(self, node: Node, ctx: _Ctx | None) -> bool:
        """is_pointer for an expression that is not made of others that may be pointers."""
        kind = node.type
        if kind == "cast_expression":
            return "*" in text(node.child_by_field_name("type"))
        if kind == "call_expression":
            function = node.child_by_field_name("function")
            if function is not None and function.type == "template_function" and _callee(node) in _CASTS:
                return "*" in text(function.child_by_field_name("arguments"))
            return _callee(node) == "__builtin_assume_aligned"
        if kind == "pointer_expression":
            return text(node.child_by_field_name("operator")) == "&"
        if kind == "identifier":
            name = text(node)
            at = _where(node, ctx)
            found = self.kind(name, at)
            if found is not None:
                return found[1] in ("pointer", "auto-pointer", "self") or (found[1] == "local" and "[" in text(found[0]).split("=")[0])
            return (name in self.param_types and self.function_of(at) == self.function.start_byte) or name in self.globals
        return False

    def is_written(self, name: str, where: Node) -> bool:
        """Whether the function holding `where` assigns to `name` or a part of it, or takes its address, after
        its definition (found once per definition: a kernel may read p.x many times)."""
        key = (name, where.start_byte)
        if key not in self.written:
            self.written[key] = self._writes_after(name, where)
        return self.written[key]

    def _writes_after(self, name: str, where: Node) -> bool:
        function = where
        while function.parent is not None and function.type != "function_definition":
            function = function.parent
        target = re.compile(rf"\s*\(*\s*{re.escape(name)}\s*\)*\s*(?:$|[.\[])")
        for n in walk(function):
            if n.start_byte < where.end_byte:
                continue
            if n.type == "assignment_expression" and target.match(text(n.child_by_field_name("left"))) \
                    or n.type == "update_expression" and target.match(text(n.child_by_field_name("argument"))) \
                    or n.type == "pointer_expression" and text(n.child_by_field_name("operator")) == "&" \
                    and target.match(text(n.child_by_field_name("argument"))):
                return True
        return False
