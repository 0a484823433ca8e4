"""The compile check's choices without a real compiler: which compiler and flags it runs for each dialect
and GPU, what the compiled copy is called, what a timeout or a missing compiler gives, and how a failure is
kept for the user to reproduce.  A stand-in `nvcc`/`hipcc` records how it was called."""

import json
import os
import shlex
from pathlib import Path

import pytest
from support import NAIVE_GEMM, needs_nvcc

from swzc.target import compile as compiling
from swzc.target.compile import CompileReport, compile_check
from swzc.target.hw import load as load_hw

OLD = b"__global__ void k(float* c) { c[blockIdx.x] = 1; }\n"
NEW = b"// rewritten\n" + OLD


@pytest.fixture
def tools(tmp_path, monkeypatch):
    """A folder on PATH (alone, apart from the shell's tools) where stand-in compilers are put; each logs its
    arguments and the name of the file it compiles, and fails when that file holds 'BROKEN'."""
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "calls"

    def put(name: str, body: str = "") -> None:
        script = folder / name
        script.write_text(f'#!/bin/sh\necho "$@" >> {log}\n'
                          'for a in "$@"; do case "$a" in *.cu|*.hip|*.cpp) src="$a";; esac; done\n'
                          f'{body}\nif grep -q BROKEN "$src"; then echo "error: BROKEN here" >&2; exit 2; fi\nexit 0\n')
        script.chmod(0o755)

    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    monkeypatch.delenv(compiling.KEEP_FAILED, raising=False)
    return put, log


