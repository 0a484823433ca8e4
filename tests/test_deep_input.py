"""Input that nests deep or runs long: never a traceback, never an internal error, never time that grows
faster than the input.

A file whose syntax tree is more than MAX_NESTING levels deep is refused (exit 2, naming the place); every
walk over a tree within the limit is iterative or bounded, so the deepest file of each kind that fits is
read as any other.  Chains that do not nest in the tree (macros defined through macros, helpers calling
helpers, `auto` definitions, dependent loops, launches) give a normal result in time linear in their
length.  bench/deep_input.py runs the full sizes (10,000 kernels, the largest grid, 10,000 nested ifs).
"""

import hashlib
import random
import re
import shutil
import time
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from swzc.analysis import kernels as analysis

from swzc.verify import observe

from swzc.model import residency

from swzc.frontend import source

from swzc.analysis import splice_safety
from swzc.target import compile as compiling
from swzc.target import hw as hwmodels
from swzc.commands.cli import main
from swzc.analysis.context import FileContext
from swzc.frontend.preprocess import Preprocessed, Spans

LIMIT = source.MAX_NESTING

# A 2D kernel the L2 model ranks and the rewrite splices: the hostile part goes around or into its store.
GEMM = """\
#define TILE 16
__global__ void gemm(const float* A, const float* B, float* C, int n) {
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  OPEN C[INDEX] = acc; CLOSE
}
void run(const float* A, const float* B, float* C) { gemm<<<dim3(256, 256), dim3(TILE, TILE)>>>(A, B, C, 4096); }
"""


def gemm(around: str = "", index: str = "row * n + col", close: str = "", before: str = "") -> str:
    return before + GEMM.replace("OPEN", around).replace("INDEX", index).replace("CLOSE", close)


# Each grows one level of nesting (or two) per step; size -> the file.
NESTED = {
    "if": lambda n: gemm("if (n > 0) {\n" * n, close="}\n" * n),
    "blocks": lambda n: gemm("{" * n, close="}" * n),
    "namespaces": lambda n: "".join(f"namespace n{i} {{\n" for i in range(n)) + gemm() + "}\n" * n,
    "extern C": lambda n: 'extern "C" {\n' * n + gemm() + "}\n" * n,
    "namespaces around an error": lambda n: "".join(f"namespace n{i} {{\n" for i in range(n)) + "int broken = @;\n" + gemm() + "}\n" * n,
    "#if around an error": lambda n: "#if 1\n" * n + "int broken = @;\n" + gemm() + "#endif\n" * n,
    "#if": lambda n: "#if 1\n" * n + gemm() + "#endif\n" * n,
    "#ifdef in a body": lambda n: gemm("\n#ifndef NOPE\n" * n, close="\n#endif\n" * n),
    "#elif chain": lambda n: "#define X 3\n#if X == 0\nint v0;\n" + "".join(f"#elif X == {i}\nint v{i};\n" for i in range(1, n))
                             + "#endif\n" + gemm(),
    "#if condition": lambda n: "#if " + "(" * n + "1" + ")" * n + "\n" + gemm() + "#endif\n",
    "parentheses": lambda n: gemm(index="(" * n + "row * n + col" + ")" * n),
    "sum": lambda n: gemm(index="row * n + col" + " + 0" * n),
    "ternary": lambda n: gemm(index="n ? " * n + "row * n + col" + " : 0" * n),
    "subscripts": lambda n: gemm(index="(int)C[" * n + "row * n + col" + "]" * n),
    "calls": lambda n: gemm(index="min(" * n + "row * n + col" + ", n * n)" * n),
    "unbraced loops": lambda n: gemm("".join(f"for (int i{i} = 0; i{i} < 2; ++i{i})\n" for i in range(n))),
    "dependent loops": lambda n: gemm("for (int i0 = 0; i0 < 2; ++i0)\n" + "".join(
        f"for (int i{i} = i{i - 1}; i{i} < i{i - 1} + 2; ++i{i})\n" for i in range(1, n)) + f"acc += A[row * n + i{n - 1}];\n"),
    "else-if chain": lambda n: gemm("if (n == 0) C[0] = 0;\n" + "".join(f"else if (n == {i}) C[row * n + col] = {i};\n"
                                                                     for i in range(1, n)) + "else "),
    "lambdas": lambda n: gemm("[&]() {" * n, close="}();" * n),
    "templates": lambda n: "template <class T> struct W {};\n" + gemm("W<" * n + "int" + ">" * n + " w;\n"),
    "pointer sum": lambda n: gemm().replace("C[row * n + col]", "*(C + row * n + col" + " + 0" * n + ")"),
    "pointer parentheses": lambda n: gemm().replace("C[row * n + col]", "(" * n + "C" + ")" * n + "[row * n + col]"),
    "call argument": lambda n: "static __device__ void keep(float* p) {}\n" + gemm("keep(" + "(" * n + "C" + ")" * n + ");\n"),
    "template argument": lambda n: GEMM.replace("__global__", "template <class T>\n__global__").replace("const float* A", "const T* A")
                                   .replace("OPEN", "").replace("CLOSE", "").replace("INDEX", "row * n + col")
                                   .replace(">>>(A,", ">>>(" + "(" * n + "A" + ")" * n + ","),
}


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def fits(text: str) -> bool:
    return source.too_deep(source.parse(source.parse_view(text.encode()))) is None


