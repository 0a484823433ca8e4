"""The acceptance loop's choices, with the measurement replaced by a stand-in: which kernels it measures,
which candidates it tries and in what order, and what the rewrite does with the answer."""

import pytest
from support import SIZED

from swzc.pipeline import driver as pipeline
from swzc.analysis.kernels import analyze
from swzc.verify.bench import Attempt, KernelBench
from swzc.verify.calibrate import Observed
from swzc.core.errors import SwzcError
from swzc.pipeline.driver import Options, load_hw, parse_swizzle, rewrite_benchmarked, rewrite_file
from swzc.frontend.source import load_bytes
from swzc.analysis.context import FileContext
from swzc.formulas.swizzles import parse_spec
from swzc.model.sweep import kernel_at

FILE = b"""\
#define TILE 16
__global__ void gemm(const float* A, const float* B, float* C, int n) {
  const int row = blockIdx.y * TILE + threadIdx.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}
__global__ void open_grid(const float* A, float* C, int n) {
  const int row = blockIdx.y * TILE + threadIdx.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  C[row * n + col] = A[col * n + row];
}
__global__ void scale(float* x) { x[blockIdx.x * 256 + threadIdx.x] *= 2.0f; }
__global__ void synced(float* x) { cooperative_groups::this_grid().sync(); x[blockIdx.x] = 0; }
int pick(int);
void run(float* A, float* B, float* C, int m) {
  gemm<<<dim3(256, 256), dim3(TILE, TILE)>>>(A, B, C, 4096);
  open_grid<<<dim3(pick(m), pick(m)), dim3(TILE, TILE)>>>(A, C, m);
  scale<<<4096, 256>>>(C);
  synced<<<64, 256>>>(C);
}
"""

# the model's ranking of gemm's candidates above identity (59.2 %), best first (no other kind of order comes
# within 3 points of the best, so the order a GPU times them in is the ranking's)
ABOVE_IDENTITY = ["serpentine:64", "grouped:64", "grouped:48", "serpentine:32", "grouped:32", "grouped:24", "serpentine:16",
                  "grouped:96", "grouped:16", "hilbert:16", "morton:16", "grouped:12", "serpentine:8", "grouped:8",
                  "hilbert:8", "morton:8", "grouped:6", "serpentine:4", "grouped:128", "morton:4", "hilbert:4", "grouped:4",
                  "serpentine:2", "grouped:3", "grouped:192", "grouped:2"]
FAMILY = ["grouped:8", "hilbert:8", "colmajor", "grouped:32", "grouped:4", "hilbert:4", "grouped:16", "grouped:64"]


def both_forms(names):
    """A plan as the loop measures it: the first candidate, then it again in the integer division form, then the rest."""
    return names[:1] + [names[0] + "/int"] + names[1:]


@pytest.fixture
def measured(monkeypatch):
    """The Bencher replaced: it records what it was asked to measure and accepts every candidate, keeping the
    last (none for a kernel in `slower`); a kernel in `failing` cannot be benchmarked at all.  An order in the integer
    division form measures `Bencher.integer` times the speedup of its `/` form (1: a tie)."""
    asked = {}
    failing: set[str] = set()
    slower: set[str] = set()

    class Bencher:
        def __init__(self, ctx, analysis, index, rewrite, hw, spec_file=None, rounds=30, progress=None, program=None, flags=()):
            self.kernel = analysis.kernels[index]
            self.rewrite = rewrite
            self.attempts, self.by_size = [], []
            if self.kernel.name in failing:
                raise SwzcError("no launch spec for it")
            asked[self.kernel.name] = {"candidates": [], "rounds": rounds, "text": None, "prebuilt": []}

        def prebuild(self, formulas):
            asked[self.kernel.name]["prebuilt"] += [f.name for f in formulas]

        def calibrate(self, formulas, coalescer):
            asked[self.kernel.name]["calibrated"] = coalescer
            return Bencher.observations.get(self.kernel.name, Observed())

        def measure(self, formula, predicted, position=""):
            mine = asked[self.kernel.name]
            mine["candidates"].append((formula.name, predicted))
            mine["text"] = self.rewrite(formula)
            faster = self.kernel.name not in slower
            plain = Bencher.speedups.get(formula.divided(False).name, 1.2) if hasattr(formula, "divided") else 1.2
            speedup = (plain if faster else 0.9) * (Bencher.integer if getattr(formula, "integer", False) else 1.0)
            attempt = Attempt(formula.name, predicted, True, faster, speedup, 1.1 if faster else 0.8, 0.01,
                              1.0, 0.8, None, None, "measured", 0.1, "accepted" if faster else "not faster", formula)
            self.attempts.append(attempt)
            return attempt

        def close(self):
            pass

        def result(self):
            chosen = self.attempts[-1] if self.attempts and self.kernel.name not in slower else None
            return KernelBench(self.kernel.name, self.kernel.line, tuple(self.attempts), chosen and chosen.candidate,
                               f"measured {self.kernel.name}", status="accepted" if chosen else "not faster",
                               formula=chosen and chosen.formula)

    Bencher.observations = {}  # kernel name: what its original's instrumented run measured (nothing, unless given)
    Bencher.integer = 1.0
    Bencher.speedups = {}  # an order's `/` form: its speedup, where it is not 1.2
    monkeypatch.setattr(pipeline, "Bencher", Bencher)
    return asked, failing, slower


