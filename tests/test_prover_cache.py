"""The prover cache as a user sees it: where it lives, what it holds and with which modes, what it refuses to
use, and that it leaves nothing behind (no descriptors, no temporary folders, no half-written files)."""

import gc
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from swzc.core import cache
from swzc.formulas import prove as prover
from swzc.core.errors import ExitCode, SwzcError
from swzc.formulas.swizzles import parse_spec

GROUPED = ((parse_spec("grouped:8"), "2d"),)
JOB = [(parse_spec("grouped:8"), "2d", ((5, 7, 1, 0),))]


@pytest.fixture(autouse=True)
def fresh_prover():
    prover.build_prover.cache_clear()
    yield
    prover.build_prover.cache_clear()


def _entries(folder: Path) -> list[str]:
    """The cache's prover entries (the sandbox launcher's are kept beside them)."""
    return sorted(name for name in os.listdir(folder) if name.startswith("prover-")) if folder.is_dir() else []


def _key() -> str:
    return prover.prover_key(prover.host_program(list(GROUPED)), prover.host_compiler())


def test_a_built_prover_is_kept_in_the_cache_with_its_stamp_and_private_modes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "base"))
    old = os.umask(0o022)
    try:
        assert prover.prove(JOB)[0].ok
    finally:
        os.umask(old)
    folder = tmp_path / "base" / "swzc"
    key = _key()
    assert _entries(folder) == [f"prover-{key}", f"prover-{key}.sha256"]  # no temporary file left
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "base").stat().st_mode) == 0o700  # a base it creates is private too
    assert stat.S_IMODE((folder / f"prover-{key}").stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / f"prover-{key}.sha256").stat().st_mode) == 0o600
    stamp = (folder / f"prover-{key}.sha256").read_bytes()
    assert stamp == cache._stamp(f"prover-{key}", (folder / f"prover-{key}").read_bytes())


