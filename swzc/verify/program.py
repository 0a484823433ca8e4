"""Whole-program benchmarking: the user's own program, built and run original and patched.

The file's folder is copied twice (original, rewritten); `--build-cmd` runs once in each copy and
`--bench-cmd` once per timed run, interleaved original, rewritten, original again (the A/A control).
`{file}` in a command stands for the source file's name.  The time (ms) and the check value are read
from the program's output with regular expressions; every run of the rewritten program must print
the original's check value and exit 0.  A rewritten program that fails, hangs or prints no check value
is a failed check (with its exit status and first lines of output), not a wrong result.  Commands run
in their own process group, killed with everything they started on a timeout or an interrupt, and the
copies are removed however the run ends.
"""

from __future__ import annotations

import re
import shlex
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from swzc.core import processes
from swzc.core.errors import ExitCode, SwzcError
from swzc.verify.harness import HarnessResult, Timing

TIME_PATTERN = r"(?i)(?:\bms[\s:=]+([0-9]+(?:\.[0-9]+)?)|([0-9]+(?:\.[0-9]+)?)\s*ms\b)"
CHECK_PATTERN = r"(?i)\bchecksum[\s:=]+(\S+)"
TIMEOUT_S = 600


@dataclass(frozen=True)
class ProgramBench:
    bench_cmd: str
    build_cmd: str | None = None
    runs: int = 5
    time_pattern: str = TIME_PATTERN
    check_pattern: str = CHECK_PATTERN
    sizes: tuple[int, ...] = ()  # --bench-sizes: `{size}` in bench_cmd stands for each in turn

    def at(self, size: int) -> ProgramBench:
        """The command at one size: `{size}` replaced by it."""
        return replace(self, bench_cmd=self.bench_cmd.replace("{size}", str(size)), sizes=())

    @property
    def each(self) -> list[tuple[int | None, ProgramBench]]:
        """The command at each size (one, with no size, where --bench-sizes was not given)."""
        return [(size, self.at(size)) for size in self.sizes] if self.sizes else [(None, self)]


def _copy(folder: Path, tag: str, where: Path) -> Path:
    target = where / tag
    inside = where.resolve()

    def skipped(parent: str, names: list[str]) -> set[str]:  # .git, and the copies themselves when TMPDIR is in the folder
        return {n for n in names if n == ".git" or (Path(parent) / n).resolve() == inside}

    shutil.copytree(folder, target, symlinks=True, ignore=skipped)
    return target


def shell(cmd: str, cwd: Path, file: str, env: Mapping[str, str] | None = None) -> processes.Finished:
    """One user command in `cwd`, `{file}` replaced by the source file's name, quoted for the shell (the name
    is the file's, not the user's: `a;b.cu` must stay one word)."""
    return processes.run(cmd.replace("{file}", shlex.quote(file)), TIMEOUT_S, cwd=cwd, env=env, shell=True)


def _read(pattern: str, output: str) -> str | None:
    match = re.search(pattern, output)
    if match is None:
        return None
    return next((g for g in match.groups() if g is not None), match.group(0)) if match.groups() else match.group(0)


def _number(found: str | None) -> float | None:
    try:
        return float(found) if found is not None else None
    except ValueError:
        return None


def _said(done: processes.Finished) -> str:
    return f"{done.status()}; its output began:\n{done.head()}"


def program_copy(path: str, data: bytes, bench: ProgramBench, tag: str, where: Path) -> Path:
    """The file's folder copied to `where`/`tag` (a folder the caller removes) with `data` as the file, built
    with --build-cmd when given."""
    source = Path(path).resolve()
    copy = _copy(source.parent, tag, where)
    (copy / source.name).write_bytes(data)
    if bench.build_cmd:
        built = shell(bench.build_cmd, copy, source.name)
        if not built.ok:
            raise SwzcError(f"the build command {built.status()} for the {tag} program: {bench.build_cmd}\n"
                            f"{built.head()}", ExitCode.CHECK_FAILED)
    return copy


def unreadable(bench: ProgramBench, done: processes.Finished) -> str:
    """What a run that went through did not print, and the flag that says where it is ('' where it printed both
    a check value and a time)."""
    output = done.stdout + done.stderr
    if _read(bench.check_pattern, output) is None:
        what, pattern, flag = "check value", bench.check_pattern, "--check-regex"
    elif _number(_read(bench.time_pattern, output)) is None:
        what, pattern, flag = "time", bench.time_pattern, "--time-regex"
    else:
        return ""
    return f"printed no {what} (pattern {pattern!r}; {flag} RE gives the pattern its output matches); its output began:\n{done.head()}"


class OriginalFailed(SwzcError):
    """The user's program, as it is, did not run through or printed no check value or time: nothing can be
    measured against it, so the loop stops at once instead of failing each candidate in turn."""


def run_program(path: str, original: bytes, rewritten: bytes, bench: ProgramBench) -> HarnessResult:
    """Build and run both versions of the program; correctness from the check values, times interleaved."""
    return run_program_sizes(path, original, rewritten, bench)[0][1]


def run_program_sizes(path: str, original: bytes, rewritten: bytes, bench: ProgramBench) -> list[tuple[int | None, HarnessResult]]:
    """Build both versions once, then run them at each size of --bench-sizes (once, with none): a result per size,
    up to the first whose rewritten program fails its check."""
    name = Path(path).name
    results: list[tuple[int | None, HarnessResult]] = []
    with tempfile.TemporaryDirectory(prefix="swzc-program-", ignore_cleanup_errors=True) as tmp:
        dirs = [program_copy(path, data, bench, tag, Path(tmp)) for tag, data in (("original", original), ("rewritten", rewritten))]
        for size, one in bench.each:
            results.append((size, _timed(one, dirs, name)))
            if results[-1][1].timing is None:
                break
    return results


def _timed(bench: ProgramBench, dirs: list[Path], name: str) -> HarnessResult:
    """Both built versions run `bench.runs` times, interleaved original, rewritten, original."""
    times: dict[str, list[float]] = {"a": [], "b": [], "a2": []}
    expected = None
    for _ in range(bench.runs):
        for key, folder in (("a", dirs[0]), ("b", dirs[1]), ("a2", dirs[0])):
            who = "rewritten" if key == "b" else "original"
            done = shell(bench.bench_cmd, folder, name)
            output = done.stdout + done.stderr
            check = _read(bench.check_pattern, output)
            ms = _number(_read(bench.time_pattern, output))
            if not done.ok:
                how = _said(done)
            elif check is None or ms is None:
                how = unreadable(bench, done)
            if not done.ok or check is None or ms is None:
                if who == "rewritten":
                    return HarnessResult(False, f"the rewritten program `{bench.bench_cmd}` {how}", None, failed=True)
                # the program as it is: no candidate can be judged against it, so the whole loop ends here
                raise OriginalFailed(f"`{bench.bench_cmd}` on the original program {how}",
                                     ExitCode.CHECK_FAILED if not done.ok else ExitCode.BAD_INPUT)
            if expected is None:
                expected = check
            if check != expected:
                if who == "original":
                    raise OriginalFailed(f"the original program's check value changes between runs ({expected} vs {check}): "
                                         "it is not deterministic, so swzc cannot check the rewrite", ExitCode.CHECK_FAILED)
                return HarnessResult(False, f"check value {check} differs from the original's {expected}", None)
            times[key].append(ms)
    return HarnessResult(True, "", Timing(tuple(times["a"]), tuple(times["b"]), tuple(times["a2"])))
