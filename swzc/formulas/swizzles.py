"""The built-in swizzles: their names, and their one definition, as the C++ that is spliced into kernels.

Every swizzle is a permutation of the linear dispatch id ``p`` over an ``m x n`` tile grid (row-major:
``p = row * n + col``).  The steps:

- ``colmajor``: the grid walked down its columns.
- ``grouped:G``: G tile rows per group, walked column by column inside each group.
- ``serpentine:G``: grouped:G with every odd-numbered group walking its columns right to left.
- ``hilbert:K`` and ``morton:K``: bands of K rows cut into K x K panels, a full panel walked along a Hilbert
  curve or in Z-order (K a power of two).
- ``xcd:N``: each of N chiplets runs one contiguous range of ids; ``xcd:N:C``: chunks of C consecutive
  ids, dealt to the chiplets in turn.

A spec chains steps left to right: ``xcd:8+grouped:8`` first deals ids back to their chiplet, then groups
rows.  An *adapter* turns the hardware block index into ``(p, m, n)`` and back:

- ``2d``: a 2D grid; rows are ``blockIdx.y``, columns ``blockIdx.x``; ``blockIdx.z`` is left alone.
- ``1d``: a 1D grid that the kernel decodes as ``row = blockIdx.x / n``, ``col = blockIdx.x % n``.
- ``linear``: a 1D grid with no tile structure (only chiplet steps apply).

A candidate order (a *formula*) is either a chain of these steps (`SwizzleSpec`) or a function body that
came from outside the family, an LLM's, once swzc.search.llm.restrict has passed it (`CustomSwizzle`).  Both give
the same things to the rest of swzc: a name, the device function per adapter, and the C++ it needs.

The C++ text produced here is what the host prover compiles and what the rewrite splices in: one text.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

ADAPTERS = ("2d", "1d", "linear")

# hilbert:K and morton:K share their panels (bands of K rows cut into K x K panels, a ragged edge panel
# walked row by row) and differ in the walk of a full panel: these are the shared opening and closing lines.
_PANEL_START = """\
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
"""
_PANEL_END = """\
  } else {
    y = r / w;
    x = r % w;
  }
  return (row0 + y) * n + col0 + x;
}
"""


# One C++ definition per formula, all with the signature (p, m, n, param) -> new p, except xcd_chunked, which
# takes xcd's chunk size as a fifth argument.  A step's formula is its kind, or CHUNKED_FORMULAS[kind] when it
# has a chunk.
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
    "serpentine": """\
