"""Parse tolerance: what tree-sitter cannot parse is kept with its place; kernels clear of it are analysed
and rewritten, kernels that touch it are refused with file:line:col, and the output may carry the input's
errors but no new one."""

import json

import pytest
from click.testing import CliRunner

from swzc.commands.cli import main
from swzc.rewrite.edits import Edit, moved, rewrite
from swzc.core.errors import ExitCode, SwzcError
from swzc.frontend.source import _parser, error_nodes, load_bytes, parse

KERNEL = """\
__global__ void tile2d(const float* a, float* b, int n) {
  int row = blockIdx.y * 16 + threadIdx.y;
  int col = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += a[row * n + k] * a[k * n + col];
  b[row * n + col] = acc;
}
"""

LAUNCH = """\
void run(const float* a, float* b) {
  tile2d<<<dim3(256, 256), dim3(16, 16)>>>(a, b, 4096);
}
"""

# a second kernel, launched, clear of any error
OTHER = KERNEL.replace("tile2d", "other") + LAUNCH.replace("tile2d", "other").replace("run(", "run_other(")

# host code nvcc takes and tree-sitter does not: `new T*[n]`
HOST_ERROR = """\
float** rows(int n) {
  float** p = new float*[n];
  return p;
}
"""


def run(tmp_path, text, *args):
    path = tmp_path / "k.cu"
    path.write_text(text)
    out = tmp_path / "out.cu"
    result = CliRunner().invoke(main, ["rewrite", str(path), "-o", str(out), "--swizzle", "grouped:8", "--no-compile", "--json", *args])
    doc = json.loads(result.stdout) if result.stdout.startswith("{") else None
    return result, doc, out


def statuses(doc):
    return {k["name"]: (k["status"], k["reason"]) for k in doc["kernels"]}


def test_last_line_without_newline_is_complete():
    """A file that ends in a directive with no newline (as a whole benchmark suite does) parses clean."""
    src = load_bytes("k.cu", (KERNEL + LAUNCH + "#include <suite.c>").encode())
    assert src.errors == ()
    assert not parse(b"int x;\n#include <a.c>").root_node.has_error


def test_blanks_after_an_include_path_parse_clean():
    src = load_bytes("k.cu", b"#include <stdlib.h> \n#include \"x.h\"\t\r\n" + KERNEL.encode())
    assert src.errors == () and [n.type for n in src.tree.root_node.children][:2] == ["preproc_include", "preproc_include"]


def test_hidden_missing_token_is_found_where_it_is():
    """tree-sitter keeps some MISSING tokens out of every node's children: the finder still places them."""
    data = b"/* licence */\nint x;\n#include <suite.c>"  # parsed as is, the include's newline is a hidden MISSING
    assert error_nodes(_parser().parse(data).root_node) == [(len(data), len(data), None)]
    src = load_bytes("k.cu", b"/* licence */\n#ifdef B\nint x;\n")  # a visible MISSING #endif
    assert src.errors and src.errors[0].line > 1  # not 1:1: the licence comment is never blamed


def test_error_in_host_code_far_from_kernels_is_tolerated(tmp_path):
    result, doc, out = run(tmp_path, KERNEL + HOST_ERROR + LAUNCH)
    assert result.exit_code == 0, result.output
    assert statuses(doc)["tile2d"][0] == "rewritten"
    assert [(e["line"], e["col"]) for e in doc["syntax_errors"]] == [(9, 24)]
    assert "swzc_block" in out.read_text() and "new float*[n]" in out.read_text()


def test_tolerated_errors_are_listed_in_the_text_summary(tmp_path):
    (tmp_path / "k.cu").write_text(KERNEL + HOST_ERROR + LAUNCH)
    result = CliRunner().invoke(main, ["rewrite", str(tmp_path / "k.cu"), "--no-compile"])
    assert "could not be parsed" in result.output and "k.cu:9:24" in result.output


def test_error_inside_a_kernel_refuses_that_kernel_only(tmp_path):
    broken = KERNEL.replace("tile2d", "broken").replace("float acc = 0.0f;", "float acc = 0.0f; acc @ 2;")
    text = KERNEL + broken + LAUNCH + "void run2(const float* a, float* b) { broken<<<dim3(8, 8), dim3(16, 16)>>>(a, b, 128); }\n"
    result, doc, out = run(tmp_path, text)
    assert result.exit_code == 0, result.output
    got = statuses(doc)
    assert got["tile2d"][0] == "rewritten"
    assert got["broken"][0] == "refused" and "k.cu:11:" in got["broken"][1] and "cannot parse" in got["broken"][1]
    assert "acc @ 2" in out.read_text()


