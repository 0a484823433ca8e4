"""Formulas from outside the built-in family (an LLM's bodies): what the prover says of them, with a
counterexample a model can act on, and how they are spliced in and ranked like any built-in."""

import pytest
from support import GROUPED_8_BODY, NAIVE_GEMM

from swzc.analysis.kernels import analyze
from swzc.search.llm.restrict import check_body
from swzc.passes import block_swizzle
from swzc.search.proposers import KernelTask, Proposed, vet
from swzc.formulas.prove import prove
from swzc.model.rank import Ranking, rank
from swzc.frontend.source import load_bytes
from swzc.formulas.swizzles import CustomSwizzle, cxx_library, parse_spec
from swzc.analysis.context import FileContext

# Triton's GROUP_M order, written as a model would: G rows per group, columns walked inside the group.
GROUPED_8 = GROUPED_8_BODY

# The same without the clamp on the last group: wrong whenever G does not divide the rows.
GROUPED_8_NO_CLAMP = """\
const unsigned G = 8u;
const unsigned p = block.y * grid.x + block.x;
const unsigned per_group = G * grid.x;
const unsigned first_row = p / per_group * G;
const unsigned k = p % per_group;
return make_uint3(k / G, first_row + k % G, 0u);
"""

# An XCD remap p -> (p % 8) * q + p / 8: right only when 8 divides the block count.
XCD_NAIVE = """\
const unsigned total = grid.x * grid.y;
const unsigned p = block.y * grid.x + block.x;
const unsigned q = total / 8u;
const unsigned id = (p % 8u) * q + p / 8u;
return make_uint3(id % grid.x, id / grid.x, 0u);
"""

GEMM = NAIVE_GEMM


def custom(label, body):
    """A formula as swzc makes one from a reply: only once the body passed the safe subset."""
    checked = check_body(body)
    assert checked.ok, checked.violations
    return CustomSwizzle(label, checked.body)


def proof_of(body, adapter="2d", shapes=None):
    (proof,) = prove([(custom("t", body), adapter, shapes)])
    return proof


def test_a_clamped_group_order_is_a_permutation_on_every_sample_grid_but_not_accepted_on_samples():
    """It passes every sample grid, and is still not accepted: a body from outside the family could single out
    the grid it runs at, so only that grid, checked block by block, proves it."""
    proof = proof_of(GROUPED_8)
    assert not proof.ok and proof.sampled and not proof.identity
    assert proof.failure.startswith("proven only on sample grids (the file does not fix this kernel's grid; --grid gives it)")


def test_a_body_that_singles_out_a_large_grid_is_not_accepted_on_samples():
    """A grid past the enumeration limit is proven on samples for the family; a body from outside is refused
    there, whatever the samples say (this one collides only on the 16384 x 16384 grid)."""
    body = ("if (grid.x == 16384u && grid.y == 16384u && block.y == 8001u) { return make_uint3(block.x, 0u, 0u); }\n"
            "return block;")
    checked = check_body(body)
    assert checked.ok, checked.violations
    (proof,) = prove([(CustomSwizzle("t", checked.body), "2d", ((16384, 16384, 1, 0),))])
    assert not proof.ok and proof.sampled
    assert "grid 16384x16384x1 has more than 2^26 blocks" in proof.failure
    (family,) = prove([(parse_spec("grouped:8"), "2d", ((16384, 16384, 1, 0),))])
    assert family.ok and family.sampled  # the family's formulas hold on every grid: the samples confirm it


def test_the_group_order_without_its_clamp_is_caught_where_the_last_group_is_short():
    assert proof_of(GROUPED_8_NO_CLAMP, shapes=((4, 16, 1, 0),)).ok  # 8 divides the rows
    proof = proof_of(GROUPED_8_NO_CLAMP, shapes=((4, 12, 1, 0),))
    assert proof.failure == "grid 4x12x1: block (0,9,0) maps out of the grid to (0,12,0)"
    sampled = proof_of(GROUPED_8_NO_CLAMP)
    assert not sampled.ok and sampled.sampled


def test_the_naive_xcd_remap_passes_when_eight_divides_the_blocks_and_fails_otherwise():
    assert proof_of(XCD_NAIVE, shapes=((16, 4, 1, 0),)).ok
    failing = proof_of(XCD_NAIVE, shapes=((5, 3, 1, 0),))
    assert failing.failure == "grid 5x3x1: blocks (1,0,0) and (3,1,0) both map to (1,0,0); nothing maps to (3,1,0)"


def test_the_counterexample_names_both_blocks_and_a_missed_tile():
    proof = proof_of("return make_uint3(block.x / 2u * 2u, block.y, 0u);", shapes=((4, 2, 1, 0),))
    assert proof.failure == "grid 4x2x1: blocks (0,0,0) and (1,0,0) both map to (0,0,0); nothing maps to (1,0,0)"


def test_out_of_range_results_are_reported_as_such():
    proof = proof_of("return make_uint3(block.x + 1u, block.y, 0u);", shapes=((4, 2, 1, 0),))
    assert proof.failure == "grid 4x2x1: block (3,0,0) maps out of the grid to (4,0,0)"