def run(options_changes=None, kernels=None):
    src = load_bytes("k.cu", FILE)
    options = Options(hw=load_hw("h200"), compile=False, bench=True, **(options_changes or {}))
    return rewrite_benchmarked(FileContext(src), analyze(FileContext(src)), options, kernels)


def outcomes(result):
    return {o.name: o for o in result.outcomes}


def test_the_loop_measures_the_model_s_candidates_above_identity_then_a_spread_of_the_family(measured):
    asked, _, _ = measured
    result = run({"max_iterations": 30})
    assert set(asked) == {"gemm", "open_grid"}  # scale: the model sees no gain; synced: refused
    # never identity, nor what only ties it; the first in both division forms (a tie: the rest with /)
    assert [c for c, _ in asked["gemm"]["candidates"]] == both_forms(ABOVE_IDENTITY)
    assert all(rate is not None and rate > 62.0 for _, rate in asked["gemm"]["candidates"])
    assert asked["open_grid"]["candidates"] == [(name, None) for name in both_forms(FAMILY)]
    assert result.benchmarked and [b.kernel for b in result.bench] == ["gemm", "open_grid"]
    kernels = outcomes(result)
    assert kernels["gemm"].status == "rewritten" and kernels["gemm"].swizzle == "grouped:2"
    assert kernels["gemm"].chosen_by == "measured gemm"
    assert kernels["open_grid"].status == "rewritten" and kernels["open_grid"].swizzle == "grouped:64"
    assert kernels["scale"].status == "declined" and "1D grid with no tile decode" in kernels["scale"].reason  # never modelled
    assert kernels["synced"].status == "refused"
    assert b"swzc_grouped2_2d" in result.new and b"swzc_grouped64_2d" in result.new


def test_each_kernel_gets_at_most_max_iterations_tries(measured):
    asked, _, _ = measured
    run({"max_iterations": 3})
    assert [c for c, _ in asked["gemm"]["candidates"]] == both_forms(ABOVE_IDENTITY[:3])  # the second form not counted
    assert [c for c, _ in asked["open_grid"]["candidates"]] == both_forms(FAMILY[:3])
    # built at once, before the first is measured
    assert asked["gemm"]["prebuilt"] == ABOVE_IDENTITY[:3] + [ABOVE_IDENTITY[0] + "/int"]


@pytest.mark.parametrize("integer", [1.05, 0.95])
def test_the_first_candidate_is_measured_in_both_division_forms_and_the_rest_in_the_faster(measured, integer, monkeypatch):
    """The integer form 5 % faster: the other candidates are measured (and built, in one batch) dividing in
    integer instructions, and the rewrite calls the integer form's functions; 5 % slower: with `/`.  The model's
    prediction for an integer form is its `/` form's, from the ranking (not ranked again)."""
    from swzc.search import proposers

    monkeypatch.setattr(proposers, "rank", lambda *args, **kwargs: pytest.fail("an order ranked again"))
    asked, _, _ = measured
    pipeline.Bencher.integer = integer
    result = run({"max_iterations": 3}, kernels={0})
    names = [c for c, _ in asked["gemm"]["candidates"]]
    if integer > 1:
        assert names == both_forms(ABOVE_IDENTITY[:1]) + [n + "/int" for n in ABOVE_IDENTITY[1:3]]
        assert asked["gemm"]["prebuilt"][-3:] == [n + "/int" for n in ABOVE_IDENTITY[:3]]  # one batch
        assert outcomes(result)["gemm"].swizzle == ABOVE_IDENTITY[2] + "/int"
        assert b"swzc_grouped48_int_2d(blockIdx.x" in result.new and b"swzc_divide(" in result.new
    else:
        assert names == both_forms(ABOVE_IDENTITY[:3])
        assert len(asked["gemm"]["prebuilt"]) == 4  # none built in the slower form
        assert outcomes(result)["gemm"].swizzle == ABOVE_IDENTITY[2] and b"swzc_divide" not in result.new
    (search,) = result.searches
    assert search.history[1].predicted == search.history[0].predicted is not None
    assert search.history[1].note == "serpentine:64 again, dividing in integer instructions"
    assert search.history[1].detail.startswith("measured")