def test_error_in_a_helper_the_kernel_calls_refuses_it(tmp_path):
    helper = "__device__ int where(int i) { int x = i; x @ 1; return blockIdx.x + x; }\n"
    kernel = KERNEL.replace("b[row * n + col] = acc;", "b[where(row) * n + col] = acc;")
    result, doc, _ = run(tmp_path, helper + kernel + LAUNCH + OTHER)
    assert statuses(doc)["tile2d"][0] == "refused" and statuses(doc)["other"][0] == "rewritten"
    assert "k.cu:1:" in statuses(doc)["tile2d"][1]


def test_error_at_the_launch_site_refuses_the_kernel(tmp_path):
    launch = "void run(const float* a, float* b) {\n  tile2d<<<dim3(256, 256), dim3(16, 16)>>>(a, b, new float*[4] == 0);\n}\n"
    result, doc, _ = run(tmp_path, KERNEL + launch + OTHER)
    assert statuses(doc)["tile2d"][0] == "refused" and statuses(doc)["other"][0] == "rewritten"


def test_kernel_tree_sitter_cannot_parse_at_all_is_named(tmp_path):
    # a condition the build does not decide (the host and device passes differ): no branch can be chosen
    hidden = "#ifdef __CUDA_ARCH__\n__global__ void wide(float* a, int n) {\n#else\n__global__ void wide(float* a) {\n#endif\n  a[blockIdx.x] = 0.0f;\n}\n"
    result, doc, _ = run(tmp_path, KERNEL + LAUNCH + hidden)
    got = statuses(doc)
    assert got["wide"][0] == "refused" and "cannot be parsed" in got["wide"][1]
    assert got["tile2d"][0] == "rewritten"


def test_no_kernel_clear_of_errors_is_a_syntax_error(tmp_path):
    broken = KERNEL.replace("float acc = 0.0f;", "float acc = 0.0f; acc @ 2;")
    result, doc, out = run(tmp_path, broken + LAUNCH)
    assert result.exit_code == ExitCode.BAD_INPUT
    assert "k.cu:4:" in result.stderr and "syntax error" in result.stderr
    assert not out.exists()


def test_rewrite_keeps_the_input_errors_moved_by_the_edits():
    src = load_bytes("k.cu", (KERNEL + HOST_ERROR).encode())
    assert len(src.errors) == 1
    new = rewrite(src, [Edit.insert(0, "// a line in front\n")])
    assert [(e.line, e.what) for e in new.errors] == [(src.errors[0].line + 1, src.errors[0].what)]


def test_rewrite_refuses_an_edit_that_adds_an_error():
    src = load_bytes("k.cu", (KERNEL + HOST_ERROR).encode())
    at = (KERNEL + HOST_ERROR).index("float acc")
    with pytest.raises(SwzcError) as caught:
        rewrite(src, [Edit.insert(at, "int oops = (;\n")])
    assert caught.value.code == ExitCode.CHECK_FAILED and "introduced a syntax error" in caught.value.message


def test_moved_counts_insertions_before_a_byte_but_not_at_a_range_end():
    edits = [Edit.insert(10, "abc"), Edit.replace(20, 25, "x")]
    assert moved(edits, 5) == 5
    assert moved(edits, 10) == 13 and moved(edits, 10, before=False) == 10
    assert moved(edits, 25) == 24 and moved(edits, 30) == 29


def test_a_class_template_definition_is_not_read_as_an_instantiation():
    """Only `template class X<…>;` is read past: a definition, a specialisation and a member template stay."""
    data = (b"template <class T> class Box { public: T v; };\n"
            b"template <> class Box<char> { public: int w; };\n"
            b"template class Box<int>;\n"
            b"struct S { template <class T> T get() const { return T(); } };\n")
    src = load_bytes("k.cu", data)
    assert src.errors == ()
    kinds = [n.type for n in src.tree.root_node.named_children]
    assert kinds == ["template_declaration", "template_declaration", "struct_specifier"], kinds
    assert b"public: int w;" in src.tree.root_node.named_children[1].text
    assert b"template <class T> T get()" in src.tree.root_node.named_children[2].text
    # an instantiation with no semicolon of its own (a macro's body) is left as it is, not read on into a kernel
    data = b"#define INST(T) template struct Acc<T>\n" + KERNEL.encode()
    src = load_bytes("k.cu", data)
    assert src.errors == () and src.tree.root_node.text == data


def test_blanking_never_reaches_across_a_line_end():
    """A macro whose body ends in `]` or `)` before a __device__ function keeps its body and the function."""
    data = b"#define AT(p, i) (p)[i]\n__device__ int f(int* p) { return AT(p, 0); }\n#define G(x) (x)\n__device__ int g() { return 1; }\n"
    src = load_bytes("k.cu", data)
    assert src.errors == () and src.tree.root_node.text == data


