"""Outcomes at the boundary: the exit codes the CLI documents, and the one exception that carries them."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # rewritten, or nothing to do
    DECLINED = 1  # every kernel that uses the block index was refused or declined
    BAD_INPUT = 2  # unreadable file, syntax error, unknown --hw, bad --swizzle / --set
    CHECK_FAILED = 3  # the rewrite failed one of its own checks (re-parse, proof, compile); nothing written
    INTERRUPTED = 130  # SIGINT or SIGTERM (128 + SIGINT, as shells report an interrupted command)


class SwzcError(Exception):
    """An error that reaches the user as a message and an exit code, never as a traceback."""

    def __init__(self, message: str, code: ExitCode = ExitCode.BAD_INPUT, details: dict | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.details = details or {}  # more for --json: e.g. every syntax error of a file that could not be read
