"""The orders morton:K, serpentine:G and xcd:N:C, as the compiled C++ runs them, against plain Python
references written from their definitions: the prover shows a bijection, these show it is the intended one."""

import numpy as np
import pytest

from swzc.formulas.prove import dispatch_maps
from swzc.formulas.swizzles import parse_spec

Order = list[int]  # the row-major tile id each dispatch position runs


def morton_order(m: int, n: int, k: int) -> Order:
    """Bands of k rows, cut into k x k panels taken left to right; a full panel in Z-order (the offset's even
    bits are the column, its odd bits the row), a ragged one row by row."""

    def z_index(row: int, col: int) -> int:
        return sum(((col >> bit) & 1) << (2 * bit) | ((row >> bit) & 1) << (2 * bit + 1) for bit in range(k.bit_length()))

    order = []
    for row0 in range(0, m, k):
        for col0 in range(0, n, k):
            rows, cols = min(k, m - row0), min(k, n - col0)
            cells = [(r, c) for r in range(rows) for c in range(cols)]
            if rows == k and cols == k:
                cells.sort(key=lambda cell: z_index(*cell))
            order += [(row0 + r) * n + col0 + c for r, c in cells]
    return order


def serpentine_order(m: int, n: int, g: int) -> Order:
    """Groups of g rows (the last may be shorter), each walked column by column, top to bottom; the even
    groups take the columns left to right, the odd ones right to left."""
    order = []
    for group, row0 in enumerate(range(0, m, g)):
        columns = range(n) if group % 2 == 0 else range(n - 1, -1, -1)
        order += [row * n + col for col in columns for row in range(row0, min(row0 + g, m))]
    return order


