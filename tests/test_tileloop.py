"""Persistent tile loops: detection, the splice inside the loop, the proof over the tile space, what is refused;
and the two rules of the rewrite itself (no copied side effects, no rewritten helper with external linkage)."""

import re
import subprocess

import pytest
from support import ROOT, has_gpu, needs_nvcc

from swzc.analysis.kernels import analyze
from swzc.frontend.evaluate import expression_of
from swzc.passes import block_swizzle
from swzc.pipeline.driver import Options, load_hw, parse_swizzle, rewrite_source
from swzc.frontend.source import load_bytes
from swzc.analysis.splice_safety import side_effect
from swzc.analysis.context import FileContext

PERSISTENT = """
#define CDIV(a, b) (((a) + (b) - 1) / (b))
__global__ void k(const float* in, float* out, int m, int n) {
  const int tiles_n = CDIV(n, 64);
  for (int tile = blockIdx.x; tile < CDIV(m, 64) * tiles_n; tile += gridDim.x) {
    const int tm = tile / tiles_n;
    const int tn = tile % tiles_n;
    out[(tm * 64 + threadIdx.y) * n + tn * 64 + threadIdx.x] = in[(tm * 64 + threadIdx.y) * n + tn * 64 + threadIdx.x];
  }
}
int main() { k<<<132, dim3(64, 4)>>>(0, 0, 16384, 16384); }
"""


def analysed(code: str, path: str = "t.cu", **bindings):
    analysis = analyze(FileContext(load_bytes(path, code.encode())), bindings)
    return analysis, analysis.kernels[0]


def rewritten(code: str, swizzle: str | None = "grouped:8", hw: str = "h200", path: str = "t.cu"):
    src = load_bytes(path, code.encode())
    options = Options(hw=load_hw(hw), swizzle=parse_swizzle(swizzle), compile=False)
    return rewrite_source(FileContext(src), analyze(FileContext(src)), options)


def refusal_reason(code: str) -> str:
    analysis, _ = analysed(code)
    decision = block_swizzle.refusal(analysis, 0)
    assert decision is not None and decision.status == "refused", decision
    return decision.reason


def loop_kernel(body: str, before: str = "", params: str = "float* o, int T", count: str = "T") -> str:
    return (f"__global__ void k({params}) {{\n{before}\n"
            f"  for (int t = blockIdx.x; t < {count}; t += gridDim.x) {{\n{body}\n  }}\n}}\n")


# ---- detection ------------------------------------------------------------------------------------------


def test_a_decoded_for_loop_is_a_tile_loop_with_its_tile_space_at_the_launch():
    _, k = analysed(PERSISTENT)
    loop = k.tile_loop
    assert (loop.var, loop.count, loop.count_splice, loop.index_type) == ("tile", "CDIV(m, 64) * tiles_n", "CDIV(m, 64) * tiles_n", "int")
    assert loop.decode.divisor == "tiles_n" and loop.decode.splice_text == "tiles_n" and loop.decode.lines == (6, 7)
    assert len(loop.reads) == 2 and k.hazards == ()
    (launch,) = k.launches
    assert (launch.grid, launch.tiles, launch.divisor) == ((132, 1, 1), 65536, 256)
    assert k.adapter == "1d" and k.shapes == ((65536, 1, 1, 256),)


def test_the_loop_variable_may_be_declared_before_the_for():
    _, k = analysed("__global__ void k(float* o, unsigned T) {\n  unsigned t;\n  for (t = blockIdx.x; t < T; t += gridDim.x) o[t] = 1;\n}")
    assert k.tile_loop.var == "t" and k.tile_loop.index_type == "unsigned" and k.adapter == "linear"


def test_the_while_form_with_a_stride_variable_and_a_copy_of_the_tile():
    _, k = analysed("""
__global__ void k(float* o, int tiles, int cols) {
  const int stride = gridDim.x;
  int t = blockIdx.x;
  while (t < tiles) {
    const int id = t;
    o[(id / cols) * 64 + id % cols] = 1;
    t += stride;
  }
}""")
    loop = k.tile_loop
    assert loop.var == "t" and loop.count == "tiles" and loop.decode.divisor == "cols"
    assert len(loop.reads) == 1 and k.hazards == ()  # `id = t`; the stepping statement keeps t


