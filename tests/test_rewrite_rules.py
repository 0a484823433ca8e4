"""The pass's own rules, on the smallest kernels that show each: when a kernel is refused or left alone,
which kernels sharing a helper are rewritten together, the edits it makes, and what a spliced expression
may contain."""

import pytest

from swzc.analysis.kernels import analyze
from swzc.frontend.evaluate import Macro, expression_of
from swzc import passes
from swzc.passes import block_swizzle
from swzc.passes.base import variable_name
from swzc.pipeline.driver import RunPlan, Options, load_hw, parse_swizzle, rewrite_source
from swzc.frontend.source import load_bytes
from swzc.analysis.splice_safety import side_effect
from swzc.formulas.swizzles import parse_spec
from swzc.analysis.context import FileContext


def analysed(code: str):
    return analyze(FileContext(load_bytes("k.cu", code.encode())))


def rewritten(code: str, swizzle: str | None = "grouped:8", only=None):
    src = load_bytes("k.cu", code.encode())
    options = Options(hw=load_hw("h200"), swizzle=parse_swizzle(swizzle), compile=False)
    plan = RunPlan(only={i: parse_spec(s) for i, s in only.items()} if only else None)
    return rewrite_source(FileContext(src), analyze(FileContext(src)), options, plan)


def statuses(result) -> dict[str, str]:
    return {o.name: o.status for o in result.outcomes}


# ---- refusal ----------------------------------------------------------------------------------------------

def test_a_decode_whose_divisor_changes_before_it_is_used_is_refused():
    code = ("__global__ void k(float* c, int n) {\n  int cols = n;\n  const int pid = blockIdx.x;\n  cols = cols / 2;\n"
            "  c[(pid / cols) * 64 + pid % cols] = 0;\n}\n")
    decision = block_swizzle.refusal(analysed(code), 0)
    assert decision.status == "refused"
    assert decision.reason == "cannot declare the swizzle before the first block-index read: the tile count 'cols' is not known there"


def test_a_decoded_kernel_with_a_helper_that_reads_the_block_index_is_refused():
    code = ("static __device__ int row() { return blockIdx.y; }\n__global__ void k(float* c, int n) {\n"
            "  const int pid = blockIdx.x;\n  c[(pid / n) * 64 + pid % n + row()] = 0;\n}\n")
    decision = block_swizzle.refusal(analysed(code), 0)
    assert decision.status == "refused"
    assert decision.reason == "helper row reads the block index, and the tile decode's divisor 'n' is not visible inside it"
    assert block_swizzle.refusal(analysed(code.replace(" + row()", "")), 0) is None


def test_a_kernel_that_reads_the_block_index_only_where_the_rewrite_cannot_see_is_refused_with_every_hazard():
    code = ("__global__ void k(float* c) {\n  unsigned b; asm(\"mov.u32 %0, %%ctaid.x;\" : \"=r\"(b));\n"
            "  cooperative_groups::this_grid().sync();\n  c[b] = 1;\n}\n")
    decision = block_swizzle.refusal(analysed(code), 0)
    assert decision.status == "refused" and "inline assembly" in decision.reason and "grid-wide" in decision.reason


def test_a_hazard_in_a_kernel_that_does_not_read_the_block_index_leaves_it_untouched():
    code = "__global__ void k(float* c) {\n  cooperative_groups::this_grid().sync();\n  c[threadIdx.x] = 1;\n}\n"
    decision = block_swizzle.refusal(analysed(code), 0)
    assert decision.status == "untouched" and decision.reason == "does not read the block index"


def test_a_file_swzc_rewrote_is_left_alone_with_the_swizzle_it_has():
    first = rewritten("__global__ void k(float* c, int ld) {\n  c[(blockIdx.y * 16 + threadIdx.y) * ld + blockIdx.x * 16] = 1;\n}\n")
    again = analysed(first.new.decode())
    decision = block_swizzle.refusal(again, 0)
    assert decision.status == "untouched" and decision.reason == "already swizzled by swzc (swzc_grouped8_2d)"


KERNEL_2D = "__global__ void {name}(float* c, int ld) {{\n  c[(blockIdx.y * 16 + threadIdx.y) * ld + blockIdx.x * 16] = 1;\n}}\n"


@pytest.mark.parametrize("declared", [
    "static __device__ unsigned swzc_grouped(unsigned a, unsigned b, unsigned c, unsigned d) { return a; }\n",
    "__device__ int swzc_grouped8_2d;\n",
    "struct swzc_grouped8_2d { int x; };\n",
    "#define swzc_grouped8_2d(bx, by, bz, gx, gy) make_uint3(bx, by, bz)\n",  # the kernel's call would expand it
])
def test_a_file_that_declares_a_name_the_swizzle_functions_take_is_refused(declared):
    result = rewritten(declared + KERNEL_2D.format(name="k"))
    (outcome,) = result.outcomes
    assert outcome.status == "refused" and "(line 1)" in outcome.reason and "would not compile" in outcome.reason
    assert result.new == result.old