@pytest.mark.parametrize("construct", [
    "struct __align__(16) Pair { float a, b; };\n",
    "template <typename T> __device__ T* smem() { extern __shared__ __align__(sizeof(T)) unsigned char s[]; return (T*)s; }\n",
    "void CUDART_CB done(void* data) {}\n",
    "__global__ __maxnreg__(64) void capped(float* x) { x[0] = 1.f; }\n",
    "template <class M> __device__ int g() { auto a = typename M::Tag{}; return h(typename M::Tag{}, 2); }\n",
    "#if defined(X) and not defined(Y) or (Z bitand 1)\nint a;\n#elif not_eq_ or Q\nint b;\n#endif\n",
    "void f() { auto l = [=] __device__ (int i) { return i; }; }\n",
    "void g() { auto l = [=](int i) __host__ __device__ { return i; }; }\n",
    # explicit instantiations of a class template, and their extern declarations
    "template <typename T> struct Acc { T v; };\ntemplate struct Acc<float>;\nextern template struct Acc<int>;\n",
    "namespace ns { template <class T, int N> class Buf { T x[N]; }; }\ntemplate class ns::Buf<\n    double, 4>;\n",
])
def test_spellings_nvcc_takes_parse_clean(construct):
    src = load_bytes("k.cu", (construct + KERNEL).encode())
    assert src.errors == (), construct
    assert src.tree.root_node.children[-1].start_point.row == construct.count("\n")  # every line where it was
    assert src.data.startswith(construct.encode())  # the file keeps them


# ---- a broken parse read again as the compiler reads it ------------------------------------------------------

SPLIT_HEADER = """\
#ifdef PINNED
static void fill(float* dst, int n, bool pinned)
#else
static void fill(float* dst, int n)
#endif
{
  for (int i = 0; i < n; ++i) dst[i] = 0.5f;
}
"""


def test_an_if_splitting_a_host_function_header_is_read_with_the_branch_the_build_takes(tmp_path):
    result, doc, out = run(tmp_path, SPLIT_HEADER + KERNEL + LAUNCH)
    assert result.exit_code == 0 and doc["syntax_errors"] == [], result.output
    assert statuses(doc)["tile2d"][0] == "rewritten"
    assert any("#if directive" in n for n in doc["notes"])
    assert out.read_text().startswith(SPLIT_HEADER)  # the file keeps every branch


def test_defines_choose_the_branch_that_is_read(tmp_path):
    from swzc.pipeline.driver import analyze_file
    from swzc.frontend.preprocess import CompileContext

    (tmp_path / "k.cu").write_text(SPLIT_HEADER + KERNEL + LAUNCH)
    ctx, _ = analyze_file(str(tmp_path / "k.cu"), context=CompileContext(defines=(("PINNED", "1"),)))
    src = ctx.src
    kept = [src.data[a:b] for a, b in src.blanked]
    assert any(b"fill(float* dst, int n)" in k for k in kept) and not any(b"bool pinned" in k for k in kept)


def test_a_branch_set_aside_that_reads_the_block_index_refuses_the_kernel(tmp_path):
    kernel = KERNEL.replace("  int col = blockIdx.x * 16 + threadIdx.x;\n",
                            "#if WIDE\n  int col = blockIdx.x * 32 + threadIdx.x; {\n#else\n  int col = blockIdx.x * 16 + threadIdx.x; {\n#endif\n")
    kernel = kernel.replace("  b[row * n + col] = acc;\n", "  b[row * n + col] = acc; }\n")
    result, doc, _ = run(tmp_path, kernel + LAUNCH + OTHER)
    assert statuses(doc)["tile2d"][0] == "refused" and "set aside" in statuses(doc)["tile2d"][1]
    assert statuses(doc)["other"][0] == "rewritten"


def test_statement_macros_without_a_semicolon_are_read_as_statements(tmp_path):
    timing = "#define TIC auto t0_ = clock();\n#define TOC(what) printf(\"%s %ld\\n\", what, clock() - t0_);\n"
    launch = LAUNCH.replace("  tile2d<<<", "  TIC\n  tile2d<<<").replace("4096);\n", "4096);\n  TOC(\"tile2d\")\n")
    result, doc, _ = run(tmp_path, timing + KERNEL + launch)
    assert doc["syntax_errors"] == [] and statuses(doc)["tile2d"][0] == "rewritten", result.output


