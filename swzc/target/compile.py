"""Compile check: the rewritten file must still compile (nvcc for CUDA; hipcc, or nvcc through the
project's HIP compatibility header, for HIP).  A failure carries the exact command to reproduce it.

The file is compiled, never run.  Each compile happens in a temporary folder that is removed on every
path, the compiler killed with all its children when swzc is interrupted.  To reproduce a failure, set
SWZC_KEEP_FAILED=DIR: the rewritten file that failed is then written to DIR and the printed command
compiles that copy.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from swzc.core import processes
from swzc.target.hw import HardwareModel
from swzc.frontend.build_context import context_from_flags, read_regular_file
from swzc.frontend.preprocess import MAX_HEADER_BYTES

TIMEOUT_S = 300
MEMORY_BYTES = 8 << 30  # address space of the compiler and each process it starts: a file whose macros expand
# without end stops there instead of taking the machine's memory
MAX_SCANNED_HEADERS = 256  # headers followed when looking for an #include of something not a regular file
_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"\r\n]+)[>"]', re.MULTILINE)
KEEP_FAILED = "SWZC_KEEP_FAILED"  # environment: a folder to keep the rewritten file in when it fails to compile


@dataclass(frozen=True)
class CompileReport:
    status: str  # "ok", "failed", "skipped"
    command: str
    detail: str = ""


def compiler(dialect: str) -> str | None:
    """The compiler a file of this dialect is built with: hipcc for HIP where it is installed, otherwise nvcc
    (HIP through the compatibility header); None when neither is on PATH."""
    if dialect == "hip" and shutil.which("hipcc"):
        return "hipcc"
    return "nvcc" if shutil.which("nvcc") else None


def source_name(src_path: str) -> str:
    """The name a file is compiled under: its own, with a suffix the compiler takes as CUDA or HIP, and any
    character but letters, digits and . _ + - made '_' (the copy's name is swzc's to choose, and the driver
    hands it to a shell)."""
    name = re.sub(r"[^A-Za-z0-9._+-]", "_", os.path.basename(src_path)).lstrip("-") or "kernel.cu"
    if not name.endswith((".cu", ".hip", ".cuh", ".cpp")):
        name += ".cu"
    if name.endswith(".cuh"):
        name = name[:-4] + ".cu"
    return name


def _command(path: Path, dialect: str, hw: HardwareModel, flags: tuple[str, ...], include_dir: str) -> list[str] | None:
    out = str(path.with_suffix(".o"))
    tool = compiler(dialect)
    if tool == "hipcc":
        arch = hw.arch if hw.vendor == "amd" else "gfx942"
        return ["hipcc", f"--offload-arch={arch}", "-std=c++17", "-I", include_dir, *flags, "-c", str(path), "-o", out]
    if tool is None:
        return None
    cmd = ["nvcc", "-std=c++17", f"-arch={hw.nvcc_arch}", "-I", include_dir]
    if dialect == "hip":
        compat = str(resources.files("swzc.compat"))
        cmd += ["-x", "cu", "-I", compat]
    return [*cmd, *flags, "-c", str(path), "-o", out]


def compile_copy(name: str, data: bytes, dialect: str, hw: HardwareModel, flags: tuple[str, ...],
                 include_dir: str) -> tuple[int | None, list[str] | None, str]:
    """Compile `data` as `name` in a temporary folder: (exit code or None without a compiler, command, output).

    None, with the reason, also when the file or a header it includes names a device, a FIFO or anything
    else that is not a regular file: the compiler would read it without end, or wait on it."""
    unreadable = unsafe_include(data, include_dir, context_from_flags(list(flags), include_dir).include_dirs)
    if unreadable:
        return None, None, f"not compiled: {unreadable}"
    with tempfile.TemporaryDirectory(prefix="swzc-cc-") as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        cmd = _command(path, dialect, hw, flags, include_dir)
        if cmd is None:
            return None, None, "no nvcc or hipcc on PATH"
        # the compiler's own temporary files go to `tmp` too, a folder that is removed however this ends
        run = processes.run(cmd, TIMEOUT_S, cwd=include_dir, env={**os.environ, "TMPDIR": tmp}, memory_bytes=MEMORY_BYTES)
        if run.timed_out:
            return 1, cmd, f"timed out after {TIMEOUT_S} s"
        return run.returncode, cmd, (run.stderr + run.stdout).strip()


def unsafe_include(data: bytes, folder: str, include_dirs: tuple[str, ...]) -> str | None:
    """The first `#include` of the file, or of a header it includes, that finds something other than a
    regular file (looked for beside the including file, then on the -I folders), as "line N: ..."; None
    when there is none.  Includes the compiler would resolve elsewhere (its own system headers) are left
    alone, as are computed ones (`#include MACRO`): the compile's time limit stands behind those."""
    seen: set[str] = set()
    todo = [(data, folder, "")]
    while todo and len(seen) <= MAX_SCANNED_HEADERS:
        text, here, where = todo.pop()
        for match in _INCLUDE.finditer(text):
            spelled = match.group(1).decode("utf-8", "replace").strip()
            places = [spelled] if os.path.isabs(spelled) else [os.path.join(d, spelled) for d in (here, *include_dirs)]
            for place in places:
                try:
                    info = os.stat(place)
                except (OSError, ValueError):
                    continue
                if not stat.S_ISREG(info.st_mode):
                    line = text.count(b"\n", 0, match.start()) + 1
                    return f"{where}line {line}: #include {spelled} finds {place}, which is not a regular file"
                real = os.path.realpath(place)
                if real not in seen:
                    seen.add(real)
                    header = read_regular_file(real, MAX_HEADER_BYTES)
                    if isinstance(header, bytes):
                        todo.append((header, os.path.dirname(real), f"{real}, "))
                break  # the first place that has it is the one the compiler takes
    return None


