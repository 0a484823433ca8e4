"""One table of order kinds (swzc.formulas.steps.KINDS): a kind added there is parsed, listed, ranked, spliced
and proven with no other change; and the adapters own their C++ (swzc.formulas.adapters)."""

import json
from dataclasses import replace
from types import MappingProxyType

import pytest

from swzc.formulas import prove as prover
from swzc.formulas import steps
from swzc.formulas.adapters import Adapter
from swzc.formulas.swizzles import Step, SwizzleSpec, cxx_library, parse_spec
from swzc.model.rank import candidates
from swzc.target.hw import load

REVERSE = """\
// reverse: the tile grid walked from its last tile to its first.
static __device__ __forceinline__ unsigned swzc_reverse(unsigned p, unsigned m, unsigned n, unsigned) {
  return m * n - 1u - p;
}
"""


@pytest.fixture
def with_reverse(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    kind = steps.StepKind("reverse", None, "the tile grid walked backwards", REVERSE)
    monkeypatch.setattr(steps, "KINDS", MappingProxyType({**steps.KINDS, "reverse": kind}))
    prover.build_prover.cache_clear()
    yield kind
    prover.build_prover.cache_clear()


def test_a_kind_added_to_the_table_is_parsed_listed_ranked_spliced_and_proven(with_reverse):
    spec = parse_spec("reverse+xcd:8")
    assert spec == SwizzleSpec((Step("reverse"), Step("xcd", 8))) and spec.name == "reverse+xcd:8"
    assert spec.kind == "reverse+xcd" and spec.needs_tiles
    assert "reverse" in steps.known()
    assert REVERSE in cxx_library([(spec, "2d")])
    assert SwizzleSpec((Step("reverse"),)) in candidates("2d", (8, 8, 1), load("h200"))
    (proof,) = prover.prove([(SwizzleSpec((Step("reverse"),)), "2d", ((5, 7, 1, 0), (16, 16, 2, 0)))])
    assert proof.ok and not proof.identity


def test_a_kind_that_is_not_a_permutation_is_caught_by_the_prover(with_reverse, monkeypatch):
    broken = replace(with_reverse, cxx=REVERSE.replace("m * n - 1u - p", "(m * n - 1u - p) / 2u"))
    monkeypatch.setattr(steps, "KINDS", MappingProxyType({**steps.KINDS, "reverse": broken}))
    (proof,) = prover.prove([(SwizzleSpec((Step("reverse"),)), "2d", ((5, 7, 1, 0),))])
    assert not proof.ok


def test_the_ranked_parameters_come_from_the_table(monkeypatch):
    hw = load("h200")
    assert SwizzleSpec((Step("grouped", 6),)) in candidates("2d", (64, 64, 1), hw)
    grouped = replace(steps.KINDS["grouped"], ranked=(5,))
    monkeypatch.setattr(steps, "KINDS", MappingProxyType({**steps.KINDS, "grouped": grouped}))
    ranked = candidates("2d", (64, 64, 1), hw)
    assert SwizzleSpec((Step("grouped", 5),)) in ranked and SwizzleSpec((Step("grouped", 6),)) not in ranked


def test_an_unknown_kind_names_every_kind_of_the_table():
    with pytest.raises(ValueError, match=r"known: identity, colmajor, grouped:G, serpentine:G, hilbert:K, morton:K, "
                                         r"xcd:N, xcd:N:C \(joined with '\+'; ORDER@T gates one to grids of T tiles or more; ORDER/int divides in integer instructions\)"):
        parse_spec("spiral:4")


def test_adapters_are_strings_in_messages_and_json():
    assert Adapter.TWO_D == "2d" and f"{Adapter.ONE_D}" == "1d" and json.dumps([Adapter.LINEAR]) == '["linear"]'
    assert [a.value for a in Adapter] == ["2d", "1d", "linear"]


@pytest.mark.parametrize("adapter, hip, call", [
    (Adapter.TWO_D, False, "f(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y)"),
    (Adapter.ONE_D, False, "f(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, (unsigned)(cols))"),
    (Adapter.LINEAR, True, "f(hipBlockIdx_x, hipBlockIdx_y, hipBlockIdx_z, hipGridDim_x)"),
])
def test_each_adapter_owns_the_call_a_kernel_makes(adapter, hip, call):
    assert adapter.kernel_call("f", hip, "cols") == call
    assert adapter.parameters.count("unsigned") == call.count(",") + 1  # one parameter per argument
