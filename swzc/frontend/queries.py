"""The tree-sitter queries under grammars/, compiled once, run per dialect."""

from __future__ import annotations

import functools
from importlib import resources

from tree_sitter import Node, Query, QueryCursor

from swzc.frontend.source import CUDA

# A HIP file may use the CUDA spellings too; a CUDA file uses only its own.
DIALECT_FOLDERS = {"cuda": ("cuda",), "hip": ("cuda", "hip")}


@functools.cache
def _query(folder: str, name: str) -> Query | None:
    path = resources.files("swzc.grammars").joinpath(folder, f"{name}.scm")
    if not path.is_file():
        return None
    return Query(CUDA, path.read_text(encoding="utf-8"))


def matches(dialect: str, name: str, node: Node) -> list[dict[str, list[Node]]]:
    """Every match of query `name` under `node`, over the dialect's query folders."""
    found: list[dict[str, list[Node]]] = []
    for folder in DIALECT_FOLDERS[dialect]:
        query = _query(folder, name)
        if query is not None:
            found += [captures for _, captures in QueryCursor(query).matches(node)]
    return found
