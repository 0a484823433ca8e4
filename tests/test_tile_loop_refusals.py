"""More of what makes a tile loop unsafe to permute, and what does not, each on the smallest kernel: the
loop variable's type, the ways out of the loop, guards before it, and what a tile count may depend on."""

import pytest

from swzc.analysis.kernels import analyze
from swzc.passes import block_swizzle
from swzc.frontend.source import load_bytes
from swzc.analysis.context import FileContext


def kernel_of(code: str, path: str = "t.cu"):
    analysis = analyze(FileContext(load_bytes(path, code.encode())))
    return analysis, analysis.kernels[0]


def loop(body: str = "o[t] = 1;", before: str = "", count: str = "T", var: str = "int t = blockIdx.x", params="float* o, int T",
         step: str = "t += gridDim.x") -> str:
    return f"__global__ void k({params}) {{\n{before}  for ({var}; t < {count}; {step}) {{ {body} }}\n}}\n"


def rules_and_reasons(code: str, path: str = "t.cu") -> list[tuple[str, str]]:
    _, k = kernel_of(code, path)
    assert k.tile_loop is not None
    return [(h.rule, h.reason) for h in k.hazards]


# ---- the loop variable's type ---------------------------------------------------------------------------

@pytest.mark.parametrize("code, index_type", [
    (loop(var="t = blockIdx.x", params="float* o, int T, int t"), "int"),  # a parameter
    (loop(var="t = blockIdx.x", before="  unsigned short s;\n  unsigned t;\n"), "unsigned"),  # declared before the loop
    (loop(var="t = blockIdx.x", before="  unsigned  int t;\n"), "unsigned int"),
    ("typedef unsigned int tile_t;\n" + loop(var="tile_t t = blockIdx.x"), "tile_t"),
])
def test_the_index_keeps_the_loop_variable_s_declared_type(code, index_type):
    analysis, k = kernel_of(code)
    assert k.tile_loop.index_type == index_type and k.hazards == () and block_swizzle.refusal(analysis, 0) is None


@pytest.mark.parametrize("code, why", [
    (loop(var="size_t t = blockIdx.x", params="float* o, size_t T"), "is a size_t, wider than the 32 bits"),
    ("typedef unsigned long long u64;\n" + loop(var="u64 t = blockIdx.x"), "is a unsigned long long, wider than the 32 bits"),
    ("struct Big { int v; };\n" + loop(var="Big t = blockIdx.x"), "has type Big, not known to fit in the 32 bits"),
])
def test_a_loop_variable_that_may_not_fit_32_bits_is_refused(code, why):
    ((rule, reason),) = rules_and_reasons(code)
    line = 3 if code.startswith(("typedef", "struct")) else 2
    assert rule == "tile-loop" and why in reason and reason.endswith(f"the swizzle functions compute with (line {line})")


def test_a_loop_variable_of_unknown_type_is_refused_and_declared_unsigned():
    analysis, k = kernel_of(loop(var="t = blockIdx.x", params="float* o, int T"))  # t declared nowhere
    assert k.tile_loop.index_type == "unsigned"
    assert [h.reason for h in k.hazards] == ["the tile loop's variable t has type unknown, not known to fit in the 32 bits "
                                             "the swizzle functions compute with (line 2)"]


# ---- ways out of the loop -------------------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    "if (o[t] < 0) goto done; o[t] = 1;",
])
def test_a_goto_out_of_the_loop_is_an_early_stop(body):
    code = loop(body).replace("\n}\n", "\n done: return;\n}\n")
    assert rules_and_reasons(code) == [("tile-loop", "the tile loop can stop early (goto, line 2): which tiles it visits "
                                                     "would then depend on their order")]


