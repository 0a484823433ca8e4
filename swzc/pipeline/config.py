"""Defaults for swzc's options from two files: the user's own, and the project's `[tool.swzc]`.

- The user's file, `$XDG_CONFIG_HOME/swzc/config.toml` (else `~/.config/swzc/config.toml`), holds the
  user's choices: what swzc asks and runs (the proposer, the LLM server and model, compile flags, limits).
  Its keys are the long option names at the top level.  It is read only when it is a regular file of the
  user's own that no one else may write to.
- The project's file is the first pyproject.toml with a `[tool.swzc]` table in a named file's folder (the working
  directory where none is named) or a folder above it, up to the root of the git work tree.  A command over many
  files (suggest, review) reads each file with its own project's; the others refuse files whose projects are
  configured apart.  Outside any work tree it must be the user's own file.  It comes
  with the code, from whoever wrote it, so it may set only facts about that code (PROJECT_KEYS: the hardware
  model, sizes, grids, include folders, defines, the compilation database, the benchmark's launch) and compile
  flags of a few harmless forms (PROJECT_COMPILE_FLAGS).  What is asked or run, and where output goes, is the user's alone.

The command line overrides both; the project's facts override the user's defaults.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from swzc.core.errors import SwzcError
from swzc.core.inputs import read_regular
from swzc.target import hw as hwmodels

MAX_BYTES = 1 << 20

# What a project's file may set: facts about its code.
PROJECT_KEYS = frozenset({"hw", "set", "include-dir", "define", "build-path", "grid", "block", "launch-spec", "compile-flag"})
# What the user's own file may set besides: what swzc asks and runs, and its limits.
USER_KEYS = PROJECT_KEYS | frozenset({
    "no-compile", "max-bytes", "proposer", "model", "base-url", "llm-timeout", "llm-retries", "max-iterations",
    "bench-runs", "time-regex", "check-regex", "jobs",
})
# Per run, on the command line only: running the code, outputs, recorded LLM exchanges.
COMMAND_LINE_ONLY = frozenset({"bench", "bench-cmd", "bench-sizes", "build-cmd", "in-place", "output", "patch", "report",
                               "llm-replay", "llm-transcript"})
PATH_KEYS = frozenset({"include-dir", "build-path", "launch-spec"})  # relative to the file's folder

# Compile flags a project may ask for: each changes how the code is compiled, none which program runs or
# what it reads besides the code (no -ccbin, -Xcompiler, plugins, response or options files, -include).
PROJECT_COMPILE_FLAGS = tuple(re.compile(p) for p in (
    r"-I[^-\s][^\s]*",
    r"-D[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+\-*/()]*)?",
    r"-U[A-Za-z_][A-Za-z0-9_]*",
    r"--?std=(c|gnu)\+\+[0-9a-z]{2}",
    r"-O[0-3]",
    r"-lineinfo",
    r"-w",
    r"--?use_fast_math",
    r"--expt-relaxed-constexpr",
    r"--?(expt-)?extended-lambda",
    r"(-rdc|--relocatable-device-code)=(true|false)",
    r"(-arch|--gpu-architecture)=(sm|compute)_[0-9]{2,3}[a-z]?",
    r"-gencode=arch=compute_[0-9]{2,3}[a-z]?,code=(sm|compute)_[0-9]{2,3}[a-z]?",
    r"--offload-arch=gfx[0-9a-f]{3,4}",
    r"-Wno-[a-z0-9-]+",
))


def user_file() -> Path | None:
    """Where the user's own configuration is, if anywhere."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(base):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".config")
    return Path(base) / "swzc" / "config.toml"


def find_for(paths: Sequence[str]) -> Path | None:
    """The project's file for the files and folders named: each one's (`find`, from its folder), which must be the
    same file for them all; the working directory's where none is named.  Files of projects configured apart
    are refused (exit 2): one run takes one set of facts."""
    folders: dict[str, None] = {}
    for name in paths:
        if name and name != "-":
            path = os.path.abspath(name)
            folders[path if os.path.isdir(path) else os.path.dirname(path)] = None
    seen: dict[Path, Path | None] = {}
    found = {folder: find(Path(folder), seen) for folder in folders or [os.getcwd()]}
    files = sorted({str(f) for f in found.values() if f is not None})
    if len(set(found.values())) > 1:
        alone = [folder for folder, f in found.items() if f is None]
        raise SwzcError(f"the files named are configured apart ({', '.join(files)}"
                        + (f"; none for {alone[0]}" if alone else "") + "): run swzc once for each project's files")
    return next(iter(found.values()))


def find_each(files: Sequence[str]) -> dict[str, Path | None]:
    """Each file's project file (`find`, from its folder): a command over many files reads each as its own
    project says."""
    seen: dict[Path, Path | None] = {}
    return {name: find(Path(os.path.dirname(os.path.abspath(name))), seen) for name in files}


