"""The hazard detectors of the analysis: what makes reordering a kernel's blocks unsafe, found in the code of
the kernel and the helpers it reaches (a wait on memory other blocks write, an atomic ticket, grid-wide
synchronisation, clusters, a read of the block index the rewrite cannot reach: through cooperative groups,
a macro, an intrinsic, inline assembly), and where the file did not parse (a kernel or helper that touches
an error, or a kernel whose definition could not be parsed at all).

Each finding is a Hazard naming its rule; the rules are registered in swzc.analysis.records (HAZARDS).
swzc.analysis.kernels runs the detectors on each kernel and collects what they find.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterator, Mapping

from tree_sitter import Node

from swzc.analysis.records import Hazard, KernelInfo
from swzc.frontend.preprocess import Spans
from swzc.frontend.source import WHOLE_CONSTRUCTS, SourceFile, SyntaxIssue
from swzc.frontend.syntax import _callee, _line, declared_name, text, walk

_HIDDEN_BLOCK_INDEX = re.compile(
    r"__builtin_amdgcn_workgroup_id_[xyz]|__ockl_get_group_id|__nvvm_read_ptx_sreg_ctaid|hc_get_group_id|"
    r"__builtin_ptx_read_ctaid"
)
_BLOCK_INDEX_TEXT = re.compile(r"\b(blockIdx|hipBlockIdx_[xyz])\b|%ctaid|" + _HIDDEN_BLOCK_INDEX.pattern)
_ASM_BLOCK_INDEX = re.compile(r"%(n?ctaid|clusterid|cluster_ctaid|cluster_nctaid)")
_WAIT_CALLS = re.compile(r"^(atomic\w*|__hip_atomic\w*|__atomic\w*|ld_acquire\w*|__ldcv|__ldvolatile|__nv_atomic\w*)$")
_TICKET_CALLS = re.compile(r"^(atomicAdd|atomicInc|atomicSub|atomicAdd_system|atomicInc_system|__hip_atomic_fetch_add)$")
_GRID_SYNC = {  # word -> (hazard rule, message)
    "this_grid": ("grid-sync", "grid-wide synchronisation (cooperative groups)"),
    "grid_group": ("grid-sync", "grid-wide synchronisation (cooperative groups)"),
    "this_multi_grid": ("grid-sync", "multi-grid synchronisation (cooperative groups)"),
    "multi_grid_group": ("grid-sync", "multi-grid synchronisation (cooperative groups)"),
    "sync_grids": ("grid-sync", "grid-wide synchronisation"),
    "this_cluster": ("cluster", "thread-block clusters (cluster mates are consecutive blocks)"),
    "cluster_group": ("cluster", "thread-block clusters (cluster mates are consecutive blocks)"),
    "group_index": ("cg-block-index", "reads the block index through cooperative groups"),
    "block_index": ("cg-block-index", "reads the block index through cooperative groups"),
}
_IDLE_CALLS = {"__nanosleep", "__threadfence", "__threadfence_system", "__syncthreads", "__builtin_amdgcn_s_sleep"}
_LOOPS = ("while_statement", "do_statement", "for_statement")


# ---- in the code a kernel and its helpers run --------------------------------------------------------------


def _hazards(src: SourceFile, name: str, body: Node, block_macros: set[str], volatile: set[str]) -> list[Hazard]:
    found: list[Hazard] = []
    where = "" if name == "" else f" (in {name})"
    shared = _shared_names(body)
    for node in walk(body):
        kind = node.type
        if kind in _LOOPS:
            cond = node.child_by_field_name("condition")
            if cond is not None and _spins(cond, node, volatile):
                found.append(Hazard(_line(node), f"waits on memory other blocks write (line {_line(node)}){where}: "
                                    "reordering blocks could deadlock it or change its results", "wait"))
        elif kind == "call_expression":
            callee = _callee(node)
            parent = node.parent
            while parent is not None and parent.type in ("parenthesized_expression",):
                parent = parent.parent
            if _TICKET_CALLS.match(callee) and parent is not None and parent.type not in ("expression_statement", "cast_expression") \
                    and not _on_shared(node, shared):  # a counter in shared memory is the block's own
                found.append(Hazard(_line(node), f"atomic ticket: the value {callee} returns orders blocks (line {_line(node)}){where}", "ticket"))
        elif kind in ("identifier", "field_identifier", "type_identifier", "namespace_identifier"):
            word = text(node)
            if word in _GRID_SYNC:
                rule, message = _GRID_SYNC[word]
                found.append(Hazard(_line(node), f"{message} (line {_line(node)}){where}", rule))
            elif word in block_macros and not any(f"macro {word}," in h.reason for h in found):
                found.append(Hazard(_line(node), f"uses macro {word}, whose body reads the block index; macro bodies "
                                    f"are opaque to the rewrite (line {_line(node)}){where}", "macro-block-index"))
            elif _HIDDEN_BLOCK_INDEX.fullmatch(word) or _HIDDEN_BLOCK_INDEX.match(word):
                found.append(Hazard(_line(node), f"reads the block index through {word} (line {_line(node)}){where}", "intrinsic-block-index"))
        elif kind == "gnu_asm_expression" and _ASM_BLOCK_INDEX.search(text(node)):
            found.append(Hazard(_line(node), f"inline assembly reads the block index (line {_line(node)}){where}", "asm-block-index"))
    return found


def _shared_names(body: Node) -> set[str]:
    """The variables and arrays a function body declares `__shared__`; not a pointer (`__shared__ int* p` may
    hold a global address)."""
    names = set()
    for node in walk(body):
        if node.type == "declaration" and any(c.type in ("type_qualifier", "storage_class_specifier", "attribute_specifier")
                                              and text(c) == "__shared__" for c in node.children):
            for declarator in node.children_by_field_name("declarator"):
                inner = declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" else declarator
                if inner is not None and inner.type in ("identifier", "array_declarator"):
                    names.add(declared_name(inner))
    return names


def _on_shared(call: Node, shared: set[str]) -> bool:
    """An atomic whose first argument is a `__shared__` variable's address (`&count`, `&hist[i]`, `hist + i`)."""
    args = call.child_by_field_name("arguments")
    first = args.named_children[0] if args is not None and args.named_children else None
    while first is not None:
        if first.type == "identifier":
            return text(first) in shared
        if first.type == "pointer_expression" and text(first.child_by_field_name("operator")) == "&":
            first = first.child_by_field_name("argument")
        elif first.type in ("subscript_expression", "field_expression") and not (
                first.type == "field_expression" and text(first.child_by_field_name("operator")) == "->"):
            first = first.child_by_field_name("argument")
        elif first.type == "parenthesized_expression" and first.named_child_count == 1:
            first = first.named_children[0]
        elif first.type == "binary_expression" and text(first.child_by_field_name("operator")) == "+":
            first = first.child_by_field_name("left")
        else:
            return False
    return False