def test_after_two_orders_of_a_kind_the_loop_searches_along_its_parameter(measured):
    """grouped:48 faster than grouped:64: the next grouped order below 48 comes before the ranking's next
    (serpentine:32); it was not in the plan built at once, so it is built when it is measured."""
    asked, _, _ = measured
    pipeline.Bencher.speedups = {"grouped:64": 1.21, "grouped:48": 1.22}
    result = run({"max_iterations": 4}, kernels={0})
    assert [c for c, _ in asked["gemm"]["candidates"]] == both_forms(["serpentine:64", "grouped:64", "grouped:48", "grouped:32"])
    assert "grouped:32" not in asked["gemm"]["prebuilt"]
    (search,) = result.searches
    assert search.history[-1].note == "the next parameter of the fastest order's kind, past the slower one"
    # equal times set no direction: the ranking's order
    pipeline.Bencher.speedups = {"grouped:64": 1.22, "grouped:48": 1.22}
    run({"max_iterations": 4}, kernels={0})
    assert [c for c, _ in asked["gemm"]["candidates"]] == both_forms(ABOVE_IDENTITY[:4])


def test_the_library_defaults_try_four_candidates_and_time_thirty_rounds(measured):
    asked, _, _ = measured
    run()
    # four, and the first in its other division form
    assert len(asked["gemm"]["candidates"]) == 5 and asked["gemm"]["rounds"] == 30


def test_a_requested_swizzle_is_the_only_candidate(measured):
    asked, _, _ = measured
    result = run({"swizzle": parse_swizzle("colmajor")})
    assert {name: a["candidates"] for name, a in asked.items()} == {
        "gemm": [("colmajor", None)], "open_grid": [("colmajor", None)]}  # scale: colmajor does not fit it
    assert "colmajor needs a tile grid" in outcomes(result)["scale"].reason
    assert {o.name: o.status for o in result.outcomes} == {"gemm": "rewritten", "open_grid": "rewritten",
                                                          "scale": "declined", "synced": "refused"}


def test_each_candidate_is_measured_on_a_rewrite_of_that_kernel_alone(measured):
    asked, _, _ = measured
    run({"max_iterations": 1})
    gemm, other = asked["gemm"]["text"], asked["open_grid"]["text"]
    assert b"swzc_serpentine64_2d" in gemm and b"open_grid(const float* A, float* C, int n) {\n  const uint3" not in gemm
    assert b"swzc_grouped8_2d" in other and b"const uint3 swzc_block = swzc_serpentine64_2d" not in other


def test_only_the_kernels_asked_for_are_measured(measured):
    asked, _, _ = measured
    result = run(kernels={1})
    assert set(asked) == {"open_grid"}
    assert outcomes(result)["gemm"].status == "untouched" and outcomes(result)["open_grid"].status == "rewritten"


def test_a_kernel_the_harness_cannot_run_is_declined_unmeasured(measured):
    asked, failing, _ = measured
    failing.add("gemm")
    result = run()
    kernel = outcomes(result)["gemm"]
    assert kernel.status == "declined" and kernel.reason == "not benchmarked: no launch spec for it (or use --no-bench)"
    assert outcomes(result)["open_grid"].status == "rewritten"


def test_a_kernel_no_candidate_speeds_up_is_declined_with_the_measurement(measured):
    asked, _, slower = measured
    slower.add("open_grid")
    result = run()
    kernel = outcomes(result)["open_grid"]
    assert kernel.status == "declined" and kernel.reason == "measured open_grid"
    assert b"open_grid(const float* A, float* C, int n) {\n  const int row = blockIdx.y" in result.new


