"""What swzc shows is clean: the one place where text from outside is made safe to print or write.

Every file, header, config file, LLM reply and file name swzc reads may be someone else's.  Such text reaches
what swzc prints and writes inside messages, summaries, reports and review comments, where a character that
is invisible or that a terminal or a browser acts on could hide or reorder what the reader sees (Trojan Source)
or drive the terminal (escape sequences).  Those characters, `UNSAFE`, are replaced by a visible escape
(U+202E is shown as `\\u202e`, ESC as `\\u001b`, a byte that is not UTF-8 as `\\x9b`):

- C0 controls other than tab and newline (a carriage return only where a newline follows it), DEL, C1;
- Unicode's format characters (Cf: the bidi embeddings, overrides and isolates, LRM/RLM/ALM, zero-width
  spaces and joiners, the BOM, tags, interlinear annotations, ...) and every other default-ignorable code
  point (variation selectors, Hangul fillers, ...): invisible, they can make two different names look alike;
- the line and paragraph separators U+2028 and U+2029, which some readers take for line ends and others not;
- lone surrogates: bytes that are not UTF-8, as surrogateescape decodes them.

Text swzc writes for a person passes through `text` (or `echo`, `dumps`, `join`); only the user's own source
meant for a compiler or `git apply` (a rewritten file, a patch's lines, a fix's text in a review format) is
kept exactly, marked `Verbatim` where it sits inside other text, and escaped only where it is shown on a
terminal (`write_exact`).  Commands printed for pasting into a shell quote their words with `shell_word`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from typing import Any, BinaryIO

UNSAFE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"  # C0 but tab, newline and carriage return; DEL; C1
    "\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
    "\ud800-\udfff]"  # lone surrogates
    "|\r(?!\n)"  # a carriage return that does not end a line moves the cursor back over what was written
)


def escape(char: str) -> str:
    """One unsafe character as visible text: `\\uXXXX` (`\\UXXXXXXXX` past the BMP), `\\xNN` for a byte that is
    not UTF-8.  A character's spelling is also its escape in TOML, C++ and bash's $'...' strings (and, in the
    BMP, in JSON), so text made of them reads back as it was where it is such a string."""
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's spelling of the byte code - 0xDC00
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def text(value: str) -> str:
    """`value` with every unsafe character escaped; tabs and line ends kept."""
    return UNSAFE.sub(lambda m: escape(m.group()), value)


def is_clean(value: str) -> bool:
    return UNSAFE.search(value) is None


def one_line(value: str) -> str:
    """`value` on one line: runs of spaces, tabs and line ends made one space.  Only those: str.split() would
    also take U+2028, U+0085 and the C0 separators for spaces, and drop them unseen instead of `text` showing
    them."""
    return re.sub(r"[ \t\r\n]+", " ", value).strip(" ")


class Verbatim(str):
    """The user's own text that must reach its reader exactly: source lines in a fix, a diff to apply.
    `dumps` and `join` leave it as it is; everything else is escaped."""

    __slots__ = ()


def join(*pieces: str) -> Verbatim:
    """The pieces one after the other, each escaped unless it is Verbatim: prose about a fix and the fix."""
    return Verbatim("".join(p if isinstance(p, Verbatim) else text(p) for p in pieces))


def _cleaned(value: Any) -> Any:
    if isinstance(value, Verbatim):
        return str(value)
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {text(k) if isinstance(k, str) else k: _cleaned(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_cleaned(v) for v in value]
    return value


def dumps(doc: Any, indent: int | None = 2) -> str:
    """A JSON document: every string escaped (but Verbatim ones), and the text ASCII, so that what a reader
    of the JSON renders is as clean as its bytes."""
    return json.dumps(_cleaned(doc), indent=indent, ensure_ascii=True)


# What a line printed for a person may be coloured by (`echo`'s `kind`): rich styles by the start of the line.
KINDS = {
    "error": [(re.compile(r"^swzc: error:"), "bold red")],
    "note": [(re.compile(r"^swzc: note:"), "yellow")],
    "finding": [(re.compile(r"^.*?:\d+:"), "bold"), (re.compile(r"(?<=: kernel )\S+(?=: )"), "cyan"),
                (re.compile(r"(?<=: )[a-z][\w:+@.-]*(?= predicted)"), "green")],
    # rewrite's and analyze's summary: each kernel's heading, its order, its notes and failed checks
    "summary": [(re.compile(r"(?m)^  \S+(?= \(line \d+\):)"), "cyan"), (re.compile(r"(?m)(?<=: rewritten with )\S+$"), "green"),
                (re.compile(r"(?m)^\s*note: .*$"), "yellow"), (re.compile(r"(?m)(?<=: )(refused|declined|unranked)\b"), "red"),
                (re.compile(r"(?m)(?<=compile check: )failed\b"), "bold red")],
}


def echo(message: str, err: bool = False, nl: bool = True, kind: str | None = None) -> None:
    """Print a message (stdout, or stderr with `err`), escaped; a `kind` of line (KINDS) is coloured where the
    stream is a terminal and NO_COLOR is not set, or where FORCE_COLOR is (rich decides, as it does for
    every tool that uses it)."""
    import click  # the library's modules use the rest of this one without the command line's package

    cleaned = text(message)
    stream = sys.stderr if err else sys.stdout
    if kind is None or os.environ.get("NO_COLOR") or not (os.environ.get("FORCE_COLOR") or is_terminal(stream)):
        click.echo(cleaned, err=err, nl=nl)  # most lines: no console to make
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(file=stream, highlight=False, soft_wrap=True)
    if not console.is_terminal or console.no_color or console.color_system is None:
        click.echo(cleaned, err=err, nl=nl)
        return
    shown = Text(cleaned)  # plain text: nothing in it is read as markup
    for pattern, style in KINDS[kind]:
        for found in pattern.finditer(cleaned):
            shown.stylize(style, found.start(), found.end())
    console.print(shown, end="\n" if nl else "")


def is_terminal(stream: Any) -> bool:
    """Whether `stream` is a terminal (a person reads it as it comes)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def shown(data: bytes) -> bytes:
    """Bytes of source or of a patch as a terminal may show them: unsafe characters escaped (UTF-8 out)."""
    return text(data.decode("utf-8", "surrogateescape")).encode("utf-8")