// serpentine:G: grouped:G's groups of G tile rows, walked column by column, top to bottom in each column, but
// every odd-numbered group walks its columns right to left: consecutive groups meet at the same grid edge.
static __device__ __forceinline__ unsigned swzc_serpentine(unsigned p, unsigned m, unsigned n, unsigned g) {
  g = g < m ? g : m;  // a group taller than the grid is the whole grid; keeps g * n within m * n
  const unsigned per_group = g * n;
  const unsigned group = p / per_group;
  const unsigned first_row = group * g;
  const unsigned rows = m - first_row < g ? m - first_row : g;  // the last group may be shorter
  const unsigned k = p % per_group;
  const unsigned col = k / rows;
  return (first_row + k % rows) * n + (group % 2u == 0u ? col : n - 1u - col);
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
    "xcd_chunked": """\
// xcd:N:C: the hardware deals block p to chiplet p mod N; renumber so that each chiplet runs chunks of C
// consecutive ids, chunk j on chiplet j mod N.  The last, incomplete round of N * C ids keeps its order.
static __device__ __forceinline__ unsigned swzc_xcd_chunked(unsigned p, unsigned m, unsigned n, unsigned chiplets,
                                                            unsigned chunk) {
  const unsigned long long round = (unsigned long long)chiplets * chunk;  // N * C may pass 32 bits
  const unsigned long long whole = (unsigned long long)m * n / round * round;  // ids in complete rounds
  if (p >= whole) return p;
  const unsigned chip = p % chiplets, slot = p / chiplets;  // chiplet chip runs this block as its slot-th
  return (slot / chunk * chiplets + chip) * chunk + slot % chunk;
}
""",
    "hilbert": """\
// hilbert:K: the tile grid cut into bands of K rows and each band into K x K panels, taken in row-major
// order; a full panel is walked along a Hilbert curve, a ragged edge panel row by row.  K is a power of two.
static __device__ __forceinline__ unsigned swzc_hilbert(unsigned p, unsigned m, unsigned n, unsigned k) {
""" + _PANEL_START + """    for (unsigned side = 1u; side < k; side *= 2u) {  // one Hilbert level per two bits of r
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
""" + _PANEL_END,
    "morton": """\
// morton:K: hilbert:K's panels (bands of K rows cut into K x K panels, taken in row-major order, a ragged edge
// panel walked row by row), but a full panel walked in Z-order: the offset's even bits give the column, its
// odd bits the row.  K is a power of two.
static __device__ __forceinline__ unsigned swzc_morton(unsigned p, unsigned m, unsigned n, unsigned k) {
""" + _PANEL_START + """    for (unsigned bit = 1u; bit < k; bit *= 2u) {  // one bit of x and one of y per two bits of r
      x += bit * (t & 1u);
      y += bit * ((t / 2u) & 1u);
      t /= 4u;
    }
""" + _PANEL_END,
}

# Steps that need a tile grid (rows and columns); the others work on any linear order.
TILE_STEPS = frozenset({"colmajor", "grouped", "serpentine", "hilbert", "morton"})
# The steps a spec may name (xcd_chunked is reached through xcd:N:C).
STEP_KINDS = ("colmajor", "grouped", "serpentine", "hilbert", "morton", "xcd")
# Steps that take a parameter, and its letter.
PARAM_STEPS = {"grouped": "G", "serpentine": "G", "xcd": "N", "hilbert": "K", "morton": "K"}
# Steps that also take an optional chunk size C (xcd:N:C), and the formula that then applies.
CHUNKED_FORMULAS = {"xcd": "xcd_chunked"}
# Steps whose parameter is a panel side: a power of two up to 1024.
PANEL_STEPS = frozenset({"hilbert", "morton"})
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
    """One step of a spec: its kind, its parameter (0 for colmajor) and, for xcd only, a chunk size (0: none)."""

    kind: str  # one of STEP_KINDS
    param: int = 0
    chunk: int = 0

    @property
    def name(self) -> str:
        """As the user writes it: ``colmajor``, ``grouped:8``, ``xcd:8:4``."""
        if self.kind not in PARAM_STEPS:
            return self.kind
        return f"{self.kind}:{self.param}:{self.chunk}" if self.chunk else f"{self.kind}:{self.param}"

    @property
    def identifier(self) -> str:
        """The name as part of a C identifier: ``grouped8``, ``xcd8c4`` (``xcd84`` would also be xcd:84)."""
        if self.kind not in PARAM_STEPS:
            return self.kind
        return f"{self.kind}{self.param}c{self.chunk}" if self.chunk else f"{self.kind}{self.param}"

    @property
    def formula(self) -> str:
        """The key of FORMULAS whose C++ this step calls."""
        return CHUNKED_FORMULAS[self.kind] if self.chunk else self.kind

    def call_cxx(self) -> str:
        """The adapter's statement that applies this step to ``p``."""
        args = f"{self.param}u, {self.chunk}u" if self.chunk else f"{self.param}u"
        return f"  p = swzc_{self.formula}(p, m, n, {args});\n"


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
        return "swzc_" + "_".join(step.identifier for step in self.steps) + "_" + adapter

    def adapter_cxx(self, adapter: str) -> str:
        """The device function mapping the hardware block index to the swizzled one."""
        params, head, tail = _ADAPTER_HEAD[adapter]
        body = "".join(step.call_cxx() for step in self.steps)
        return (
            f"// {self.name} {_ADAPTER_DOC[adapter]}.\n"
            f"static __device__ __forceinline__ uint3 {self.function_name(adapter)}({params}) {{\n"
            f"{head}{body}{tail}}}\n"
        )


