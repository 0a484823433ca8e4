"""The built-in swizzles: their names, and their one definition, as the C++ that is spliced into kernels.

Every swizzle is a permutation of the linear dispatch id ``p`` over an ``m x n`` tile grid (row-major:
``p = row * n + col``).  A spec chains steps left to right: ``xcd:8+grouped:8`` first deals ids back to
their chiplet, then groups rows.  An *adapter* turns the hardware block index into ``(p, m, n)`` and back:

- ``2d``: a 2D grid; rows are ``blockIdx.y``, columns ``blockIdx.x``; ``blockIdx.z`` is left alone.
- ``1d``: a 1D grid that the kernel decodes as ``row = blockIdx.x / n``, ``col = blockIdx.x % n``.
- ``linear``: a 1D grid with no tile structure (only chiplet steps apply).

A candidate order (a *formula*) is either a chain of these steps (`SwizzleSpec`) or a function body that
came from outside the family, an LLM's, once swzc.llm.restrict has passed it (`CustomSwizzle`).  Both give
the same things to the rest of swzc: a name, the device function per adapter, and the C++ it needs.

The C++ text produced here is what the host prover compiles and what the rewrite splices in: one text.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

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


# How a custom body sees the blocks, whatever the adapter: a tile grid of grid.x columns and grid.y rows
# (grid.z == 1), `block` the tile at a dispatch position (row-major: p = block.y * grid.x + block.x), and
# the result the tile that position computes.
CUSTOM_SIGNATURE = "uint3 {name}(const uint3 block, const uint3 grid)"
# In the compiled text every variable of a checked body, the two parameters included, carries this prefix
# (swzc.llm.restrict): the user's macros cannot reach names swzc reserves.
VARIABLE_PREFIX = "swzc_v_"
_COMPILED_SIGNATURE = f"uint3 {{name}}(const uint3 {VARIABLE_PREFIX}block, const uint3 {VARIABLE_PREFIX}grid)"

_CUSTOM_ADAPTER = {
    "2d": (
        "  if ((unsigned long long)gx * gy > 0xffffffffull) return make_uint3(bx, by, bz);"
        "  // ids past 32 bits: keep the hardware order\n"
        "  const uint3 t = {fn}(make_uint3(bx, by, 0u), make_uint3(gx, gy, 1u));\n"
        "  return make_uint3(t.x, t.y, bz);\n"
    ),
    "1d": (
        "  if (n == 0u || gx % n != 0u) return make_uint3(bx, by, bz);  // not an m x n tiling: keep the hardware order\n"
        "  const uint3 t = {fn}(make_uint3(bx % n, bx / n, 0u), make_uint3(n, gx / n, 1u));\n"
        "  const unsigned long long id = (unsigned long long)t.y * n + t.x;\n"
        "  return make_uint3(t.x < n && id < gx ? (unsigned)id : gx, by, bz);  // outside the tiling: out of range\n"
    ),
    "linear": (
        "  const uint3 t = {fn}(make_uint3(bx, 0u, 0u), make_uint3(gx, 1u, 1u));\n"
        "  return make_uint3(t.y == 0u ? t.x : gx, by, bz);  // a second row does not exist: out of range\n"
    ),
}


@dataclass(frozen=True)
class CustomSwizzle:
    """An order given as the body of `CUSTOM_SIGNATURE` (an LLM's), already restricted to swzc's safe subset
    (swzc.llm.restrict).  Its name carries a hash of the body, so two bodies never share a function."""

    label: str  # the name it was given: [A-Za-z0-9_.:-], checked by its producer
    body: str  # the checked body, as it is compiled (its variables prefixed: block is swzc_v_block)
    source: str = field(default="", compare=False)  # the body as it was written, for people and the model

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,40}", self.label):
            raise ValueError(f"a custom swizzle's label must be 1-40 of [A-Za-z0-9_.:-], not {self.label!r}")

    steps = ()  # no built-in steps
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
        """The body's own function."""
        indented = "".join(f"  {line}\n" if line.strip() else "\n" for line in self.body.strip("\n").splitlines())
        return (f"// {self.name}: proposed outside the built-in family, restricted to integer arithmetic and proven.\n"
                f"static __device__ __forceinline__ {_COMPILED_SIGNATURE.format(name=self.body_function)} {{\n{indented}}}\n")

    def adapter_cxx(self, adapter: str) -> str:
        params = _ADAPTER_HEAD[adapter][0]
        return (f"// {self.name} {_ADAPTER_DOC[adapter]}.\n"
                f"static __device__ __forceinline__ uint3 {self.function_name(adapter)}({params}) {{\n"
                f"{_CUSTOM_ADAPTER[adapter].format(fn=self.body_function)}}}\n")


Formula = SwizzleSpec | CustomSwizzle  # a candidate order, whatever proposed it


def cxx_library(uses: list[tuple[Formula, str]]) -> str:
    """The formulas and adapters that a set of (formula, adapter) pairs needs, each once, in a stable order."""
    kinds = sorted({step.kind for spec, _ in uses for step in spec.steps})
    customs = sorted({spec for spec, _ in uses if isinstance(spec, CustomSwizzle)}, key=lambda c: c.key)
    adapters = sorted(set(uses), key=lambda use: use[0].function_name(use[1]))
    helpers = MIN_MAX_CXX if customs else ""
    return ("".join(FORMULAS[kind] for kind in kinds) + helpers + "".join(c.definition() for c in customs)
            + "".join(spec.adapter_cxx(adapter) for spec, adapter in adapters))


# min and max for custom bodies, under names of swzc's own (a file may define its own min and max).
MIN_MAX_CXX = """\
static __device__ __forceinline__ unsigned long long swzc_min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static __device__ __forceinline__ unsigned long long swzc_max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
"""
