"""The prover compiles the exact spliced C++ for the host; every built-in swizzle must be a bijection."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swzc import prove as prover
from swzc import swizzles
from swzc.swizzles import parse_spec

SPECS = [parse_spec(s) for s in (
    "colmajor", "grouped:1", "grouped:2", "grouped:3", "grouped:8", "grouped:64", "xcd:1", "xcd:3", "xcd:8",
    "xcd:8+grouped:8", "grouped:4+colmajor", "xcd:5+grouped:3+xcd:2", "hilbert:2", "hilbert:8",
    "xcd:8+hilbert:4",
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
    monkeypatch.setitem(swizzles.FORMULAS, "xcd", NAIVE_XCD)
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
])
def test_bad_specs(text, message):
    with pytest.raises(ValueError, match=message):
        parse_spec(text)


def test_spec_names_round_trip():
    for text in ("identity", "colmajor", "grouped:8", "xcd:8", "xcd:8+grouped:16"):
        assert parse_spec(text).name == text
