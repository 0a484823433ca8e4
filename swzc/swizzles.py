"""The built-in swizzles: their names, and their one definition, as the C++ that is spliced into kernels.

Every swizzle is a permutation of the linear dispatch id ``p`` over an ``m x n`` tile grid (row-major:
``p = row * n + col``).  A spec chains steps left to right: ``xcd:8+grouped:8`` first deals ids back to
their chiplet, then groups rows.  An *adapter* turns the hardware block index into ``(p, m, n)`` and back:

- ``2d``: a 2D grid; rows are ``blockIdx.y``, columns ``blockIdx.x``; ``blockIdx.z`` is left alone.
- ``1d``: a 1D grid that the kernel decodes as ``row = blockIdx.x / n``, ``col = blockIdx.x % n``.
- ``linear``: a 1D grid with no tile structure (only chiplet steps apply).

The C++ text produced here is what the host prover compiles and what the rewrite splices in: one text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ADAPTERS = ("2d", "1d", "linear")

# One C++ definition per formula, all with the signature (p, m, n, param) -> new p.
FORMULAS: dict[str, str] = {
    "colmajor": """\
// colmajor: the tile grid walked down its columns instead of along its rows.
static __device__ __forceinline__ unsigned swzc_colmajor(unsigned p, unsigned m, unsigned n, unsigned) {
  return (p % m) * n + p / m;
}
""",
    "grouped": """\
// grouped:G: G tile rows per group, walked column by column inside each group (Triton's GROUP_M order).
static __device__ __forceinline__ unsigned swzc_grouped(unsigned p, unsigned m, unsigned n, unsigned g) {
  g = g < m ? g : m;  // a group taller than the grid is the whole grid; keeps g * n within m * n
  const unsigned per_group = g * n;
  const unsigned first_row = p / per_group * g;
  const unsigned rows = m - first_row < g ? m - first_row : g;  // the last group may be shorter
  const unsigned k = p % per_group;
  return (first_row + k % rows) * n + k / rows;
}
""",
    "xcd": """\
// xcd:N: the hardware deals block p to chiplet p mod N; renumber so that each chiplet runs one
// contiguous range of ids.  Exact when N does not divide the block count (the fuller chiplets come first).
static __device__ __forceinline__ unsigned swzc_xcd(unsigned p, unsigned m, unsigned n, unsigned chiplets) {
  const unsigned total = m * n;
  const unsigned per = total / chiplets + (total % chiplets != 0u ? 1u : 0u);
  const unsigned fuller = total % chiplets == 0u ? chiplets : total % chiplets;
  const unsigned chip = p % chiplets, slot = p / chiplets;
  return chip < fuller ? chip * per + slot : fuller * per + (chip - fuller) * (per - 1u) + slot;
}
""",
    "hilbert": """\