def _spins(cond: Node, loop: Node, volatile: set[str]) -> bool:
    cond_text = text(cond)
    if "volatile" in cond_text:
        return True
    for node in walk(cond):
        if node.type == "call_expression":
            callee = _callee(node)
            if _WAIT_CALLS.match(callee) or callee in ("load", "test_wait", "try_wait"):
                return True
        if node.type in ("identifier", "field_identifier") and text(node) in volatile:  # a volatile variable or field
            return True
    body = loop.child_by_field_name("body")
    idle = body is None or body.type == "expression_statement" and body.named_child_count == 0
    if body is not None and body.type == "compound_statement":
        idle = all(  # nothing but comments and calls such as __nanosleep (a comment may sit inside a statement)
            s.type == "comment" or s.type == "expression_statement" and all(
                c.type == "comment" or c.type == "call_expression" and _callee(c) in _IDLE_CALLS for c in s.named_children)
            for s in body.named_children
        )
    return idle and any(n.type in ("subscript_expression", "pointer_expression", "field_expression") for n in walk(cond))


def _block_macros(bodies: Mapping[str, tuple[str, ...]]) -> set[str]:
    """Macros whose expansion reads the block index: directly, or through another such macro (any body the
    macro had on a path the compiler may take)."""
    users: dict[str, set[str]] = {}  # macro name -> macros whose body names it
    found = set()
    for name, texts in bodies.items():
        for body in texts:
            if _BLOCK_INDEX_TEXT.search(body):
                found.add(name)
            for word in set(re.findall(r"[A-Za-z_]\w*", body)):
                users.setdefault(word, set()).add(name)
    todo = list(found)
    while todo:
        for user in users.get(todo.pop(), ()):
            if user not in found:
                found.add(user)
                todo.append(user)
    return found