def test_the_other_spellings_of_condition_and_step():
    _, k = analysed("__global__ void k(float* o, int T) { for (int t = blockIdx.x; T > t; t = t + (int)gridDim.x) o[t] = 1; }")
    assert k.tile_loop.count == "T"


def test_hip_spelling():
    analysis, k = analysed("#include <hip/hip_runtime.h>\n__global__ void k(float* o, int T, int n) {\n"
                           "  for (int t = hipBlockIdx_x; t < T; t += hipGridDim_x) o[(t / n) * 64 + t % n] = 1;\n}", "t.hip")
    assert k.tile_loop.decode.divisor == "n" and block_swizzle.refusal(analysis, 0) is None


@pytest.mark.parametrize("loop", [
    "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) o[i] = 0;",  # elements
    "for (int b = blockIdx.z; b < n; b += gridDim.z) o[b] = 0;",  # batches along z
    "int s = gridDim.x; s *= 2; for (int t = blockIdx.x; t < n; t += s) o[t] = 0;",  # a stride that is not gridDim.x
    "for (int t = blockIdx.x; t < n; t += gridDim.x * gridDim.y) o[t] = 0;",
])
def test_other_grid_stride_loops_are_neither_tile_loops_nor_hazards(loop):
    _, k = analysed(f"__global__ void k(float* o, int n) {{ {loop} }}")
    assert k.tile_loop is None and k.hazards == ()


def test_an_element_grid_stride_loop_is_declined_on_h200_and_dealt_to_chiplets_on_mi300x():
    code = ("__global__ void k(const float* x, float* y, int n) {\n"
            "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = 2 * x[i];\n}\n"
            "int main() { k<<<1216, 256>>>(0, 0, 1 << 26); }\n")
    (outcome,) = rewritten(code, None).outcomes
    assert outcome.status == "declined" and "no tiles to regroup" in outcome.reason
    (outcome,) = rewritten(code, "xcd:8", "mi300x").outcomes
    assert outcome.status == "rewritten" and outcome.adapter == "linear" and outcome.proof == "bijection on grid 1216x1x1"


def test_a_z_batch_loop_keeps_blockIdx_z_under_a_2d_swizzle():
    code = """
__global__ void k(float* o, int n, int batches) {
  for (int b = blockIdx.z; b < batches; b += gridDim.z)
    o[(b * n + blockIdx.y * 16) * n + blockIdx.x * 16] = 1;
}
int main() { k<<<dim3(64, 64, 4), 256>>>(0, 1024, 32); }
"""
    result = rewritten(code)
    (outcome,) = result.outcomes
    assert outcome.status == "rewritten" and outcome.adapter == "2d"
    assert b"for (int b = swzc_block.z; b < batches; b += gridDim.z)" in result.new


# ---- the rewrite ----------------------------------------------------------------------------------------


def test_the_splice_declares_the_tile_at_the_top_of_the_body_and_keeps_the_loop_header():
    result = rewritten(PERSISTENT)
    (outcome,) = result.outcomes
    assert outcome.status == "rewritten" and outcome.adapter == "1d"
    assert outcome.proof == "bijection on tile space T=65536 n=256" and outcome.grids == ((65536, 1, 1, 256),)
    assert "tile loop at line 5" in outcome.reason
    body = result.new.decode().split("__global__", 1)[1]
    assert ("  for (int tile = blockIdx.x; tile < CDIV(m, 64) * tiles_n; tile += gridDim.x) {\n"
            "    const int swzc_tile = swzc_grouped8_1d(tile, 0u, 0u, (unsigned)(CDIV(m, 64) * tiles_n), "
            "(unsigned)(tiles_n)).x;  // swzc: grouped:8\n"
            "    const int tm = swzc_tile / tiles_n;\n"
            "    const int tn = swzc_tile % tiles_n;\n") in body
    assert "blockIdx.x" not in body.replace("int tile = blockIdx.x", "")  # the blocks themselves are not permuted


