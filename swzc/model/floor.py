"""The DRAM traffic no block order goes below: each 32-byte sector the whole grid reads fetched once, and each it
writes written once (compulsory traffic).  An order's predicted DRAM bytes over this floor says how much of its
traffic a better order could still save; 1.0 is the floor itself.

Counted from the footprint (swzc.model.footprint): each access's sectors for one block, moved block by block over
the tile grid, as merged byte intervals per array (swzc.model.footprint.sets.grid_intervals), reads and writes
apart.  Where listing them would pass the enumeration budget an access counts its whole span instead, and the
floor is marked as an upper bound (`exact` False).

Where the kernel is a matrix product, a tighter floor may hold for any order: a schedule of the m x n x k
multiply-adds whose fast memory holds S elements moves at least 2mnk / sqrt(S) - 2S elements between it and
slow memory (Smith, Lowery, Langou and van de Geijn, "A tight I/O lower bound for matrix multiplication",
2019).  The fast memory above the traffic counted here is the L2 and every SM's registers, shared memory and L1
(`fast_bytes`: on one chiplet, with its own L2, for a GPU of several; each does its share of the products
against its own, so the bound over all of them is 2mnk / sqrt(S) - 2S per domain), and an element is the
smallest of the three arrays' (more elements to the same bytes: the bound only falls).  Like the floor, it
takes every read the footprint lists to happen: a kernel that skips most of them (a guarded or sparse
product) moves less than both.  It is shown only where it is above the compulsory floor: for large products
against the L2 (a 16384³ fp32 GEMM on an H200: 5.7 GB against a floor of 3.2 GB), not for a small k (an
outer product, attention's QKᵀ), where the operands fit and the floor is reached.
A kernel is taken to be a product when its footprint has the shape of one: one array read in row panels (each
tile row's blocks read the same part, other tile rows other parts), one read in column panels, one written tile
by tile, nothing else read but what every block reads alike (a scale factor) and the result itself (C = A B +
C), and each of the three declared with an element of one number (not float4 or half2, whose count would not
be the matrices').  m k, k n and m n are then those arrays' distinct elements over the grid (the compulsory
counts above), so m n k = sqrt(mk * kn * mn), per z slice where the grid has several and every array moves
with z.  The bound assumes each result combines its row's and its column's elements pairwise, as a matrix
product does."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from swzc.model.footprint import Footprint
from swzc.target.hw import HardwareModel
from swzc.model.footprint.sets import SECTOR, grid_intervals, merged


L1_ALLOWANCE = 64 << 10  # per SM or CU: more than any L1 of the bundled GPUs holds beside its shared memory


@dataclass(frozen=True)
class Product:
    """A kernel found to be a matrix product, and the least DRAM traffic any order of it can reach."""

    m: int  # rows of the result
    n: int  # columns of the result
    k: int  # the inner dimension
    batch: int  # independent products (z slices)
    bytes: int  # the I/O lower bound: 2mnk / sqrt(S) - 2S elements of the operands' size (x batch)
    arrays: tuple[str, str, str]  # the row-panel, column-panel and result arrays


@dataclass(frozen=True)
class Floor:
    bytes: int  # distinct sectors read plus distinct sectors written, over the whole grid, x 32
    exact: bool  # False: some access counted by its span (the floor is at most this)
    product: Product | None = None  # where the kernel is a matrix product and the fast memory's size was given

    def times(self, dram_bytes: float) -> float | None:
        """`dram_bytes` as a multiple of the floor (None with no traffic at all)."""
        return dram_bytes / self.bytes if self.bytes else None


    def over_bound(self, dram_bytes: float) -> float | None:
        """`dram_bytes` as a multiple of the matrix product's I/O lower bound (None where there is none)."""
        return dram_bytes / self.product.bytes if self.product is not None and self.product.bytes else None