def chunked_xcd_order(total: int, chiplets: int, chunk: int) -> Order:
    """Position p runs on chiplet p % chiplets as its (p // chiplets)-th block; chunk j of `chunk` consecutive
    ids goes to chiplet j % chiplets, in turn.  The positions past the last whole round keep their ids."""
    whole = total // (chiplets * chunk) * chiplets * chunk
    runs: list[list[int]] = [[] for _ in range(chiplets)]
    for j in range(whole // chunk):
        runs[j % chiplets].extend(range(j * chunk, (j + 1) * chunk))
    return [runs[p % chiplets][p // chiplets] for p in range(whole)] + list(range(whole, total))


def grouped_order(m: int, n: int, g: int) -> Order:
    """Groups of g rows, each walked column by column, top to bottom (for chains)."""
    return [row * n + col for row0 in range(0, m, g) for col in range(n) for row in range(row0, min(row0 + g, m))]


def chain(first: Order, then: Order) -> Order:
    """`first` then `then`, as a spec's steps run: the id from the first step is the position of the second."""
    return [then[p] for p in first]


REFERENCES = {
    "morton:2": lambda m, n: morton_order(m, n, 2),
    "morton:4": lambda m, n: morton_order(m, n, 4),
    "morton:16": lambda m, n: morton_order(m, n, 16),
    "serpentine:1": lambda m, n: serpentine_order(m, n, 1),
    "serpentine:2": lambda m, n: serpentine_order(m, n, 2),
    "serpentine:3": lambda m, n: serpentine_order(m, n, 3),
    "serpentine:64": lambda m, n: serpentine_order(m, n, 64),
    "xcd:8:4": lambda m, n: chunked_xcd_order(m * n, 8, 4),
    "xcd:3:5": lambda m, n: chunked_xcd_order(m * n, 3, 5),
    "xcd:2:1": lambda m, n: chunked_xcd_order(m * n, 2, 1),
    "xcd:8:4+grouped:8": lambda m, n: chain(chunked_xcd_order(m * n, 8, 4), grouped_order(m, n, 8)),
    "xcd:8:4+serpentine:3": lambda m, n: chain(chunked_xcd_order(m * n, 8, 4), serpentine_order(m, n, 3)),
}
SPECS = [parse_spec(spec) for spec in REFERENCES]
# (rows, columns): square, ragged against every panel, group and round, one row, one column
SHAPES = [(4, 4), (4, 3), (8, 8), (16, 16), (17, 33), (45, 37), (1, 50), (50, 1), (1, 1), (100, 3), (9, 129), (32, 48)]


def _run_2d(rows: int, cols: int, layers: int = 1) -> dict[str, np.ndarray]:
    maps = dispatch_maps([(spec, "2d") for spec in SPECS], (cols, rows, layers, 0))
    return {spec.name: blocks for spec, blocks in zip(SPECS, maps)}


@pytest.mark.parametrize("rows,cols", SHAPES)
def test_2d_orders_match_their_references(rows, cols):
    """The 2D adapter: dispatch position by * n + bx runs tile (x, y); every z layer the same order."""
    for name, blocks in _run_2d(rows, cols, layers=2).items():
        layers = blocks.reshape(2, rows * cols, 3)
        assert (layers[:, :, 2] == np.arange(2)[:, None]).all(), name
        for layer in layers:
            ids = (layer[:, 1].astype(np.int64) * cols + layer[:, 0]).tolist()
            assert ids == REFERENCES[name](rows, cols), (name, rows, cols)


@pytest.mark.parametrize("rows,cols", SHAPES)
def test_1d_orders_match_their_references(rows, cols):
    """The 1D adapter over a grid the kernel decodes as row = id / cols: the same orders as in 2D."""
    maps = dispatch_maps([(spec, "1d") for spec in SPECS], (rows * cols, 1, 1, cols))
    for spec, blocks in zip(SPECS, maps):
        assert blocks[:, 0].tolist() == REFERENCES[spec.name](rows, cols), (spec.name, rows, cols)


LINEAR = [spec for spec in SPECS if not spec.needs_tiles]


@pytest.mark.parametrize("total", [1, 7, 31, 32, 33, 64, 100, 1000, 1021])
def test_linear_chunked_remap_matches_its_reference(total):
    """xcd:N:C on a 1D grid: totals below one round, exactly whole rounds, and rounds with a remainder."""
    maps = dispatch_maps([(spec, "linear") for spec in LINEAR], (total, 1, 1, 0))
    for spec, blocks in zip(LINEAR, maps):
        assert blocks[:, 0].tolist() == REFERENCES[spec.name](1, total), (spec.name, total)


def test_small_orders_by_hand():
    """The definitions on grids small enough to read, (row, col) in dispatch order."""
    orders = _run_2d(4, 4)
    cells = [(int(y), int(x)) for x, y, _ in orders["morton:2"]]
    assert cells[:8] == [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (0, 3), (1, 2), (1, 3)]
    cells = [(int(y), int(x)) for x, y, _ in orders["morton:4"]]
    assert cells[:8] == [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (0, 3), (1, 2), (1, 3)]
    assert cells[8:12] == [(2, 0), (2, 1), (3, 0), (3, 1)]
    cells = [(int(y), int(x)) for x, y, _ in _run_2d(4, 3)["serpentine:2"]]
    assert cells == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2),  # group 0: columns left to right
                     (2, 2), (3, 2), (2, 1), (3, 1), (2, 0), (3, 0)]  # group 1: right to left
    (chunked,) = dispatch_maps([(parse_spec("xcd:2:2"), "linear")], (10, 1, 1, 0))
    # chiplet 0 runs positions 0, 2, 4, 6: ids 0, 1 then 4, 5; the last two positions are not a whole round
    assert chunked[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7, 8, 9]


def test_references_are_permutations():
    """The references themselves: each a permutation of the tile ids, so a match is a match of orders."""
    for name, reference in REFERENCES.items():
        for rows, cols in SHAPES:
            assert sorted(reference(rows, cols)) == list(range(rows * cols)), (name, rows, cols)