def test_an_unbraced_body_gets_braces_and_the_index_keeps_its_type():
    result = rewritten("__global__ void k(float* o, unsigned T) {\n"
                       "  for (unsigned t = blockIdx.x; t < T; t += gridDim.x) o[t] = t;\n}\n", "xcd:8", "mi300x")
    assert ("  for (unsigned t = blockIdx.x; t < T; t += gridDim.x) { const unsigned swzc_tile = "
            "swzc_xcd8_linear(t, 0u, 0u, (unsigned)(T)).x; o[swzc_tile] = swzc_tile; }\n") in result.new.decode()


def test_a_divisor_declared_inside_the_body_is_written_through_its_initialiser():
    result = rewritten(loop_kernel("    const int cols = (n + 63) / 64;\n    o[(t / cols) * 64 + t % cols] = 1;",
                                   params="float* o, int T, int n"))
    assert b"swzc_grouped8_1d(t, 0u, 0u, (unsigned)(T), (unsigned)((n + 63) / 64)).x;" in result.new


def test_a_taken_name_gets_a_fresh_one():
    result = rewritten(loop_kernel("    float swzc_tile = 0; o[(t / 8) * 8 + t % 8] = swzc_tile;"))
    assert b"const int swzc_tile_1 = swzc_grouped8_1d(t," in result.new and b"o[(swzc_tile_1 / 8)" in result.new


def test_an_undecoded_tile_loop_is_declined_on_h200():
    (outcome,) = rewritten(loop_kernel("    o[t] = 1;"), None).outcomes
    assert outcome.status == "declined" and "tile loop over t with no decode" in outcome.reason
    (outcome,) = rewritten(loop_kernel("    o[t] = 1;")).outcomes
    assert outcome.status == "declined" and "does not decode t into tile rows and columns" in outcome.reason


def test_the_rewritten_loop_is_recognised_on_a_second_run():
    first = rewritten(PERSISTENT).new
    (outcome,) = rewritten(first.decode()).outcomes
    assert outcome.status == "untouched" and "already swizzled by swzc (swzc_grouped8_1d)" in outcome.reason


# ---- the proof is over the tile space ---------------------------------------------------------------------


def test_a_tile_count_that_is_not_a_tiling_keeps_the_hardware_order():
    """T = 1000 tiles in rows of 64: not an m x n tiling, so the 1d adapter keeps every tile in place."""
    code = loop_kernel("    o[(t / cols) * 64 + t % cols] = 1;", params="float* o, int T, int cols") + \
        "int main() { k<<<132, 256>>>(0, 1000, 64); }\n"
    (outcome,) = rewritten(code).outcomes
    assert outcome.status == "declined" and outcome.reason == "grouped:8 leaves every tile in place on tile space T=1000 n=64"


def test_an_unknown_tile_count_is_proven_on_sample_tile_spaces_including_non_tilings():
    from swzc.formulas.prove import sample_shapes

    (outcome,) = rewritten(loop_kernel("    o[(t / 8) * 64 + t % 8] = 1;")).outcomes
    assert outcome.proof == f"bijection on {len(sample_shapes('1d'))} sample tile spaces (the file does not fix this loop's tile count)"
    assert any(t % n for t, _, _, n in sample_shapes("1d"))


def test_the_proof_uses_the_tile_space_not_the_grid():
    """The launch grid (132 blocks) is no tiling of 256-wide rows: proven over it, grouped:8 would be the identity."""
    _, k = analysed(PERSISTENT)
    assert k.shapes != ((132, 1, 1, 256),)
    (outcome,) = rewritten(PERSISTENT).outcomes
    assert outcome.status == "rewritten"