// hilbert:K: the tile grid cut into bands of K rows and each band into K x K panels, taken in row-major
// order; a full panel is walked along a Hilbert curve, a ragged edge panel row by row.  K is a power of two.
static __device__ __forceinline__ unsigned swzc_hilbert(unsigned p, unsigned m, unsigned n, unsigned k) {
  const unsigned long long band = (unsigned long long)k * n;  // ids in a full band of k rows
  const unsigned row0 = (unsigned)(p / band) * k;
  const unsigned h = m - row0 < k ? m - row0 : k;  // rows in this band
  const unsigned q = (unsigned)(p % band);
  const unsigned col0 = q / (h * k) * k;  // the panels before this one are h x k each
  const unsigned w = n - col0 < k ? n - col0 : k;  // columns in this panel
  const unsigned r = q - col0 * h;
  unsigned x = 0u, y = 0u;
  if (h == k && w == k) {
    unsigned t = r;
    for (unsigned side = 1u; side < k; side *= 2u) {  // one Hilbert level per two bits of r
      const unsigned rx = 1u & (t / 2u), ry = 1u & (t ^ rx);
      if (ry == 0u) {
        if (rx == 1u) {
          x = side - 1u - x;
          y = side - 1u - y;
        }
        const unsigned swap = x;
        x = y;
        y = swap;
      }
      x += side * rx;
      y += side * ry;
      t /= 4u;
    }
  } else {
    y = r / w;
    x = r % w;
  }
  return (row0 + y) * n + col0 + x;
}
""",
}

# Steps that need a tile grid (rows and columns); the others work on any linear order.
TILE_STEPS = frozenset({"colmajor", "grouped", "hilbert"})
PARAM_STEPS = {"grouped": "G", "xcd": "N", "hilbert": "K"}
MAX_PARAM = 1 << 16

_ADAPTER_HEAD = {
    "2d": (
        "unsigned bx, unsigned by, unsigned bz, unsigned gx, unsigned gy",
        "  if ((unsigned long long)gx * gy > 0xffffffffull) return make_uint3(bx, by, bz);"
        "  // ids past 32 bits: keep the hardware order\n"
        "  const unsigned m = gy, n = gx;\n"
        "  unsigned p = by * n + bx;\n",
        "  return make_uint3(p % n, p / n, bz);\n",
    ),
    "1d": (
        "unsigned bx, unsigned by, unsigned bz, unsigned gx, unsigned n",
        "  if (n == 0u || gx % n != 0u) return make_uint3(bx, by, bz);  // not an m x n tiling: keep the hardware order\n"
        "  const unsigned m = gx / n;\n"
        "  unsigned p = bx;\n",
        "  return make_uint3(p, by, bz);\n",
    ),
    "linear": (
        "unsigned bx, unsigned by, unsigned bz, unsigned gx",
        "  const unsigned m = 1u, n = gx;\n  unsigned p = bx;\n",
        "  return make_uint3(p, by, bz);\n",
    ),
}

_ADAPTER_DOC = {
    "2d": "over the 2D grid (rows blockIdx.y, columns blockIdx.x)",
    "1d": "over the tile grid the kernel decodes from a linear id (row = id / n: blockIdx.x, or a tile loop's index)",
    "linear": "over the 1D grid",
}


@dataclass(frozen=True, order=True)
class Step:
    kind: str  # a key of FORMULAS
    param: int = 0

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.param}" if self.kind in PARAM_STEPS else self.kind


@dataclass(frozen=True)
class SwizzleSpec:
    steps: tuple[Step, ...]

    @property
    def name(self) -> str:
        return "+".join(step.name for step in self.steps) or "identity"

    @property
    def is_identity(self) -> bool:
        return not self.steps

    @property
    def needs_tiles(self) -> bool:
        return any(step.kind in TILE_STEPS for step in self.steps)

    def function_name(self, adapter: str) -> str:
        return "swzc_" + "_".join(step.name.replace(":", "") for step in self.steps) + "_" + adapter

    def adapter_cxx(self, adapter: str) -> str:
        """The device function mapping the hardware block index to the swizzled one."""
        params, head, tail = _ADAPTER_HEAD[adapter]
        body = "".join(f"  p = swzc_{step.kind}(p, m, n, {step.param}u);\n" for step in self.steps)
        return (
            f"// {self.name} {_ADAPTER_DOC[adapter]}.\n"
            f"static __device__ __forceinline__ uint3 {self.function_name(adapter)}({params}) {{\n"
            f"{head}{body}{tail}}}\n"
        )


def parse_spec(text: str) -> SwizzleSpec:
    """Parse ``identity``, ``colmajor``, ``grouped:G``, ``xcd:N`` and chains of them joined by ``+``."""
    text = text.strip()
    if text == "identity":
        return SwizzleSpec(())
    steps = []
    for part in text.split("+"):
        match = re.fullmatch(r"\s*([a-z]+)(?::(\d+))?\s*", part)
        kind = match.group(1) if match else None
        if kind not in FORMULAS:
            known = "identity, colmajor, grouped:G, xcd:N, hilbert:K (joined with '+')"
            raise ValueError(f"unknown swizzle {part.strip()!r}; known: {known}")
        assert match is not None
        if kind in PARAM_STEPS:
            if match.group(2) is None:
                raise ValueError(f"{kind} needs a parameter, e.g. {kind}:8")
            value = int(match.group(2))
            if not 1 <= value <= MAX_PARAM:
                raise ValueError(f"{kind}:{value}: {PARAM_STEPS[kind]} must be between 1 and {MAX_PARAM}")
            if kind == "hilbert" and (value < 2 or value & (value - 1) or value > 1024):
                raise ValueError(f"hilbert:{value}: K must be a power of two from 2 to 1024")
            steps.append(Step(kind, value))
        else:
            if match.group(2) is not None:
                raise ValueError(f"{kind} takes no parameter")
            steps.append(Step(kind))
    return SwizzleSpec(tuple(steps))


def cxx_library(uses: list[tuple[SwizzleSpec, str]]) -> str:
    """The formulas and adapters that a set of (spec, adapter) pairs needs, each once, in a stable order."""
    kinds = sorted({step.kind for spec, _ in uses for step in spec.steps})
    adapters = sorted(set(uses), key=lambda use: use[0].function_name(use[1]))
    return "".join(FORMULAS[kind] for kind in kinds) + "".join(spec.adapter_cxx(adapter) for spec, adapter in adapters)
