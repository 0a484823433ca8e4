"""What a rewrite result says about each kernel: its status and reason, the proof in words, the model's
table, and the notes; and what the pipeline runs only when it must (the model, the compile check, the
observation of a program)."""

import pytest

from swzc.pipeline import driver as pipeline
from swzc.analysis.kernels import analyze
from swzc.core.errors import ExitCode, SwzcError
from swzc.verify.observe import ObservedLaunch, ObservedRun
from swzc.pipeline.driver import Options, analyze_file, load_hw, parse_swizzle, rewrite_source
from swzc.verify.program import ProgramBench
from swzc.frontend.source import load_bytes
from swzc.analysis.context import FileContext


def rewritten(code: str, swizzle: str | None = "grouped:8", hw: str = "h200", **options):
    src = load_bytes("k.cu", code.encode())
    options.setdefault("compile", False)
    return rewrite_source(FileContext(src), analyze(FileContext(src)), Options(hw=load_hw(hw), swizzle=parse_swizzle(swizzle), **options))


def outcome(result, name: str):
    return next(o for o in result.outcomes if o.name == name)


TILE2D = """\
__global__ void tile2d(float* c, int ld) {
  c[(blockIdx.y * 16 + threadIdx.y) * ld + blockIdx.x * 16 + threadIdx.x] = 1.0f;
}
"""
DECODED = """\
__global__ void decoded(float* c, int tiles_n) {
  const int tm = blockIdx.x / tiles_n, tn = blockIdx.x % tiles_n;
  c[(tm * 16 + threadIdx.y) * 4096 + tn * 16 + threadIdx.x] = 1.0f;
}
"""
LINEAR = "__global__ void linear(float* x) { x[blockIdx.x * 256 + threadIdx.x] *= 2.0f; }\n"
HELPER_ONLY = """\
static __device__ int tile_row() { return blockIdx.y * 16 + threadIdx.y; }
static __device__ int tile_col() { return blockIdx.x * 16 + threadIdx.x; }
__global__ void through_helpers(float* c, int ld) { c[tile_row() * ld + tile_col()] = 1.0f; }
"""
TILE_LOOP = """\
__global__ void persistent(float* o, int T) {
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    o[(t / 8) * 64 + t % 8] = 1;
  }
}
"""
LAUNCHES = """\
void run(float* c) {
  tile2d<<<dim3(64, 32), dim3(16, 16)>>>(c, 1024);
  decoded<<<512, dim3(16, 16)>>>(c, 16);
  linear<<<1000, 256>>>(c);
}
"""


def test_the_reason_says_which_grid_and_which_reads_were_rewritten():
    result = rewritten(TILE2D + DECODED + LINEAR + HELPER_ONLY + LAUNCHES, "xcd:8", "mi300x")
    assert outcome(result, "tile2d").reason == "xcd:8 over the 2D grid (rows blockIdx.y); 2 block-index read(s) rewritten"
    assert outcome(result, "decoded").reason == \
        "xcd:8 over the 1D grid decoded into tiles of tiles_n columns; 2 block-index read(s) rewritten"
    assert outcome(result, "linear").reason == "xcd:8 over the 1D grid; 1 block-index read(s) rewritten"
    assert outcome(result, "through_helpers").reason == "xcd:8 over the 2D grid (rows blockIdx.y); helper(s) tile_col, tile_row rewritten"
    assert [outcome(result, n).adapter for n in ("tile2d", "decoded", "linear")] == ["2d", "1d", "linear"]


def test_the_reason_of_a_tile_loop_describes_the_loop():
    result = rewritten(TILE_LOOP)
    assert outcome(result, "persistent").reason == \
        "grouped:8 over the tile loop at line 2 (T tiles, decoded into tiles of 8 columns); 2 read(s) of t in its body rewritten"
    undecoded = rewritten(TILE_LOOP.replace("o[(t / 8) * 64 + t % 8]", "o[t]"), "xcd:8", "mi300x")
    assert outcome(undecoded, "persistent").reason == \
        "xcd:8 over the tile loop at line 2 (T tiles, one row of tiles); 1 read(s) of t in its body rewritten"