def deepest(make) -> int:
    """The largest size whose file stays within the limit."""
    low, high = 1, 4 * LIMIT
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(make(middle)) else (low, middle)
    return low


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ---- past the limit: exit 2, naming the place -----------------------------------------------------------


@pytest.mark.parametrize("kind", NESTED)
def test_nested_past_the_limit_is_bad_input_named_by_place(work, kind):
    size = deepest(NESTED[kind]) + 1
    (work / "k.cu").write_text(NESTED[kind](size))
    for command in ("analyze", "rewrite"):
        result = invoke(command, "k.cu", "--no-compile")
        assert result.exit_code == 2, result.output
        assert re.search(rf"swzc: error: k\.cu:\d+:\d+: nested more than {LIMIT} levels deep", result.stderr), result.stderr


@pytest.mark.parametrize(("kind", "size"), [("if", 10_000), ("namespaces", 5_000), ("#if", 10_000), ("#elif chain", 10_000),
                                            ("sum", 100_000), ("lambdas", 3_000)])
def test_the_reported_sizes_are_refused_at_once(work, kind, size):
    """The files of the reports (a RecursionError each, and 90 s for the #elif chain first)."""
    (work / "k.cu").write_text(NESTED[kind](size))
    start = time.process_time()
    result = invoke("analyze", "k.cu", "--no-compile")
    assert result.exit_code == 2 and f"nested more than {LIMIT} levels deep" in result.stderr
    assert time.process_time() - start < 5


def test_the_place_named_is_where_the_nesting_passes_the_limit(work):
    (work / "k.cu").write_text("int pad;\nint x = " + "(" * 5000 + "1" + ")" * 5000 + ";\n")
    result = invoke("analyze", "k.cu", "--json", "--no-compile")
    # translation_unit, declaration, init_declarator, then a parenthesized_expression per `(`: the (LIMIT - 3)th
    # is LIMIT levels down, and its `(` one level further
    assert f"k.cu:2:{8 + LIMIT - 3}: nested more than" in result.stderr
    assert result.exit_code == 2 and '"exit_code": 2' in result.stdout


# ---- within the limit: read as any other file ------------------------------------------------------------


@pytest.mark.parametrize("kind", NESTED)
def test_the_deepest_file_within_the_limit_is_read(work, kind):
    size = deepest(NESTED[kind])
    assert size > 100  # every kind reaches far past what any walk by recursion survives
    (work / "k.cu").write_text(NESTED[kind](size))
    start = time.process_time()
    result = invoke("rewrite", "k.cu", "--no-compile")
    assert result.exit_code in (0, 1), result.output
    assert re.search(r"gemm \(line \d+\): (rewritten|declined|unranked)", result.stdout), result.stdout
    assert "refers to itself" not in result.stdout  # what the footprint says when it runs out of stack
    assert time.process_time() - start < 15  # a walk up from each node would cost the square of the depth


def test_a_macro_body_nested_past_the_limit_is_not_followed(work):
    (work / "k.cu").write_text("#define IDX " + "(" * 3 * LIMIT + "row * n + col" + ")" * 3 * LIMIT + "\n" + gemm(index="IDX"))
    result = invoke("rewrite", "k.cu", "--no-compile")
    assert result.exit_code in (0, 1) and "gemm (line 3)" in result.stdout


def test_a_header_nested_past_the_limit_is_a_note(work):
    (work / "deep.cuh").write_text("#define N 4096\nint x = " + "(" * 2 * LIMIT + "1" + ")" * 2 * LIMIT + ";\n")
    (work / "k.cu").write_text(gemm(before='#include "deep.cuh"\n'))
    result = invoke("analyze", "k.cu", "--no-compile")
    assert result.exit_code in (0, 1), result.output
    assert f'header "deep.cuh" not read: ' in result.stdout and f"nested more than {LIMIT} levels deep" in result.stdout


# ---- chains the tree does not nest: normal results, in time linear in their length ---------------------------


