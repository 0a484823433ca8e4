"""The safe subset (swzc.search.llm.restrict) to the letter: its limits at their edges, the exact reply a refused body
gets (line and words, which go back to the LLM), C++'s integer rules as the loop counter follows them, and the
second parse that makes what is compiled what was checked."""

from __future__ import annotations

import pytest

from swzc.search.llm import restrict, restrict_numbers
from swzc.search.llm.restrict import Checked, Violation, check_body


def _only(body: str) -> list[str]:
    """The messages of a refused body."""
    checked = check_body(body)
    assert not checked.ok and checked.body == ""
    return [v.message for v in checked.violations]


# ---- the limits, at their edges ------------------------------------------------------------------------------


def test_the_length_limit_is_inclusive():
    body = "return block;"
    assert check_body(body + " " * (restrict.MAX_CHARS - len(body))).ok
    assert _only(body + " " * (restrict.MAX_CHARS + 1 - len(body))) == [
        f"line 1: the body is {restrict.MAX_CHARS + 1} characters long (at most {restrict.MAX_CHARS})"]
    assert restrict.MAX_CHARS == 4000


def test_the_line_limit_is_inclusive_and_said_on_the_first_line_past_it():
    assert restrict.MAX_LINES == 120
    assert check_body("return block;" + "\n" * 119).ok
    assert check_body("return block;" + "\n" * 200).ok  # trailing newlines are not lines
    assert check_body(";\n" * 119 + "return block;").ok
    assert check_body(";\n" * 120 + "return block;").violations == (
        Violation(121, "line 121: the body has 121 lines (at most 120)"),)
    # only newlines are stripped from the end: an X after them keeps every line
    assert _only("return block;" + "\n" * 130 + "X") == ["line 121: the body has 131 lines (at most 120)"]
    # past the limit nothing else is looked at (a directive on every line would crowd the count out)
    assert _only("# x\n" * 130) == ["line 121: the body has 130 lines (at most 120)"]


def test_the_node_limit_is_inclusive_and_comments_do_not_count():
    assert restrict.MAX_NODES == 400
    assert check_body(";" * 398 + "return block;").ok  # 398 empty statements, a return and its value
    assert check_body(";" * 398 + "// a comment\n" * 30 + "/* c */ return block;").ok
    assert _only(";" * 399 + "return block;") == ["line 1: the body is too large (more than 400 syntax nodes)"]


def test_at_most_twenty_violations_are_reported_in_line_order():
    assert restrict.MAX_REPORTED == 20
    body = "".join(f"unsigned a{i} = b{i};\n" for i in range(30)) + "return block;"
    checked = check_body(body)
    assert [v.line for v in checked.violations] == list(range(1, 21))
    assert checked.violations[0] == Violation(1, "line 1: b0 is not declared (only block, grid and locals declared above it)")


def test_a_violation_said_twice_on_one_line_is_reported_once():
    assert _only("printf(1u); printf(2u);\nreturn block;") == [
        "line 1: calling printf is not allowed (only min, max and make_uint3)"]


def test_what_is_not_text_is_refused_on_line_1():
    assert check_body(None) == Checked("", (Violation(1, "line 1: the body must be text"),))  # type: ignore[arg-type]
    assert check_body(b"return block;") == Checked("", (Violation(1, "line 1: the body must be text"),))  # type: ignore[arg-type]


# ---- the text, before any parse ------------------------------------------------------------------------------

# Each refused by one rule only: the text is not parsed (a parse would add its own complaint, said beside each).
TEXT_ONLY = [
    ("return block;\x00", "line 1: NUL bytes are not allowed"),  # cannot parse '\x00'
    ("return block;\n\x01", "line 2: control characters are not allowed (only newlines and tabs)"),  # cannot parse
    ("return blöck;", "line 1: only printable ASCII, tabs and newlines are allowed (comments included)"),  # not declared
    ("return block;\n#define X 1", "line 2: preprocessor directives are not allowed"),  # preproc def
    ("unsigned a = 1u; # x\nreturn block;", "line 1: # is not allowed (no preprocessor)"),  # preproc call
    ("unsigned a = 1u + \\\n b;\nreturn block;", "line 1: backslash-newline continuations are not allowed"),  # b undeclared
    ("unsigned a = 1u \\ 2u;\nreturn block;", "line 1: backslashes are not allowed"),  # cannot parse
    ("??=define X 1\nreturn block;", "line 1: ?? is not allowed (trigraphs)"),  # cannot parse
    ("if (block.x) <% return block; %>\nreturn grid;", "line 1: digraphs (<: :> <% %> %:) are not allowed"),
    ("unsigned $a = 1u;\nreturn block;", "line 1: $, @ and ` are not allowed"),  # not a plain ASCII name
]


@pytest.mark.parametrize("body, message", TEXT_ONLY)
def test_a_text_rule_refuses_before_the_parse(body, message):
    assert _only(body) == [message]


def test_quotes_are_reported_with_what_the_parse_finds():
    assert _only('printf("x");\nreturn block;') == [
        "line 1: quotes are not allowed (no string or character literals)",
        "line 1: calling printf is not allowed (only min, max and make_uint3)"]


def test_a_backslash_before_the_end_is_not_a_continuation():
    assert _only("return block; // a\\_") == ["line 1: backslashes are not allowed"]


def test_text_that_is_not_valid_unicode_is_refused_on_its_line():
    assert _only("\n\ud800") == [
        "line 2: the body is not valid text",
        "line 2: only printable ASCII, tabs and newlines are allowed (comments included)"]
    assert _only("return block;\n\ud800") == [
        "line 2: the body is not valid text",
        "line 2: only printable ASCII, tabs and newlines are allowed (comments included)"]


# ---- the parse -----------------------------------------------------------------------------------------------

PARSE = [
    ("return block", "line 1: expected ;"),
    ("return block; {", "line 1: expected }"),  # the missing brace is past the body's last line
    ("return (block;", "line 1: expected )"),
    ("unsigned a = 1u;\nreturn block; }\nstatic uint3 g(uint3 block, uint3 grid) {",
     "line 2: the body closes the function early (unbalanced braces)"),
    ("unsigned a = 1u;\nunsigned b = ) + (;\nreturn block;", "line 2: cannot parse '= ) + ('"),
    ("unsigned a = 1u;\nunsigned b = (1u +\n + + + + + + + + + + + + + + + + + + + + + +;\nreturn block;",
     "line 1: cannot parse 'static __device__ __forceinlin'"),  # the first line of it, 30 characters
    ("unsigned a = 1u;\n\nreturn make_uint3(1u, 2u 3u);", "line 3: cannot parse '3u'"),
    ("return block;\n}", "line 2: cannot parse '}'"),
    ("unsigned b = ) +\n (;\nreturn block;", "line 1: cannot parse '= ) +'"),  # the first line of what cannot be parsed
    ("return block; }\nstatic uint3 g(uint3 block, uint3 grid) {",
     "line 1: the body closes the function early (unbalanced braces)"),
]


@pytest.mark.parametrize("body, message", PARSE)
def test_a_body_that_does_not_parse_cleanly_is_refused_with_where(body, message):
    assert _only(body) == [message]