def test_the_proof_in_words_names_the_grids_or_the_tile_spaces():
    result = rewritten(TILE2D + DECODED + LINEAR + LAUNCHES, "xcd:8", "mi300x")
    assert outcome(result, "tile2d").proof == "bijection on grid 64x32x1"
    assert outcome(result, "decoded").proof == "bijection on grid 512x1x1 n=16"
    assert outcome(result, "linear").proof == "bijection on grid 1000x1x1"
    loop = rewritten(TILE_LOOP.replace("o[(t / 8) * 64 + t % 8]", "o[t]") + "int main() { persistent<<<132, 256>>>(0, 4096); }\n",
                     "xcd:8", "mi300x")
    assert outcome(loop, "persistent").proof == "bijection on tile space T=4096"


def test_kernels_that_are_not_rewritten_carry_no_proof_and_no_choice():
    result = rewritten(TILE2D.replace("blockIdx.y * 16 +", "cooperative_groups::this_grid().sync(), blockIdx.y * 16 +")
                       + "__global__ void none(float* x) { x[threadIdx.x] = 0; }\n")
    synced, none = outcome(result, "tile2d"), outcome(result, "none")
    assert synced.status == "refused" and (synced.proof, synced.chosen_by, synced.swizzle) == ("", "", None)
    assert synced.adapter == "2d"  # it reads the block index: the adapter it would take
    assert none.status == "untouched" and none.adapter is None and none.proof == ""


def test_with_a_requested_swizzle_the_model_is_not_run(monkeypatch):
    monkeypatch.setattr(pipeline, "rank", lambda *a: pytest.fail("the L2 model ran although --swizzle was given"))
    result = rewritten(TILE2D + LAUNCHES.replace("  decoded<<<512, dim3(16, 16)>>>(c, 16);\n  linear<<<1000, 256>>>(c);\n", ""))
    assert outcome(result, "tile2d").status == "rewritten" and outcome(result, "tile2d").candidates == ()


def test_without_a_swizzle_the_model_s_table_is_in_every_outcome():
    reads = TILE2D.replace("= 1.0f", "= c[blockIdx.x]")
    result = rewritten(reads + "void run(float* c) { tile2d<<<dim3(256, 256), dim3(16, 16)>>>(c, 4096); }\n", None)
    declined = outcome(result, "tile2d")
    assert declined.status == "declined" and [name for name, *_ in declined.candidates][:2] == ["identity", "colmajor"]
    assert all(hit == 100.0 for _, hit, _ in declined.candidates)


def test_nothing_to_rewrite_compiles_nothing(monkeypatch):
    monkeypatch.setattr(pipeline, "compile_check", lambda *a: pytest.fail("compiled a file that did not change"))
    result = rewritten("__global__ void none(float* x) { x[threadIdx.x] = 0; }\n", compile=True)
    assert result.compile is None and not result.changed


# ---- kernels nothing chose an order for ------------------------------------------------------------------

OPEN = """\
__global__ void open_grid(const float* A, float* C, int n) {
  C[(blockIdx.y * 16 + threadIdx.y) * n + blockIdx.x * 16 + threadIdx.x] = A[blockIdx.x];
}
"""
# the model cannot follow an index read from memory, whatever the launch
GATHER = """\
__global__ void gather(const int* idx, const float* A, float* C, int n) {
  C[(blockIdx.y * 16 + threadIdx.y) * n + blockIdx.x * 16 + threadIdx.x] = A[idx[blockIdx.x * 16 + threadIdx.x]];
}
"""


