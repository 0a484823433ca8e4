"""A body from outside is one text from check to compile: what the safe subset checks is, byte for byte, what
is spliced, proven and compiled; and what it computes is defined on the host and the GPU alike."""

from __future__ import annotations

import sys
import unicodedata

import pytest
from hypothesis import given, settings, strategies as st

from swzc.formulas import prove as prover
from swzc.core.errors import SwzcError
from swzc.search.llm import restrict
from swzc.search.llm.restrict import check_body
from swzc.formulas.swizzles import COMPILABLE_TEXT, CustomSwizzle, cxx_library

GOOD = "unsigned col = block.x; // the column\nreturn make_uint3(col, block.y, 0u); /* the same tile */"


def _readers_disagree_on() -> list[str]:
    """Every character that some reader of the text takes as a line end, whitespace or an invisible format
    character: Python's str.splitlines and str.isspace, the C and C++ preprocessors' whitespace and line ends
    (tree-sitter, g++ and nvcc), Unicode's separators, controls and format characters."""
    chars = set()
    for code in range(sys.maxunicode + 1):
        c = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue
        if (len(f"a{c}b".splitlines()) > 1 or c.isspace()
                or unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Zs")):
            chars.add(c)
    chars -= {" ", "\t", "\n"}
    return sorted(chars)


DISAGREE = _readers_disagree_on()


def test_the_set_covers_the_known_line_ends():
    for c in ("\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\u202e", "\u2066", "\ufeff", "\u200b"):
        assert c in DISAGREE, repr(c)


@pytest.mark.parametrize("where", ["line comment", "block comment", "between tokens", "last line"])
def test_every_such_character_is_refused_wherever_it_stands(where):
    """None is let through, in a comment or in code: the reproduction was U+2028 in a // comment, which
    str.splitlines ends the line at while tree-sitter and the compilers keep the comment going."""
    let_through = []
    for c in DISAGREE:
        body = {
            "line comment": f"// a comment{c}return make_uint3(0u, 0u, 0u);\nreturn block;",
            "block comment": f"/* a{c}b */ return block;",
            "between tokens": f"unsigned a = 1u;{c}return block;",
            "last line": f"return block;\n// {c}",
        }[where]
        if check_body(body).ok:
            let_through.append(f"U+{ord(c):04X}")
    assert not let_through


def test_crlf_is_decided_once_before_the_check():
    checked = check_body(GOOD.replace("\n", "\r\n"))
    assert checked.ok and "\r" not in checked.body
    assert not check_body("return block;\r// lone carriage return").ok


def test_every_other_non_ascii_character_is_refused_too():
    for code in range(0x80, sys.maxunicode + 1, 4099):  # a spread over every plane
        if not 0xD800 <= code <= 0xDFFF:
            assert not check_body(f"// {chr(code)}\nreturn block;").ok, hex(code)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([
    "unsigned a = block.x;", "// note", "/* x */", "\t", " ", "\n", "unsigned b = grid.x / 2u + 1u;",
    "if (block.y > 0u) { return block; }", "for (unsigned i = 0u; i < 4u; ++i) { }", "unsigned m = min(block.x, 3u);",
    "\r\n", "\u2028", "\u00e9", "\x0c",
]), max_size=8))
def test_what_is_compiled_is_what_was_checked(pieces):
    """Whatever is accepted: printable ASCII, tabs and newlines only, so that every reader splits its lines
    alike, and it reaches the compiled library (host prover and device splice) unchanged."""
    checked = check_body("".join(pieces) + "\nreturn block;")
    if not checked.ok:
        return
    assert COMPILABLE_TEXT.fullmatch(checked.body)
    assert checked.body.splitlines() == checked.body.split("\n")
    formula = CustomSwizzle("t", checked.body)
    assert "{\n" + checked.body + "\n}\n" in formula.definition()
    assert formula.definition() in cxx_library([(formula, "2d")])
    assert formula.definition() in prover.host_program([(formula, "2d")])


def test_a_custom_swizzle_holds_only_compilable_text():
    for c in ("\u2028", "\r", "\x85", "\u202e"):
        with pytest.raises(ValueError, match="printable ASCII"):
            CustomSwizzle("x", f"// {c}\nreturn swzc_v_block;")


def test_a_rename_that_changes_the_reading_is_refused(monkeypatch):
    """The renamed text is parsed again and matched node for node against the checked one."""
    assert check_body(GOOD).ok
    real = restrict._prefixed
    monkeypatch.setattr(restrict, "_prefixed", lambda body, source: [(start, end, "a + b") for start, end, _ in real(body, source)])
    checked = check_body(GOOD)
    assert not checked.ok and "does not read as the checked one" in checked.violations[0].message


# ---- defined on host and device ---------------------------------------------------------------------------

