"""Where swzc writes.  Outputs are checked before any work starts, staged in full, and put in place
together once every one of them is written: a failure leaves all of them as they were.

- An output is never the input (unless it is --in-place) nor another output of the same run, compared
  by resolved path and, where the file exists, by device and inode (a hard link is the same file).
- An output is a regular file or a new path in an existing folder.  Devices, FIFOs, sockets, folders and
  symbolic links to nothing are refused: swzc would otherwise replace /dev/null with a regular file.
- A symbolic link is written through to its target.  A file with several hard links is rewritten in
  place, so every link sees the new text; any other file is replaced by a rename in its own folder.
- A new file gets the mode the umask gives (0666 less the umask); an existing file keeps its mode and,
  where swzc may set it, its owner.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from swzc.core.signals import shielded
from swzc.core.errors import SwzcError
from swzc.core.inputs import kind

STDOUT = "-"


@dataclass(frozen=True)
class Output:
    option: str  # the option that named it, for messages: "-o", "--patch", "--report", "--in-place", …
    path: str  # as the user gave it

    @property
    def replaces_input(self) -> bool:
        return self.option == "--in-place"


@dataclass(frozen=True)
class _Target:
    output: Output
    real: str  # the path that is written: symbolic links resolved
    existing: os.stat_result | None  # the file there now, if any


def _identity(path: str) -> tuple[str, os.stat_result | None]:
    real = os.path.realpath(path)
    try:
        return real, os.stat(real)
    except OSError:
        return real, None


def _same(a: tuple[str, os.stat_result | None], b: tuple[str, os.stat_result | None]) -> bool:
    (path_a, st_a), (path_b, st_b) = a, b
    return path_a == path_b or (st_a is not None and st_b is not None and (st_a.st_dev, st_a.st_ino) == (st_b.st_dev, st_b.st_ino))


def _targets(source: str | None, outputs: Sequence[Output]) -> list[_Target]:
    """Resolve and check every output; the first problem is an input error (exit 2)."""
    source_id = _identity(source) if source else None
    targets: list[_Target] = []
    for out in outputs:
        where = f"{out.option} {out.path}"
        if not out.path:
            raise SwzcError(f"{out.option}: an empty path")
        try:
            link = stat.S_ISLNK(os.lstat(out.path).st_mode)
        except FileNotFoundError:
            link = False
        except OSError as exc:
            raise SwzcError(f"{where}: cannot write: {exc.strerror or exc}") from None
        real, existing = _identity(out.path)
        if existing is None:
            if link:
                raise SwzcError(f"{where}: is a symbolic link to a file that does not exist; swzc does not create it")
            folder = os.path.dirname(real) or "."
            if not os.path.isdir(folder):
                raise SwzcError(f"{where}: cannot write: no folder {folder}")
        elif not stat.S_ISREG(existing.st_mode):
            raise SwzcError(f"{where}: is {kind(existing.st_mode)}; swzc writes only regular files ('-' is stdout)")
        if source_id is not None and not out.replaces_input and _same((real, existing), source_id):
            raise SwzcError(f"{where} is the input file; swzc overwrites its input only with `swzc rewrite --in-place`")
        for other in targets:
            if _same((real, existing), (other.real, other.existing)):
                raise SwzcError(f"{where} is also the file of {other.output.option} {other.output.path}; "
                                "each output needs its own file")
        targets.append(_Target(out, real, existing))
    return targets


def check(source: str | None, outputs: Sequence[Output]) -> None:
    """Refuse outputs swzc must not write (see the module's docstring), before any work is done."""
    _targets(source, outputs)


@dataclass
class _Staged:
    target: _Target
    data: bytes
    temp: str | None = None  # replaced by rename: the staged file, in the target's folder
    fd: int | None = None  # rewritten in place (several hard links): the target, open for writing
    old: bytes | None = None  # rewritten in place: what it held, to put back if a later step fails


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _stage(staged: _Staged) -> None:
    """Write the new text where it can be put in place at once; `staged` records what to undo at each step."""
    existing = staged.target.existing
    if existing is not None and existing.st_nlink > 1:
        staged.fd = os.open(staged.target.real, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        now = os.fstat(staged.fd)
        if (now.st_dev, now.st_ino) != (existing.st_dev, existing.st_ino) or not stat.S_ISREG(now.st_mode):
            raise OSError(0, "the file was replaced while swzc ran")
        with open(os.dup(staged.fd), "rb") as handle:
            staged.old = handle.read()
        return
    folder, name = os.path.split(staged.target.real)
    fd = None
    while fd is None:
        temp = os.path.join(folder, f".{name}.swzc-{secrets.token_hex(4)}")
        try:
            # 0666 less the umask, as for any new file (mkstemp would make it 0600)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue
        staged.temp = temp
    try:
        if existing is not None:
            if (existing.st_uid, existing.st_gid) != (os.geteuid(), os.getegid()):
                try:
                    os.fchown(fd, existing.st_uid, existing.st_gid)
                except OSError:
                    pass  # only root may give a file away; the file is then the writer's
            os.fchmod(fd, stat.S_IMODE(existing.st_mode) & 0o777)
        _write_all(fd, staged.data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _rewrite_in_place(fd: int, data: bytes) -> None:
    os.lseek(fd, 0, os.SEEK_SET)
    _write_all(fd, data)
    os.ftruncate(fd, len(data))
    os.fsync(fd)


def _discard(staged: list[_Staged]) -> None:
    for s in staged:
        if s.temp is not None:
            try:
                os.unlink(s.temp)
            except OSError:
                pass
        if s.fd is not None:
            os.close(s.fd)


def write_together(source: str | None, writes: Sequence[tuple[Output, bytes]]) -> None:
    """Write every (output, data), or none of them: stage them all, then put them in place at once."""
    targets = _targets(source, [out for out, _ in writes])
    staged: list[_Staged] = []
    try:
        for target, (_, data) in zip(targets, writes):
            staged.append(_Staged(target, data))
            try:
                _stage(staged[-1])
            except OSError as exc:
                raise SwzcError(f"{target.output.path}: cannot write: {exc.strerror or exc}; nothing written") from None
        with shielded(deliver=False):  # an interrupt now would leave some outputs new and some old: too late
            _commit(staged)
    finally:
        _discard(staged)


def _commit(staged: list[_Staged]) -> None:
    rewritten: list[_Staged] = []
    current = None
    try:
        for s in staged:  # in place first: these can still be put back
            if s.fd is not None:
                current = s
                rewritten.append(s)
                _rewrite_in_place(s.fd, s.data)
        for s in staged:
            if s.temp is not None:
                current = s
                os.replace(s.temp, s.target.real)
                s.temp = None
    except OSError as exc:
        for s in rewritten:
            try:
                _rewrite_in_place(s.fd, s.old or b"")  # type: ignore[arg-type]
            except OSError:
                pass
        path = current.target.output.path if current is not None else "?"
        raise SwzcError(f"{path}: cannot put in place: {exc.strerror or exc}") from None
