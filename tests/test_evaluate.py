"""swzc.frontend.evaluate: C semantics for the values swzc reads out of a file (grid sizes, decode divisors, macros).

Most tests go through the public path a user relies on: a small CUDA file with one kernel and one launch,
analysed with swzc.analysis.kernels.analyze, and the launch's evaluated grid compared with what the C compiler
would compute.  Anything the file does not pin down must come back as None, never as a guess.
"""

import time

import pytest

from swzc.analysis.kernels import analyze
from swzc.frontend.evaluate import Evaluator, Macro, Scope, c_int, expression_of, number
from swzc.frontend.source import load_bytes
from swzc.analysis.context import FileContext

KERNEL = "__global__ void k(float* p) { p[blockIdx.x] = 0.f; }\n"


def _analysis(host: str, prelude: str = "", user=None):
    src = f"{prelude}\n{KERNEL}int main(int argc, char** argv) {{\n  {host}\n  return 0;\n}}\n"
    return analyze(FileContext(load_bytes("t.cu", src.encode())), user or {})


def grid(host: str, prelude: str = "", user=None):
    """The evaluated grid of the only launch in the file."""
    launches = _analysis(host, prelude, user).kernels[0].launches
    assert len(launches) == 1, launches
    return launches[0].grid


def grid_of(expr: str, prelude: str = "", user=None):
    return grid(f"k<<<{expr}, 1>>>(0);", prelude, user)


def value(text: str, **scope):
    node = expression_of(text)
    assert node is not None, text
    return Evaluator(Scope(**scope)).value(node)


# ---- C arithmetic ------------------------------------------------------------------------------------

# Each case differs from what Python's floor division / modulo would give, so it pins C's truncation.
@pytest.mark.parametrize(
    "expr, want",
    [
        ("-7 / 2 + 10", 7),  # C: -3 (Python floor: -4)
        ("7 / -2 + 10", 7),  # C: -3
        ("-(-7 / -2) + 10", 7),  # C: 7 (Python: 6)
        ("-7 % 3 + 10", 9),  # C: -1 (Python: 2)
        ("7 % -3", 1),  # C: 1 (Python: -2)
        ("-(-7 % -3)", 1),  # C: -1
        ("7 / 2 * 2", 6),  # integer division first
        ("7.0 / 2 * 2", 7),  # floating point stays floating point
        ("1 << 10", 1024),
        ("4096 >> 4", 256),
        ("(6 & 3) | 8", 10),
        ("5 ^ 1", 4),
        ("~0 + 5", 4),
        ("!0 + 1", 2),
        ("3 < 4 && 2 > 1", 1),
        ("0x10 + 010 + 0b11", 27),  # hex, octal, binary literals
        ("100u + 1UL + 2ull", 103),
        ("1'000", 1000),
        ("1.5e1", 15),
    ],
)
def test_integer_arithmetic_follows_c(expr, want):
    assert grid_of(expr) == (want, 1, 1)


@pytest.mark.parametrize(
    "expr, want",
    [
        ("(3 > 2 ? 5 : 6)", 5),
        ("0 ? 5 : 6", 6),
        ("1 ? 5 : unknown_name", 5),  # only the taken branch must be known
    ],
)
def test_ternary(expr, want):
    assert grid_of(expr) == (want, 1, 1)


def test_ternary_with_unknown_condition_is_unknown():
    assert grid_of("argc > 1 ? 5 : 6") is None


@pytest.mark.parametrize(
    "expr, want",
    [
        ("(int)7.9", 7),
        ("(int)-7.9 + 10", 3),  # truncation toward zero: -7, not -8
        ("(long)(-7.5) + 10", 3),
        ("(size_t)10.5", 10),
        ("(unsigned long long)7.5", 7),
        ("(unsigned int)3.9", 3),
        ("static_cast<int>(9.99)", 9),
        ("int(7.5)", 7),  # functional cast
        ("ceil((float)100 / 16)", 7),  # float division, then ceil
        ("ceil(100 / 16)", 6),  # integer division happens before ceil
        ("floor(-2.5) + 10", 7),
        ("std::min(5, 3)", 3),
        ("max(5, 3)", 5),
        ("abs(-4)", 4),
        ("sizeof(float)", 4),
        ("sizeof(int) * 2", 8),
    ],
)
def test_casts_and_calls(expr, want):
    assert grid_of(expr) == (want, 1, 1)


