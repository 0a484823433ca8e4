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
the body must be one that a rule accepted, and every token one the subset knows.  `check_body` never
raises: whatever the input, it returns a `Checked`.

This module runs the checks in order and keeps the entry point: the text rules (restrict_text), the parse of
the body inside the function it is compiled as, the walk over that parse (restrict_tree, with the subset's
words in restrict_words and C++'s integer rules in restrict_numbers), and, once the names are prefixed, the
parse of the text to compile, which must read as the tree that was checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from swzc.frontend.source import parse
from swzc.formulas.swizzles import COMPILABLE_TEXT, CUSTOM_SIGNATURE, MIN_MAX_CXX, VARIABLE_PREFIX, custom_function
from swzc.search.llm.restrict_numbers import MAX_TRIPS
from swzc.search.llm.restrict_text import MAX_LINES, _text_violations
from swzc.search.llm.restrict_tree import MAX_LOOP_DEPTH, MAX_NESTED_TRIPS, _Walk
from swzc.search.llm.restrict_violation import MAX_REPORTED, Violation, _line, _violation

# The subset's limits, all read from here: MAX_CHARS and MAX_NODES are checked below, the others where their
# checks are, MAX_LINES on the text, MAX_TRIPS, MAX_NESTED_TRIPS and MAX_LOOP_DEPTH in the walk, MAX_REPORTED in
# what is reported.
__all__ = ["MAX_CHARS", "MAX_LINES", "MAX_LOOP_DEPTH", "MAX_NESTED_TRIPS", "MAX_NODES", "MAX_REPORTED", "MAX_TRIPS",
           "Checked", "MIN_MAX_CXX", "Violation", "check_body"]

MAX_CHARS = 4000
MAX_NODES = 400  # named nodes in the body, comments not counted: bounds the work of every later stage

# The function the body is parsed inside; its name is reserved (swzc_), so the body cannot call itself.
_HEAD = f"static __device__ __forceinline__ {CUSTOM_SIGNATURE.format(name='swzc_candidate')} {{\n".encode()
_TAIL = b"\n}\n"


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


def _rejected(violations: list[Violation]) -> Checked:
    """The rejection: violations by line, each said once, at most MAX_REPORTED."""
    seen: set[tuple[int, str]] = set()
    kept: list[Violation] = []
    for v in sorted(violations, key=lambda v: v.line):
        if (v.line, v.message) not in seen:
            seen.add((v.line, v.message))
            kept.append(v)
    return Checked("", tuple(kept[:MAX_REPORTED]))


# -- the parse ----------------------------------------------------------------------------------------------


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
