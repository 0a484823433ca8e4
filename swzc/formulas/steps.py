"""The built-in orders' steps: ONE table (`KINDS`), one entry per kind of step, holding everything swzc knows
about it: its name and parameter letter, whether it needs a tile grid, whether its parameter is a panel side,
its C++ definition (the one text that is spliced and proven), the parameters the L2 model ranks, and its
one-line summary.  A new kind of order is one entry here: the parser, the C++ library, the ranking and the
help text read it from this table.

Every step is a permutation of the linear dispatch id ``p`` over an ``m x n`` tile grid (row-major:
``p = row * n + col``), written as ``swzc_<kind>(p, m, n, param)``; a chunked step (``xcd:N:C``) calls
``swzc_<kind>_chunked(p, m, n, param, chunk)``.  A division by a run-time value is marked ``DIV(a, d)``, a
remainder ``MOD(a, d)``: each definition is written in either division form (swzc.formulas.divide), the integer
one named ``swzc_<kind>_int``.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from swzc.formulas import divide

MAX_PARAM = 1 << 16  # every parameter is from 1 to this
MAX_PANEL = 1024  # a panel side is a power of two from 2 to this
MAX_GATE = 1 << 24  # a gate (swzc.formulas.swizzles.SwizzleSpec.gate) is a tile count from 2 to this (the prover goes
# through the grids at a gate block by block)


@dataclass(frozen=True)
class StepKind:
    """One kind of step, as the table holds it."""

    name: str  # as written in a spec: "grouped" in grouped:8
    letter: str | None  # its parameter's letter in help text ("G"), or None when it takes no parameter
    summary: str  # one line for help text and documentation
    cxx: str  # the C++ definition of swzc_<name>
    tiles: bool = True  # needs a tile grid (rows and columns); the others apply to any linear order
    panel: bool = False  # its parameter is the side of a square panel: a power of two from 2 to MAX_PANEL
    chunked_cxx: str | None = None  # where it also takes a chunk size C: the C++ of swzc_<name>_chunked
    ranked: tuple[int, ...] = ()  # the parameters the L2 model ranks (a tile step: those that fit the grid)
    per_chiplet: bool = False  # the model ranks it with the GPU's chiplet count as its parameter
    ranked_chunks: tuple[int, ...] = ()  # and with these chunk sizes too

    @property
    def chunked(self) -> str:
        """The key of its chunked form among the C++ definitions (`definitions()`)."""
        return f"{self.name}_chunked"

    @property
    def written(self) -> str:
        """How help text writes it: ``colmajor``, ``grouped:G``, and ``xcd:N, xcd:N:C`` for a chunked kind."""
        if self.letter is None:
            return self.name
        forms = [f"{self.name}:{self.letter}"] + ([f"{self.name}:{self.letter}:C"] if self.chunked_cxx else [])
        return ", ".join(forms)

    def fits(self, param: int, rows: int, cols: int) -> bool:
        """Whether the model ranks this step with `param` on a grid of `rows` x `cols` tiles: a group below the
        tile rows, a panel that the grid holds whole."""
        if self.letter is None:
            return True
        if self.panel:
            return param <= rows and param <= cols
        return param < rows


# hilbert:K and morton:K share their panels (bands of K rows cut into K x K panels, a ragged edge panel
# walked row by row) and differ in the walk of a full panel: these are the shared opening and closing lines.
_PANEL_START = """\
  const unsigned row0 = DIV(p, n) / k * k;  // the first of the k rows of p's band
  const unsigned h = m - row0 < k ? m - row0 : k;  // rows in this band
  const unsigned q = p - row0 * n;  // p's place in its band
  const unsigned col0 = DIV(q, (h * k)) * k;  // the panels before this one are h x k each
  const unsigned w = n - col0 < k ? n - col0 : k;  // columns in this panel
  const unsigned r = q - col0 * h;
  unsigned x = 0u, y = 0u;
  if (h == k && w == k) {
    unsigned t = r;
"""
_PANEL_END = """\
  } else {
    y = DIV(r, w);
    x = MOD(r, w);
  }
  return (row0 + y) * n + col0 + x;
}
"""


_COLMAJOR = """\
// colmajor: the tile grid walked down its columns instead of along its rows.
static __device__ __forceinline__ unsigned swzc_colmajor(unsigned p, unsigned m, unsigned n, unsigned) {
  return (MOD(p, m)) * n + DIV(p, m);
}
"""

_GROUPED = """\
// grouped:G: G tile rows per group, walked column by column inside each group (Triton's GROUP_M order).
static __device__ __forceinline__ unsigned swzc_grouped(unsigned p, unsigned m, unsigned n, unsigned g) {
  g = g < m ? g : m;  // a group taller than the grid is the whole grid; keeps g * n within m * n
  const unsigned per_group = g * n;
  const unsigned first_row = DIV(p, per_group) * g;
  const unsigned rows = m - first_row < g ? m - first_row : g;  // the last group may be shorter
  const unsigned k = MOD(p, per_group);
  return (first_row + MOD(k, rows)) * n + DIV(k, rows);
}
"""

_SERPENTINE = """\
// serpentine:G: grouped:G's groups of G tile rows, walked column by column, top to bottom in each column, but
// every odd-numbered group walks its columns right to left: consecutive groups meet at the same grid edge.
static __device__ __forceinline__ unsigned swzc_serpentine(unsigned p, unsigned m, unsigned n, unsigned g) {
  g = g < m ? g : m;  // a group taller than the grid is the whole grid; keeps g * n within m * n
  const unsigned per_group = g * n;
  const unsigned group = DIV(p, per_group);
  const unsigned first_row = group * g;
  const unsigned rows = m - first_row < g ? m - first_row : g;  // the last group may be shorter
  const unsigned k = MOD(p, per_group);
  const unsigned col = DIV(k, rows);
  return (first_row + MOD(k, rows)) * n + (group % 2u == 0u ? col : n - 1u - col);
}
"""

_XCD = """\
// xcd:N: the hardware deals block p to chiplet p mod N; renumber so that each chiplet runs one
// contiguous range of ids.  Exact when N does not divide the block count (the fuller chiplets come first).
static __device__ __forceinline__ unsigned swzc_xcd(unsigned p, unsigned m, unsigned n, unsigned chiplets) {
  const unsigned total = m * n;
  const unsigned per = total / chiplets + (total % chiplets != 0u ? 1u : 0u);
  const unsigned fuller = total % chiplets == 0u ? chiplets : total % chiplets;
  const unsigned chip = p % chiplets, slot = p / chiplets;
  return chip < fuller ? chip * per + slot : fuller * per + (chip - fuller) * (per - 1u) + slot;
}
"""

_XCD_CHUNKED = """\
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
"""

_HILBERT = """\
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
""" + _PANEL_END

_MORTON = """\
// morton:K: hilbert:K's panels (bands of K rows cut into K x K panels, taken in row-major order, a ragged edge
// panel walked row by row), but a full panel walked in Z-order: the offset's even bits give the column, its
// odd bits the row.  K is a power of two.
static __device__ __forceinline__ unsigned swzc_morton(unsigned p, unsigned m, unsigned n, unsigned k) {
""" + _PANEL_START + """    for (unsigned bit = 1u; bit < k; bit *= 2u) {  // one bit of x and one of y per two bits of r
      x += bit * (t & 1u);
      y += bit * ((t / 2u) & 1u);
      t /= 4u;
    }
""" + _PANEL_END


KINDS = MappingProxyType({kind.name: kind for kind in (
    StepKind("colmajor", None, "the tile grid walked down its columns", _COLMAJOR),
    StepKind("grouped", "G", "G tile rows per group, walked column by column inside each group", _GROUPED,
             ranked=(2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)),
    StepKind("serpentine", "G", "grouped:G with every odd-numbered group walking its columns right to left",
             _SERPENTINE, ranked=(2, 4, 8, 16, 32, 64)),
    StepKind("hilbert", "K", "bands of K rows cut into K x K panels, a full panel walked along a Hilbert curve",
             _HILBERT, panel=True, ranked=(4, 8, 16)),
    StepKind("morton", "K", "hilbert:K's panels, a full panel walked in Z-order", _MORTON, panel=True,
             ranked=(4, 8, 16)),
    StepKind("xcd", "N", "each of N chiplets runs one contiguous range of ids; xcd:N:C: chunks of C consecutive "
             "ids dealt to the chiplets in turn", _XCD, tiles=False, chunked_cxx=_XCD_CHUNKED, per_chiplet=True,
             ranked_chunks=(4, 16)),
)})


def definitions(integer: bool = False) -> dict[str, str]:
    """Every C++ definition by its key, in one division form: a kind's name, and ``<name>_chunked`` for its
    chunked form; the integer form's functions are named ``swzc_<key>_int`` (`function`)."""
    marked = {}
    for kind in KINDS.values():
        marked[kind.name] = kind.cxx
        if kind.chunked_cxx is not None:
            marked[kind.chunked] = kind.chunked_cxx
    return {key: divide.spelled(text, integer).replace(f" swzc_{key}(", f" {function(key, integer)}(", 1)
            for key, text in marked.items()}


def function(key: str, integer: bool = False) -> str:
    """The name of a definition's function in one division form."""
    return f"swzc_{key}" + (divide.SUFFIX if integer else "")


def known() -> str:
    """The orders a spec may name, as help text and error messages list them."""
    return "identity, " + ", ".join(kind.written for kind in KINDS.values()) + " (joined with '+'; ORDER@T gates one to grids of T tiles or more; ORDER/int divides in integer instructions)"
