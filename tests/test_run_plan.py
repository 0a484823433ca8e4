"""Options hold the user's knobs only (frozen, hashable); what a run decides per kernel is a RunPlan, built by the
choosers and read once by the rewrite."""

import dataclasses

from swzc.analysis.kernels import analyze
from swzc.analysis.context import FileContext
from swzc.pipeline.driver import Options, RunPlan, choose_by_model, load_hw, rewrite_source
from swzc.frontend.source import load_bytes
from swzc.formulas.swizzles import parse_spec

TWO_KERNELS = b"""\
__global__ void add(float* c, const float* a, const float* b) {
  int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  c[row * 2048 + col] = a[row * 2048 + col] + b[col * 2048 + row];
}
__global__ void mul(float* c, const float* a, const float* b) {
  int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  c[row * 2048 + col] = a[row * 2048 + col] * b[col * 2048 + row];
}
int main() {
  float *a, *b, *c;
  add<<<dim3(128, 128), dim3(16, 16)>>>(c, a, b);
  mul<<<dim3(128, 128), dim3(16, 16)>>>(c, a, b);
}
"""


def test_options_hold_only_the_user_s_knobs_and_are_hashable():
    h200 = load_hw("h200")
    a = Options(hw=h200, bindings={"n": 4, "T": "float"}, compile_flags=("-O2",))
    b = Options(hw=h200, bindings={"T": "float", "n": 4}, compile_flags=("-O2",))
    assert a == b and hash(a) == hash(b) and {a: "run"}[b] == "run"
    assert Options(hw=h200, bindings={"n": 5}) != a
    assert len({a, b, Options(hw=h200), Options(hw=load_hw("mi300x"))}) == 3
    knobs = {f.name for f in dataclasses.fields(Options)}
    assert not knobs & {"only", "declined", "notes", "ranked", "chosen", "searches"}
    assert dataclasses.fields(RunPlan) and all(f.name in {"only", "declined", "notes", "ranked", "chosen", "searches"}
                                               for f in dataclasses.fields(RunPlan))


def test_a_plan_picks_the_kernels_and_says_why_the_others_are_left():
    ctx = FileContext(load_bytes("k.cu", TWO_KERNELS))
    analysis = analyze(ctx)
    options = Options(hw=load_hw("h200"), compile=False)
    result = rewrite_source(ctx, analysis, options, RunPlan(only={0: parse_spec("grouped:8")}))
    add, mul = result.outcomes
    assert (add.status, add.swizzle) == ("rewritten", "grouped:8") and (mul.status, mul.reason) == ("untouched", "not selected")
    result = rewrite_source(ctx, analysis, options, RunPlan(chosen={1: parse_spec("grouped:4")}, declined={0: "measured 0.97x"},
                                                            notes={1: "the search's pick"}))
    add, mul = result.outcomes
    assert (add.status, add.reason) == ("declined", "measured 0.97x")
    assert (mul.status, mul.swizzle, mul.chosen_by) == ("rewritten", "grouped:4", "the search's pick")


def test_without_a_plan_the_model_chooses_and_a_builtin_run_plans_nothing():
    ctx = FileContext(load_bytes("k.cu", TWO_KERNELS))
    analysis = analyze(ctx)
    options = Options(hw=load_hw("h200"), compile=False)
    assert choose_by_model(ctx, analysis, options) == RunPlan()
    planned = rewrite_source(ctx, analysis, options, RunPlan())
    assert planned == rewrite_source(ctx, analysis, options)
    assert all(o.status == "declined" and "predicted L2 hit rate" in o.reason for o in planned.outcomes)