def test_a_condition_the_build_does_not_decide_is_left_alone(tmp_path):
    undecided = SPLIT_HEADER.replace("#ifdef PINNED", "#ifdef __CUDA_ARCH__")
    result, doc, _ = run(tmp_path, KERNEL + LAUNCH + undecided)
    assert doc["syntax_errors"] and statuses(doc)["tile2d"][0] == "rewritten"  # tolerated, not read as one branch


# torch-extension glue at the end of a file: macro uses at file scope that tree-sitter cannot parse, after
# which it wraps the whole file, kernels included, in one ERROR node
BINDINGS = ("".join(f"BIND(f{i}, torch::kFloat32, float, {i})\n" for i in range(4))
            + "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n" + "".join(f"  EXT(bind_f{i})\n" for i in range(4)) + "}\n")


def test_definitions_before_a_late_failure_are_analysed(tmp_path):
    text = "#include <algorithm>\n" + KERNEL + LAUNCH + BINDINGS
    assert parse(text.encode()).root_node.type == "ERROR"  # the case: everything inside one ERROR node
    result, doc, out = run(tmp_path, text)
    assert result.exit_code == 0, result.output
    assert statuses(doc)["tile2d"][0] == "rewritten"
    assert doc["syntax_errors"] and min(e["line"] for e in doc["syntax_errors"]) == 12  # the glue, not line 1
    assert out.read_text().endswith(BINDINGS)


def test_a_helper_whose_definition_did_not_parse_refuses_the_kernels_that_call_it(tmp_path):
    helper = "#include \"absent.h\"\n__device__ int where(int i) ATTRS(4) { return blockIdx.x * i; }\n"
    kernel = KERNEL.replace("b[row * n + col] = acc;", "b[where(row) * n + col] = acc;")
    result, doc, _ = run(tmp_path, helper + kernel + LAUNCH + OTHER)
    assert statuses(doc)["other"][0] == "rewritten", result.output
    assert statuses(doc)["tile2d"][0] == "refused" and "calls where" in statuses(doc)["tile2d"][1]
    # the body's statements may parse on their own, the block-index read among them, and only the head fail
    body = "#include \"absent.h\"\n__device__ int where(int i) ATTRS(4) {\n  int b = blockIdx.x;\n  return b * i;\n}\n"
    result, doc, _ = run(tmp_path, body + kernel + LAUNCH + OTHER)
    assert statuses(doc)["tile2d"][0] == "refused" and "calls where" in statuses(doc)["tile2d"][1], result.output
    # a helper of that name that is only called, not defined, in the part that did not parse is no reason
    # (declared there, and defined in no file swzc reads, it would be: see test_header_helpers.py)
    called = "void host() { int k = where(blockIdx.x) ATTRS(2); }\n"
    result, doc, _ = run(tmp_path, "#include \"absent.h\"\n" + called + kernel + LAUNCH + OTHER)
    assert doc["syntax_errors"] and statuses(doc)["tile2d"][0] == "rewritten", result.output


def test_a_kernel_that_reads_the_block_index_only_through_an_unparsed_helper_is_refused(tmp_path):
    # no read of its own to rewrite: refused all the same, since the helper's read stays as it was
    helper = "#include \"absent.h\"\n__device__ int where(int i) ATTRS(4) { return blockIdx.x * i; }\n"
    kernel = ("__global__ void tile2d(float* b) { b[where(threadIdx.x)] = 1.0f; }\n"
              "void run(float* b) { tile2d<<<dim3(256, 256), dim3(16, 16)>>>(b); }\n")
    result, doc, _ = run(tmp_path, helper + kernel + OTHER)
    assert statuses(doc)["tile2d"][0] == "refused" and "calls where" in statuses(doc)["tile2d"][1], result.output
    # the head that did not parse is not a declaration of a function defined elsewhere either
    assert "defined in no file" not in statuses(doc)["tile2d"][1]
    result, doc, _ = run(tmp_path, helper.replace("blockIdx.x * i", "i") + kernel.replace("b[where(", "b[blockIdx.x + 256 * blockIdx.y + where(") + OTHER)
    assert statuses(doc)["tile2d"][0] == "rewritten", result.output


