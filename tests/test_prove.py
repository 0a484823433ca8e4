"""The prover compiles the exact spliced C++ for the host; every built-in swizzle must be a bijection.
Its cache runs nothing found on disk that swzc did not make."""

import errno
import hashlib
import os
import re
import shutil
import signal
import stat
import tempfile
from pathlib import Path

from dataclasses import replace
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swzc.core import cache

from swzc.formulas import prove as prover
from swzc.formulas import steps, swizzles
from swzc.formulas.swizzles import parse_spec

SPECS = [parse_spec(s) for s in (
    "colmajor", "grouped:1", "grouped:2", "grouped:3", "grouped:8", "grouped:64", "xcd:1", "xcd:3", "xcd:8",
    "xcd:8+grouped:8", "grouped:4+colmajor", "xcd:5+grouped:3+xcd:2", "hilbert:2", "hilbert:8",
    "xcd:8+hilbert:4", "morton:2", "morton:16", "xcd:8+morton:4", "serpentine:1", "serpentine:3", "serpentine:8",
    "xcd:8:4", "xcd:3:5", "xcd:8:4+grouped:8", "grouped:4+xcd:2:3", "serpentine:2+morton:4",
)]
USES = [(s, a) for s in SPECS for a in ("2d", "1d", "linear") if not (a == "linear" and s.needs_tiles)]
side = st.integers(min_value=1, max_value=97)


@settings(max_examples=150, deadline=None)
@given(gx=side, gy=side, gz=st.integers(1, 3), n=st.integers(1, 40), extra=st.integers(0, 3))
def test_every_builtin_swizzle_is_a_bijection(gx, gy, gz, n, extra):
    """2D/3D grids of any shape, 1D tilings m x n and 1D grids that are *not* a tiling (gx % n != 0)."""
    jobs = []
    for spec, adapter in USES:
        if adapter == "2d":
            shape = (gx, gy, gz, 0)
        elif adapter == "1d":
            shape = (gx * n + extra, 1, gz, n)
        else:
            shape = (gx * gy + extra, 1, 1, 0)
        jobs.append((spec, adapter, (shape,)))
    for proof in prover.prove(jobs):
        assert proof.ok, (proof.spec, proof.adapter, proof.failure)


def test_non_tiling_1d_grid_is_left_alone():
    (proof,) = prover.prove([(parse_spec("grouped:8"), "1d", ((101, 1, 1, 10),))])
    assert proof.ok and proof.identity


def test_sample_shapes_used_when_grid_unknown():
    (proof,) = prover.prove([(parse_spec("grouped:8"), "2d", None)])
    assert proof.ok and proof.sampled and not proof.identity
    assert any(x % 8 for x, *_ in proof.shapes) and len(proof.shapes) > 100


@pytest.mark.parametrize("spec,shape,identity", [
    ("grouped:8", (64, 1, 1, 0), True),  # one tile row: grouping changes nothing
    ("grouped:8", (1, 64, 1, 0), True),  # one tile column
    ("colmajor", (4, 4, 1, 0), False),
    ("xcd:8", (8, 1, 1, 0), True),  # fewer blocks than a round: each chiplet gets one
])
def test_identity_is_detected(spec, shape, identity):
    (proof,) = prover.prove([(parse_spec(spec), "2d", (shape,))])
    assert proof.ok and proof.identity is identity


NAIVE_XCD = """\
static __device__ __forceinline__ unsigned swzc_xcd(unsigned p, unsigned m, unsigned n, unsigned chiplets) {
  const unsigned total = m * n;
  return (p % chiplets) * (total / chiplets) + p / chiplets;  // wrong when chiplets does not divide total
}
"""


def test_prover_catches_the_naive_chiplet_remap(monkeypatch):
    """The shipped-bug form x * (T / N) + r is not a bijection when N does not divide T."""
    monkeypatch.setattr(steps, "KINDS", MappingProxyType({**steps.KINDS, "xcd": replace(steps.KINDS["xcd"], cxx=NAIVE_XCD)}))
    prover.build_prover.cache_clear()
    try:
        ok, bad = prover.prove([
            (parse_spec("xcd:8"), "linear", ((64, 1, 1, 0),)),
            (parse_spec("xcd:8"), "linear", ((100, 1, 1, 0),)),
        ])
    finally:
        prover.build_prover.cache_clear()
    assert ok.ok
    assert not bad.ok and "grid 100x1x1" in bad.failure


def test_spliced_text_is_the_proven_text():
    """One definition: the host program embeds exactly the library text that is spliced into kernels."""
    uses = [(parse_spec("xcd:8+grouped:8"), "2d"), (parse_spec("colmajor"), "1d")]
    assert swizzles.cxx_library(uses) in prover.host_program(uses)