def _volatile_names(root: Node, functions_too: bool = False) -> set[str]:
    """The names declared volatile under `root`: variables and struct fields, and with `functions_too` the
    parameters and locals of the functions in it (one function's `volatile int i` is not another's `i`)."""
    names = set()
    todo = [root]
    while todo:
        node = todo.pop()
        if node.type in ("declaration", "parameter_declaration", "field_declaration") and any(
            c.type == "type_qualifier" and text(c) == "volatile" for c in node.children
        ):
            for decl in node.children_by_field_name("declarator"):
                names.add(declared_name(decl))
        if functions_too or node.type not in ("function_definition", "lambda_expression"):
            todo.extend(node.children)
    return names


# ---- where the file did not parse ---------------------------------------------------------------------------


class _Broken:
    """What of a file did not parse, found once for all its kernels: its syntax errors, indexed by place; the
    functions that parts which did not parse seem to define as device code, reading the block index or maybe
    (name: line); and the parts set aside to parse it (swzc.frontend.preprocess.refine) that read the block index."""

    def __init__(self, src: SourceFile) -> None:
        self.errors = src.errors
        self.starts = [e.start for e in src.errors]
        self.reach = list(itertools.accumulate((e.end for e in src.errors), max))  # furthest end so far
        self.unparsed_helpers: dict[str, int] = {}
        for start, end in _unparsed_runs(src) if src.errors else ():
            for name in _device_definitions(src.data[start:end].decode("utf-8", "replace")):
                self.unparsed_helpers.setdefault(name, src.line_col(start)[0])
        self.aside = [(a, b) for a, b in src.blanked if _BLOCK_INDEX_TEXT.search(src.data[a:b].decode("utf-8", "replace"))]

    def touching(self, spans: list[tuple[int, int]]) -> list[SyntaxIssue]:
        """The errors that touch any of `spans`, in document order."""
        hit: set[int] = set()
        for a, b in spans:
            i = bisect.bisect_right(self.starts, b) - 1  # the last error starting at or before b, then back
            while i >= 0 and self.reach[i] >= a:
                if self.errors[i].overlaps(a, b):
                    hit.add(i)
                i -= 1
        return [self.errors[i] for i in sorted(hit)]


def _syntax_hazards(src: SourceFile, spans: list[tuple[int, int]], unseen: set[str], broken: _Broken) -> list[Hazard]:
    """A kernel, a helper it reaches or one of its launches touches a part of the file tree-sitter could not
    parse, or it calls a function `unseen` (none of the file's parsed definitions) that a part which did not
    parse seems to define as device code with a body that may read the block index (see _device_definitions):
    what the analysis sees there may be wrong, so the kernel is refused with the place."""
    hit = broken.touching(spans)
    if not hit:
        for name in sorted(unseen & broken.unparsed_helpers.keys()):
            line = broken.unparsed_helpers[name]
            return [Hazard(line, f"calls {name}, whose definition swzc cannot parse (line {line}): it may read the "
                           "block index", "syntax-error")]
        return []
    more = f" (and {len(hit) - 1} more)" if len(hit) > 1 else ""
    return [Hazard(hit[0].line, f"touches a part of the file swzc cannot parse: {src.error_message(hit[0])}{more}", "syntax-error")]


def _unparsed_runs(src: SourceFile) -> list[tuple[int, int]]:
    """The stretches of the file that are not whole, clean definitions, at file scope or in a namespace,
    extern "C" block or #if: where a definition that did not parse lies, with what tree-sitter made of it."""
    containers = {"ERROR", "translation_unit", "declaration_list", "linkage_specification", "namespace_definition",
                  "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef"}
    runs: list[tuple[int, int]] = []

    def visit(node: Node) -> Iterator[Node]:
        """The runs of `node`'s children; a container with an error in it is yielded, to be visited first."""
        start = end = -1
        for child in node.children:
            if child.type in containers and child.has_error:
                yield child
            elif child.is_error or child.has_error or child.is_missing or child.type not in WHOLE_CONSTRUCTS:
                start, end = (child.start_byte if start < 0 else start), child.end_byte
                continue
            if start >= 0:
                runs.append((start, end))
            start = -1
        if start >= 0:
            runs.append((start, end))

    stack = [visit(src.tree.root_node)]  # no recursion: containers nest as deep as the file does
    while stack:
        inner = next(stack[-1], None)
        if inner is None:
            stack.pop()
        else:
            stack.append(visit(inner))
    return runs