def _checked_tree(text: str):
    source = restrict._HEAD + text.encode() + restrict._TAIL
    body, problems = restrict._parsed_body(restrict.parse(source).root_node, source, text.count("\n") + 1)
    assert body is not None and not problems
    return body, source


CHECKED = "if (block.x == 0u) return block;\nreturn grid;"


@pytest.mark.parametrize("compiled, same", [
    (CHECKED, True),
    ("if (block.x == 0u) return block;\nreturn block;", False),  # one token changed
    ("if (block.x == 0u) return block; else return grid;\nreturn grid;", False),  # a part added to a node
    ("if (block.x == 0u) return block;\nreturn\fgrid;", False),  # a character outside the compilable text
    ("if (block.x == 0u) return block;\nreturn grid; }\nstatic void g() {", False),  # a second function
    ("if (block.x == 0u) return block;\nreturn grid", False),  # a missing ;
])
def test_the_compiled_text_must_parse_to_the_checked_tree(compiled, same):
    body, source = _checked_tree(CHECKED)
    assert restrict._reads_as_checked(body, source, {}, compiled) is same


def test_only_the_renamed_names_may_differ():
    body, source = _checked_tree("return block;")
    at = source.index(b"block;")
    assert restrict._reads_as_checked(body, source, {at: "swzc_v_block"}, "return swzc_v_block;")
    assert not restrict._reads_as_checked(body, source, {at: "swzc_v_block"}, "return block;")
    assert not restrict._reads_as_checked(body, source, {}, "return swzc_v_block;")


def test_a_body_whose_renamed_text_reads_otherwise_is_refused(monkeypatch):
    monkeypatch.setattr(restrict, "_reads_as_checked", lambda *args: False)
    assert check_body("return block;") == Checked("", (Violation(1, "line 1: the renamed body does not read as the checked one"),))


def test_returns_are_followed_through_nested_blocks_up_to_a_depth():
    assert check_body("{" * 31 + "return block;" + "}" * 31).ok
    assert _only("{" * 32 + "return block;" + "}" * 32) == [
        "line 1: the body can reach its end without returning (end every path with a return)"]


def test_a_body_that_can_end_without_a_return_is_told_so_on_its_last_line():
    assert _only("unsigned a = 1u;\nif (a) return block;") == [
        "line 2: the body can reach its end without returning (end every path with a return)"]
    assert _only("unsigned a = 1u;\nif (a) return block;\nelse ;") == [
        "line 3: the body can reach its end without returning (end every path with a return)"]
    assert check_body("unsigned a = 1u;\nif (a) return block;\nelse // the other half\n return grid;").ok


# ---- C++'s integers ------------------------------------------------------------------------------------------

INT, UINT, LLONG, ULLONG = restrict_numbers._INT, restrict_numbers._UINT, restrict_numbers._LLONG, restrict_numbers._ULLONG


@pytest.mark.parametrize("kind, low, high", [(INT, -(1 << 31), (1 << 31) - 1), (UINT, 0, (1 << 32) - 1),
                                             (LLONG, -(1 << 63), (1 << 63) - 1), (ULLONG, 0, (1 << 64) - 1)])
def test_each_type_holds_exactly_its_range(kind, low, high):
    assert kind.fits(low) and kind.fits(high) and kind.fits(0)
    assert not kind.fits(low - 1) and not kind.fits(high + 1)
    assert kind.convert(high) == high and kind.convert(low) == low
    if kind.signed:
        assert kind.convert(high + 1) is None and kind.convert(low - 1) is None
    else:
        assert kind.convert(high + 1) == 0 and kind.convert(-1) == high and kind.convert(high + 6) == 5


@pytest.mark.parametrize("a, b, common", [(INT, INT, INT), (INT, UINT, UINT), (UINT, INT, UINT), (INT, LLONG, LLONG),
                                          (LLONG, INT, LLONG), (UINT, LLONG, LLONG), (LLONG, UINT, LLONG),
                                          (LLONG, ULLONG, ULLONG), (ULLONG, LLONG, ULLONG), (UINT, ULLONG, ULLONG),
                                          (ULLONG, INT, ULLONG), (UINT, UINT, UINT)])
def test_the_usual_arithmetic_conversions(a, b, common):
    assert restrict_numbers._common(a, b) == common


@pytest.mark.parametrize("text, expected", [
    ("0", (0, INT)), ("7", (7, INT)), ("2147483647", (2147483647, INT)), ("2147483648", (2147483648, LLONG)),
    ("4294967295", (4294967295, LLONG)), ("9223372036854775807", ((1 << 63) - 1, LLONG)),
    ("0x7fffffff", (0x7FFFFFFF, INT)), ("0x80000000", (0x80000000, UINT)), ("0XFFFFFFFF", (0xFFFFFFFF, UINT)),
    ("0x100000000", (1 << 32, LLONG)), ("0x8000000000000000", (1 << 63, ULLONG)), ("017", (15, INT)),
    ("020000000000", (1 << 31, UINT)), ("0b101", (5, INT)), ("0B11", (3, INT)), ("00", (0, INT)),
    ("1u", (1, UINT)), ("4294967295U", (4294967295, UINT)), ("4294967296u", (1 << 32, ULLONG)), ("1ul", (1, ULLONG)),
    ("1UL", (1, ULLONG)), ("1llu", (1, ULLONG)), ("1uLL", (1, ULLONG)), ("1l", (1, LLONG)), ("1LL", (1, LLONG)),
    ("2147483648l", (1 << 31, LLONG)), ("0x1l", (1, LLONG)), ("0xffffffffffffffffL", ((1 << 64) - 1, ULLONG)),
    ("-1", (-1, INT)), ("-2147483648", (-(1 << 31), LLONG)), ("-1u", ((1 << 32) - 1, UINT)),
    ("-0x80000000", (1 << 31, UINT)), ("-9223372036854775807", (-(1 << 63) + 1, LLONG)), ("+5", (5, INT)),
    ("-0", (0, INT)),
])
def test_integer_literals_have_the_value_and_type_cxx_gives_them(text, expected):
    assert restrict_numbers._literal(text) == expected


@pytest.mark.parametrize("text, message", [
    ("1.5f", "1.5f is not an integer literal (no floats)"),
    ("08", "08 is not an integer literal (no floats)"),
    ("1uu", "1uu is not an integer literal (no floats)"),
    ("123456789012345678901234567890.0", "12345678901234567890 is not an integer literal (no floats)"),
    ("9223372036854775808", "the literal 9223372036854775808 is too large"),
    ("18446744073709551616u", "the literal 18446744073709551616u is too large"),
    ("9223372036854775808ll", "the literal 9223372036854775808ll is too large"),
    ("0x10000000000000000", "the literal 0x10000000000000000 is too large"),
    ("1234567890123456789012345678901234", "the literal 123456789012345678901234 is too large"),
    ("-9223372036854775808", "the literal 9223372036854775808 is too large"),
])
def test_literals_swzc_does_not_accept_are_said_so(text, message):
    assert restrict_numbers._literal(text) == message