# ---- refusals ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("body,before,reason", [
    ("    if (o[t] < 0) t += gridDim.x; o[t] = 1;", "", "line 4 changes it"),
    ("    int* p = &t; o[*p] = 1;", "", "line 4 takes its address"),
    ("    { int t = 3; o[t] = 1; }", "", "line 4 declares another t"),
    ("    if (o[t] < 0) break; o[t] = 1;", "", "can stop early (break, line 4)"),
    ("    if (o[t] < 0) return; o[t] = 1;", "", "can stop early (return, line 4)"),
    ("    o[TM] = 1;", "#define TM (t / 8)", "macro TM reads the tile loop's variable t"),
    ("    o[t] = 1; T -= 1;", "", "the tile count 'T' changes inside the tile loop (line 4)"),
    ("    o[t] = 1;", "  T += threadIdx.x;", "depends on blockIdx.x or threadIdx"),
    ("    int next = t + gridDim.x; o[next] = 1;", "", "line 4 combines the tile index t with the block index (gridDim.x)"),
    ("    if (t == blockIdx.x) o[0] = 0; o[t] = 1;", "", "combines the tile index t with the block index (blockIdx.x)"),
    ("    if (blockIdx.x == 0) o[t] = 2;", "", "combines the tile index t with the block index"),
    ("    o[(t - blockIdx.x) / gridDim.x] = 1;", "", "combines the tile index t"),
    ("    mine[t] = 1;", "  float* mine = o + blockIdx.x * 4096;", "combines the tile index t with the block index (mine)"),
    ("    o[t] = 1; mine += 64;", "  float* mine = o + blockIdx.x * 4096;", "mine, computed from blockIdx.x or gridDim.x, changes"),
    ("    o[t] = 1;", "  if (blockIdx.x >= 100) return;", "blocks may return before the tile loop (line 2, on blockIdx.x)"),
])
def test_refused_with_the_reason(body, before, reason):
    code = loop_kernel(body, before)
    if before.startswith("#define"):
        code = before + "\n" + loop_kernel(body)
    got = refusal_reason(code)
    assert reason in got, got


def test_a_loop_only_some_blocks_run_is_refused():
    got = refusal_reason("__global__ void k(float* o, int T) {\n  if (blockIdx.x < 8) {\n"
                         "    for (int t = blockIdx.x; t < T; t += gridDim.x) o[t] = 1;\n  }\n}")
    assert "the tile loop runs only in some blocks (line 2 tests blockIdx.x)" in got


def test_a_64_bit_tile_index_is_refused():
    got = refusal_reason("__global__ void k(float* o, long long T) {\n"
                         "  for (long long t = blockIdx.x; t < T; t += gridDim.x) o[t] = 1;\n}")
    assert "t is a long long, wider than the 32 bits" in got


def test_a_tile_count_that_depends_on_blockIdx_x_is_refused():
    got = refusal_reason(loop_kernel("    o[t] = 1;", count="T * blockIdx.x"))
    assert "the tile count 'T * blockIdx.x' (line 3) depends on blockIdx.x or threadIdx" in got


def test_two_tile_loops_are_refused():
    got = refusal_reason("__global__ void k(float* o, int T) {\n  for (int t = blockIdx.x; t < T; t += gridDim.x) o[t] = 1;\n"
                         "  for (int u = blockIdx.x; u < T; u += gridDim.x) o[u] = 2;\n}")
    assert "tile loops at lines 2 and 3" in got


def test_a_helper_reading_the_block_index_in_a_tile_loop_kernel_is_refused():
    got = refusal_reason("static __device__ int slot() { return blockIdx.x; }\n" + loop_kernel("    o[(t / 8) * 8 + slot()] = 1;"))
    assert "helper slot reads the block index inside a kernel whose tiles the swizzle would permute" in got


def test_a_tile_count_that_cannot_be_written_in_the_body_is_refused():
    got = refusal_reason("__global__ void k(float* o, int a, int b) {\n  int T = a;\n  if (b > 0) {\n    int T = b;\n"
                         "    for (int t = blockIdx.x; t < T; t += gridDim.x) o[t] = T;\n  }\n}")
    assert "cannot declare the swizzled tile at the top of the tile loop's body (line 5): the tile count 'T'" in got


