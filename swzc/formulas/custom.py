"""Orders from outside the built-in family: a function body (an LLM's), once swzc.search.llm.restrict has passed
it, compiled inside a head of swzc's own and run over the kernel's grid by its adapter (swzc.formulas.adapters).

The text compiled is the checked text, byte for byte; its name carries a hash of the body, so two bodies never
share a function.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from swzc.formulas.adapters import Adapter

# How a custom body sees the blocks, whatever the adapter: a tile grid of grid.x columns and grid.y rows
# (grid.z == 1), `block` the tile at a dispatch position (row-major: p = block.y * grid.x + block.x), and
# the result the tile that position computes.
CUSTOM_SIGNATURE = "uint3 {name}(const uint3 block, const uint3 grid)"
# In the compiled text every variable of a checked body, the two parameters included, carries this prefix
# (swzc.search.llm.restrict): the user's macros cannot reach names swzc reserves.
VARIABLE_PREFIX = "swzc_v_"
_COMPILED_SIGNATURE = f"uint3 {{name}}(const uint3 {VARIABLE_PREFIX}block, const uint3 {VARIABLE_PREFIX}grid)"
# The only characters a body from outside may hold, in what is checked and in what is compiled: every reader
# of the text (Python, tree-sitter, g++, nvcc) agrees on where its lines end and what is whitespace.
COMPILABLE_TEXT = re.compile(r"[\t\n\x20-\x7e]*")


def custom_function(name: str, body: str) -> str:
    """The function a checked body is compiled as (host and device alike), its text put in unchanged."""
    return f"static __device__ __forceinline__ {_COMPILED_SIGNATURE.format(name=name)} {{\n{body}\n}}\n"


@dataclass(frozen=True)
class CustomSwizzle:
    """An order given as the body of `CUSTOM_SIGNATURE` (an LLM's), already restricted to swzc's safe subset
    (swzc.search.llm.restrict).  Its name carries a hash of the body, so two bodies never share a function."""

    label: str  # the name it was given: [A-Za-z0-9_.:-], checked by its producer
    body: str  # the checked body, as it is compiled (its variables prefixed: block is swzc_v_block)
    source: str = field(default="", compare=False)  # the body as it was written, for people and the model

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,40}", self.label):
            raise ValueError(f"a custom swizzle's label must be 1-40 of [A-Za-z0-9_.:-], not {self.label!r}")
        if not COMPILABLE_TEXT.fullmatch(self.body):
            raise ValueError("a custom swizzle's body must be printable ASCII, tabs and newlines only")

    steps = ()  # no built-in steps
    kind = "custom"  # its kind of order, beside a spec's steps without their parameters
    is_identity = False  # only the proof can tell
    needs_tiles = False  # the body sees a one-row tile grid on a 1D grid

    @property
    def key(self) -> str:
        return hashlib.sha256(self.body.encode()).hexdigest()[:10]

    @property
    def name(self) -> str:
        return f"custom:{self.label}#{self.key}"

    @property
    def body_function(self) -> str:
        return f"swzc_custom_{self.key}"

    def function_name(self, adapter: str) -> str:
        return f"{self.body_function}_{adapter}"

    def definition(self) -> str:
        """The body's own function: the checked text, byte for byte, inside the head it was checked in."""
        return (f"// {self.name}: proposed outside the built-in family, restricted to integer arithmetic and proven.\n"
                + custom_function(self.body_function, self.body))

    def adapter_cxx(self, adapter: str) -> str:
        """The device function that runs the body over `adapter`'s grid."""
        over = Adapter(adapter)
        return (f"// {self.name} {over.doc}.\n"
                f"static __device__ __forceinline__ uint3 {self.function_name(adapter)}({over.parameters}) {{\n"
                f"{over.custom_body(self.body_function)}}}\n")



# min and max for custom bodies, under names of swzc's own (a file may define its own min and max).
MIN_MAX_CXX = """\
static __device__ __forceinline__ unsigned long long swzc_min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static __device__ __forceinline__ unsigned long long swzc_max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
"""