@pytest.mark.parametrize("start, kind, condition, step, trips", [
    (0, INT, ("<", (4, INT)), ("+=", (1, INT)), 4),
    (0, INT, ("<=", (4, INT)), ("+=", (1, INT)), 5),
    (0, INT, ("!=", (4, INT)), ("+=", (2, INT)), 2),
    (4, INT, (">", (0, INT)), ("-=", (1, INT)), 4),
    (4, INT, (">=", (0, INT)), ("-=", (1, INT)), 5),
    (0, INT, ("<", (64, INT)), ("+=", (1, INT)), 64),
    (0, INT, ("<", (0, INT)), ("+=", (1, INT)), 0),
    (0, UINT, ("<", (5, INT)), ("-=", (1, INT)), 1),  # 0u - 1 wraps past the bound
    (-1, INT, ("<", (5, UINT)), ("+=", (1, INT)), 0),  # -1 compared as unsigned is large
    (-1, LLONG, ("<", (5, UINT)), ("+=", (1, INT)), 6),  # but not when the signed type is wider
    (1, UINT, ("<", (16, UINT)), ("<<=", (1, INT)), 4),
    (16, UINT, (">", (0, UINT)), (">>=", (1, INT)), 5),
    (1, INT, ("<", (100, INT)), ("*=", (3, INT)), 5),
    (100, INT, (">", (0, INT)), ("/=", (2, INT)), 7),
])
def test_a_loop_header_is_run_with_cxx_s_integer_rules(start, kind, condition, step, trips):
    assert restrict_numbers._trips(start, kind, condition, step) == trips


def test_a_loop_past_the_trip_limit_is_refused():
    assert restrict.MAX_TRIPS == 64
    assert restrict_numbers._trips(0, INT, ("<", (65, INT)), ("+=", (1, INT))) == "this loop runs more than 64 times (or never stops)"
    assert restrict_numbers._trips(0, INT, ("<=", (64, INT)), ("+=", (1, INT))) == "this loop runs more than 64 times (or never stops)"


@pytest.mark.parametrize("value, kind, operator, amount, amount_kind, result", [
    (5, INT, "+=", 3, INT, 8), (5, INT, "-=", 3, INT, 2), (5, INT, "*=", 3, INT, 15), (7, INT, "/=", 2, INT, 3),
    (-7, INT, "/=", 2, INT, -3), (7, INT, "/=", -2, INT, -3), (-7, INT, "/=", -2, INT, 3),  # towards zero
    (-7, INT, "/=", 2, UINT, 2147483644),  # -7 becomes unsigned first
    (0xFFFFFFFF, UINT, "+=", 1, INT, 0), (0, UINT, "-=", 1, INT, 0xFFFFFFFF), (1 << 31, UINT, "<<=", 1, INT, 0),
    (3, INT, "<<=", 2, INT, 12), (12, INT, ">>=", 2, INT, 3), (1, UINT, "<<=", 31, INT, 1 << 31),
    (1, ULLONG, "<<=", 63, INT, 1 << 63), (2, LLONG, "*=", 3, ULLONG, 6), (-2, LLONG, "+=", 1, INT, -1),
    (5, INT, "+=", 0xFFFFFFFF, UINT, 4),  # 5 + 4294967295u wraps in unsigned, then fits the int counter
])
def test_one_step_of_a_loop_counter(value, kind, operator, amount, amount_kind, result):
    assert restrict_numbers._step(value, kind, operator, amount, amount_kind) == result


@pytest.mark.parametrize("value, kind, operator, amount, amount_kind, message", [
    (1, INT, "<<=", 32, INT, "the loop shifts by 32, not less than the counter's 32 bits"),
    (1, UINT, ">>=", -1, INT, "the loop shifts by -1, not less than the counter's 32 bits"),
    (1, LLONG, "<<=", 64, INT, "the loop shifts by 64, not less than the counter's 64 bits"),
    (-1, INT, "<<=", 1, INT, "the loop shifts a negative counter"),
    (-4, INT, ">>=", 1, INT, "the loop shifts a negative counter"),
    (1 << 30, INT, "<<=", 1, INT, "the loop's counter overflows"),
    (1, INT, "/=", 0, INT, "the loop divides by zero"),
    (1, UINT, "/=", 0, UINT, "the loop divides by zero"),
    ((1 << 31) - 1, INT, "+=", 1, INT, "the loop's counter overflows"),
    (-(1 << 31), INT, "-=", 1, INT, "the loop's counter overflows"),
    (1 << 16, INT, "*=", 1 << 15, INT, "the loop's counter overflows"),
    ((1 << 31) - 1, INT, "+=", 1, LLONG, "the loop's counter no longer fits its type"),
])
def test_a_step_with_undefined_or_implementation_defined_behaviour_is_refused(value, kind, operator, amount, amount_kind,
                                                                             message):
    assert restrict_numbers._step(value, kind, operator, amount, amount_kind) == message


# ---- the reply to each refused construct, word for word -----------------------------------------------------

