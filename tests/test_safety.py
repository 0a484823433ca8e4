"""Attacks on swzc and the protections against them: what it runs, what it writes, what it reads, and how
it ends when interrupted.  Each test was seen to fail with its protection removed."""

import errno
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import ROOT, TILE2D, has_gpu, needs_nvcc

from swzc.core import cache

from swzc.commands import cli as cli_module
from swzc.target import compile as compiling
from swzc.core import outputs
from swzc.core import signals
from swzc.formulas import prove as prover
from swzc.commands.cli import main
from swzc.target.compile import compile_check
from swzc.target.hw import load as load_hw


# The file never names uint3, so it compiles; the spliced swizzle declares `const uint3 swzc_block`, which
# the macro turns into an int: the rewritten file cannot compile.
BREAKS_THE_SPLICE = b"#define uint3 int\n" + TILE2D

H200 = (ROOT / "hwmodels" / "h200.toml").read_text()
MI300X = (ROOT / "hwmodels" / "mi300x.toml").read_text()


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A scratch working folder holding k.cu, with its own prover cache and temporary folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    prover._private_folder()  # made once per process, elsewhere: the checks below look for what a run leaves
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    (tmp_path / "k.cu").write_bytes(TILE2D)
    return tmp_path


def _script() -> str:
    script = Path(sys.executable).with_name("swzc")
    if script.is_file():
        return str(script)
    found = shutil.which("swzc")
    if found is None:
        pytest.skip("the swzc console script is not installed")
    return found


# ---- running the user's code: only when asked --------------------------------------------------------------