def test_every_taken_name_is_said_with_its_line():
    code = "int x;\nint swzc_grouped;\nint swzc_grouped8_2d;\n" + KERNEL_2D.format(name="k")
    (outcome,) = rewritten(code).outcomes
    assert outcome.reason == ("the file already declares swzc_grouped (line 2), swzc_grouped8_2d (line 3): names of the swizzle "
                              "functions grouped:8 needs, so the rewritten file would not compile")


def test_the_line_given_is_the_name_s_first_in_the_code_not_a_comment():
    code = "// swzc_grouped8_2d: mentioned\nint a;\nint swzc_grouped8_2d;\nint b = swzc_grouped8_2d;\n" + KERNEL_2D.format(name="k")
    (outcome,) = rewritten(code).outcomes
    assert "swzc_grouped8_2d (line 3):" in outcome.reason


def test_another_kernel_of_a_file_swzc_rewrote_shares_its_guarded_functions():
    first = rewritten(KERNEL_2D.format(name="k"), only={0: "grouped:8"})
    for newline in ("\n", "\r\n"):
        code = (first.new.decode() + KERNEL_2D.format(name="k2")).replace("\n", newline)
        again = rewritten(code)
        assert statuses(again) == {"k": "untouched", "k2": "rewritten"}
        assert again.new.count(b"static __device__ __forceinline__ unsigned swzc_grouped(") == 2  # one compiles: same guard
    # a different definition under swzc's name (an edited copy) is a clash
    edited = first.new.decode().replace("return ", "return 0 + ", 1) + KERNEL_2D.format(name="k2")
    assert statuses(rewritten(edited)) == {"k": "untouched", "k2": "refused"}


# ---- helpers shared by kernels ---------------------------------------------------------------------------

SHARED = """\
static __device__ int tile_row() { return blockIdx.y * 16 + threadIdx.y; }
static __device__ int tile_col() { return blockIdx.x * 16 + threadIdx.x; }
__global__ void a(float* c) { c[tile_row() * 4096 + blockIdx.x * 16 + threadIdx.x] = 1; }
__global__ void b(float* c) { c[tile_row() * 4096 + tile_col()] = 2; }
__global__ void d(float* c) { c[blockIdx.y * 4096 + tile_col()] = 3; }
"""


def test_kernels_sharing_a_helper_with_different_swizzles_are_both_refused():
    result = rewritten(SHARED, None, only={0: "grouped:8", 1: "colmajor", 2: "colmajor"})
    reasons = {o.name: o.reason for o in result.outcomes}
    assert statuses(result) == {"a": "refused", "b": "refused", "d": "refused"}
    assert reasons["a"] == "shares helper tile_row (which reads the block index) with kernel b, which is not rewritten the same way"
    assert reasons["b"].startswith("shares helper tile_row (which reads the block index) with kernel a")
    assert result.new == result.old


def test_a_refusal_spreads_along_shared_helpers():
    """a is refused; b shares tile_row with it, so b goes too; d shares tile_col with b, so d goes as well."""
    code = SHARED.replace("c[tile_row() * 4096 + blockIdx.x * 16 + threadIdx.x] = 1;",
                          "cooperative_groups::this_grid().sync(); c[tile_row() * 4096 + blockIdx.x * 16 + threadIdx.x] = 1;")
    result = rewritten(code)
    reasons = {o.name: o.reason for o in result.outcomes}
    assert statuses(result) == {"a": "refused", "b": "refused", "d": "refused"}
    assert reasons["d"] == "shares helper tile_col (which reads the block index) with kernel b, which is not rewritten the same way"


def test_kernels_rewritten_alike_keep_their_shared_helpers_rewritten():
    result = rewritten(SHARED, None, only={0: "colmajor", 1: "colmajor", 2: "colmajor"})
    assert statuses(result) == {"a": "rewritten", "b": "rewritten", "d": "rewritten"}
    # a and d declare the swizzled index (b reads the block index only through the helpers); each helper calls it once
    assert result.new.count(b"swzc_colmajor_2d(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y)") == 4


def test_a_helper_reached_by_one_kernel_only_is_rewritten_with_it():
    result = rewritten(SHARED, None, only={1: "colmajor"})
    assert statuses(result)["b"] == "refused"  # a and d are not rewritten, and share its helpers
    alone = rewritten(SHARED.split("__global__ void a")[0] + "__global__ void b" + SHARED.split("__global__ void b")[1]
                      .split("__global__ void d")[0], None, only={0: "colmajor"})
    assert statuses(alone) == {"b": "rewritten"}


