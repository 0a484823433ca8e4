"""A kernel that calls a device function another file holds: swzc rewrites only the file it is given, so a
helper that reads the block index from a header (or from a file swzc never reads) would go on reading the
block the hardware ran while the kernel reads the swizzled one.  Such kernels are refused, with where."""

import json

from click.testing import CliRunner

from swzc.commands.cli import main

KERNEL = """\
#include "helpers.cuh"
__global__ void tile2d(const float* a, float* b, int n) {
  int row = blockIdx.y * 16 + threadIdx.y;
  int col = blockIdx.x * 16 + threadIdx.x + shift(threadIdx.x);
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += a[row * n + k] * a[k * n + col];
  b[row * n + col] = acc;
}
__global__ void other(const float* a, float* b, int n) {
  int row = blockIdx.y * 16 + threadIdx.y;
  int col = blockIdx.x * 16 + threadIdx.x;
  b[row * n + col] = a[row * n + col];
}
void run(const float* a, float* b) {
  tile2d<<<dim3(256, 256), dim3(16, 16)>>>(a, b, 4096);
  other<<<dim3(256, 256), dim3(16, 16)>>>(a, b, 4096);
}
"""


def run(tmp_path, header, kernel=KERNEL, *args):
    (tmp_path / "helpers.cuh").write_text(header)
    path = tmp_path / "k.cu"
    path.write_text(kernel)
    result = CliRunner().invoke(main, ["rewrite", str(path), "-o", str(tmp_path / "out.cu"), "--swizzle", "grouped:8",
                                       "--no-compile", "--json", *args])
    doc = json.loads(result.stdout)
    return result, {k["name"]: (k["status"], k["reason"]) for k in doc["kernels"]}


def test_a_header_helper_that_reads_the_block_index_refuses_the_kernels_that_call_it(tmp_path):
    result, status = run(tmp_path, "#pragma once\n__device__ int shift(int c) { return blockIdx.x & 1; }\n")
    assert status["tile2d"][0] == "refused", result.output
    assert "calls shift (line 4), which helpers.cuh:2 defines and which reads the block index" in status["tile2d"][1]
    assert status["other"][0] == "rewritten"  # it calls nothing from the header


def test_one_that_does_not_is_no_reason(tmp_path):
    result, status = run(tmp_path, "__device__ int shift(int c) { return c & threadIdx.y; }\n"
                                   "__device__ int unused() { return blockIdx.x; }\n")
    assert status["tile2d"][0] == "rewritten", result.output


def test_through_another_header_function_a_macro_or_a_header_it_includes(tmp_path):
    through_function = ("__device__ int lane() { return blockIdx.y * 0; }\n"
                        "template <typename T> __device__ T shift(T c) { return c + lane(); }\n")
    result, status = run(tmp_path, through_function)
    assert status["tile2d"][0] == "refused", result.output
    assert "helpers.cuh:2, through lane," in status["tile2d"][1]
    result, status = run(tmp_path, "#define ROW (blockIdx.y % 2)\n__device__ int shift(int c) { return c + ROW; }\n")
    assert status["tile2d"][0] == "refused", result.output
    (tmp_path / "deeper.cuh").write_text("namespace d { struct S { __device__ static int shift(int c) { return blockIdx.z; } }; }\n"
                                         "__device__ int shift(int c) { return gridDim.x > 0 ? blockIdx.x : c; }\n")
    result, status = run(tmp_path, '#include "deeper.cuh"\n')
    assert status["tile2d"][0] == "refused" and "deeper.cuh:" in status["tile2d"][1], result.output


def test_a_definition_in_a_branch_the_compiler_never_takes_is_not_read(tmp_path):
    header = ("#if 0\n__device__ int shift(int c) { return blockIdx.x; }\n#else\n"
              "__device__ int shift(int c) { return c; }\n#endif\n")
    result, status = run(tmp_path, header)
    assert status["tile2d"][0] == "rewritten", result.output