@pytest.mark.parametrize("body,before", [
    ("    mine[threadIdx.x] = o[t]; o[t] = mine[255 - threadIdx.x];", "  float* mine = o + blockIdx.x * 256;"),  # scratch
    ("    partial[blockIdx.x] += o[t];", ""),  # a per-block accumulator
    ("    for (int i = 0; i < 4; ++i) { if (o[i] < 0) break; } o[t] = 1;", ""),  # an inner loop's break
    ("    if (o[t] < 0) continue; o[t] = 1;", ""),
    ("    o[t] = 1;", "  if (blockIdx.x >= T) return;"),  # blocks past the last tile: no tiles anyway
    ("    o[blockIdx.y * 4096 + t] = 1;", ""),  # other axes are not the tile order
])
def test_what_is_not_refused(body, before):
    analysis, k = analysed(loop_kernel(body, before, params="float* o, float* partial, int T"))
    assert k.tile_loop is not None and block_swizzle.refusal(analysis, 0) is None, k.hazards


# ---- rule 1: the splice copies no side effect ---------------------------------------------------------------


@pytest.mark.parametrize("expr,effect", [
    ("n++", "++ or --"),
    ("(n = 4)", "an assignment"),
    ("atomicAdd(p, 1)", "an atomic (atomicAdd)"),
    ("width(p) / 2", "a call to width()"),
    ("obj.size()", "a call to size()"),
    ("NEXT", "macro NEXT, which expands to ++ or --"),
    ("CDIV(n, NEXT)", "macro NEXT"),
    ("BAD(n)", "macro BAD, which does not expand to an expression"),
])
def test_side_effects(expr, effect):
    from swzc.frontend.evaluate import Macro

    macros = {"NEXT": Macro(None, "(counter++)"), "CDIV": Macro(("a", "b"), "(((a) + (b) - 1) / (b))"),
              "BAD": Macro(("x",), "do { } while (0)")}
    got = side_effect(expression_of(expr), macros)
    assert got is not None and got.startswith(effect), got


@pytest.mark.parametrize("expr", ["CDIV(n, 64)", "min(n, 8) * max(m, 2)", "static_cast<int>(n) / 4", "(unsigned)n",
                                  "int(n) + sizeof(float)", "n > 0 ? n : 1"])
def test_pure_expressions(expr):
    from swzc.frontend.evaluate import Macro

    assert side_effect(expression_of(expr), {"CDIV": Macro(("a", "b"), "(((a) + (b) - 1) / (b))")}) is None


def test_a_block_decode_divisor_with_a_side_effect_is_refused():
    got = refusal_reason("""
__global__ void k(float* c, int* next) {
  const int pid = blockIdx.x;
  const int cols = (*next)++;
  c[(pid / cols) * 64 + pid % cols] = 0;
}""")
    assert "the tile decode divisor 'cols' would be copied from the initialiser of cols, which has a side effect (++ or --" in got
    assert "line 4" in got


def test_a_tile_loop_divisor_or_count_with_a_side_effect_is_refused():
    got = refusal_reason("__device__ int cols(int* p);\n" + loop_kernel("    const int n = cols(p);\n    o[(t / n) * 64 + t % n] = 1;",
                                                                       params="float* o, int* p, int T"))
    assert "the decode divisor 'n' would be copied from the initialiser of n, which has a side effect (a call to cols(), line 5)" in got
    got = refusal_reason(loop_kernel("    o[t] = 1;", count="limit(T)").replace("__global__", "__device__ int limit(int);\n__global__"))
    assert "the tile count 'limit(T)' has a side effect (a call to limit(), line 4)" in got


def test_a_pure_macro_divisor_is_still_copied():
    _, k = analysed("#define CDIV(a, b) (((a) + (b) - 1) / (b))\n__global__ void k(float* c, int n) {\n"
                    "  const int pid = blockIdx.x;\n  const int cols = CDIV(n, 64);\n  c[(pid / cols) * 64 + pid % cols] = 0;\n}")
    assert k.decode.splice_text == "CDIV(n, 64)" and k.hazards == ()


# ---- rule 2: no rewritten helper with external linkage -----------------------------------------------------

HELPER_KERNEL = "__global__ void k(float* c) { c[row() * 64 + blockIdx.x] = 0; }\n"