def test_qualifier_macros_are_read_as_the_compiler_expands_them(tmp_path):
    # defined two ways (nothing, or __restrict__) and used where the grammar wants a declarator
    macro = "#ifdef NO_RESTRICT\n#define RESTRICT\n#else\n#define RESTRICT __restrict__\n#endif\n"
    kernel = KERNEL.replace("  float acc = 0.0f;\n", "  const float * RESTRICT src = a;\n  float acc = 0.0f;\n").replace(
        "acc += a[row", "acc += src[row")
    result, doc, out = run(tmp_path, macro + kernel + LAUNCH)
    assert doc["syntax_errors"] == [] and statuses(doc)["tile2d"][0] == "rewritten", result.output
    assert "const float * RESTRICT src = a;" in out.read_text()
    # __shared__ through a macro
    shared = KERNEL.replace("  float acc = 0.0f;\n", "  SHMEM float tile[16];\n  tile[threadIdx.x % 16] = 0.f;\n  float acc = tile[0];\n")
    result, doc, out = run(tmp_path, "#define SHMEM __shared__\n" + shared + LAUNCH)
    assert doc["syntax_errors"] == [] and statuses(doc)["tile2d"][0] == "rewritten", result.output
    # a macro that expands to more than qualifiers is not read as nothing
    result, doc, _ = run(tmp_path, "#define RESTRICT __restrict__ float\n" + kernel + LAUNCH + OTHER)
    assert doc["syntax_errors"] and statuses(doc)["tile2d"][0] == "refused"


def test_helpers_spelled_with_a_device_macro_parse_and_are_followed_as_device_code(tmp_path):
    """`#define DEV __forceinline__ __device__` (and `extern "C"`, `__grid_constant__` macros) parse as the
    compiler expands them; every function a kernel calls is device code whatever spells its qualifiers, so a
    helper chain behind such a macro is followed, and rewritten with the kernel where it may be."""
    macros = '#define DEV __forceinline__ __device__\n#define EXPORT extern "C"\n#define GRID_CONST __grid_constant__\n'
    helpers = "static DEV int pick(int c) { return c + (blockIdx.y & 0); }\nstatic DEV int mid(int c) { return pick(c) * 1; }\n"
    kernel = KERNEL.replace("__global__ void tile2d(const float* a, float* b, int n)",
                            "EXPORT __global__ void tile2d(const float* a, float* b, GRID_CONST const int n)") \
        .replace("b[row * n + col] = acc;", "b[mid(row) * n + col] = acc;")
    result, doc, out = run(tmp_path, macros + helpers + kernel + LAUNCH)
    assert doc["syntax_errors"] == [] and statuses(doc)["tile2d"][0] == "rewritten", result.output
    assert "static DEV int pick(int c) { return c + (swzc_grouped8_2d(" in out.read_text()  # the helper moved with it
    result, doc, _ = run(tmp_path, macros + helpers.replace("static DEV", "DEV") + kernel + LAUNCH)
    assert statuses(doc)["tile2d"][0] == "refused" and "external linkage" in statuses(doc)["tile2d"][1], result.output


@pytest.mark.parametrize("macro, head", [
    ("#define KBOUNDS __launch_bounds__(256)\n", "__global__ KBOUNDS void tile2d("),
    ("#define LB(n, m) __launch_bounds__(n, m)\n", "__global__ LB(256,\n 2) void tile2d("),
    ("#define LB(n) static __launch_bounds__(n)\n", "__global__ void LB(256) tile2d("),
])
def test_launch_bounds_spelled_through_a_macro_parse(tmp_path, macro, head):
    kernel = KERNEL.replace("__global__ void tile2d(", head)
    result, doc, out = run(tmp_path, macro + kernel + LAUNCH)
    assert doc["syntax_errors"] == [] and statuses(doc)["tile2d"][0] == "rewritten", result.output
    assert head in out.read_text()
    # a macro that expands to more than bounds and qualifiers is not read as nothing
    result, doc, _ = run(tmp_path, macro.replace("__launch_bounds__", "int __launch_bounds__") + kernel + LAUNCH + OTHER)
    assert doc["syntax_errors"] and statuses(doc)["tile2d"][0] == "refused", result.output


def test_statement_macros_spanning_lines_or_made_of_other_ones_are_read_as_statements(tmp_path):
    macros = ("#define CASE(n, T) if (sizeof(T) == (n)) { puts(#T); }\n"
              "#define ALL(T) CASE(4, T) CASE(8, T)\n"
              "#define BIND(tag, T, n) void bind_##tag(T* x) { ALL(T) }\n")
    uses = "BIND(f32, float,\n     1)\nBIND(f64, double, /* eight */ 8)\nvoid check() {\n  ALL(float)\n  ALL(int)\n}\n"
    result, doc, _ = run(tmp_path, macros + KERNEL + LAUNCH + uses)
    assert result.exit_code == 0 and statuses(doc)["tile2d"][0] == "rewritten", result.output
    assert min(e["line"] for e in doc["syntax_errors"]) == 16  # only from the use with a comment in its arguments