@pytest.mark.parametrize("body", [
    "switch (t % 2) { case 0: o[t] = 1; break; default: break; }",  # a break that ends the switch
    "while (o[t] > 0) { o[t] -= 1; if (o[t] < 4) break; }",  # one that ends an inner loop
    "do { o[t] += 1; if (o[t] > 4) break; } while (true);",
    "auto f = [&]() { for (;;) { break; } return 2; }; o[t] = f();",  # a return inside a lambda
    "auto g = [&](int x) { if (x) return 1; return 0; }; o[t] = g(t);",
])
def test_breaks_and_returns_that_do_not_leave_the_loop_are_fine(body):
    assert rules_and_reasons(loop(body)) == []


# ---- guards before the loop -------------------------------------------------------------------------------

@pytest.mark.parametrize("guard", [
    "  if (T <= blockIdx.x) return;\n",
    "  if (blockIdx.x >= T) { return; }\n",
    "  auto bail = [&]() { if (blockIdx.x > 3) return; o[0] = 1; };\n  bail();\n",  # a return in a lambda returns from it
])
def test_guards_that_only_stop_blocks_without_tiles_are_fine(guard):
    assert rules_and_reasons(loop(before=guard)) == []


def test_a_guard_on_the_loop_variable_itself_before_the_loop_is_fine():
    code = "__global__ void k(float* o, int T) {\n  int t = blockIdx.x;\n  if (t >= T) return;\n  for (; t < T; t += gridDim.x) o[t] = 1;\n}\n"
    assert rules_and_reasons(code) == []


@pytest.mark.parametrize("guard, line", [
    ("  if (blockIdx.x >= T - 1) return;\n", 2),  # not the loop's own count
    ("  if (blockIdx.x > T) return;\n", 2),
    ("  if (blockIdx.x == 0) return;\n", 2),
    ("  const int first = blockIdx.x;\n  if (first % 2) return;\n", 3),  # through a copy
])
def test_returns_of_some_blocks_before_the_loop_are_refused(guard, line):
    assert rules_and_reasons(loop(before=guard)) == [
        ("tile-loop", f"blocks may return before the tile loop (line {line}, on blockIdx.x): it would not visit every tile, "
                      "and a permutation would change which")]


@pytest.mark.parametrize("code, line", [
    ("__global__ void k(float* o, int T) {\n  blockIdx.x % 2 ? (void)0 : [&]() {\n"
     "    for (int t = blockIdx.x; t < T; t += gridDim.x) o[t] = 1;\n  }();\n}\n", 2),  # a conditional expression
    ("__global__ void k(float* o, int T) {\n  const int go = blockIdx.x % 2;\n  if (go) {\n"
     "    for (int t = blockIdx.x; t < T; t += gridDim.x) o[t] = 1;\n  }\n}\n", 3),  # through a copy
])
def test_a_loop_that_only_some_blocks_reach_is_refused(code, line):
    assert rules_and_reasons(code) == [("tile-loop", f"the tile loop runs only in some blocks (line {line} tests blockIdx.x): "
                                                     "it would not visit every tile, and a permutation would change which")]


# ---- what the tile count may depend on ------------------------------------------------------------------

@pytest.mark.parametrize("count, what", [
    ("T + t", "depends on the loop variable t"),
    ("T + threadIdx.y", "depends on blockIdx.x or threadIdx"),
    ("T * blockIdx.x", "depends on blockIdx.x or threadIdx"),
    ("T + ::threadIdx.x", "depends on blockIdx.x or threadIdx"),
])
def test_a_tile_count_that_varies_between_blocks_threads_or_tiles_is_refused(count, what):
    ((rule, reason),) = rules_and_reasons(loop(count=count))
    assert rule == "tile-loop" and reason == f"the tile count '{count}' (line 2) {what}" + (
        "" if "loop variable" in what else ": blocks or threads would permute different tile spaces")