def test_an_unranked_kernel_lists_what_is_proven_and_how_to_choose():
    no_launch = outcome(rewritten(OPEN, None), "open_grid")
    assert no_launch.status == "unranked"
    assert "Proven on sample grids (its grid is not known): grouped:8, hilbert:8, colmajor, grouped:32, " in no_launch.reason
    assert "To choose: swzc rewrite k.cu --grid open_grid=X,Y --block open_grid=X,Y --set n=VALUE (or --bench-cmd to observe a run)" in no_launch.reason
    grid_only = outcome(rewritten(OPEN + "void run(float* C, int b) { open_grid<<<dim3(8, 8), dim3(b, b)>>>(0, C, 128); }\n", None),
                        "open_grid")
    assert "--grid open_grid=X,Y --block open_grid=X,Y" in grid_only.reason and "Proven on its grid" in grid_only.reason
    block_only = outcome(rewritten(OPEN + "int pick(int);\nvoid run(float* C, int g) { open_grid<<<dim3(pick(g), pick(g)), dim3(16, 16)>>>(0, C, 128); }\n", None),
                         "open_grid")
    assert "--grid open_grid=X,Y --block open_grid=X,Y" in block_only.reason
    known = outcome(rewritten(GATHER + "void run(int* i, float* C) { gather<<<dim3(8, 8), dim3(16, 16)>>>(i, 0, C, 128); }\n", None),
                    "gather")
    assert known.status == "unranked" and "Proven on its grid: grouped:8, hilbert:8, colmajor, grouped:32, grouped:4" in known.reason
    assert "To choose: swzc rewrite k.cu --bench (on a GPU: measures grouped:8, hilbert:8, colmajor, grouped:32), or force" in known.reason
    fewer = outcome(rewritten(GATHER + "void run(int* i, float* C) { gather<<<dim3(8, 8), dim3(16, 16)>>>(i, 0, C, 128); }\n", None,
                              max_iterations=2), "gather")
    assert "(on a GPU: measures grouped:8, hilbert:8)" in fewer.reason


def test_an_unranked_kernel_lists_only_orders_that_move_blocks():
    """On a grid two tiles wide, the Hilbert orders leave every block in place: only what moves blocks is listed."""
    narrow = outcome(rewritten(GATHER + "void run(int* i, float* C) { gather<<<dim3(2, 8), dim3(16, 16)>>>(i, 0, C, 128); }\n", None),
                     "gather")
    proven = narrow.reason.split("Proven on its grid: ", 1)[1].split(". To choose", 1)[0].split(", ")
    assert proven == ["grouped:8", "colmajor", "grouped:32", "grouped:4", "grouped:16", "grouped:64"]


# ---- errors and notes ------------------------------------------------------------------------------------