def test_a_statement_macro_that_reads_the_block_index_is_not_read_past(tmp_path):
    macro = "#define GRAB_ROW row = blockIdx.y * 16 + threadIdx.y;\n"
    kernel = KERNEL.replace("  int row = blockIdx.y * 16 + threadIdx.y;\n", "  int row;\n  GRAB_ROW\n")
    result, doc, _ = run(tmp_path, macro + kernel + LAUNCH + OTHER)
    assert statuses(doc)["other"][0] == "rewritten", result.output
    assert statuses(doc)["tile2d"][0] == "refused"  # its block-index read is inside the macro: never swizzled


def test_which_unparsed_device_definitions_may_read_the_block_index():
    from swzc.analysis.hazards import _device_definitions

    assert _device_definitions("HOST_DEVICE_INLINE\nint div_ceil(int a, int b) { return (a + b - 1) / b; }") == []
    assert _device_definitions("__device__ int where(int i) ATTRS(4) { return blockIdx.x * i; }")[0] == "where"
    assert _device_definitions("__device__ int where(int i) ATTRS(4) {\n  int b = i;")[0] == "where"  # body goes on
    assert _device_definitions("__device__ int where(int i);") == []  # declared, not defined
    assert _device_definitions("__device__ int w(int i) { if (i) { return 1; } return 2; } int z = blockIdx.x;") == []
    # a body that reads the block index is device code, whatever macro its head is spelled with
    assert _device_definitions("DEV\n  void run(float* c) const { c[blockIdx.x] += 1.f; }") == ["run"]
    assert _device_definitions("QUAL int w(int i) { if (i) { return 1; } return blockIdx.y; }") == ["w"]
    assert _device_definitions("QUAL int w(int i) {\n  int b = i;") == []  # an unclosed body needs a device word


def test_a_member_helper_spelled_with_any_device_macro_that_did_not_parse_refuses_its_callers(tmp_path):
    """`#define DEV __forceinline__ __device__` on a member function after another member: the grammar fails on
    the helper, whose block-index read would stay in the hardware's order under any swizzle."""
    helper = ("#define DEV __forceinline__ __device__\nstruct Op {\n  static int twice(int x) { return 2 * x; }\n  DEV\n"
              "  void run(float* c, int n) const { c[blockIdx.y * 16 * n + blockIdx.x * 16] += 1.f; }\n};\n")
    kernel = KERNEL.replace("  b[row * n + col] = acc;\n", "  b[row * n + col] = acc;\n  Op{}.run(b, n);\n")
    assert load_bytes("k.cu", helper.encode()).errors  # the premise
    result, doc, _ = run(tmp_path, helper + kernel + LAUNCH + OTHER)
    assert statuses(doc)["other"][0] == "rewritten", result.output
    assert statuses(doc)["tile2d"][0] == "refused" and "calls run" in statuses(doc)["tile2d"][1], statuses(doc)["tile2d"]


def test_a_statement_macro_that_reads_the_block_index_through_another_is_not_read_past(tmp_path):
    macro = "#define GRAB_ROW row = blockIdx.y * 16 + threadIdx.y;\n#define SETUP GRAB_ROW int unused_ = 0;\n"
    kernel = KERNEL.replace("  int row = blockIdx.y * 16 + threadIdx.y;\n", "  int row;\n  SETUP\n")
    result, doc, _ = run(tmp_path, macro + kernel + LAUNCH + OTHER)
    assert statuses(doc)["other"][0] == "rewritten", result.output
    assert statuses(doc)["tile2d"][0] == "refused"


def test_a_dependent_type_called_as_a_function_after_typename_parses():
    """CUB's collectives are called as `typename K::BlockScanT(smem).InclusiveScan(x, x)`: nvcc takes the
    `typename`, the grammar does not.  It is read past there (the rest is a call), and nowhere else."""
    body = ("template <typename K, typename T>\n__global__ void scan(T* x) {\n"
            "  __shared__ typename K::Storage smem;\n  typename K::value_type v = x[blockIdx.x];\n"
            "  typename K::BlockScanT(smem).InclusiveScan(v, v);\n"
            "  typename K::template Op<T, 4>::Reduce(smem).Sum(v);\n  x[blockIdx.x] = v;\n}\n")
    src = load_bytes("k.cu", body.encode())
    assert src.errors == ()
    view = src.tree.root_node.text.decode()
    assert view.count("typename") == 4 and "template <typename K, typename T>" in view
    # a function pointer type keeps it
    assert b"typename" in load_bytes("k.cu", b"using F = typename K::R (*)(int);\n").tree.root_node.text


