"""Staged reads: whether a kernel copies global data into shared memory in a loop and waits at a block
barrier each pass, as tiled GEMMs do.  The blocks of such a kernel issue each pass's loads together, right
after the barrier; the L2 model's request-coalescing term depends on the answer.  It needs no launch."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from tree_sitter import Node

from swzc.analysis.kernels import kernel_function
from swzc.analysis.records import KernelInfo
from swzc.frontend.evaluate import Macro
from swzc.frontend.syntax import declared_name, text, walk
from swzc.model.footprint.tree import (_WORD, _arguments, _callee, _file_facts, _parameter_names, _pointer_parameters,
                                       _reachable_helpers)

if TYPE_CHECKING:
    from swzc.analysis.context import FileContext


def stages_reads(ctx: FileContext, kernel: KernelInfo) -> bool:
    """Whether the kernel stages its reads through shared memory behind a barrier (see `_staged`); it needs
    no launch."""
    function = kernel_function(ctx, kernel)
    if function is None:
        return False
    found = ctx.staged.get(function.start_byte)  # a sweep asks again at each size: the answer takes no sizes
    if found is None:
        found = ctx.staged[function.start_byte] = _stages_reads(ctx, function)
    return found


def _stages_reads(ctx: FileContext, function: Node) -> bool:
    body = function.child_by_field_name("body")
    facts = _file_facts(ctx)
    scope = ctx.scope()
    reached = _reachable_helpers(body, facts.helpers, scope)
    bodies = [body, *(f.child_by_field_name("body") for f in reached)]
    pointers = {declared_name(d) for f in (function, *reached) for d, _ in _pointer_parameters(f)}
    for node in (n for b in bodies if b is not None for n in walk(b)):
        if node.type == "declaration" and "*" in text(node).split("=")[0]:
            pointers.update(declared_name(d) for d in node.children_by_field_name("declarator"))
    return _staged(bodies, facts.shared, pointers, facts.helpers, scope.macros)


# Block-wide barriers, and copies that land in shared memory without a store the code spells out.
_BARRIERS = {"__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or", "__barrier_sync",
             "__builtin_amdgcn_s_barrier", "sync", "arrive_and_wait"}
_ASYNC_COPIES = {"__pipeline_memcpy_async", "memcpy_async", "cp_async", "__builtin_amdgcn_global_load_lds"}
_ASM_BARRIERS = (b"bar.sync", b"barrier.sync", b"s_barrier")
_ASM_COPIES = (b"cp.async",)
_LOOPS = ("for_statement", "for_range_loop", "while_statement", "do_statement")


def _staged(bodies: list[Node | None], file_shared: frozenset[str], pointers: set[str], helpers: Mapping[str, Node],
            macros: Mapping[str, Macro | None]) -> bool:
    """Whether the kernel stages its reads: a loop that copies from a global pointer into shared memory
    (or starts an asynchronous copy to it) and waits at a block barrier, pass after pass, as tiled GEMMs do.
    The copy may go through a local (`float4 t = A[i]; tile[j] = t.x;`) or a helper the loop calls with the
    shared array as an argument.  The blocks of such a kernel issue each pass's loads together, right after
    the barrier.  Macros in a store (`AS(i, j) = A[k]`, with `#define AS(i, j) As[i][j]`) count by their
    bodies."""
    def words(node: Node | None) -> set[str]:
        found, todo = set(), _WORD.findall(text(node))
        for _ in range(4):  # macros in macros, a few levels deep
            found.update(todo)
            todo = [w for name in todo if (m := macros.get(name)) is not None for w in _WORD.findall(m.body) if w not in found]
        return found

    shared = set(file_shared)
    nodes = [n for body in bodies if body is not None for n in walk(body)]
    for node in nodes:
        if node.type == "declaration" and any(c.type == "type_qualifier" and text(c) == "__shared__" for c in node.children):
            shared.update(declared_name(d) for d in node.children_by_field_name("declarator"))
    for node in nodes:  # pointers into shared memory: T* p = tile + k, T* p = &tile[k][0]
        if node.type == "init_declarator" and shared & words(node.child_by_field_name("value")):
            shared.add(declared_name(node))
    shared.discard("")
    helper_nodes: dict[int, list[Node]] = {}  # each helper's body, walked once
    copies: dict[tuple[int, frozenset[str], frozenset[str]], bool] = {}  # a helper's answer, per binding
    # A loop that stages holds everything an inner one does: the outermost loops are enough, and each
    # node is read once however deep the loops nest.
    for loop in _outermost_loops(bodies):
        inside = list(walk(loop))
        calls = [c for c in inside if c.type == "call_expression"]
        names = _called(calls)
        asm = b" ".join(n.text or b"" for n in inside if "asm" in n.type)
        if not (names & _BARRIERS or any(b in asm for b in _ASM_BARRIERS)):
            continue
        if names & _ASYNC_COPIES or any(c in asm for c in _ASM_COPIES) or _copies_into(inside, shared, pointers - shared, words):
            return True
        for call in calls:  # a helper handed the shared array: its parameter is shared memory there
            helper = helpers.get(_callee(call))
            if helper is None:
                continue
            bound = list(zip(_parameter_names(helper), _arguments(call)))
            into = {p for p, arg in bound if shared & words(arg)}
            if not into:
                continue
            # the helper's own pointers, and what the call hands it from a global pointer (st(&tile[i], ld(A + i)))
            sources = ({declared_name(d) for d, _ in _pointer_parameters(helper)}
                       | {p for p, arg in bound if words(arg) & (pointers - shared)}) - into
            key = (id(helper), frozenset(into), frozenset(sources))
            if key not in copies:
                body = helper_nodes.setdefault(id(helper), list(walk(helper.child_by_field_name("body"))))
                copies[key] = bool(_called(body) & _ASYNC_COPIES) or _copies_into(body, into, sources, words)
            if copies[key]:
                return True
    return False


def _called(nodes: list[Node]) -> set[str]:
    """The functions the calls among `nodes` name, without an object or namespace (`bar.sync()` -> `sync`)."""
    return {_callee(c).rsplit(".", 1)[-1] for c in nodes if c.type == "call_expression"}


def _outermost_loops(bodies: list[Node | None]) -> Iterator[Node]:
    stack = [b for b in reversed(bodies) if b is not None]
    while stack:
        node = stack.pop()
        if node.type in _LOOPS:
            yield node
        else:
            stack.extend(reversed(node.children))


def _copies_into(nodes: list[Node], shared: set[str], pointers: set[str], words: Callable[[Node | None], set[str]]) -> bool:
    """Whether one of `nodes` stores into `shared` a value read through `pointers`, directly or through a
    local loaded from one (two steps at most).  A local that accumulates (`acc += a[i]`) is computed, not
    loaded: a block that sums global data and then combines it in shared memory does not stage it."""
    stores = []  # (the name stored to, if a plain one; the words of the target; the words of the value)
    for node in nodes:
        if node.type == "init_declarator":
            stores.append((declared_name(node), {declared_name(node)}, words(node.child_by_field_name("value"))))
        elif node.type == "assignment_expression" and text(node.child_by_field_name("operator")) == "=":
            target = node.child_by_field_name("left")
            stores.append((text(target), words(target), words(node.child_by_field_name("right"))))
    loaded = set(pointers)
    for _ in range(2):
        loaded |= {name for name, _, read in stores if name.isidentifier() and name not in shared and read & loaded}
    return any(target & shared and read & loaded for _, target, read in stores)