def test_ceil_of_float_cast_of_a_local():
    assert grid("int N = 100; k<<<ceil((float)N / 16), 1>>>(0);") == (7, 1, 1)
    assert grid("int N = 100; k<<<ceil(N / 16), 1>>>(0);") == (6, 1, 1)


@pytest.mark.parametrize("expr", ["10 / 0", "10 % 0", "1 << 64", "1 << -1", "(my_type_t)3"])
def test_undefined_or_unsupported_is_unknown(expr):
    assert grid_of(expr) is None


# ---- macros, constants -------------------------------------------------------------------------------

CDIV = "#define CDIV(a,b) (((a)+(b)-1)/(b))"


def test_function_like_macro():
    assert grid_of("dim3(CDIV(1000, 16), CDIV(17, 16))", CDIV) == (63, 2, 1)
    assert grid_of("CDIV(4096, 128) * CDIV(4096, 128)", CDIV) == (1024, 1, 1)


def test_object_like_macro():
    assert grid_of("N / 16", "#define N 4096") == (256, 1, 1)


def test_macro_chain():
    assert grid_of("G(2)", "#define G(x) ((x) * H)\n#define H 10") == (20, 1, 1)


def test_function_macro_with_wrong_arity_or_used_as_object_is_unknown():
    assert grid_of("G(2, 3)", "#define G(x) ((x) * 2)") is None
    assert grid_of("G", "#define G(x) ((x) * 2)") is None


def test_macro_defined_twice_differently_is_unknown():
    assert grid_of("X", "#define X 1\n#define X 2") is None


def test_macro_defined_twice_identically_is_known():
    assert grid_of("X", "#define X 3\n#define X 3") == (3, 1, 1)


@pytest.mark.parametrize(
    "prelude",
    ["constexpr int TILES = 12;", "const int TILES = 12;", "enum { TILES = 12 };", "static constexpr int TILES = 3 * 4;"],
)
def test_file_constants(prelude):
    assert grid_of("TILES", prelude) == (12, 1, 1)


def test_non_const_global_is_unknown():
    assert grid_of("TILES", "int TILES = 12;") is None


@pytest.mark.parametrize(
    "expr, prelude",
    [
        ("SELF", "#define SELF (SELF + 1)"),
        ("A", "#define A B\n#define B A"),
        ("F(3)", "#define F(x) F(x)"),
        ("A", "#define A (A + A)"),
    ],
    ids=["self", "mutual", "function-self", "doubling"],
)
def test_recursive_macros_are_unknown_not_a_crash(expr, prelude):
    assert grid_of(expr, prelude) is None


def test_recursive_macro_with_fan_out_terminates_quickly():
    start = time.monotonic()
    assert grid_of("F(1)", "#define F(x) (F(x) + F(x) + F(x))") is None
    assert time.monotonic() - start < 5


def test_cyclic_constants_are_unknown():
    assert grid("const int a = b; const int b = a; k<<<a, 1>>>(0);") is None


# ---- unknown names and host-side data flow ------------------------------------------------------------


def test_unknown_name_is_unknown():
    assert grid_of("unknown_name") is None
    assert grid_of("dim3(4, unknown_name)") is None


@pytest.mark.parametrize(
    "host",
    [
        "int n = atoi(argv[1]); k<<<n, 1>>>(0);",  # read at run time
        "int n; if (argc > 1) { n = 8; } k<<<n, 1>>>(0);",  # only assigned inside an if
        "int n = 4; if (argc > 1) { n = 8; } k<<<n, 1>>>(0);",  # reassigned inside an if
        "int n = 4; for (int i = 0; i < argc; ++i) { n = 8; } k<<<n, 1>>>(0);",  # reassigned in a loop
        "int n = 4; for (int i = 0; i < 3; ++i) n = n * 2; k<<<n, 1>>>(0);",  # changed in a loop
        "int n = 4; while (argc-- > 2) { n *= 2; } k<<<n, 1>>>(0);",
        "int n = 4; n += 2; k<<<n, 1>>>(0);",  # compound assignment
        "int n = 4; n++; k<<<n, 1>>>(0);",
        "int n = 4; int* q = &n; k<<<n, 1>>>(0);",  # address taken
        "int n = 4; std::cin >> n; k<<<n, 1>>>(0);",
        "int n = 4; switch (argc) { case 1: n = 8; } k<<<n, 1>>>(0);",
        "for (int i = 1; i < 3; ++i) { dim3 g(i, 2); k<<<g, 1>>>(0); }",  # made anew from the loop's variable
        "int n = 4; for (int i = 1; i < 3; ++i) { dim3 g(n, 2); k<<<g, 1>>>(0); n *= 2; }",
        "int n = 2, m; if (argc) m = 3; n = m = 5 + argc; k<<<n, 1>>>(0);",
    ],
)
def test_values_the_file_does_not_fix_are_unknown(host):
    assert grid(host) is None


