"""Kernels whose grid is set at run time: the names that set it, the sweep of sizes, the gated order and its
proof, and what rewrite, analyze and suggest say of them."""

import json
from dataclasses import replace

import numpy as np
import pytest

from support import needs_nvcc

from swzc.analysis.context import FileContext
from swzc.analysis.kernels import analyze
from swzc.formulas import prove as proving
from swzc.formulas.prove import dispatch_maps, gate_shapes, prove
from swzc.formulas.swizzles import SwizzleSpec, parse_spec
from swzc.frontend import source
from swzc.model import sweep
from swzc.model.rank import MARGIN_POINTS, Ranking
from swzc.pipeline.driver import Options, load_hw, rank_kernels, rewrite_file
from swzc.search.proposers import EXPLORE, BuiltinProposer, KernelTask

# A naive GEMM, 32 x 8 blocks, sized by the launching function's parameters.
RUNTIME_GEMM = """\
__global__ void gemm(const float* A, const float* B, float* C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}
void run(const float* A, const float* B, float* C, int M, int N, int K) {
  dim3 block(32, 8);
  dim3 grid((N + 31) / 32, (M + 7) / 8);
  gemm<<<grid, block>>>(A, B, C, M, N, K);
}
"""

# Reads each element once and writes it once: no order can share anything.
RUNTIME_COPY = """\
__global__ void copy2d(const float* in, float* out, int w, int h) {
  int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 8 + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = 2.f * in[y * w + x];
}
void launch(const float* in, float* out, int w, int h) {
  copy2d<<<dim3((w + 31) / 32, (h + 7) / 8), dim3(32, 8)>>>(in, out, w, h);
}
"""


def _ctx(tmp_path, text: str, name: str = "k.cu") -> tuple[FileContext, object]:
    path = tmp_path / name
    path.write_text(text)
    ctx = FileContext(source.load(str(path)))
    return ctx, analyze(ctx)


@pytest.mark.parametrize("host, expected", [
    # parameters of the launching function, through a dim3 variable; the integer arguments join them
    ("void run(const float* A, float* C, int M, int N, int K) {\n  dim3 g((N + 15) / 16, (M + 15) / 16);\n"
     "  k<<<g, dim3(16, 16)>>>(A, C, M, N, K);\n}", ("N", "M", "K")),
    # read from the command line: the variable, not argv, is the size
    ("int main(int argc, char** argv) {\n  int n = atoi(argv[1]);\n  k<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(0, 0, n, n, n);\n}",
     ("n",)),
    # chosen at run time
    ("int main(int argc, char** argv) {\n  int n = argc > 1 ? atoi(argv[1]) : 1024;\n"
     "  k<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(0, 0, n, n, n);\n}", ("n",)),
    # a local computed from a parameter: the parameter is the size
    ("void run(int n) {\n  int tiles = n / 16;\n  k<<<dim3(tiles, tiles), dim3(16, 16)>>>(0, 0, n, n, 64);\n}", ("n",)),
    # a struct's field, named whole
    ("struct P { int n; };\nvoid run(P p) {\n  k<<<dim3(p.n / 16, p.n / 16), dim3(16, 16)>>>(0, 0, p.n, p.n, p.n);\n}",
     ("p.n",)),
    # a block set at run time: its names are not sizes (Launch.block_sizes holds them)
    ("void run(int n, int b) {\n  k<<<dim3(n / b, n / b), dim3(b, b)>>>(0, 0, n, n, n);\n}", ("n",)),
    # a dim3 nothing fixes: named by its fields
    ("void run(dim3 dims) {\n  k<<<dim3(dims.x / 16, dims.y / 16), dim3(16, 16)>>>(0, 0, 64, dims.x, 64);\n}",
     ("dims.x", "dims.y")),
    # a grid the file fixes: only the unknown integer argument
    ("void run(int K) {\n  k<<<dim3(64, 64), dim3(16, 16)>>>(0, 0, 1024, 1024, K);\n}", ("K",)),
    # a dim3 of several parts: every part's names, not only the first unknown one's
    ("void run(int M, int N, int K) {\n  dim3 g;\n  g.x = N / 16;\n  g.y = M / 16;\n  g.z = K;\n"
     "  k<<<g, dim3(16, 16)>>>(0, 0, 64, 64, 64);\n}", ("N", "M", "K")),
    # a choice whose two arms are the same: what the condition reads does not set the grid
    ("void run(int n, int flag) {\n  const int t = flag < 128 ? 16 : 16;\n  k<<<dim3(n / t, n / t), dim3(16, 16)>>>(0, 0, n, n, n);\n}",
     ("n",)),
    # a field an argument reads is a size, as a name is (the kernel's reads may need it)
    ("struct P { int m; };\nvoid run(int n, P p) {\n  k<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(0, 0, p.m, n, n);\n}", ("n", "p.m")),
    # a function nothing here defines: named as a call, which no size binds
    ("void run(int n) {\n  k<<<dim3(div_up(n, 16), div_up(n, 16)), dim3(16, 16)>>>(0, 0, n, n, n);\n}", ("n", "div_up()")),
    # a host function the file defines is followed: its argument is the size, not the local it sets
    ("int tiles(int n) { return n / 16; }\nvoid run(int n) {\n  const int t = tiles(n);\n"
     "  k<<<dim3(t, t), dim3(16, 16)>>>(0, 0, n, n, n);\n}", ("n",)),
])
def test_launch_sizes_name_what_sets_the_grid(tmp_path, host, expected):
    kernel = ("#include <cstdlib>\n__global__ void k(const float* A, float* C, int M, int N, int K) {\n"
              "  C[blockIdx.y * N + blockIdx.x] = A[blockIdx.x * K + blockIdx.y];\n}\n")
    _, analysis = _ctx(tmp_path, kernel + host)
    (launch,) = analysis.kernels[0].launches
    assert launch.sizes == expected