CHAINS = {
    "object-like macros": lambda n: gemm(index="M0", before="".join(f"#define M{i} M{i + 1}\n" for i in range(n))
                                         + f"#define M{n} (row * n + col)\n"),
    "function-like macros": lambda n: gemm(index="F0(row * n + col)", before="".join(f"#define F{i}(x) F{i + 1}(x)\n" for i in range(n))
                                           + f"#define F{n}(x) (x)\n"),
    "helpers, callers first": lambda n: "".join(f"static __device__ int h{i}(int v);\n" for i in range(n)) + "".join(
        f"static __device__ int h{i}(int v) {{ return h{i + 1}(v); }}\n" for i in range(n - 1))
        + f"static __device__ int h{n - 1}(int v) {{ return blockIdx.y * 16 + v; }}\n"
        + gemm().replace("blockIdx.y * TILE + threadIdx.y", "h0(threadIdx.y)"),
    "auto pointers": lambda n: gemm("auto p0 = C;\n" + "".join(f"auto p{i} = p{i - 1};\n" for i in range(1, n))).replace(
        "C[row * n + col] = acc", f"p{n - 1}[row * n + col] = acc"),
    "auto arguments": lambda n: GEMM.replace("__global__", "template <class T>\n__global__").replace("const float* A", "const T* A")
                                .replace("OPEN", "").replace("CLOSE", "").replace("INDEX", "row * n + col").replace(
        "{ gemm<<<", "{\n  auto p0 = A;\n" + "".join(f"  auto p{i} = p{i - 1} + 0;\n" for i in range(1, n)) + "  gemm<<<").replace(
        ">>>(A,", f">>>(p{n - 1},"),
    "locals": lambda n: gemm("int r0 = row;\n" + "".join(f"int r{i} = r{i - 1} / 2 + r{i - 1} % 2;\n" for i in range(1, n)),
                             index=f"r{n - 1} * n + col"),
    "launches": lambda n: gemm().replace("{ gemm<<<dim3(256, 256), dim3(TILE, TILE)>>>(A, B, C, 4096); }",
                                         "{\n" + "  gemm<<<dim3(256, 256), dim3(TILE, TILE)>>>(A, B, C, 4096);\n" * n + "}"),
    "#if blocks": lambda n: "".join(f"#if 0\nint dead{i};\n#endif\n#ifdef NOPE\n__global__ void z{i}(float* p) {{ p[blockIdx.x] = 0; }}\n"
                                    "#endif\n" for i in range(n)) + gemm(),
    "a long line": lambda n: gemm().replace("\n", " ").replace("#define TILE 16 ", "#define TILE 16\n") + " int x" + "x" * 100 * n + ";\n",
}


@pytest.mark.parametrize("kind", CHAINS)
def test_long_chains_give_a_normal_result_in_linear_time(work, kind):
    (work / "k.cu").write_text(CHAINS[kind](3000))
    start = time.process_time()
    result = invoke("rewrite", "k.cu", "--no-compile")
    assert result.exit_code in (0, 1), result.output
    assert re.search(r"gemm \(line \d+\): (rewritten|declined|unranked)", result.stdout), result.stdout
    assert time.process_time() - start < 15  # each was quadratic or worse: a minute and more at this size


def test_a_chain_of_auto_definitions_is_followed_so_far_and_said(work):
    (work / "k.cu").write_text(CHAINS["auto pointers"](3000))
    result = invoke("analyze", "k.cu", "--no-compile")
    assert "its type is deduced through more than 64 `auto` definitions" in result.stdout


@pytest.mark.parametrize("depth", [12, 30])
def test_loops_that_start_where_the_enclosing_one_is_cost_linear_time(work, depth):
    """Each loop's bounds read the enclosing loop's twice: 4^depth without remembering them."""
    (work / "k.cu").write_text(NESTED["dependent loops"](depth))
    start = time.process_time()
    result = invoke("rewrite", "k.cu", "--no-compile")
    assert "gemm (line 2): rewritten" in result.stdout, result.output
    assert time.process_time() - start < 10


def test_pure_helpers_are_read_once_each(work, monkeypatch):
    """Which helpers compute a value and nothing else is found reading each once, not once per helper found."""
    calls = []
    real = splice_safety.side_effect
    monkeypatch.setattr(splice_safety, "side_effect", lambda *args, **kwargs: calls.append(1) or real(*args, **kwargs))
    n = 1000
    (work / "k.cu").write_text("".join(f"__device__ int c{i}(int v) {{ return c{i + 1}(v) + 1; }}\n" for i in range(n))
                               + f"__device__ int c{n}(int v) {{ return v; }}\n" + gemm(index=f"c0(row) * n + col"))
    result = invoke("analyze", "k.cu", "--no-compile")
    assert result.exit_code in (0, 1), result.output
    assert len(calls) < 5 * n