@pytest.mark.parametrize("text,message", [
    ("grouped", "needs a parameter"),
    ("grouped:0", "between 1 and"),
    ("spiral", "unknown swizzle"),
    ("colmajor:2", "takes no parameter"),
    ("grouped:8+", "unknown swizzle"),
    ("hilbert:6", "power of two"),
    ("morton:6", "power of two"),
    ("morton:1", "power of two"),
    ("morton:2048", "power of two"),
    ("serpentine", "needs a parameter"),
    ("serpentine:0", "between 1 and"),
    ("grouped:8:2", "grouped takes one parameter"),
    ("hilbert:4:4", "hilbert takes one parameter"),
    ("colmajor:2:3", "takes no parameter"),
    ("xcd:8:0", "C must be between 1 and"),
    ("xcd:8:65537", "C must be between 1 and"),
    ("xcd:0:4", "N must be between 1 and"),
    ("xcd:8:4:2", "unknown swizzle"),
])
def test_bad_specs(text, message):
    with pytest.raises(ValueError, match=message):
        parse_spec(text)


def test_spec_names_round_trip():
    for text in ("identity", "colmajor", "grouped:8", "xcd:8", "xcd:8+grouped:16", "xcd:8:4", "xcd:8:4+grouped:8",
                 "morton:4", "serpentine:3", "xcd:8+morton:4"):
        assert parse_spec(text).name == text


def test_function_names_are_distinct_c_identifiers():
    """A chunk adds to the identifier without colliding: xcd:8:4 is not xcd:84."""
    texts = ("xcd:8", "xcd:84", "xcd:8:4", "xcd:84:1", "xcd:8:41", "xcd:8:4+grouped:8", "xcd:8+grouped:8",
             "morton:4", "hilbert:4", "serpentine:4", "grouped:4")
    names = [parse_spec(text).function_name(adapter) for text in texts for adapter in ("2d", "1d", "linear")]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) for name in names)
    assert parse_spec("xcd:8:4").function_name("2d") == "swzc_xcd8c4_2d"
    assert parse_spec("xcd:8").function_name("2d") == "swzc_xcd8_2d"


def test_the_chunked_remap_calls_its_own_formula_with_both_parameters():
    """xcd:N keeps its one-parameter call and its text; xcd:N:C brings the chunked formula alone."""
    assert "  p = swzc_xcd(p, m, n, 8u);\n" in parse_spec("xcd:8").adapter_cxx("linear")
    assert "  p = swzc_xcd_chunked(p, m, n, 8u, 4u);\n" in parse_spec("xcd:8:4").adapter_cxx("linear")
    chunked = swizzles.cxx_library([(parse_spec("xcd:8:4"), "linear")])
    assert steps.KINDS["xcd"].chunked_cxx in chunked and steps.KINDS["xcd"].cxx not in chunked


RAGGED = [(16, 16), (17, 33), (45, 37), (1, 50), (50, 1), (100, 3), (31, 64), (9, 129)]


@pytest.mark.parametrize("text", ["morton:16", "morton:4", "serpentine:3", "serpentine:7", "xcd:8:4", "xcd:8:4+grouped:8",
                                  "xcd:8+morton:4", "xcd:5:3+serpentine:2"])
def test_new_orders_are_bijections_on_ragged_grids(text):
    """Grids whose sides are not multiples of the panel, the group or the chiplet round, in every adapter."""
    spec = parse_spec(text)
    jobs = [(spec, "2d", tuple((cols, rows, 1, 0) for rows, cols in RAGGED)),
            (spec, "1d", tuple((rows * cols, 1, 1, cols) for rows, cols in RAGGED))]
    if not spec.needs_tiles:
        jobs.append((spec, "linear", tuple((rows * cols, 1, 1, 0) for rows, cols in RAGGED)))
    for proof in prover.prove(jobs):
        assert proof.ok and not proof.identity, (proof.spec, proof.adapter, proof.failure)


# ---- the prover cache: nothing found on disk is run unless swzc made it ------------------------------------


MARKER_SCRIPT = "#!/bin/sh\necho ran > '{marker}'\nwhile read line; do echo 'ok 0'; done\n"


def _plant(path: Path, marker: Path, stamp_key: str | None = None) -> None:
    """A fake prover that leaves a marker when run, and answers every question with 'bijection'."""
    data = MARKER_SCRIPT.format(marker=marker).encode()
    path.write_bytes(data)
    path.chmod(0o755)
    if stamp_key is not None:  # a stamp as swzc writes it: an attacker can compute it for their own file
        path.with_name(path.name + ".sha256").write_bytes(cache._stamp(f"prover-{stamp_key}", data))


def _programs(uses) -> tuple[str, str]:
    program = prover.host_program(list(uses))
    return hashlib.sha256(program.encode()).hexdigest()[:16], prover.prover_key(program, prover.host_compiler())


@pytest.fixture
def fresh_prover(monkeypatch):
    prover.build_prover.cache_clear()
    yield
    prover.build_prover.cache_clear()


GROUPED = ((parse_spec("grouped:8"), "2d"),)


