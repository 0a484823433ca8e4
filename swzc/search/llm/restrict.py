"""The safe subset of C++ an LLM's swizzle body must keep to before anything compiles it.

The LLM writes the body of

    static __device__ __forceinline__ uint3 NAME(const uint3 block, const uint3 grid) { BODY }

The tile grid is grid.x columns by grid.y rows (grid.z == 1); `block` is the tile at a dispatch position and the
function returns the tile that position computes, e.g. `return make_uint3(col, row, 0u);`.  swzc compiles the
body twice, on the host into the bijection prover and on the device into the user's kernel, so the text is
untrusted until it is shown to be integer arithmetic on `block`, `grid` and its own locals, with loops whose trip
counts follow from the text alone.  Then it cannot touch memory, call out, run without bound, or read differently
to the compiler than to tree-sitter.

The check is a whitelist.  Text that could make the compiler see something tree-sitter does not (the
preprocessor, trigraphs, digraphs, line continuations) is refused before parsing; after parsing, every node of
the body must be one that a rule here accepted, and every token one this module knows.  `check_body` never
raises: whatever the input, it returns a `Checked`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from tree_sitter import Node

from swzc.frontend.source import parse
from swzc.formulas.swizzles import COMPILABLE_TEXT, CUSTOM_SIGNATURE, MIN_MAX_CXX, VARIABLE_PREFIX, custom_function

__all__ = ["Checked", "MIN_MAX_CXX", "Violation", "check_body"]

MAX_CHARS = 4000
MAX_LINES = 120
MAX_NODES = 400  # named nodes in the body, comments not counted: bounds the work of every later stage
MAX_TRIPS = 64  # per for loop
MAX_NESTED_TRIPS = 4096  # product of the trip counts of loops nested in one another
MAX_LOOP_DEPTH = 3
MAX_REPORTED = 20  # violations kept: enough to fix a reply, short enough for a prompt

# The function the body is parsed inside; its name is reserved (swzc_), so the body cannot call itself.
_HEAD = f"static __device__ __forceinline__ {CUSTOM_SIGNATURE.format(name='swzc_candidate')} {{\n".encode()
_TAIL = b"\n}\n"


@dataclass(frozen=True)
class Violation:
    """One way the body leaves the subset, said so that the LLM can fix it."""

    line: int  # 1-based line within the body
    message: str  # "line 3: asm is not allowed (only integer arithmetic)"


@dataclass(frozen=True)
class Checked:
    """The verdict on a body.  `body` is what gets compiled: the reply with min and max renamed to swzc_min and
    swzc_max (a user's file may define its own min and max as macros), CRLF line ends made LF; '' when
    rejected."""

    body: str
    violations: tuple[Violation, ...]

    @property
    def ok(self) -> bool:
        return not self.violations


def check_body(body: str) -> Checked:
    """Whether `body` stays inside the safe subset, and the text to compile when it does."""
    if not isinstance(body, str):
        return _rejected([_violation(1, "the body must be text")])
    if len(body) > MAX_CHARS:
        return _rejected([_violation(1, f"the body is {len(body)} characters long (at most {MAX_CHARS})")])
    text = body.replace("\r\n", "\n")
    fatal, soft = _text_violations(text)
    if fatal:
        return _rejected(fatal + soft)
    source = _HEAD + text.encode("utf-8") + _TAIL
    lines = text.count("\n") + 1
    tree = parse(source)
    function_body, problems = _parsed_body(tree.root_node, source, lines)
    if function_body is None or problems:
        return _rejected(soft + problems)
    walk = _Walk(source, lines)
    walk.run(function_body)
    if soft or walk.violations:
        return _rejected(soft + walk.violations)
    compiled = bytearray(source[len(_HEAD) : len(source) - len(_TAIL)])
    renames = [*walk.renames, *_prefixed(function_body, source)]
    for start, end, name in sorted(renames, reverse=True):
        compiled[start - len(_HEAD) : end - len(_HEAD)] = name.encode()
    text = compiled.decode("ascii")
    if not _reads_as_checked(function_body, source, {start: name for start, _, name in renames}, text):
        return _rejected([_violation(1, "the renamed body does not read as the checked one")])
    return Checked(text, ())


def _reads_as_checked(body: Node, source: bytes, renames: dict[int, str], compiled: str) -> bool:
    """Whether `compiled`, in the function it is compiled as, parses to the tree that was checked: the same
    nodes, the same tokens, only the renamed names changed.  What is compiled is then what was checked."""
    if not COMPILABLE_TEXT.fullmatch(compiled):
        return False
    wrapped = custom_function("swzc_candidate", compiled).encode()
    root = parse(wrapped).root_node
    top = [n for n in root.named_children if n.type != "comment"]
    other = top[0].child_by_field_name("body") if len(top) == 1 and top[0].type == "function_definition" else None
    if other is None or root.has_error:
        return False
    pairs = [(body, other)]
    while pairs:
        a, b = pairs.pop()
        if a.type != b.type or a.child_count != b.child_count:
            return False
        if a.child_count == 0:
            was = source[a.start_byte : a.end_byte].decode("ascii")
            now = wrapped[b.start_byte : b.end_byte].decode("ascii")
            if now != renames.get(a.start_byte, was):
                return False
        pairs.extend(zip(a.children, b.children))
    return True


def _prefixed(body: Node, source: bytes) -> list[tuple[int, int, str]]:
    """Every name of a variable (the parameters and the locals) with swzc's prefix: the body is spliced into
    the user's file, where a macro named like a local (`#define G 8`) would otherwise rewrite it.  Callees
    are not variables; after the check, every other identifier is one."""
    renames = []
    stack = [body]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type != "identifier":
            continue
        parent = node.parent
        if parent is not None and parent.type == "call_expression" and parent.child_by_field_name("function") == node:
            continue
        renames.append((node.start_byte, node.end_byte, VARIABLE_PREFIX + source[node.start_byte : node.end_byte].decode()))
    return renames


def _violation(line: int, what: str) -> Violation:
    return Violation(line, f"line {line}: {what}")


def _rejected(violations: list[Violation]) -> Checked:
    """The rejection: violations by line, each said once, at most MAX_REPORTED."""
    seen: set[tuple[int, str]] = set()
    kept: list[Violation] = []
    for v in sorted(violations, key=lambda v: v.line):
        if (v.line, v.message) not in seen:
            seen.add((v.line, v.message))
            kept.append(v)
    return Checked("", tuple(kept[:MAX_REPORTED]))


# -- the text, before parsing -------------------------------------------------------------------------------

# (pattern, what it is, fatal).  Fatal ones are where the compiler and tree-sitter could read the text
# differently, so nothing parsed from it could be trusted; quotes are not, so the parse can say more.
_TEXT_RULES: tuple[tuple[re.Pattern[str], str, bool], ...] = (
    (re.compile(r"\x00"), "NUL bytes are not allowed", True),
    (re.compile(r"[\x01-\x08\x0b-\x1f\x7f]"), "control characters are not allowed (only newlines and tabs)", True),
    # Every other character outside printable ASCII, comments included: readers down the chain (Python's
    # str.splitlines, tree-sitter, g++, nvcc, a terminal) disagree on which of them end a line, are
    # whitespace or reorder the text on screen, so none may reach the text that is checked and compiled.
    (re.compile(r"[^\x00-\x7f]"), "only printable ASCII, tabs and newlines are allowed (comments included)", True),
    (re.compile(r"^[ \t]*#"), "preprocessor directives are not allowed", True),
    (re.compile(r"^[ \t]*[^ \t#][^#]*#"), "# is not allowed (no preprocessor)", True),
    (re.compile(r"\\$"), "backslash-newline continuations are not allowed", True),
    (re.compile(r"\\(?=.)"), "backslashes are not allowed", True),
    (re.compile(r"\?\?"), "?? is not allowed (trigraphs)", True),
    (re.compile(r"<:|:>|<%|%>|%:"), "digraphs (<: :> <% %> %:) are not allowed", True),
    (re.compile(r"[$@`]"), "$, @ and ` are not allowed", True),
    (re.compile(r"[\"']"), "quotes are not allowed (no string or character literals)", False),
)


def _text_violations(text: str) -> tuple[list[Violation], list[Violation]]:
    """(fatal, soft) violations found in the text itself."""
    fatal: list[Violation] = []
    soft: list[Violation] = []
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        fatal.append(_violation(text.count("\n", 0, exc.start) + 1, "the body is not valid text"))
    lines = text.rstrip("\n").split("\n")
    if len(lines) > MAX_LINES:
        fatal.append(_violation(MAX_LINES + 1, f"the body has {len(lines)} lines (at most {MAX_LINES})"))
        return fatal, soft
    for number, line in enumerate(lines, start=1):
        for pattern, what, is_fatal in _TEXT_RULES:
            if pattern.search(line) is not None:
                (fatal if is_fatal else soft).append(_violation(number, what))
    return fatal, soft


# -- the parse ----------------------------------------------------------------------------------------------


def _line(node: Node, lines: int) -> int:
    """The body line a node starts on (row 0 is the wrapper's head), kept within the body."""
    return min(max(node.start_point.row, 1), lines)


def _parsed_body(root: Node, source: bytes, lines: int) -> tuple[Node | None, list[Violation]]:
    """The candidate's compound statement, if the wrapped text parsed cleanly as exactly that function with the
    body inside it; otherwise what went wrong."""
    problems: list[Violation] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_missing:
            problems.append(_violation(_line(node, lines), f"expected {node.type}"))
            continue
        if node.type == "ERROR":
            snippet = source[node.start_byte : node.end_byte].decode("utf-8", "replace").strip().split("\n")[0][:30]
            problems.append(_violation(_line(node, lines), f"cannot parse {snippet!r}"))
            continue
        if node.type != "comment":
            stack.extend(node.children)
    if problems:
        return None, problems
    top = [n for n in root.named_children if n.type != "comment"]
    body = top[0].child_by_field_name("body") if top and top[0].type == "function_definition" else None
    if (len(top) != 1 or body is None or body.type != "compound_statement" or body.start_byte != len(_HEAD) - 2
            or body.end_byte != len(source) - 1):
        early = body.end_byte if body is not None else len(_HEAD)
        line = min(max(source.count(b"\n", 0, early), 1), lines)
        return None, [_violation(line, "the body closes the function early (unbalanced braces)")]
    count = 0
    stack = list(body.children)
    while stack:
        node = stack.pop()
        if node.type == "comment":
            continue
        count += node.is_named
        if count > MAX_NODES:
            too_large = f"the body is too large (more than {MAX_NODES} syntax nodes)"
            return None, [_violation(_line(node, lines), too_large)]
        stack.extend(node.children)
    return body, []


# -- types and literals -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _IntType:
    """An integer type as both targets have it (LP64 host, CUDA/HIP device): enough to run a loop header."""

    bits: int
    signed: bool

    def fits(self, value: int) -> bool:
        if self.signed:
            return -(1 << (self.bits - 1)) <= value < 1 << (self.bits - 1)
        return 0 <= value < 1 << self.bits

    def convert(self, value: int) -> int | None:
        """`value` converted to this type: wrapped when unsigned, None when a signed type cannot hold it
        (implementation-defined before C++20, so the host and the device might disagree)."""
        if not self.signed:
            return value % (1 << self.bits)
        return value if self.fits(value) else None


_INT = _IntType(32, True)
_UINT = _IntType(32, False)
_LLONG = _IntType(64, True)
_ULLONG = _IntType(64, False)

_INTEGER_TYPES = {"int": _INT, "unsigned": _UINT, "long long": _LLONG, "unsigned long long": _ULLONG}

# The type's words, sorted, to its canonical name.  `long` alone is left out: it is 32 bits on Windows.
_TYPE_NAMES = {
    ("int",): "int",
    ("unsigned",): "unsigned",
    ("int", "unsigned"): "unsigned",
    ("long", "long"): "long long",
    ("int", "long", "long"): "long long",
    ("long", "long", "unsigned"): "unsigned long long",
    ("int", "long", "long", "unsigned"): "unsigned long long",
    ("bool",): "bool",
    ("uint3",): "uint3",
}
_ALLOWED_TYPES = "unsigned, int, unsigned long long, long long, bool, uint3"


def _common(a: _IntType, b: _IntType) -> _IntType:
    """The usual arithmetic conversions, for the four integer types above."""
    if a.signed == b.signed:
        return a if a.bits >= b.bits else b
    unsigned, signed = (b, a) if a.signed else (a, b)
    return unsigned if unsigned.bits >= signed.bits else signed


_INTEGER_LITERAL = re.compile(
    r"(?P<digits>0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)(?P<suffix>[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)?")


def _literal(text: str) -> tuple[int, _IntType] | str:
    """The value and type of an integer literal, or why it is not one swzc accepts.  tree-sitter reads a sign
    written against the digits (`-1`) as part of the literal; it is the unary operator applied to it."""
    sign = text[:1] if text[:1] in ("-", "+") else ""
    literal = _unsigned_literal(text[len(sign) :])
    if isinstance(literal, str) or sign != "-":
        return literal
    value, kind = literal
    negated = kind.convert(-value)  # the promoted literal's type is its own: all four are int or wider
    return (negated, kind) if negated is not None else f"{text[:24]} overflows"


def _unsigned_literal(text: str) -> tuple[int, _IntType] | str:
    match = _INTEGER_LITERAL.fullmatch(text)
    if match is None:
        return f"{text[:20]} is not an integer literal (no floats)"
    digits, suffix = match["digits"], (match["suffix"] or "").lower()
    if digits[:2].lower() in ("0x", "0b"):
        value = int(digits, 0)
    else:
        value = int(digits, 8 if digits.startswith("0") else 10)
    decimal = not digits.startswith("0") or digits == "0"
    if "u" in suffix:
        candidates = [_ULLONG] if "l" in suffix else [_UINT, _ULLONG]
    elif decimal:
        candidates = [_LLONG] if "l" in suffix else [_INT, _LLONG]
    else:
        candidates = [_LLONG, _ULLONG] if "l" in suffix else [_INT, _UINT, _LLONG, _ULLONG]
    for candidate in candidates:
        if candidate.fits(value):
            return value, candidate
    return f"the literal {text[:24]} is too large"


# -- names --------------------------------------------------------------------------------------------------

_PARAMETERS = ("block", "grid")
_CALLEES = {"min": 2, "max": 2, "make_uint3": 3}
_FIELDS = ("x", "y", "z")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class
    compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
    default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
    int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public
    register reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch
    template this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile
    wchar_t while xor xor_eq""".split())
_RESERVED_NAMES = _KEYWORDS | {*_PARAMETERS, *_CALLEES, "uint3"}


def _reserved(name: str) -> bool:
    return name.startswith("__") or name.startswith("swzc_")


# -- the walk -----------------------------------------------------------------------------------------------

_BINARY = frozenset("+ - * / % & | ^ << >> < <= > >= == != && ||".split())
_UNARY = frozenset("- + ! ~".split())
_ASSIGNMENTS = frozenset("= += -= *= /= %= &= |= ^= <<= >>=".split())
_LOOP_CONDITIONS = frozenset("< <= != > >=".split())
_LOOP_STEPS = frozenset("+= -= *= /= <<= >>=".split())
# Every token that may appear in an accepted body: a keyword or operator outside this set (`constexpr` in
# `if constexpr`, `and`, `<<<`) is refused even where the node around it is allowed.
_TOKENS = _BINARY | _UNARY | _ASSIGNMENTS | frozenset(
    "( ) { } ; , . ? : ++ -- if else for return break continue const unsigned long int".split())

_FORBIDDEN = {
    "while_statement": "while loops are not allowed (use a for loop with a literal bound)",
    "do_statement": "do loops are not allowed (use a for loop with a literal bound)",
    "for_range_loop": "range for loops are not allowed",
    "goto_statement": "goto is not allowed",
    "labeled_statement": "labels are not allowed",
    "switch_statement": "switch is not allowed (use if/else)",
    "case_statement": "switch is not allowed (use if/else)",
    "try_statement": "try is not allowed",
    "throw_statement": "throw is not allowed",
    "lambda_expression": "lambdas are not allowed",
    "function_definition": "nested functions are not allowed",
    "template_declaration": "templates are not allowed",
    "template_function": "template arguments are not allowed",
    "struct_specifier": "struct definitions are not allowed",
    "class_specifier": "class definitions are not allowed",
    "union_specifier": "union definitions are not allowed",
    "enum_specifier": "enum definitions are not allowed",
    "type_definition": "typedef is not allowed",
    "alias_declaration": "using is not allowed",
    "using_declaration": "using is not allowed",
    "namespace_definition": "namespaces are not allowed",
    "namespace_alias_definition": "namespaces are not allowed",
    "static_assert_declaration": "static_assert is not allowed",
    "new_expression": "new is not allowed (no memory)",
    "delete_expression": "delete is not allowed (no memory)",
    "sizeof_expression": "sizeof is not allowed",
    "alignof_expression": "alignof is not allowed",
    "offsetof_expression": "offsetof is not allowed",
    "decltype": "decltype is not allowed",
    "pointer_expression": "address-of (&) and dereference (*) are not allowed (no pointers)",
    "subscript_expression": "subscripts are not allowed (no arrays or pointers)",
    "this": "this is not allowed",
    "null": "nullptr is not allowed (no pointers)",
    "comma_expression": "comma expressions are not allowed",
    "string_literal": "quotes are not allowed (no string or character literals)",
    "raw_string_literal": "quotes are not allowed (no string or character literals)",
    "concatenated_string": "quotes are not allowed (no string or character literals)",
    "char_literal": "quotes are not allowed (no string or character literals)",
    "user_defined_literal": "user-defined literals are not allowed",
    "compound_literal_expression": "brace initialisers are not allowed (use make_uint3 or =)",
    "initializer_list": "brace initialisers are not allowed (use make_uint3 or =)",
    "qualified_identifier": "qualified names (::) are not allowed",
    "co_await_expression": "coroutines are not allowed",
    "co_return_statement": "coroutines are not allowed",
    "co_yield_statement": "coroutines are not allowed",
    "attributed_statement": "attributes are not allowed",
    "attribute_declaration": "attributes are not allowed",
    "kernel_call_syntax": "kernel launches are not allowed",
    "template_type": "templates are not allowed",
}
_DECLARATORS = {
    "pointer_declarator": "pointers are not allowed",
    "reference_declarator": "references are not allowed",
    "array_declarator": "arrays are not allowed",
    "function_declarator": "function declarations are not allowed",
    "abstract_pointer_declarator": "casts to pointers are not allowed",
    "abstract_reference_declarator": "casts to references are not allowed",
    "abstract_array_declarator": "casts to arrays are not allowed",
    "abstract_function_declarator": "casts to functions are not allowed",
}


def _forbidden(node: Node) -> str:
    if "asm" in node.type:
        return "asm is not allowed (only integer arithmetic)"
    known = _FORBIDDEN.get(node.type) or _DECLARATORS.get(node.type)
    return known or f"{node.type.replace('_', ' ')} is not allowed here"


@dataclass(frozen=True)
class _Local:
    type: str  # canonical: "unsigned", "int", "unsigned long long", "long long", "bool" or "uint3"
    const: bool


_PARAMETER = _Local("uint3", const=True)


@dataclass(frozen=True)
class _Context:
    """What a node's position adds to the rules: the loops around it."""

    loops: int = 0
    trips: int = 1  # product of the trip counts of the loops around
    counters: frozenset[str] = frozenset()  # loop counters that may not be assigned here


@dataclass(frozen=True)
class _Visit:
    node: Node
    context: _Context
    statement: bool


@dataclass(frozen=True)
class _Declare:
    name: str
    local: _Local


@dataclass(frozen=True)
class _Scope:
    enter: bool  # True opens a scope, False closes the innermost one


_ENTER = _Scope(True)
_LEAVE = _Scope(False)
_Item = _Visit | _Declare | _Scope


@dataclass(frozen=True)
class _Loop:
    counter: str
    local: _Local
    declares: bool  # the counter is declared by the loop (else it is an earlier local)
    trips: int


@dataclass
class _Walk:
    """One pass over the body with an explicit stack (the tree is as deep as the text lets it be).  Each rule
    accepts its node and the parts of it it has looked at; anything else in the tree is refused at the end."""

    source: bytes
    lines: int
    violations: list[Violation] = field(default_factory=list)
    renames: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, new name): min/max callees
    scopes: list[dict[str, _Local]] = field(default_factory=lambda: [{p: _PARAMETER for p in _PARAMETERS}])
    accepted: set[int] = field(default_factory=set)

    def run(self, body: Node) -> None:
        stack: list[_Item] = [_Visit(body, _Context(), statement=True)]
        while stack:
            item = stack.pop()
            if isinstance(item, _Declare):
                self.scopes[-1][item.name] = item.local
            elif isinstance(item, _Scope):
                if item.enter:
                    self.scopes.append({})
                else:
                    self.scopes.pop()
            else:
                stack.extend(reversed(self._visit(item)))
        if not any(self._returns(body)):
            self.violations.append(_violation(1, "the body never returns (it must return a uint3)"))
        elif not _always_returns(body):
            self.violations.append(_violation(self.lines, "the body can reach its end without returning "
                                                          "(end every path with a return)"))
        if not self.violations:
            self._nothing_else(body)

    # -- bookkeeping

    def report(self, node: Node, what: str) -> None:
        self.violations.append(_violation(_line(node, self.lines), what))

    def accept(self, *nodes: Node | None) -> None:
        self.accepted.update(n.id for n in nodes if n is not None)

    def text(self, node: Node) -> str:
        return self.source[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def lookup(self, name: str) -> _Local | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def _returns(self, body: Node) -> Iterator[Node]:
        stack = [body]
        while stack:
            node = stack.pop()
            if node.type == "return_statement":
                yield node
            stack.extend(node.named_children)

    def _nothing_else(self, body: Node) -> None:
        """The backstop of the whitelist: every named node was accepted by a rule, every token is known."""
        stack = list(body.children)
        while stack and len(self.violations) < MAX_REPORTED:
            node = stack.pop()
            if node.type == "comment":
                continue
            if node.is_named and node.id not in self.accepted:
                self.report(node, _forbidden(node))
                continue
            if not node.is_named and node.type not in _TOKENS:
                self.report(node, f"{node.type} is not allowed")
            stack.extend(node.children)

    # -- dispatch

    def _visit(self, item: _Visit) -> list[_Item]:
        node = item.node
        if node.type == "comment":
            return []
        kind = "statement" if item.statement else "expression"
        rule = getattr(self, f"_{kind}_{node.type}", None)
        if rule is None:
            self.report(node, _forbidden(node))
            return []
        self.accept(node)
        return rule(node, item.context)

    def _expressions(self, nodes: list[Node], context: _Context) -> list[_Item]:
        return [_Visit(n, context, statement=False) for n in nodes if n.type != "comment"]

    def _scoped(self, node: Node | None, context: _Context) -> list[_Item]:
        """A statement in its own scope, as the body of an if or else is."""
        return [] if node is None else [_ENTER, _Visit(node, context, statement=True), _LEAVE]

    # -- statements

    def _statement_compound_statement(self, node: Node, context: _Context) -> list[_Item]:
        return [_ENTER, *(_Visit(n, context, statement=True) for n in node.named_children), _LEAVE]

    def _statement_expression_statement(self, node: Node, context: _Context) -> list[_Item]:
        return self._expressions(node.named_children, context)

    def _statement_return_statement(self, node: Node, context: _Context) -> list[_Item]:
        values = [n for n in node.named_children if n.type != "comment"]
        if not values:
            self.report(node, "return must return a uint3 (no bare return)")
        return self._expressions(values, context)

    def _statement_break_statement(self, node: Node, context: _Context) -> list[_Item]:
        if not context.loops:
            self.report(node, "break is only allowed inside a for loop")
        return []

    def _statement_continue_statement(self, node: Node, context: _Context) -> list[_Item]:
        if not context.loops:
            self.report(node, "continue is only allowed inside a for loop")
        return []

    def _statement_if_statement(self, node: Node, context: _Context) -> list[_Item]:
        condition = node.child_by_field_name("condition")
        alternative = node.child_by_field_name("alternative")
        values = [n for n in condition.named_children if n.type != "comment"] if condition is not None else []
        value = condition.child_by_field_name("value") if condition is not None else None
        if value is None or len(values) != 1 or value.type == "declaration":
            self.report(node, "an if condition must be a single expression (no declarations or initialisers)")
            return []
        self.accept(condition)
        consequence = node.child_by_field_name("consequence")
        follow = [*self._expressions([value], context), *self._scoped(consequence, context)]
        if alternative is not None:
            self.accept(alternative)
            branch = [n for n in alternative.named_children if n.type != "comment"]
            follow += self._scoped(branch[0] if branch else None, context)
        return follow

    def _statement_declaration(self, node: Node, context: _Context) -> list[_Item]:
        declared = self._declared_type(node)
        if declared is None:
            return []
        follow: list[_Item] = []
        for i, child in enumerate(node.children):
            if node.field_name_for_child(i) == "declarator":
                follow += self._declarator(child, declared, context)
        return follow

    def _statement_for_statement(self, node: Node, context: _Context) -> list[_Item]:
        loop = self._loop(node, context)
        if loop is None:
            return []
        inner = _Context(context.loops + 1, context.trips * loop.trips, context.counters | {loop.counter})
        if inner.loops > MAX_LOOP_DEPTH:
            self.report(node, f"for loops nest deeper than {MAX_LOOP_DEPTH}")
            return []
        if inner.trips > MAX_NESTED_TRIPS:
            self.report(node, f"nested loops run {inner.trips} times in all (at most {MAX_NESTED_TRIPS})")
            return []
        follow: list[_Item] = [_ENTER]
        if loop.declares:
            follow.append(_Declare(loop.counter, loop.local))
        return [*follow, _Visit(node.child_by_field_name("body"), inner, statement=True), _LEAVE]

    # -- declarations

    def _declared_type(self, node: Node) -> _Local | None:
        """The type a declaration gives its names, or None (reported) when it is not an allowed one."""
        const = False
        type_name = None
        ok = True
        for i, child in enumerate(node.children):
            role = node.field_name_for_child(i)
            if role == "type":
                type_name = self._type(child)
                ok = ok and type_name is not None
            elif role == "declarator" or not child.is_named or child.type == "comment":
                continue
            elif child.type == "type_qualifier" and self.text(child) == "const":
                self.accept(child)
                const = True
            elif child.type == "type_qualifier":
                word = self.text(child)
                self.report(child, "constexpr is not allowed (use const)" if word == "constexpr"
                            else f"{word} is not allowed (locals are plain values)")
                ok = False
            elif child.type == "storage_class_specifier":
                self.report(child, f"{self.text(child)} is not allowed (only plain locals)")
                ok = False
            else:
                self.report(child, _forbidden(child))
                ok = False
        return _Local(type_name, const) if ok and type_name is not None else None

    def _type(self, node: Node) -> str | None:
        """The canonical name of an allowed type, or None (reported)."""
        if node.type == "placeholder_type_specifier":
            self.report(node, "auto is not allowed (write the type)")
            return None
        if node.type in _FORBIDDEN:
            self.report(node, _forbidden(node))
            return None
        words: list[str] = []
        parts = [node]
        if node.type == "sized_type_specifier":
            parts = [c for c in node.children if c.type != "comment"]
        elif node.type not in ("primitive_type", "type_identifier"):
            parts = []
        for part in parts:
            if part.is_named and part.type not in ("primitive_type", "type_identifier"):
                parts = []
                break
            words.append(self.text(part))
        name = _TYPE_NAMES.get(tuple(sorted(words))) if parts else None
        if name is None:
            shown = " ".join(self.text(node).split())[:40]
            self.report(node, f"type {shown} is not allowed (only {_ALLOWED_TYPES})")
            return None
        self.accept(node, *parts)
        return name

    def _declarator(self, node: Node, local: _Local, context: _Context) -> list[_Item]:
        if node.type == "identifier":
            self.report(node, f"{self.text(node)} must be initialised where it is declared")
            return []
        if node.type != "init_declarator":
            self.report(node, _forbidden(node))
            return []
        name = node.child_by_field_name("declarator")
        value = node.child_by_field_name("value")
        if name is None or name.type != "identifier":
            self.report(node, _forbidden(name) if name is not None else "a declaration needs a name")
            return []
        if value is None or value.type in ("initializer_list", "argument_list"):
            self.report(node, f"initialise {self.text(name)} with = (no braces or parentheses)")
            return []
        self.accept(node)
        if not self._new_name(name):
            return self._expressions([value], context)
        return [*self._expressions([value], context), _Declare(self.text(name), local)]

    def _new_name(self, node: Node) -> bool:
        """Whether a declared name is one the body may introduce; reported when not."""
        name = self.text(node)
        if not _IDENTIFIER.fullmatch(name):
            self.report(node, f"{name[:20]!r} is not a plain ASCII name")
        elif _reserved(name):
            self.report(node, f"{name} is reserved (names starting with __ or swzc_)")
        elif name in _RESERVED_NAMES:
            self.report(node, f"{name} is reserved")
        elif self.lookup(name) is not None:
            self.report(node, f"{name} is already declared (no redeclaring or shadowing)")
        else:
            self.accept(node)
            return True
        return False

    # -- expressions

    def _expression_identifier(self, node: Node, context: _Context) -> list[_Item]:
        name = self.text(node)
        if self.lookup(name) is not None:
            return []
        if name in _CALLEES:
            self.report(node, f"{name} may only be called")
        elif _reserved(name):
            self.report(node, f"{name} is reserved (names starting with __ or swzc_)")
        else:
            self.report(node, f"{name} is not declared (only block, grid and locals declared above it)")
        return []

    def _expression_number_literal(self, node: Node, context: _Context) -> list[_Item]:
        value = _literal(self.text(node))
        if isinstance(value, str):
            self.report(node, value)
        return []

    def _expression_true(self, node: Node, context: _Context) -> list[_Item]:
        return []

    def _expression_false(self, node: Node, context: _Context) -> list[_Item]:
        return []

    def _expression_parenthesized_expression(self, node: Node, context: _Context) -> list[_Item]:
        return self._expressions(node.named_children, context)

    def _expression_binary_expression(self, node: Node, context: _Context) -> list[_Item]:
        operator = node.child_by_field_name("operator")
        if operator is None or operator.type not in _BINARY:
            self.report(node, f"operator {operator.type if operator else '?'} is not allowed")
            return []
        return self._expressions([node.child_by_field_name("left"), node.child_by_field_name("right")], context)

    def _expression_unary_expression(self, node: Node, context: _Context) -> list[_Item]:
        operator = node.child_by_field_name("operator")
        if operator is None or operator.type not in _UNARY:
            self.report(node, f"operator {operator.type if operator else '?'} is not allowed")
            return []
        return self._expressions([node.child_by_field_name("argument")], context)

    def _expression_conditional_expression(self, node: Node, context: _Context) -> list[_Item]:
        parts = [node.child_by_field_name(f) for f in ("condition", "consequence", "alternative")]
        if any(p is None for p in parts):
            self.report(node, "?: needs all three operands")
            return []
        return self._expressions(parts, context)

    def _a_statement_of_its_own(self, node: Node) -> bool:
        """Whether an assignment or ++/-- is the whole of an expression statement.  Inside an expression its
        order against the other operands is unspecified (or undefined), and g++ on the host and nvcc on the
        device may take different orders: what is proven would not be what runs."""
        if node.parent is not None and node.parent.type == "expression_statement":
            return True
        self.report(node, "an assignment or ++/-- must be a statement of its own, not part of an expression")
        return False

    def _expression_assignment_expression(self, node: Node, context: _Context) -> list[_Item]:
        if not self._a_statement_of_its_own(node):
            return []
        operator = node.child_by_field_name("operator")
        if operator is None or operator.type not in _ASSIGNMENTS:
            self.report(node, f"operator {operator.type if operator else '?'} is not allowed")
            return []
        self._assignable(node.child_by_field_name("left"), context)
        return self._expressions([node.child_by_field_name("right")], context)

    def _expression_update_expression(self, node: Node, context: _Context) -> list[_Item]:
        if not self._a_statement_of_its_own(node):
            return []
        self._assignable(node.child_by_field_name("argument"), context)
        return []

    def _expression_field_expression(self, node: Node, context: _Context) -> list[_Item]:
        self._field(node)
        return []

    def _expression_cast_expression(self, node: Node, context: _Context) -> list[_Item]:
        descriptor = node.child_by_field_name("type")
        value = node.child_by_field_name("value")
        if descriptor is None or value is None or self._cast_type(descriptor) is None:
            return []
        return self._expressions([value], context)

    def _expression_call_expression(self, node: Node, context: _Context) -> list[_Item]:
        callee = node.child_by_field_name("function")
        arguments = node.child_by_field_name("arguments")
        name = self.text(callee) if callee is not None else ""
        if callee is None or callee.type != "identifier" or name not in _CALLEES:
            shown = " ".join(name.split())[:40]
            if (callee is not None and callee.type in ("primitive_type", "sized_type_specifier")) or name in _KEYWORDS:
                self.report(node, f"functional casts like {shown}(x) are not allowed (write ({shown})x)")
            elif callee is not None and callee.type not in ("identifier", "qualified_identifier") and (
                    callee.type in _FORBIDDEN or "asm" in callee.type):
                self.report(callee, _forbidden(callee))
            else:
                self.report(node, f"calling {shown} is not allowed (only min, max and make_uint3)")
            return []
        if arguments is None or arguments.type != "argument_list":
            self.report(node, f"{name} must be called with an argument list")
            return []
        operands = [n for n in arguments.named_children if n.type != "comment"]
        if len(operands) != _CALLEES[name]:
            self.report(node, f"{name} takes {_CALLEES[name]} arguments, not {len(operands)}")
            return []
        self.accept(callee, arguments)
        if name in ("min", "max"):
            self.renames.append((callee.start_byte, callee.end_byte, f"swzc_{name}"))
        return self._expressions(operands, context)

    # -- parts of expressions

    def _cast_type(self, descriptor: Node) -> str | None:
        if descriptor.type != "type_descriptor":
            self.report(descriptor, _forbidden(descriptor))
            return None
        name = None
        for i, child in enumerate(descriptor.children):
            role = descriptor.field_name_for_child(i)
            if role == "type":
                name = self._type(child)
            elif child.type == "type_qualifier" and self.text(child) == "const":
                self.accept(child)
            elif child.type == "type_qualifier":
                self.report(child, f"{self.text(child)} is not allowed in a cast")
                return None
            elif child.is_named and child.type != "comment":
                self.report(child, _forbidden(child))
                return None
        if name is not None:
            self.accept(descriptor)
        return name

    def _field(self, node: Node) -> tuple[str, _Local] | None:
        """The uint3 a field access reads (name and local), or None (reported)."""
        operator = node.child_by_field_name("operator")
        argument = node.child_by_field_name("argument")
        member = node.child_by_field_name("field")
        if operator is None or operator.type != ".":
            self.report(node, "-> is not allowed (no pointers)")
            return None
        if argument is None or argument.type != "identifier":
            self.report(node, "fields may only be read from block, grid or a uint3 local (X.x, X.y, X.z)")
            return None
        name = self.text(argument)
        local = self.lookup(name)
        if local is None:
            self._expression_identifier(argument, _Context())
            return None
        if local.type != "uint3":
            self.report(node, f"{name} is not a uint3: it has no fields")
            return None
        if member is None or member.type != "field_identifier" or self.text(member) not in _FIELDS:
            self.report(node, "only the fields .x, .y and .z exist")
            return None
        self.accept(argument, member)
        return name, local

    def _assignable(self, node: Node | None, context: _Context) -> None:
        """Whether `node` may be assigned to: a local that is not const and not a loop counter of an enclosing
        loop, or a field of such a uint3 local.  Reported when not."""
        if node is None:
            return
        if node.type == "field_expression":
            found = self._field(node)
            if found is None:
                return
            name, local = found
        elif node.type == "identifier":
            name = self.text(node)
            local = self.lookup(name)
            if local is None:
                self._expression_identifier(node, context)
                return
        else:
            self.report(node, _forbidden(node) if node.type in _FORBIDDEN
                        else "only a local variable or a field of a uint3 local may be assigned")
            return
        if name in _PARAMETERS:
            self.report(node, f"{name} is read-only")
        elif local.const:
            self.report(node, f"{name} is const")
        elif name in context.counters:
            self.report(node, f"the loop counter {name} may not be assigned inside its loop")
        else:
            self.accept(node)

    # -- for loops

    def _loop(self, node: Node, context: _Context) -> _Loop | None:
        """The loop's counter and trip count, when its header is one swzc can count from the text; reported
        when not."""
        start = self._loop_start(node.child_by_field_name("initializer"), context)
        if start is None:
            self.report(node, "a for loop must start by setting one integer counter to an integer literal "
                              "(for (int i = 0; ...))")
            return None
        counter, local, declares, value = start
        kind = _INTEGER_TYPES[local.type]
        condition = self._loop_condition(node.child_by_field_name("condition"), counter)
        if condition is None:
            self.report(node, f"a for loop's condition must compare {counter} with an integer literal "
                              f"({counter} < 16)")
            return None
        step = self._loop_step(node.child_by_field_name("update"), counter)
        if step is None:
            self.report(node, f"a for loop's step must be ++{counter}, --{counter}, or {counter} += k, -= k, *= k, "
                              f"/= k, <<= k, >>= k with a literal k")
            return None
        if node.child_by_field_name("body") is None:
            self.report(node, "a for loop needs a body")
            return None
        trips = _trips(value, kind, condition, step)
        if isinstance(trips, str):
            self.report(node, trips)
            return None
        return _Loop(counter, local, declares, trips)

    def _loop_start(self, node: Node | None, context: _Context) -> tuple[str, _Local, bool, int] | None:
        """(counter, its type, whether declared here, start value) of `int i = 0` or `i = 0`."""
        if node is None:
            return None
        if node.type == "declaration":
            declarators = [c for i, c in enumerate(node.children) if node.field_name_for_child(i) == "declarator"]
            if len(declarators) != 1 or declarators[0].type != "init_declarator":
                return None
            name = declarators[0].child_by_field_name("declarator")
            value = declarators[0].child_by_field_name("value")
            if name is None or name.type != "identifier" or value is None or value.type != "number_literal":
                return None
            local = self._declared_type(node)
            if local is None:
                return None
            if local.const or local.type not in _INTEGER_TYPES:
                self.report(node, "a loop counter must be a non-const integer "
                                  "(int, unsigned, long long, unsigned long long)")
                return None
            if not self._new_name(name):
                return None
            declares = True
        elif node.type == "assignment_expression":
            name = node.child_by_field_name("left")
            value = node.child_by_field_name("right")
            operator = node.child_by_field_name("operator")
            if (name is None or name.type != "identifier" or value is None or value.type != "number_literal"
                    or operator is None or operator.type != "="):
                return None
            local = self.lookup(self.text(name))
            if local is None or local.type not in _INTEGER_TYPES:
                return None
            self._assignable(name, context)
            declares = False
        else:
            return None
        literal = _literal(self.text(value))
        if isinstance(literal, str):
            self.report(value, literal)
            return None
        start = _INTEGER_TYPES[local.type].convert(literal[0])
        if start is None:
            self.report(value, f"{self.text(value)} does not fit the loop counter's type")
            return None
        self.accept(node, *[c for c in node.named_children if c.type != "comment"], name, value)
        return self.text(name), local, declares, start

    def _loop_condition(self, node: Node | None, counter: str) -> tuple[str, tuple[int, _IntType]] | None:
        if node is None or node.type != "binary_expression":
            return None
        left, operator, right = (node.child_by_field_name(f) for f in ("left", "operator", "right"))
        if (left is None or left.type != "identifier" or self.text(left) != counter or operator is None
                or operator.type not in _LOOP_CONDITIONS or right is None or right.type != "number_literal"):
            return None
        bound = _literal(self.text(right))
        if isinstance(bound, str):
            self.report(right, bound)
            return None
        self.accept(node, left, right)
        return operator.type, bound

    def _loop_step(self, node: Node | None, counter: str) -> tuple[str, tuple[int, _IntType]] | None:
        if node is None:
            return None
        if node.type == "update_expression":
            argument, operator = node.child_by_field_name("argument"), node.child_by_field_name("operator")
            if argument is None or argument.type != "identifier" or self.text(argument) != counter or operator is None:
                return None
            self.accept(node, argument)
            return ("+=" if operator.type == "++" else "-="), (1, _INT)
        if node.type == "assignment_expression":
            left, operator, right = (node.child_by_field_name(f) for f in ("left", "operator", "right"))
            if (left is None or left.type != "identifier" or self.text(left) != counter or operator is None
                    or operator.type not in _LOOP_STEPS or right is None or right.type != "number_literal"):
                return None
            amount = _literal(self.text(right))
            if isinstance(amount, str):
                self.report(right, amount)
                return None
            self.accept(node, left, right)
            return operator.type, amount
        return None


def _always_returns(node: Node, depth: int = 0) -> bool:
    """Whether every path through a statement ends in a return.  Conservative: loops never count (they may run
    zero times), and past a nesting of 32 the answer is no.  Flowing off the end of the function would be
    undefined behaviour, which the host prover and the device could resolve differently."""
    if depth > 32:
        return False
    if node.type == "return_statement":
        return True
    if node.type == "compound_statement":
        return any(_always_returns(child, depth + 1) for child in node.named_children)
    if node.type == "if_statement":
        consequence = node.child_by_field_name("consequence")
        alternative = node.child_by_field_name("alternative")
        if consequence is None or alternative is None:
            return False
        branch = [n for n in alternative.named_children if n.type != "comment"]
        return bool(branch) and _always_returns(consequence, depth + 1) and _always_returns(branch[0], depth + 1)
    return False


def _trips(start: int, kind: _IntType, condition: tuple[str, tuple[int, _IntType]],
           step: tuple[str, tuple[int, _IntType]]) -> int | str:
    """How many times a loop's body runs, found by running the header with C++'s integer rules (so an
    unsigned counter that wraps is seen to wrap), or why it cannot be accepted: more than MAX_TRIPS, or
    undefined behaviour in the header."""
    compare, (bound, bound_kind) = condition
    operator, (amount, amount_kind) = step
    value = start
    for trips in range(MAX_TRIPS + 1):
        common = _common(kind, bound_kind)
        a, b = common.convert(value), common.convert(bound)
        assert a is not None and b is not None  # a signed common type is wider than the unsigned one it takes
        if not {"<": a < b, "<=": a <= b, "!=": a != b, ">": a > b, ">=": a >= b}[compare]:
            return trips
        stepped = _step(value, kind, operator, amount, amount_kind)
        if isinstance(stepped, str):
            return stepped
        value = stepped
    return f"this loop runs more than {MAX_TRIPS} times (or never stops)"


def _step(value: int, kind: _IntType, operator: str, amount: int, amount_kind: _IntType) -> int | str:
    """The counter after one step, or why the step is undefined (or implementation-defined) behaviour."""
    if operator in ("<<=", ">>="):
        if not 0 <= amount < kind.bits:
            return f"the loop shifts by {amount}, not less than the counter's {kind.bits} bits"
        if kind.signed and value < 0:
            return "the loop shifts a negative counter"
        result = value << amount if operator == "<<=" else value >> amount
        if kind.signed and not kind.fits(result):
            return "the loop's counter overflows"
        return result % (1 << kind.bits)
    common = _common(kind, amount_kind)
    a, b = common.convert(value), common.convert(amount)
    assert a is not None and b is not None
    if operator == "/=":
        if b == 0:
            return "the loop divides by zero"
        result = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    else:
        result = {"+=": a + b, "-=": a - b, "*=": a * b}[operator]
    if common.signed and not common.fits(result):
        return "the loop's counter overflows"
    back = kind.convert(result if common.signed else result % (1 << common.bits))
    if back is None:
        return "the loop's counter no longer fits its type"
    return back