def test_rewrite_file_benchmarks_only_when_asked(tmp_path, measured):
    asked, _, _ = measured
    path = tmp_path / "k.cu"
    path.write_bytes(FILE)
    result = rewrite_file(str(path), Options(hw=load_hw("h200"), compile=False))
    assert asked == {} and not result.benchmarked
    assert rewrite_file(str(path), Options(hw=load_hw("h200"), compile=False, bench=True)).benchmarked and asked


class ScriptedClient:
    """An LLM client that answers from a list of bodies, recording what it was asked."""

    def __init__(self, bodies):
        self.bodies = list(bodies)
        self.asked = []

    def ask(self, messages):
        from swzc.search.llm.client import Exchange, SwizzleReply

        self.asked.append(messages)
        body = self.bodies.pop(0)
        reply = SwizzleReply(name=f"try-{len(self.asked)}", expectation="shares B", lessons="", body=body)
        return reply, Exchange(tuple(messages), body, reply.model_dump(), None, "replay", 1, None, None, 0.0)


GROUPED_4 = """const unsigned G = 4u;
const unsigned p = block.y * grid.x + block.x;
const unsigned first_row = p / (G * grid.x) * G;
const unsigned rows = min(grid.y - first_row, G);
const unsigned k = p % (G * grid.x);
return make_uint3(k / rows, first_row + k % rows, 0u);"""


def test_under_both_the_llm_s_proven_candidates_are_measured_after_the_family_s_and_see_their_results(measured):
    from swzc.search.llm.proposer import LlmProposer

    asked, _, _ = measured
    client = ScriptedClient(["return make_uint3(block.x + 1u, block.y, 0u);", GROUPED_4])
    result = run({"max_iterations": 2, "proposer": "both", "llm": LlmProposer(client)}, kernels={0})
    names = [name for name, _ in asked["gemm"]["candidates"]]
    assert names[:3] == both_forms(ABOVE_IDENTITY[:2]) and len(names) == 4 and names[3].startswith("custom:try-2#")
    first_prompt = client.asked[0][1]["content"]
    assert "grouped:64 (from builtin): accepted: measured 1.200x" in first_prompt  # the family's measured results
    second_prompt = client.asked[1][1]["content"]
    assert "custom:try-1#" in second_prompt and "maps out of the grid" in second_prompt
    (search,) = result.searches
    assert [(t.proposer, t.status) for t in search.history] == [("builtin", "accepted")] * 3 + [
        ("llm", "rejected"), ("llm", "accepted")]
    gemm = outcomes(result)["gemm"]
    assert gemm.status == "rewritten" and gemm.swizzle.startswith("custom:try-2#")  # the fake keeps the last accepted
    assert [t.kernel for t in result.transcripts] == ["gemm"] and len(result.transcripts[0].exchanges) == 2
    assert result.transcripts[0].exchanges[0].verdict.startswith("custom:try-1#") and "rejected" in result.transcripts[0].exchanges[0].verdict




