"""Sizes and alignments of the types a kernel names: built-in and vector types, aliases, macros and
template arguments followed, and the file's structs laid out as C lays them out."""

from __future__ import annotations

import re
from collections.abc import Mapping

from tree_sitter import Node

from swzc.frontend.evaluate import Evaluator, Scope
from swzc.frontend.syntax import text

ELEMENT_BYTES = {
    "char": 1, "signed char": 1, "unsigned char": 1, "bool": 1, "int8_t": 1, "uint8_t": 1, "void": 1,
    "short": 2, "unsigned short": 2, "int16_t": 2, "uint16_t": 2,
    "int": 4, "signed": 4, "unsigned": 4, "unsigned int": 4, "uint": 4, "int32_t": 4, "uint32_t": 4,
    "long": 8, "unsigned long": 8, "long long": 8, "unsigned long long": 8, "int64_t": 8, "uint64_t": 8,
    "size_t": 8, "ptrdiff_t": 8, "float": 4, "double": 8,
    "half": 2, "__half": 2, "half2": 4, "__half2": 4,
    "__nv_bfloat16": 2, "nv_bfloat16": 2, "__nv_bfloat162": 4, "nv_bfloat162": 4, "bf16": 2, "bfloat16": 2,
    "hip_bfloat16": 2, "__hip_bfloat16": 2, "__hip_bfloat162": 4,
    "__nv_fp8_e4m3": 1, "__nv_fp8_e5m2": 1, "__nv_fp8_storage_t": 1, "__nv_fp8x2_e4m3": 2, "__nv_fp8x2_e5m2": 2,
    "__nv_fp8x4_e4m3": 4, "__nv_fp8x4_e5m2": 4, "__hip_fp8_e4m3": 1, "__hip_fp8_e5m2": 1,
    "__hip_fp8_e4m3_fnuz": 1, "__hip_fp8_e5m2_fnuz": 1,
    "char2": 2, "uchar2": 2, "char4": 4, "uchar4": 4, "short2": 4, "ushort2": 4, "short4": 8, "ushort4": 8,
    "int2": 8, "uint2": 8, "int3": 12, "uint3": 12, "int4": 16, "uint4": 16,
    "float2": 8, "float3": 12, "float4": 16, "double2": 16, "longlong2": 16, "ulonglong2": 16,
}


# The types whose elements are one number each: not the vector types (float4, int2, ...) and packed pairs
# (half2, __nv_bfloat162, fp8x2, ...), which hold several, nor void.
VECTORS = frozenset({"half2", "__half2", "__nv_bfloat162", "nv_bfloat162", "__hip_bfloat162", "__nv_fp8x2_e4m3",
                     "__nv_fp8x2_e5m2", "__nv_fp8x4_e4m3", "__nv_fp8x4_e5m2", "char2", "uchar2", "char4", "uchar4", "short2",
                     "ushort2", "short4", "ushort4", "int2", "uint2", "int3", "uint3", "int4", "uint4", "float2", "float3",
                     "float4", "double2", "longlong2", "ulonglong2"})
SCALARS = frozenset(ELEMENT_BYTES) - VECTORS - {"void"}


class TypeSizes:
    """The sizes of the types one kernel names, under one launch's template arguments."""

    def __init__(self, ev: Evaluator, scope: Scope, type_args: Mapping[str, str], struct_nodes: tuple[Node, ...]) -> None:
        self.ev = ev
        self.scope = scope
        self.type_args = dict(type_args)
        self.structs: dict[str, tuple[int, int]] = {}  # struct name -> (size, alignment), C layout
        self.shared_structs: set[str] = set()  # structs whose methods hand out shared memory
        self.struct_nodes = struct_nodes
        for node in struct_nodes:
            name = text(node.child_by_field_name("name"))
            if name and b"__shared__" in (node.text or b""):
                self.shared_structs.add(name)
            parent = node.parent
            if not name and parent is not None and parent.type == "type_definition":
                names = [text(d) for d in parent.children_by_field_name("declarator") if d.type == "type_identifier"]
                name = names[0] if names else ""
            layout = self._layout(node.child_by_field_name("body"))
            if name and layout is not None:
                self.structs[name] = layout

    def sizeof(self, type_text: str) -> int:
        """Bytes of a type as written (0 when unknown): aliases, macros and template arguments followed."""
        if "*" in type_text:
            return 8
        return self._type_facts(type_text)[0]

    def _names(self, type_text: str) -> tuple[str, str, str, str]:
        """The names a type may be known by: resolved through aliases, macros and template arguments, and as
        written (qualifiers dropped), each with and without its namespace."""
        written = " ".join(w for w in type_text.split() if w not in ("const", "volatile", "struct", "__restrict__"))
        name = self.scope.resolve_type(type_text)
        for _ in range(4):
            if name in self.type_args:
                name = self.scope.resolve_type(self.type_args[name])
        return name, name.split("::")[-1].strip(), written, written.split("::")[-1].strip()

    def _type_facts(self, type_text: str) -> tuple[int, int]:
        """(size, alignment) of a non-pointer type; (0, 0) when unknown."""
        for candidate in self._names(type_text):
            if candidate in ELEMENT_BYTES:
                size = ELEMENT_BYTES[candidate]
                return size, 4 if candidate.endswith("3") else size  # float3 and its kin align as their element
            if candidate in self.structs:  # a typedef'd struct resolves to its body: look its name up first
                return self.structs[candidate]
        return 0, 0

    def is_scalar(self, type_text: str) -> bool:
        """Whether a non-pointer type is one number (float, __half, int32_t, ...), not a vector (float4, half2),
        a packed pair or a struct: aliases, macros and template arguments followed."""
        return "*" not in type_text and any(c in SCALARS for c in self._names(type_text))

    def alignment(self, type_text: str) -> int:
        return 8 if "*" in type_text else self._type_facts(type_text)[1]

    def _layout(self, body: Node) -> tuple[int, int] | None:
        """(size, alignment) of a struct's fields in C layout; None when a field's size is not known."""
        size, align = 0, 1
        for field_node in body.named_children:
            if field_node.type == "comment":
                continue
            if field_node.type != "field_declaration":
                return None if field_node.type not in ("access_specifier", "function_definition", "declaration") else (size, align)
            type_text = " ".join(text(field_node.child_by_field_name("type")).split())
            for decl in field_node.children_by_field_name("declarator"):
                stars = "*" * text(decl).count("*")
                count = 1
                node = decl
                while node is not None and node.type == "array_declarator":
                    extent = self.ev.value(node.child_by_field_name("size"))
                    if not isinstance(extent, int):
                        return None
                    count *= extent
                    node = node.child_by_field_name("declarator")
                unit, unit_align = self.sizeof(type_text + stars), self.alignment(type_text + stars)
                if not unit or not unit_align or "bitfield_clause" in {c.type for c in field_node.children}:
                    return None
                size = -(-size // unit_align) * unit_align + unit * count
                align = max(align, unit_align)
        return -(-size // align) * align, align


def _size_unknown(pointee: str) -> str:
    """Why an element's size is not known, with the --set that gives a type name one."""
    name = " ".join(pointee.replace("const", " ").replace("volatile", " ").split())
    if re.fullmatch(r"[A-Za-z_][\w:]*", name):
        return f"the size of {name} is not known (a type swzc cannot see: give it with --set {name}=TYPE, e.g. float2)"
    return f"the size of {pointee or 'its element type'} is not known"