def test_a_device_function_declared_and_defined_in_no_file_swzc_reads_refuses_its_callers(tmp_path):
    result, status = run(tmp_path, "__device__ int shift(int c);\n")
    assert status["tile2d"][0] == "refused", result.output
    assert "declared at helpers.cuh:1 and defined in no file swzc reads" in status["tile2d"][1]
    # declared in the file itself, defined below it: the file's own helper, rewritten with the kernel
    defined_later = KERNEL.replace('#include "helpers.cuh"\n', "__device__ int shift(int c);\n") + \
        "__device__ int shift(int c) { return c * 2; }\n"
    result, status = run(tmp_path, "", defined_later)
    assert status["tile2d"][0] == "rewritten", result.output
    # defined below through a macro that spells __device__: still defined here
    by_macro = KERNEL.replace('#include "helpers.cuh"\n', "#define HD __device__ __forceinline__\n__device__ int shift(int c);\n") + \
        "HD int shift(int c) { return c * 2; }\n"
    result, status = run(tmp_path, "", by_macro)
    assert status["tile2d"][0] == "rewritten", result.output
    # declared in the file, defined in the header: the header's body decides
    declared_here = KERNEL.replace('#include "helpers.cuh"\n', '__device__ int shift(int c);\n#include "helpers.cuh"\n')
    result, status = run(tmp_path, "__device__ int shift(int c) { return c + 1; }\n", declared_here)
    assert status["tile2d"][0] == "rewritten", result.output


def test_a_kernel_that_reads_the_block_index_only_through_the_header_is_refused_too(tmp_path):
    kernel = ('#include "helpers.cuh"\n__global__ void tile2d(float* b) { b[shift(threadIdx.x)] = 1.0f; }\n'
              "void run(float* b) { tile2d<<<dim3(256, 256), dim3(16, 16)>>>(b); }\n")
    result, status = run(tmp_path, "__device__ int shift(int c) { return blockIdx.x * 16 + c; }\n", kernel)
    assert status["tile2d"][0] == "refused", result.output


def test_a_header_swzc_cannot_find_is_an_assumption_it_states(tmp_path):
    kernel = KERNEL.replace('#include "helpers.cuh"', '#include "missing.cuh"')
    result, status = run(tmp_path, "", kernel)
    assert status["tile2d"][0] == "rewritten", result.output
    notes = json.loads(CliRunner().invoke(main, ["analyze", str(tmp_path / "k.cu"), "--json"]).stdout)["notes"]
    assert any('header "missing.cuh"' in n and "functions in it are taken not to read the block index" in n for n in notes)


def test_a_chain_of_header_functions_is_followed_to_its_end(tmp_path):
    header = ("__device__ int deepest() { return blockIdx.x; }\n__device__ int middle() { return deepest() + 1; }\n"
              "__device__ int shift(int c) { return c + middle(); }\n")
    result, status = run(tmp_path, header)
    assert status["tile2d"][0] == "refused" and "helpers.cuh:3, through middle," in status["tile2d"][1], result.output


def test_only_device_declarations_stand_for_another_file_s_code(tmp_path):
    # a host function declared and never defined is not device code a kernel runs
    result, status = run(tmp_path, "int shift(int c);\n")
    assert status["tile2d"][0] == "rewritten", result.output


# ---- member functions and function objects in the file itself ------------------------------------------------

MEMBER = """\
struct Op {
  int x;
  __device__ int lane(int c) const { return c + 0; }
  __device__ int shift(int c) const { return blockIdx.x & 1; }
};
"""


def refused_alone(tmp_path, kernel, *why):
    """tile2d is refused for each of `why`; other, which calls nothing, is rewritten."""
    result, status = run(tmp_path, "", kernel)
    assert status["tile2d"][0] == "refused" and all(w in status["tile2d"][1] for w in why), result.output
    assert status["other"][0] == "rewritten"


def rewritten(tmp_path, kernel):
    result, status = run(tmp_path, "", kernel)
    assert status["tile2d"][0] == "rewritten", result.output