def _device_definitions(text: str) -> list[str]:
    """The names `text` seems to define with a body that may read the block index: one whose body reads it
    (only device code can: whatever qualifier macro its head is spelled with), or one with a device word in
    its head (`__device__`, or a macro spelled with DEVICE or HOST) whose body does not close inside the text
    (its statements may have parsed apart from its head).  A declaration (`;` before any `{`) defines
    nothing."""
    ends = [m.start() for m in _STATEMENT_END.finditer(text)]
    device = [m.end() for m in _DEVICE_WORD.finditer(text)]
    closes: dict[int, int] = {}  # index in `ends` of a `{` -> of the `}` that closes it (found once: linear)
    opened: list[int] = []
    for i, at in enumerate(ends):
        if text[at] == "{":
            opened.append(i)
        elif text[at] == "}" and opened:
            closes[opened.pop()] = i
    found = []
    for match in _CALLED_NAME.finditer(text):
        before = bisect.bisect_left(ends, match.start())
        opening = ends[before] if before < len(ends) else -1  # the first `;`, `{` or `}` after the name
        if opening < 0 or text[opening] != "{":
            continue
        close = closes.get(before)
        if close is not None:
            if _BLOCK_INDEX_TEXT.search(text, opening, ends[close]):
                found.append(match.group(1))
            continue
        head = ends[before - 1] + 1 if before else 0  # a device word between the last `;`, `{` or `}` and the name
        at = bisect.bisect_left(device, head)
        if at < len(device) and device[at] <= match.start():
            found.append(match.group(1))
    return found


_CALLED_NAME = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_STATEMENT_END = re.compile(r"[;{}]")
_DEVICE_WORD = re.compile(r"__device__|__host__|DEVICE|HOST")


def _set_aside_hazards(src: SourceFile, spans: list[tuple[int, int]], broken: _Broken) -> list[Hazard]:
    """A branch of an #if that was parsed as spaces (swzc.frontend.preprocess.refine) reads the block index inside the
    kernel or its helpers: the rewrite would change the configuration that was parsed and not the other."""
    for start, end in broken.aside:
        if any(start < b and a < end for a, b in spans):
            line = src.line_col(start)[0]
            return [Hazard(line, f"reads the block index in a branch of an #if that swzc set aside to parse the file (line "
                           f"{line}): a rewrite would leave that configuration unswizzled", "syntax-error")]
    return []


def _kernels_in_errors(src: SourceFile, known: set[str], global_macros: set[str] = frozenset(),
                       inactive: tuple[tuple[int, int], ...] = ()) -> list[KernelInfo]:
    """Kernels whose definition tree-sitter could not parse at all: refused, so the user hears of them.  A
    kernel spelled through a macro for `__global__` (`#define KERNEL __global__`, `KERNEL void k(…)`) is one:
    the grammar fails on its head, on the line of the macro's use."""
    found = []

    def refused(name: str, at: int, why: str) -> None:
        if not name or name in known:
            return
        known.add(name)
        line = src.line_col(at)[0]
        found.append(KernelInfo(name, line, (), (), (), 0, None, (Hazard(line, why, "syntax-error"),), (), None, "", False, 0, "cuda"))

    spelled = re.compile(rb"\b(" + b"|".join(re.escape(m.encode()) for m in sorted(global_macros)) + rb")\b") if global_macros else None
    scanned = 0  # the file is looked through for such macros up to here (the errors come in document order)
    for issue in src.errors:
        for match in _GLOBAL_WORD.finditer(src.data, issue.start, issue.end):
            refused(_head_name(src.data, match.end()), match.start(), f"its definition cannot be parsed: {src.error_message(issue)}")
        if spelled is None:
            continue
        start, end = max(src.line_start(issue.start), scanned), src.line_end(issue.end)
        scanned = max(scanned, end)  # many errors on one long line: the line is looked through once
        for use in spelled.finditer(src.data, start, end):
            refused(_head_name(src.data, use.end()), use.start(),
                    f"its definition spells __global__ through the macro {use.group(1).decode()}, which swzc cannot "
                    f"parse: {src.error_message(issue)}")
    # A kernel that parsed clean inside a region tree-sitter gave up on (an ERROR node that wraps whole
    # definitions: a struct it never saw close) is found by nothing else.
    starts = [issue.start for issue in src.errors]  # in document order
    stack = [src.tree.root_node] if src.tree.root_node.has_error else []
    while stack:
        node = stack.pop()
        if not node.is_error:
            stack.extend(c for c in node.children if c.has_error)
            continue
        at = bisect.bisect_left(starts, node.start_byte)
        first = src.errors[at] if at < len(starts) and starts[at] < node.end_byte else None
        for match in _GLOBAL_WORD.finditer(src.data, node.start_byte, node.end_byte):
            refused(_head_name(src.data, match.end()), match.start(),
                    f"its definition lies in a stretch of the file swzc cannot parse (lines {node.start_point.row + 1}-"
                    f"{node.end_point.row + 1})" + (f": {src.error_message(first)}" if first is not None else ""))
    # The net under all of the above: every `__global__` in the file heads a kernel found, or a declaration,
    # or is refused here by the name it heads (`__global__ LB(128) void k(…)`, `__maxnreg__(64)`, a kernel
    # nested in a definition that did not parse): none is left out of the report.
    aside = Spans((*src.blanked, *inactive))
    for use in _GLOBAL_WORD.finditer(src.data):
        name, why = _unfound_kernel(src, use.start(), known, starts, aside)
        if name:
            refused(name, use.start(), why)
    return found


