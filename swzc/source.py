"""Reading and parsing a CUDA/HIP file with tree-sitter-cuda. Source stays bytes throughout."""

from __future__ import annotations

import functools
import re
from contextvars import ContextVar
from dataclasses import dataclass

import tree_sitter_cuda
from tree_sitter import Language, Node, Parser, Tree

from swzc.errors import ExitCode, SwzcError
from swzc.inputs import read_regular

CUDA = Language(tree_sitter_cuda.language())

_HIP_HINT = re.compile(rb"#\s*include\s*[<\"]hip/|\bhipLaunchKernelGGL\b|\bhipBlockIdx_[xyz]\b|\bhipMalloc\b")


@functools.cache
def _parser() -> Parser:
    return Parser(CUDA)


def parse(data: bytes) -> Tree:
    return _parser().parse(data)


@dataclass(frozen=True)
class SourceFile:
    path: str  # as the user gave it; used in messages and patch headers
    data: bytes
    tree: Tree
    dialect: str  # "cuda" or "hip"

    def line_col(self, byte: int) -> tuple[int, int]:
        """1-based line and column of a byte offset."""
        line = self.data.count(b"\n", 0, byte) + 1
        col = byte - (self.data.rfind(b"\n", 0, byte) + 1) + 1
        return line, col

    def where(self, node_or_byte: Node | int) -> str:
        byte = node_or_byte if isinstance(node_or_byte, int) else node_or_byte.start_byte
        line, col = self.line_col(byte)
        return f"{self.path}:{line}:{col}"

    def text(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", "surrogateescape")


def detect_dialect(path: str, data: bytes) -> str:
    if path.endswith(".hip") or _HIP_HINT.search(data):
        return "hip"
    return "cuda"


def first_syntax_error(root: Node) -> Node | None:
    """The first ERROR or MISSING node in document order, or None."""
    if not root.has_error:
        return None
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            return node
        stack.extend(child for child in reversed(node.children) if child.has_error or child.is_missing)
    return root


def syntax_error_message(src: SourceFile, node: Node) -> str:
    if node.is_missing:
        what = f"expected '{node.type}'"
    else:
        snippet = src.text(node).splitlines()[0][:40] if src.text(node) else ""
        what = f"cannot parse {snippet!r}" if snippet else "cannot parse this"
    return f"{src.where(node)}: syntax error: {what} (or a construct the CUDA grammar does not cover)"


def load_bytes(path: str, data: bytes) -> SourceFile:
    """Parse bytes; a file tree-sitter cannot parse whole is an input error with file:line:col."""
    tree = parse(data)
    src = SourceFile(path=path, data=data, tree=tree, dialect=detect_dialect(path, data))
    bad = first_syntax_error(tree.root_node)
    if bad is not None:
        raise SwzcError(syntax_error_message(src, bad), ExitCode.BAD_INPUT)
    return src


# Inputs above this many bytes are refused (see the README's Security section); --max-bytes raises it.
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
max_input_bytes: ContextVar[int] = ContextVar("max_input_bytes", default=DEFAULT_MAX_BYTES)


def load(path: str, max_bytes: int | None = None) -> SourceFile:
    """Read and parse a source file.  It must be a regular file of at most `max_bytes` (default: the
    `max_input_bytes` in effect, which the command line's --max-bytes sets)."""
    limit = max_input_bytes.get() if max_bytes is None else max_bytes
    return load_bytes(path, read_regular(path, limit, " (raise it with --max-bytes)"))
