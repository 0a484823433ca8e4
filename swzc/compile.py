"""Compile check: the rewritten file must still compile (nvcc for CUDA; hipcc, or nvcc through the
project's HIP compatibility header, for HIP).  A failure carries the exact command to reproduce it."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from swzc.hw import HardwareModel

TIMEOUT_S = 300


@dataclass(frozen=True)
class CompileReport:
    status: str  # "ok", "failed", "skipped"
    command: str
    detail: str = ""


def _command(path: Path, dialect: str, hw: HardwareModel, flags: tuple[str, ...], include_dir: str) -> list[str] | None:
    out = str(path.with_suffix(".o"))
    if dialect == "hip" and shutil.which("hipcc"):
        arch = hw.arch if hw.vendor == "amd" else "gfx942"
        return ["hipcc", f"--offload-arch={arch}", "-std=c++17", "-I", include_dir, *flags, "-c", str(path), "-o", out]
    if not shutil.which("nvcc"):
        return None
    cmd = ["nvcc", "-std=c++17", f"-arch={hw.nvcc_arch}", "-I", include_dir]
    if dialect == "hip":
        compat = str(resources.files("swzc.compat"))
        cmd += ["-x", "cu", "-I", compat]
    return [*cmd, *flags, "-c", str(path), "-o", out]


def _compile(name: str, data: bytes, dialect: str, hw: HardwareModel, flags: tuple[str, ...], include_dir: str, keep_failed: bool = False) -> tuple[int | None, str, str]:
    """Compile `data` as `name` in a fresh folder; a failing file is kept there when asked, so the command reproduces."""
    tmp = tempfile.mkdtemp(prefix="swzc-cc-")
    path = Path(tmp) / name
    path.write_bytes(data)
    cmd = _command(path, dialect, hw, flags, include_dir)
    code: int | None = None
    shown, detail = "", "no nvcc or hipcc on PATH"
    if cmd is not None:
        shown = shlex.join(cmd)
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=include_dir)
            code, detail = run.returncode, (run.stderr + run.stdout).strip()
        except subprocess.TimeoutExpired:
            code, detail = 1, f"timed out after {TIMEOUT_S} s"
    if not (keep_failed and code):
        shutil.rmtree(tmp, ignore_errors=True)
    return code, shown, detail


def compile_check(src_path: str, old: bytes, new: bytes, dialect: str, hw: HardwareModel, flags: tuple[str, ...] = ()) -> CompileReport:
    """Compile the rewritten file; on failure compile the original too, to tell our fault from the file's."""
    name = os.path.basename(src_path) or "kernel.cu"
    if not name.endswith((".cu", ".hip", ".cuh", ".cpp")):
        name += ".cu"
    if name.endswith(".cuh"):
        name = name[:-4] + ".cu"
    include_dir = os.path.dirname(os.path.abspath(src_path))
    code, cmd, detail = _compile(name, new, dialect, hw, flags, include_dir, keep_failed=True)
    if code is None:
        return CompileReport("skipped", "", detail)
    if code == 0:
        return CompileReport("ok", cmd)
    code_old, _, _ = _compile(name, old, dialect, hw, flags, include_dir)
    if code_old != 0:
        shutil.rmtree(os.path.dirname(shlex.split(cmd)[-3]), ignore_errors=True)
        return CompileReport("skipped", cmd, "the original file does not compile with this command either")
    return CompileReport("failed", cmd, detail)