def test_a_kernel_spelled_through_a_macro_for_global_is_named_and_refused(tmp_path):
    """`#define GLOBAL __global__ __launch_bounds__(256)` then `GLOBAL void k(…)`: the grammar fails on the head.
    The kernel is refused by name (a file of nothing else is still bad input), not taken for a file with no
    kernel; a kernel clear of it is analysed."""
    macro = "#define GLOBAL __global__ __launch_bounds__(256)\n"
    spelled = ("GLOBAL void spelled(float* x) { x[blockIdx.x] = 1; }\n"
               "template <int B>\nGLOBAL void\nsplit(float* x) { x[blockIdx.x] = B; }\n"
               "GLOBAL __launch_bounds__(128, 2) void bounded(float* x) { x[blockIdx.x] = 2; }\n")
    result, doc, _ = run(tmp_path, macro + spelled + KERNEL + LAUNCH)
    status = statuses(doc)
    assert status["tile2d"][0] == "rewritten", result.output
    assert status["spelled"][0] == "refused" and "through the macro GLOBAL" in status["spelled"][1]
    assert status["split"][0] == "refused" and status["bounded"][0] == "refused"
    result, doc, _ = run(tmp_path, macro + spelled)
    assert result.exit_code == 2 and doc["exit_code"] == 2 and doc["syntax_errors"]


@pytest.mark.parametrize("pragma", ["#pragma unroll 4", "  #  pragma unroll", "NO_UNROLL", '_Pragma("unroll 1")'])
def test_a_pragma_between_a_loop_and_its_unbraced_body_parses_and_stays_with_its_loop(tmp_path, pragma):
    """`for (…)\n#pragma unroll\n  for (…) stmt;` (and a macro that is only `_Pragma(…)`): parsed, and the
    swizzle's line goes above the pragma, never between it and the loop it belongs to."""
    macro = '#define NO_UNROLL _Pragma("unroll 1")\n'
    kernel = KERNEL.replace("  for (int k = 0; k < n; ++k) acc += a[row * n + k] * a[k * n + col];\n",
                            f"{pragma}\n  for (int k = 0; k < n; ++k)\n{pragma}\n    for (int j = 0; j < 1; ++j)\n"
                            "      acc += a[row * n + k] * a[k * n + col];\n")
    kernel = kernel.replace("  int row = blockIdx.y * 16 + threadIdx.y;\n  int col = blockIdx.x * 16 + threadIdx.x;\n", "")
    kernel = kernel.replace("a[row * n + k] * a[k * n + col]",
                            "a[(blockIdx.y * 16 + threadIdx.y) * n + k] * a[k * n + blockIdx.x * 16 + threadIdx.x]")
    kernel = kernel.replace("b[row * n + col] = acc;", "b[(blockIdx.y * 16 + threadIdx.y) * n + blockIdx.x * 16 + threadIdx.x] = acc;")
    result, doc, out = run(tmp_path, macro + kernel + LAUNCH)
    assert result.exit_code == 0 and doc["syntax_errors"] == [], result.output
    assert statuses(doc)["tile2d"][0] == "rewritten"
    lines = out.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if "swzc_block =" in line)
    assert lines[at + 1].strip() == pragma.strip() and lines[at + 2].lstrip().startswith("for (int k"), lines[at - 1:at + 3]


def test_a_kernel_that_parsed_clean_inside_a_stretch_tree_sitter_gave_up_on_is_refused(tmp_path):
    """A struct the grammar never sees close (a constructor spelled through an attribute macro) makes one
    ERROR node of everything after it; a kernel in there parses clean but is found by nothing that walks
    the file's definitions.  It is refused with its line, never silently dropped (exit 0, no kernel)."""
    broken = ("#include \"absent.h\"\nstruct P {\n  short a;\n  double b;\n  HD constexpr P(short a, double b)\n"
              "    : a(a), b(b)\n  {}\n};\nvoid host() {\n  {\n  }\n}\n")  # HD: a macro from a header swzc cannot find
    swallowed = "__global__ void swallowed(unsigned* d) { d[blockIdx.x] = 1; }\nvoid tail() {\n  {\n  }\n}\n"
    src = load_bytes("k.cu", (broken + swallowed).encode())
    assert any(n.is_error and b"swallowed" in n.text for n in src.tree.root_node.children)  # the premise
    result, doc, _ = run(tmp_path, KERNEL + LAUNCH + broken + swallowed)
    status = statuses(doc)
    assert status["tile2d"][0] == "rewritten", result.output
    assert status["swallowed"][0] == "refused" and "lies in a stretch of the file swzc cannot parse (lines 12-" in \
        status["swallowed"][1], status["swallowed"]
    (kernel,) = [k for k in doc["kernels"] if k["name"] == "swallowed"]
    assert kernel["line"] == (KERNEL + LAUNCH + broken).count("\n") + 1
    result, doc, _ = run(tmp_path, broken + swallowed)
    assert result.exit_code == 2 and doc["exit_code"] == 2 and doc["syntax_errors"]


