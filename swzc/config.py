"""`[tool.swzc]` in pyproject.toml: a project's defaults for swzc's options; the command line overrides them.

The file is the first pyproject.toml with a `[tool.swzc]` table in the working directory or a folder
above it, up to the root of the git work tree.  Keys are the long option names (`hw`, `proposer`,
`model`, `base-url`, `max-iterations`, `include-dir`, …; `-` or `_`), and apply to every command that has
that option.  A project's file comes with its code, from whoever wrote it, so it cannot ask for what
only the user may: running the code (`bench`, `bench-cmd`, `build-cmd`), where output goes, or an LLM
server that gets the user's API key (a `base-url` from the file is asked without it; give `--base-url`
or `OPENAI_BASE_URL` to send it).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import click

from swzc.errors import SwzcError
from swzc.inputs import read_regular

MAX_BYTES = 1 << 20
# what a project's file may set: analysis inputs, the hardware, the proposers, the loop's settings
ALLOWED = frozenset({
    "hw", "set", "include-dir", "define", "build-path", "grid", "block", "compile-flag", "no-compile", "max-bytes",
    "proposer", "model", "base-url", "llm-timeout", "llm-retries", "max-iterations", "launch-spec", "bench-runs",
    "time-regex", "check-regex",
})
PATH_KEYS = frozenset({"include-dir", "build-path", "launch-spec"})  # relative to the file's folder


def find(start: Path | None = None) -> Path | None:
    """The pyproject.toml that configures swzc here, if any."""
    folder = (start or Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        if path.is_file() and b"[tool.swzc]" in _bytes(path):
            return path
        if (candidate / ".git").exists():
            return None
    return None


def _bytes(path: Path) -> bytes:
    try:
        return read_regular(str(path), MAX_BYTES)
    except SwzcError:
        return b""


def load(path: Path) -> dict[str, Any]:
    """The [tool.swzc] table, keys spelled with '-', paths made absolute; a bad file is exit 2."""
    try:
        table = tomllib.loads(_bytes(path).decode("utf-8")).get("tool", {}).get("swzc", {})
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SwzcError(f"{path}: [tool.swzc]: {exc}") from None
    if not isinstance(table, dict):
        raise SwzcError(f"{path}: [tool.swzc] must be a table")
    settings: dict[str, Any] = {}
    for key, value in table.items():
        name = key.replace("_", "-")
        if name not in ALLOWED:
            why = "only the command line may ask for it" if name in ("bench", "bench-cmd", "build-cmd", "in-place", "output",
                                                                     "patch", "report", "llm-replay", "llm-transcript") else "unknown"
            raise SwzcError(f"{path}: [tool.swzc] {key}: {why} (keys: {', '.join(sorted(ALLOWED))})")
        if name in PATH_KEYS:
            value = [str(path.parent / v) for v in value] if isinstance(value, list) else str(path.parent / str(value))
        settings[name] = value
    return settings


def default_map(commands: list[click.Command], settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """click's default_map: for each command, the settings that name one of its options."""
    out: dict[str, dict[str, Any]] = {}
    for command in commands:
        name = command.name or ""
        mine: dict[str, Any] = {}
        for param in command.params:
            for opt in getattr(param, "opts", ()):
                if opt.startswith("--") and opt[2:] in settings and param.name is not None:
                    value = settings[opt[2:]]
                    mine[param.name] = list(value) if isinstance(value, list) else ([value] if getattr(param, "multiple", False) else value)
        if mine:
            out[name] = mine
    return out