EXACT = [
    ('return;',
     ['line 1: return must return a uint3 (no bare return)']),
    ('break;\nreturn block;',
     ['line 1: break is only allowed inside a for loop']),
    ('if (unsigned a = 1u) return block;\nreturn grid;',
     ['line 1: an if condition must be a single expression (no declarations or initialisers)']),
    ('if (unsigned a = 1u; a) return block;\nreturn grid;',
     ['line 1: an if condition must be a single expression (no declarations or initialisers)']),
    ('const unsigned a = 1u;\nconstexpr unsigned b = 2u;\nreturn block;',
     ['line 2: constexpr is not allowed (use const)']),
    ('extern unsigned a;\nreturn block;',
     ['line 1: extern is not allowed (only plain locals)']),
    ('unsigned a = 1u, b;\nreturn block;',
     ['line 1: b must be initialised where it is declared']),
    ('unsigned a(1u);\nreturn block;',
     ['line 1: initialise a with = (no braces or parentheses)']),
    ('unsigned a{1u};\nreturn block;',
     ['line 1: initialise a with = (no braces or parentheses)']),
    ('short s = 1;\nreturn block;',
     ['line 1: type short is not allowed (only unsigned, int, unsigned long long, long long, bool, uint3)']),
    ('signed int s = 1;\nreturn block;',
     ['line 1: type signed int is not allowed (only unsigned, int, unsigned long long, long long, bool, uint3)']),
    ('unsigned char c = 1;\nreturn block;',
     ['line 1: type unsigned char is not allowed (only unsigned, int, unsigned long long, long long, bool, uint3)']),
    ('dim3 d = block;\nreturn block;',
     ['line 1: type dim3 is not allowed (only unsigned, int, unsigned long long, long long, bool, uint3)']),
    ('decltype(block) d = block;\nreturn block;',
     ['line 1: decltype is not allowed']),
    ('unsigned block = 1u;\nreturn grid;',
     ['line 1: block is reserved']),
    ('unsigned int = 1u;\nreturn block;',
     ['line 1: expected identifier']),
    ('unsigned uint3 = 1u;\nreturn block;',
     ['line 1: uint3 is reserved']),
    ('unsigned make_uint3 = 1u;\nreturn block;',
     ['line 1: make_uint3 is reserved']),
    ('unsigned a = 0u;\nunsigned a = 1u;\nreturn block;',
     ['line 2: a is already declared (no redeclaring or shadowing)']),
    ('unsigned a = min;\nreturn block;',
     ['line 1: min may only be called']),
    ('unsigned a = __x;\nreturn block;',
     ['line 1: __x is reserved (names starting with __ or swzc_)']),
    ('unsigned a = swzc_v_block.x;\nreturn block;',
     ['line 1: swzc_v_block is reserved (names starting with __ or swzc_)']),
    ('unsigned a = (block.x <=> 1u);\nreturn block;',
     ['line 1: operator <=> is not allowed']),
    ('unsigned a = 1u;\nunsigned b = &a;\nreturn block;',
     ['line 2: address-of (&) and dereference (*) are not allowed (no pointers)']),
    ('unsigned a = 1u;\nunsigned b = *a;\nreturn block;',
     ['line 2: address-of (&) and dereference (*) are not allowed (no pointers)']),
    ('block = grid;\nreturn block;',
     ['line 1: block is read-only']),
    ('const unsigned a = 1u;\na += 1u;\nreturn block;',
     ['line 2: a is const']),
    ('const uint3 r = block;\nr.x++;\nreturn r;',
     ['line 2: r is const']),
    ('for (int i = 0; i < 4; ++i) { i += 1; }\nreturn block;',
     ['line 1: the loop counter i may not be assigned inside its loop']),
    ('for (int i = 0; i < 4; ++i) { for (int j = 0; j < 2; ++j) { i++; } }\nreturn block;',
     ['line 1: the loop counter i may not be assigned inside its loop']),
    ('unsigned a = 0u;\n(a)++;\nreturn block;',
     ['line 2: only a local variable or a field of a uint3 local may be assigned']),
    ('unsigned a = 0u;\na.x = 1u;\nreturn block;',
     ['line 2: a is not a uint3: it has no fields']),
    ('b.x = 1u;\nreturn block;',
     ['line 1: b is not declared (only block, grid and locals declared above it)']),
    ('b = 1u;\nreturn block;',
     ['line 1: b is not declared (only block, grid and locals declared above it)']),
    ('block.x++;\nreturn block;',
     ['line 1: block is read-only']),
    ('unsigned a = block->x;\nreturn block;',
     ['line 1: -> is not allowed (no pointers)']),
    ('unsigned a = (block).x;\nreturn block;',
     ['line 1: fields may only be read from block, grid or a uint3 local (X.x, X.y, X.z)']),
    ('unsigned a = c.x;\nreturn block;',
     ['line 1: c is not declared (only block, grid and locals declared above it)']),
    ('unsigned a = block.w;\nreturn block;',
     ['line 1: only the fields .x, .y and .z exist']),
    ('unsigned a = (volatile unsigned)block.x;\nreturn block;',
     ['line 1: volatile is not allowed in a cast']),
    ('unsigned a = (float)block.x;\nreturn block;',
     ['line 1: type float is not allowed (only unsigned, int, unsigned long long, long long, bool, uint3)']),
    ('unsigned a = (dim3)block.x;\nreturn block;',
     ['line 1: type dim3 is not allowed (only unsigned, int, unsigned long long, long long, bool, uint3)']),
    ('unsigned a = (min)(1u, 2u);\nreturn block;',
     ['line 1: calling (min) is not allowed (only min, max and make_uint3)']),
    ('unsigned a = min<unsigned>(1u, 2u);\nreturn block;',
     ['line 1: template arguments are not allowed']),
    ('unsigned a = min(1u, 2u, 3u);\nreturn block;',
     ['line 1: min takes 2 arguments, not 3']),
    ('unsigned a = max(1u);\nreturn block;',
     ['line 1: max takes 2 arguments, not 1']),
    ('unsigned a = block.x(1u);\nreturn block;',
     ['line 1: calling block.x is not allowed (only min, max and make_uint3)']),
    ('unsigned a = int(block.x);\nreturn block;',
     ['line 1: functional casts like int(x) are not allowed (write (int)x)']),
    ('unsigned a = long(block.x);\nreturn block;',
     ['line 1: functional casts like long(x) are not allowed (write (long)x)']),
    ('for (; block.x < 4u; ) {}\nreturn block;',
     ['line 1: a for loop must start by setting one integer counter to an integer literal (for (int i = 0; ...))']),
    ('int i = 0;\nfor (; i < 4; ++i) {}\nreturn block;',
     ['line 2: a for loop must start by setting one integer counter to an integer literal (for (int i = 0; ...))']),
    ('for (int i = 0, j = 0; i < 4; ++i) {}\nreturn block;',
     ['line 1: a for loop must start by setting one integer counter to an integer literal (for (int i = 0; ...))']),
    ('unsigned n = 4u;\nfor (unsigned i = n; i < 4u; ++i) {}\nreturn block;',
     ['line 2: a for loop must start by setting one integer counter to an integer literal (for (int i = 0; ...))']),
    ('for (const int i = 0; i < 4; ++i) {}\nreturn block;',
     ['line 1: a loop counter must be a non-const integer (int, unsigned, long long, unsigned long long)', 'line 1: a for loop must start by setting one integer counter to an integer literal (for (int i = 0; ...))']),
    ('for (bool i = 0; i < 1; ++i) {}\nreturn block;',
     ['line 1: a loop counter must be a non-const integer (int, unsigned, long long, unsigned long long)', 'line 1: a for loop must start by setting one integer counter to an integer literal (for (int i = 0; ...))']),
    ('for (int block = 0; block < 4; ++block) {}\nreturn grid;',
     ['line 1: block is reserved', 'line 1: a for loop must start by setting one integer counter to an integer literal (for (int i = 0; ...))']),
    ('for (a = 0; a < 4; ++a) {}\nreturn block;',
     ['line 1: a for loop must start by setting one integer counter to an integer literal (for (int i = 0; ...))']),
    ('uint3 a = block;\nfor (a = 0; a < 4; ++a) {}\nreturn block;',
     ['line 2: a for loop must start by setting one integer counter to an integer literal (for (int i = 0; ...))']),
    ('const int a = 0;\nfor (a = 0; a < 4; ++a) {}\nreturn block;',
     ['line 2: a is const']),
    ('int a = 0;\nfor (a += 0; a < 4; ++a) {}\nreturn block;',
     ['line 2: a for loop must start by setting one integer counter to an integer literal (for (int i = 0; ...))']),
    ('for (int i = 0x; i < 4; ++i) {}\nreturn block;',
     ['line 1: a for loop must start by setting one integer counter to an integer literal (for (int i = 0; ...))']),
    ('for (int i = 1.5; i < 4; ++i) {}\nreturn block;',
     ['line 1: 1.5 is not an integer literal (no floats)', 'line 1: a for loop must start by setting one integer counter to an integer literal (for (int i = 0; ...))']),
    ('for (int i = 4294967296; i < 4; ++i) {}\nreturn block;',
     ["line 1: 4294967296 does not fit the loop counter's type", 'line 1: a for loop must start by setting one integer counter to an integer literal (for (int i = 0; ...))']),
    ('for (int i = 0; i == 4; ++i) {}\nreturn block;',
     ["line 1: a for loop's condition must compare i with an integer literal (i < 16)"]),
    ('for (int i = 0; 4 > i; ++i) {}\nreturn block;',
     ["line 1: a for loop's condition must compare i with an integer literal (i < 16)"]),
    ('for (int i = 0; i < 1.5; ++i) {}\nreturn block;',
     ['line 1: 1.5 is not an integer literal (no floats)', "line 1: a for loop's condition must compare i with an integer literal (i < 16)"]),
    ('for (int i = 0; i < 99999999999999999999; ++i) {}\nreturn block;',
     ['line 1: the literal 99999999999999999999 is too large', "line 1: a for loop's condition must compare i with an integer literal (i < 16)"]),
    ('int j = 0;\nfor (int i = 0; j < 4; ++i) {}\nreturn block;',
     ["line 2: a for loop's condition must compare i with an integer literal (i < 16)"]),
    ('int j = 1;\nfor (int i = 0; i < 4; i += j) {}\nreturn block;',
     ["line 2: a for loop's step must be ++i, --i, or i += k, -= k, *= k, /= k, <<= k, >>= k with a literal k"]),
    ('int j = 1;\nfor (int i = 0; i < 4; ++j) {}\nreturn block;',
     ["line 2: a for loop's step must be ++i, --i, or i += k, -= k, *= k, /= k, <<= k, >>= k with a literal k"]),
    ('int j = 1;\nfor (int i = 0; i < 4; j += 1) {}\nreturn block;',
     ["line 2: a for loop's step must be ++i, --i, or i += k, -= k, *= k, /= k, <<= k, >>= k with a literal k"]),
    ('for (int i = 0; i < 4; i %= 2) {}\nreturn block;',
     ["line 1: a for loop's step must be ++i, --i, or i += k, -= k, *= k, /= k, <<= k, >>= k with a literal k"]),
    ('for (int i = 0; i < 4; i = i + 1) {}\nreturn block;',
     ["line 1: a for loop's step must be ++i, --i, or i += k, -= k, *= k, /= k, <<= k, >>= k with a literal k"]),
    ('for (int i = 0; i < 4; i += 1.5) {}\nreturn block;',
     ['line 1: 1.5 is not an integer literal (no floats)', "line 1: a for loop's step must be ++i, --i, or i += k, -= k, *= k, /= k, <<= k, >>= k with a literal k"]),
    ('for (int i = 0; i < 4; i += 99999999999999999999) {}\nreturn block;',
     ['line 1: the literal 99999999999999999999 is too large', "line 1: a for loop's step must be ++i, --i, or i += k, -= k, *= k, /= k, <<= k, >>= k with a literal k"]),
    ('for (int i = 0; i < 4; ) {}\nreturn block;',
     ["line 1: a for loop's step must be ++i, --i, or i += k, -= k, *= k, /= k, <<= k, >>= k with a literal k"]),
    ('for (int i = 0; i < 64; ++i) for (int j = 0; j < 65; ++j) {}\nreturn block;',
     ['line 1: this loop runs more than 64 times (or never stops)']),
    ('unsigned i = 1u;\nfor (int i = 0; i < 4; ++i) {}\nreturn block;',
     ['line 2: i is already declared (no redeclaring or shadowing)', 'line 2: a for loop must start by setting one integer counter to an integer literal (for (int i = 0; ...))']),
    ('for (int i = 0; i < 4; ++i) {}\nreturn make_uint3(i, 0u, 0u);',
     ['line 2: i is not declared (only block, grid and locals declared above it)']),
    ('if (block.x) unsigned a = 1u;\nreturn block;',
     ["line 1: cannot parse 'a'"]),
    ('while (0) {}\nreturn block;',
     ['line 1: while loops are not allowed (use a for loop with a literal bound)']),
    ('do {} while (0);\nreturn block;',
     ['line 1: do loops are not allowed (use a for loop with a literal bound)']),
    ('for (unsigned v : block) {}\nreturn block;',
     ['line 1: range for loops are not allowed']),
    ('x: return block;',
     ['line 1: labels are not allowed', 'line 1: the body can reach its end without returning (end every path with a return)']),
    ('goto x;\nreturn block;',
     ['line 1: goto is not allowed']),
    ('switch (block.x) { case 0: return block; }\nreturn grid;',
     ['line 1: switch is not allowed (use if/else)']),
    ('try {} catch (...) {}\nreturn block;',
     ['line 1: try is not allowed']),
    ('throw 1;\nreturn block;',
     ['line 1: throw is not allowed']),
    ('auto f = [] { return 1u; };\nreturn block;',
     ['line 1: auto is not allowed (write the type)']),
    ('unsigned f();\nreturn block;',
     ['line 1: function declarations are not allowed']),
    ('enum E { A };\nreturn block;',
     ['line 1: enum definitions are not allowed']),
    ('union U { unsigned a; };\nreturn block;',
     ['line 1: union definitions are not allowed']),
    ('class C {};\nreturn block;',
     ['line 1: class definitions are not allowed']),
    ('using u = unsigned;\nreturn block;',
     ['line 1: using is not allowed']),
    ('using namespace std;\nreturn block;',
     ['line 1: using is not allowed']),
    ('namespace n {}\nreturn block;',
     ['line 1: namespaces are not allowed']),
    ('static_assert(1, "x");\nreturn block;',
     ['line 1: quotes are not allowed (no string or character literals)', 'line 1: static_assert is not allowed']),
    ('delete 0;\nreturn block;',
     ['line 1: delete is not allowed (no memory)']),
    ('unsigned a = alignof(unsigned);\nreturn block;',
     ['line 1: alignof is not allowed']),
    ('unsigned a = offsetof(S, x);\nreturn block;',
     ['line 1: offsetof is not allowed']),
    ('unsigned a = nullptr;\nreturn block;',
     ['line 1: nullptr is not allowed (no pointers)']),
    ('unsigned a = this;\nreturn block;',
     ['line 1: this is not allowed']),
    ('unsigned a = 1_km;\nreturn block;',
     ['line 1: user-defined literals are not allowed']),
    ('unsigned a = (uint3){1u, 2u, 3u}.x;\nreturn block;',
     ['line 1: fields may only be read from block, grid or a uint3 local (X.x, X.y, X.z)']),
    ('co_return block;',
     ['line 1: coroutines are not allowed', 'line 1: the body never returns (it must return a uint3)']),
    ('unsigned a = co_await block;\nreturn block;',
     ['line 1: coroutines are not allowed']),
    ('[[nodiscard]] unsigned a = 1u;\nreturn block;',
     ['line 1: attributes are not allowed']),
    ("unsigned a = 'a';\nreturn block;",
     ['line 1: quotes are not allowed (no string or character literals)']),
    ('unsigned a = R"(x)"[0];\nreturn block;',
     ['line 1: quotes are not allowed (no string or character literals)', 'line 1: subscripts are not allowed (no arrays or pointers)']),
    ('unsigned a = "a" "b"[0];\nreturn block;',
     ['line 1: quotes are not allowed (no string or character literals)', 'line 1: subscripts are not allowed (no arrays or pointers)']),
    ('vector<int> v = 0;\nreturn block;',
     ['line 1: templates are not allowed']),
    ('unsigned a = 1u;\nunsigned& b = a;\nreturn block;',
     ['line 2: references are not allowed']),
    ('unsigned a[2] = 0;\nreturn block;',
     ['line 1: arrays are not allowed']),
    ('unsigned (*f)(unsigned) = 0;\nreturn block;',
     ['line 1: function declarations are not allowed']),
    ('unsigned a = (unsigned&)block.x;\nreturn block;',
     ['line 1: casts to references are not allowed']),
    ('unsigned a = (unsigned[2])block.x;\nreturn block;',
     ['line 1: casts to arrays are not allowed']),
    ('unsigned a = (unsigned(*)())block.x;\nreturn block;',
     ['line 1: casts to functions are not allowed']),
    ('unsigned a = (unsigned())block.x;\nreturn block;',
     ['line 1: casts to functions are not allowed']),
    ('asm("nop");\nreturn block;',
     ['line 1: quotes are not allowed (no string or character literals)', 'line 1: asm is not allowed (only integer arithmetic)']),
    ('__asm__("nop");\nreturn block;',
     ['line 1: quotes are not allowed (no string or character literals)', 'line 1: asm is not allowed (only integer arithmetic)']),
    ('k<<<1, 1>>>();\nreturn block;',
     ['line 1: calling k is not allowed (only min, max and make_uint3)']),
    ('if constexpr (true) return block;\nreturn block;',
     ['line 1: constexpr is not allowed']),
    ('unsigned a = block.x ?: 1u;\nreturn block;',
     ['line 1: ?: needs all three operands']),
    ('unsigned a = sizeof block;\nreturn block;',
     ['line 1: sizeof is not allowed']),
    ('unsigned a = "a";\nreturn block;',
     ['line 1: quotes are not allowed (no string or character literals)']),
    ('unsigned a = "a" "b";\nreturn block;',
     ['line 1: quotes are not allowed (no string or character literals)']),
    ('unsigned a = R"(x)";\nreturn block;',
     ['line 1: quotes are not allowed (no string or character literals)']),
    ('unsigned a = min<<<1, 1>>>(1u, 2u);\nreturn block;',
     ['line 1: kernel launches are not allowed']),
    ('co_yield block;\nreturn block;',
     ['line 1: coroutines are not allowed']),
    ('uint3 r = (uint3){1u, 2u, 3u};\nreturn r;',
     ['line 1: brace initialisers are not allowed (use make_uint3 or =)']),
    ('return {1u, 2u, 0u};',
     ['line 1: brace initialisers are not allowed (use make_uint3 or =)']),
    ('unsigned a = std::x;\nreturn block;',
     ['line 1: qualified names (::) are not allowed']),
    ('bool f = [] { return true; };\nreturn block;',
     ['line 1: lambdas are not allowed']),
    ('unsigned f = [](unsigned v) { return v; }(1u);\nreturn block;',
     ['line 1: lambdas are not allowed']),
    ('unsigned f() { return 1u; }\nreturn block;',
     ['line 1: nested functions are not allowed']),
    ('template <int N> unsigned f();\nreturn block;',
     ['line 1: templates are not allowed']),
    ('struct S { unsigned a; };\nreturn block;',
     ['line 1: struct definitions are not allowed']),
    ('typedef unsigned u;\nreturn block;',
     ['line 1: typedef is not allowed']),
    ('namespace a = b;\nreturn block;',
     ['line 1: namespaces are not allowed']),
    ('case 1: return block;',
     ['line 1: switch is not allowed (use if/else)', 'line 1: the body can reach its end without returning (end every path with a return)']),
    ('unsigned a = (1u, 2u);\nreturn block;',
     ['line 1: comma expressions are not allowed']),
    ('if (block.x) [[likely]] return block;\nreturn grid;',
     ['line 1: attributes are not allowed']),
    ('[[likely]];\nreturn block;',
     ['line 1: attributes are not allowed']),
    ('unsigned a = (unsigned*)0;\nreturn block;',
     ['line 1: casts to pointers are not allowed']),
    ('unsigned* p = 0;\nreturn block;',
     ['line 1: pointers are not allowed']),
    ('unsigned a = (unsigned long long)(new unsigned);\nreturn block;',
     ['line 1: new is not allowed (no memory)']),
    ('__shared__ unsigned tile = 0u;\nreturn block;',
     ['line 1: __shared__ is not allowed (locals are plain values)']),
    ('static unsigned a = 0u;\nreturn block;',
     ['line 1: static is not allowed (only plain locals)']),
    ('volatile unsigned a = 0u;\nreturn block;',
     ['line 1: volatile is not allowed (locals are plain values)']),
    ('unsigned long a = 0u;\nreturn block;',
     ['line 1: type unsigned long is not allowed (only unsigned, int, unsigned long long, long long, bool, uint3)']),
    ('unsigned a = ({ 1u; });\nreturn block;',
     ['line 1: compound statement is not allowed here']),
    ('unsigned a = 0u;\nmin(a, 1u) = 3u;\nreturn block;',
     ['line 2: only a local variable or a field of a uint3 local may be assigned']),
    ('bool c = block.x and block.y;\nreturn block;',
     ['line 1: operator and is not allowed']),
    ('unsigned a = unsigned(block.x);\nreturn block;',
     ['line 1: functional casts like unsigned(x) are not allowed (write (unsigned)x)']),
    ('unsigned a = std::min(1u, 2u);\nreturn block;',
     ['line 1: calling std::min is not allowed (only min, max and make_uint3)']),
    ('unsigned a = this->x;\nreturn block;',
     ['line 1: -> is not allowed (no pointers)']),
    ('unsigned a = 0u;\nunsigned b = a.x;\nreturn block;',
     ['line 2: a is not a uint3: it has no fields']),
    ('const uint3 r = block;\nr.x = 1u;\nreturn r;',
     ['line 2: r is const']),
    ('unsigned a = 0u;\n{ unsigned a = 1u; }\nreturn block;',
     ['line 2: a is already declared (no redeclaring or shadowing)']),
    ('return swzc_candidate(block, grid);',
     ['line 1: calling swzc_candidate is not allowed (only min, max and make_uint3)']),
    ('unsigned __x = 0u;\nreturn block;',
     ['line 1: __x is reserved (names starting with __ or swzc_)']),
    ('unsigned swzc_x = 0u;\nreturn block;',
     ['line 1: swzc_x is reserved (names starting with __ or swzc_)']),
    ('unsigned min = 0u;\nreturn block;',
     ['line 1: min is reserved']),
    ('unsigned a;\nreturn block;',
     ['line 1: a must be initialised where it is declared']),
    ('unsigned a = 1.5f;\nreturn block;',
     ['line 1: 1.5f is not an integer literal (no floats)']),
    ('printf(block.x);\nreturn block;',
     ['line 1: calling printf is not allowed (only min, max and make_uint3)']),
    ('__builtin_trap();\nreturn block;',
     ['line 1: calling __builtin_trap is not allowed (only min, max and make_uint3)']),
    ('*(int*)0 = 1;\nreturn block;',
     ['line 1: address-of (&) and dereference (*) are not allowed (no pointers)']),
    ('unsigned a = block.x;\nunsigned b = a[0];\nreturn block;',
     ['line 2: subscripts are not allowed (no arrays or pointers)']),
    ('goto done;\ndone: return block;',
     ['line 1: goto is not allowed', 'line 2: labels are not allowed', 'line 2: the body can reach its end without returning (end every path with a return)']),
    ('for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) for (int k = 0; k < 2; ++k)\n  for (int l = 0; l < 2; ++l) {}\nreturn block;',
     ['line 2: for loops nest deeper than 3']),
    ('for (int i = 0; i < 64; ++i) for (int j = 0; j < 64; ++j) for (int k = 0; k < 2; ++k) {}\nreturn block;',
     ['line 1: nested loops run 8192 times in all (at most 4096)']),
    ('for (int i = 2147483647; i > 0; ++i) {}\nreturn block;',
     ["line 1: the loop's counter overflows"]),
    ('for (unsigned i = 1u; i < 4u; i <<= 40) {}\nreturn block;',
     ["line 1: the loop shifts by 40, not less than the counter's 32 bits"]),
    ('unsigned a = 99999999999999999999999;\nreturn block;',
     ['line 1: the literal 99999999999999999999999 is too large']),
    ('unsigned a = 0x;\nreturn block;',
     ['line 1: user-defined literals are not allowed']),
    ('uint3 r = block;\nr.x = 1u;\nr.w = 2u;\nreturn r;',
     ['line 3: only the fields .x, .y and .z exist']),
    ('uint3 r = block;\nr->x = 1u;\nreturn r;',
     ['line 2: -> is not allowed (no pointers)']),
    ('uint3 r = block;\n(r).x = 1u;\nreturn r;',
     ['line 2: fields may only be read from block, grid or a uint3 local (X.x, X.y, X.z)']),
    ('unsigned a = 0u;\na++ = 1u;\nreturn block;',
     ["line 2: cannot parse '= 1u'"]),
    ('unsigned a = 0u;\n++block;\nreturn block;',
     ['line 2: block is read-only']),
    ('unsigned a = 0u;\n++c;\nreturn block;',
     ['line 2: c is not declared (only block, grid and locals declared above it)']),
    ('unsigned a = 0u;\n*a = 1u;\nreturn block;',
     ['line 2: address-of (&) and dereference (*) are not allowed (no pointers)']),
    ('unsigned a = 0u;\na[0] = 1u;\nreturn block;',
     ['line 2: subscripts are not allowed (no arrays or pointers)']),
]

