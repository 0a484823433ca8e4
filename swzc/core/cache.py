"""swzc's private cache of binaries it builds itself (provers, the launch observer): nothing on disk that
swzc did not make is ever run.

The folder is `$XDG_CACHE_HOME/swzc`, else `~/.cache/swzc`.  It is created 0700; an existing one must be a
folder (not a link) owned by this user, and is made 0700 if it is not.  A missing home folder is never
created, and there is no fallback to a shared folder such as /tmp: without a safe folder nothing is cached.
An entry is the file and a stamp with its SHA-256; it is used only when both are this user's own regular
files with one link each and the bytes read match the stamp.  A damaged, partial or foreign entry is
treated as absent (and replaced by the next store).  Reads and checks go through one open descriptor, so
the bytes checked are the bytes the caller then uses.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from contextlib import contextmanager
from collections.abc import Iterator

MAX_ENTRY_BYTES = 64 << 20


@contextmanager
def folder() -> Iterator[tuple[int, str] | None]:
    """An open descriptor and the path of the cache folder, or None when there is no safe one."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # unset or relative: the XDG spec says to ignore it
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            yield None
            return
        base = os.path.join(home, ".cache")
    path = os.path.join(base, "swzc")
    try:
        for made in (base, path):
            try:
                os.mkdir(made, 0o700)
            except FileExistsError:
                pass
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        yield None
        return
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid():
            raise PermissionError(f"{path} belongs to another user")
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
    except OSError:
        os.close(fd)
        yield None
        return
    try:
        yield fd, path
    finally:
        os.close(fd)


def _read_own(folder_fd: int, name: str) -> tuple[int, bytes] | None:
    """Open `name` in the folder and read it whole, if it is this user's own single-linked regular file."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder_fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if (stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and info.st_nlink == 1
                and info.st_size <= MAX_ENTRY_BYTES):
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return fd, b"".join(chunks)
    except OSError:
        pass
    os.close(fd)
    return None


def _stamp(name: str, data: bytes) -> bytes:
    return f"{name} sha256 {hashlib.sha256(data).hexdigest()}\n".encode()


def lookup(folder_fd: int, name: str) -> tuple[int, bytes] | None:
    """(an open descriptor, the bytes) of entry `name` when its bytes hash to its stamp, else None."""
    stamp = _read_own(folder_fd, f"{name}.sha256")
    if stamp is None:
        return None
    os.close(stamp[0])
    entry = _read_own(folder_fd, name)
    if entry is None:
        return None
    if _stamp(name, entry[1]) != stamp[1]:
        os.close(entry[0])
        return None
    return entry


def store(folder_fd: int, name: str, data: bytes, mode: int = 0o700) -> None:
    """Put an entry in the cache, best effort: a failure (a full disk, a read-only folder) leaves no
    partial file behind and only means the next run builds it again."""
    for file, content, file_mode in ((name, data, mode), (f"{name}.sha256", _stamp(name, data), 0o600)):
        temp = f".{file}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, file_mode, dir_fd=folder_fd)
        except OSError:
            return
        try:
            try:
                os.fchmod(fd, file_mode)
                view = memoryview(content)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            os.replace(temp, file, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
        except BaseException as exc:
            try:
                os.unlink(temp, dir_fd=folder_fd)
            except OSError:
                pass
            if isinstance(exc, OSError):
                return
            raise
