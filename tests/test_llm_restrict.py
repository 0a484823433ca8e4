"""The safe subset for LLM-written swizzle bodies: rule tests as valid / invalid lists, the renaming of min and
max, line numbers, hostile inputs, and a real compile of every valid body."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swzc.search.llm.restrict import MIN_MAX_CXX, Checked, Violation, check_body
from swzc.formulas.swizzles import CustomSwizzle

GROUPED = """\
// GROUP_M-style order: column-major inside groups of 8 rows, the last group clamped.
const unsigned group_m = 8u;
const unsigned pid = block.y * grid.x + block.x;
const unsigned width = group_m * grid.x;
const unsigned group = pid / width;
const unsigned first_row = group * group_m;
const unsigned rows = min(grid.y - first_row, group_m);
const unsigned row = first_row + (pid % width) % rows;
const unsigned col = (pid % width) / rows;
return make_uint3(col, row, 0u);
"""

XCD_REMAP = """\
// Round-robin dispatch over 8 XCDs: give each XCD a contiguous chunk of tiles.
const unsigned xcds = 8u;
const unsigned long long n = (unsigned long long)grid.x * grid.y;
const unsigned long long pid = (unsigned long long)block.y * grid.x + block.x;
const unsigned long long per = n / xcds;
const unsigned long long extra = n % xcds;
const unsigned long long xcd = pid % xcds;
unsigned long long id = xcd * per + min(xcd, extra) + pid / xcds;
if (pid >= per * xcds) id = pid;  // the tail keeps its place
return make_uint3((unsigned)(id % grid.x), (unsigned)(id / grid.x), 0u);
"""

HILBERT = """\
// Hilbert order inside 16 x 16 squares of tiles, squares in row-major order.
const unsigned side = 16u;
const unsigned pid = block.y * grid.x + block.x;
unsigned t = pid % (side * side);
unsigned x = 0u;
unsigned y = 0u;
for (unsigned s = 1u; s < 16u; s *= 2u) {
  const unsigned rx = 1u & (t / 2u);
  const unsigned ry = 1u & (t ^ rx);
  if (ry == 0u) {
    if (rx == 1u) {
      x = s - 1u - x;
      y = s - 1u - y;
    }
    const unsigned swap = x;
    x = y;
    y = swap;
  }
  x += s * rx;
  y += s * ry;
  t /= 4u;
}
const unsigned square = pid / (side * side);
const unsigned squares_per_row = max(grid.x / side, 1u);
const unsigned col = (square % squares_per_row) * side + x;
const unsigned row = (square / squares_per_row) * side + y;
if (col < grid.x && row < grid.y) {
  return make_uint3(col, row, 0u);
}
return block;
"""

VALID = [
    pytest.param("return block;", id="identity"),
    pytest.param(GROUPED, id="grouped"),
    pytest.param(XCD_REMAP, id="xcd-remap"),
    pytest.param(HILBERT, id="hilbert-doubling-loop"),
    pytest.param("const unsigned long long id = (unsigned long long)block.y * grid.x + block.x;\n"
                 "return make_uint3((unsigned)(id % grid.x), (unsigned)(id / grid.x), 0u);", id="casts"),
    pytest.param("unsigned acc = 0u;\n"
                 "for (int i = 3; i >= 0; --i) {\n"
                 "  for (unsigned j = 8u; j > 0u; j >>= 1) {\n"
                 "    if (j == 2u) continue;\n"
                 "    acc += (unsigned)i * j;\n"
                 "    if (acc > 100u) break;\n"
                 "  }\n"
                 "}\n"
                 "const bool flip = (acc & 1u) != 0u;\n"
                 "uint3 r = block;\n"
                 "r.x = flip ? grid.x - 1u - block.x : block.x;\n"
                 "++r.z;\n"
                 "r.z -= 1u;\n"
                 "return r;", id="nested-loops-break-continue-fields"),
    pytest.param("int i = 0;\nunsigned s = 0u;\nfor (i = 0; i < 4; i++) s += (unsigned)i;\n"
                 "return make_uint3(s % grid.x, block.y, 0u);", id="loop-over-earlier-local"),
    pytest.param("for (unsigned i = 10u; i != 0u; i -= 2u) {}\nfor (long long k = -3; k < 3; k += 2) {}\n"
                 "return block;", id="counting-down-and-negative-start"),
    pytest.param("unsigned m = 0xFFu & 0b1010u;\nunsigned long long big = 017ull + 10UL + 3LLU;\n"
                 "long long d = -1ll;\nint e = -2147483648;\nd += 2;\nm = m << 2 | m >> 1;\nm ^= ~0u;\n"
                 "return make_uint3(block.x, block.y, (unsigned)(big + d + e + m) * 0u);", id="literals"),
    pytest.param("if (block.x == 0u) return grid;\nelse if (block.y == 0u) return block;\n"
                 "else { return make_uint3(0u, 0u, 0u); }", id="else-if-chain"),
    pytest.param("return make_uint3(max(block.x, 1u) - 1u, min(block.y, grid.y - 1u), 0u);", id="min-max-nested"),
    pytest.param("const bool last = !(block.y + 1u < grid.y) || false;\n;\n"
                 "{ const int k = (int)last; if (k > 0) return block; }\nreturn block;", id="bool-empty-block"),
    pytest.param("return block;\r\n", id="crlf"),
    pytest.param("unsigned n = 0u;\nfor (int i = 0; i < 64; ++i) for (unsigned j = 64u; j > 0u; --j) n += 1u;\n"
                 "return make_uint3(n % grid.x, 0u, 0u);", id="loops-at-the-limits"),
    pytest.param("unsigned n = 0u;\nfor (int a = 0; a < 4; a++) { for (int b = 0; b < 4; b++) {\n"
                 "  for (int c = 0; c < 4; c++) { n += 1u; } } }\nreturn make_uint3(n % grid.x, 0u, 0u);",
                 id="loops-nested-3-deep"),
]

INVALID = [
    # (body, a piece of the expected message)
    pytest.param('asm("trap;");\nreturn block;', "asm is not allowed", id="asm"),
    pytest.param("#include <cstdlib>\nreturn block;", "preprocessor", id="include"),
    pytest.param("#define X 1\nreturn block;", "preprocessor", id="define"),
    pytest.param("  #  define X 1\nreturn block;", "preprocessor", id="indented-directive"),
    pytest.param("unsigned a = 1u; # x\nreturn block;", "#", id="hash-mid-line"),
    pytest.param("while (true) {}\nreturn block;", "while loops", id="while-true"),
    pytest.param("do { } while (0);\nreturn block;", "do loops", id="do-while"),
    pytest.param("for (;;) {}\nreturn block;", "for loop must start", id="for-ever"),
    pytest.param("for (unsigned i = 0u; i < grid.x; ++i) {}\nreturn block;", "condition must compare",
                 id="for-grid-bound"),
    pytest.param("for (unsigned i = 0u; i < 1000000u; ++i) {}\nreturn block;", "more than 64", id="for-million"),
    pytest.param("for (int i = 0; i <= 64; ++i) {}\nreturn block;", "more than 64", id="for-65"),
    pytest.param("for (unsigned i = 0u; i != 7u; i += 2u) {}\nreturn block;", "more than 64", id="for-wraps-past"),
    pytest.param("for (unsigned i = 5u; i >= 0u; --i) {}\nreturn block;", "more than 64", id="for-unsigned-ge-0"),
    pytest.param("for (unsigned s = 0u; s < 16u; s *= 2u) {}\nreturn block;", "more than 64", id="for-doubling-zero"),
    pytest.param("for (int i = 2147483647; i > 0; ++i) {}\nreturn block;", "overflows", id="for-signed-overflow"),
    pytest.param("for (unsigned i = 1u; i < 4u; i <<= 40) {}\nreturn block;", "shifts by 40", id="for-wide-shift"),
    pytest.param("for (int i = 0; i < 4; ++i) { i = 2; }\nreturn block;", "may not be assigned",
                 id="for-assigns-counter"),
    pytest.param("for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) for (int k = 0; k < 2; ++k)\n"
                 "  for (int l = 0; l < 2; ++l) {}\nreturn block;", "nest deeper than 3", id="for-depth-4"),
    pytest.param("for (int i = 0; i < 64; ++i) for (int j = 0; j < 64; ++j) for (int k = 0; k < 2; ++k) {}\n"
                 "return block;", "8192 times", id="for-product"),
    pytest.param("*(int*)0 = 1;\nreturn block;", "dereference", id="deref"),
    pytest.param("unsigned a = 1u;\nunsigned long long p = (unsigned long long)&a;\nreturn block;", "address-of",
                 id="address-of"),
    pytest.param("unsigned a = block.x;\nunsigned b = a[0];\nreturn block;", "subscripts", id="subscript"),
    pytest.param("printf(block.x);\nreturn block;", "calling printf", id="printf"),
    pytest.param("system(0);\nreturn block;", "calling system", id="system"),
    pytest.param("__builtin_trap();\nreturn block;", "calling __builtin_trap", id="builtin"),
    pytest.param("__syncthreads();\nreturn block;", "calling __syncthreads", id="syncthreads"),
    pytest.param("unsigned f = [](unsigned v) { return v; }(1u);\nreturn block;", "lambdas", id="lambda"),
    pytest.param("goto done;\ndone: return block;", "goto", id="goto"),
    pytest.param("} int evil() { return 0; } static uint3 f(uint3 block, uint3 grid) {",
                 "closes the function early", id="early-close"),
    pytest.param('return block; } __global__ void k() { asm("trap;"); } static uint3 g(uint3 block, uint3 grid) {\n'
                 "return block;", "closes the function early", id="early-close-and-reopen"),
    pytest.param("block.x = 0u;\nreturn block;", "block is read-only", id="assign-block-x"),
    pytest.param("++grid.y;\nreturn block;", "grid is read-only", id="increment-grid"),
    pytest.param('const unsigned a = "abc"[0];\nreturn block;', "quotes", id="string"),
    pytest.param("unsigned a = 1.5f;\nreturn block;", "not an integer literal", id="float"),
    pytest.param("unsigned a = 1e3;\nreturn block;", "not an integer literal", id="float-exponent"),
    pytest.param("unsigned a = sizeof(unsigned);\nreturn block;", "sizeof", id="sizeof"),
    pytest.param("unsigned a = (unsigned long long)(new unsigned);\nreturn block;", "new is not allowed", id="new"),
    pytest.param("static unsigned a = 0u;\nreturn block;", "static is not allowed", id="static-local"),
    pytest.param("volatile unsigned a = 0u;\nreturn block;", "volatile", id="volatile"),
    pytest.param("return make_uint3(col, 0u, 0u);", "col is not declared", id="undeclared"),
    pytest.param("unsigned a = b;\nunsigned b = 0u;\nreturn block;", "b is not declared", id="used-before-declared"),
    pytest.param("{ unsigned a = 0u; }\nreturn make_uint3(a, 0u, 0u);", "a is not declared", id="out-of-scope"),
    pytest.param("__shared__ unsigned tile = 0u;\nreturn block;", "__shared__", id="shared"),
    pytest.param("template <int N> unsigned f();\nreturn block;", "templates", id="template"),
    pytest.param("struct S { unsigned a; };\nreturn block;", "struct definitions", id="struct"),
    pytest.param("??=define X 1\nreturn block;", "trigraphs", id="trigraph"),
    pytest.param("if (block.x) <% return block; %>\nreturn grid;", "digraphs", id="digraph"),
    pytest.param("unsigned a = 1u + \\\n 2u;\nreturn block;", "continuations", id="backslash-continuation"),
    pytest.param("return block;" + " " * 5000, "characters long", id="5000-chars"),
    pytest.param("return block;\n" * 121, "lines", id="121-lines"),
    pytest.param("", "never returns", id="empty"),
    pytest.param("unsigned a = 0u;", "never returns", id="no-return"),
    pytest.param("if (block.x) return block;", "without returning", id="falls-off-the-end"),
    pytest.param("return;", "bare return", id="bare-return"),
    pytest.param("unsigned a;\nreturn block;", "initialised", id="uninitialised"),
    pytest.param("auto a = 1u;\nreturn block;", "auto", id="auto"),
    pytest.param("unsigned long a = 0u;\nreturn block;", "type unsigned long is not allowed", id="long"),
    pytest.param("float f = 0;\nreturn block;", "type float is not allowed", id="float-type"),
    pytest.param("unsigned* p = 0;\nreturn block;", "pointers", id="pointer-declaration"),
    pytest.param("unsigned a = 0u;\nunsigned& r = a;\nreturn block;", "references", id="reference"),
    pytest.param("unsigned a[2] = {0u, 1u};\nreturn block;", "arrays", id="array"),
    pytest.param("unsigned a = min(1u);\nreturn block;", "min takes 2 arguments", id="min-arity"),
    pytest.param("return make_uint3(1u, 2u);", "make_uint3 takes 3 arguments", id="make-uint3-arity"),
    pytest.param("unsigned min = 0u;\nreturn block;", "min is reserved", id="local-named-min"),
    pytest.param("unsigned __x = 0u;\nreturn block;", "reserved", id="reserved-underscores"),
    pytest.param("unsigned swzc_x = 0u;\nreturn block;", "reserved", id="reserved-prefix"),
    pytest.param("return swzc_candidate(block, grid);", "calling swzc_candidate", id="recursion"),
    pytest.param("unsigned a = 0u;\n{ unsigned a = 1u; }\nreturn block;", "already declared", id="shadowing"),
    pytest.param("const uint3 r = block;\nr.x = 1u;\nreturn r;", "r is const", id="assign-const"),
    pytest.param("unsigned a = this->x;\nreturn block;", "->", id="arrow"),
    pytest.param("unsigned a = block.w;\nreturn block;", ".x, .y and .z", id="bad-field"),
    pytest.param("unsigned a = 0u;\nunsigned b = a.x;\nreturn block;", "not a uint3", id="field-of-integer"),
    pytest.param("unsigned a = (1u, 2u);\nreturn block;", "comma", id="comma"),
    pytest.param("unsigned a = unsigned(block.x);\nreturn block;", "functional casts", id="functional-cast"),
    pytest.param("unsigned a = (unsigned*)0;\nreturn block;", "casts to pointers", id="pointer-cast"),
    pytest.param("unsigned a = std::min(1u, 2u);\nreturn block;", "std::min", id="qualified"),
    pytest.param("bool c = block.x and block.y;\nreturn block;", "operator and", id="alternative-token"),
    pytest.param("if constexpr (true) return block;\nreturn block;", "constexpr", id="if-constexpr"),
    pytest.param("unsigned a = min<<<1, 1>>>(1u, 2u);\nreturn block;", "kernel launches", id="kernel-launch"),
    pytest.param("switch (block.x) { default: break; }\nreturn block;", "switch", id="switch"),
    pytest.param("typedef unsigned u;\nreturn block;", "typedef", id="typedef"),
    pytest.param("try { } catch (...) { }\nreturn block;", "try", id="try"),
    pytest.param("continue;\nreturn block;", "inside a for loop", id="continue-outside-loop"),
    pytest.param("unsigned é = 0u;\nreturn block;", "printable ASCII", id="non-ascii-name"),
    # an assignment inside an expression: g++ and nvcc may order it differently against the other operands
    pytest.param("unsigned t = 0u;\nconst unsigned c = grid.x - 1u - block.x;\nreturn make_uint3(t, block.y + ((t = c) & 0u), 0u);",
                 "a statement of its own", id="assignment-in-an-argument"),
    pytest.param("unsigned t = 0u;\nunsigned c = block.x;\nreturn make_uint3(t + ((t = c) & 0u), block.y, 0u);",
                 "a statement of its own", id="unsequenced-assignment"),
    pytest.param("unsigned t = block.x;\nunsigned u = t + t++;\nreturn make_uint3(u % grid.x, block.y, 0u);",
                 "a statement of its own", id="increment-in-an-expression"),
    pytest.param("unsigned t = 0u;\nif ((t = block.x) > 0u) { return block; }\nreturn block;", "a statement of its own",
                 id="assignment-in-a-condition"),
    pytest.param("unsigned a = 0u;\nunsigned b = 0u;\na = b = block.x;\nreturn block;", "a statement of its own",
                 id="chained-assignment"),
    pytest.param("// tile → column, é in a comment\nreturn block; /* ünïcode */", "printable ASCII", id="non-ascii-in-comments"),
    pytest.param("return block; /*", "cannot parse", id="open-comment"),
    pytest.param("unsigned a = 99999999999999999999999;\nreturn block;", "too large", id="huge-literal"),
    pytest.param("unsigned a = ({ 1u; });\nreturn block;", "not allowed", id="statement-expression"),
    pytest.param("if (block.x) [[likely]] return block;\nreturn grid;", "attributes", id="attribute"),
    pytest.param("return {1u, 2u, 0u};", "brace initialisers", id="brace-return"),
    pytest.param("uint3 r = {1u, 2u, 0u};\nreturn r;", "initialise r with =", id="brace-declaration"),
    pytest.param("unsigned a = 0u;\nmin(a, 1u) = 3u;\nreturn block;", "only a local variable", id="assign-to-call"),
    pytest.param(";" * 500 + "\nreturn block;", "too large", id="too-many-nodes"),
]


@pytest.mark.parametrize("body", VALID)
def test_valid(body: str) -> None:
    checked = check_body(body)
    assert checked.violations == ()
    assert checked.ok
    assert checked.body


@pytest.mark.parametrize(("body", "expected"), INVALID)
def test_invalid(body: str, expected: str) -> None:
    checked = check_body(body)
    assert not checked.ok
    assert checked.body == ""
    messages = [v.message for v in checked.violations]
    assert any(expected in m for m in messages), messages
    assert all(m.startswith(f"line {v.line}: ") for v, m in zip(checked.violations, messages))


def test_min_and_max_are_renamed_by_node_not_by_text() -> None:
    body = ("// min(a, b) stays in a comment\n"
            "const unsigned minimum = min(block.x, 2u);\n"
            "const unsigned m = max (minimum, 1u);\n"
            "return make_uint3(m, minimum, 0u);")
    checked = check_body(body)
    assert checked.ok, checked.violations
    assert checked.body == ("// min(a, b) stays in a comment\n"
                            "const unsigned swzc_v_minimum = swzc_min(swzc_v_block.x, 2u);\n"
                            "const unsigned swzc_v_m = swzc_max (swzc_v_minimum, 1u);\n"
                            "return make_uint3(swzc_v_m, swzc_v_minimum, 0u);")


def test_every_variable_is_prefixed_so_that_the_user_s_macros_cannot_reach_it() -> None:
    checked = check_body("const unsigned G = 8u;\nuint3 r = block;\nr.x = (r.x + G) % grid.x;\nreturn r;")
    assert checked.body == ("const unsigned swzc_v_G = 8u;\nuint3 swzc_v_r = swzc_v_block;\n"
                            "swzc_v_r.x = (swzc_v_r.x + swzc_v_G) % swzc_v_grid.x;\nreturn swzc_v_r;")


def test_a_violation_carries_its_line() -> None:
    checked = check_body("unsigned a = 0u;\nunsigned b = 1u;\nunsigned c = printf(a);\nreturn block;")
    assert checked.violations == (Violation(3, "line 3: calling printf is not allowed (only min, max and make_uint3)"),)


def test_several_violations_are_reported_in_line_order() -> None:
    checked = check_body("unsigned a = sizeof(a);\nwhile (1) {}\ngoto x;\nreturn block;")
    assert [v.line for v in checked.violations] == [1, 2, 3]


@pytest.mark.parametrize("depth", [10_000, 1_900])
def test_deep_parentheses_are_refused_quickly(depth: int) -> None:
    body = "unsigned a = " + "(" * depth + "1u" + ")" * depth + ";\nreturn block;"
    started = time.monotonic()
    checked = check_body(body)
    assert time.monotonic() - started < 2.0
    assert not checked.ok
    assert any("characters long" in v.message or "too large" in v.message for v in checked.violations)


@pytest.mark.parametrize("junk", [
    bytes((i * 7919 + 13) % 256 for i in range(700)).decode("utf-8", errors="replace"),
    bytes((i * 31) % 94 + 33 for i in range(900)).decode("ascii", errors="replace"),
    "\ud800return block;",
    "x" * 1_000_000,
])
def test_junk_is_refused_without_raising(junk: str) -> None:
    checked = check_body(junk)
    assert not checked.ok and checked.body == ""
    assert 0 < len(checked.violations) <= 20


def test_non_text_is_refused() -> None:
    assert not check_body(b"return block;").ok  # type: ignore[arg-type]


_TOKENS = ["return", "block", "grid", ".x", ".y", "make_uint3", "min", "(", ")", "{", "}", ";", ",", "+", "*", "/",
           "%", "<<", "&", "for", "if", "else", "unsigned", "int", "a", "=", "==", "<", "0u", "16u", "++", "i",
           "const", "uint3", "?", ":", "//", "/*", "*/", "\n", "asm", "[", "]", "->", "#", "'"]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), st.lists(st.sampled_from(_TOKENS), max_size=80).map(" ".join)))
def test_never_raises(body: str) -> None:
    checked = check_body(body)
    assert isinstance(checked, Checked)
    assert checked.ok == bool(checked.body) == (not checked.violations)


_COMPILER = shutil.which("c++")


@pytest.mark.skipif(_COMPILER is None, reason="no c++ on PATH")
@pytest.mark.parametrize("body", VALID)
def test_valid_bodies_compile_as_cxx11(body: str, tmp_path) -> None:
    checked = check_body(body)
    assert checked.ok, checked.violations
    candidate = CustomSwizzle("restrict_test", checked.body)
    source = (
        "#define __device__\n"
        "#define __forceinline__ inline\n"
        "struct uint3 { unsigned x, y, z; };\n"
        "static inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { uint3 r = {x, y, z}; return r; }\n"
        + MIN_MAX_CXX + candidate.definition()
        + f"int main() {{ return (int){candidate.body_function}(make_uint3(1u, 2u, 0u), make_uint3(4u, 4u, 1u)).x; }}\n"
    )
    path = tmp_path / "candidate.cpp"
    path.write_text(source)
    result = subprocess.run([_COMPILER, "-std=c++11", "-fsyntax-only", "-Werror=return-type", str(path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr + source
