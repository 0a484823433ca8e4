"""Whole-program benchmarking: the user's own program, built and run original and patched.

The file's folder is copied twice (original, rewritten); `--build-cmd` runs once in each copy and
`--bench-cmd` once per timed run, interleaved original, rewritten, original again (the A/A control).
`{file}` in a command stands for the source file's name.  The time (ms) and the check value are read
from the program's output with regular expressions; every run of the rewritten program must print
the original's check value and exit 0.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from swzc.errors import ExitCode, SwzcError
from swzc.harness import HarnessResult, Timing

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


def _copy(folder: Path, tag: str, where: Path) -> Path:
    target = where / tag
    shutil.copytree(folder, target, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    return target


def _shell(cmd: str, cwd: Path, file: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd.replace("{file}", file), shell=True, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)


def _read(pattern: str, output: str, what: str, cmd: str) -> str:
    match = re.search(pattern, output)
    if match is None:
        raise SwzcError(f"no {what} in the output of `{cmd}` (pattern {pattern!r})", ExitCode.CHECK_FAILED)
    return next(g for g in match.groups() if g is not None) if match.groups() else match.group(0)


def run_program(path: str, original: bytes, rewritten: bytes, bench: ProgramBench) -> HarnessResult:
    """Build and run both versions of the program; correctness from the check values, times interleaved."""
    source = Path(path).resolve()
    with tempfile.TemporaryDirectory(prefix="swzc-program-") as tmp:
        dirs = []
        for tag, data in (("original", original), ("rewritten", rewritten)):
            copy = _copy(source.parent, tag, Path(tmp))
            (copy / source.name).write_bytes(data)
            if bench.build_cmd:
                built = _shell(bench.build_cmd, copy, source.name)
                if built.returncode != 0:
                    raise SwzcError(f"the build command failed for the {tag} program: {bench.build_cmd}\n"
                                    f"{(built.stderr or built.stdout).strip()[:2000]}", ExitCode.CHECK_FAILED)
            dirs.append(copy)
        times: dict[str, list[float]] = {"a": [], "b": [], "a2": []}
        expected = None
        for _ in range(bench.runs):
            for key, folder in (("a", dirs[0]), ("b", dirs[1]), ("a2", dirs[0])):
                done = _shell(bench.bench_cmd, folder, source.name)
                output = done.stdout + done.stderr
                if done.returncode != 0:
                    if key == "b":
                        return HarnessResult(False, f"the rewritten program exited with {done.returncode}", None)
                    raise SwzcError(f"`{bench.bench_cmd}` failed on the original program ({done.returncode}):\n"
                                    f"{output.strip()[:2000]}", ExitCode.CHECK_FAILED)
                check = _read(bench.check_pattern, output, "check value", bench.bench_cmd)
                if expected is None:
                    expected = check
                if check != expected:
                    who = "rewritten" if key == "b" else "original"
                    if who == "original":
                        raise SwzcError(f"the original program's check value changes between runs ({expected} vs {check}): "
                                        "it is not deterministic, so swzc cannot check the rewrite", ExitCode.CHECK_FAILED)
                    return HarnessResult(False, f"check value {check} differs from the original's {expected}", None)
                times[key].append(float(_read(bench.time_pattern, output, "time", bench.bench_cmd)))
    return HarnessResult(True, "", Timing(tuple(times["a"]), tuple(times["b"]), tuple(times["a2"])))