def parse_spec(text: str) -> SwizzleSpec:
    """Parse ``identity`` or a chain of steps joined by ``+``: ``colmajor``, ``grouped:G``, ``serpentine:G``,
    ``hilbert:K``, ``morton:K`` (K a power of two from 2 to 1024), ``xcd:N`` and ``xcd:N:C``.  Every parameter
    is from 1 to MAX_PARAM."""
    text = text.strip()
    if text == "identity":
        return SwizzleSpec(())
    steps = []
    for part in text.split("+"):
        match = re.fullmatch(r"\s*([a-z]+)(?::(\d+))?(?::(\d+))?\s*", part)
        kind = match.group(1) if match else None
        if kind not in STEP_KINDS:
            known = "identity, colmajor, grouped:G, serpentine:G, hilbert:K, morton:K, xcd:N, xcd:N:C (joined with '+')"
            raise ValueError(f"unknown swizzle {part.strip()!r}; known: {known}")
        assert match is not None
        written = part.strip()
        if kind not in PARAM_STEPS:
            if match.group(2) is not None:
                raise ValueError(f"{kind} takes no parameter")
            steps.append(Step(kind))
            continue
        if match.group(2) is None:
            raise ValueError(f"{kind} needs a parameter, e.g. {kind}:8")
        value = int(match.group(2))
        if not 1 <= value <= MAX_PARAM:
            raise ValueError(f"{written}: {PARAM_STEPS[kind]} must be between 1 and {MAX_PARAM}")
        if kind in PANEL_STEPS and (value < 2 or value & (value - 1) or value > 1024):
            raise ValueError(f"{written}: K must be a power of two from 2 to 1024")
        chunk = 0
        if match.group(3) is not None:
            if kind not in CHUNKED_FORMULAS:
                raise ValueError(f"{written}: {kind} takes one parameter ({kind}:{PARAM_STEPS[kind]}), not two")
            chunk = int(match.group(3))
            if not 1 <= chunk <= MAX_PARAM:
                raise ValueError(f"{written}: C must be between 1 and {MAX_PARAM}")
        steps.append(Step(kind, value, chunk))
    return SwizzleSpec(tuple(steps))


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
        params = _ADAPTER_HEAD[adapter][0]
        return (f"// {self.name} {_ADAPTER_DOC[adapter]}.\n"
                f"static __device__ __forceinline__ uint3 {self.function_name(adapter)}({params}) {{\n"
                f"{_CUSTOM_ADAPTER[adapter].format(fn=self.body_function)}}}\n")


Formula = SwizzleSpec | CustomSwizzle  # a candidate order, whatever proposed it


def cxx_library(uses: list[tuple[Formula, str]]) -> str:
    """The formulas and adapters that a set of (formula, adapter) pairs needs, each once, in a stable order."""
    formulas = sorted({step.formula for spec, _ in uses for step in spec.steps})
    customs = sorted({spec for spec, _ in uses if isinstance(spec, CustomSwizzle)}, key=lambda c: c.key)
    adapters = sorted(set(uses), key=lambda use: use[0].function_name(use[1]))
    helpers = MIN_MAX_CXX if customs else ""
    return ("".join(FORMULAS[formula] for formula in formulas) + helpers + "".join(c.definition() for c in customs)
            + "".join(spec.adapter_cxx(adapter) for spec, adapter in adapters))


# min and max for custom bodies, under names of swzc's own (a file may define its own min and max).
MIN_MAX_CXX = """\
static __device__ __forceinline__ unsigned long long swzc_min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static __device__ __forceinline__ unsigned long long swzc_max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
"""