_GLOBAL_WORD = re.compile(rb"\b__global__\b")
_NOT_HEADS = {"comment", "string_literal", "raw_string_literal", "char_literal", "system_lib_string", "preproc_def",
              "preproc_function_def", "preproc_arg", "template_instantiation"}  # the last: `template __global__ void k<float>(…);`


def _unfound_kernel(src: SourceFile, at: int, known: set[str], starts: list[int], aside: Spans) -> tuple[str, str]:
    """(name, why) of the kernel the `__global__` at `at` heads, where nothing found it; ("", "") where it is a
    comment's, a string's or a macro's, a clean declaration's (a prototype), a kernel's that was found, or
    in a part the build never reads (parsed as spaces)."""
    name = _head_name(src.data, at + len("__global__"))
    if not name or name in known or aside.has(at):  # parsed as spaces, or in a branch never taken
        return "", ""
    node: Node | None = src.tree.root_node.descendant_for_byte_range(at, at + len("__global__"))
    while node is not None:
        if node.type in _NOT_HEADS or node.type == "declaration" and not node.has_error:
            return "", ""
        node = node.parent
    after = bisect.bisect_left(starts, at)  # the first error at or after its head, else the last before it
    issue = src.errors[min(after, len(starts) - 1)] if starts else None
    return name, ("its definition is not one swzc could parse as a kernel" +
                       (f": {src.error_message(issue)}" if issue is not None else ""))


def _head_name(data: bytes, at: int) -> str:
    """The name the head from `at` (just after `__global__`, or a macro that spells it) declares: the last name
    before a parenthesis outside parentheses, up to the first `{` or `;` (`__global__ LB(128) void k(…)` is k;
    attributes such as __launch_bounds__ are not names); "" where there is none."""
    head_end = min(len(data), at + 4096)
    for stop in (b"{", b";", b"__global__"):  # a head holds no other kernel's: all the scans stay linear in the file
        i = data.find(stop, at + (stop == b"__global__"), head_end)
        head_end = i if i >= 0 else head_end
    name, depth = "", 0
    for token in _HEAD_TOKEN.finditer(data, at, head_end):
        if token.group() == b"(":
            depth += 1
        elif token.group() == b")":
            depth -= 1
        elif depth == 0 and token.group(1) is not None and token.group(1) not in _NOT_NAMES:
            name = token.group(1).decode("utf-8", "surrogateescape")
    return name


_HEAD_TOKEN = re.compile(rb"([A-Za-z_]\w*)\s*(?=\()|[()]")


_NOT_NAMES = {b"__launch_bounds__", b"__attribute__", b"__align__", b"alignas", b"__declspec", b"__cluster_dims__",
              b"__maxnreg__"}