def test_settle_with_nothing_to_settle_keeps_everything():
    analysis = analysed(SHARED)
    assert block_swizzle.settle(analysis, {}) == ({}, [])
    assert passes.run(analysis, {}) == []


# ---- the spliced names and text ----------------------------------------------------------------------

def test_variable_names_skip_every_name_the_file_uses():
    analysis = analysed("int swzc_block, swzc_block_1, swzc_block_3;\n__global__ void k(float* c) { c[blockIdx.x] = 0; }\n")
    assert variable_name(analysis) == "swzc_block_2"
    assert variable_name(analysis, "swzc_tile") == "swzc_tile"


def test_a_crlf_file_gets_crlf_in_every_inserted_line():
    code = "__global__ void k(float* c, int ld) {\r\n  c[(blockIdx.y * 16 + threadIdx.y) * ld + blockIdx.x * 16] = 1;\r\n}\r\n"
    result = rewritten(code)
    assert b"\n" not in result.new.replace(b"\r\n", b"") and result.new.count(b"\r\n") > code.count("\r\n")


# ---- what a spliced expression may contain ------------------------------------------------------------

@pytest.mark.parametrize("expr", ["bool(n) + 1", "char(n) * 2", "double(n) / 2", "std::size_t(n)"])
def test_a_cast_written_as_a_call_is_pure(expr):
    assert side_effect(expression_of(expr), {}) is None


@pytest.mark.parametrize("expr, effect", [
    ("__atomic_fetch_add(p, 1, 0)", "an atomic (__atomic_fetch_add)"),
    ("__hip_atomic_load(p, 0, 0)", "an atomic (__hip_atomic_load)"),
    ("atomicAdd_system(p, 1)", "an atomic (atomicAdd_system)"),
    ("Tile(n)", "a call to Tile()"),
])
def test_atomics_and_unknown_calls_are_side_effects(expr, effect):
    assert side_effect(expression_of(expr), {}) == effect


def test_macros_defined_twice_empty_or_too_deep():
    macros = {"TWICE": None, "EMPTY": Macro(None, "  "), "PURE": Macro(None, "(n * 2)")}
    assert side_effect(expression_of("TWICE + 1"), macros) == "macro TWICE, which is defined more than once"
    assert side_effect(expression_of("n + EMPTY"), macros) is None
    assert side_effect(expression_of("PURE + 1"), macros) is None
    chain = {f"M{i}": Macro(None, f"(M{i + 1} + 1)") for i in range(20)}
    chain["M20"] = Macro(None, "(n)")
    deep = side_effect(expression_of("M0"), chain)
    assert deep is not None and deep.endswith("macro M8, which expands too deeply to check")
    assert deep.startswith("macro M0, which expands to macro M1, which expands to")
    shallow = {f"M{i}": Macro(None, f"(M{i + 1} + 1)") for i in range(7)}
    shallow["M7"] = Macro(None, "(n)")
    assert side_effect(expression_of("M0"), shallow) is None  # eight macros deep are checked in full


@pytest.mark.parametrize("helper, external", [
    ("extern __device__ int row() { return blockIdx.y; }", True),
    ("namespace tiles { __device__ int row() { return blockIdx.y; } }", True),
    ("namespace { __device__ int row() { return blockIdx.y; } }", False),
    ("static __device__ int row() { return blockIdx.y; }", False),
    ("static inline __device__ int row() { return blockIdx.y; }", False),
])
def test_which_helpers_another_file_could_call(helper, external):
    call = "tiles::row()" if "namespace tiles" in helper else "row()"
    code = f"{helper}\n__global__ void k(float* c) {{ c[{call} * 64 + blockIdx.x] = 0; }}\n"
    rules = [h.rule for h in analysed(code).kernels[0].hazards]
    assert rules == (["external-helper"] if external else [])


def test_a_file_s_pure_functions_are_found_whatever_their_order_and_overloads():
    from swzc.analysis.splice_safety import side_effect_in

    code = ("__device__ int twice(int a) { return a * 2; }\n__device__ int quad(int a) { return twice(twice(a)); }\n"
            "__device__ int noisy(int a) { return atomicAdd(&a, 1); }\n__device__ int both(int a) { return a; }\n"
            "__device__ int both(float a) { return noisy(1); }\n__device__ int two(int a) { int b = a; return b; }\n"
            "__device__ int commented(int a) {\n  // why\n  return a + 1;\n}\n")
    src = load_bytes("k.cu", code.encode())
    check = side_effect_in(src.tree.root_node, {})
    assert check(expression_of("quad(n) + twice(n) + commented(n)")) is None
    assert check(expression_of("noisy(n)")) == "a call to noisy()"
    assert check(expression_of("both(n)")) == "a call to both()"  # one overload is not pure
    assert check(expression_of("two(n)")) == "a call to two()"  # more than a return
