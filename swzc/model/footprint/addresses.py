"""Global addresses of a kernel's pointer expressions: an array (a kernel pointer parameter or a file-scope
array) plus a byte offset, with the type it points to.  Pointer arithmetic scales by that type's size and
casts change it; a local pointer is followed to its definition and the moves made after it.  An expression
that points to local or shared memory has no global address."""

from __future__ import annotations

from dataclasses import replace

from tree_sitter import Node

from swzc.frontend.evaluate import Macro, Scope, expression_of
from swzc.frontend.syntax import declared_name, text, walk
from swzc.model.footprint.affine import Affine, _Address, _CannotFollow
from swzc.model.footprint.names import KernelNames
from swzc.model.footprint.sizes import TypeSizes, _size_unknown
from swzc.model.footprint.tree import (_CASTS, _MAX_NESTING, _Ctx, _arguments, _callee, _conditional_between, _home,
                                       _loop_of, _nested, _pointee_of_cast, _short, _where)
from swzc.model.footprint.values import Values


class Addresses:
    """The global addresses one kernel's pointer expressions hold."""

    def __init__(self, values: Values, names: KernelNames, types: TypeSizes, scope: Scope) -> None:
        self.values = values
        self.names = names
        self.types = types
        self.scope = scope
        self.array_fields: dict[str, bool] = {}  # field name -> every field of that name is an array

    def address(self, node: Node | None, ctx: _Ctx | None = None, depth: int = 0) -> _Address | None:
        """The global address a pointer expression holds; None when it points to local or shared memory."""
        if node is None or depth > 60:
            raise _CannotFollow("pointer expression too deep")
        depth += 1
        kind = node.type
        if kind == "parenthesized_expression" and node.named_child_count == 1:
            return self.address(node.named_children[0], ctx, depth)
        if kind == "cast_expression":
            pointee = _pointee_of_cast(text(node.child_by_field_name("type")))
            inner = self.address(node.child_by_field_name("value"), ctx, depth)
            return replace(inner, pointee=pointee) if inner is not None else None
        if kind == "call_expression":
            callee = _callee(node)
            args = _arguments(node)
            function = node.child_by_field_name("function")
            if function is not None and function.type == "template_function" and callee in _CASTS and len(args) == 1:
                targs = function.child_by_field_name("arguments")
                inner = self.address(args[0], ctx, depth)
                return replace(inner, pointee=_pointee_of_cast(text(targs)[1:-1])) if inner is not None else None
            if callee == "__builtin_assume_aligned" and args:
                return self.address(args[0], ctx, depth)
            expansion = self.values.expansion(node, ctx)
            if expansion is not None:
                return self.address(expansion[0], expansion[1], depth)
            if callee in self.types.shared_structs:
                return None  # `SharedMemory<T>()`: a struct whose conversion hands out dynamic shared memory
            raise _CannotFollow(f"a pointer returned by {callee}()")
        if kind == "binary_expression" and text(node.child_by_field_name("operator")) in ("+", "-"):
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            minus = text(node.child_by_field_name("operator")) == "-"
            if not self.names.is_pointer(left, ctx) and not minus and self.names.is_pointer(right, ctx):
                left, right = right, left
            base = self.address(left, ctx, depth)
            if base is None:
                return None
            index = self.values.value(right, ctx, depth)
            return self._offset(base, index.scale(-1) if minus else index)
        if kind == "pointer_expression":
            op = text(node.child_by_field_name("operator"))
            arg = node.child_by_field_name("argument")
            if op == "&":
                return self._address_of(arg, ctx, depth)
            base = self.address(arg, ctx, depth)
            if base is None:
                return None
            raise _CannotFollow(f"a pointer read from memory: {_short(node)}")
        if kind == "subscript_expression":
            base = self.address(node.child_by_field_name("argument"), ctx, depth)
            if base is None:
                return None
            raise _CannotFollow(f"a pointer read from memory: {_short(node)}")
        if kind == "identifier":
            return self._pointer_identifier(node, ctx, depth)
        if kind == "field_expression":
            obj = node.child_by_field_name("argument")
            if text(node.child_by_field_name("operator")) == "." and obj is not None and self._is_local(obj, ctx):
                field = text(node.child_by_field_name("field"))
                if self._array_field(field) or field == "x" and "fragment" in self._declared_type(obj, ctx):
                    return None  # an array inside a local or shared struct (a WMMA fragment's elements: x[])
                raise _CannotFollow(f"a pointer held in a local struct: {_short(node)}")
            raise _CannotFollow(f"a pointer held in a struct: {_short(node)}")
        if kind == "conditional_expression":
            yes = self.address(node.child_by_field_name("consequence"), ctx, depth)
            no = self.address(node.child_by_field_name("alternative"), ctx, depth)
            if yes is None and no is None:
                return None
            raise _CannotFollow(f"a pointer chosen at run time: {_short(node)}")
        raise _CannotFollow(f"a pointer the analysis does not follow: {_short(node)}")

    def _address_of(self, arg: Node | None, ctx: _Ctx | None, depth: int) -> _Address | None:
        while arg is not None and arg.type == "parenthesized_expression" and arg.named_child_count == 1:
            arg = arg.named_children[0]
        if arg is None:
            raise _CannotFollow("address of nothing")
        if arg.type == "identifier" and ctx is not None and text(arg) in ctx.env:  # a macro's or helper's parameter:
            bound, outer = ctx.env[text(arg)]  # the address of the caller's argument (`&(value)`, value = a[i])
            return self._address_of(bound, outer, depth + 1)
        if arg.type == "subscript_expression":
            return self.element(arg, ctx, depth)[0]
        if arg.type == "pointer_expression" and text(arg.child_by_field_name("operator")) == "*":
            return self.address(arg.child_by_field_name("argument"), ctx, depth)
        if self._is_local(arg, ctx):
            return None
        raise _CannotFollow(f"the address of {_short(arg)}")

    def element(self, node: Node, ctx: _Ctx | None, depth: int = 0) -> tuple[_Address | None, int]:
        """The address of `base[index]` and the element's size."""
        base = self.address(node.child_by_field_name("argument"), ctx, depth)
        if base is None:
            return None, 0
        size = self.types.sizeof(base.pointee)
        if not size:
            raise _CannotFollow(_size_unknown(base.pointee))
        indices = node.child_by_field_name("indices")
        items = [c for c in indices.named_children if c.type != "comment"] if indices is not None else []
        if len(items) != 1:
            raise _CannotFollow(f"subscript {_short(node)}")
        return self._offset(base, self.values.value(items[0], ctx, depth)), size

    def _offset(self, base: _Address, index: Affine) -> _Address:
        if index.is_const and index.const == 0:
            return base
        size = self.types.sizeof(base.pointee)
        if not size:
            raise _CannotFollow(_size_unknown(base.pointee))
        return replace(base, offset=base.offset + index.scale(size))

    def _pointer_identifier(self, node: Node, ctx: _Ctx | None, depth: int) -> _Address | None:
        name = text(node)
        if ctx is not None and name in ctx.env:
            arg, outer = ctx.env[name]
            return self.address(arg, outer, depth)
        at = _where(node, ctx)
        kind = self.names.kind(name, at)
        if kind is not None and kind[1] == "local":
            return None
        if kind is not None and kind[1] == "self":
            raise _CannotFollow(f"{name} is defined in terms of itself")
        found = self.names.reaching(name, at)
        home = _home(ctx)
        if found is not None and (kind is not None or name in self.names.param_types):
            where, value = found
            if _loop_of(where) is not None:
                raise _CannotFollow(f"a pointer that is a loop variable: {name}")
            if _conditional_between(where, at):
                defs = [v for w, v in self.names.defs.get(name, []) if self.names.function_of(w) == self.names.function_of(at)]
                if all(v is not None and self._points_local(v, home) for v in defs):
                    return None
                raise _CannotFollow(f"{name} is assigned under a condition or in a loop")
            if value is None:
                raise _CannotFollow(f"{name} has no initialiser")
            base = self.address(value, home, depth)
            if base is None:
                return None
            if kind is not None and kind[1] == "pointer":
                base = replace(base, pointee=kind[2])
            return self._moved_address(base, name, where, at, depth, home)
        if name in self.names.param_types and self.names.function_of(at) == self.names.function.start_byte:
            base = _Address(name, Affine.of(0), self.names.param_types[name])
            return self._moved_address(base, name, None, at, depth, home)
        if name in self.names.globals:
            element = self.names.globals[name]
            return None if element is None else _Address(name, Affine.of(0), element)
        if kind is not None:
            raise _CannotFollow(f"{name} has no definition before this use")
        macro = self.scope.find(name)
        if isinstance(macro, Macro) and macro.params is None and expression_of(macro.body) is not None \
                and (ctx.depth if ctx else 0) < _MAX_NESTING:
            return self.address(expression_of(macro.body), _nested({}, at, False, ctx), depth)
        raise _CannotFollow(f"{name} is not a kernel parameter or a local")

    def _moved_address(self, base: _Address, name: str, where: Node | None, at: Node, depth: int,
                       home: _Ctx | None) -> _Address:
        if not self.names.moves.get(name):
            return base
        size = self.types.sizeof(base.pointee)
        if not size:
            raise _CannotFollow(_size_unknown(base.pointee))
        return replace(base, offset=base.offset + self.values.moved(name, where, at, size, depth, home))

    # -- local storage ------------------------------------------------------------------------------------
    def _declared_type(self, obj: Node, ctx: _Ctx | None) -> str:
        """The type a local's declaration spells (`wmma::fragment<…>` of `acc.x`), or ""."""
        while obj.type in ("field_expression", "subscript_expression") and obj.child_by_field_name("argument") is not None:
            obj = obj.child_by_field_name("argument")
        if obj.type != "identifier" or ctx is not None and text(obj) in ctx.env:
            return ""
        kind = self.names.kind(text(obj), _where(obj, ctx))
        return kind[2] if kind is not None else ""

    def _array_field(self, field: str) -> bool:
        """Every field named `field` in the file's structs is an array (its storage is the struct's own, so a
        local struct's is local memory).  A pointer field, or one not found, may hold a global address."""
        if field in self.array_fields:
            return self.array_fields[field]
        self.array_fields[field] = found = self._every_field_an_array(field)
        return found

    def _every_field_an_array(self, field: str) -> bool:
        found = False
        for struct in self.types.struct_nodes:
            for decl in walk(struct.child_by_field_name("body")):
                if decl.type != "field_declaration":
                    continue
                for declarator in decl.children_by_field_name("declarator"):
                    if declared_name(declarator) != field:
                        continue
                    if declarator.type != "array_declarator":
                        return False
                    found = True
        return found

    def _is_local(self, node: Node, ctx: _Ctx | None) -> bool:
        """A local variable (scalar, struct, array, shared array), or a member or element of one."""
        while node.type in ("field_expression", "subscript_expression", "parenthesized_expression"):
            inner = node.child_by_field_name("argument") if node.type != "parenthesized_expression" else (
                node.named_children[0] if node.named_child_count == 1 else None)
            if inner is None:
                return False
            if node.type == "field_expression" and text(node.child_by_field_name("operator")) == "->":
                return False
            node = inner
        if node.type != "identifier":
            return False
        name = text(node)
        if ctx is not None and name in ctx.env:
            arg, outer = ctx.env[name]
            return self._is_local(arg, outer)
        kind = self.names.kind(name, _where(node, ctx))
        if kind is not None:
            return kind[1] == "local"
        return name in self.names.globals and self.names.globals[name] is None

    def _points_local(self, value: Node, home: _Ctx | None) -> bool:
        try:
            return self.address(value, home) is None
        except _CannotFollow:
            return False
