"""What `refine` (swzc.frontend.preprocess) gives tree-sitter as spaces when a file did not parse whole,
each found on the file's lines rather than its broken tree, as byte ranges: the directive lines of an #if
chain the build's macros decide and the branches it does not take, a statement macro used without a
semicolon, and a macro that expands only to qualifiers.  The file's bytes never change."""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping

from swzc.frontend.conditions import _condition_node, _ConditionEvaluator, _defined
from swzc.frontend.evaluate import Budget, Macro, Scope

_DIRECTIVE_LINE = re.compile(rb"[ \t]*#[ \t]*([A-Za-z_]\w*)(.*)", re.S)


def _logical_lines(data: bytes) -> list[tuple[int, int, bytes]]:
    """(start, end, text) of each line, a backslash-newline joining lines, outside block comments."""
    lines = []
    at = 0
    in_comment = False
    while at < len(data):
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        while end < len(data) and data[at:end].rstrip(b"\r").endswith(b"\\"):
            nxt = data.find(b"\n", end + 1)
            end = len(data) if nxt < 0 else nxt
        text = data[at:end]
        if in_comment:
            close = text.find(b"*/")
            in_comment = close < 0
        else:
            opened = text.rfind(b"/*")
            in_comment = opened >= 0 and text.find(b"*/", opened) < 0
            lines.append((at, end, text))
        at = end + 1
    return lines


def _decided_branches(data: bytes, table: dict[str, Macro | None]) -> list[tuple[int, int]]:
    """Byte ranges to parse as spaces: every directive line of an #if chain the macros decide, and the
    branches it does not take.  A chain with a condition that cannot be decided is left whole."""
    ranges: list[tuple[int, int]] = []
    stack: list[dict] = []  # per open chain: directive lines, branches (start, truth), decided, undecidable
    budget = Budget()

    def live() -> bool | None:
        """Whether code at this point is compiled: True, False, or None (it depends on an undecided #if).
        Each open chain keeps what held around it when it opened (the chains outside it do not change while
        it is open), so only the innermost is looked at, however deep the #ifs nest."""
        if not stack:
            return True
        frame = stack[-1]
        truth = frame["branches"][-1][1]
        if truth is False or frame["outer"] is False:
            return False
        return None if truth is None or frame["unknown"] or frame["outer"] is None else True

    def condition(kind: str, rest: bytes) -> bool | None:
        text = re.sub(rb"/\*.*?\*/|//.*", b" ", rest, flags=re.S).replace(b"\\\n", b" ").strip().decode("utf-8", "replace")
        if kind in ("ifdef", "ifndef", "elifdef", "elifndef"):
            known = _defined(text.split()[0], table) if text.split() else None
            return None if known is None else known == (kind in ("ifdef", "elifdef"))
        node = _condition_node(text)
        value = _ConditionEvaluator(Scope(macros=table, budget=budget)).value(node) if node is not None else None
        return None if value is None else bool(value)

    lines = _logical_lines(data)
    for at, (start, end, text) in enumerate(lines):
        match = _DIRECTIVE_LINE.fullmatch(text.rstrip(b"\r"))
        if match is None:
            continue
        kind, rest = match.group(1).decode(), match.group(2)
        if kind in ("if", "ifdef", "ifndef"):
            outer = live()
            truth = condition(kind, rest) if outer is not False else False  # under a dead branch: dead too
            guard = rest.split()[:1]
            following = _DIRECTIVE_LINE.fullmatch(lines[at + 1][2].rstrip(b"\r")) if at + 1 < len(lines) else None
            if kind == "ifndef" and guard and following is not None and following.group(1) == b"define" \
                    and following.group(2).split()[:1] == guard and outer is not False:
                truth = guard[0].decode() not in table  # an include guard: whatever its name, the file defines it
            stack.append({"lines": [(start, end)], "branches": [(end, truth)], "decided": truth is True,
                          "unknown": truth is None, "dead": outer is False, "outer": outer})
        elif kind in ("elif", "elifdef", "elifndef", "else") and stack:
            frame = stack[-1]
            if frame["decided"] or frame["dead"]:
                truth: bool | None = False
            elif kind == "else":
                truth = None if frame["unknown"] else True
            else:
                truth = condition(kind, rest)
            frame["lines"].append((start, end))
            frame["branches"].append((end, truth))
            frame["decided"] |= truth is True and not frame["unknown"]
            frame["unknown"] |= truth is None
        elif kind == "endif" and stack:
            frame = stack.pop()
            frame["lines"].append((start, end))
            if not frame["unknown"] and not frame["dead"]:
                ranges += frame["lines"]
                bounds = [b for b, _ in frame["branches"]] + [start]
                ranges += [(bounds[i], bounds[i + 1]) for i, (_, truth) in enumerate(frame["branches"]) if truth is not True]
        elif kind in ("define", "undef") and live() is not False:
            name = re.match(rb"[ \t]*([A-Za-z_]\w*)(\()?", rest)
            if name is None:
                continue
            key = name.group(1).decode()
            if kind == "undef":
                table.pop(key, None)
                continue
            body = rest[name.end():]
            params = None
            if name.group(2):
                close = body.find(b")")
                params = tuple(p.strip().decode() for p in body[:close].split(b",") if p.strip()) if close >= 0 else ()
                body = body[close + 1:] if close >= 0 else b""
            macro = Macro(params, re.sub(rb"\\\r?\n", b" ", body).strip().decode("utf-8", "replace"))
            table[key] = macro if live() is True and (key not in table or table[key] in (None, macro)) else None
    return [(a, b) for a, b in ranges if a < b]


