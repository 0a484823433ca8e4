"""The DRAM traffic no block order goes below: each 32-byte sector the whole grid reads fetched once, and each it
writes written once (compulsory traffic).  An order's predicted DRAM bytes over this floor says how much of its
traffic a better order could still save; 1.0 is the floor itself.

Counted from the footprint (swzc.model.footprint): each access's sectors for one block, moved block by block over
the tile grid, as merged byte intervals per array (swzc.model.footprint.sets.grid_intervals), reads and writes
apart.  Where listing them would pass the enumeration budget an access counts its whole span instead, and the
floor is marked as an upper bound (`exact` False)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from swzc.model.footprint import Footprint
from swzc.model.footprint.sets import SECTOR, grid_intervals, merged


@dataclass(frozen=True)
class Floor:
    bytes: int  # distinct sectors read plus distinct sectors written, over the whole grid, x 32
    exact: bool  # False: some access counted by its span (the floor is at most this)

    def times(self, dram_bytes: float) -> float | None:
        """`dram_bytes` as a multiple of the floor (None with no traffic at all)."""
        return dram_bytes / self.bytes if self.bytes else None


def compulsory(fp: Footprint) -> Floor:
    """The footprint's compulsory DRAM traffic over its whole grid."""
    total, exact = 0, True
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
        for starts_list, ends_list in by_array.values():
            starts, ends = merged(np.concatenate(starts_list), np.concatenate(ends_list))
            total += int((ends - starts).sum())
    return Floor(total // SECTOR * SECTOR, exact)
