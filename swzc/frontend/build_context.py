"""What the build adds to a file: its include folders and -D/-U defines, given as compiler flags or read from
a `compile_commands.json` (read, never run), and the one bounded read of a file that the preprocessor and the
toolchain share.  A run's files also share, through their context, the headers parsed for them and the results
cache (swzc.core.memo)."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from swzc.core.errors import SwzcError
from swzc.core.inputs import read_regular
from swzc.core.memo import Memo

if TYPE_CHECKING:
    from swzc.frontend.source import SourceFile

MAX_COMPILE_COMMANDS_BYTES = 64 << 20
MAX_PARSED_BYTES = 16 << 20  # header text a run keeps parsed (a parsed tree takes some 30 times its text)


class HeaderParses:
    """Headers parsed for the files of one run, by path and content: a header that several files include is read
    again for each (its bytes decide what it is) and, from the second file that includes it on, parsed once.  Only
    headers seen twice are kept (one a single file includes is not), of at most MAX_PARSED_BYTES of text in all.
    A worker process (suggest -j) gets a copy with none: what it parses for one file is not kept for its next."""

    def __init__(self) -> None:
        self._parsed: dict[tuple[str, bytes], SourceFile] = {}
        self._seen: set[tuple[str, bytes]] = set()  # (path, SHA-256 of the bytes) of the headers read once
        self._bytes = 0

    def get(self, path: str, data: bytes) -> SourceFile | None:
        return self._parsed.get((path, data))

    def keep(self, path: str, data: bytes, parsed: SourceFile) -> None:
        """Keep `parsed` if this header was read before with these bytes and the budget allows."""
        digest = (path, hashlib.sha256(data).digest())
        if digest not in self._seen:
            self._seen.add(digest)
        elif self._bytes + len(data) <= MAX_PARSED_BYTES:
            self._parsed[path, data] = parsed
            self._bytes += len(data)

    def __reduce__(self) -> tuple:
        return (HeaderParses, ())


@dataclass(frozen=True)
class CompileContext:
    """What the build adds to a file: include folders and -D/-U flags, and where they came from."""

    include_dirs: tuple[str, ...] = ()
    defines: tuple[tuple[str, str | None], ...] = ()  # (NAME, value text); value None: -U NAME
    origin: str = ""  # e.g. "compile_commands.json in build/", for the summary
    parses: HeaderParses = field(default_factory=HeaderParses, compare=False, hash=False, repr=False)  # shared by a run's files
    memo: Memo = field(default_factory=Memo, compare=False, hash=False, repr=False)  # the results cache: off unless a command turns it on

    def compile_flags(self) -> tuple[str, ...]:
        """The same folders and defines as flags for the compile check."""
        flags = [f"-I{d}" for d in self.include_dirs]
        flags += [f"-D{name}" if value == "1" else f"-D{name}={value}" for name, value in self.defines if value is not None]
        flags += [f"-U{name}" for name, value in self.defines if value is None]
        return tuple(flags)

    def merged(self, other: CompileContext) -> CompileContext:
        """This context with `other`'s folders and defines after it (the command line after the database)."""
        return CompileContext(tuple(dict.fromkeys((*self.include_dirs, *other.include_dirs))), (*self.defines, *other.defines),
                              ", ".join(o for o in (self.origin, other.origin) if o), self.parses, self.memo)


def read_regular_file(path: str, limit: int) -> bytes | str:
    """The bytes of a regular file of at most `limit` bytes, or why not (a FIFO or device never blocks): swzc's
    one bounded read (swzc.core.inputs), its refusal said without the path."""
    try:
        return read_regular(path, limit)
    except SwzcError as exc:
        return exc.message.removeprefix(f"{path}: ")


# ---- compile_commands.json ------------------------------------------------------------------------------


def find_compile_commands(path: str, where: str | None = None) -> Path | None:
    """`where`/compile_commands.json when given (a folder, as clang-tidy's -p), else the first one found in
    the file's folder or a folder above it."""
    if where is not None:
        candidate = Path(where)
        return candidate if candidate.is_file() else candidate / "compile_commands.json"
    folder = Path(path).resolve().parent
    for candidate in (folder, *folder.parents):
        if (candidate / "compile_commands.json").is_file():
            return candidate / "compile_commands.json"
    return None


