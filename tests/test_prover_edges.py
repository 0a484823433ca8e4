"""The prover's edges: which host compiler it uses, where it stops enumerating, and what it reads back."""

import os
import stat
from pathlib import Path

import pytest

from swzc.core import processes

from swzc.formulas import prove as prover
from swzc.core.errors import ExitCode, SwzcError
from swzc.formulas.swizzles import parse_spec


def _tools(folder: Path, *names: str) -> None:
    folder.mkdir(exist_ok=True)
    for name in names:
        path = folder / name
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize("present, chosen", [
    (("c++", "g++", "clang++"), ["c++"]),
    (("g++", "clang++"), ["g++"]),
    (("clang++",), ["clang++"]),
])
def test_the_host_compiler_is_the_first_of_cxx_cplusplus_gplusplus_clang(tmp_path, monkeypatch, present, chosen):
    _tools(tmp_path / "bin", *present)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("CXX", raising=False)
    assert prover.host_compiler() == chosen


def test_cxx_names_the_host_compiler_with_its_flags(tmp_path, monkeypatch):
    _tools(tmp_path / "bin", "c++", "mycxx")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("CXX", "mycxx -O0 -g")
    assert prover.host_compiler() == ["mycxx", "-O0", "-g"]
    monkeypatch.setenv("CXX", "not-installed")  # not on PATH: the next candidate
    assert prover.host_compiler() == ["c++"]