ALSO_VALID = [
    'for (int i = 0; i < 2; ++i) { if (i == 1) break; continue; }\nreturn block;',
    'if (block.x) return block; else {}\nreturn grid;',
    'unsigned a = 1u, b = 2u;\nreturn make_uint3(a, b, 0u);',
    'bool t = true;\nbool f = false;\nreturn t && !f ? block : grid;',
    'unsigned a = 1u;\nunsigned b = ~a + -a + +a;\nreturn block;',
    'unsigned a = 1u;\na ^= 1u; a <<= 1u; a >>= 1u; a %= 3u; a |= 1u; a &= 1u; a /= 1u; a *= 2u; a -= 1u; a += 1u;\nreturn block;',
    'uint3 r = block;\nr = grid;\nr.y = 0u;\nreturn r;',
    'unsigned a = (unsigned)block.x + (const unsigned)block.y;\nreturn block;',
    'for (unsigned i = -1; i > 4294967290u; --i) {}\nreturn block;',
    'for (int i = 0; i < 4; i++) {}\nfor (int j = 4; j > 0; j--) {}\nfor (int k = 4; k > 0; --k) {}\nreturn block;',
    'for (int i = 0; i < 4; ++i);\nreturn block;',
    'for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) for (int k = 0; k < 4; ++k) {}\nreturn block;',
    'for (int i = 0; i < 64; ++i) for (int j = 0; j < 64; ++j) {}\nreturn block;',
    'for (int i = 0; i < 64; ++i) for (int j = 0; j < 64; ++j) for (int k = 0; k < 1; ++k) {}\nreturn block;',
    'for (int i = 0; i < 4; ++i) {}\nunsigned i = 1u;\nreturn block;',
    'if (block.x) { unsigned a = 1u; } else { unsigned a = 2u; }\nreturn block;',
    'return block ? grid : block;',
    'if (block.x) return block;\nelse return grid;\nunsigned a = 1u;',
    'unsigned a = 1u;\nif (a) {}\nreturn block;',
    'if (block.x) {} else return block;\nreturn grid;',
    'const bool b = true;\nif (b) return block;\nelse if (!b) return grid;\nelse return block;',
]