def _entries(database: Path) -> tuple[list[dict], str]:
    """The database's entries that name a file, or why it is not read."""
    data = read_regular_file(str(database), MAX_COMPILE_COMMANDS_BYTES)
    if isinstance(data, str):
        return [], f"{database}: not read: {data}"
    try:
        entries = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError) as exc:
        return [], f"{database}: not valid JSON ({exc}); ignored"
    if not isinstance(entries, list):
        return [], f"{database}: not a list of entries; ignored"
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("file"), str)], ""


def _entry_path(database: Path, entry: dict) -> str:
    directory = entry.get("directory") if isinstance(entry.get("directory"), str) else str(database.parent)
    return os.path.join(directory, entry["file"])


def database_files(database: str) -> tuple[list[str], list[str]]:
    """The files a compilation database compiles, in its order (each once), and notes."""
    entries, note = _entries(Path(database))
    return list(dict.fromkeys(_entry_path(Path(database), e) for e in entries)), [note] if note else []


def context_from_database(database: Path, path: str) -> tuple[CompileContext, list[str]]:
    """The include folders and defines the database gives for `path` (never run), and notes."""
    entries, note = _entries(database)
    if note:
        return CompileContext(), [note]
    target = os.path.realpath(path)
    for entry in entries:
        if os.path.realpath(_entry_path(database, entry)) != target:
            continue
        directory = entry.get("directory") if isinstance(entry.get("directory"), str) else str(database.parent)
        args = entry.get("arguments")
        if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
            try:
                args = shlex.split(entry.get("command", "")) if isinstance(entry.get("command"), str) else []
            except ValueError:
                return CompileContext(), [f"{database}: the command for {entry['file']} cannot be split; ignored"]
        context = context_from_flags(args, directory)
        return CompileContext(context.include_dirs, context.defines, f"{database}"), []
    return CompileContext(), [f"{database}: no entry for {path}"]


_FLAGS = {"-I": "include", "-isystem": "include", "-iquote": "include", "-idirafter": "include", "--include-path": "include",
          "-D": "define", "--define-macro": "define", "-U": "undefine", "--undefine-macro": "undefine"}


def absolute_flag(flag: str, directory: str) -> str:
    """A compile flag's folder (`-Iinclude`, `-isystem…`, `--include-path=…`, joined to it) made absolute from
    `directory`: the compiles run in another folder (the file's own, a worker's)."""
    for prefix in ("--include-path=", "-isystem", "-iquote", "-idirafter", "-I"):
        if flag.startswith(prefix) and len(flag) > len(prefix) and not os.path.isabs(flag[len(prefix):]):
            return prefix + os.path.normpath(os.path.join(directory, flag[len(prefix):]))
    return flag


def context_from_flags(args: list[str], directory: str = ".") -> CompileContext:
    """-I/-isystem/--include-path folders and -D/-U defines of a compiler command line (`-Ifoo`, `-I foo`,
    `--include-path=foo` alike); every other argument is passed over."""
    includes: list[str] = []
    defines: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg in _FLAGS and i < len(args):
            kind, value = _FLAGS[arg], args[i]
            i += 1
        elif arg.startswith("--") and arg.partition("=")[0] in _FLAGS:
            kind, value = _FLAGS[arg.partition("=")[0]], arg.partition("=")[2]
        elif arg[:2] in ("-I", "-D", "-U") and len(arg) > 2:
            kind, value = _FLAGS[arg[:2]], arg[2:]
        elif arg.startswith(("-isystem", "-iquote", "-idirafter")):
            kind, value = "include", arg[len(next(f for f in ("-isystem", "-iquote", "-idirafter") if arg.startswith(f))):]
        else:
            continue
        if kind == "include":
            includes.append(os.path.normpath(os.path.join(directory, value)))
        elif kind == "define":
            name, sep, text = value.partition("=")
            defines.append((name, text if sep else "1"))
        else:
            defines.append((value, None))
    return CompileContext(tuple(dict.fromkeys(includes)), tuple(defines))
