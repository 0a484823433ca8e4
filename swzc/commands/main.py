"""The console script: signal handlers first (swzc.core.signals), then the command line.

SIGINT and SIGTERM both unwind as KeyboardInterrupt; swzc then prints one line, `swzc: interrupted`, and
exits 130.  Each run keeps its temporary files in one private folder that is removed when the run ends,
however it ends, so a clean-up cut short by a second signal leaves nothing behind either.

This module imports only the standard library and swzc.core.signals before the handlers are installed, so that
an interrupt during the (slow) imports of the command line is reported like any other.
"""

from __future__ import annotations

import sys

from swzc.core.signals import install, interrupt_received, report_interrupt, shielded


def _run(argv: list[str]) -> int | str | None:
    folder = None
    try:
        with shielded():  # an interrupt during the set-up and the imports is raised once they are done
            import shutil
            import tempfile

            folder = tempfile.mkdtemp(prefix="swzc-")
            tempfile.tempdir = folder  # every temporary file of this run goes in here
            from swzc.commands.cli import main as cli
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
            from swzc.core.clean import text  # the standard library's only: safe however far the imports got

            print(text(f"swzc: error: internal error: {type(exc).__name__}: {exc} (please report this)"), file=sys.stderr)
            code = 3
    sys.exit(code)


if __name__ == "__main__":
    main()
