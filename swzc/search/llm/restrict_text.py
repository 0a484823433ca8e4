"""The first check of an LLM's swizzle body (swzc.search.llm.restrict), made on the raw text before any parse.

Text that could make the compiler see something tree-sitter does not (the preprocessor, trigraphs, digraphs,
line continuations, characters outside printable ASCII) is refused here, as nothing parsed from it could be
trusted; the rest of the checks run on the parse.
"""

from __future__ import annotations

import re

from swzc.search.llm.restrict_violation import Violation, _violation

MAX_LINES = 120

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