def find(start: Path | None = None, seen: dict[Path, Path | None] | None = None) -> Path | None:
    """The pyproject.toml that configures swzc here, if any: one with a [tool.swzc] table, however spelled, in
    `start` (the working directory) or a folder above it, up to the root of the git work tree that holds it.
    Outside any work tree it must be the user's own and writable by no one else: a shared folder's file (/tmp)
    is anyone's.  `seen`: folders looked at before in this run, with what each one gave."""
    seen = {} if seen is None else seen
    folder = Path(os.path.realpath(start or os.getcwd()))
    walked = []
    result: Path | None = None
    for candidate in (folder, *folder.parents):
        if candidate in seen:
            result = seen[candidate]
            break
        walked.append(candidate)
        path = candidate / "pyproject.toml"
        if os.path.isfile(path) and b"swzc" in _bytes(path):
            tool = _document(path).get("tool")
            if isinstance(tool, dict) and "swzc" in tool:
                result = path if _in_work_tree(candidate) else _private(path)
                break
        if os.path.exists(candidate / ".git"):
            break
    for candidate in walked:
        seen[candidate] = result
    return result


def _in_work_tree(folder: Path) -> bool:
    """Whether a git work tree of the user's own holds `folder`: a `.git` that someone else made in a shared
    folder does not make one."""
    for f in (folder, *folder.parents):
        try:
            info = os.lstat(f / ".git")
        except OSError:
            continue
        return info.st_uid in (os.geteuid(), 0) and (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode))
    return False


def _private(path: Path) -> Path:
    """A project file found outside any git work tree, if it is the user's own regular file (not a link) and
    writable by no one else."""
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SwzcError(f"{path}: a project file outside any git work tree must be the user's own and writable by no one "
                        f"else (chmod go-w {path}, or move it into the project's work tree)")
    return path


def _bytes(path: Path) -> bytes:
    try:
        return read_regular(str(path), MAX_BYTES)
    except SwzcError:
        return b""


def _document(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(_bytes(path).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SwzcError(f"{path}: {exc}") from None
    except RecursionError:
        raise SwzcError(f"{path}: nested too deeply to read") from None


def _value(where: str, key: str, value: Any) -> Any:
    """A setting's value as an option takes it: a string, a number or a flag, or a list of strings and numbers."""
    scalar = (str, int, float, bool)
    if isinstance(value, scalar) or (isinstance(value, list) and all(isinstance(v, scalar) and not isinstance(v, bool) for v in value)):
        return value
    raise SwzcError(f"{where}{key}: expected a string, a number, true/false or a list of strings, not {type(value).__name__}")


def load(path: Path) -> dict[str, Any]:
    """The project's [tool.swzc] table, keys spelled with '-', paths made absolute; a bad file or a key a
    project may not set is exit 2."""
    tool = _document(path).get("tool", {})
    table = tool.get("swzc", {}) if isinstance(tool, dict) else None
    if not isinstance(table, dict):
        raise SwzcError(f"{path}: [tool.swzc] must be a table")
    return _settings(path, "[tool.swzc]", table, PROJECT_KEYS)


def load_user() -> dict[str, Any]:
    """The user's own settings ({} without the file); a file that others may write to is refused."""
    path = user_file()
    if path is None:
        return {}
    try:
        info = os.stat(path)
    except OSError:
        return {}
    if not stat.S_ISREG(info.st_mode):
        raise SwzcError(f"{path}: the user's configuration must be a regular file")
    if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SwzcError(f"{path}: the user's configuration must be the user's own and writable by no one else "
                        f"(chmod go-w {path})")
    return _settings(path, "", _document(path), USER_KEYS)


def _settings(path: Path, table: str, values: dict[str, Any], allowed: frozenset[str]) -> dict[str, Any]:
    where = f"{path}: {table + ' ' if table else ''}"
    settings: dict[str, Any] = {}
    for key, value in values.items():
        name = key.replace("_", "-")
        if name not in allowed:
            if name in COMMAND_LINE_ONLY:
                why = "only the command line may ask for it"
            elif name in USER_KEYS:
                why = ("a project may set only facts about its code; the proposer, the LLM server and model, limits "
                       "and what runs are the user's: give it on the command line or in " + str(user_file() or "~/.config/swzc/config.toml"))
            else:
                why = "unknown"
            raise SwzcError(f"{where}{key}: {why} (keys: {', '.join(sorted(allowed))})")
        value = _value(where, key, value)
        if name == "hw" and isinstance(value, str) and "/" not in value and not value.endswith(".toml") \
                and value not in hwmodels.available():  # said here, with the file that set it
            raise SwzcError(f"{where}hw: unknown hardware model {value!r} (models: {', '.join(hwmodels.available())}, "
                            "or a model file's path)")
        if name == "compile-flag" and allowed is PROJECT_KEYS:
            for flag in value if isinstance(value, list) else [value]:
                if not isinstance(flag, str) or not any(p.fullmatch(flag) for p in PROJECT_COMPILE_FLAGS):
                    raise SwzcError(f"{where}compile-flag {flag!r}: a project may give only flags that change how its code "
                                    "compiles (-I, -D, -U, -std, -O, -arch, -gencode, …), none that choose a program or "
                                    "read another file; give it on the command line or in the user's configuration")
        if name in PATH_KEYS:
            value = [str(path.parent / str(v)) for v in value] if isinstance(value, list) else str(path.parent / str(value))
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