def test_which_helper_reads_the_block_index_is_found_once_for_a_chain(work, monkeypatch):
    """Each helper's first reader reached: one walk back from each reader, not one walk down per helper."""
    reached = []
    real = analysis._reach
    monkeypatch.setattr(analysis, "_reach", lambda start, calls: reached.append(len(found := real(start, calls))) or found)
    n = 1000
    (work / "k.cu").write_text(CHAINS["helpers, callers first"](n))
    result = invoke("analyze", "k.cu", "--no-compile")
    assert result.exit_code in (0, 1), result.output
    assert sum(reached) < 5 * n


def test_many_branches_never_taken_are_asked_about_by_bisection():
    many = 20_000
    pre = Preprocessed({}, tuple((10 * i, 10 * i + 5) for i in range(many)))
    nodes = [SimpleNamespace(start_byte=10 * i + 1, end_byte=10 * i + 2 + i % 8) for i in range(many)]
    start = time.process_time()
    assert sum(not pre.active(node) for node in nodes) == many // 2  # those ending by the range's end
    assert time.process_time() - start < 2  # range by range: 2 x 10^8 comparisons


def test_spans_answer_as_a_look_at_every_range_would():
    rng = random.Random(7)
    for _ in range(200):
        ranges = [(a, a + rng.randrange(0, 30)) for a in (rng.randrange(0, 100) for _ in range(rng.randrange(0, 12)))]
        spans = Spans(ranges)
        for start in range(0, 130, 3):
            for end in (start, start + 1, start + 7, start + 40):
                assert spans.holds(start, end) == any(a <= start and end <= b for a, b in ranges)
            assert spans.has(start) == any(a <= start < b for a, b in ranges)


def test_a_kernel_symbol_nested_past_what_is_read_still_gives_its_name():
    """A run's kernel symbols come from whatever the program instantiated: a type 5,000 pointers or templates deep."""
    assert observe.kernel_name("_Z1kI" + "P" * 4000 + "fEvPT_")[0] == "k"
    assert observe.kernel_name("_Z1kI" + "N1a1bI" * 600 + "f" + "EE" * 600 + "EvPT_")[0] == "k"
    assert observe.kernel_name("_Z1kI" + "P" * 5000 + "fEvPT_") == ("k", None)  # past what is handed to c++filt
    assert observe.kernel_name("_Z4gemmIfLi8EEvPT_") == ("gemm", ("float", "8") if shutil.which("c++filt") else None)


def test_a_file_of_many_kernels_is_compiled_once_and_never_hashed(monkeypatch):
    """Each kernel asks for the compiler's figures: the file's context compiles it once for all of them, and
    keeps the answer by target and flags, without hashing the file's bytes once per kernel."""
    hashed, compiled = [], []
    real = hashlib.sha256
    monkeypatch.setattr(hashlib, "sha256", lambda data=b"": hashed.append(len(data)) or real(data))
    monkeypatch.setattr(compiling, "compiler", lambda dialect: "nvcc")
    monkeypatch.setattr(compiling, "compile_copy", lambda *args: compiled.append(args) or (0, "", ""))
    data = b"".join(b"__global__ void k%d(float* a) { a[blockIdx.x] = 0; }\n" % i for i in range(100))
    ctx = FileContext(source.load_bytes("k.cu", data))
    model = hwmodels.load("h200")
    for kernel in analysis.analyze(ctx).kernels:
        residency.residency(ctx, kernel, model, 256)
    assert len(compiled) == 1 and not [n for n in hashed if n >= len(data)]


# ---- the grid's size costs nothing ---------------------------------------------------------------------------


def test_the_largest_grid_is_modelled_over_its_first_blocks_and_says_so(work):
    (work / "k.cu").write_text(gemm().replace("dim3(256, 256)", "dim3(2147483647, 65535, 65535)"))
    start = time.perf_counter()
    result = invoke("analyze", "k.cu", "--no-compile")
    assert time.perf_counter() - start < 30  # the prover listed 2^31 x 65535 x 65535 positions to keep 65,536
    assert result.exit_code == 1, result.output
    assert "the model follows the first 65,536 of the grid's 9,223,090,559,730,712,575 blocks" in result.stdout


@pytest.mark.parametrize(("size", "said"), [
    ("2147483647", "sectors of 32 bytes, more than the model lists"),  # a row of A: 8 GiB for each block
    ("1000000000000000000", "past 2^62"),  # offsets no 64-bit set holds
])
def test_sizes_past_what_the_model_lists_are_said_not_followed(work, size, said):
    (work / "k.cu").write_text(gemm().replace("4096", size))
    start = time.perf_counter()
    result = invoke("analyze", "k.cu", "--no-compile")
    assert time.perf_counter() - start < 30
    assert result.exit_code == 1 and "cannot follow" in result.stdout and said in result.stdout, result.output