def compulsory(fp: Footprint, fast_bytes: int = 0, domains: int = 1) -> Floor:
    """The footprint's compulsory DRAM traffic over its whole grid; with `fast_bytes` (one of `domains` L2
    domains' fast memory, `fast_memory`), the I/O lower bound too where the kernel is a matrix product."""
    total, exact = 0, True
    distinct: dict[tuple[str, bool], int] = {}  # bytes per (array, written)
    for write in (False, True):
        by_array: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {}
        for access in fp.accesses:
            if access.write != write:
                continue
            starts, ends, whole = grid_intervals(access.sectors, access.block_bytes, fp.tiles)
            exact = exact and whole
            found = by_array.setdefault(access.array, ([], []))
            found[0].append(starts)
            found[1].append(ends)
        for array, (starts_list, ends_list) in by_array.items():
            starts, ends = merged(np.concatenate(starts_list), np.concatenate(ends_list))
            distinct[array, write] = int((ends - starts).sum())
            total += distinct[array, write]
    floor = total // SECTOR * SECTOR
    product = _product(fp, distinct, fast_bytes, domains) if exact and fast_bytes else None
    return Floor(floor, exact, product if product is not None and product.bytes > floor else None)


def fast_memory(hw: HardwareModel) -> int:
    """The bytes a schedule may keep operands in above the traffic the model counts, on one L2 domain: its L2,
    and its SMs' (CUs') registers and shared memory with an allowance for any L1 beside them."""
    per_cu = hw.regs_per_cu * 4 + hw.smem_per_cu + L1_ALLOWANCE
    return hw.l2_bytes_per_domain + hw.compute_units // hw.chiplets * per_cu


def _product(fp: Footprint, distinct: dict[tuple[str, bool], int], fast_bytes: int, domains: int) -> Product | None:
    """The matrix product the footprint has the shape of (see the module's docstring), with its I/O bound."""
    rows, cols, slices = fp.tiles
    if rows < 2 or cols < 2:
        return None
    moves: dict[tuple[str, bool], set[tuple[bool, bool, bool]]] = {}  # which tile axes move each array's part
    elem: dict[str, int] = {}
    scalar: dict[str, bool] = {}
    for a in fp.accesses:
        moves.setdefault((a.array, a.write), set()).add(tuple(b != 0 for b in a.block_bytes))  # type: ignore[arg-type]
        elem[a.array] = a.elem_bytes
        scalar[a.array] = scalar.get(a.array, True) and a.scalar
    if any(len(axes) != 1 for axes in moves.values()):
        return None  # one array reached two ways: not a panel
    axes = {key: next(iter(found)) for key, found in moves.items()}
    batched = slices > 1
    if batched and not all(z for _, _, z in axes.values()):
        return None  # a slice shares an array with the others: not independent products
    written = [name for (name, write), (r, c, _) in axes.items() if write and r and c]
    panels_r = [name for (name, write), (r, c, _) in axes.items() if not write and r and not c]
    panels_c = [name for (name, write), (r, c, _) in axes.items() if not write and c and not r]
    others = [name for (name, write), (r, c, _) in axes.items()  # what every block reads alike is left aside
              if not write and (r or c) and name not in (*panels_r, *panels_c, *written)]
    if len(written) != 1 or len(panels_r) != 1 or len(panels_c) != 1 or others or len({n for n, w in axes if w}) != 1:
        return None
    a, b, c = panels_r[0], panels_c[0], written[0]
    if not (scalar[a] and scalar[b] and scalar[c]):
        return None  # float4 A, float C: the element counts would not be the matrices' sizes
    mk, kn, mn = (distinct[name, write] / elem[name] / slices for name, write in ((a, False), (b, False), (c, True)))
    if min(mk, kn, mn) < 1:
        return None
    mnk = math.sqrt(mk * kn * mn)
    m, n = math.sqrt(mk * mn / kn), math.sqrt(kn * mn / mk)
    k = mnk / mn
    e = min(elem[a], elem[b], elem[c])
    room = fast_bytes / e  # elements one domain's fast memory holds
    moved = 2.0 * mnk / math.sqrt(room) - 2.0 * room * domains  # below zero where the operands fit: no bound above the floor
    return Product(round(m), round(n), round(k), slices, int(slices * moved * e), (a, b, c))
