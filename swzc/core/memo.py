"""Figures an earlier run computed, found again by the digest of everything they depend on: swzc's results
cache, as ruff keeps one, so that a hook run on files that did not change does not compute their L2 model
figures again.

An entry is one value (JSON) under the SHA-256 of its key, kept in swzc's private cache folder through
swzc.core.cache (this user's own folder, 0700; never the repository's, which a stranger's code could fill):
`memo-<digest>`, and its stamp.  The key is what the caller says the value depends on, together with swzc's own
code (every file of the installed package), the Python and the numpy that computed it: a new swzc, or a
change to any of its files, finds nothing of the old.  A caller asks only for values that are a function of
their key (the L2 model's figures for one footprint shape, GPU and list of orders: swzc.model.rank), stores
plain data (never pickles) and checks what it reads back; an entry that fails the check counts as absent.

Off with `--no-cache` or SWZC_NO_CACHE=1 (set to anything but "" or "0"); the folder may be deleted at any time.
A Memo pickles as a closed one of the same setting: a worker process (suggest -j) opens its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any

from swzc.core import cache

PREFIX = "memo-"
MAX_VALUE_BYTES = 1 << 20


def disabled_by_environment() -> bool:
    """SWZC_NO_CACHE set to anything but "" or "0"."""
    return os.environ.get("SWZC_NO_CACHE", "") not in ("", "0")


class Memo:
    """Values by key across runs; `enabled=False`: remembers nothing (every lookup misses, nothing is stored)."""

    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled
        self._code: str | None = None
        self.hits = self.misses = 0

    def __reduce__(self) -> tuple:
        return (Memo, (self.enabled,))

    def get(self, key: str) -> Any:
        """The value stored under `key` (JSON's types: the caller checks it), or None."""
        if not self.enabled:
            return None
        with cache.folder() as found:
            entry = cache.lookup(found[0], self._name(key)) if found is not None else None
        if entry is None:
            self.misses += 1
            return None
        os.close(entry[0])
        try:
            value = json.loads(entry[1].decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            self.misses += 1
            return None
        self.hits += 1
        return value

    def put(self, key: str, value: Any) -> None:
        """Store `value` (JSON's types) under `key`, best effort (a full disk, or no safe folder, only means no
        entry)."""
        if not self.enabled:
            return
        try:
            data = json.dumps(value, allow_nan=False).encode("utf-8")
        except (TypeError, ValueError):  # not plain data, or a NaN: not kept
            return
        if len(data) > MAX_VALUE_BYTES:
            return
        with cache.folder() as found:
            if found is not None:
                cache.store(found[0], self._name(key), data, mode=0o600)

    def _name(self, key: str) -> str:
        return PREFIX + hashlib.sha256(f"{self._code_digest()}\0{key}".encode("utf-8", "surrogatepass")).hexdigest()

    def _code_digest(self) -> str:
        """swzc's installed files (names and bytes), the Python and the numpy: what computes the values."""
        if self._code is None:
            import numpy  # the model's arithmetic

            root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the swzc package
            digest = hashlib.sha256(f"{sys.version}\0{numpy.__version__}\0".encode())
            for folder, folders, files in os.walk(root):
                folders[:] = sorted(f for f in folders if f != "__pycache__")
                for name in sorted(files):
                    if name.endswith((".pyc", ".pyo")):
                        continue
                    path = os.path.join(folder, name)
                    try:
                        with open(path, "rb") as f:
                            data = f.read()
                    except OSError:
                        data = b"\0unreadable"
                    digest.update(f"{os.path.relpath(path, root)}\0{len(data)}\0".encode("utf-8", "surrogateescape") + data)
            self._code = digest.hexdigest()
        return self._code