@pytest.mark.parametrize("observed", [None, Observed(spread=0.0, running=4224)], ids=["as ranked", "calibrated"])
def test_a_kernel_sized_at_run_time_is_measured_at_several_sizes_with_gated_orders(monkeypatch, observed):
    """Calibrated (crisp waves, four times the blocks at once the model's default gives), the crossover moves: the loop
    measures at the sizes that span the new gate."""
    asked = {} if observed is None else {"observed": observed}

    class SizedBencher:
        def __init__(self, ctx, sizes, rewrite, hw, spec_file=None, rounds=30, progress=None, flags=()):
            asked["sizes"] = asked["first_sizes"] = [(s.size, s.kernel.launches[0].grid) for s in sizes]
            asked["candidates"] = []
            self.rewrite, self.attempts, self.closed, self.by_size = rewrite, [], False, []
            asked["bencher"] = self

        def prebuild(self, formulas):
            asked["prebuilt"] = [f.name for f in formulas]

        def calibrate(self, formulas, coalescer):
            asked["calibrated"] = coalescer
            return asked.get("observed", Observed())

        def at_sizes(self, sizes):
            asked["sizes"] = [(s.size, s.kernel.launches[0].grid) for s in sizes]

        def measure(self, formula, predicted, position=""):
            asked["candidates"].append(formula.name)
            asked.setdefault("predicted", []).append(predicted)
            asked.setdefault("text", self.rewrite(formula))
            attempt = Attempt(formula.name, predicted, True, True, 1.2, 1.1, 0.01, 1.0, 0.8, None, None, "measured", 0.1,
                              "accepted", formula)
            self.attempts.append(attempt)
            return attempt

        def close(self):
            self.closed = True

        def result(self):
            a = self.attempts[0]
            return KernelBench("gemm_rt", 1, tuple(self.attempts), a.candidate, "measured at 3 sizes", status="accepted",
                               formula=a.formula)

    monkeypatch.setattr(pipeline, "SizedBencher", SizedBencher)
    src = load_bytes("k.cu", SIZED)
    ctx = FileContext(src)
    result = rewrite_benchmarked(ctx, analyze(ctx), Options(hw=load_hw("h100"), compile=False, bench=True, max_iterations=3))
    sizes = [size for size, _ in asked["sizes"]]
    assert len(sizes) == 4 and sizes == sorted(sizes)
    assert all(grid == (size // 32, size // 8, 1) for size, grid in asked["sizes"])  # the launch at each size
    # gated at their crossovers; the first in both division forms (a tie: the rest with /)
    assert asked["candidates"][1] == asked["candidates"][0] + "/int"
    assert asked["predicted"][0] is not None and asked["predicted"][1] == asked["predicted"][0]  # the model's, for both
    assert asked["candidates"] and all("@" in name for name in asked["candidates"])
    gate = int(asked["candidates"][0].split("@")[1])
    tiles = [(size // 32) * (size // 8) for size in sizes]
    assert tiles[0] < gate <= tiles[-1]  # the sizes span the first candidate's gate
    assert asked["bencher"].closed
    # built at once, before the first was measured
    assert asked["prebuilt"] == asked["candidates"][:1] + asked["candidates"][2:] + asked["candidates"][1:2]
    (outcome,) = result.outcomes
    assert outcome.status == "rewritten" and outcome.swizzle == asked["candidates"][0]
    assert asked["calibrated"] is False  # not staged: no coalescer's share to measure
    assert gate == (36864 if observed is None else 147456)  # the sizes span the gate (above), the calibrated one too
    assert (asked["sizes"] == asked["first_sizes"]) is (observed is None)


def test_the_sized_loop_builds_in_one_batch_stops_at_a_slower_size_and_profiles_only_what_it_accepts(monkeypatch):
    """The loop's fixed costs: every planned candidate is compiled in one batch with the original and the
    harnesses; a candidate slower beyond the noise at one size is not run at the larger ones (it cannot be
    accepted); the profiler runs only on a candidate accepted at the largest size."""
    from swzc.verify import bench
    from swzc.verify.harness import HarnessResult, Timing

    batches, ran, profiled = [], [], []

    def compile_each(self, jobs):
        batches.append([out.name for _, out in jobs])
        return [out for _, out in jobs]

    speed = {"b1": 1.25, "b2": 1.0, "b3": 0.8}  # candidate time over the original's: slower, the same, faster

    def run_harness(built, rounds=30):
        tag = built.b.name.split(".")[-2]
        ran.append((tag, built.harness.name))
        base = tuple(1.0 + 0.001 * (i % 3) for i in range(rounds))
        return HarnessResult(True, "", Timing(base, tuple(t * speed[tag] for t in base), base))

    monkeypatch.setattr(bench.Builder, "compile_each", compile_each)
    monkeypatch.setattr(bench, "run_harness", run_harness)
    monkeypatch.setattr(bench, "profile", lambda built, variant: profiled.append(variant) or (50.0, 1e6))
    monkeypatch.setattr(bench, "gpu_vendor", lambda: "nvidia")
    src = load_bytes("k.cu", SIZED)
    ctx = FileContext(src)
    kernel = analyze(ctx).kernels[0]
    hw = load_hw("h100")
    sizes = [bench.Size(size, kernel_at(ctx, kernel, {"n": size})) for size in (1024, 2048, 4096)]
    loop = bench.SizedBencher(ctx, sizes, lambda formula: b"// " + formula.name.encode(), hw, rounds=9)
    try:
        slow, same, fast = parse_spec("grouped:8"), parse_spec("hilbert:8"), parse_spec("colmajor")
        loop.prebuild([slow, same, fast])
        first = loop.measure(slow, None)
        level = loop.measure(same, None)
        second = loop.measure(fast, None)
    finally:
        loop.close()
    assert len(batches) == 1  # one batch: both candidates, the original and a harness per size
    assert batches[0][:4] == ["k.b1.so", "k.b2.so", "k.b3.so", "k.a.so"] and len(batches[0]) == 4 + len(sizes)
    assert [tag for tag, _ in ran] == ["b1"] + ["b2"] * 3 + ["b3"] * 3  # b1 stopped at its first (slower) size
    assert not level.accepted and level.l2_hit_rate is None  # run at every size, not profiled
    assert not first.accepted and "slower" in first.reason and [a.size for a in loop.by_size if a.candidate == "grouped:8"] == [1024]
    assert second.accepted and profiled == ["a", "b"]  # the original and the accepted candidate, once each
    assert second.l2_hit_rate == 50.0 and first.l2_hit_rate is None
    # a candidate that cannot be spliced fails its own attempt, and the others are built all the same
    def rewrite(formula):
        if formula.name == "grouped:8":
            raise SwzcError("not spliced")
        return b"// " + formula.name.encode()

    broken = bench.SizedBencher(ctx, sizes, rewrite, hw, rounds=9)
    try:
        broken.prebuild([slow, fast])
        assert broken.measure(slow, None).reason == "not spliced" and broken.measure(fast, None).speedup is not None
    finally:
        broken.close()
    # a study of the orders (bench/sizes) runs a slower candidate at every size all the same
    ran.clear()
    study = bench.SizedBencher(ctx, sizes, lambda formula: b"// " + formula.name.encode(), hw, rounds=9, every_size=True)
    try:
        assert not study.measure(slow, None).accepted
    finally:
        study.close()
    assert [tag for tag, _ in ran] == ["b1"] * 3


def test_a_sized_loop_moved_to_other_sizes_builds_their_harnesses_or_stays_where_it_was(monkeypatch):
    """After a calibrated ranking moves the crossover: the new sizes' harnesses are built (the libraries kept), the
    original is profiled again at a new largest size, and a size that cannot be planned or whose harness does not
    build leaves the loop at its sizes, saying why."""
    from swzc.verify import bench
    from swzc.verify.harness import HarnessResult, Timing

    batches, ran, failing = [], [], set()

    def compile_each(self, jobs):
        batches.append([out.name for _, out in jobs])
        return [SwzcError(f"{out.name} did not build") if out.name in failing else out for _, out in jobs]

    def run_harness(built, rounds=30):
        ran.append(built.harness.name)
        base = tuple(1.0 + 0.001 * (i % 3) for i in range(rounds))
        return HarnessResult(True, "", Timing(base, tuple(t * 0.8 for t in base), base))

    monkeypatch.setattr(bench.Builder, "compile_each", compile_each)
    monkeypatch.setattr(bench, "run_harness", run_harness)
    monkeypatch.setattr(bench, "profile", lambda built, variant: (50.0, 1e6))
    monkeypatch.setattr(bench, "gpu_vendor", lambda: "nvidia")
    src = load_bytes("k.cu", SIZED)
    ctx = FileContext(src)
    kernel = analyze(ctx).kernels[0]
    at = lambda *ns: [bench.Size(n, kernel_at(ctx, kernel, {"n": n})) for n in ns]  # noqa: E731
    loop = bench.SizedBencher(ctx, at(1024, 2048, 4096), lambda formula: b"// " + formula.name.encode(), load_hw("h100"), rounds=9)
    try:
        fast = parse_spec("colmajor")
        loop.prebuild([fast])
        loop.baseline_hit, loop.baseline_dram = 40.0, 2e6  # as the calibration's profile of the original left them
        assert loop.at_sizes(at(1024, 2048, 4096)) == "" and len(batches) == 1  # the same sizes: nothing to build
        assert loop.at_sizes(at(1024, 3072, 8192)) == ""
        assert batches[-1] == ["k.harnessr1.0", "k.harnessr1.1", "k.harnessr1.2"]  # the harnesses alone
        assert [s.size for s in loop.sizes] == [1024, 3072, 8192] and loop.baseline_hit is None
        assert loop.measure(fast, None).accepted and ran == ["k.harnessr1.0", "k.harnessr1.1", "k.harnessr1.2"]
        failing.add("k.harnessr2.1")
        said = loop.at_sizes(at(1024, 2048, 8192))
        assert "k.harnessr2.1 did not build" in said and [s.size for s in loop.sizes] == [1024, 3072, 8192]
        monkeypatch.setattr(bench, "plan_launch", lambda ctx, kernel, spec: (_ for _ in ()).throw(SwzcError("no grid at 16")))
        assert "no grid at 16" in loop.at_sizes(at(16, 8192)) and [s.size for s in loop.sizes] == [1024, 3072, 8192]
        ran.clear()
        assert loop.measure(parse_spec("grouped:8"), None).accepted and ran == ["k.harnessr1.0", "k.harnessr1.1", "k.harnessr1.2"]
    finally:
        loop.close()


def test_the_loop_ranks_again_with_what_the_original_s_instrumented_run_measured(measured):
    """gemm does not stage its reads: crisp waves alone change its model.  The candidates the loop measures
    carry the calibrated predictions, and the report records what was measured."""
    from swzc.verify.bench import report_json, report_markdown

    asked, _, _ = measured
    plain = run({"max_iterations": 30}, kernels={0})
    before = dict(asked["gemm"]["candidates"])
    pipeline.Bencher.observations["gemm"] = Observed(spread=0.0, merged_share=None, hit_rate=59.0, dram_bytes=3e8)
    calibrated = run({"max_iterations": 30}, kernels={0})
    after = dict(asked["gemm"]["candidates"])
    assert asked["gemm"]["calibrated"] is False  # the H200 has a coalescer, but gemm does not stage its reads
    assert any(abs(after[name] - before[name]) > 0.5 for name in after if name in before)
    (bench,) = calibrated.bench
    assert bench.calibration is not None and bench.calibration.crisp_waves and bench.calibration.spread == 0.0
    assert outcomes(calibrated)["gemm"].candidates != outcomes(plain)["gemm"].candidates  # the report's predictions too
    assert plain.bench[0].calibration is not None and not plain.bench[0].calibration.crisp_waves  # nothing measured
    assert "waves not measured" in plain.bench[0].calibration.text()
    meta = {"file": "k.cu", "device": "GPU"}
    assert "Calibration (one instrumented run of the original): later waves' spread 0.00 lifetimes: the model ran " \
           "with crisp waves" in report_markdown([bench], meta)
    assert '"crisp_waves": true' in report_json([bench], meta)
    from swzc.report.picture import measured_html
    from swzc.report.rewrite import render_text

    assert "calibration: later waves' spread 0.00 lifetimes: the model ran with crisp waves" in render_text(calibrated, False)
    assert "Calibration (one instrumented run of the original): later waves&#x27; spread 0.00" in "".join(measured_html(bench))


def test_an_order_given_with_swizzle_is_measured_without_calibrating(measured):
    asked, _, _ = measured
    result = run({"swizzle": parse_spec("grouped:8")}, kernels={0})
    assert "calibrated" not in asked["gemm"] and result.bench[0].calibration is None


def test_no_calibration_leaves_the_model_s_defaults(measured):
    asked, _, _ = measured
    pipeline.Bencher.observations["gemm"] = Observed(spread=0.0)
    result = run({"max_iterations": 2, "calibrate": False}, kernels={0})
    assert "calibrated" not in asked["gemm"] and result.bench[0].calibration is None


def _tried(name, status, speedup, by_size=()):
    from swzc.search.proposers import Tried

    return Tried(name, "builtin", status, "measured", parse_spec(name), None, speedup, by_size=by_size)


@pytest.mark.parametrize("plain, integer, faster", [
    # the bf16 WMMA GEMM on an H100: `/` slower at the first size, the integer form accepted
    (("measured", 0.921, ((3072, 0.921),)),
     ("accepted", 1.026, ((3072, 1.008), (4096, 1.012), (6144, 1.015), (8192, 1.026))), True),
    # the transpose: both accepted, the integer form 0.3 % ahead at the largest size but behind over the four
    (("accepted", 1.033, ((1536, 0.964), (4096, 1.006), (6144, 1.028), (8192, 1.033))),
     ("accepted", 1.036, ((1536, 0.930), (4096, 0.993), (6144, 1.027), (8192, 1.036))), False),
    # a naive GEMM: neither accepted, each stopped where it was slower; over the sizes both ran at, `/` is ahead
    (("measured", 0.966, ((768, 0.997), (2048, 1.000), (3072, 0.966))),
     ("measured", 0.958, ((768, 1.020), (2048, 0.958))), False),
    (("measured", 0.966, ((768, 0.997), (2048, 1.000), (3072, 0.966))),
     ("measured", 0.990, ((768, 1.020), (2048, 0.990))), True),
    # behind over the sizes, but the only form that can be accepted (`/` not faster at the largest size)
    (("measured", 1.005, ((1536, 1.000), (8192, 1.005))), ("accepted", 1.020, ((1536, 0.970), (8192, 1.020))), True),
    # one size (a fixed grid): the speedups; a tie keeps `/`
    (("accepted", 1.10, ()), ("accepted", 1.12, ()), True),
    (("accepted", 1.10, ()), ("accepted", 1.10, ()), False),
    (("accepted", 1.10, ((1, 1.10),)), ("accepted", 1.10, ((1, 1.10),)), False),
])
def test_the_faster_division_form_is_judged_over_the_sizes_both_forms_ran_at(plain, integer, faster):
    from swzc.search.proposers import _faster_form

    history = [_tried("grouped:8@1024", *plain), _tried("grouped:8@1024/int", *integer)]
    assert _faster_form(parse_spec("grouped:8@1024"), history) is faster
    assert _faster_form(parse_spec("grouped:8@1024"), history[:1]) is False  # the other form not measured yet


BF16 = ["serpentine:16@1024", "grouped:16@1024", "grouped:12@2304", "serpentine:8@2304", "grouped:8@1024", "grouped:6@8192",
        "colmajor", "grouped:24@8192", "grouped:32@8192"]


@pytest.mark.parametrize("measured_so_far, expected", [
    # the bf16 WMMA GEMM on an H100: the integer form won, grouped:16 then grouped:12 faster: on to grouped:8
    ([("serpentine:16@1024", "measured", 0.918), ("serpentine:16@1024/int", "accepted", 1.025),
      ("grouped:16@1024/int", "accepted", 1.031), ("grouped:12@2304/int", "accepted", 1.034)], "grouped:8@1024/int"),
    # and on, while it gets faster
    ([("serpentine:16@1024/int", "accepted", 1.025), ("grouped:16@1024/int", "accepted", 1.031),
      ("grouped:12@2304/int", "accepted", 1.034), ("grouped:8@1024/int", "accepted", 1.039)], "grouped:6@8192/int"),
    # grouped:8 slower than grouped:12: slower on both sides, the ranking's next
    ([("serpentine:16@1024/int", "accepted", 1.025), ("grouped:16@1024/int", "accepted", 1.031),
      ("grouped:12@2304/int", "accepted", 1.034), ("grouped:8@1024/int", "accepted", 1.030)], "serpentine:8@2304/int"),
    # slower on both sides, though not next to it: the search rests (grouped:12 comes as the ranking's next)
    ([("grouped:8@1024", "accepted", 1.03), ("grouped:16@1024", "accepted", 1.04), ("grouped:32@8192", "accepted", 1.02)],
     "grouped:12@2304"),
    # upwards, where the larger parameter was faster
    ([("grouped:12@2304", "accepted", 1.03), ("grouped:16@1024", "accepted", 1.04)], "grouped:24@8192"),
    # no candidate of the kind beyond the fastest (serpentine:4 is not one): the ranking's next
    ([("serpentine:8@2304", "accepted", 1.05), ("serpentine:16@1024", "accepted", 1.02)], "grouped:16@1024"),
    ([("grouped:8@1024", "accepted", 1.03), ("grouped:6@8192", "accepted", 1.04)], "grouped:16@1024"),
    # one order of the kind, or none slower: no direction
    ([("grouped:12@2304", "accepted", 1.04), ("serpentine:8@2304", "accepted", 1.03)], "grouped:16@1024"),
    ([("grouped:12@2304", "accepted", 1.04), ("grouped:16@1024", "accepted", 1.04)], "serpentine:8@2304"),
    # the fastest is not accepted: nothing to search around
    ([("grouped:12@2304", "measured", 1.04), ("grouped:16@1024", "measured", 1.02)], "serpentine:8@2304"),
    # the other form's measurements set no direction for this one
    ([("grouped:12@2304/int", "accepted", 1.04), ("grouped:16@1024/int", "accepted", 1.02), ("grouped:16@1024", "accepted", 1.0)],
     "grouped:12@2304"),
])
def test_the_built_in_proposer_steps_along_the_parameter_away_from_the_slower_order(measured_so_far, expected, monkeypatch):
    from types import SimpleNamespace

    from swzc.search.proposers import BuiltinProposer

    proposer = BuiltinProposer()
    monkeypatch.setattr(proposer, "candidates", lambda task: [(parse_spec(n), None) for n in BF16])
    history = [_tried(name, status, speedup) for name, status, speedup in measured_so_far]
    for form in (BF16[0], BF16[0] + "/int"):  # the first candidate, measured in both forms first (0.9x where not given)
        if all(t.name != form for t in history):
            history.insert(0, _tried(form, "measured", 0.9))
    got = proposer.propose(SimpleNamespace(measured=True, adapter="2d"), history)
    assert got.formula.name == expected
