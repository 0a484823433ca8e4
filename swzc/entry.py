"""The console script: signal handlers first, then the command line.

SIGINT and SIGTERM both unwind as KeyboardInterrupt, so every `with` block and `finally` clause on the
way out runs: temporary folders are removed and compiler processes killed.  swzc then prints one line,
`swzc: interrupted`, and exits 130.  Each run keeps its temporary files in one private folder that is
removed when the run ends, however it ends, so a clean-up cut short by a second signal leaves nothing
behind either.

This module imports only the standard library before the handlers are installed, so that an interrupt
during the (slow) imports of the command line is reported like any other.
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


def _run(argv: list[str]) -> int | str | None:
    folder = None
    try:
        with shielded():  # an interrupt during the set-up and the imports is raised once they are done
            import shutil
            import tempfile

            folder = tempfile.mkdtemp(prefix="swzc-")
            tempfile.tempdir = folder  # every temporary file of this run goes in here
            from swzc.cli import main as cli
        try:
            cli.main(argv, prog_name="swzc")
        except SystemExit as exc:
            return exc.code
        return 0
    finally:
        if folder is not None:
            with shielded(deliver=False):
                shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    install()
    try:
        code = _run(sys.argv[1:])
    except KeyboardInterrupt:
        code = report_interrupt()
    except Exception as exc:  # noqa: BLE001 - the last boundary: never a traceback
        if interrupt_received():
            code = report_interrupt()
        else:
            from swzc.clean import text  # the standard library's only: safe however far the imports got

            print(text(f"swzc: error: internal error: {type(exc).__name__}: {exc} (please report this)"), file=sys.stderr)
            code = 3
    sys.exit(code)


if __name__ == "__main__":
    main()