def test_every_global_in_the_file_heads_a_kernel_found_or_one_refused(tmp_path):
    """Heads the grammar cannot take (a launch-bounds macro, `__maxnreg__`), and a kernel nested in a definition
    that did not parse (a namespace opened by a macro), are refused by name; a `__global__` in a comment, a
    string, a prototype or an explicit instantiation is not a kernel."""
    heads = ("#include \"bounds.h\"\n"  # not found: what LB and CAP expand to is not known
             "__global__ LB(128) void bounded(float* o) { o[blockIdx.x] = 1.f; }\n"
             "__global__ CAP(64) __launch_bounds__(64) void capped(float* o) { o[blockIdx.x] = 2.f; }\n"
             "#define NS_BEGIN namespace outer {\n#define NS_END }\nNS_BEGIN\nnamespace a::b {\n"
             "__global__ void nested(float* o) { o[blockIdx.x] = 3.f; }\n}\nNS_END\n")
    not_kernels = ("// a __global__ void commented(float*) in a comment\n"
                   "static const char* text = \"__global__ void quoted(\";\n"
                   "__global__ void elsewhere(const float* a, float* b, int n);\n"
                   "template <typename T> __global__ void tk(T* o) { o[blockIdx.x] = 3; }\n"
                   "template __global__ void tk<float>(float*);\n"
                   "template <typename T> __global__ void declared_only(T*);\n"
                   "template __global__ void declared_only(float*);\n")  # defined in a header: an instantiation
    result, doc, _ = run(tmp_path, not_kernels + KERNEL + LAUNCH + heads)
    status = statuses(doc)
    assert status["tile2d"][0] == "rewritten", result.output
    assert sorted(status) == ["bounded", "capped", "nested", "tile2d", "tk"], status
    for name in ("bounded", "capped", "nested"):
        assert status[name][0] == "refused" and ("not one swzc could parse as a kernel" in status[name][1]
                                                 or "its definition cannot be parsed" in status[name][1]), status[name]
    lines = {k["name"]: k["line"] for k in doc["kernels"]}
    text = not_kernels + KERNEL + LAUNCH + heads
    assert lines["bounded"] == text.splitlines().index("__global__ LB(128) void bounded(float* o) { o[blockIdx.x] = 1.f; }") + 1
    (tmp_path / "out.cu").unlink()
    result, doc, _ = run(tmp_path, heads)
    assert result.exit_code == 2 and doc["exit_code"] == 2 and doc["syntax_errors"]  # kernels, and none that parsed: bad input, not "nothing to do"
    # --json prints the error as a document too: every syntax error, and each kernel with why it was refused
    assert sorted(k["name"] for k in doc["kernels"]) == ["bounded", "capped", "nested"]
    assert doc["error"].startswith(str(tmp_path / "k.cu")) and len(doc["syntax_errors"]) >= 3
    assert not (tmp_path / "out.cu").exists()
    from swzc.analysis.hazards import _head_name
    assert _head_name(b"__global__ void k(int a) __attribute__((used)) {", 0) == "k"
    assert _head_name(b"__global__ void __launch_bounds__(256, 2) k(int a);", 0) == "k"
    assert _head_name(b" Y(a)\n__global__ void k(int a);", 0) == "Y"  # never read into the next kernel's head


def test_hip_dynamic_shared_is_read_as_the_declaration_it_expands_to(tmp_path):
    """`HIP_DYNAMIC_SHARED(float, tile);` (hip_runtime.h: `extern __shared__ float tile[];`) takes a type as an
    argument, which the grammar cannot: it is parsed as its expansion, in as many bytes, and the file keeps it."""
    kernel = KERNEL.replace("  float acc = 0.0f;\n", "  HIP_DYNAMIC_SHARED( float ,  tile);\n  float acc = 0.0f;\n")
    src = load_bytes("k.hip", kernel.encode())
    assert src.errors == ()
    (decl,) = [n for n in src.tree.root_node.children[0].child_by_field_name("body").named_children if n.type == "declaration"
               and b"tile" in n.text]
    assert decl.text.startswith(b"extern __shared__ float tile[]")
    # in as many bytes: what follows stands where the file has it
    body = src.tree.root_node.children[0].child_by_field_name("body")
    assert all(src.data[n.start_byte:n.end_byte] == n.text for n in body.named_children if b"tile[]" not in n.text)
    result, doc, out = run(tmp_path, kernel + LAUNCH)
    assert statuses(doc)["tile2d"][0] == "rewritten", result.output
    assert "  HIP_DYNAMIC_SHARED( float ,  tile);\n" in out.read_text()