def test_benchmarking_is_off_by_default_even_with_a_gpu(work, monkeypatch):
    """The benchmark builds the input into a library and runs it: never without --bench or --bench-cmd."""
    called = []

    def bencher(*args, **kwargs):
        called.append(args)
        raise AssertionError("the benchmark ran without being asked for")

    monkeypatch.setattr(cli_module, "gpu_present", lambda: True)
    monkeypatch.setattr("swzc.pipeline.driver.Bencher", bencher)
    result = invoke("rewrite", "k.cu", "--no-compile", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["benchmarked"] is False and doc["changed"] is True and not called


def test_bench_on_the_command_line_still_benchmarks(work, monkeypatch):
    from swzc.core.errors import ExitCode, SwzcError

    called = []

    def bencher(*args, **kwargs):
        called.append(args)
        raise SwzcError("no harness in this test", ExitCode.CHECK_FAILED)

    monkeypatch.setattr(cli_module, "gpu_present", lambda: True)
    monkeypatch.setattr("swzc.pipeline.driver.Bencher", bencher)
    result = invoke("rewrite", "k.cu", "--no-compile", "--json", "--bench")
    assert called and json.loads(result.stdout)["benchmarked"] is True




@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="no CUDA GPU here")
def test_on_a_gpu_the_real_command_does_not_benchmark_unasked(work):
    env = {k: v for k, v in os.environ.items() if k != "SWZC_NO_GPU"}
    run = subprocess.run([_script(), "rewrite", "k.cu", "-o", "out.cu", "--no-compile", "--json"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["benchmarked"] is False and doc["bench"] == [] and doc["changed"] is True


# ---- the prover: nothing planted in a shared folder runs (unit tests of the cache: test_prove.py) ---------


def test_the_real_command_runs_no_planted_prover(work, monkeypatch):
    """HOME=/nonexistent and no XDG_CACHE_HOME, the temporary folder shared and world-writable, with a fake
    prover under every name this run's provers have had or have (old and new schemes, stamps and all)."""
    programs = []
    real_program = prover.host_program

    def spy(uses):
        programs.append(real_program(uses))
        return programs[-1]

    monkeypatch.setattr(prover, "host_program", spy)
    prover.build_prover.cache_clear()
    try:
        assert invoke("rewrite", "k.cu", "--no-compile").exit_code == 0
    finally:
        prover.build_prover.cache_clear()
    assert programs
    shared = work / "shared"
    (shared / "swzc").mkdir(parents=True)
    shared.chmod(0o777)
    marker = work / "ran"
    for program in programs:
        key = prover.prover_key(program, prover.host_compiler())
        for folder in (shared, shared / "swzc"):
            for name, stamp in ((hashlib.sha256(program.encode()).hexdigest()[:16], None), (key, key)):
                path = folder / f"prover-{name}"
                path.write_text(f"#!/bin/sh\necho ran > '{marker}'\nwhile read line; do echo 'ok 0'; done\n")
                path.chmod(0o755)
                if stamp:
                    (folder / f"prover-{name}.sha256").write_bytes(cache._stamp(f"prover-{key}", path.read_bytes()))
    env = {k: v for k, v in os.environ.items() if k != "XDG_CACHE_HOME"}
    env.update(HOME="/nonexistent", TMPDIR=str(shared))
    run = subprocess.run([_script(), "rewrite", "k.cu", "-o", "out.cu", "--no-compile", "--json"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["kernels"][0]["proof"] == "bijection on grid 256x256x1"
    assert not marker.exists()
    assert sorted(p.name for p in shared.iterdir() if not p.name.startswith("prover-")) == ["swzc"]  # nothing left


# ---- the compile check: a broken output is caught, folders are removed -------------------------------------


@needs_nvcc
def test_compile_check_sees_a_broken_output(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    hw = load_hw("h200")
    broken = TILE2D.replace(b"float acc = 0.0f;", b"float acc = undeclared_name;")
    assert compile_check("k.cu", TILE2D, TILE2D, "cuda", hw).status == "ok"
    failed = compile_check("k.cu", TILE2D, broken, "cuda", hw)
    assert failed.status == "failed" and "undeclared_name" in failed.detail
    assert compile_check("k.cu", broken, broken, "cuda", hw).status == "skipped"  # not our fault
    assert os.listdir(tmp_path) == []  # every compile folder removed, the failed one too


@needs_nvcc
def test_a_rewrite_that_does_not_compile_is_exit_3_and_writes_nothing(work, monkeypatch):
    (work / "k.cu").write_bytes(BREAKS_THE_SPLICE)
    result = invoke("rewrite", "k.cu", "-o", "out.cu", "--patch", "p.diff")
    assert result.exit_code == 3, result.output
    assert "does not compile" in result.stderr and f"{compiling.KEEP_FAILED}=DIR" in result.stderr
    assert not (work / "out.cu").exists() and not (work / "p.diff").exists()
    assert os.listdir(work / "tmp") == []
    # asked for, the failing file is kept and the printed command compiles it
    monkeypatch.setenv(compiling.KEEP_FAILED, str(work / "kept"))
    result = invoke("rewrite", "k.cu", "-o", "out.cu", "--json")
    assert result.exit_code == 3
    kept = work / "kept" / "k.cu"
    assert b"swzc_block" in kept.read_bytes()
    command = result.stderr.split("command: ", 1)[1].splitlines()[0]
    assert str(kept) in command
    again = subprocess.run(command, shell=True, cwd=work, capture_output=True, text=True)
    assert again.returncode != 0 and "uint3" in again.stderr


# ---- outputs: never the input, never another output, never a device ----------------------------------------


def test_patch_onto_the_input_is_refused(work):
    result = invoke("rewrite", "k.cu", "--patch", "k.cu", "--no-compile")
    assert result.exit_code == 2 and "is the input file" in result.stderr
    assert (work / "k.cu").read_bytes() == TILE2D


def test_output_and_patch_onto_one_file_is_refused(work):
    result = invoke("rewrite", "k.cu", "-o", "x", "--patch", "./x", "--no-compile")
    assert result.exit_code == 2 and "--patch ./x is also the file of -o x" in result.stderr
    assert not (work / "x").exists()


def test_report_onto_the_input_is_refused(work):
    (work / "r.md").write_bytes(TILE2D)
    result = invoke("rewrite", "r.md", "--report", "r", "--no-compile")
    assert result.exit_code == 2 and "--report r.md is the input file" in result.stderr


@pytest.mark.parametrize("how", ["symlink", "hardlink"])
def test_output_that_is_the_input_under_another_name_is_refused(work, how):
    (os.symlink if how == "symlink" else os.link)("k.cu", work / "other.cu")
    for option in ("-o", "--patch"):
        result = invoke("rewrite", "k.cu", option, "other.cu", "--no-compile")
        assert result.exit_code == 2 and "is the input file" in result.stderr
    assert (work / "k.cu").read_bytes() == TILE2D


def _null_device(folder: Path) -> str:
    """A character device to aim at: a private copy of /dev/null where swzc runs as root (who could replace
    the real one if this protection broke), else /dev/null itself (which only root may replace)."""
    if os.geteuid() != 0:
        return "/dev/null"
    node = folder / "null"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return str(node)


def test_output_onto_a_device_or_fifo_is_refused(work):
    device = _null_device(work)
    os.mkfifo(work / "fifo")
    (work / "folder").mkdir()
    os.symlink(work / "nowhere", work / "dangling")
    for target, what in ((device, "a character device"), ("fifo", "a FIFO"), ("folder", "a directory"),
                         ("dangling", "symbolic link to a file that does not exist")):
        for option in ("-o", "--patch"):
            result = invoke("rewrite", "k.cu", option, target, "--no-compile")
            assert result.exit_code == 2 and what in result.stderr, (target, result.output)
    assert stat.S_ISCHR(os.stat(device).st_mode) and stat.S_ISFIFO(os.stat(work / "fifo").st_mode)
    assert not (work / "nowhere").exists()


def test_a_failed_output_leaves_the_other_outputs_unwritten(work):
    (work / "ok.cu").write_bytes(b"before\n")
    result = invoke("rewrite", "k.cu", "-o", "ok.cu", "--patch", "/missing/dir/p.patch", "--no-compile")
    assert result.exit_code == 2 and "no folder /missing/dir" in result.stderr
    assert (work / "ok.cu").read_bytes() == b"before\n"


def test_a_failure_while_staging_changes_no_output(work, monkeypatch):
    """The check passes, then the disk fills up while the second output is written: neither changes."""
    (work / "ok.cu").write_bytes(b"before\n")
    real_write = outputs._write_all
    calls = []

    def second_fails(fd, data):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write(fd, data)

    monkeypatch.setattr(outputs, "_write_all", second_fails)
    result = invoke("rewrite", "k.cu", "-o", "ok.cu", "--patch", "p.diff", "--no-compile")
    assert result.exit_code == 2 and "No space left" in result.stderr
    assert (work / "ok.cu").read_bytes() == b"before\n" and not (work / "p.diff").exists()
    assert not [p.name for p in work.iterdir() if ".swzc-" in p.name]  # no staged file left


def test_in_place_writes_through_a_symlink_and_keeps_hard_links(work):
    expected = invoke("rewrite", "k.cu", "-o", "-", "--no-compile").stdout_bytes
    (work / "real").mkdir()
    os.rename(work / "k.cu", work / "real" / "k.cu")
    os.symlink("real/k.cu", work / "k.cu")
    os.link(work / "real" / "k.cu", work / "twin.cu")
    inode = os.stat(work / "twin.cu").st_ino
    result = invoke("rewrite", "k.cu", "--in-place", "--patch", "p.diff", "--no-compile")
    assert result.exit_code == 0, result.output
    assert os.path.islink(work / "k.cu")
    assert (work / "real" / "k.cu").read_bytes() == (work / "twin.cu").read_bytes() == expected
    assert os.stat(work / "twin.cu").st_ino == inode and os.stat(work / "twin.cu").st_nlink == 2
    assert (work / "p.diff").read_text().startswith("--- a/k.cu\n")


def test_in_place_of_a_single_file_is_a_rename_that_keeps_the_mode(work):
    (work / "k.cu").chmod(0o640)
    inode = os.stat(work / "k.cu").st_ino
    assert invoke("rewrite", "k.cu", "--in-place", "--no-compile").exit_code == 0
    assert os.stat(work / "k.cu").st_ino != inode  # a new file, put in place by rename
    assert stat.S_IMODE(os.stat(work / "k.cu").st_mode) == 0o640


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_new_outputs_get_the_umask_mode(work, umask):
    old = os.umask(umask)
    try:
        result = invoke("rewrite", "k.cu", "-o", "out.cu", "--patch", "p.diff", "--no-compile")
    finally:
        os.umask(old)
    assert result.exit_code == 0
    for name in ("out.cu", "p.diff"):
        assert stat.S_IMODE(os.stat(work / name).st_mode) == 0o666 & ~umask


def test_an_existing_output_keeps_its_mode(work):
    (work / "out.cu").write_bytes(b"old\n")
    (work / "out.cu").chmod(0o604)
    assert invoke("rewrite", "k.cu", "-o", "out.cu", "--no-compile").exit_code == 0
    assert stat.S_IMODE(os.stat(work / "out.cu").st_mode) == 0o604
    assert b"swzc_block" in (work / "out.cu").read_bytes()


# ---- inputs: regular files of bounded size ------------------------------------------------------------------


def test_dev_zero_as_input_is_refused_at_once(work):
    start = time.perf_counter()
    for command in ("rewrite", "analyze"):
        result = invoke(command, "/dev/zero")
        assert result.exit_code == 2 and "/dev/zero: is a character device" in result.stderr
    assert time.perf_counter() - start < 10


def test_a_fifo_as_input_does_not_block(work):
    os.mkfifo(work / "f.cu")
    run = subprocess.run([_script(), "rewrite", "f.cu", "--no-compile"], cwd=work, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 2 and "f.cu: is a FIFO" in run.stderr


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
def test_the_limit_holds_for_a_file_that_says_it_is_empty(work):
    """/proc files are regular files of size 0 that read as text: the read itself stops at the limit."""
    result = invoke("analyze", "/proc/self/status", "--max-bytes", "64")
    assert result.exit_code == 2 and "more than the limit of 64 bytes" in result.stderr


def test_outputs_are_checked_before_any_work(work, monkeypatch):
    def rewrite_file(*args, **kwargs):
        raise AssertionError("the rewrite ran although an output could not be written")

    monkeypatch.setattr(cli_module, "rewrite_file", rewrite_file)
    result = invoke("rewrite", "k.cu", "-o", "ok.cu", "--patch", "/missing/dir/p.patch")
    assert result.exit_code == 2 and "no folder /missing/dir" in result.stderr


def test_input_size_limit(work):
    result = invoke("rewrite", "k.cu", "--no-compile", "--max-bytes", "100")
    assert result.exit_code == 2 and "more than the limit of 100" in result.stderr and "--max-bytes" in result.stderr
    assert invoke("analyze", "k.cu", "--max-bytes", "100").exit_code == 2
    assert invoke("rewrite", "k.cu", "--no-compile", "--max-bytes", str(len(TILE2D))).exit_code == 0
    assert invoke("rewrite", "k.cu", "--no-compile").exit_code == 0  # the limit does not outlive its run


# ---- --hw files: every problem is exit 2, naming the file --------------------------------------------------


@pytest.mark.parametrize("case", ["chiplets-70000", "chiplets-2^32", "bad-utf8", "deep-arrays", "deep-tables",
                                  "compute-units", "missing", "directory"])
def test_bad_hardware_model_files(work, case):
    path = work / "gpu.toml"
    if case == "chiplets-70000":
        path.write_text(MI300X.replace("\nchiplets = 8\n", "\nchiplets = 70000\n"))
    elif case == "chiplets-2^32":
        path.write_text(MI300X.replace("\nchiplets = 8\n", f"\nchiplets = {2 ** 32}\n"))
    elif case == "bad-utf8":
        path.write_bytes(H200.encode().replace(b'name = "h200"', b'name = "h\xff200"'))
    elif case == "deep-arrays":
        path.write_text("x = " + "[" * 50_000 + "]" * 50_000 + "\n")
    elif case == "deep-tables":
        path.write_text("x = " + "{a = " * 5_000 + "1" + "}" * 5_000 + "\n")
    elif case == "compute-units":
        path.write_text(H200.replace("\ncompute_units = 132\n", "\ncompute_units = 1000000\n"))
    elif case == "directory":
        path.mkdir()
    start = time.perf_counter()
    result = invoke("rewrite", "k.cu", "--no-compile", "--hw", "gpu.toml")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("swzc: error: gpu.toml: "), result.stderr
    assert "internal error" not in result.stderr
    assert time.perf_counter() - start < 10


# ---- paths: a newline in the name, a file above the working folder -----------------------------------------


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not on PATH")
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **GIT_ENV, "HOME": str(folder)}
    return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, env=env)


@needs_git
def test_a_path_with_a_newline(work):
    """The patch header used to carry the newline raw, so the patch check failed every run (exit 3)."""
    name = "new\nline.cu"
    (work / name).write_bytes(TILE2D)
    result = invoke("rewrite", name, "-o", "out.cu", "--patch", "p.diff", "--no-compile")
    assert result.exit_code == 0, result.output
    assert (work / "p.diff").read_text().startswith('--- "a/new\\nline.cu"\n+++ "b/new\\nline.cu"\n')
    _git(work, "init", "-q", ".")
    run = _git(work, "apply", "p.diff")
    assert run.returncode == 0, run.stderr
    assert (work / name).read_bytes() == (work / "out.cu").read_bytes()


@needs_git
def test_a_file_above_the_working_folder_gets_a_path_git_applies(work):
    repo = work / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / "x.cu").write_bytes(TILE2D)
    assert _git(repo, "init", "-q", ".").returncode == 0
    os.chdir(repo / "sub")
    result = invoke("rewrite", "../x.cu", "--patch", str(work / "p.diff"), "--no-compile")
    assert result.exit_code == 0, result.output
    assert (work / "p.diff").read_text().startswith("--- a/x.cu\n+++ b/x.cu\n")
    run = _git(repo, "apply", "--check", str(work / "p.diff"))
    assert run.returncode == 0, run.stderr
    # outside any repository and outside the working folder: the base name, and a note saying so
    (work / "lone").mkdir()
    os.chdir(work / "lone")
    result = invoke("rewrite", "../k.cu", "--patch", "-", "--no-compile")
    assert result.exit_code == 0 and result.stdout.startswith("--- a/k.cu\n")
    assert "outside the working folder and any git work tree" in result.stderr


# ---- interrupts: exit 130, one line, nothing left behind ----------------------------------------------------


def test_keyboard_interrupt_in_a_command_is_exit_130(work, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_module, "rewrite_file", interrupted)
    result = invoke("rewrite", "k.cu", "--no-compile")
    assert result.exit_code == 130 and result.stderr == "swzc: interrupted\n"


def test_an_error_while_an_interrupt_is_pending_is_the_interrupt(work, monkeypatch):
    """tree-sitter reports Ctrl-C inside query compilation as a QueryError of its own."""

    def query_error(*args, **kwargs):
        raise RuntimeError("QueryError: invalid syntax at row 0")

    monkeypatch.setattr(cli_module, "rewrite_file", query_error)
    monkeypatch.setattr(signals, "_received", signal.SIGINT)
    result = invoke("rewrite", "k.cu", "--no-compile")
    assert result.exit_code == 130 and result.stderr == "swzc: interrupted\n"
    monkeypatch.setattr(signals, "_received", None)
    assert invoke("rewrite", "k.cu", "--no-compile").exit_code == 3  # without an interrupt: an internal error


def test_an_interrupt_while_click_parses_is_exit_130(work, monkeypatch):
    import click

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(click.Group, "make_context", interrupted)
    result = invoke("rewrite", "k.cu")
    assert result.exit_code == 130 and result.stderr == "swzc: interrupted\n" and "Aborted" not in result.output


def _sigcgt(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return int(line.split()[1], 16)
    return 0


def _children(pid: int) -> list[tuple[int, str]]:
    found = []
    for task in Path("/proc").iterdir():
        if task.name.isdigit():
            try:
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    found.append((int(task.name), (task / "cmdline").read_bytes().split(b"\0")[0].decode()))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _wait_for(condition, process: subprocess.Popen, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"swzc ended (exit {process.returncode}) before the moment to interrupt it")
        if time.monotonic() > end:
            pytest.fail("the moment to interrupt swzc never came")
        time.sleep(0.005)


def _descendants(pid: int) -> list[tuple[int, str]]:
    found, frontier = [], [pid]
    while frontier:
        nxt = [c for p in frontier for c in _children(p)]
        found += nxt
        frontier = [c for c, _ in nxt]
    return found


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
@pytest.mark.parametrize("moment", ["early", "proof", pytest.param("compile", marks=needs_nvcc)])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupting_the_real_command(work, moment, signum):
    """Delivered to the console script at a given moment: one line, exit 130, no temporary folder left, no
    compiler left running.  `early`: as soon as the handlers are in place, during the imports; `proof`:
    while the prover compiles (an empty cache); `compile`: while nvcc runs."""
    tmp = work / "tmp"
    env = {**os.environ, "TMPDIR": str(tmp), "XDG_CACHE_HOME": str(work / f"cache-{moment}")}
    env.pop("SWZC_NO_GPU", None)
    args = [_script(), "rewrite", "k.cu", "-o", "out.cu"] + ([] if moment == "compile" else ["--no-compile"])
    if moment == "compile":  # a warm cache, so that the first child process is nvcc
        subprocess.run(args[:-2] + ["--no-compile"], cwd=work, env=env, capture_output=True, timeout=120)
    process = subprocess.Popen(args, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        if moment == "early":
            _wait_for(lambda: _sigcgt(process.pid) & (1 << (signal.SIGTERM - 1)), process)
        else:
            tool = "nvcc" if moment == "compile" else ""
            _wait_for(lambda: any(tool in name for _, name in _children(process.pid)), process)
        spawned = _descendants(process.pid)
        process.send_signal(signum)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    assert err == b"swzc: interrupted\n"
    assert not (work / "out.cu").exists()
    assert os.listdir(tmp) == []
    time.sleep(0.2)
    alive = [(pid, name) for pid, name in spawned if os.path.exists(f"/proc/{pid}")
             and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    assert alive == []


@pytest.fixture
def handlers(monkeypatch):
    """swzc's SIGINT/SIGTERM handlers in this process, for the length of a test."""
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(signals, "_received", None)
    monkeypatch.setattr(signals, "_deferred", False)
    signals.install()
    yield
    for s, handler in old.items():
        signal.signal(s, handler)


def test_a_shielded_step_holds_the_interrupt_until_it_ends(handlers):
    with pytest.raises(KeyboardInterrupt):
        with signals.shielded():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler has run by now, and raised nothing
            finished = True
    assert finished and signals.interrupt_received()


def test_an_interrupt_while_outputs_are_put_in_place_comes_too_late(work, handlers, monkeypatch):
    real_commit = outputs._commit

    def commit_under_fire(staged):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        real_commit(staged)

    monkeypatch.setattr(outputs, "_commit", commit_under_fire)
    result = invoke("rewrite", "k.cu", "-o", "out.cu", "--patch", "p.diff", "--no-compile")
    assert result.exit_code == 0, result.output
    assert b"swzc_block" in (work / "out.cu").read_bytes() and (work / "p.diff").read_text().startswith("--- a/k.cu")
    assert not signals.interrupt_received()