def calls(log: Path) -> list[list[str]]:
    return [shlex.split(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_cuda_is_compiled_by_nvcc_for_the_model_s_architecture(tools, tmp_path):
    put, log = tools
    put("nvcc")
    report = compile_check(str(tmp_path / "k.cu"), OLD, NEW, "cuda", load_hw("h200"), ("-DX=1",))
    assert report == CompileReport("ok", report.command) and report.detail == ""
    (cmd,) = calls(log)
    assert cmd[:5] == ["-std=c++17", "-arch=sm_90", "-I", str(tmp_path), "-DX=1"] and cmd[5] == "-c"
    assert cmd[6].endswith("/k.cu") and cmd[7:] == ["-o", cmd[6][:-3] + ".o"]
    assert report.command.startswith("nvcc -std=c++17 -arch=sm_90 -I")


def test_hip_goes_through_the_compatibility_header_with_nvcc_and_to_hipcc_where_there_is_one(tools, tmp_path):
    put, log = tools
    put("nvcc")
    compile_check(str(tmp_path / "k.hip"), OLD, NEW, "hip", load_hw("h200"))
    (cmd,) = calls(log)
    assert cmd[:4] == ["-std=c++17", "-arch=sm_90", "-I", str(tmp_path)] and cmd[4:6] == ["-x", "cu"]
    assert cmd[6] == "-I" and cmd[7].endswith("compat") and cmd[9].endswith("/k.hip")
    put("hipcc")
    log.unlink()
    compile_check(str(tmp_path / "k.hip"), OLD, NEW, "hip", load_hw("mi300x"))
    compile_check(str(tmp_path / "k.hip"), OLD, NEW, "hip", load_hw("h200"))
    compile_check(str(tmp_path / "k.cu"), OLD, NEW, "cuda", load_hw("mi300x"))
    amd, nvidia, cuda = calls(log)
    assert amd[:4] == ["--offload-arch=gfx942", "-std=c++17", "-I", str(tmp_path)] and amd[4] == "-c"
    assert amd[5].endswith("/k.hip") and amd[6:] == ["-o", amd[5][:-4] + ".o"]
    assert nvidia[0] == "--offload-arch=gfx942"  # HIP for an NVIDIA model, with hipcc: AMD's default target
    assert cuda[:2] == ["-std=c++17", "-arch=sm_90"]  # CUDA always goes to nvcc
    assert compile_check(str(tmp_path / "k.hip"), OLD, NEW, "hip", load_hw("mi250x")).command.startswith("hipcc --offload-arch=gfx90a ")


@pytest.mark.parametrize("path, compiled", [
    ("k.cu", "k.cu"), ("k.hip", "k.hip"), ("k.cpp", "k.cpp"), ("tile.cuh", "tile.cu"), ("kernel.txt", "kernel.txt.cu"),
    ("", "kernel.cu"),
])
def test_the_compiled_copy_is_named_so_the_compiler_takes_it_as_cuda(tools, tmp_path, path, compiled):
    put, log = tools
    put("nvcc")
    compile_check(str(tmp_path / path) if path else "", OLD, NEW, "cuda", load_hw("h200"))
    (cmd,) = calls(log)
    assert Path(cmd[-3]).name == compiled and Path(cmd[-1]).name == Path(compiled).with_suffix(".o").name


def test_without_a_compiler_the_check_is_skipped(tools, tmp_path):
    report = compile_check(str(tmp_path / "k.cu"), OLD, NEW, "cuda", load_hw("h200"))
    assert report == CompileReport("skipped", "", "no nvcc or hipcc on PATH")


def test_a_compile_past_the_time_limit_is_a_failure(tools, tmp_path, monkeypatch):
    put, _ = tools
    put("nvcc", 'if grep -q rewritten "$src"; then sleep 30; fi')
    monkeypatch.setattr(compiling, "TIMEOUT_S", 1)
    report = compile_check(str(tmp_path / "k.cu"), OLD, NEW, "cuda", load_hw("h200"))
    assert report.status == "failed" and report.detail.endswith("timed out after 1 s")


def test_a_failure_of_the_rewrite_only_is_reported_and_one_of_both_is_skipped(tools, tmp_path):
    put, _ = tools
    put("nvcc")
    failed = compile_check(str(tmp_path / "k.cu"), OLD, NEW + b"BROKEN\n", "cuda", load_hw("h200"))
    assert failed.status == "failed" and "error: BROKEN here" in failed.detail
    assert failed.detail.startswith("the rewritten file was not kept; set SWZC_KEEP_FAILED=DIR to keep it")
    both = compile_check(str(tmp_path / "k.cu"), OLD + b"BROKEN\n", NEW + b"BROKEN\n", "cuda", load_hw("h200"))
    assert both.status == "skipped"
    assert both.detail == "the original file does not compile with this command either: error: BROKEN here"
    # a command the user can run on the file itself (the copy compiled is gone): it shows the error again
    assert both.command.startswith("nvcc ") and shlex.split(both.command)[-3:] == [str(tmp_path / "k.cu"), "-o", os.devnull]


def test_swzc_keep_failed_keeps_the_failing_file_and_the_command_compiles_it(tools, tmp_path, monkeypatch):
    put, log = tools
    put("nvcc")
    monkeypatch.setenv("SWZC_KEEP_FAILED", str(tmp_path / "kept"))
    report = compile_check(str(tmp_path / "k.cu"), OLD, NEW + b"BROKEN\n", "cuda", load_hw("h200"))
    kept = tmp_path / "kept" / "k.cu"
    assert kept.read_bytes() == NEW + b"BROKEN\n"
    assert report.detail.startswith(f"the rewritten file is kept as {kept}")
    shown = shlex.split(report.command)
    assert shown[-3:] == [str(kept), "-o", str(kept.with_suffix(".o"))] and shown[0] == "nvcc"
    assert shown[1:-3] == calls(log)[0][:-3]  # everything else as it ran


def test_a_keep_folder_that_cannot_be_made_is_said(tools, tmp_path):
    put, _ = tools
    put("nvcc")
    (tmp_path / "file").write_text("not a folder")
    report = compile_check(str(tmp_path / "k.cu"), OLD, NEW + b"BROKEN\n", "cuda", load_hw("h200"), keep_dir=str(tmp_path / "file"))
    assert report.status == "failed" and report.detail.startswith(f"could not keep the rewritten file in {tmp_path / 'file'}: ")
    assert "/k.cu" in report.command and str(tmp_path / "file") not in report.command


def test_compiles_run_in_the_file_s_folder_with_a_private_temporary_folder(tools, tmp_path):
    put, log = tools
    put("nvcc", f'pwd > {tmp_path / "cwd"}; echo "$TMPDIR" > {tmp_path / "tmpdir"}')
    (tmp_path / "src").mkdir()
    compile_check(str(tmp_path / "src" / "k.cu"), OLD, NEW, "cuda", load_hw("h200"))
    assert (tmp_path / "cwd").read_text().strip() == str(tmp_path / "src")
    scratch = (tmp_path / "tmpdir").read_text().strip()
    assert os.path.basename(scratch).startswith("swzc-cc-") and not os.path.exists(scratch)


KERNEL_BODY = b"__global__ void k(float* x) { x[blockIdx.x] = 1.0f; }\n"


def _no_compiler_run(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the compiler was started")

    monkeypatch.setattr(compiling.processes, "run", refuse)


@pytest.mark.parametrize("spelled", ["/dev/zero", "/dev/stdin", "/proc/self/fd/0"])
def test_a_file_that_includes_a_device_is_never_handed_to_the_compiler(tmp_path, monkeypatch, spelled):
    """nvcc would read /dev/zero without end, or wait on a terminal or a pipe: nothing is compiled, and the
    compile is reported as not made, with the line."""
    _no_compiler_run(monkeypatch)
    data = b"// a kernel\n#include \"" + spelled.encode() + b"\"\n" + KERNEL_BODY
    code, cmd, why = compiling.compile_copy("k.cu", data, "cuda", load_hw("h200"), (), str(tmp_path))
    assert (code, cmd) == (None, None) and why.startswith(f"not compiled: line 2: #include {spelled} finds ")
    report = compile_check(str(tmp_path / "k.cu"), data, data, "cuda", load_hw("h200"))
    assert report.status == "skipped" and "not a regular file" in report.detail


def test_a_fifo_reached_through_headers_and_include_folders_is_found(tmp_path, monkeypatch):
    """k.cu includes a.h beside it; a.h includes b.h, found on a -I folder; b.h is a FIFO."""
    _no_compiler_run(monkeypatch)
    (tmp_path / "inc").mkdir()
    os.mkfifo(tmp_path / "inc" / "b.h")
    (tmp_path / "a.h").write_bytes(b"#pragma once\n  #  include <b.h>\n")
    data = b'#include "a.h"\n' + KERNEL_BODY
    code, _, why = compiling.compile_copy("k.cu", data, "cuda", load_hw("h200"), ("-I", "inc"), str(tmp_path))
    assert code is None and why == (f"not compiled: {tmp_path / 'a.h'}, line 2: #include b.h finds "
                                    f"{tmp_path / 'inc' / 'b.h'}, which is not a regular file")
    assert compiling.unsafe_include(data, str(tmp_path), ()) is None  # without the -I folder, b.h is not found
    for flags in (("-Iinc",), ("-isystem", "inc"), (f"-isystem{tmp_path / 'inc'}",)):
        code, _, why = compiling.compile_copy("k.cu", data, "cuda", load_hw("h200"), flags, str(tmp_path))
        assert code is None and "b.h, which is not a regular file" in why, flags


def test_regular_headers_and_system_headers_pass(tmp_path):
    (tmp_path / "sizes.h").write_bytes(b"#define N 64\n")
    data = b'#include "sizes.h"\n#include <cuda_runtime.h>\n#include "missing.h"\n' + KERNEL_BODY
    assert compiling.unsafe_include(data, str(tmp_path), ()) is None


def test_when_the_original_does_not_compile_either_its_first_error_names_the_user_s_file(tools, tmp_path):
    put, _ = tools
    put("nvcc", 'if grep -q BROKEN "$src"; then echo "$src(2): warning: old"; echo "$src(3): error: cudaThreadSynchronize" >&2; fi')
    both = compile_check(str(tmp_path / "k.cu"), OLD + b"BROKEN\n", NEW + b"BROKEN\n", "cuda", load_hw("h200"))
    assert both.detail.endswith(f": {tmp_path / 'k.cu'}(3): error: cudaThreadSynchronize")


INCLUDES_TILE = NAIVE_GEMM.replace("#define TILE 16\n", '#include "tile.h"\n').encode()  # its tile from a header


@needs_nvcc
@pytest.mark.parametrize("flags", [["-I", "hdr"], ["--set", "TILE=16", "--compile-flag=-Ihdr"], ["-I", "./hdr/../hdr"]])
def test_a_relative_include_folder_is_read_from_the_working_folder_by_the_compile_check_too(tmp_path, monkeypatch, flags):
    """The compile check runs in the file's own folder: a folder given relative to the working folder (-I, or
    --compile-flag=-I…) is made absolute first, so the check compiles what the analysis read."""
    from click.testing import CliRunner

    from swzc.commands.cli import main

    (tmp_path / "sub").mkdir()
    (tmp_path / "hdr").mkdir()
    (tmp_path / "sub" / "k.cu").write_bytes(INCLUDES_TILE)
    (tmp_path / "hdr" / "tile.h").write_text("#define TILE 16\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["rewrite", "sub/k.cu", *flags, "-o", "out.cu", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["compile"]["status"] == "ok", doc["compile"]
    assert f"-I{tmp_path / 'hdr'}" in doc["compile"]["command"]