def _statement_macros(data: bytes, bodies: Mapping[str, tuple[str, ...]], blanked: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Uses of a macro on lines of their own, its arguments spanning lines or not, with no semicolon after it,
    where every definition of the macro expands to whole statements (see _statements) and reads no block
    index: parsed as spaces."""
    found = []
    lines = _logical_lines(data)
    skip_to = 0
    budget = 2 * len(data) + (1 << 16)  # bytes the argument scans may cover in all: linear in the file
    aside = _Ranges(blanked)
    memo: dict = {}  # which macros read the block index, shared by every use
    for start, end, text in lines:
        if start < skip_to or aside.holds(start):
            continue
        head = _MACRO_USE.match(text)
        if head is None or head.group(2).decode() not in bodies:
            continue
        name = head.group(2).decode()
        stop = start + head.end(2)
        if head.group(3):  # the arguments: to the matching parenthesis, over lines if they go on
            close, budget = _arguments_end(data, start + head.end(3) - 1, budget)
            if close < 0:
                continue
            stop = close + 1
        line_end = data.find(b"\n", stop)
        rest = data[stop:len(data) if line_end < 0 else line_end]
        if not _NOTHING_AFTER.fullmatch(rest) or aside.meets(start, stop):
            continue
        if not all(_statements(_joined(body), bodies, memo=memo) for body in bodies[name]):
            continue
        found.append((start + head.start(2), stop))
        skip_to = stop
    return found


_MOST_ARGUMENT_BYTES = 4096  # a statement macro's arguments, over all their lines
_MACRO_USE = re.compile(rb"([ \t]*)([A-Za-z_]\w*)[ \t]*(\()?")
_NOTHING_AFTER = re.compile(rb"[ \t]*(?://[^\n]*)?\r?")
_LAST_USE = re.compile(r"\b([A-Za-z_]\w*)\s*\([^;{}]*\)$")


def _arguments_end(data: bytes, opening: int, budget: int) -> tuple[int, int]:
    """The parenthesis that closes the one at `opening` (-1 when none within _MOST_ARGUMENT_BYTES, or within
    what is left of `budget`, the bytes all such scans of a file may cover), and the budget left."""
    limit = min(len(data), opening + min(_MOST_ARGUMENT_BYTES, budget))
    close = _closing(data, opening, limit)
    return close, budget - ((close if close >= 0 else limit) - opening)


def _closing(data: bytes, opening: int, limit: int) -> int:
    """The offset of the parenthesis that closes the one at `opening`, before `limit` and past string and
    character literals (-1 when there is none, or a comment or an unclosed literal on the way makes it
    unsure)."""
    depth = 0
    for token in _ARGUMENT_TOKEN.finditer(data, opening, limit):
        kind = token.group()
        if kind == b"(":
            depth += 1
        elif kind == b")":
            depth -= 1
            if depth == 0:
                return token.start()
        elif len(kind) < 3:  # a comment, or a quote that does not close on its line
            return -1
    return -1


_ARGUMENT_TOKEN = re.compile(rb'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|//|/\*|["\'()]')


def _statements(text: str, bodies: Mapping[str, tuple[str, ...]], depth: int = 4, memo: dict | None = None) -> bool:
    """Whether a macro body expands to whole statements: empty, ending in `;` or `}`, or ending in a use of a
    macro whose bodies do (`#define ALL(t) CASE(1, t) CASE(2, t)`), and reading no block index, itself or
    through the macros it uses."""
    memo = {} if memo is None else memo
    if _reads_block(text, bodies, depth, memo):
        return False
    if not text or text.endswith((";", "}")) or _PRAGMAS.fullmatch(text):
        return True
    last = _LAST_USE.search(text)
    return depth > 0 and last is not None and last.group(1) in bodies and \
        all(_statements(_joined(b), bodies, depth - 1, memo) for b in bodies[last.group(1)])


_PRAGMAS = re.compile(r'(?:\s*(?:_Pragma|__pragma)\s*\(\s*"(?:[^"\\]|\\.)*"\s*\))+\s*')  # _Pragma("unroll 1")


def _reads_block(text: str, bodies: Mapping[str, tuple[str, ...]], depth: int, memo: dict | None = None) -> bool:
    """Whether a macro body reads the block index, or may through a macro it names (nested deeper than
    `depth`: taken as reading it).  `memo` keeps each macro's answer: a body is looked at once per depth."""
    if _BLOCK_READ.search(text):
        return True
    named = {w for w in _WORD.findall(text) if w in bodies}
    if named and depth <= 0:
        return True
    memo = {} if memo is None else memo
    for word in named:
        if (word, depth) not in memo:
            memo[(word, depth)] = any(_reads_block(_joined(b), bodies, depth - 1, memo) for b in bodies[word])
        if memo[(word, depth)]:
            return True
    return False


_WORD = re.compile(r"[A-Za-z_]\w*")


def _joined(body: str) -> str:
    """A macro body as one line: continuations joined, and a last backslash (before an empty line) dropped."""
    return re.sub(r"\\\r?\n", " ", body).rstrip("\\ \t\r\n").strip()


# What an object-like macro may expand to, to be read as nothing: qualifiers that say nothing about blocks
# (`#define RESTRICT __restrict__` in `const float * RESTRICT x`, where the grammar wants a declarator).
# A function's `__device__` and `__host__` are among them: every function a kernel calls is taken for device
# code whatever spells its qualifiers (swzc.analysis.kernels); `__global__` never is.
_QUALIFIER_WORD = (r'\b(?:__restrict__|__restrict|restrict|const|volatile|inline|__inline__|__forceinline__|__noinline__|'
                   r'static|constexpr|__device__|__host__|__grid_constant__|__shared__)\b|\bextern\s*"C"')


def _qualifier_macros(data: bytes, bodies: Mapping[str, tuple[str, ...]], function_like: set[str],
                      blanked: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Every use, outside directives, of a macro each definition of which is empty or only such qualifiers
    (launch bounds among them): parsed as spaces, as the compiler reads an empty one.  An object-like one is
    its name (`const float * RESTRICT x`); a function-like one is its name and its arguments, over lines if
    they go on (`#define LB(n) __launch_bounds__(n)`, in `__global__ LB(256) void k(…)`; the bounds then come
    from the compiler's report, or the default)."""
    names = {name.encode(): name in function_like for name, texts in bodies.items()
             if texts and all(_BOUNDS.fullmatch(_joined(t)) for t in texts)}
    if not names:
        return []
    found = []
    aside = _Ranges(blanked)
    budget = 2 * len(data) + (1 << 16)  # bytes the argument scans may cover in all: linear in the file
    for start, end, text in _logical_lines(data):
        if _DIRECTIVE_LINE.fullmatch(text.rstrip(b"\r")) or aside.holds(start):
            continue
        for m in _IDENTIFIER.finditer(text):  # one pass, however many names
            called = m.group() in names and _CALL_AFTER.match(text, m.end())
            if m.group() not in names or names[m.group()] != bool(called):
                continue
            if not called:
                found.append((start + m.start(), start + m.end()))
                continue
            close, budget = _arguments_end(data, start + text.index(b"(", m.end()), budget)
            if close >= 0:
                found.append((start + m.start(), close + 1))
    return found


_BOUNDS = re.compile(rf"(?:\s*(?:\b__launch_bounds__\s*\([^()]*\)|{_QUALIFIER_WORD}))*\s*")
_IDENTIFIER = re.compile(rb"(?<!\w)[A-Za-z_]\w*")
_CALL_AFTER = re.compile(rb"\s*\(")


class _Ranges:
    """Byte ranges [a, b), merged and sorted once, asked about by bisection."""

    def __init__(self, ranges: list[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for a, b in sorted(r for r in ranges if r[0] < r[1]):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        self.starts = [a for a, _ in merged]
        self.ends = [b for _, b in merged]

    def holds(self, at: int) -> bool:
        """Whether a range holds byte `at`."""
        i = bisect.bisect_right(self.starts, at) - 1
        return i >= 0 and at < self.ends[i]

    def meets(self, start: int, stop: int) -> bool:
        """Whether a range overlaps [start, stop)."""
        i = bisect.bisect_left(self.starts, stop) - 1  # the last range starting before stop
        return start < stop and i >= 0 and self.ends[i] > start


_BLOCK_READ = re.compile(r"\b(blockIdx|hipBlockIdx_[xyz]|gridDim|hipGridDim_[xyz])\b")