@pytest.mark.parametrize("body, messages", EXACT)
def test_the_reply_to_a_refused_body_word_for_word(body, messages):
    assert _only(body) == messages


@pytest.mark.parametrize("body", ALSO_VALID)
def test_more_bodies_inside_the_subset(body):
    checked = check_body(body)
    assert checked.violations == () and checked.body


# Loops whose trip counts tell the four integer types apart: (32-bit unsigned wrap, 64-bit start, 2^31 passed).
_KIND_PROBES = ("for ({t} i = 4294967295u; i > 5u; ++i) {{}}\nreturn block;",
                "for ({t} i = 18446744073709551615ull; i > 5u; ++i) {{}}\nreturn block;",
                "for ({t} i = 2147483646; i < 2147483649; ++i) {{}}\nreturn block;")


@pytest.mark.parametrize("spelling, accepted", [
    ("int", (False, False, False)), ("unsigned", (True, True, True)), ("unsigned int", (True, True, True)),
    ("int unsigned", (True, True, True)), ("long long", (False, False, True)), ("long long int", (False, False, True)),
    ("int long long", (False, False, True)), ("unsigned long long", (False, True, True)),
    ("long long unsigned int", (False, True, True)), ("unsigned long long int", (False, True, True)),
])
def test_every_spelling_of_an_integer_type_is_that_type(spelling, accepted):
    assert tuple(check_body(probe.format(t=spelling)).ok for probe in _KIND_PROBES) == accepted