def test_the_cached_prover_is_used_the_next_time(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert prover.prove(JOB)[0].ok
    prover.build_prover.cache_clear()
    monkeypatch.setattr(prover, "_compile_prover", lambda *a: pytest.fail("compiled again despite a good cache entry"))
    checked = prover.build_prover(GROUPED)
    assert checked.where == str(tmp_path / "swzc" / f"prover-{_key()}")
    assert prover.prove(JOB)[0].ok


def test_modes_are_exact_whatever_the_umask(tmp_path, monkeypatch):
    """A umask that takes the execute bit must not leave a cached prover that cannot run."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    old = os.umask(0o177)
    try:
        assert prover.prove(JOB)[0].ok
        prover.build_prover.cache_clear()
        monkeypatch.setattr(prover, "_compile_prover", lambda *a: pytest.fail("compiled again"))
        assert prover.prove(JOB)[0].ok
    finally:
        os.umask(old)
    binary = tmp_path / "swzc" / f"prover-{_key()}"
    assert stat.S_IMODE(binary.stat().st_mode) == 0o700
    assert stat.S_IMODE(binary.with_name(binary.name + ".sha256").stat().st_mode) == 0o600


def test_an_existing_cache_folder_is_made_private(tmp_path, monkeypatch):
    (tmp_path / "swzc").mkdir(mode=0o755)
    (tmp_path / "swzc").chmod(0o755)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert prover.prove(JOB)[0].ok
    assert stat.S_IMODE((tmp_path / "swzc").stat().st_mode) == 0o700
    assert _entries(tmp_path / "swzc")


def test_without_xdg_cache_home_the_cache_is_under_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    for value in (None, "", "relative/cache"):  # unset, empty or relative: ignored, as the XDG spec says
        monkeypatch.chdir(tmp_path)
        if value is None:
            monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
        else:
            monkeypatch.setenv("XDG_CACHE_HOME", value)
        prover.build_prover.cache_clear()
        assert prover.prove(JOB)[0].ok
        assert _entries(tmp_path / "home" / ".cache" / "swzc"), value
        assert not (tmp_path / "relative").exists()


def test_a_relative_home_means_no_cache_and_no_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", "relative-home")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert prover.prove(JOB)[0].ok
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("link", ["folder", "entry"])
def test_a_symbolic_link_in_the_cache_is_not_followed(tmp_path, monkeypatch, link):
    """A link where the cache folder or a prover should be, to a folder or a file someone else controls."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "base"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "base").mkdir()
    if link == "folder":
        (tmp_path / "base" / "swzc").symlink_to(elsewhere)
    else:
        key = _key()
        (tmp_path / "base" / "swzc").mkdir(mode=0o700)
        planted = elsewhere / "planted"
        planted.write_bytes(b"#!/bin/sh\ntouch '%s'\nwhile read l; do echo 'ok 0'; done\n" % str(tmp_path / "ran").encode())
        planted.chmod(0o700)
        (tmp_path / "base" / "swzc" / f"prover-{key}").symlink_to(planted)
        (tmp_path / "base" / "swzc" / f"prover-{key}.sha256").write_bytes(cache._stamp(f"prover-{key}", planted.read_bytes()))
    (proof,) = prover.prove(JOB)
    assert proof.ok and not proof.identity and not (tmp_path / "ran").exists()
    assert sorted(os.listdir(elsewhere)) == ([] if link == "folder" else ["planted"])


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_building_and_reusing_provers_leaks_no_descriptor(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    gc.collect()
    before = _open_descriptors()
    for _ in range(3):  # built and stored, then read back from the cache twice
        prover.build_prover.cache_clear()
        assert prover.prove(JOB)[0].ok
        prover.build_prover.cache_clear()
        gc.collect()
    assert _open_descriptors() == before
    (tmp_path / "swzc" / f"prover-{_key()}.sha256").write_text("wrong\n")  # a stale stamp: rebuilt
    assert prover.prove(JOB)[0].ok
    prover.build_prover.cache_clear()
    gc.collect()
    assert _open_descriptors() == before


def _fake_compiler(folder: Path, body: str) -> str:
    folder.mkdir(exist_ok=True)
    script = folder / "fakecxx"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_a_prover_that_does_not_compile_is_a_failed_check(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", _fake_compiler(tmp_path / "bin", "echo 'no such header' >&2; exit 1"))
    with pytest.raises(SwzcError) as caught:
        prover.prove(JOB)
    assert caught.value.code == ExitCode.CHECK_FAILED
    assert "the swizzle prover does not compile" in caught.value.message and "no such header" in caught.value.message
    assert not _entries(tmp_path / "cache" / "swzc")


def test_a_prover_that_compiles_too_long_is_a_failed_check(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", _fake_compiler(tmp_path / "bin", "sleep 30"))
    monkeypatch.setattr(prover, "_BUILD_TIMEOUT_S", 1)
    with pytest.raises(SwzcError) as caught:
        prover.prove(JOB)
    assert caught.value.code == ExitCode.CHECK_FAILED and "did not compile in 1 s" in caught.value.message


def test_without_a_cache_the_private_build_folder_is_removed_at_exit(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "HOME": "relative", "TMPDIR": str(scratch)}
    env.pop("XDG_CACHE_HOME", None)
    code = ("from swzc.formulas import prove; from swzc.formulas.swizzles import parse_spec; import os, tempfile\n"
            "assert prove.prove([(parse_spec('grouped:8'), '2d', ((5, 7, 1, 0),))])[0].ok\n"
            "print(os.listdir(tempfile.gettempdir()))\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "swzc-prove-" in run.stdout  # it was there while swzc ran
    assert os.listdir(scratch) == []  # and is gone now


def test_a_freshly_built_prover_is_owner_only_and_runnable_whatever_the_umask(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    program = prover.host_program(list(GROUPED))
    compiler = prover.host_compiler()
    old = os.umask(0o177)
    try:
        built = prover._compile_prover(program, compiler, prover.prover_key(program, compiler))
    finally:
        os.umask(old)
    assert stat.S_IMODE(built.stat().st_mode) == 0o700


def _recording(monkeypatch) -> list[tuple[list[str], dict]]:
    """Every command swzc runs from here on, with its options."""
    ran: list[tuple[list[str], dict]] = []
    real_run = prover.processes.run
    monkeypatch.setattr(prover.processes, "run",
                        lambda cmd, timeout, **kw: ran.append((cmd, {**kw, "timeout": timeout})) or real_run(cmd, timeout, **kw))
    return ran


def test_without_proc_the_prover_runs_by_its_path(tmp_path, monkeypatch):
    """Where /proc/self/fd is missing the verified binary is run by path, under the shell's limits; the
    answers are the same."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(prover, "_BY_DESCRIPTOR", False)
    ran = _recording(monkeypatch)
    (proof,) = prover.prove(JOB)
    command, _ = ran[-1]
    assert proof.ok and command[-1].endswith(f"/prover-{_key()}") and "/proc/self/fd" not in " ".join(command)
    assert command[:2] == ["/bin/sh", "-c"] and f"ulimit -v {prover.RUN_MEMORY_BYTES // 1024} && ulimit -t {prover.RUN_CPU_S}" in command[2]
    assert proof.sandbox == ("rlimits",)


def test_the_prover_runs_in_its_sandbox_with_limits_and_a_timeout(monkeypatch):
    ran = _recording(monkeypatch)
    (proof,) = prover.prove(JOB)
    command, options = ran[-1]
    assert proof.ok and command[0].startswith("/proc/self/fd/")
    assert command[2:5] == [str(prover.RUN_MEMORY_BYTES), str(prover.RUN_CPU_S), "rlimits,namespaces,seccomp"]
    assert options["env"] == {} and options["timeout"] == prover.RUN_TIMEOUT_S and len(options["pass_fds"]) == 2
    assert {"rlimits", "seccomp"} <= set(proof.sandbox)


def test_a_prover_past_its_time_is_a_failed_check_not_a_hang(monkeypatch):
    prover.build_prover(GROUPED)  # built before the runner is replaced

    def slow(cmd, timeout, **kw):
        return prover.processes.Finished("prover", None, b"", b"", timeout)

    monkeypatch.setattr(prover.processes, "run", slow)
    with pytest.raises(SwzcError, match=f"did not finish in {prover.RUN_TIMEOUT_S} s"):
        prover.prove(JOB)