UNDEFINED = [
    pytest.param("unsigned s = 1u << min(grid.x, 32u);\nreturn make_uint3((block.x + s) % grid.x, block.y, 0u);",
                 "line 1 of its body: shift exponent 32 is too large", id="shift-by-width"),
    pytest.param("unsigned long long s = 1ull << min(grid.x + 30u, 70u);\nreturn make_uint3((block.x + (unsigned)s) % grid.x, block.y, 0u);",
                 "shift exponent", id="shift-64"),
    pytest.param("unsigned d = grid.x - grid.x;\nreturn make_uint3(block.x + block.y / d * 0u, block.y, 0u);",
                 "line 2 of its body: division by zero", id="division-by-zero"),
    pytest.param("return make_uint3(block.x % (grid.x - grid.x), block.y, 0u);", "division by zero", id="remainder-by-zero"),
    pytest.param("int v = (int)grid.x * 2147483647;\nreturn make_uint3((block.x + (unsigned)v) % grid.x, block.y, 0u);",
                 "signed integer overflow: 40 * 2147483647", id="signed-overflow"),
    pytest.param("int m = -2147483647 - (int)grid.y / 2;\nint v = -m;\nreturn make_uint3((block.x + (unsigned)v) % grid.x, block.y, 0u);",
                 "negation of -2147483648", id="negation"),
    pytest.param("int v = -1 << (int)(grid.x % 8u);\nreturn make_uint3((block.x + (unsigned)v) % grid.x, block.y, 0u);",
                 "left shift of negative value", id="shift-of-negative"),
]


@pytest.mark.parametrize("body, said", UNDEFINED)
def test_undefined_behaviour_is_a_rejection_that_says_what_failed(body, said):
    checked = check_body(body)
    assert checked.ok, checked.violations  # the subset lets it by; the prover must stop it
    formula = CustomSwizzle("ub", checked.body)
    with pytest.raises(SwzcError) as caught:
        prover.prove([(formula, "2d", ((40, 2, 1, 0),))])
    message = caught.value.message
    assert "undefined behaviour in " + formula.name in message and said in message and "grid 40x2x1" in message


def test_without_the_sanitizer_the_same_body_is_proven(monkeypatch):
    """The sanitizer is what stops it: built without, the host's x86 masking passes the shift by 32."""
    monkeypatch.setattr(prover, "_PROVER_FLAGS", ("-O2", "-std=c++11"))
    prover.build_prover.cache_clear()
    try:
        formula = CustomSwizzle("ub", check_body(UNDEFINED[0].values[0]).body)
        (proof,) = prover.prove([(formula, "2d", ((40, 2, 1, 0),))])
        assert proof.ok
    finally:
        prover.build_prover.cache_clear()


def test_without_the_sanitizer_s_library_the_checks_trap(monkeypatch):
    """A host compiler whose sanitizer run-time is missing builds the same checks as traps: still a rejection."""
    monkeypatch.setattr(prover, "_PROVER_FLAGS", ("-O2", "-std=c++11", "-fsanitize=undefined", "-l:libubsan-not-here.so"))
    prover.build_prover.cache_clear()
    try:
        formula = CustomSwizzle("ub", check_body(UNDEFINED[0].values[0]).body)
        with pytest.raises(SwzcError) as caught:
            prover.prove([(formula, "2d", ((40, 2, 1, 0),))])
        assert "SIGILL" in caught.value.message and "undefined behaviour" in caught.value.message
        (proof,) = prover.prove([(CustomSwizzle("fine", check_body(GOOD).body), "2d", ((40, 2, 1, 0),))])
        assert proof.ok
    finally:
        prover.build_prover.cache_clear()


def test_the_trap_build_is_cached_under_its_own_key(tmp_path, monkeypatch):
    """The prover built with traps is kept under the key of the flags it was built with: never under the key of
    the sanitizer's build, which a later run with the sanitizer's library would take for its own."""
    flags = ("-O2", "-std=c++11", "-fsanitize=undefined", "-l:libubsan-not-here.so")
    monkeypatch.setattr(prover, "_PROVER_FLAGS", flags)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    uses = ((CustomSwizzle("fine", check_body(GOOD).body), "2d"),)
    prover.build_prover.cache_clear()
    try:
        (proof,) = prover.prove([(uses[0][0], "2d", ((40, 2, 1, 0),))])
    finally:
        prover.build_prover.cache_clear()
    program, compiler = prover.host_program(list(uses)), prover.host_compiler()
    kept = {p.name for p in (tmp_path / "swzc").iterdir() if p.name.startswith("prover-")}
    trap = prover.prover_key(program, compiler, prover._PROVER_TRAP_FLAGS)
    assert proof.ok and kept == {f"prover-{trap}", f"prover-{trap}.sha256"}, kept


def test_a_compile_error_that_is_not_the_sanitizer_s_library_is_not_retried(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    failing = tmp_path / "failing-cxx"
    failing.write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\necho "error: the compiler is broken" >&2\nexit 1\n')
    failing.chmod(0o700)
    monkeypatch.setenv("CXX", str(failing))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    prover.build_prover.cache_clear()
    try:
        with pytest.raises(SwzcError) as caught:
            prover.prove([(CustomSwizzle("fine", check_body(GOOD).body), "2d", ((4, 2, 1, 0),))])
    finally:
        prover.build_prover.cache_clear()
    assert "the compiler is broken" in caught.value.message and "-fno-sanitize-recover=all" in caught.value.message
    assert len(calls.read_text().splitlines()) == 1