def test_bool_and_uint3_locals():
    assert check_body("bool b = block.x < 2u;\nuint3 r = block;\nif (b) r.x = 0u;\nreturn r;").ok
    assert _only("for (bool b = 0; b < 1; ++b) {}\nreturn block;")[0] == (
        "line 1: a loop counter must be a non-const integer (int, unsigned, long long, unsigned long long)")
    assert _only("for (uint3 b = 0; b < 1; ++b) {}\nreturn block;")[0] == (
        "line 1: a loop counter must be a non-const integer (int, unsigned, long long, unsigned long long)")


def test_the_backstop_stops_at_twenty_violations():
    """It walks from the end: the twenty it reports are the last twenty lines that break the rules."""
    checked = check_body("if constexpr (true) return block;\n" * 25 + "return block;")
    assert [v.line for v in checked.violations] == list(range(6, 26))
    assert checked.violations[0].message == "line 6: constexpr is not allowed"


def test_comments_are_no_part_of_what_they_stand_in():
    assert _only("return /* c */;") == ["line 1: return must return a uint3 (no bare return)"]
    assert check_body("if (/* c */ block.x) return block;\nreturn grid;").ok
    assert check_body("if (block.x) return block; else /* c */ return grid;").ok
    assert check_body("if (block.x) return block; else // c\n{ return grid; }").ok