@pytest.mark.parametrize("helper", [
    "static __device__ int row() { return blockIdx.y; }",
    "namespace { __device__ int row() { return blockIdx.y; } }",
    "template <int S = 1> __device__ int row() { return blockIdx.y * S; }",
])
def test_internal_helpers_are_rewritten(helper):
    code = helper + "\n" + HELPER_KERNEL.replace("row()", "row<>()" if "template" in helper else "row()")
    result = rewritten(code)
    assert result.outcomes[0].status == "rewritten", result.outcomes[0].reason


@pytest.mark.parametrize("helper,what", [
    ("__device__ int row() { return blockIdx.y; }", "helper row (line 1) reads the block index"),
    ("__device__ __forceinline__ int row() { return blockIdx.y; }", "helper row (line 1) reads the block index"),
    ("static __device__ int by() { return blockIdx.y; }\n__device__ int row() { return by(); }",
     "helper row (line 2) calls by, which reads the block index,"),
])
def test_helpers_with_external_linkage_are_refused(helper, what):
    got = refusal_reason(helper + "\n" + HELPER_KERNEL)
    assert what in got and "external linkage: under -rdc another file could call it" in got and "declare it static" in got


# ---- the output compiles --------------------------------------------------------------------------------------


@needs_nvcc
def test_rewritten_tile_loops_compile(tmp_path):
    code = PERSISTENT.replace("int main()", """
__global__ void unbraced(float* o, unsigned T, int n) {
  for (unsigned t = blockIdx.x; t < T; t += gridDim.x) o[(t / n) * 64 + t % n] = t;
}
__global__ void whiled(float* o, int T, int n) {
  const int stride = gridDim.x;
  int t = blockIdx.x;
  while (t < T) { o[(t / n) * 64 + t % n] = 1; t += stride; }
}
int main()""")
    result = rewritten(code)
    assert [o.status for o in result.outcomes] == ["rewritten"] * 3
    out = tmp_path / "out.cu"
    out.write_bytes(result.new)
    run = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "-c", str(out), "-o", str(tmp_path / "out.o")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


# ---- what the splice may write where ---------------------------------------------------------------------------


def test_a_local_changed_after_the_insertion_point_is_not_written_there():
    code = """
__global__ void k(float* c, int n) {
  int cols = 8;
  const int pid = blockIdx.x;
  cols = n / 64;
  c[(pid / cols) * 64 + pid % cols] = 0;
}"""
    _, k = analysed(code)
    assert k.decode.divisor == "cols" and k.decode.splice_text is None
    _, k = analysed(code.replace("  cols = n / 64;\n", "").replace("int cols = 8;", "int cols = 8;\n  cols = n / 64;"))
    assert k.decode.splice_text == "cols"  # changed before the insertion point only: its value there is the one used


def test_a_tile_loop_is_ranked_over_its_tiles_never_over_the_launch_grid(monkeypatch):
    """The model ranks the tiles the loop walks; a footprint of the blocks (the loop not followed) must not
    rank the blocks instead, which the swizzle does not move."""
    import dataclasses

    from swzc.pipeline import driver as pipeline

    from swzc.model import rank as ranking

    code = loop_kernel("    o[(t / 16) * 16 + t % 16] = bias[t];", params="float* o, const float* bias, int T")
    src = load_bytes("t.cu", (code + "int main() { k<<<132, 256>>>(0, 0, 4096); }\n").encode())
    (got,) = pipeline.rank_kernels(FileContext(src), analyze(FileContext(src)), load_hw("h200"), {}).values()
    assert not isinstance(got, str) and got.footprint.tiles[:2] == (256, 16) and got.footprint.grid == (4096, 1, 1)
    blocks = ranking.footprint
    monkeypatch.setattr(ranking, "footprint", lambda src, kernel, *a: blocks(src, dataclasses.replace(kernel, tile_loop=None), *a))
    (got,) = pipeline.rank_kernels(FileContext(src), analyze(FileContext(src)), load_hw("h200"), {}).values()
    assert isinstance(got, str) and "does not follow the tile loop over t (line 3)" in got


def test_a_comment_in_a_macro_body_is_not_a_read():
    code = "#define THREADS 256  // threads per tile\n" + loop_kernel("    o[t * THREADS + threadIdx.x] = 1;").replace("(int t =", "(int tile =") \
        .replace("t < T; t +=", "tile < T; tile +=").replace("o[t *", "o[tile *")
    analysis, k = analysed(code)
    assert k.tile_loop.var == "tile" and block_swizzle.refusal(analysis, 0) is None, k.hazards