@pytest.mark.parametrize("count", ["T + hipThreadIdx_x", "T * hipBlockIdx_x"])
def test_the_hip_spellings_count_too(count):
    code = "#include <hip/hip_runtime.h>\n" + loop(count=count, var="int t = hipBlockIdx_x", step="t += hipGridDim_x")
    ((rule, reason),) = rules_and_reasons(code, "t.hip")
    assert reason.startswith(f"the tile count '{count}' (line 3) depends on blockIdx.x or threadIdx")


@pytest.mark.parametrize("count", ["T + blockIdx.y", "T + gridDim.y", "T + blockDim.x"])
def test_a_tile_count_may_depend_on_the_other_axes_and_the_sizes(count):
    assert rules_and_reasons(loop(count=count)) == []


def test_a_count_from_a_local_that_reads_the_thread_index_is_refused():
    code = loop(count="n", before="  const int n = T + threadIdx.x;\n")
    ((rule, reason),) = rules_and_reasons(code)
    assert reason.startswith("the tile count 'n' (line 3) depends on blockIdx.x or threadIdx")


def test_a_divisor_that_varies_is_refused_like_a_count():
    code = loop("o[(t / n) * 64 + t % n] = 1;", before="  int n = T;\n", params="float* o, int T").replace(
        "o[(t / n) * 64 + t % n] = 1;", "o[(t / n) * 64 + t % n] = 1; n += 1;")
    reasons = [r for _, r in rules_and_reasons(code)]
    assert any(r.startswith("the decode divisor 'n' changes inside the tile loop (line 3)") for r in reasons)


# ---- reading the block index next to the tile ----------------------------------------------------------

def test_a_dereference_next_to_the_tile_combines_them():
    ((rule, reason),) = rules_and_reasons(loop("o[t] = *(o + blockIdx.x + t);"))
    assert reason.startswith("line 2 combines the tile index t with the block index (blockIdx.x)")


def test_data_read_through_a_per_block_pointer_does_not_combine():
    assert rules_and_reasons(loop("o[t] = *mine;", before="  float* mine = o + blockIdx.x;\n")) == []


def test_a_stride_held_in_a_local_is_the_grid_and_a_changed_one_is_not():
    assert kernel_of(loop(step="t += stride", before="  const int stride = gridDim.x;\n"))[1].tile_loop is not None
    assert kernel_of(loop(step="t += stride", before="  int stride = gridDim.x;\n  stride = 4;\n"))[1].tile_loop is None


def test_the_note_says_how_the_tiles_are_decoded():
    _, k = kernel_of(loop("o[(t / 8) * 64 + t % 8] = 1;"))
    assert k.notes == ("tile loop over t (line 2): T tiles, decoded as t / 8; a swizzle permutes the tiles inside the loop, "
                       "not the blocks",)
    _, plain = kernel_of(loop())
    assert plain.notes == ("tile loop over t (line 2): T tiles, not decoded into rows and columns; a swizzle permutes the "
                           "tiles inside the loop, not the blocks",)


# ---- what each refusal says, and where ------------------------------------------------------------------

def test_several_tile_loops_name_the_first_two_and_refuse_at_the_second():
    three = ("__global__ void k(float* o, int T) {\n" + "".join(
        f"  for (int t{i} = blockIdx.x; t{i} < T; t{i} += gridDim.x) {{ o[t{i}] = {i}; }}\n" for i in range(3)) + "}\n")
    analysis, k = kernel_of(three)
    assert k.tile_loop is None
    assert [(h.rule, h.line, h.reason) for h in k.hazards] == [
        ("tile-loop", 3, "tile loops at lines 2 and 3: swzc permutes the tiles of one loop per kernel")]
    assert block_swizzle.refusal(analysis, 0).status == "refused"


@pytest.mark.parametrize("body", ["int t; o[0] = 1;", "int t = 3; o[t] = 1;"])
def test_a_second_variable_of_the_loop_s_name_inside_it_is_refused(body):
    assert rules_and_reasons(loop(body)) == [("tile-loop", "line 2 declares another t inside the tile loop")]


