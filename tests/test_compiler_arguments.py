"""nvcc runs its steps through a shell, each argument inside double quotes: an argument holding $(…), a
backquote, a double quote or a backslash would run code.  No such argument reaches it, whoever chose it (a
-D, a folder's name, a compilation database); the copy it compiles is named by swzc."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner
from support import NAIVE_GEMM

from swzc.core import processes
from swzc.commands.cli import main
from swzc.core.errors import SwzcError

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")

SPECIAL = ["$(touch {m})", "`touch {m}`", '"; touch {m}; "', "\\$(touch {m})", "a\ntouch {m}"]


@pytest.mark.parametrize("argument", ["-DX=$(id)", "-DX=`id`", '-DX="a"', "-I/x\\y", "-DX=1\n", "/tmp/$HOME/k.cu", "\x7f"])
@pytest.mark.parametrize("driver", ["nvcc", "/usr/local/cuda/bin/nvcc", "hipcc", "hipcc.pl"])
def test_an_argument_a_shell_would_read_never_reaches_the_driver(driver, argument):
    with pytest.raises(SwzcError) as caught:
        processes.check_arguments([driver, "-c", argument])
    assert caught.value.code == 2 and "to a shell" in caught.value.message


@pytest.mark.parametrize("command", [["nvcc", "-DX=$(id)"], ["hipcc", "k.cu", "-o", "k", "-DX=`id`"],
                                     ["hipcc.bin", "-I/a\\b"], ["/opt/rocm/bin/hipcc.pl", "-DX=\"a\""]])
def test_every_argument_is_checked_the_first_and_the_last(command):
    with pytest.raises(SwzcError, match="to a shell"):
        processes.check_arguments(command)


def test_other_programs_and_plain_arguments_pass():
    processes.check_arguments([])
    processes.check_arguments(["nvcc"])
    processes.check_arguments(["/usr/local/cuda/bin/nvcc", "-DX=(1+2)*3", "-O3", "k.cu"])
    processes.check_arguments(["g++", "-DX=$(id)"])  # g++ runs no shell: its arguments are only arguments
    processes.check_arguments(["nvcc", "-I/a b/c", "-DN=4096", "-DS=(1+2)*3", "-std=c++17", "k.cu"])


@needs_nvcc
@pytest.mark.parametrize("special", SPECIAL)
def test_a_define_that_would_run_code_is_refused_and_nothing_runs(tmp_path, monkeypatch, special):
    marker = tmp_path / "ran"
    (tmp_path / "k.cu").write_text(NAIVE_GEMM)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["rewrite", "k.cu", "-D", "X=" + special.format(m=marker), "--json"])
    assert result.exit_code == 2 and "to a shell" in result.output and not marker.exists()


@needs_nvcc
def test_without_the_check_the_same_define_runs_code(tmp_path, monkeypatch):
    """What the check stops is real: switched off, nvcc's shell runs the command."""
    marker = tmp_path / "ran"
    (tmp_path / "k.cu").write_text(NAIVE_GEMM)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(processes, "check_arguments", lambda command: None)
    CliRunner().invoke(main, ["rewrite", "k.cu", "-D", f"X=$(touch {marker})"])
    assert marker.exists()


@needs_nvcc
def test_a_folder_name_that_would_run_code_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "$(touch ran)"
    folder.mkdir()
    (folder / "k.cu").write_text(NAIVE_GEMM)
    monkeypatch.chdir(folder)
    result = CliRunner().invoke(main, ["rewrite", "k.cu"])
    assert result.exit_code == 2 and "to a shell" in result.output
    assert not (folder / "ran").exists() and not (tmp_path / "ran").exists()


@needs_nvcc
def test_a_file_name_that_would_run_code_is_compiled_under_a_plain_name(tmp_path, monkeypatch):
    name = "$(touch ran)`touch ran2`.cu"
    (tmp_path / name).write_text(NAIVE_GEMM)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["rewrite", name, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["compile"]["status"] == "ok"
    assert not (tmp_path / "ran").exists() and not (tmp_path / "ran2").exists()


@needs_nvcc
def test_a_compilation_database_define_that_would_run_code_is_refused(tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    (tmp_path / "k.cu").write_text(NAIVE_GEMM)
    (tmp_path / "compile_commands.json").write_text(json.dumps([{
        "directory": str(tmp_path), "file": "k.cu", "arguments": ["nvcc", f"-DX=$(touch {marker})", "-c", "k.cu"]}]))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["rewrite", "k.cu"])
    assert result.exit_code == 2 and not marker.exists()


def test_a_memory_limit_holds_for_the_command_and_what_it_starts(tmp_path):
    """The compiler and each process it starts get at most MEMORY_BYTES of address space: a file whose macros
    expand without end stops there instead of taking the machine's memory."""
    import sys
    take = [sys.executable, "-c", "b = bytearray(1 << 30); print('took it')"]
    limited = processes.run(["/bin/sh", "-c", '"$@"', "sh", *take], 60, memory_bytes=256 << 20)
    assert not limited.ok and "took it" not in limited.stdout and "MemoryError" in limited.stderr
    assert processes.run(take, 60).stdout.strip() == "took it"


def test_the_compile_check_runs_its_compiler_under_the_memory_limit(tmp_path, monkeypatch):
    from swzc.target import compile as compiling
    seen = []
    monkeypatch.setattr(processes, "run", lambda cmd, timeout, **kw: seen.append(kw) or processes.Finished("x", 0, "", ""))
    monkeypatch.setattr(compiling, "compiler", lambda dialect: "nvcc")
    from swzc.target.hw import load
    compiling.compile_copy("k.cu", b"int x;\n", "cuda", load("h200"), (), str(tmp_path))
    assert seen and seen[0]["memory_bytes"] == compiling.MEMORY_BYTES


@pytest.mark.parametrize("name", ["x;touch ran;.cu", "$(touch ran).cu", "`touch ran`.cu", "a b.cu", "it's.cu", "-o.cu"])
def test_the_file_name_in_a_bench_command_stays_one_word(tmp_path, name):
    """--bench-cmd "cat {file}": the name is the file's (anyone's), so it is quoted, never read as shell code."""
    from swzc.verify import program
    (tmp_path / name).write_text("int x;\n")
    done = program.shell("cat -- {file}", tmp_path, name)
    assert done.ok and done.stdout == "int x;\n" and not (tmp_path / "ran").exists()
