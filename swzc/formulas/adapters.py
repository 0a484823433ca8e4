"""Adapters: how a kernel's hardware block index becomes a dispatch id ``p`` over an ``m x n`` tile grid and
back.  Each adapter owns all of its C++: the parameters and the opening and closing lines of a built-in
order's device function, the same for an order given as a body (`CustomSwizzle`), the call the kernel makes
and the call the host prover makes.  A new adapter is one member here.

- ``2d``: a 2D grid; rows are ``blockIdx.y``, columns ``blockIdx.x``; ``blockIdx.z`` is left alone.
- ``1d``: a 1D grid that the kernel decodes as ``row = blockIdx.x / n``, ``col = blockIdx.x % n``.
- ``linear``: a 1D grid with no tile structure (only chiplet steps apply).

The members are strings (`StrEnum`): ``Adapter.TWO_D == "2d"``, and JSON and messages show ``2d``.
"""

from __future__ import annotations

from enum import StrEnum

from swzc.formulas import divide


class Adapter(StrEnum):
    TWO_D = "2d"
    ONE_D = "1d"
    LINEAR = "linear"

    @property
    def doc(self) -> str:
        """What the device function's comment says it runs over."""
        return _DOC[self]

    @property
    def parameters(self) -> str:
        """The device function's parameters: the hardware block index, the grid, and the 1d decode's divisor."""
        return _PARAMETERS[self]

    def head(self, integer: bool = False) -> str:
        """A built-in order's opening lines: ``m``, ``n`` and ``p`` from the hardware index (a grid that is not
        an m x n tiling keeps the hardware order), in one division form (swzc.formulas.divide)."""
        return divide.spelled(_HEAD[self], integer)

    def tail(self, integer: bool = False) -> str:
        """A built-in order's closing line: the block at dispatch id ``p``, in one division form."""
        return divide.spelled(_TAIL[self], integer)

    def custom_body(self, fn: str) -> str:
        """The body of the device function that runs an order given as a body (`fn`) over this adapter (divided
        with ``/``: an order given as a body has one form)."""
        return divide.spelled(_CUSTOM[self], False).format(fn=fn)

    def kernel_call(self, function: str, hip: bool, divisor: str | None = None) -> str:
        """The call a kernel makes, in its own spelling of the block index; `divisor` is the 1d decode's
        tile-column count as C++ the kernel can evaluate where the call goes."""
        if hip:
            blocks, grid_x, grid_y = "hipBlockIdx_x, hipBlockIdx_y, hipBlockIdx_z", "hipGridDim_x", "hipGridDim_y"
        else:
            blocks, grid_x, grid_y = "blockIdx.x, blockIdx.y, blockIdx.z", "gridDim.x", "gridDim.y"
        if self is Adapter.TWO_D:
            return f"{function}({blocks}, {grid_x}, {grid_y})"
        if self is Adapter.ONE_D:
            return f"{function}({blocks}, {grid_x}, (unsigned)({divisor}))"
        return f"{function}({blocks}, {grid_x})"

    def prover_call(self, function: str) -> str:
        """The call the host prover makes, over its loop variables ``bx by bz gx gy n``."""
        return _PROVER_CALL[self].format(fn=function)


_DOC = {
    Adapter.TWO_D: "over the 2D grid (rows blockIdx.y, columns blockIdx.x)",
    Adapter.ONE_D: "over the tile grid the kernel decodes from a linear id (row = id / n: blockIdx.x, or a tile loop's index)",
    Adapter.LINEAR: "over the 1D grid",
}

_PARAMETERS = {
    Adapter.TWO_D: "unsigned bx, unsigned by, unsigned bz, unsigned gx, unsigned gy",
    Adapter.ONE_D: "unsigned bx, unsigned by, unsigned bz, unsigned gx, unsigned n",
    Adapter.LINEAR: "unsigned bx, unsigned by, unsigned bz, unsigned gx",
}

_PAST_32_BITS = ("  if ((unsigned long long)gx * gy > 0xffffffffull) return make_uint3(bx, by, bz);"
                 "  // ids past 32 bits: keep the hardware order\n")
_NOT_A_TILING = ("  if (n == 0u || MOD(gx, n) != 0u) return make_uint3(bx, by, bz);"
                 "  // not an m x n tiling: keep the hardware order\n")

_HEAD = {
    Adapter.TWO_D: _PAST_32_BITS + "  const unsigned m = gy, n = gx;\n  unsigned p = by * n + bx;\n",
    Adapter.ONE_D: _NOT_A_TILING + "  const unsigned m = DIV(gx, n);\n  unsigned p = bx;\n",
    Adapter.LINEAR: "  const unsigned m = 1u, n = gx;\n  unsigned p = bx;\n",
}

_TAIL = {
    Adapter.TWO_D: "  return make_uint3(MOD(p, n), DIV(p, n), bz);\n",
    Adapter.ONE_D: "  return make_uint3(p, by, bz);\n",
    Adapter.LINEAR: "  return make_uint3(p, by, bz);\n",
}

# How a body sees the blocks, whatever the adapter: a tile grid of grid.x columns and grid.y rows (grid.z == 1),
# `block` the tile at a dispatch position; what it returns outside the grid maps out of range, which the
# proof refuses.
_CUSTOM = {
    Adapter.TWO_D: (
        _PAST_32_BITS
        + "  const uint3 t = {fn}(make_uint3(bx, by, 0u), make_uint3(gx, gy, 1u));\n"
        "  return make_uint3(t.x, t.y, bz);\n"
    ),
    Adapter.ONE_D: (
        _NOT_A_TILING
        + "  const uint3 t = {fn}(make_uint3(MOD(bx, n), DIV(bx, n), 0u), make_uint3(n, DIV(gx, n), 1u));\n"
        "  const unsigned long long id = (unsigned long long)t.y * n + t.x;\n"
        "  return make_uint3(t.x < n && id < gx ? (unsigned)id : gx, by, bz);  // outside the tiling: out of range\n"
    ),
    Adapter.LINEAR: (
        "  const uint3 t = {fn}(make_uint3(bx, 0u, 0u), make_uint3(gx, 1u, 1u));\n"
        "  return make_uint3(t.y == 0u ? t.x : gx, by, bz);  // a second row does not exist: out of range\n"
    ),
}

_PROVER_CALL = {
    Adapter.TWO_D: "{fn}(bx, by, bz, gx, gy)",
    Adapter.ONE_D: "{fn}(bx, by, bz, gx, n)",
    Adapter.LINEAR: "{fn}(bx, by, bz, gx)",
}
