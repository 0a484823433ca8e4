"""Per-block footprints: what each block of a kernel reads and writes in global memory.

An address is a kernel pointer parameter (or a file-scope ``__device__`` array) plus a byte offset, with
the type it points to.  Pointer arithmetic scales by that type's size and casts change it, so ``A[i]``,
``*(int4*)&A[i]``, ``reinterpret_cast<const float4*>(A + off)[j]``, a local pointer ``p = A + off``,
``__ldg(p + i)``, ``C[i] += v``, atomics, wmma fragment loads and ``cp.async`` all become an `Access`:
the byte offset the block index moves it by (a linear function of the block's logical tile row, column
and z) plus the set of 32-byte sectors one block touches over its whole life, relative to that offset.
Translation invariance is what makes the L2 model fast: every block touches the same shape, moved by
its offset.

Inside a block an offset may be any expression of the thread index and loop variables whose C value
can be computed (``/``, ``%``, shifts, masks, min/max, ternaries).  Terms that do not share a thread or
loop variable are independent, so their sets of values are summed as interval sets (Minkowski sums);
the terms that do share one are enumerated over those variables, with numpy.  Past the enumeration
budget an access falls back to its interval bounds, a contiguous superset flagged approximate.  An
access the analysis cannot follow is never dropped: it is listed in `Footprint.unknown` with its line.

Where each part lives (each module imports only the ones listed before it):
- ``affine``: offsets as affine forms over block, thread and loop symbols; the loop and address records;
  the two exceptions the analysis raises.
- ``sets``: integer and interval sets, sectors, and `BlockSets`, the symbols of one block with the sets
  of values forms over them take (the enumeration budget MAX_POINTS lives here).
- ``tree``: syntax helpers, the contexts macro and helper bodies are read in, and the file's facts.
- ``sizes``: ELEMENT_BYTES and `TypeSizes`, the sizes and alignments of types and structs.
- ``names``: `KernelNames`, what each name of a kernel is, its definitions and moves; pointer or not.
- ``values``: `Values`, integer values of expressions, loop variables, macros and helpers read in place.
- ``addresses``: `Addresses`, the global address a pointer expression holds.
- ``sites``: the `Access` and `UnknownAccess` records, `Kernel` (the parts above for one kernel under
  one launch, composed) and the walk over a kernel's access sites.
- ``staging``: `stages_reads`, whether a kernel stages its reads through shared memory.
- ``entry``: the `Footprint` record, `footprint` (the entry point) and `tile_grid`.
"""

from swzc.model.footprint.entry import Footprint, footprint, tile_grid
from swzc.model.footprint.sets import _merge, _sectors  # read directly by tests/test_footprint.py
from swzc.model.footprint.sites import Access, UnknownAccess
from swzc.model.footprint.sizes import ELEMENT_BYTES
from swzc.model.footprint.staging import stages_reads

__all__ = ["Access", "Footprint", "UnknownAccess", "ELEMENT_BYTES", "footprint", "tile_grid"]