# ---- on a GPU: the persistent GEMM of the suite ----------------------------------------------------------------




GEMM_PERSISTENT = ROOT / "bench" / "suite" / "kernels" / "gemm_persistent.cu"


def test_the_persistent_gemm_walks_4096_tiles_in_rows_of_64():
    _, k = analysed(GEMM_PERSISTENT.read_text(), str(GEMM_PERSISTENT))
    assert k.tile_loop.var == "tile" and k.hazards == ()
    assert {(la.grid, la.tiles, la.divisor) for la in k.launches} == {((264, 1, 1), 4096, 64)}


@needs_nvcc
def test_the_rewritten_persistent_gemm_compiles():
    src = load_bytes(str(GEMM_PERSISTENT), GEMM_PERSISTENT.read_bytes())
    result = rewrite_source(FileContext(src), analyze(FileContext(src)), Options(hw=load_hw("h200"), swizzle=parse_swizzle("grouped:8")))
    assert result.outcomes[0].status == "rewritten" and result.compile.status == "ok", result.compile


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="no CUDA GPU here")
def test_the_persistent_gemm_gives_the_same_checksum_with_its_tiles_permuted(tmp_path):
    src = load_bytes(str(GEMM_PERSISTENT), GEMM_PERSISTENT.read_bytes())
    patched = rewrite_source(FileContext(src), analyze(FileContext(src)), Options(hw=load_hw("h200"), swizzle=parse_swizzle("grouped:8"), compile=False))
    assert patched.outcomes[0].status == "rewritten"
    sums = []
    for name, data in (("original", src.data), ("rewritten", patched.new)):
        (tmp_path / f"{name}.cu").write_bytes(data)
        subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-o", str(tmp_path / name), str(tmp_path / f"{name}.cu")], check=True)
        run = subprocess.run([str(tmp_path / name)], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout + run.stderr
        sums.append(re.search(r"checksum ([0-9a-f]{16})", run.stdout).group(1))
    assert sums[0] == sums[1]


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="no CUDA GPU here")
def test_the_persistent_gemm_runs_through_the_acceptance_loop():
    """The harness with the suite's launch spec: original and tile-swizzled kernel checked and timed."""
    from swzc.pipeline.driver import rewrite_file

    options = Options(hw=load_hw("h200"), swizzle=parse_swizzle("grouped:8"), compile=False, bench=True, rounds=10,
                      launch_spec=str(ROOT / "bench" / "suite" / "launch_specs.toml"))
    result = rewrite_file(str(GEMM_PERSISTENT), options)
    (bench,) = result.bench
    (attempt,) = bench.attempts
    assert attempt.correct and attempt.speedup is not None
    assert result.changed == attempt.accepted


@pytest.mark.parametrize("helper,copied", [
    ("__host__ __device__ constexpr int cdiv(int a, int b) { return (a + b - 1) / b; }", True),
    ("__device__ int twice(int a) { return 2 * a; }\n__device__ int cdiv(int a, int b) { return twice(a) / b; }", True),
    ("__device__ int cdiv(int a, int* b) { return a / (*b)++; }", False),
    ("__device__ int cdiv(int a, int b) { int q = (a + b - 1) / b; return q; }", False),  # not one return
    ("__device__ int cdiv(int a, int b);", False),  # defined elsewhere
])
def test_functions_of_the_file_that_only_return_an_expression_are_pure(helper, copied):
    code = helper + """
__global__ void k(float* c, int n, int* w) {
  const int pid = blockIdx.x;
  const int cols = cdiv(n, ARG);
  c[(pid / cols) * 64 + pid % cols] = 0;
}""".replace("ARG", "w" if "int* b" in helper else "64")
    analysis, k = analysed(code)
    assert (k.decode.splice_text is not None) is copied, k.hazards
    if not copied:
        assert "a call to cdiv()" in block_swizzle.refusal(analysis, 0).reason
