"""Reading the files swzc is given: regular files only, never blocking, never more than a limit."""

from __future__ import annotations

import os
import stat

from swzc.core.errors import SwzcError

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def kind(mode: int) -> str:
    """What a file of this st_mode is, in words ("a FIFO", "a character device", …)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


TOOL_OUTPUT_BYTES = 64 << 20  # the most swzc reads of a file a program or profiler it ran wrote


def read_regular(path: str, limit: int, hint: str = "") -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them; anything else is an input error.

    The file is opened without blocking (a FIFO would otherwise wait for a writer) and checked with fstat
    before a byte is read, so a device such as /dev/zero is refused instead of read without end."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise SwzcError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise SwzcError(f"{path}: is a directory, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise SwzcError(f"{path}: is {kind(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise SwzcError(f"{path}: {info.st_size:,} bytes, more than the limit of {limit:,}{hint}")
        chunks, size = [], 0
        while size <= limit:  # the file may grow while it is read
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise SwzcError(f"{path}: more than the limit of {limit:,} bytes{hint}")
        return b"".join(chunks)
    except OSError as exc:
        raise SwzcError(f"{path}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