def test_planted_prover_in_a_shared_temp_folder_never_runs(tmp_path, monkeypatch, fresh_prover):
    """HOME=/nonexistent, no XDG_CACHE_HOME: swzc used to fall back to the shared temp folder and run any
    prover-<hash> found there.  Another user can plant one under the predictable name."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("HOME", "/nonexistent")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    marker = tmp_path / "ran"
    old_name, key = _programs(GROUPED)
    (shared / "swzc").mkdir()
    for folder in (shared, shared / "swzc"):
        _plant(folder / f"prover-{old_name}", marker)
        _plant(folder / f"prover-{key}", marker, stamp_key=key)
    (proof,) = prover.prove([(parse_spec("grouped:8"), "2d", ((5, 7, 1, 0),))])
    assert proof.ok and not proof.identity  # a planted "ok 0" would have said so too: the marker tells
    assert not marker.exists()
    assert not os.path.exists("/nonexistent")  # no home folder is created for the cache


@pytest.mark.skipif(os.geteuid() != 0, reason="planting a file as another user needs root")
def test_planted_prover_owned_by_another_user_never_runs(tmp_path, monkeypatch, fresh_prover):
    """A cache folder others could write to (as another user would leave it), and entries in it that are
    not ours, stamp and all."""
    base = tmp_path / "cachebase"
    (base / "swzc").mkdir(parents=True)
    (base / "swzc").chmod(0o777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(base))
    marker = tmp_path / "ran"
    _, key = _programs(GROUPED)
    entry_path = base / "swzc" / f"prover-{key}"
    _plant(entry_path, marker, stamp_key=key)
    for path in (entry_path, entry_path.with_name(entry_path.name + ".sha256")):
        os.chown(path, 65534, 65534)
    (proof,) = prover.prove([(parse_spec("grouped:8"), "2d", ((5, 7, 1, 0),))])
    assert proof.ok and not marker.exists()
    assert stat.S_IMODE((base / "swzc").stat().st_mode) == 0o700  # ours: closed to others from now on
    assert entry_path.stat().st_uid == os.geteuid()  # the foreign entry was replaced by a built one
    # a whole cache folder that belongs to another user is not used at all
    prover.build_prover.cache_clear()
    shutil.rmtree(base / "swzc")
    (base / "swzc").mkdir(mode=0o777)
    os.chown(base / "swzc", 65534, 65534)
    _plant(base / "swzc" / f"prover-{key}", marker, stamp_key=key)
    (proof,) = prover.prove([(parse_spec("grouped:8"), "2d", ((5, 7, 1, 0),))])
    assert proof.ok and not marker.exists()


def test_corrupt_or_partial_cache_entries_are_rebuilt(tmp_path, monkeypatch, fresh_prover):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    job = [(parse_spec("grouped:8"), "2d", ((5, 7, 1, 0),))]
    assert prover.prove(job)[0].ok
    _, key = _programs(GROUPED)
    binary = tmp_path / "swzc" / f"prover-{key}"
    good = binary.read_bytes()
    for damage in (good[: len(good) // 2], b"\x7fELF garbage", good[:-1] + bytes([good[-1] ^ 1])):
        binary.write_bytes(damage)
        prover.build_prover.cache_clear()
        assert prover.prove(job)[0].ok
        assert binary.read_bytes() != damage
        assert (tmp_path / "swzc" / f"prover-{key}.sha256").read_bytes() == cache._stamp(f"prover-{key}", binary.read_bytes())
    # a stamp that does not match, and a FIFO where the binary should be (it must not block the run)
    (tmp_path / "swzc" / f"prover-{key}.sha256").write_text("nonsense\n")
    binary.unlink()
    os.mkfifo(binary)
    prover.build_prover.cache_clear()
    signal.alarm(60)
    try:
        assert prover.prove(job)[0].ok
    finally:
        signal.alarm(0)
    assert stat.S_ISREG(binary.stat().st_mode)


def test_a_failed_cache_write_leaves_no_partial_file(tmp_path, monkeypatch, fresh_prover):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cache = str(tmp_path / "swzc")
    real_write = os.write

    def full_disk(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(cache):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(prover.os, "write", full_disk)
    assert prover.prove([(parse_spec("grouped:8"), "2d", ((5, 7, 1, 0),))])[0].ok
    assert os.listdir(cache) == []  # no prover, no *.tmp


def test_the_prover_runs_from_the_bytes_it_checked(tmp_path, monkeypatch, fresh_prover):
    """The verified binary is run through its open descriptor: replacing the file afterwards changes nothing."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built = prover.build_prover(GROUPED)
    prover.build_prover.cache_clear()
    checked = prover.build_prover(GROUPED)
    assert checked.where.startswith(str(tmp_path / "swzc"))
    marker = tmp_path / "ran"
    os.unlink(checked.where)
    _plant(Path(checked.where), marker)
    run = checked.run(b"p 0 64 1 1 0\n")  # one tile row: the real prover says "identity" (ok 1)
    assert run.stdout == b"ok 1\n" and not marker.exists()
    del built
