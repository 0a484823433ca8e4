"""Signals: SIGINT and SIGTERM unwind a run as KeyboardInterrupt, and a step that must not be cut short holds
them back.

Every `with` block and `finally` clause on the way out runs, so temporary folders are removed and compiler
processes killed; the console script (swzc.commands.main) then prints one line, `swzc: interrupted`, and exits 130.
This module imports only the standard library: the console script installs its handlers before anything
slow is imported.  Its state is the process's own, as signal handlers are.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

INTERRUPTED = 130  # ExitCode.INTERRUPTED, without importing it before the handlers are in place
MESSAGE = "swzc: interrupted"

_received: int | None = None  # the first SIGINT/SIGTERM of this run
_shield = 0  # > 0 while a step runs that must not be cut short
_deferred = False  # a signal arrived while shielded: raise it when the shield ends


def _on_signal(signum: int, frame: object) -> None:
    global _received, _deferred
    if _received is None:
        _received = signum
    if _shield:
        _deferred = True
        return
    raise KeyboardInterrupt


def install() -> None:
    """SIGINT and SIGTERM unwind the run as KeyboardInterrupt."""
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)


def interrupt_received() -> bool:
    """True once SIGINT or SIGTERM has reached this process (through the handlers `install` sets).

    An exception raised while an interrupt is pending is the interrupt's doing: C extensions that see the
    KeyboardInterrupt in their own calls (tree-sitter compiling a query, numpy importing) report it as an
    error of their own."""
    return _received is not None


@contextmanager
def shielded(deliver: bool = True) -> Iterator[None]:
    """Hold SIGINT/SIGTERM back while the block runs.  With `deliver`, one that arrived meanwhile is raised
    when the block ends (the set-up: the run then stops); without, it came too late and is dropped (outputs
    being put in place, the final clean-up: the run completes)."""
    global _shield, _deferred, _received
    _shield += 1
    try:
        yield
    finally:
        _shield -= 1
    if not _shield and _deferred:
        _deferred = False
        if deliver:
            raise KeyboardInterrupt
        _received = None


def report_interrupt() -> int:
    print(MESSAGE, file=sys.stderr, flush=True)
    return INTERRUPTED