@pytest.mark.parametrize(
    "host, want",
    [
        ("int n = 4; n = 8; k<<<n, 1>>>(0);", 8),  # unconditional reassignment before the launch
        ("int n = 4; k<<<n, 1>>>(0); n = 8;", 4),  # reassignment after the launch
        ("for (int i = 0; i < 3; ++i) { int n = 4; k<<<n, 1>>>(0); }", 4),  # declared in the loop
        ("int n = 4; if (argc > 1) return 1; k<<<n, 1>>>(0);", 4),
        ("const int M = 8192, BM = 128; int g = (M + BM - 1) / BM; k<<<g, 1>>>(0);", 64),
        ("int n, m; n = m = 6; k<<<n, 1>>>(0);", 6),  # a chained assignment
        ("for (int i = 0; i < 3; ++i) { dim3 g(4 * 2); k<<<g, 1>>>(0); }", 8),  # a dim3 declared in the loop
        ("int n = 4; for (int i = 0; i < 3; ++i) { dim3 g(n); k<<<g, 1>>>(0); }", 4),
    ],
)
def test_values_the_file_does_fix(host, want):
    assert grid(host) == (want, 1, 1)


@pytest.mark.parametrize(
    "host",
    [
        "int n = 4; if (argc > 1) n = 8; k<<<n, 1>>>(0);",
        "int n = 4; if (argc > 1) n = 8; else n = 2; k<<<n, 1>>>(0);",
        "int n = 4; for (int i = 0; i < argc; ++i) n = 8; k<<<n, 1>>>(0);",
        "int n = 4; while (argc-- > 5) n = 8; k<<<n, 1>>>(0);",
        "int n = 4; argc > 1 && (n = 8); k<<<n, 1>>>(0);",
        "int n = 4; argc > 1 ? (n = 8) : 0; k<<<n, 1>>>(0);",
    ],
    ids=["if", "if-else", "for", "while", "and", "ternary"],
)
def test_conditional_assignment_without_braces_is_unknown(host):
    assert grid(host) is None


# ---- dim3 ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host, want",
    [
        ("dim3 g(4, 5, 6); k<<<g, 1>>>(0);", (4, 5, 6)),
        ("dim3 g(4, 5); k<<<g, 1>>>(0);", (4, 5, 1)),
        ("dim3 g; g.x = 4; g.y = 7; k<<<g, 1>>>(0);", (4, 7, 1)),
        ("dim3 g = dim3(4, 5); g.y = 9; k<<<g, 1>>>(0);", (4, 9, 1)),
        ("dim3 g(X, Y); k<<<g, 1>>>(0);", (3, 4, 1)),
        ("k<<<dim3(2, 3, 4), 1>>>(0);", (2, 3, 4)),
    ],
)
def test_dim3_grids(host, want):
    assert grid(host, "#define X 3\n#define Y 4") == want


# ---- --set bindings --------------------------------------------------------------------------------------


def test_user_binding_fixes_an_open_name():
    assert grid_of("N / 16") is None
    assert grid_of("N / 16", user={"N": 4096}) == (256, 1, 1)


def test_user_binding_takes_precedence_over_a_file_macro():
    assert grid_of("dim3(N / 16, M / 16)", "#define N 1024\n#define M 2048", {"N": 4096}) == (256, 128, 1)


def test_user_binding_reaches_through_macros():
    assert grid_of("CDIV(N, 128) * CDIV(N, 128)", CDIV, {"N": 8192}) == (4096, 1, 1)


