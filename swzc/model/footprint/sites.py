"""Where a kernel touches global memory: the walk over its body (and the macros and helpers it calls) that
finds each access site (subscripts, dereferences, `->`, `__ldg` and kin, atomics, wmma fragment loads and
stores, asynchronous copies, inline asm) and records it as an `Access`, or as an `UnknownAccess` with its
line and why.  `Kernel` holds the parts that read one kernel under one launch, which the walk asks."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from tree_sitter import Node

from swzc.analysis.records import TileLoop
from swzc.frontend.evaluate import Evaluator, Macro, Scope, expression_of
from swzc.frontend.syntax import declared_name, text, walk
from swzc.model.footprint.addresses import Addresses
from swzc.model.footprint.affine import _Address, _CannotFollow
from swzc.model.footprint.names import KernelNames
from swzc.model.footprint.sets import BlockSets
from swzc.model.footprint.sizes import TypeSizes, _size_unknown
from swzc.model.footprint.tree import (_CASTS, _MAX_NESTING, _Ctx, _arguments, _callee, _file_facts, _kernel_line, _nested,
                                       _parameter_names, _short, _where, expression)
from swzc.model.footprint.values import Values

if TYPE_CHECKING:
    from swzc.analysis.context import FileContext

_READ_CALLS = {"__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv"}
_WRITE_CALLS = {"__stcg", "__stcs", "__stwb", "__stwt"}
_ATOMIC = re.compile(r"^(atomic[A-Z]\w*|__hip_atomic\w*|unsafeAtomic\w*|safeAtomic\w*)$")
_TEXTURE = re.compile(r"^(tex(1D|2D|3D|Cubemap)\w*|tex1Dfetch|tex2Dgather|surf(1D|2D|3D|Cubemap)\w*(read|write))$")
_PASSIVE = {"printf", "assert", "__syncthreads", "__syncwarp", "__threadfence", "__cvta_generic_to_shared"}


# ---- records ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Access:
    array: str
    write: bool
    elem_bytes: int  # bytes per element of the array as declared
    block_bytes: tuple[int, int, int]  # bytes per unit of the block's (row, col, z)
    sectors: np.ndarray  # sorted relative 32-byte sector ids one block touches over its life
    line: int
    approximate: bool = False  # the sectors are a superset (interval bounds, or loop counts of the first block)
    scalar: bool = True  # the array's declared element is one number (not float4, half2 or a struct)

    def __hash__(self) -> int:
        return hash((self.array, self.write, self.line, self.block_bytes))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Access) and (self.array, self.write, self.line, self.block_bytes) == (
            other.array, other.write, other.line, other.block_bytes) and np.array_equal(self.sectors, other.sectors)


@dataclass(frozen=True)
class UnknownAccess:
    """A global access the analysis could not follow, left out of the footprint."""

    line: int
    array: str  # the array's name, or the expression's text
    mode: str  # "read", "write" or "read-write"
    why: str

    @property
    def reads(self) -> bool:
        return self.mode != "write"

    def __str__(self) -> str:
        return f"line {self.line}: {self.array}: {self.why}"


# ---- the kernel and its readers ------------------------------------------------------------------------------


class Kernel:
    """One kernel under one launch, as the parts that read it: its names, the sizes of its types, the
    symbols of a block with the sets of values they take, the values of its expressions, and the global
    addresses of its pointers.  Each part holds the ones it asks."""

    def __init__(self, file: FileContext, function: Node, ev: Evaluator, scope: Scope, type_args: Mapping[str, str],
                 launch_grid: tuple[int, int, int], block: tuple[int, int, int], tiles: tuple[int, int, int],
                 adapter: str, divisor: int | None, tile_loop: TileLoop | None) -> None:
        self.scope = scope
        self.tile_loop = tile_loop
        facts = _file_facts(file)
        self.names = KernelNames(function, facts, scope)
        self.types = TypeSizes(ev, scope, type_args, facts.structs)
        self.sets = BlockSets(block, tiles)
        self.values = Values(file.src, ev, scope, launch_grid, block, adapter, divisor, tile_loop, self.names, self.sets,
                             self.types)
        self.addresses = Addresses(self.values, self.names, self.types, scope)


# ---- access sites -----------------------------------------------------------------------------------------------

_FRAGMENT = re.compile(r"fragment\s*<\s*(?:\w+::)*(matrix_a|matrix_b|accumulator)\s*,\s*([^,]+),\s*([^,]+),\s*([^,>]+)"
                       r"(?:,\s*([^,>]+))?(?:,\s*(?:\w+::)*(row_major|col_major))?")
_ASM_WIDTH = re.compile(r"(?:\.v(\d))?\.[bsuf](8|16|32|64|128)\b")


class _Sites:
    """Walks a kernel (and the macros and helpers it calls) for global accesses."""

    def __init__(self, kernel: Kernel, fragments: Mapping[str, tuple[int, int, bool]]) -> None:
        self.k = kernel
        self.fragments = fragments
        self.accesses: list[Access] = []
        self.unknown: list[UnknownAccess] = []
        self.addressed: set[Node] = set()  # a macro's arguments it only takes the address of: not accesses where they stand

    def scan(self, root: Node, ctx: _Ctx | None) -> None:
        tile = self.k.tile_loop
        stack = [root]
        while stack:
            node = stack.pop()
            if node in self.addressed:  # FLOAT4(A[idx[i]]): not A[...] itself, but what its index reads
                stack.extend(reversed(node.children))
                continue
            at = _where(node, ctx)
            if ctx is None and tile is not None and not (tile.body_start <= node.start_byte < tile.body_end) \
                    and not (node.start_byte <= tile.body_start and tile.body_end <= node.end_byte):
                continue  # outside the tile loop's body: once per block, not per tile, so not in a tile's footprint
            try:
                self._visit(node, ctx, at)
            except _CannotFollow as why:  # outside an access (a call's arguments, a macro's name): what it may touch is unknown
                self.unknown.append(UnknownAccess(_kernel_line(at, ctx), _short(node), "read-write", str(why)))
                continue
            except RecursionError:  # definitions that refer to themselves, in code that parses but cannot compile
                self.unknown.append(UnknownAccess(_kernel_line(at, ctx), _short(node), "read-write",
                                                  "an expression that refers to itself"))
                continue
            stack.extend(reversed(node.children))

    def _visit(self, node: Node, ctx: _Ctx | None, at: Node) -> None:
        kind = node.type
        if kind == "subscript_expression":
            parent = node.parent
            if parent is not None and parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node:
                return  # a row of a multi-dimensional array: the outer subscript is the access
            if _under_address_of(node):
                return
            self._site(node, ctx, at, _mode(node, ctx), lambda: self.k.addresses.element(node, ctx))
        elif kind == "pointer_expression" and text(node.child_by_field_name("operator")) == "*":
            if _under_address_of(node):
                return
            arg = node.child_by_field_name("argument")
            self._site(node, ctx, at, _mode(node, ctx), lambda: self._pointee(arg, ctx))
        elif kind == "field_expression" and text(node.child_by_field_name("operator")) == "->":
            obj = node.child_by_field_name("argument")
            self._site(node, ctx, at, _mode(node, ctx), lambda: self._member(obj, ctx))
        elif kind == "call_expression":
            self._call(node, ctx, at)
        elif kind == "gnu_asm_expression":
            self._asm(node, ctx, at)
        elif kind == "identifier" and (ctx.depth if ctx else 0) < _MAX_NESTING and not _is_callee(node):
            macro = self.k.scope.find(text(node))
            if isinstance(macro, Macro) and macro.params is None and re.search(r"[\[*]|->", macro.body) \
                    and self.k.names.kind(text(node), at) is None:
                body = expression_of(macro.body)
                if body is not None:
                    self.scan(body, _nested({}, at, False, ctx))

    def _pointee(self, pointer: Node, ctx: _Ctx | None) -> tuple[_Address | None, int]:
        address = self.k.addresses.address(pointer, ctx)
        if address is None:
            return None, 0
        size = self.k.types.sizeof(address.pointee)
        if not size:
            raise _CannotFollow(_size_unknown(address.pointee))
        return address, size

    def _member(self, obj: Node, ctx: _Ctx | None) -> tuple[_Address | None, int]:
        if self.k.addresses.address(obj, ctx) is None:
            return None, 0
        raise _CannotFollow("a member read through a pointer is not followed")

    def _site(self, node: Node, ctx: _Ctx | None, at: Node, mode: str, locate, rows: tuple[int, int] | None = None,
              width: int | None = None) -> None:
        """Record the access `locate()` finds (its address and size), or why it cannot be followed."""
        try:
            address, size = locate()
            if address is None:
                return  # local or shared memory
            block_bytes, sectors, approximate = self.k.sets.touched(address, width or size, rows)
        except _CannotFollow as why:
            self.unknown.append(UnknownAccess(_kernel_line(at, ctx), _label(node, self.k.names, ctx), mode, str(why)))
            return
        if sectors.size == 0:
            return  # inside a loop that never runs
        declared = self.k.names.param_types.get(address.array, self.k.names.globals.get(address.array) or "")
        elem = self.k.types.sizeof(declared) or size
        scalar = bool(declared) and self.k.types.is_scalar(declared)
        for write in {"read": (False,), "write": (True,), "read-write": (False, True)}[mode]:
            self.accesses.append(Access(address.array, write, elem, block_bytes, sectors, _kernel_line(at, ctx), approximate, scalar))  # type: ignore[arg-type]

    def _call(self, node: Node, ctx: _Ctx | None, at: Node) -> None:
        callee = _callee(node)
        args = _arguments(node)
        function = node.child_by_field_name("function")
        if function is not None and function.type == "template_function" and callee in _CASTS:
            return
        if callee in _READ_CALLS | _WRITE_CALLS or _ATOMIC.match(callee):
            mode = "read" if callee in _READ_CALLS else "write" if callee in _WRITE_CALLS else "read-write"
            if args:
                self._site(node, ctx, at, mode, lambda: self._pointee(args[0], ctx))
            return
        if callee in ("load_matrix_sync", "store_matrix_sync") and len(args) >= 3:
            self._fragment(node, callee, args, ctx, at)
            return
        if callee in ("__pipeline_memcpy_async", "memcpy_async") and len(args) >= 3:
            # (dst, src, size[, pipe]) or, for a group's collective copy, (group, dst, src, size[, barrier])
            first = 0 if callee == "__pipeline_memcpy_async" or self.k.names.is_pointer(args[0], ctx) else 1
            if len(args) >= first + 3:
                src, size = args[first + 1], args[first + 2]
                self._site(node, ctx, at, "read", lambda: (self.k.addresses.address(src, ctx), self._width(size, ctx)))
                return
        if _TEXTURE.match(callee) and args:
            mode = "write" if callee.startswith("surf") and "write" in callee else "read"
            self.unknown.append(UnknownAccess(_kernel_line(at, ctx), _short(node), mode, "a texture or surface access is not followed"))
            return
        if callee in _PASSIVE:
            return
        expansion = self.k.values.expansion(node, ctx)
        macro = self.k.scope.find(callee) if expansion is not None else None
        if isinstance(macro, Macro) and macro.params is not None:  # FLOAT4(c[i]) = v: the body's access stands for c[i]
            self.addressed.update(_unwrapped(arg) for param, arg in zip(macro.params, args) if _address_only(expansion[0], param))
        if expansion is None and callee in self.k.names.helpers and (ctx.depth if ctx else 0) < _MAX_NESTING:
            helper = self.k.names.helpers[callee]
            names = _parameter_names(helper)
            if len(names) == len(args) and callee != (ctx.helper if ctx else ""):
                expansion = (helper.child_by_field_name("body"),
                             _nested({p: (a, ctx) for p, a in zip(names, args)}, at, True, ctx, callee))
        if expansion is not None:
            self.scan(expansion[0], expansion[1])
            return
        for arg in args:  # a global pointer handed to code the analysis does not read
            if self.k.names.is_pointer(arg, ctx):
                self._site(arg, ctx, at, "read-write", lambda a=arg: self._escape(a, callee, ctx))

    def _escape(self, arg: Node, callee: str, ctx: _Ctx | None) -> tuple[_Address | None, int]:
        if self.k.addresses.address(arg, ctx) is None:
            return None, 0
        raise _CannotFollow(f"passed to {callee}(), which the analysis does not read")

    def _width(self, node: Node, ctx: _Ctx | None) -> int:
        size = self.k.values.value(node, ctx)
        if not size.is_const or size.const <= 0:
            raise _CannotFollow(f"copy size {_short(node)} is not known")
        return size.const

    def _fragment(self, node: Node, callee: str, args: list[Node], ctx: _Ctx | None, at: Node) -> None:
        frag, ptr = (args[0], args[1]) if callee == "load_matrix_sync" else (args[1], args[0])
        while frag.type in ("subscript_expression", "parenthesized_expression"):  # a[i]: an array of fragments
            frag = frag.child_by_field_name("argument") if frag.type == "subscript_expression" else frag.named_children[0]
        mode = "read" if callee == "load_matrix_sync" else "write"

        def locate() -> tuple[_Address | None, int]:
            address = self.k.addresses.address(ptr, ctx)
            if address is None:
                return None, 0
            shape = self.fragments.get(text(frag))
            if shape is None:
                raise _CannotFollow(f"the shape of fragment {text(frag)} is not known")
            return address, self.k.types.sizeof(address.pointee)

        try:
            address, size = locate()
        except _CannotFollow as why:
            self.unknown.append(UnknownAccess(_kernel_line(at, ctx), _label(ptr, self.k.names, ctx), mode, str(why)))
            return
        if address is None:
            return
        rows, cols, col_major = self.fragments[text(frag)]
        layout = text(args[3]) if len(args) > 3 else ""
        if "col_major" in layout or (len(args) == 3 and col_major):
            rows, cols = cols, rows
        try:
            ld = self.k.values.value(args[2], ctx)
            if not ld.is_const or not size:
                raise _CannotFollow(f"leading dimension {_short(args[2])} is not known")
        except _CannotFollow as why:
            self.unknown.append(UnknownAccess(_kernel_line(at, ctx), address.array, mode, str(why)))
            return
        self._site(node, ctx, at, mode, lambda: (address, size), rows=(rows, ld.const * size), width=cols * size)

    def _asm(self, node: Node, ctx: _Ctx | None, at: Node) -> None:
        code = "".join(text(c) for c in node.children_by_field_name("assembly_code")) or text(node)
        operands = [op for part in ("output_operands", "input_operands")
                    for lst in node.children_by_field_name(part) for op in lst.named_children if op.type.endswith("_operand")]
        pointers = [op.child_by_field_name("value") for op in operands
                    if "l" in text(op.child_by_field_name("constraint")).strip('"')]
        for ptr in pointers:
            if ptr is None:
                continue
            if "cp.async.bulk" in code:
                mode, width, why = "read", 0, "a bulk (TMA) copy is not followed"
            elif "cp.async" in code:
                mode, width, why = "read", 16, ""  # 4, 8 or 16 aligned bytes: one sector whichever
            elif re.search(r"\b(ld|st|red|atom)\.(\w+\.)*global", code):
                op = re.search(r"\b(ld|st|red|atom)\.(\w+\.)*global[\w.]*", code)
                assert op is not None
                vec = _ASM_WIDTH.findall(op.group(0))
                width = (int(vec[-1][0] or 1) * int(vec[-1][1]) // 8) if vec else 0
                mode = {"ld": "read", "st": "write"}.get(op.group(1), "read-write")
                why = "" if width else "the width of an inline-asm access is not known"
            else:
                mode, width, why = "read-write", 0, "inline asm with a global pointer is not followed"

            def locate(p: Node = ptr, why: str = why) -> tuple[_Address | None, int]:
                address = self.k.addresses.address(p, ctx)
                if address is None or not why:
                    return address, 1
                raise _CannotFollow(why)

            self._site(ptr, ctx, at, mode, locate, width=width or 1)


def _is_callee(node: Node) -> bool:
    parent = node.parent
    return parent is not None and parent.type == "call_expression" and parent.child_by_field_name("function") == node


def _unwrapped(node: Node) -> Node:
    """An expression without the parentheses around it."""
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def _address_only(body: Node, param: str) -> bool:
    """Whether a macro's body uses its parameter only under `&` (`&(value)`): the argument is an address, not a
    value read where the call stands."""
    uses = [n for n in walk(body) if n.type == "identifier" and text(n) == param]
    return bool(uses) and all(_under_address_of(n) for n in uses)


def _under_address_of(node: Node) -> bool:
    """`&A[i]` computes an address; the access, if any, is where that address is used."""
    parent = node.parent
    while parent is not None and parent.type == "parenthesized_expression":
        parent = parent.parent
    return parent is not None and parent.type == "pointer_expression" and text(parent.child_by_field_name("operator")) == "&"


def _mode(node: Node, ctx: _Ctx | None) -> str:
    """Whether the element at `node` is read, written or both, from where it stands."""
    child, parent = node, node.parent
    while True:
        while parent is not None and (parent.type == "parenthesized_expression" or (
                parent.type == "field_expression" and parent.child_by_field_name("argument") == child
                and text(parent.child_by_field_name("operator")) == ".")):
            child, parent = parent, parent.parent
        if parent is None or (parent.type == "init_declarator" and ctx is not None and not ctx.real
                              and text(parent.child_by_field_name("declarator")) == "swzc_probe_"):
            if ctx is None or ctx.real:
                return "read"
            child, parent = ctx.call, ctx.call.parent  # the whole macro body stands where the call does
            continue
        break
    if parent.type == "assignment_expression" and parent.child_by_field_name("left") == child:
        return "write" if text(parent.child_by_field_name("operator")) == "=" else "read-write"
    if parent.type == "update_expression":
        return "read-write"
    return "read"


def _label(node: Node, names: KernelNames, ctx: _Ctx | None) -> str:
    """The array an access goes to, as far as its text says: the first pointer it names."""
    for inner in walk(node):
        if inner.type == "identifier" and not _is_callee(inner):
            name = text(inner)
            if ctx is not None and name in ctx.env:
                return _label(ctx.env[name][0], names, ctx.env[name][1])
            if name in names.param_types or name in names.globals or names.is_pointer(inner, ctx):
                return name
    return _short(node)


def _fragments(bodies: list[Node], ev: Evaluator) -> dict[str, tuple[int, int, bool]]:
    """wmma fragment variables -> (rows, cols, column-major) of the tile they load."""
    out = {}
    for node in (n for body in bodies for n in walk(body)):
        if node.type == "declaration" and "fragment" in text(node.child_by_field_name("type")):
            match = _FRAGMENT.search(" ".join(text(node.child_by_field_name("type")).split()))
            if not match:
                continue
            use, m, n, k = match.group(1), *(ev.value(expression(g)) for g in match.group(2, 3, 4))
            if not all(isinstance(v, (int, float)) for v in (m, n, k)):
                continue
            m, n, k = int(m), int(n), int(k)  # type: ignore[arg-type]
            rows, cols = {"matrix_a": (m, k), "matrix_b": (k, n), "accumulator": (m, n)}[use]
            for decl in node.children_by_field_name("declarator"):
                out[declared_name(decl)] = (rows, cols, match.group(6) == "col_major")
    return out