def test_a_file_nothing_in_which_parses_counts_its_other_errors(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text("__global__ void k(float* x) { x[blockIdx.x] = (; }\n__global__ void j(float* x) { x[0] = ); }\n")
    with pytest.raises(SwzcError) as caught:
        analyze_file(str(path))
    assert caught.value.code == ExitCode.BAD_INPUT and caught.value.message.endswith("(1 more error(s) in the file)")
    path.write_text("__global__ void k(float* x) { x[blockIdx.x] = (; }\n")
    with pytest.raises(SwzcError) as caught:
        analyze_file(str(path))
    assert "more error" not in caught.value.message


def test_a_file_with_one_kernel_clear_of_its_errors_is_analysed(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text("__global__ void k(float* x) { x[blockIdx.x] = (; }\n__global__ void ok(float* x) { x[blockIdx.x] = 1; }\n")
    _, analysis = analyze_file(str(path))
    assert [k.name for k in analysis.kernels] == ["ok", "k"] or {k.name for k in analysis.kernels} == {"ok", "k"}


def test_analyze_file_passes_the_bindings_and_the_launch_facts_on(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(OPEN + "void run(float* C) { open_grid<<<dim3(N / 16, N / 16), dim3(16, 16)>>>(0, C, N); }\n")
    _, analysis = analyze_file(str(path), {"N": 1024})
    assert analysis.kernels[0].launches[0].grid == (64, 64, 1)
    _, analysis = analyze_file(str(tmp_path / "k.cu"), facts=pipeline.parse_launch_facts(["open_grid=8,4"], ["open_grid=16,16"]))
    assert analysis.kernels[0].launches[0].grid == (8, 4, 1)


RUNTIME = """\
__global__ void gemm(const float* A, float* C, int n) {
  C[(blockIdx.y * 16 + threadIdx.y) * n + blockIdx.x * 16 + threadIdx.x] = A[blockIdx.x];
}
int main(int argc, char** argv) { gemm<<<dim3(argc, argc), dim3(16, 16)>>>(0, 0, argc); }
"""


def _observed(monkeypatch, launches: int, note: str = ""):
    seen = tuple(ObservedLaunch((8 * (i + 1), 8, 1), (16, 16, 1), 0, 1, (), (("n", 128),)) for i in range(launches))
    monkeypatch.setattr(pipeline, "observe_launches", lambda *a, **kw: ObservedRun("cupti", {"gemm": seen}, note))
    src = load_bytes("prog.cu", RUNTIME.encode())
    return pipeline.with_observed_launches(FileContext(src), analyze(FileContext(src)), ProgramBench("./prog"))


def test_observed_launches_are_listed_three_at_most(monkeypatch):
    _, notes = _observed(monkeypatch, 3)
    assert notes == ("gemm: launches observed with cupti: grid 8x8x1, block 16x16x1; grid 16x8x1, block 16x16x1; "
                     "grid 24x8x1, block 16x16x1",)
    _, notes = _observed(monkeypatch, 4, "2 launches of gemm were left out")
    assert notes[0].endswith("grid 24x8x1, block 16x16x1 …") and "32x8x1" not in notes[0]
    assert notes[1] == "2 launches of gemm were left out"


def test_a_program_run_replaces_the_file_s_launches_in_the_benchmarked_rewrite(monkeypatch):
    monkeypatch.setattr(pipeline, "observe_launches", lambda *a, **kw: ObservedRun(
        "cupti", {"gemm": (ObservedLaunch((64, 64, 1), (16, 16, 1), 0, 1, (), (("n", 1024),)),)}))
    seen = {}

    def bencher(ctx, analysis, index, rewrite_one, hw, spec, rounds, progress=None, program=None, flags=()):
        seen["grid"] = analysis.kernels[index].launches[0].grid
        raise SwzcError("stop here")

    monkeypatch.setattr(pipeline, "Bencher", bencher)
    src = load_bytes("prog.cu", RUNTIME.encode())
    result = pipeline.rewrite_benchmarked(FileContext(src), analyze(FileContext(src)), Options(hw=load_hw("h200"), compile=False, bench=True,
                                                                     program=ProgramBench("./prog")))
    assert seen["grid"] == (64, 64, 1)
    assert result.notes[0].startswith("gemm: launches observed with cupti: grid 64x64x1")


def test_the_library_compile_checks_a_rewrite_unless_told_not_to(tmp_path, monkeypatch):
    from swzc.target.compile import CompileReport

    checked = []
    monkeypatch.setattr(pipeline, "compile_check", lambda *a: checked.append(a) or CompileReport("ok", "nvcc k.cu"))
    path = tmp_path / "k.cu"
    path.write_text(TILE2D + "void run(float* c) { tile2d<<<dim3(64, 32), dim3(16, 16)>>>(c, 1024); }\n")
    result = pipeline.rewrite_file(str(path), Options(hw=load_hw("h200"), swizzle=parse_swizzle("grouped:8")))
    assert len(checked) == 1 and result.compile == CompileReport("ok", "nvcc k.cu")
    assert checked[0][1] == result.old and checked[0][2] == result.new
    pipeline.rewrite_file(str(path), Options(hw=load_hw("h200"), swizzle=parse_swizzle("grouped:8"), compile=False))
    assert len(checked) == 1