def test_a_block_index_read_that_meets_the_tile_twice_is_reported_once():
    ((rule, reason),) = rules_and_reasons(loop("o[blockIdx.x * T + t] = 1;\n    o[t + blockIdx.x] = 2;"))
    assert rule == "tile-loop" and reason.startswith("line 2 combines the tile index t with the block index (blockIdx.x)")


@pytest.mark.parametrize("body", ["o[t] = blockIdx.x * 2 + t;", "o[t] = (blockIdx.x & 1) + t;"])
def test_a_product_or_mask_of_the_block_index_that_meets_the_tile_combines_them(body):
    ((rule, reason),) = rules_and_reasons(loop(body))
    assert rule == "tile-loop" and "combines the tile index t with the block index" in reason


def test_a_global_scope_spelling_of_the_block_or_thread_index_in_the_count_is_refused():
    for count in ("T + ::blockIdx.x", "T - ::threadIdx.y"):
        ((rule, reason),) = rules_and_reasons(loop(count=count))
        assert rule == "tile-loop" and "depends on blockIdx.x or threadIdx" in reason, count


@pytest.mark.parametrize("leave", ["return;", "goto out;"])
def test_a_return_or_goto_inside_a_nested_loop_still_leaves_the_tile_loop(leave):
    body = f"for (int i = 0; i < 4; ++i) {{ if (o[i] < 0) {leave} }} o[t] = 1;"
    code = loop(body).replace("}\n}\n", "}\nout:;\n}\n") if leave.startswith("goto") else loop(body)
    word = leave.split()[0].rstrip(";")
    assert [(rule, reason.split(":")[0]) for rule, reason in rules_and_reasons(code)] == [
        ("tile-loop", f"the tile loop can stop early ({word}, line 2)")]


def test_a_local_of_the_block_index_changed_inside_the_loop_is_refused():
    code = loop("o[t] = 1; row = blockIdx.x + 1;", before="  int row = blockIdx.x;\n")
    assert rules_and_reasons(code) == [("tile-loop", "row, computed from blockIdx.x or gridDim.x, changes inside the tile "
                                        "loop (line 3): it may follow the tile order, which the swizzle changes")]


def test_a_statement_that_changes_the_loop_variable_is_reported_once_not_also_as_combining():
    assert [reason.split(":")[0] for _, reason in rules_and_reasons(loop("o[t] = 1; t = t + blockIdx.x;"))] == [
        "the tile loop's variable t is not only stepped by the loop"]


# ---- edges: every refusal under its rule, code with no spaces, and what only some nodes decide ----------

@pytest.mark.parametrize("body, start", [
    ("o[t] = 1; t += 1;", "the tile loop's variable t is not only stepped by the loop"),
    ("o[t] = 1; T = T - 1;", "the tile count 'T' changes inside the tile loop (line 3)"),
    ("o[t] = 1; int s, t; s = 0;", "line 3 declares another t inside the tile loop"),
    ("o[t] = TILE_OF;", "macro TILE_OF reads the tile loop's variable t"),
])
def test_each_refusal_inside_the_loop_is_a_tile_loop_hazard(body, start):
    code = "#define TILE_OF (t * 2)\n" + loop(body)
    found = rules_and_reasons(code)
    assert found and all(rule == "tile-loop" for rule, _ in found)
    assert found[0][1].startswith(start), found


def test_a_count_changed_as_the_loop_s_only_statement_is_refused():
    code = "__global__ void k(float* o, int T) {\n  for (int t = blockIdx.x; t < T; t += gridDim.x) T--;\n}\n"
    assert rules_and_reasons(code) == [("tile-loop", "the tile count 'T' changes inside the tile loop (line 2)")]


def test_a_local_computed_from_the_tile_that_meets_the_block_index_combines_them():
    ((rule, reason),) = rules_and_reasons(loop("int u = t * 2; o[u + blockIdx.x] = 1;"))
    assert rule == "tile-loop" and reason.startswith("line 2 combines the tile index t with the block index (blockIdx.x)")