# Refused at the first thing wrong: nothing inside it is looked at (it would add its own complaint).
FIRST_ONLY = [
    ("for (int a = 0; a < 2; ++a)\n for (int b = 0; b < 2; ++b)\n  for (int c = 0; c < 2; ++c)\n"
     "   for (int d = 0; d < 2; ++d)\n    for (int e = 0; e < 2; ++e) {}\nreturn block;",
     ["line 4: for loops nest deeper than 3"]),
    ("for (int i = 0; i < 64; ++i)\n for (int j = 0; j < 64; ++j)\n  for (int k = 0; k < 2; ++k)\n"
     "   for (int l = 0; l < 1; ++l) {}\nreturn block;",
     ["line 3: nested loops run 8192 times in all (at most 4096)"]),
    ("volatile unsigned a = b;\nreturn block;", ["line 1: volatile is not allowed (locals are plain values)"]),
    ("unsigned* p;\nunsigned a = b;\nreturn block;",
     ["line 1: pointers are not allowed", "line 2: b is not declared (only block, grid and locals declared above it)"]),
    ("[[nodiscard]] unsigned a = b;\nreturn block;", ["line 1: attributes are not allowed"]),
    ("unsigned __x = 0u;\nunsigned y = __x;\nreturn block;",
     ["line 1: __x is reserved (names starting with __ or swzc_)", "line 2: __x is reserved (names starting with __ or swzc_)"]),
    ("unsigned x = (c <=> 1u);\nreturn block;", ["line 1: operator <=> is not allowed"]),
    ("bool c = not d;\nreturn block;", ["line 1: operator not is not allowed"]),
    ("unsigned a = 1u;\na and_eq c;\nreturn block;", ["line 2: operator and_eq is not allowed"]),
    ("unsigned a = (float)c;\nreturn block;",
     ["line 1: type float is not allowed (only unsigned, int, unsigned long long, long long, bool, uint3)"]),
    ("unsigned a = min(c);\nreturn block;", ["line 1: min takes 2 arguments, not 1"]),
    ("unsigned a = (volatile unsigned)c;\nreturn block;", ["line 1: volatile is not allowed in a cast"]),
    ("unsigned a = (unsigned*)c;\nreturn block;", ["line 1: casts to pointers are not allowed"]),
    ("const unsigned a = 1u;\na.x = 1u;\nreturn block;", ["line 2: a is not a uint3: it has no fields"]),
    ("const uint3 r = block;\nr.w = 1u;\nreturn r;", ["line 2: only the fields .x, .y and .z exist"]),
    ("for (float i = 0; i < 4; ++i) {}\nreturn block;",
     ["line 1: type float is not allowed (only unsigned, int, unsigned long long, long long, bool, uint3)",
      "line 1: a for loop must start by setting one integer counter to an integer literal (for (int i = 0; ...))"]),
    ("int i = 0;\nfor (i++; i < 4; ++i) {}\nreturn block;",
     ["line 2: a for loop must start by setting one integer counter to an integer literal (for (int i = 0; ...))"]),
    ("for (int i = 0; ; ++i) {}\nreturn block;",
     ["line 1: a for loop's condition must compare i with an integer literal (i < 16)"]),
    ("unsigned a = size_t(block.x);\nreturn block;", ["line 1: functional casts like size_t(x) are not allowed (write (size_t)x)"]),
    ("a_very_long_type_name_that_goes_on_and_on_and_on a = 1u;\nreturn block;",
     ["line 1: type a_very_long_type_name_that_goes_on_and_o is not allowed (only unsigned, int, unsigned long long, long "
      "long, bool, uint3)"]),
    ("unsigned a = a_very_long_function_name_that_goes_on_and_on(1u);\nreturn block;",
     ["line 1: calling a_very_long_function_name_that_goes_on_a is not allowed (only min, max and make_uint3)"]),
]


@pytest.mark.parametrize("body, messages", FIRST_ONLY)
def test_a_refusal_looks_no_further_into_what_it_refused(body, messages):
    assert _only(body) == messages


@pytest.mark.parametrize("body", [
    "const /* c */ unsigned a = 1u;\nreturn block;",
    "unsigned /* c */ long long a = 1u;\nreturn block;",
    "unsigned a = min(1u /* c */, 2u);\nreturn block;",
    "unsigned a = (unsigned /* c */)block.x;\nreturn block;",
])
def test_a_comment_anywhere_in_a_declaration_a_type_a_call_or_a_cast_is_only_a_comment(body):
    assert check_body(body).ok


def _else_if_chain(ifs: int) -> str:
    return "".join(f"if (block.x == {i}u) return block; else " for i in range(ifs)) + "return grid;"


def test_returns_are_followed_through_an_else_if_chain_up_to_a_depth():
    assert check_body(_else_if_chain(31)).ok
    assert _only(_else_if_chain(32)) == ["line 1: the body can reach its end without returning (end every path with a return)"]


def test_a_shift_by_zero_and_a_shift_of_zero_are_defined():
    assert restrict_numbers._step(5, INT, "<<=", 0, INT) == 5 and restrict_numbers._step(5, INT, ">>=", 0, INT) == 5
    assert restrict_numbers._step(0, INT, "<<=", 1, INT) == 0 and restrict_numbers._step(0, INT, ">>=", 3, INT) == 0


def test_the_checked_body_names_every_variable_with_the_prefix_and_no_callee():
    """Locals and the body's parameters take swzc's prefix (no clash with the kernel's names); a callee is not a
    variable (min becomes swzc's own swzc_min, make_uint3 stays)."""
    checked = check_body("unsigned x = min(block.x, grid.x);\nreturn make_uint3(x, block.y, block.z);")
    assert checked.ok and checked.body == (
        "unsigned swzc_v_x = swzc_min(swzc_v_block.x, swzc_v_grid.x);\n"
        "return make_uint3(swzc_v_x, swzc_v_block.y, swzc_v_block.z);")


@pytest.mark.parametrize("body", [
    "unsigned t = 0u;\nreturn make_uint3(t + ((u = 1u) & 0u), 0u, 0u);",
    "unsigned t = 0u;\nreturn make_uint3(t + (u++ & 0u), 0u, 0u);",
])
def test_an_assignment_inside_an_expression_is_refused_for_that_alone(body):
    """Refused where it stands: the walk does not go on into its parts (u is declared nowhere, and that is
    not said)."""
    assert _only(body) == ["line 2: an assignment or ++/-- must be a statement of its own, not part of an expression"]


@pytest.mark.parametrize("cast", ["(unsigned /* the column */)block.x", "(unsigned /* c */ int)block.x",
                                  "(const /* a comment among the words of the type */ unsigned)block.x"])
def test_a_comment_inside_a_cast_is_a_comment(cast):
    assert check_body(f"return make_uint3({cast}, block.y, block.z);").ok


@pytest.mark.parametrize("chain", ["consequence", "alternative"])
def test_returns_are_followed_through_nested_ifs_up_to_a_depth(chain):
    def body(n: int) -> str:
        if chain == "consequence":
            return "if (block.x == 0u) " * n + "return block;" + " else return grid;" * n
        return "if (block.x == 0u) return block; else " * n + "return grid;"

    assert check_body(body(31)).ok
    assert _only(body(32)) == ["line 1: the body can reach its end without returning (end every path with a return)"]