def test_no_host_compiler_is_a_failed_check(tmp_path, monkeypatch):
    _tools(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(SwzcError) as caught:
        prover.host_compiler()
    assert caught.value.code == ExitCode.CHECK_FAILED and "set CXX" in caught.value.message


def test_grids_up_to_the_limit_are_enumerated_and_larger_ones_sampled():
    """2^26 blocks are proven block by block; one tile column more and the sample shapes stand in."""
    at_limit, past_limit = prover.prove([(parse_spec("grouped:8"), "2d", ((8192, 8192, 1, 0),)),
                                         (parse_spec("grouped:8"), "2d", ((8193, 8192, 1, 0),))])
    assert at_limit.ok and not at_limit.sampled and at_limit.shapes == ((8192, 8192, 1, 0),)
    assert past_limit.ok and past_limit.sampled and past_limit.shapes == prover.sample_shapes("2d")


def test_one_shape_past_the_limit_samples_the_whole_job():
    (proof,) = prover.prove([(parse_spec("grouped:8"), "2d", ((4, 4, 1, 0), (4, 8192, 4096, 0)))])
    assert proof.ok and proof.sampled and proof.shapes == prover.sample_shapes("2d")


def test_a_3d_grid_counts_its_depth_against_the_limit():
    """4 x 8192 x 4096 is 2^27 blocks: sampled, whichever axis holds them."""
    for shape in ((4, 8192, 4096, 0), (8192, 4, 4096, 0), (4096, 4096, 8, 0)):
        (proof,) = prover.prove([(parse_spec("grouped:8"), "2d", (shape,))])
        assert proof.sampled, shape


# ---- the sample shapes ----------------------------------------------------------------------------------

def test_2d_samples_cover_every_pair_of_sides_in_one_and_two_slices():
    shapes = prover.sample_shapes("2d")
    sides = sorted({x for x, *_ in shapes})
    assert set(shapes) == {(x, y, z, 0) for x in sides for y in sides for z in (1, 2)} and len(shapes) == len(set(shapes))
    assert sides[0] == 1 and {2, 3, 7, 13, 31} <= set(sides) and max(sides) > 128  # primes, and past 2^7


def test_1d_samples_are_tilings_and_near_tilings():
    shapes = prover.sample_shapes("1d")
    tilings = [s for s in shapes if s[0] % s[3] == 0]
    others = [s for s in shapes if s[0] % s[3] != 0]
    sides = sorted({n for *_, n in shapes})
    assert sides[0] == 1 and max(sides) > 128
    assert set(tilings) == {(m * n, 1, 1, n) for m in sides for n in sides}
    assert set(others) == {(m * n + 1, 1, 1, n) for m in sides for n in sides if n > 1}  # n = 1 tiles everything
    assert all(y == z == 1 for _, y, z, _ in shapes)


def test_linear_samples_reach_past_16_bits():
    shapes = prover.sample_shapes("linear")
    counts = [x for x, *_ in shapes]
    assert all(s[1:] == (1, 1, 0) for s in shapes) and counts[0] == 1
    assert {1000, 1021, 4096, 65537} <= set(counts) and 129 in counts


def test_sample_shapes_are_what_an_unknown_grid_is_proven_on():
    for adapter in ("2d", "1d", "linear"):
        spec = parse_spec("xcd:8" if adapter == "linear" else "grouped:8")
        (proof,) = prover.prove([(spec, adapter, None)])
        assert proof.ok and proof.sampled and proof.shapes == prover.sample_shapes(adapter)


# ---- what is read back from the prover -----------------------------------------------------------------

def _Answer(returncode: int, stdout: bytes, stderr: bytes = b"") -> prover.Ran:
    """A prover run that ended so, as Prover.run reports it."""
    finished = processes.Finished("prover", returncode, stdout, stderr)  # type: ignore[arg-type]
    return prover.Ran(finished, stdout, stderr.decode(), ())


@pytest.mark.parametrize("returncode, stdout", [
    (1, b"ok 0\n"),  # it crashed after answering
    (0, b""),  # it answered nothing
    (0, b"ok 0\nok 0\n"),  # it answered more than it was asked
])
def test_a_prover_that_fails_or_answers_the_wrong_count_is_a_failed_check(monkeypatch, returncode, stdout):
    monkeypatch.setattr(prover.Prover, "run", lambda self, request: _Answer(returncode, stdout, b"boom"))
    with pytest.raises(SwzcError) as caught:
        prover.prove([(parse_spec("grouped:8"), "2d", ((5, 7, 1, 0),))])
    message = caught.value.message
    assert caught.value.code == ExitCode.CHECK_FAILED and message.startswith("the swizzle prover failed: ")
    assert "boom" not in message  # what the prover printed is not repeated: it may be outside text
    assert ("exited with status 1" if returncode else "too few or too many answers") in message
    assert ("grid 5x7x1" in message) == (returncode == 1 and not stdout)


def test_a_failure_names_the_grid_and_the_block(monkeypatch):
    answers = b"ok 0\nfail block (1,0,0) maps out of the grid to (9,0,0)\n"
    monkeypatch.setattr(prover.Prover, "run", lambda self, request: _Answer(0, answers))
    (proof,) = prover.prove([(parse_spec("grouped:8"), "1d", ((8, 1, 1, 4), (12, 1, 1, 4)))])
    assert not proof.ok and not proof.identity
    assert proof.failure == "grid 12x1x1 n=4: block (1,0,0) maps out of the grid to (9,0,0)"


def test_answers_are_matched_to_their_jobs_in_order(monkeypatch):
    """Three jobs of one, two and one shapes: the third's answer is the fourth line."""
    answers = b"ok 1\nok 0\nok 1\nfail block (0,0,0) maps to (0,0,0), which another block already has\n"
    monkeypatch.setattr(prover.Prover, "run", lambda self, request: _Answer(0, answers))
    spec = parse_spec("grouped:8")
    first, second, third = prover.prove([(spec, "2d", ((1, 1, 1, 0),)), (spec, "2d", ((2, 2, 1, 0), (3, 3, 1, 0))),
                                         (spec, "2d", ((4, 4, 1, 0),))])
    assert first.ok and first.identity
    assert second.ok and not second.identity  # identity only when every shape says so
    assert not third.ok and third.failure.startswith("grid 4x4x1: block (0,0,0)")


def test_the_prover_is_asked_one_line_per_shape(monkeypatch):
    asked = []

    def record(self, request):
        asked.append(request)
        return _Answer(0, b"ok 0\n" * request.count(b"\n"))

    monkeypatch.setattr(prover.Prover, "run", record)
    spec = parse_spec("grouped:8")
    prover.prove([(spec, "2d", ((5, 7, 1, 0), (6, 2, 3, 0))), (parse_spec("colmajor"), "1d", ((12, 1, 1, 4),))])
    assert asked == [b"p 0 5 7 1 0\np 0 6 2 3 0\np 1 12 1 1 4\n"]


def test_no_jobs_builds_no_prover(monkeypatch):
    monkeypatch.setattr(prover, "build_prover", lambda uses: pytest.fail("a prover was built for nothing"))
    assert prover.prove([]) == []


def test_dispatch_maps_list_each_block_in_dispatch_order():
    grouped, colmajor = prover.dispatch_maps([(parse_spec("grouped:2"), "2d"), (parse_spec("colmajor"), "2d")], (3, 4, 1, 0))
    assert grouped.shape == colmajor.shape == (12, 3)
    assert [tuple(r) for r in colmajor[:5]] == [(0, 0, 0), (0, 1, 0), (0, 2, 0), (0, 3, 0), (1, 0, 0)]
    assert [tuple(r) for r in grouped[:4]] == [(0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0)]
    assert sorted(map(tuple, grouped)) == sorted((x, y, 0) for x in range(3) for y in range(4))


def test_dispatch_maps_stop_at_the_limit_and_cover_3d_grids():
    (full,) = prover.dispatch_maps([(parse_spec("colmajor"), "2d")], (3, 2, 2, 0))
    (first,) = prover.dispatch_maps([(parse_spec("colmajor"), "2d")], (3, 2, 2, 0), limit=5)
    assert full.shape == (12, 3) and {z for _, _, z in full} == {0, 1}
    assert first.shape == (5, 3) and (first == full[:5]).all()
    (beyond,) = prover.dispatch_maps([(parse_spec("colmajor"), "2d")], (3, 2, 2, 0), limit=100)
    assert (beyond == full).all()


def test_dispatch_maps_from_a_broken_prover_are_a_failed_check(monkeypatch):
    monkeypatch.setattr(prover.Prover, "run", lambda self, request: _Answer(0, b"\0" * 12))
    with pytest.raises(SwzcError) as caught:
        prover.dispatch_maps([(parse_spec("colmajor"), "2d")], (3, 2, 1, 0))
    assert caught.value.code == ExitCode.CHECK_FAILED and "failed to list block orders" in caught.value.message
    monkeypatch.setattr(prover.Prover, "run", lambda self, request: _Answer(2, b"\0" * 72))
    with pytest.raises(SwzcError):
        prover.dispatch_maps([(parse_spec("colmajor"), "2d")], (3, 2, 1, 0))


# ---- how the prover is built --------------------------------------------------------------------------------


def test_the_compiler_s_own_temporary_files_go_to_the_private_folder(tmp_path, monkeypatch):
    """The host compiler writes its intermediate files under TMPDIR: that is swzc's private folder, never the
    shared one another user could plant a file in."""
    log = tmp_path / "tmpdir.log"
    wrapper = tmp_path / "bin" / "recording-cxx"
    wrapper.parent.mkdir()
    real = " ".join(prover.host_compiler())
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$TMPDIR" >> "{log}"\nexec {real} "$@"\n')
    wrapper.chmod(0o700)
    monkeypatch.setenv("CXX", str(wrapper))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "shared"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    prover.build_prover.cache_clear()
    try:
        (proof,) = prover.prove([(parse_spec("grouped:3"), "2d", ((5, 7, 1, 0),))])
    finally:
        prover.build_prover.cache_clear()
    assert proof.ok
    folders = set(log.read_text().split())
    assert folders == {str(prover._private_folder())}, folders


def test_a_cache_key_is_128_bits_of_the_program_compiler_and_flags():
    key = prover.prover_key("int main() {}", ["c++"])
    assert len(key) == 32 and int(key, 16) >= 0
    assert key != prover.prover_key("int main() {}", ["g++"]) != prover.prover_key("int main() {}", ["c++"], ("-O0",))
    assert key == prover.prover_key("int main() {}", ["c++"], prover._PROVER_FLAGS)


def test_a_freshly_built_binary_is_held_by_a_descriptor_no_child_inherits(tmp_path, monkeypatch):
    import fcntl

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    prover.build_prover.cache_clear()
    try:
        built = prover.build_prover(((parse_spec("grouped:5"), "2d"),))
        for binary in (built.binary, built.sandbox):
            if binary is not None:
                assert fcntl.fcntl(binary.fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
    finally:
        prover.build_prover.cache_clear()


# ---- one run: the sandbox's report, and why a run failed ---------------------------------------------------


def _run_with(monkeypatch, stderr: bytes, returncode: int = 0, stdout: bytes = b"ok 0\n", sandbox: bool = True):
    """Prover.run with the process replaced: what it reads from a run that ended so, and the command it ran."""
    ran = []

    def fake(command, timeout, **options):
        ran.append(command)
        return processes.Finished("prover", returncode, stdout, stderr)

    monkeypatch.setattr(prover.processes, "run", fake)
    fd = os.open(__file__, os.O_RDONLY)
    other = os.open(__file__, os.O_RDONLY)
    run = prover.Prover(prover.Binary(fd, "/x/prover"), prover.Binary(other, "/x/sandbox") if sandbox else None).run(b"p 0 1 1 1 0\n")
    return run, ran[0]


def test_the_sandbox_s_line_says_the_layers_and_is_not_the_prover_s_output(monkeypatch):
    run, command = _run_with(monkeypatch, b"swzc-sandbox: namespaces,rlimits,no_new_privs,seccomp\nprover said\n")
    assert run.layers == ("namespaces", "rlimits", "no_new_privs", "seccomp") and run.stderr == "prover said\n"
    assert command[-1] == "rlimits,namespaces,seccomp" and run.ok
    run, _ = _run_with(monkeypatch, b"swzc-sandbox: none\n")
    assert run.layers == () and run.stderr == ""
    run, _ = _run_with(monkeypatch, b"something else first\nswzc-sandbox: seccomp\n", returncode=3)
    assert run.layers == () and run.stderr == "something else first\nswzc-sandbox: seccomp\n" and not run.ok


def test_without_the_launcher_the_shell_sets_only_the_layers_asked_for(monkeypatch):
    monkeypatch.setattr(prover, "SANDBOX_LAYERS", ("namespaces", "seccomp"))
    _, command = _run_with(monkeypatch, b"", sandbox=False)
    assert command[:2] == ["/bin/sh", "-c"] and "ulimit" not in command[2]
    assert command[2] == 'true && echo "swzc-sandbox: none" >&2 && exec "$0"'
    monkeypatch.setattr(prover, "SANDBOX_LAYERS", ("rlimits",))
    _, command = _run_with(monkeypatch, b"", sandbox=False)
    assert command[2] == (f"ulimit -v {prover.RUN_MEMORY_BYTES // 1024} && ulimit -t {prover.RUN_CPU_S} && ulimit -f 0 "
                          '&& ulimit -c 0 && echo "swzc-sandbox: rlimits" >&2 && exec "$0"')


def _failed(returncode, stdout=b"", stderr="", layers=("rlimits", "seccomp"), bodies=(), request="p 0 5 7 1 0\np 0 6 2 1 3\n"):
    finished = processes.Finished("prover", returncode, stdout, stderr.encode())  # type: ignore[arg-type]
    return prover.why_failed(prover.Ran(finished, stdout, stderr, layers), bodies, request)


def test_why_a_run_failed_in_words():
    assert _failed(-31) == ("killed by SIGSYS: it made a system call outside the sandbox (the body reached past integer "
                            "arithmetic) on grid 5x7x1 (sandbox: rlimits, seccomp)")
    assert _failed(-8, b"ok 0\n") == ("killed by SIGFPE: an arithmetic fault (a division by zero or an overflowing division) "
                                      "on grid 6x2x1 n=3 (sandbox: rlimits, seccomp)")
    assert _failed(-24, layers=()) == "killed by SIGXCPU: it ran past its 110 s of CPU time on grid 5x7x1 (sandbox: none)"
    assert _failed(-9) == ("killed by SIGKILL: it ran past its limits (110 s of CPU time, 4 GiB of memory) on grid 5x7x1 "
                           "(sandbox: rlimits, seccomp)")
    assert _failed(-6) == ("killed by SIGABRT: it aborted (out of its 4 GiB of memory, or a failed check) on grid 5x7x1 "
                           "(sandbox: rlimits, seccomp)")
    assert _failed(-7).startswith("killed by SIGBUS: it read or wrote outside its memory on grid 5x7x1")
    assert _failed(-4).startswith("killed by SIGILL: it reached a trap: undefined behaviour (a shift by the width or more")
    assert _failed(-25).startswith("killed by SIGXFSZ: it tried to write a file on grid 5x7x1")
    assert _failed(-65) == "killed by signal 65: a signal on grid 5x7x1 (sandbox: rlimits, seccomp)"
    assert _failed(0, b"ok 0\n") == "it gave too few or too many answers (sandbox: rlimits, seccomp)"
    assert _failed(0, b"ok 0\nok 0\nok 0\n") == "it gave too few or too many answers (sandbox: rlimits, seccomp)"
    assert _failed(2, b"ok 0\nok 0\n") == "exited with status 2 (sandbox: rlimits, seccomp)"
    assert _failed(1, stderr="p.cpp:3:1: runtime error: something new\n") == (
        "undefined behaviour (the sanitizer stopped it) on grid 5x7x1 (sandbox: rlimits, seccomp)")
    # a listing of block orders has no answer lines: no grid is named
    assert _failed(-11, b"\0" * 24, request="l 4\nd 0 2 2 1 0\n") == (
        "killed by SIGSEGV: it read or wrote outside its memory (sandbox: rlimits, seccomp)")


def test_a_sanitizer_report_is_mapped_to_the_body_and_its_line():
    bodies = (("custom:a#1", 10, 12), ("custom:b#2", 20, 20))
    report = "/p/prover-x.cpp:{}:7: runtime error: division by zero\n"
    for line, where in ((10, " in custom:a#1, line 1 of its body"), (12, " in custom:a#1, line 3 of its body"),
                        (20, " in custom:b#2, line 1 of its body"), (9, ""), (13, ""), (21, "")):
        assert _failed(1, stderr=report.format(line), bodies=bodies) == (
            f"undefined behaviour{where}: division by zero on grid 5x7x1 (sandbox: rlimits, seccomp)")
    long = "/p/prover-x.cpp:12:7: runtime error: signed integer overflow: " + "9" * 300 + "\n"
    assert _failed(1, stderr=long, bodies=bodies) == (  # at most 160 characters of the report after its kind
        f"undefined behaviour in custom:a#1, line 3 of its body: signed integer overflow: {'9' * 158} on grid 5x7x1 "
        "(sandbox: rlimits, seccomp)")


def test_each_outside_body_is_found_once_at_its_lines():
    from swzc.formulas.swizzles import CustomSwizzle

    a = CustomSwizzle("a", "unsigned x = block.x;\nreturn block;")
    b = CustomSwizzle("b", "return block;")
    uses = ((parse_spec("grouped:8"), "2d"), (a, "2d"), (a, "1d"), (b, "2d"))
    program = prover.host_program(list(uses))
    (name_a, first_a, last_a), (name_b, first_b, last_b) = prover.body_lines(program, uses)
    lines = program.split("\n")
    assert (name_a, name_b) == (a.name, b.name) and last_a == first_a + 1 and last_b == first_b
    assert lines[first_a - 1] == "unsigned x = block.x;" and lines[last_a - 1] == "return block;"
    assert lines[first_b - 1] == "return block;"


def test_without_the_launcher_the_prover_runs_from_its_descriptor_under_the_shell_s_limits(monkeypatch):
    """Where the launcher cannot be built, the shell runs the verified binary through /proc/self/fd, which the
    descriptor it inherits keeps open."""
    monkeypatch.setattr(prover, "_sandbox", lambda compiler: None)
    prover.build_prover.cache_clear()
    try:
        (proof,) = prover.prove([(parse_spec("grouped:8"), "2d", ((5, 7, 1, 0),))])
    finally:
        prover.build_prover.cache_clear()
    assert proof.ok and proof.sandbox == ("rlimits",)


def test_a_body_that_begins_with_a_blank_line_is_found_at_its_first_line():
    from swzc.formulas.swizzles import CustomSwizzle

    blank = CustomSwizzle("blank", "\nreturn block;")
    uses = ((blank, "2d"),)
    program = prover.host_program(list(uses))
    ((_, first, last),) = prover.body_lines(program, uses)
    lines = program.split("\n")
    assert lines[first - 1] == "" and lines[last - 1] == "return block;" and last == first + 1