def test_decode_divisor_is_evaluated_per_launch():
    src = b"""
#define CDIV(a, b) (((a) + (b) - 1) / (b))
__global__ void g1(float* C, int M, int N) {
  const int pid = blockIdx.x;
  const int tiles_n = CDIV(N, 64);
  C[(pid / tiles_n) * N + pid % tiles_n] = 0.f;
}
int main() {
  const int M = 1024, N = 512;
  g1<<<CDIV(M, 64) * CDIV(N, 64), 256>>>(0, M, N);
  g1<<<4 * 2, 256>>>(0, 256, 128);
  return 0;
}
"""
    (kernel,) = analyze(FileContext(load_bytes("d.cu", src))).kernels
    assert kernel.decode is not None and kernel.decode.divisor == "tiles_n"
    assert [(la.grid, la.divisor) for la in kernel.launches] == [((128, 1, 1), 8), ((8, 1, 1), 2)]
    assert kernel.shapes == ((128, 1, 1, 8), (8, 1, 1, 2))


# ---- non-finite values --------------------------------------------------------------------------------------


# A non-finite float has no integer value: unknown, not an OverflowError (found by these tests, since fixed).
@pytest.mark.parametrize("expr", ["1e400", "(int)1e400", "1e308 * 10", "dim3(1e400)", "-1e400", "(int)(1e400 - 1e400)"])
def test_non_finite_grid_is_unknown(expr):
    assert grid_of(expr) is None


@pytest.mark.parametrize("bound", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_non_finite_binding_is_unknown(bound):
    assert grid_of("N", user={"N": bound}) is None
    assert value("(int)N + 1", user={"N": bound}) is None


# ---- the Evaluator directly ----------------------------------------------------------------------------------


def test_evaluator_direct_values():
    assert value("-7 / 2") == -3
    assert value("-7 % 2") == -1
    assert value("(int)-2.9") == -2
    assert value("(double)3") == 3.0 and isinstance(value("(double)3"), float)
    assert value("1.5 << 2") is None  # shifts and % need integers
    assert value("1.0 % 2") is None


def test_evaluator_scope_lookup_order():
    macros = {"N": Macro(None, "3"), "CDIV": Macro(("a", "b"), "(((a)+(b)-1)/(b))")}
    assert value("N * 2", macros=macros) == 6
    assert value("N * 2", user={"N": 5}, macros=macros) == 10  # user bindings first
    assert value("CDIV(10, 3)", macros=macros) == 4
    assert value("A", macros={"A": Macro(None, "B")}, names={"B": 7}) == 7
    assert value("X", macros={"X": None}) is None  # ambiguous macro


def test_evaluator_child_scope_shadows_parent():
    parent = Scope(names={"a": 1, "b": 2})
    child = parent.child({"a": 10})
    assert Evaluator(child).value(expression_of("a + b")) == 12
    assert Evaluator(parent).value(expression_of("a + b")) == 3


def test_evaluator_self_referential_macro_is_none():
    assert value("SELF", macros={"SELF": Macro(None, "SELF + 1")}) is None
    assert value("F(1)", macros={"F": Macro(("x",), "F(x) * 2")}) is None


def test_evaluator_dim3():
    ev = Evaluator(Scope(names={"g": (4, 5, 6)}))
    assert ev.dim3(expression_of("dim3(2, 3)")) == (2, 3, 1)
    assert ev.dim3(expression_of("5")) == (5, 1, 1)
    assert ev.dim3(expression_of("g")) == (4, 5, 6)
    assert ev.value(expression_of("g.y")) == 5
    assert ev.dim3(expression_of("dim3(1, 2, 3, 4)")) is None
    assert ev.dim3(expression_of("dim3(1, nope)")) is None


def test_expression_of_rejects_bad_text():
    assert expression_of("1 +") is None
    assert expression_of(")") is None
    assert expression_of("1 + 2").type == "parenthesized_expression"


@pytest.mark.parametrize(
    "text, want",
    [("0x1F", 31), ("017", 15), ("0b101", 5), ("42ull", 42), ("0", 0), ("1'024", 1024), ("abc", None)],
)
def test_c_int(text, want):
    assert c_int(text) == want


def test_number_reads_floats():
    assert number("1.5f") == 1.5
    assert number("2e3") == 2000.0
    assert number("12") == 12 and isinstance(number("12"), int)
    assert number("x1") is None