def _keep(name: str, data: bytes, cmd: list[str], keep_dir: str | None) -> tuple[str, str]:
    """The command to show for a failed compile, and a note: the command compiles a kept copy of the
    file when `keep_dir` is given; otherwise its file is gone, and the note says how to keep it."""
    if not keep_dir:
        return shlex.join(cmd), f"the rewritten file was not kept; set {KEEP_FAILED}=DIR to keep it for this command"
    try:
        os.makedirs(keep_dir, exist_ok=True)
        kept = Path(keep_dir).resolve() / name
        kept.write_bytes(data)
    except OSError as exc:
        return shlex.join(cmd), f"could not keep the rewritten file in {keep_dir}: {exc.strerror or exc}"
    source, obj = cmd[-3], cmd[-1]
    shown = [str(kept) if part == source else str(kept.with_suffix(".o")) if part == obj else part for part in cmd]
    return shlex.join(shown), f"the rewritten file is kept as {kept}"


def compile_check(src_path: str, old: bytes, new: bytes, dialect: str, hw: HardwareModel, flags: tuple[str, ...] = (),
                  keep_dir: str | None = None) -> CompileReport:
    """Compile the rewritten file; on failure compile the original too, to tell our fault from the file's.

    `keep_dir` (default: $SWZC_KEEP_FAILED) receives the rewritten file when it fails and the original
    compiles, so that the reported command reproduces the failure."""
    name = source_name(src_path)
    include_dir = os.path.dirname(os.path.abspath(src_path))
    code, cmd, detail = compile_copy(name, new, dialect, hw, flags, include_dir)
    if code is None or cmd is None:
        return CompileReport("skipped", "", detail)
    if code == 0:
        return CompileReport("ok", shlex.join(cmd))
    code_old, cmd_old, said = compile_copy(name, old, dialect, hw, flags, include_dir)
    if code_old != 0:
        # the command on the user's own file (the copy it compiled is gone), and the compiler's first error
        shown = [os.path.abspath(src_path) if part == cmd[-3] else os.devnull if part == cmd[-1] else part for part in cmd]
        lines = said.replace(cmd_old[-3], src_path).splitlines() if cmd_old else []
        first = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "")
        return CompileReport("skipped", shlex.join(shown), "the original file does not compile with this command either"
                             + (f": {first.strip()[:300]}" if first.strip() else ""))
    command, note = _keep(name, new, cmd, keep_dir if keep_dir is not None else os.environ.get(KEEP_FAILED))
    return CompileReport("failed", command, f"{note}\n{detail}")