def write_exact(data: bytes, stream: BinaryIO | None = None, terminal: bool | None = None) -> None:
    """Write bytes that a program reads back exactly (a rewritten file, a patch): as they are to a file or a
    pipe; to a terminal (or with `terminal`), escaped as `shown`, since the terminal would act on them."""
    out = stream if stream is not None else sys.stdout.buffer
    if terminal is None:
        terminal = is_terminal(out)
    out.write(shown(data) if terminal else data)
    out.flush()


def shell_word(word: str) -> str:
    """A word as a POSIX shell reads it back: shlex's quoting, or where the word holds an unsafe character
    (or a newline or tab) bash's $'...' form (also zsh's and ksh's), which spells it as an escape, so the
    command stays on one line and reads as it runs."""
    if is_clean(word) and "\n" not in word and "\t" not in word and "\r" not in word:
        return shlex.quote(word)

    def spelled(c: str) -> str:
        if c in "\\'":
            return "\\" + c
        if c in "\n\t\r" or not is_clean(c):
            return f"\\x{ord(c):02x}" if ord(c) < 0x80 else escape(c)
        return c

    return "$'" + "".join(map(spelled, word)) + "'"


def shell_path(path: str) -> str:
    """A file name as a command's argument: a name that starts with '-' is written ./-name, so that no
    command takes it for an option; then quoted as shell_word."""
    return shell_word(f"./{path}" if path.startswith("-") else path)


def fenced(info: str, body: str) -> str:
    """A markdown code block whose fence is longer than any run of backticks in `body`: the body cannot close it."""
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", body)), default=0))
    return f"{fence}{info}\n{body}\n{fence}"