def test_a_member_function_that_reads_the_block_index_refuses_the_kernels_that_call_it(tmp_path):
    """The analysis rewrites kernels and file-scope helpers, not member functions: a kernel calling one that
    reads the block index is refused (it was rewritten, and the member kept the hardware's block)."""
    kernel = MEMBER + KERNEL.replace('#include "helpers.cuh"\n', "").replace("shift(threadIdx.x)", "Op{}.shift(threadIdx.x)")
    refused_alone(tmp_path, kernel, "calls shift (line 8), a member function (line 4) that reads the block index")
    # one that does not read it is no reason; one that calls a helper that does is
    rewritten(tmp_path, kernel.replace("Op{}.shift(", "Op{}.lane("))
    helper = "__device__ int flip(int c) { return c ^ (blockIdx.y & 1); }\n"
    result, status = run(tmp_path, "", helper + kernel.replace("return c + 0;", "return flip(c);").replace("Op{}.shift(", "Op{}.lane("))
    assert status["tile2d"][0] == "refused" and "calls lane" in status["tile2d"][1], result.output
    result, status = run(tmp_path, "", kernel.replace("return c + 0;", "return shift(c);").replace("Op{}.shift(", "Op{}.lane("))
    assert status["tile2d"][0] == "refused" and "(line 3, through shift,)" in status["tile2d"][1], result.output


def test_an_object_called_as_a_function_where_an_operator_call_reads_the_block_index_is_refused(tmp_path):
    functor = "struct Pick {\n  __device__ int operator()(int c) const { return blockIdx.y + c; }\n};\n"
    kernel = (functor + KERNEL.replace('#include "helpers.cuh"\n', "").replace(
        "__global__ void tile2d(const float* a, float* b, int n) {", "template <class F>\n__global__ void tile2d(const float* a, float* b, int n, F pick) {")
        .replace("shift(threadIdx.x)", "pick(threadIdx.x)").replace("(a, b, 4096);\n  other", "(a, b, 4096, Pick{});\n  other"))
    refused_alone(tmp_path, kernel, "calls the object pick", "operator() (line 2)")
    rewritten(tmp_path, kernel.replace("return blockIdx.y + c;", "return c;"))
    # a member call that shares a local's name is not a call of that local (`int size = box.size();`)
    member = ("struct Box {\n  __device__ int size() const { return 4; }\n};\n" + functor + KERNEL.replace('#include "helpers.cuh"\n', "")
              .replace("  float acc = 0.0f;\n", "  Box box;\n  int size = box.size();\n  float acc = 0.0f * size;\n")
              .replace("shift(threadIdx.x)", "threadIdx.x"))
    rewritten(tmp_path, member)


def test_a_call_through_a_pointer_where_a_reading_helper_is_taken_as_a_value_is_refused(tmp_path):
    """`__device__ Fn fp = pick;` then `fp(c)` in the kernel: pick reads the block index and is never called by
    name, so nothing would rewrite it."""
    pointer = ("__device__ int pick(int c) { return blockIdx.y + c; }\ntypedef int (*Fn)(int);\n"
               "__device__ Fn fp = pick;\n")
    kernel = pointer + KERNEL.replace('#include "helpers.cuh"\n', "").replace("shift(threadIdx.x)", "fp(threadIdx.x)")
    refused_alone(tmp_path, kernel, "calls through fp (line 6), and pick, which reads the block index, is taken as a value (line 3)")
    # called by name only, it is the file's own helper, rewritten with the kernel; a value that reads nothing is no reason
    rewritten(tmp_path, kernel.replace("__device__ Fn fp = pick;", "__device__ Fn fp = 0;"))
    rewritten(tmp_path, kernel.replace("return blockIdx.y + c;", "return c;"))


def test_an_angled_include_is_read_from_the_include_folders_but_not_from_a_toolkits(tmp_path):
    """`#include <mylib/helpers.cuh>` is found, as the compiler finds it, in an -I folder; a folder that holds
    cuda_runtime.h is the toolkit's and is not read."""
    (tmp_path / "inc" / "mylib").mkdir(parents=True)
    (tmp_path / "inc" / "mylib" / "helpers.cuh").write_text("__device__ int shift(int c) { return c + (blockIdx.x & 1); }\n")
    kernel = KERNEL.replace('#include "helpers.cuh"', "#include <mylib/helpers.cuh>")
    result, status = run(tmp_path, "", kernel, "-I", str(tmp_path / "inc"))
    assert status["tile2d"][0] == "refused" and "which helpers.cuh:1 defines" in status["tile2d"][1], result.output
    (tmp_path / "inc" / "cuda_runtime.h").write_text("")
    result, status = run(tmp_path, "", kernel, "-I", str(tmp_path / "inc"))
    assert status["tile2d"][0] == "rewritten", result.output  # not read: the file's own assumption, as without -I