def test_a_condition_on_per_block_data_that_decides_a_tile_s_work_combines_them():
    ((rule, reason),) = rules_and_reasons(loop("if (o[blockIdx.x] > 0) o[t] = 1;"))
    assert rule == "tile-loop" and "combines the tile index t with the block index" in reason


def test_a_return_right_against_the_loop_still_counts_as_before_it():
    code = loop(before="  if (blockIdx.x == 3) return;").replace("return;  for", "return;for")
    assert "return;for (" in code
    assert [reason.split(" (")[0] for _, reason in rules_and_reasons(code)] == ["blocks may return before the tile loop"]


def test_a_guard_that_is_not_a_return_before_the_loop_is_fine():
    assert rules_and_reasons(loop(before="  if (blockIdx.x < 4) o[0] = 1;\n")) == []


def test_a_loop_nested_in_a_loop_bounded_by_the_block_index_runs_only_in_some_blocks():
    code = ("__global__ void k(float* o, int T) {\n  for (int i = 0; i < (int)blockIdx.x; ++i) {\n"
            "    for (int t = blockIdx.x; t < T; t += gridDim.x) { o[t] = i; }\n  }\n}\n")
    assert [reason.split(" (")[0] for _, reason in rules_and_reasons(code)] == ["the tile loop runs only in some blocks"]


@pytest.mark.parametrize("before", ["  unsigned s, t;", "  unsigned s, t;\n"])
def test_the_type_comes_from_a_declaration_of_several_names_even_right_against_the_loop(before):
    code = loop(var="t = blockIdx.x", before=before)
    analysis, k = kernel_of(code)
    assert k.tile_loop.index_type == "unsigned" and k.hazards == ()


def test_the_whole_block_index_in_a_count_is_refused():
    code = "__device__ int tiles_of(uint3 b) { return (int)b.y + 4; }\n" + loop(count="tiles_of(blockIdx)")
    assert any("depends on blockIdx.x or threadIdx" in reason for _, reason in rules_and_reasons(code, "t.cu"))


def test_a_loop_variable_divided_by_two_values_is_noted_and_not_decoded():
    _, k = kernel_of(loop("o[(t / 8) * 64 + t % 4] = 1;"))
    assert k.tile_loop.decode is None
    assert "t is divided by different values (8, 4): no single tile decode" in k.notes


def test_a_count_from_a_local_of_hip_s_thread_index_is_refused():
    code = "#include <hip/hip_runtime.h>\n" + loop(count="n", var="int t = hipBlockIdx_x", step="t += hipGridDim_x",
                                                  before="  const int n = T + hipThreadIdx_x;\n")
    ((rule, reason),) = rules_and_reasons(code, "t.hip")
    assert reason.startswith("the tile count 'n' (line 4) depends on blockIdx.x or threadIdx")


@pytest.mark.parametrize("count, params", [
    ("T + XthreadIdx.y", "float* o, int T, Dims XthreadIdx"),
    ("T + _blockIdx.x", "float* o, int T, Dims _blockIdx"),
    ("T + _threadIdx.y", "float* o, int T, Dims _threadIdx"),
    ("T + _blockIdx", "float* o, int T, int _blockIdx"),
])
def test_names_that_only_end_like_the_block_or_thread_index_are_not_them(count, params):
    assert rules_and_reasons("struct Dims { int x, y; };\n" + loop(count=count, params=params)) == []


def test_the_last_declaration_before_the_loop_gives_its_type_even_right_against_it():
    code = loop(var="t = blockIdx.x", before="  { long long t = 0; o[0] = t; }\n  unsigned t;").replace("unsigned t;  for", "unsigned t;for")
    assert "unsigned t;for (" in code
    analysis, k = kernel_of(code)
    assert k.tile_loop.index_type == "unsigned" and k.hazards == ()