@pytest.mark.parametrize("adapter, shape", [("1d", (24, 1, 1, 4)), ("linear", (7, 1, 1, 0))])
def test_a_body_sees_the_tile_grid_on_every_adapter(adapter, shape):
    # a transpose-free reversal of the columns is a permutation of any tile grid
    assert proof_of("return make_uint3(grid.x - 1u - block.x, block.y, 0u);", adapter, (shape,)).ok
    # a second row on a 1D grid does not exist: out of range
    assert not proof_of("return make_uint3(block.x, block.y + 1u, 0u);", adapter, (shape,)).ok


def test_the_1d_adapter_keeps_the_hardware_order_where_the_grid_is_not_a_tiling():
    assert proof_of("return make_uint3(grid.x - 1u - block.x, block.y, 0u);", "1d", ((25, 1, 1, 4),)).identity


def test_a_custom_formula_is_spliced_once_with_its_helpers_and_an_identity_is_refused():
    formula = custom("grouped-8", GROUPED_8)
    library = cxx_library([(formula, "2d"), (formula, "2d"), (parse_spec("grouped:8"), "2d")])
    assert library.count(f"uint3 {formula.body_function}(const uint3 swzc_v_block, const uint3 swzc_v_grid)") == 1
    assert library.count("swzc_min(unsigned long long a") == 1 and "swzc_grouped(" in library
    assert formula.name.startswith("custom:grouped-8#") and formula.function_name("2d") == formula.body_function + "_2d"
    assert "const unsigned swzc_v_G = 8u;" in library and "G = 8u" not in library.replace("swzc_v_G", "")
    with pytest.raises(ValueError):
        CustomSwizzle("bad name\n", "return block;")


def test_the_l2_model_ranks_a_custom_formula_like_the_built_in_it_equals():
    src = load_bytes("g.cu", GEMM.encode())
    analysis = analyze(FileContext(src))
    kernel = analysis.kernels[0]
    formula = custom("grouped-8", GROUPED_8)
    ranking = rank(FileContext(src), kernel, block_swizzle_hw(), {}, [parse_spec("identity"), parse_spec("grouped:8"), formula])
    assert isinstance(ranking, Ranking)
    rates = {p.candidate: p.l2_hit_rate for p in ranking.predictions}
    assert rates[formula.name] == pytest.approx(rates["grouped:8"]) and rates[formula.name] > rates["identity"] + 5


def test_vetting_rejects_an_identity_and_a_collision_and_predicts_a_permutation():
    src = load_bytes("g.cu", GEMM.encode())
    analysis = analyze(FileContext(src))
    hw = block_swizzle_hw()
    task = KernelTask(FileContext(src), analysis, 0, hw, rank(FileContext(src), analysis.kernels[0], hw, {}))
    same = vet(task, Proposed("llm", custom("same", "return block;")))
    assert same.status == "rejected" and "the identity on 256x256x1" in same.detail
    bad = vet(task, Proposed("llm", custom("bad", GROUPED_8_NO_CLAMP.replace("8u", "3u"))))
    assert bad.status == "rejected" and bad.detail.startswith("not a permutation: grid 256x256x1: block (")
    good = vet(task, Proposed("llm", custom("g8", GROUPED_8), note="groups of 8 rows"))
    assert good.status == "predicted" and good.predicted > 40 and good.note == "groups of 8 rows"
    broken = vet(task, Proposed("llm", CustomSwizzle("typo", "return make_uint3(swzc_v_block.x, swzc_v_block.y);")))
    assert broken.status == "rejected" and "does not compile" in broken.detail


def test_a_custom_formula_is_predicted_with_the_residency_the_family_was_ranked_with():
    """The family's ranking ran with one block per SM (as a compiler could have said); the LLM's body, which
    the ranking lacks, must be predicted with that residency too, not with the default of 8 blocks."""
    import dataclasses

    from swzc.search.proposers import predict

    src = load_bytes("g.cu", GEMM.encode())
    analysis = analyze(FileContext(src))
    hw = block_swizzle_hw()
    family = rank(FileContext(src), analysis.kernels[0], hw, {})
    assert isinstance(family, Ranking) and family.residency is not None and family.residency.blocks_per_cu == 8
    one = dataclasses.replace(family.residency, blocks_per_cu=1, source="given")
    fewer = rank(FileContext(src), analysis.kernels[0], hw, {}, running=one)
    assert isinstance(fewer, Ranking) and fewer.identity.l2_hit_rate != family.identity.l2_hit_rate
    formula = custom("mirror", "return make_uint3(grid.x - 1u - block.x, block.y, 0u);")  # shares like identity
    rate, _ = predict(KernelTask(FileContext(src), analysis, 0, hw, fewer), formula)
    alone = rank(FileContext(src), analysis.kernels[0], hw, {}, [parse_spec("identity"), formula], running=one)
    assert isinstance(alone, Ranking)
    assert rate == next(p.l2_hit_rate for p in alone.predictions if p.candidate == formula.name)
    default = rank(FileContext(src), analysis.kernels[0], hw, {}, [parse_spec("identity"), formula])
    assert isinstance(default, Ranking) and rate != next(p.l2_hit_rate for p in default.predictions if p.candidate == formula.name)


def block_swizzle_hw():
    from swzc.pipeline.driver import load_hw

    return load_hw("h200")
