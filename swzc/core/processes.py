"""Child processes that never outlive the call that started them.

Each child runs in its own process group (a shell command's own children included).  On a timeout the
group is killed and the run is reported as timed out; on any exception while waiting (an interrupt turned
into KeyboardInterrupt or SystemExit) the group is killed before the exception goes on.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from swzc.core.errors import ExitCode, SwzcError

OUTPUT_LINES = 12  # lines of a failed run's output kept in a message

# Compiler drivers that run their own steps through a shell, each argument put inside double quotes
# ("nvcc -dryrun" shows it): there `$(…)`, backquotes, a double quote or a backslash would be read by the
# shell, so such an argument runs code or becomes other arguments.  No argument of theirs may hold one.
REREAD_BY_A_SHELL = frozenset({"nvcc", "hipcc", "hipcc.pl", "hipcc.bin"})
_SHELL_SPECIAL = re.compile(r'[$`"\\\x00-\x1f\x7f]')


def check_arguments(command: Sequence[str]) -> None:
    """Refuse (exit 2) a compiler command with an argument its driver's shell would read as code."""
    if not command or os.path.basename(command[0]) not in REREAD_BY_A_SHELL:
        return
    for argument in command[1:]:
        if _SHELL_SPECIAL.search(argument):
            raise SwzcError(f"{os.path.basename(command[0])} would hand the argument {argument!r} to a shell, which reads "
                            "$, `, \", \\ and control characters as code: rename the file or folder, or change the flag "
                            "(from -D/-I, --compile-flag, [tool.swzc] or compile_commands.json) that holds it",
                            ExitCode.BAD_INPUT)


@dataclass(frozen=True)
class Finished:
    command: str  # as a shell would read it
    returncode: int | None  # None: killed after the timeout
    stdout: str  # bytes for a run given `input` (binary in and out)
    stderr: str
    timeout: float | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def status(self) -> str:
        """How it ended, in words: "exited with status 3", "was killed by SIGSEGV", "timed out after 300 s"."""
        if self.returncode is None:
            return f"timed out after {self.timeout:g} s"
        if self.returncode < 0:
            try:
                return f"was killed by {signal.Signals(-self.returncode).name}"
            except ValueError:
                return f"was killed by signal {-self.returncode}"
        return f"exited with status {self.returncode}"

    def head(self, lines: int = OUTPUT_LINES) -> str:
        """The first lines of its output (stderr first: that is where errors go), or "(no output)"."""
        kept = [line.rstrip() for line in (self.stderr + "\n" + self.stdout).splitlines() if line.strip()][:lines]
        return "\n".join(kept) if kept else "(no output)"


def run(command: Sequence[str] | str, timeout: float, cwd: Path | str | None = None,
        env: Mapping[str, str] | None = None, shell: bool = False, input: bytes | None = None,
        pass_fds: Sequence[int] = (), memory_bytes: int | None = None) -> Finished:
    """Run to the end, or kill its whole process group at `timeout` seconds or on any exception.

    With `input`, the child reads those bytes on stdin and its output is kept as bytes; otherwise stdin is
    empty and the output is text.  `pass_fds` are descriptors the child inherits (no other is).  With
    `memory_bytes`, the command and every process it starts get at most that much address space."""
    (finished,) = run_all([command], timeout, cwd, env, shell, input, pass_fds, memory_bytes)
    return finished


def run_all(commands: Sequence[Sequence[str] | str], timeout: float, cwd: Path | str | None = None,
            env: Mapping[str, str] | None = None, shell: bool = False, input: bytes | None = None,
            pass_fds: Sequence[int] = (), memory_bytes: int | None = None) -> list[Finished]:
    """Start every command at once (each in its own group) and wait for all; the timeout counts per command."""
    for command in commands:
        if not isinstance(command, str):
            check_arguments(command)
    started: list[subprocess.Popen] = []
    binary = input is not None
    try:
        for command in commands:
            if memory_bytes is not None and not isinstance(command, str) and os.path.exists("/bin/sh"):
                # the shell sets the limit and becomes the command: no Python runs between fork and exec
                command = ["/bin/sh", "-c", f'ulimit -v {memory_bytes // 1024} && exec "$@"', "sh", *command]
            started.append(subprocess.Popen(command, shell=shell, cwd=cwd, env=dict(env) if env is not None else None,
                                            stdin=subprocess.PIPE if binary else subprocess.DEVNULL,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=tuple(pass_fds),
                                            text=not binary, errors=None if binary else "replace",
                                            start_new_session=True))
        results = []
        for command, process in zip(commands, started):
            written = command if isinstance(command, str) else shlex.join(command)
            try:
                out, err = process.communicate(input, timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill(process)
                out, err = _drain(process)
                results.append(Finished(written, None, out, err, timeout))
                continue
            results.append(Finished(written, process.returncode, out, err, timeout))
        return results
    except BaseException:
        for process in started:
            _kill(process)
        for process in started:
            _reap(process)
        raise


class Started:
    """A child started now and waited for later, for work that runs side by side (one job per GPU): its own
    process group, `input` on its stdin, its output in two files of `folder` (a private folder of the caller's).
    `poll` tells when it has ended, killing it at `timeout` seconds; `stop` ends it and everything it started:
    SIGTERM first, so that it can end its own children, then SIGKILL."""

    def __init__(self, command: Sequence[str], input: bytes, folder: Path, timeout: float,
                 env: Mapping[str, str] | None = None) -> None:
        """Started in `folder`, which is also its working folder."""
        check_arguments(command)
        self.command = shlex.join(command)
        self.timeout = timeout
        self._out, self._err = Path(folder) / "stdout", Path(folder) / "stderr"
        self._start = time.monotonic()
        with open(self._out, "wb") as out, open(self._err, "wb") as err:
            self._process = subprocess.Popen(list(command), stdin=subprocess.PIPE, stdout=out, stderr=err,
                                             env=dict(env) if env is not None else None, cwd=folder, start_new_session=True)
        try:
            assert self._process.stdin is not None
            self._process.stdin.write(input)
            self._process.stdin.close()
        except BrokenPipeError:  # it ended before reading: its status says why
            pass
        except BaseException:
            self.stop()
            raise

    def poll(self) -> Finished | None:
        """None while it runs; how it ended once it has (killed, and reported as timed out, past `timeout`)."""
        code = self._process.poll()
        if code is None and time.monotonic() - self._start > self.timeout:
            self.stop()
            return Finished(self.command, None, *self._output(), self.timeout)
        if code is None:
            return None
        return Finished(self.command, code, *self._output(), self.timeout)

    def stop(self, grace: float = 5.0) -> None:
        if self._process.poll() is None:
            try:
                os.killpg(self._process.pid, signal.SIGTERM)
                self._process.wait(timeout=grace)
            except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
                pass
        _kill(self._process)
        _reap(self._process)

    def _output(self) -> tuple[str, str]:
        kept = []
        for path in (self._out, self._err):
            with open(path, "rb") as file:
                kept.append(file.read(OUTPUT_BYTES).decode("utf-8", "replace"))
        return kept[0], kept[1]


OUTPUT_BYTES = 16 << 20  # the most of a started child's output read back


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(process: subprocess.Popen) -> None:
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


def _drain(process: subprocess.Popen) -> tuple[str, str]:
    """What a killed process left in its pipes; a child that escaped its group may hold them open: give up then."""
    empty = "" if process.text_mode else b""
    try:
        out, err = process.communicate(timeout=5)
        return out or empty, err or empty
    except (subprocess.TimeoutExpired, ValueError, OSError):
        process.kill()
        return empty, empty