def test_sweep_gates_the_order_at_its_crossover(tmp_path):
    ctx, analysis = _ctx(tmp_path, RUNTIME_GEMM)
    hw = load_hw("h100")
    got = sweep.rank_over_sizes(ctx, analysis.kernels[0], hw)
    assert isinstance(got, Ranking) and got.sweep is not None
    s = got.sweep
    assert s.names == ("N", "M", "K")
    sizes = [pt.size for pt in s.points]
    assert sizes == sorted(sizes) and len(sizes) >= 3
    # from a few waves of blocks to past the L2
    first, last = s.points[0], s.points[-1]
    resident = got.residency.resident_blocks(hw)
    assert first.grid[0] * first.grid[1] >= sweep.MIN_WAVES * resident
    assert last.data_bytes >= sweep.PAST_L2 * hw.l2_bytes or len(s.points) == sweep.MAX_POINTS
    # the grid at each size is the file's launch evaluated there
    for pt in s.points:
        assert pt.grid == ((pt.size + 31) // 32, (pt.size + 7) // 8, 1)
    chosen = got.chosen
    assert chosen is not None and chosen.gate and s.crossover is not None
    name = chosen.ungated.name
    at = next(pt for pt in s.points if pt.size == s.crossover)
    assert chosen.gate == at.tiles
    for pt in s.points:  # it pays from the crossover up, and not at the size below it
        mine, base = pt.prediction(name), pt.ranking.identity
        if pt.size >= s.crossover:
            assert mine.l2_hit_rate >= base.l2_hit_rate + MARGIN_POINTS and mine.dram_bytes <= base.dram_bytes
    below = [pt for pt in s.points if pt.size < s.crossover]
    assert below and not sweep.pays(below[-1].prediction(name), below[-1].ranking.identity)
    assert dict(s.crossovers)[name] == s.crossover
    assert "predicted" in got.reason and f"{s.crossover}" in got.reason


def test_no_order_pays_on_a_kernel_with_nothing_to_share(tmp_path):
    ctx, analysis = _ctx(tmp_path, RUNTIME_COPY)
    got = rank_kernels(ctx, analysis, load_hw("h100"), {})[0]
    assert isinstance(got, Ranking) and got.chosen is None and got.sweep is not None
    assert got.reason.startswith("no order pays from any size up")
    # nothing pays at the largest size, so nothing has a crossover: the smaller sizes rank the original alone
    assert all([p.candidate for p in pt.ranking.predictions] == ["identity"] for pt in got.sweep.points[:-1])


def test_a_sweep_where_no_order_pays_measures_the_transposed_raster_on_a_gpu_only(tmp_path):
    # the model sees nothing to share in a copy; what a transposed raster gains there (write locality, DRAM
    # pages) only a GPU can tell, at each size swept, as for a kernel of one grid
    ctx, analysis = _ctx(tmp_path, RUNTIME_COPY)
    hw = load_hw("h100")
    ranking = rank_kernels(ctx, analysis, hw, {})[0]
    assert isinstance(ranking, Ranking) and ranking.sweep is not None and ranking.chosen is None
    offered = BuiltinProposer().candidates(KernelTask(ctx, analysis, 0, hw, ranking, measured=True))
    # gated from the first size whose written bytes exceed the L2: below it, what the copy writes fits there
    s = ranking.sweep
    past = next(pt for pt in s.points if pt.written_bytes > hw.l2_bytes)
    before = s.points[s.points.index(past) - 1]
    assert before.written_bytes <= hw.l2_bytes < past.written_bytes and s.writes_past_l2 == past.size
    assert past.written_bytes * 2 == pytest.approx(past.data_bytes, rel=0.01)  # one array read, one written, alike
    assert [spec for spec, _ in offered] == [EXPLORE.gated(past.tiles)] and past.tiles > 1
    assert past.size in sweep.measured_sizes(s) and before.size in sweep.measured_sizes(s)
    from swzc.pipeline.driver import _explored_from
    assert _explored_from(ranking) == f", gated from w = h = {past.size} up (what the kernel writes exceeds the L2 from there)"
    assert BuiltinProposer().candidates(KernelTask(ctx, analysis, 0, hw, ranking, measured=False)) == []
    # a sweep whose writes fit in the L2 at every size: measured ungated
    small = replace(ranking, sweep=replace(s, writes_past_l2=None))
    assert [spec for spec, _ in BuiltinProposer().candidates(KernelTask(ctx, analysis, 0, hw, small, measured=True))] == [EXPLORE]


def test_below_the_largest_size_only_orders_that_pay_there_are_ranked_in_one_prover_run(tmp_path, monkeypatch):
    ctx, analysis = _ctx(tmp_path, RUNTIME_GEMM)
    asked: list[bytes] = []
    real = proving.Prover.run
    monkeypatch.setattr(proving.Prover, "run", lambda self, request: asked.append(request) or real(self, request))
    surveyed: list[int] = []
    survey = sweep.survey
    monkeypatch.setattr(sweep, "survey", lambda ctx, k, *a: surveyed.append(k.launches[0].grid) or survey(ctx, k, *a))
    hw = load_hw("h100")
    got = sweep.rank_over_sizes(ctx, analysis.kernels[0], hw)
    assert isinstance(got, Ranking) and got.sweep is not None and got.chosen is not None
    # no footprint is made at a size of fewer than MIN_WAVES waves of blocks
    resident = got.residency.resident_blocks(hw)
    assert surveyed and all(g[0] * g[1] * g[2] >= sweep.MIN_WAVES * resident for g in surveyed)
    points = got.sweep.points
    largest = points[-1].ranking
    top = [p.candidate for p in largest.predictions if p.candidate != "identity"][: sweep.TOP_ORDERS]
    paying = {c for c in top if sweep.pays(largest.prediction(c), largest.identity)}
    assert got.chosen.ungated.name in paying and len(largest.predictions) > len(paying) + 1
    for pt in points[:-1]:
        assert {p.candidate for p in pt.ranking.predictions} == {"identity", *paying}
    # the block orders: the family's at the largest size, then every smaller size's at once
    lists = [r for r in asked if b"\nd " in r or r.startswith(b"d ")]
    assert len(lists) == 2 and lists[1].count(b"\nd ") == (len(points) - 1) * (len(paying) + 1)


def test_a_size_the_user_sets_is_not_swept(tmp_path):
    ctx, analysis = _ctx(tmp_path, RUNTIME_GEMM)
    analysis = analyze(ctx, {"K": 512})
    got = rank_kernels(ctx, analysis, load_hw("h100"), {"K": 512})[0]
    assert isinstance(got, Ranking) and got.sweep.names == ("N", "M")


def test_a_field_in_the_grid_is_swept_as_a_name_is(tmp_path):
    """A grid set by a struct's fields (`p.n`) is swept over them, to the same ranking as the same sizes read into
    locals first."""
    text = RUNTIME_GEMM.replace("void run(const float* A, const float* B, float* C, int M, int N, int K) {",
                                "struct P { int m, n, k; };\nvoid run(const float* A, const float* B, float* C, P p) {")
    text = text.replace("dim3 grid((N + 31) / 32, (M + 7) / 8);", "dim3 grid((p.n + 31) / 32, (p.m + 7) / 8);")
    text = text.replace("(A, B, C, M, N, K)", "(A, B, C, p.m, p.n, p.k)")
    ctx, analysis = _ctx(tmp_path, text)
    fields = rank_kernels(ctx, analysis, load_hw("h100"), {})[0]
    assert isinstance(fields, Ranking) and fields.sweep.names == ("p.n", "p.m", "p.k")
    # read into locals first, the locals are the sizes
    text = RUNTIME_GEMM.replace("void run(const float* A, const float* B, float* C, int M, int N, int K) {",
                                "struct P { int m, n, k; };\nvoid run(const float* A, const float* B, float* C, P p) {\n"
                                "  int M = p.m, N = p.n, K = p.k;")
    ctx, analysis = _ctx(tmp_path, text)
    got = rank_kernels(ctx, analysis, load_hw("h100"), {})[0]
    assert isinstance(got, Ranking) and got.sweep.names == ("N", "M", "K")
    assert [(pt.size, pt.grid) for pt in fields.sweep.points] == [(pt.size, pt.grid) for pt in got.sweep.points]
    assert fields.sweep.chosen == got.sweep.chosen and fields.predictions == got.predictions


def test_gate_parses_names_and_splices():
    spec = parse_spec("grouped:8@4096")
    assert spec == SwizzleSpec(parse_spec("grouped:8").steps, 4096) and spec.name == "grouped:8@4096"
    assert parse_spec(spec.name) == spec and spec.ungated.name == "grouped:8"
    cxx = spec.adapter_cxx("2d")
    assert "m * n < 4096ull" in cxx and spec.function_name("2d") != spec.ungated.function_name("2d")
    for bad in ("identity@8", "grouped:8@1", "grouped:8@", "grouped:8@x", "grouped:8@4@4", f"grouped:8@{(1 << 24) + 1}"):
        with pytest.raises(ValueError):
            parse_spec(bad)


@needs_nvcc
@pytest.mark.parametrize("adapter, below, at", [("2d", (63, 64, 1, 0), (64, 64, 1, 0)),
                                                ("1d", (63 * 64, 1, 1, 64), (64 * 64, 1, 1, 64))])
def test_gated_order_is_the_original_below_the_gate_and_the_order_from_it(adapter, below, at):
    spec = parse_spec("grouped:8@4096")
    for shape, same in ((below, False), (at, True)):
        gated, plain, identity = dispatch_maps([(spec, adapter), (spec.ungated, adapter), (SwizzleSpec(()), adapter)], shape)
        assert np.array_equal(gated, plain) == same
        assert np.array_equal(gated, identity) == (not same)


@pytest.mark.parametrize("adapter", ["2d", "1d", "linear"])
def test_gate_shapes_straddle_the_gate(adapter):
    shapes = gate_shapes(1000, adapter)
    tiles = {(gx * gy if adapter == "2d" else gx) for gx, gy, _, n in shapes if adapter != "1d" or gx % n == 0}
    assert {999, 1000, 1001} <= tiles or adapter == "1d"
    if adapter == "1d":
        assert any(gx < 1000 for gx, *_ in shapes) and any(gx == 1000 for gx, *_ in shapes if gx % _[-1] == 0)
        assert any(gx % n for gx, _, _, n in shapes)  # a grid that is not a tiling


@needs_nvcc
def test_a_gate_that_tests_the_block_is_caught_at_the_gate(monkeypatch):
    """A gate read per block (not per grid) is not a permutation above the gate: only the gate's grids show it
    (the sample grids are all below a gate of 4096 tiles)."""
    spec = parse_spec("grouped:8@4096")
    good = SwizzleSpec.adapter_cxx

    def broken(self, adapter):
        return good(self, adapter).replace("(unsigned long long)m * n < 4096ull", "p < 4096u")

    monkeypatch.setattr(SwizzleSpec, "adapter_cxx", broken)
    proving.build_prover.cache_clear()  # the prover of this spec is built again, from the broken text
    try:
        (proof,) = prove([(spec, "2d", None)])
    finally:
        monkeypatch.undo()
        proving.build_prover.cache_clear()
    assert not proof.ok and "grid" in proof.failure


@needs_nvcc
def test_rewrite_splices_the_gated_order_and_reports_the_sweep(tmp_path):
    path = tmp_path / "gemm.cu"
    path.write_text(RUNTIME_GEMM)
    result = rewrite_file(str(path), Options(hw=load_hw("h100"), compile=False))
    (outcome,) = result.outcomes
    assert outcome.status == "rewritten" and "@" in outcome.swizzle
    gate = int(outcome.swizzle.split("@")[1])
    assert f"m * n < {gate}ull" in result.new.decode()
    assert outcome.chosen_by.startswith("predicted over") and "not measured" in outcome.chosen_by
    assert f"{gate - 1}, {gate} and {gate + 1} tiles" in outcome.proof
    from swzc.report.rewrite import render_json
    doc = json.loads(render_json(result, None, False, None))
    sizes = doc["kernels"][0]["sizes"]
    assert sizes["predicted"] is True and sizes["gate_tiles"] == gate and sizes["chosen"] == outcome.swizzle
    assert len(sizes["points"]) >= 3 and sizes["crossovers"][outcome.swizzle.split("@")[0]] == sizes["crossover"]


def _at(size, speedup, status, accepted=False, upper=None):
    from swzc.verify.bench import Attempt
    return Attempt("grouped:8@4096", 90.0, True, accepted, speedup, speedup - 0.02, 0.005, 1.0, 1.0 / speedup, None, None,
                   f"{speedup:.3f}x", 0.0, status, None, size, upper if upper is not None else speedup + 0.02)


@pytest.mark.parametrize("speedups, statuses, accepted, said", [
    ((1.0, 1.08, 1.2), ("not faster", "accepted", "accepted"), True, "faster at the largest size"),
    ((0.93, 1.08, 1.2), ("slower", "accepted", "accepted"), False, "slower than the original beyond the noise at 1024"),
    ((1.0, 1.0, 1.005), ("not faster", "not faster", "not faster"), False, "not faster at the largest size"),
])
def test_a_candidate_is_accepted_only_if_slower_at_no_size_and_faster_at_the_largest(speedups, statuses, accepted, said):
    from swzc.verify.bench import _combined
    mine = [_at(size, s, st, st == "accepted") for size, s, st in zip((1024, 4096, 8192), speedups, statuses)]
    got = _combined(parse_spec("grouped:8@4096"), 90.0, mine, 3, 1.5)
    assert got.accepted == accepted and said in got.reason and got.size is None
    assert got.speedup == speedups[-1] and got.seconds == 1.5


def test_a_failed_check_at_any_size_fails_the_candidate():
    from swzc.verify.bench import Attempt, _combined
    failed = Attempt.unmeasured(parse_spec("grouped:8"), None, "outputs differ", "at 4096: outputs differ", 0.0)
    got = _combined(parse_spec("grouped:8"), None, [_at(1024, 1.0, "not faster"), failed], 3, 2.0)
    assert not got.accepted and got.status == "outputs differ" and "at 4096" in got.reason


def test_the_verdict_calls_slower_only_beyond_the_noise():
    from swzc.verify.accept import judge
    from swzc.verify.harness import Timing
    a = tuple(1.0 + 0.001 * (i % 3) for i in range(30))
    assert judge(Timing(a, tuple(x * 1.10 for x in a), a), True).slower  # 10 % slower
    assert not judge(Timing(a, tuple(x * 1.003 for x in a), a), True).slower  # inside 1 %
    assert not judge(Timing(a, tuple(x * 0.9 for x in a), a), True).slower


def test_the_size_table_has_a_row_per_size_and_a_column_per_order():
    from swzc.verify.bench import KernelBench, report_markdown, size_table
    other = [_at(size, s, st, st == "accepted") for size, s, st in ((1024, 0.95, "slower"), (8192, 1.1, "accepted"))]
    other = [a.__class__(**{**a.__dict__, "candidate": "colmajor"}) for a in other]
    rows = [_at(1024, 1.0, "not faster"), _at(8192, 1.2, "accepted", True), *other]
    result = KernelBench("gemm", 1, (), None, "", by_size=tuple(rows))
    table = size_table(result)
    assert table[0] == ["size", "grouped:8@4096", "colmajor"]
    assert table[1] == ["1024", "1.000x", "0.950x (slower)"] and table[2] == ["8192", "1.200x (faster)", "1.100x (faster)"]
    assert "| 1024 | 1.000x | 0.950x (slower) |" in report_markdown([result], {})
    # with the candidates' own table: each table's rows follow its own header
    text = report_markdown([KernelBench("gemm", 1, tuple(rows[1:2]), None, "", by_size=tuple(rows))], {}).splitlines()
    header = next(i for i, line in enumerate(text) if line.startswith("| candidate |"))
    assert text[header + 2].startswith("| grouped:8@4096 |")
    assert text.index("| 1024 | 1.000x | 0.950x (slower) |") < header


def test_a_block_set_at_run_time_is_given_a_stated_value(tmp_path):
    text = RUNTIME_GEMM.replace("void run(const float* A, const float* B, float* C, int M, int N, int K) {",
                                "void run(const float* A, const float* B, float* C, int M, int N, int K, int bs) {")
    text = text.replace("dim3 block(32, 8);", "dim3 block(bs, bs);").replace("(N + 31) / 32, (M + 7) / 8", "N / bs, M / bs")
    ctx, analysis = _ctx(tmp_path, text)
    (launch,) = analysis.kernels[0].launches
    assert launch.block_sizes == ("bs",) and launch.sizes == ("N", "M", "K")
    got = rank_kernels(ctx, analysis, load_hw("h100"), {})[0]
    assert isinstance(got, Ranking) and got.sweep.assumed == (("bs", 16),)
    assert got.footprint.block == (16, 16, 1) and "ranked with bs = 16, a 16x16x1 block" in got.reason
    # and suggest's one line says so beside the size its figures are at
    from click.testing import CliRunner

    from swzc.commands.cli import main

    said = CliRunner().invoke(main, ["suggest", "--hw", "h100", ctx.src.path]).stdout
    assert "the largest size swept; its block taken as bs = 16" in said, said
    # given by the user, it is not assumed
    analysis = analyze(ctx, {"bs": 32})
    got = rank_kernels(ctx, analysis, load_hw("h100"), {"bs": 32})[0]
    assert isinstance(got, Ranking) and got.footprint.block == (32, 32, 1) and not got.sweep.assumed


def test_a_dim3_size_is_swept_as_a_square(tmp_path):
    text = RUNTIME_GEMM.replace("void run(const float* A, const float* B, float* C, int M, int N, int K) {",
                                "void run(const float* A, const float* B, float* C, dim3 dims) {")
    text = text.replace("(N + 31) / 32, (M + 7) / 8", "(dims.x + 31) / 32, (dims.y + 7) / 8")
    text = text.replace("(A, B, C, M, N, K)", "(A, B, C, dims.y, dims.x, dims.x)")
    ctx, analysis = _ctx(tmp_path, text)
    assert analysis.kernels[0].launches[0].sizes == ("dims.x", "dims.y")
    got = rank_kernels(ctx, analysis, load_hw("h100"), {})[0]
    assert isinstance(got, Ranking) and got.sweep is not None and got.sweep.bindings(1024)["dims"] == (1024, 1024, 1)
    assert all(pt.grid == ((pt.size + 31) // 32, (pt.size + 7) // 8, 1) for pt in got.sweep.points)


def test_a_kernel_launched_with_several_grids_gets_an_order_that_holds_at_each(tmp_path):
    text = """\
__global__ void gemm(const float* A, const float* B, float* C, int n) {
  int row = blockIdx.y * 8 + threadIdx.y, col = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}
void run(float* A, float* B, float* C) {
  gemm<<<dim3(1024 / 32, 1024 / 8), dim3(32, 8)>>>(A, B, C, 1024);
  gemm<<<dim3(8192 / 32, 8192 / 8), dim3(32, 8)>>>(A, B, C, 8192);
}
"""
    ctx, analysis = _ctx(tmp_path, text)
    got = rank_kernels(ctx, analysis, load_hw("h100"), {})[0]
    assert isinstance(got, Ranking) and got.sweep is not None and got.sweep.names == ()
    assert [pt.grid for pt in got.sweep.points] == [(32, 128, 1), (256, 1024, 1)]  # smallest first, each launch's
    assert got.chosen is not None and got.chosen.gate == 256 * 1024  # the small grid keeps its order
    assert "the 2 grids it is launched with" in got.reason
    # one grid, launched twice: ranked as before
    ctx, analysis = _ctx(tmp_path, text.replace("8192", "1024"))
    got = rank_kernels(ctx, analysis, load_hw("h100"), {})[0]
    assert isinstance(got, Ranking) and got.sweep is None


@pytest.mark.parametrize("points, crossover, expected", [
    ([768, 1024, 1536, 2048, 3072, 4096, 6144], 3072, [768, 2048, 3072, 6144]),
    ([768, 1024, 1536, 2048, 3072, 4096, 6144], 768, [768, 2048, 4096, 6144]),
    ([768, 1024, 1536, 2048, 3072, 4096, 6144], 6144, [768, 3072, 4096, 6144]),
    ([768, 1024, 1536, 2048, 3072, 4096, 6144], None, [768, 2048, 4096, 6144]),
    ([2048, 4096, 8192], 4096, [2048, 4096, 8192]),
])
def test_the_loop_measures_the_first_size_both_sides_of_the_crossover_and_the_largest(points, crossover, expected):
    from swzc.model.rank import SizeSweep
    from types import SimpleNamespace
    chosen = parse_spec("grouped:8") if crossover else None
    fake = SizeSweep(("n",), tuple(SimpleNamespace(size=s) for s in points), (), chosen, crossover, "")
    assert sweep.measured_sizes(fake) == expected
    # where no order is chosen, both sides of the size the writes exceed the L2 at
    explored = SizeSweep(("n",), fake.points, (), None, None, "", writes_past_l2=crossover)
    assert sweep.measured_sizes(explored) == expected


def _prediction(name, hit, dram):
    from swzc.model.l2model import Prediction
    return Prediction(name, hit, dram, 1000, 100)


def test_an_order_that_moves_more_bytes_does_not_pay_whatever_its_hits():
    base = _prediction("identity", 60.0, 1e9)
    assert sweep.pays(_prediction("grouped:8", 70.0, 0.9e9), base)
    assert not sweep.pays(_prediction("grouped:8", 70.0, 1.1e9), base)  # more hits, more bytes
    assert not sweep.pays(_prediction("grouped:8", 64.0, 0.5e9), base)  # under the margin


def test_the_crossover_is_where_an_order_pays_at_every_larger_size():
    from types import SimpleNamespace
    from swzc.model.rank import SizePoint

    def point(size, hit):
        ranking = SimpleNamespace(identity=_prediction("identity", 50.0, 1e9),
                                  predictions=(_prediction("grouped:8", hit, 0.5e9), _prediction("identity", 50.0, 1e9)))
        ranking.prediction = lambda name, r=ranking: next((p for p in r.predictions if p.candidate == name), None)
        return SizePoint(size, (1, 1, 1), size, 0, ranking)

    # pays at 1024, not at 2048, then at 4096 and 8192: from 4096 up, not from 1024
    points = [point(1024, 60.0), point(2048, 52.0), point(4096, 70.0), point(8192, 80.0)]
    assert sweep.crossovers(points) == {"grouped:8": 4096}
    assert sweep.crossovers([*points[:3], point(8192, 51.0)]) == {"grouped:8": None}  # not at the largest


def test_a_grid_of_zero_blocks_at_small_sizes_does_not_end_the_sweep(tmp_path):
    text = """\
__global__ void copy2d(const float* in, float* out, int n) {
  int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 8 + threadIdx.y;
  out[y * n + x] = in[x * n + y];
}
void launch(const float* in, float* out, int n) { copy2d<<<dim3(n / 1024, n / 1024), dim3(32, 8)>>>(in, out, n); }
"""
    ctx, analysis = _ctx(tmp_path, text)
    got = rank_kernels(ctx, analysis, load_hw("h100"), {})[0]
    assert isinstance(got, Ranking) and got.sweep is not None and got.sweep.points[0].size >= 1024


def test_a_host_function_of_one_return_is_evaluated_in_a_launch(tmp_path):
    text = """\
static inline int cdiv(int a, int b) { return (a + b - 1) / b; }
template <typename T> __host__ __device__ constexpr T div_up(T a, T b) { return (a + b - 1) / b; }
__device__ int twice(int a) { return 2 * a; }
__global__ void k(const float* A, float* C, int n) { C[blockIdx.y * n + blockIdx.x] = A[blockIdx.x * n + blockIdx.y]; }
void run(const float* A, float* C, int n) {
  k<<<dim3(cdiv(100, 16), div_up(40, 16)), dim3(16, 16)>>>(A, C, n);
  k<<<dim3(cdiv(n, 16), div_up(n, 16)), dim3(16, 16)>>>(A, C, n);
  k<<<dim3(twice(8), 1), dim3(16, 16)>>>(A, C, n);
}
"""
    _, analysis = _ctx(tmp_path, text)
    fixed, sized, device = analysis.kernels[0].launches
    assert fixed.grid == (7, 3, 1)  # as C computes them
    assert sized.grid is None and sized.sizes == ("n",)  # a size through the function is still a size
    assert device.grid is None  # a function of the GPU's alone is not what a launch is sized with


def test_a_recursive_host_function_is_not_followed(tmp_path):
    text = """\
int f(int a) { return f(a) + f(a + 1) + f(a + 2) + f(a + 3) + f(a + 4) + f(a + 5); }
int g(int a) { return a > 0 ? g(a - 1) * 2 + g(a - 1) : 1; }
int h(int a) { return a + m; }
__global__ void k(const float* A, float* C, int n) { C[blockIdx.y * n + blockIdx.x] = A[blockIdx.x * n + blockIdx.y]; }
void run(const float* A, float* C, int n) {
  const int m = 7;
  k<<<dim3(f(n), g(40)), dim3(16, 16)>>>(A, C, n);
  k<<<dim3(h(1), 2), dim3(16, 16)>>>(A, C, n);
}
"""
    ctx, _ = _ctx(tmp_path, text)
    recursive, caller = analyze(ctx, {"n": 1024}).kernels[0].launches
    assert recursive.grid is None
    assert caller.grid is None  # a function does not see the names of the place it is called from


def test_a_launch_through_a_function_nothing_defines_says_which(tmp_path):
    text = RUNTIME_GEMM.replace("dim3 grid((N + 31) / 32, (M + 7) / 8);", "dim3 grid(div_up(N, 32), div_up(M, 8));")
    ctx, analysis = _ctx(tmp_path, text)
    got = rank_kernels(ctx, analysis, load_hw("h100"), {})[0]
    assert isinstance(got, str) and "calls div_up(), whose body is in neither this file nor a header" in got
    assert "--grid gemm=" in got
    # defined in the file: followed, and the kernel is swept
    ctx, analysis = _ctx(tmp_path, "static int div_up(int a, int b) { return (a + b - 1) / b; }\n" + text)
    assert isinstance(rank_kernels(ctx, analysis, load_hw("h100"), {})[0], Ranking)


GATHER = """\
__global__ void gather(const float* a, const int* idx, float* out, int n) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < n && col < n) out[row * n + col] = a[idx[row * n + col]];
}
"""


@pytest.mark.parametrize("host, where", [
    ("void run(const float* a, const int* idx, float* out, int n) {\n"
     "  gather<<<dim3(div_up(n, 16), div_up(n, 16)), dim3(16, 16)>>>(a, idx, out, n);\n}\n", "set at run time at line 7"),
    ("", "launched nowhere in this file"),
])
def test_a_kernel_whose_grid_no_size_decides_says_which_read_the_model_cannot_follow(tmp_path, host, where):
    """Whatever its grid, the model could not rank it: the read is named, not the grid."""
    ctx, analysis = _ctx(tmp_path, GATHER + host)
    got = rank_kernels(ctx, analysis, load_hw("h100"), {})[0]
    assert isinstance(got, str) and got.startswith("the model cannot follow 1 global read(s): line 4: a: an index read")
    assert f"whatever its grid, {where}" in got
    # and the way to choose is a run, not a grid alone
    path = tmp_path / "k.cu"
    (outcome,) = rewrite_file(str(path), Options(hw=load_hw("h100"), compile=False)).outcomes
    assert outcome.status == "unranked"
    assert f"To choose: swzc rewrite {path} --bench --grid gather=X,Y --block gather=X,Y (on a GPU)" in outcome.reason


def test_a_kernel_launched_nowhere_whose_reads_the_model_follows_asks_for_its_grid(tmp_path):
    """Its integer arguments stand in at 4096 for the probe: an unknown size is not an unfollowed read."""
    text = GATHER.replace("a[idx[row * n + col]]", "a[col * n + row]")
    ctx, analysis = _ctx(tmp_path, text)
    got = rank_kernels(ctx, analysis, load_hw("h100"), {})[0]
    assert isinstance(got, str) and got.startswith("no launch in this file fixes the grid (it is launched nowhere here by name: give it with --grid gather=X,Y and its block")


def test_a_block_that_names_nothing_swzc_evaluates_is_said_to_be_the_block(tmp_path):
    """The grid names its sizes, but the block is an expression of nothing swzc can evaluate or bind."""
    text = ("struct Opaque;\n__global__ void k(const float* a, float* c, int n) {\n"
            "  c[blockIdx.y * n + blockIdx.x] = a[blockIdx.x * n + blockIdx.y];\n}\n"
            "void run(const float* a, float* c, int n) {\n  k<<<dim3(n / 16, n / 16), dim3(sizeof(Opaque) * 8)>>>(a, c, n);\n}\n")
    ctx, analysis = _ctx(tmp_path, text)
    got = rank_kernels(ctx, analysis, load_hw("h100"), {})[0]
    assert isinstance(got, str) and got.startswith("its block at line 6 (dim3(sizeof(Opaque) * 8)) is what swzc does not evaluate")
