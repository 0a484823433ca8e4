"""Analysis before editing: kernels, their block-index uses, launches, tile decodes and hazards.

Everything here reads the original tree and returns frozen records holding byte offsets and text (no
tree nodes), which the passes and the pipeline read.
"""

from __future__ import annotations

import bisect
import itertools
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from tree_sitter import Node

from swzc.frontend import queries
from swzc.frontend.evaluate import Dim3, Evaluator, Scope, Value, expression_of
from swzc.frontend.preprocess import Preprocessed, Spans
from swzc.core.errors import SwzcError
from swzc.frontend.source import WHOLE_CONSTRUCTS, SourceFile, SyntaxIssue
from swzc.analysis.records import BlockUse, Decode, FileAnalysis, Hazard, Helper, KernelInfo, Launch, LaunchFact, TileLoop
from swzc.frontend.scope import _Evaluator, local_scope
from swzc.analysis.splice_safety import external_linkage, side_effect_in, splice_text
from swzc.frontend.syntax import _callee, _has_token, _line, _strip, ancestors, declared_name, function_name, functions, parameter_list, text, walk

if TYPE_CHECKING:
    from swzc.analysis.context import FileContext

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


def _library_at(src: SourceFile, item: Node) -> int:
    """Where generated code goes in front of a top-level item: before its leading comments, at a line start."""
    start = item
    sibling = item.prev_sibling
    while sibling is not None and sibling.type == "comment" and start.start_point.row - sibling.end_point.row <= 1:
        start = sibling
        sibling = sibling.prev_sibling
    return src.line_start(start.start_byte)


# ---- the analysis -------------------------------------------------------------------------------------


def _uses_in(src: SourceFile, body: Node, function: str) -> tuple[list[BlockUse], list[Node]]:
    """Block-index reads (rewritable) and grid-size reads under `body`."""
    uses: list[BlockUse] = []
    grid_reads: list[Node] = []
    fields: set[int] = set()
    for captures in queries.matches(src.dialect, "block_index", body):
        if "whole" in captures:
            continue
        (use,) = captures["use"]
        if "object" in captures:
            fields.add(captures["object"][0].start_byte)
        if _spliced_call(use):
            continue
        if "object" in captures:
            obj = text(captures["object"][0]).lstrip(":")
            axis = text(captures["axis"][0])
            spelling = "cuda"
        else:
            obj, axis = ("blockIdx" if "BlockIdx" in text(use) else "gridDim"), text(use)[-1]
            spelling = "hip"
        if obj == "gridDim":
            grid_reads.append(use)
        elif axis in ("x", "y", "z"):
            uses.append(BlockUse(use.start_byte, use.end_byte, axis, spelling, function, _line(use), text(use)))
    for captures in queries.matches(src.dialect, "block_index", body):
        for whole in captures.get("whole", []):
            outer = whole.parent if whole.parent is not None and whole.parent.type == "qualified_identifier" else whole
            if outer.start_byte in fields or whole.start_byte in fields:
                continue
            uses.append(BlockUse(outer.start_byte, outer.end_byte, "", "cuda", function, _line(outer), text(outer)))
    uses.sort(key=lambda u: u.start)
    return uses, grid_reads


def _spliced_call(node: Node) -> str:
    """The name of the swzc swizzle call `node` is an argument of (a file swzc already rewrote), or ''."""
    args = node.parent
    if args is None or args.type != "argument_list" or args.parent is None or args.parent.type != "call_expression":
        return ""
    callee = _callee(args.parent)
    return callee if callee.startswith("swzc_") else ""


def _swizzled_by(body: Node) -> str:
    reads = (n for n in walk(body) if n.type in ("field_expression", "identifier") and _BLOCK_INDEX_TEXT.match(text(n).lstrip(":")))
    return next((c for c in map(_spliced_call, reads) if c), "")


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


def _decode(src: SourceFile, body: Node, uses: list[BlockUse]) -> tuple[Node | None, list[int], str | None]:
    """The divisor n of `blockIdx.x / n` and `blockIdx.x % n` (directly or through a copy of blockIdx.x)."""
    x_at = {(u.start, u.end) for u in uses if u.axis == "x"}
    aliases: set[str] = set()
    assigned: set[str] = set()
    for node in walk(body):
        if node.type == "init_declarator":
            value = node.child_by_field_name("value")
            if value is not None and (_strip(value).start_byte, _strip(value).end_byte) in x_at:
                aliases.add(declared_name(node))
        elif node.type in ("assignment_expression", "update_expression"):
            target = node.child_by_field_name("left") or node.child_by_field_name("argument")
            assigned.add(text(target))
    aliases -= assigned
    divisors: dict[str, Node] = {}
    lines: list[int] = []
    for node in walk(body):
        if node.type == "binary_expression" and text(node.child_by_field_name("operator")) in ("/", "%"):
            left = _strip(node.child_by_field_name("left"))
            if (left.start_byte, left.end_byte) in x_at or (left.type == "identifier" and text(left) in aliases):
                right = node.child_by_field_name("right")
                divisors.setdefault(" ".join(text(right).split()), right)
                lines.append(_line(node))
    if len(divisors) > 1:
        return None, lines, f"blockIdx.x is divided by different values ({', '.join(divisors)}): no single tile decode"
    if not divisors:
        return None, [], None
    return next(iter(divisors.values())), lines, None


def _launches(src: SourceFile, scope: Scope, kernels: dict[str, Node]) -> list[tuple[str, Node, Launch, list[Node], list[Node]]]:
    """(kernel, enclosing function, Launch, template args, kernel args) for every launch in the file."""
    found = []
    for captures in queries.matches(src.dialect, "launches", src.tree.root_node):
        (launch,) = captures["launch"]
        args = [c for c in captures["args"][0].named_children if c.type != "comment"]
        if "config" in captures:
            callee = captures["kernel"][0]
            config = [c for c in captures["config"][0].named_children if c.type != "comment"]
            api, grid, block, kargs = "<<<>>>", config[0] if config else None, config[1] if len(config) > 1 else None, args
        else:
            api = text(captures["api"][0]).split("::")[-1]
            if not args:
                continue
            callee = args[0]
            grid = args[1] if len(args) > 1 else None
            block = args[2] if len(args) > 2 else None
            kargs = args[5:] if api == "hipLaunchKernelGGL" else []
        callee, targs = _kernel_ref(callee)
        name = text(callee).split("::")[-1].strip()
        if name not in kernels:
            continue
        function = next((a for a in reversed(ancestors(src.tree.root_node, launch)) if a.type == "function_definition"), None)
        host = local_scope(function, launch.start_byte, scope) if function is not None else scope
        ev = _Evaluator(host)
        record = Launch(name, _line(launch), api, _source_text(src, grid), _source_text(src, block),
                        _valid(_size(src, ev, grid)), _valid(_size(src, ev, block)))
        found.append((name, launch, record, targs, kargs, host))
    return found


def _source_text(src: SourceFile, node: Node | None) -> str:
    """A node's text as the file spells it (the parser may have been given other bytes of the same length)."""
    return "" if node is None else src.data[node.start_byte:node.end_byte].decode("utf-8", "surrogateescape")


def _size(src: SourceFile, ev: Evaluator, node: Node | None) -> Dim3 | None:
    """A launch's grid or block size.  One the file writes in braces (`{16, 16, 1}`) was given to the parser
    in parentheses, where it reads as a comma expression: its parts are the sizes."""
    if node is not None and node.type == "parenthesized_expression" and src.data[node.start_byte:node.start_byte + 1] == b"{":
        inner = [c for c in node.named_children if c.type != "comment"]
        parts: list[Node] = []
        while len(inner) == 1 and inner[0].type == "comma_expression":
            comma = inner[0]
            parts.append(comma.child_by_field_name("left"))
            inner = [comma.child_by_field_name("right")]
        parts += inner
        return ev._components(parts, 0) if all(p is not None for p in parts) else None
    return ev.dim3(node)


def _valid(dims: Dim3 | None) -> Dim3 | None:
    """A launch size within CUDA's limits (x < 2^31, y and z < 2^16), or None: a bad launch fixes no grid."""
    if dims is None or not (1 <= dims[0] < 1 << 31 and 1 <= dims[1] < 1 << 16 and 1 <= dims[2] < 1 << 16):
        return None
    return dims


def _kernel_ref(node: Node) -> tuple[Node, list[Node]]:
    """The kernel named by a launch's first argument, through HIP_KERNEL_NAME(), casts, & and templates."""
    while True:
        node = _strip(node)
        if node.type == "pointer_expression":
            node = node.child_by_field_name("argument")
        elif node.type == "call_expression" and node.child_by_field_name("arguments") is not None and (
            _callee(node) in ("HIP_KERNEL_NAME", "reinterpret_cast", "static_cast", "const_cast")
        ):
            args = [c for c in node.child_by_field_name("arguments").named_children if c.type != "comment"]
            if len(args) != 1:
                return node, []
            node = args[0]
        elif node.type == "template_function":
            targs = node.child_by_field_name("arguments")
            return node.child_by_field_name("name"), [c for c in targs.named_children if c.type != "comment"] if targs else []
        else:
            return node, []


def kernel_function(ctx: FileContext, kernel: KernelInfo) -> Node | None:
    """The definition a KernelInfo was made from (the file's functions are indexed once, in its context)."""
    return ctx.definitions().get((kernel.name, kernel.line))


def parameters(function: Node) -> tuple[list[str], list[str]]:
    """(value parameter names, template parameter names) of a function definition."""
    params = [p.name for p in parameter_list(function)]
    tparams = []
    if function.parent is not None and function.parent.type == "template_declaration":
        tlist = function.parent.child_by_field_name("parameters")
        for p in tlist.named_children if tlist else []:
            tparams.append(declared_name(p.child_by_field_name("declarator")) if p.child_by_field_name("declarator") else text(p).split()[-1])
    return params, tparams


def analyze(ctx: FileContext, user: Mapping[str, Value | str] | None = None,
            facts: Mapping[str, tuple[LaunchFact, ...]] | None = None, off: frozenset[str] = frozenset()) -> FileAnalysis:
    """The file's kernels as frozen records.  `ctx` holds the file and the build's include folders and
    defines, `user` the --set bindings, `facts` launches known from outside the file (--grid/--block, or
    observed).  `off` switches hazard rules off by name (swzc.analysis.records.HAZARDS): their detectors' findings
    are dropped, which only the registry's tests do, to show each rule's fixture is caught by that rule."""
    from swzc.analysis import tileloop

    src = ctx.src
    pre, scope = ctx.prepared(user)
    side_effect = side_effect_in(src.tree.root_node, scope.macros)
    block_macros = _block_macros(pre.bodies)
    volatile = _volatile_names(src.tree.root_node)
    kernels: dict[str, Node] = {}
    kernel_list: list[tuple[Node, Node]] = []
    device: dict[str, list[tuple[Node, Node]]] = {}
    for function, item in functions(src.tree.root_node):
        if function.child_by_field_name("body") is None or not pre.active(function):
            continue  # a declaration, or in a branch the compiler never takes
        name = function_name(function)
        if _has_token(function, "__global__"):
            kernels.setdefault(name, function)
            kernel_list.append((function, item))
        else:  # called from a kernel, any function is device code, whatever macro spells its qualifiers
            device.setdefault(name, []).append((function, item))

    # helpers: what each device function reads and calls
    helper_uses: dict[str, list[BlockUse]] = {}
    helper_at: dict[str, int] = {}
    calls: dict[str, set[str]] = {}
    for name, defs in device.items():
        for function, item in defs:
            uses, _ = _uses_in(src, function.child_by_field_name("body"), name)
            helper_uses.setdefault(name, []).extend(uses)
            helper_at[name] = min(helper_at.get(name, len(src.data)), _library_at(src, item))
            calls.setdefault(name, set()).update(_calls(function, device))

    in_headers, header_defined = _header_readers(pre, block_macros)
    # each device function that reads the block index, itself or through one it calls: name -> the first reader
    first = _first_readers(calls, {h for h in device if helper_uses.get(h)})
    reads_via = {h: first[h] for h in device if h in first}
    in_members = _member_readers(src, pre, block_macros, {f.start_byte for f, _ in functions(src.tree.root_node)}, set(reads_via))
    escaping = _taken_as_value(src.tree.root_node, reads_via.keys() | in_members.keys())
    variables = _variable_names(src.tree.root_node) if escaping else set()
    # device functions declared (in the file or its headers) and defined in neither: another file's, under -rdc
    defined = header_defined | {function_name(f) for f in _definitions_in(src.tree.root_node)}
    elsewhere = {name: line for name, line in _device_declarations(src, pre).items() if name not in defined}

    launches = [found for found in _launches(src, scope, kernels) if pre.active(found[1])]
    launches_of: dict[str, list] = {}
    for found in launches:
        launches_of.setdefault(found[0], []).append(found)
    records: list[KernelInfo] = []
    callers: dict[str, list[str]] = {}
    broken = _Broken(src)
    for function, item in kernel_list:
        name = function_name(function)
        body = function.child_by_field_name("body")
        uses, grid_reads = _uses_in(src, body, name)
        reached = _reach(_calls(function, device), calls)
        helpers = tuple(sorted(h for h in reached if helper_uses.get(h)))
        for h in helpers:
            callers.setdefault(h, []).append(name)
        hazards = _hazards(src, "", body, block_macros, volatile | _volatile_names(function, True))
        for h in sorted(reached):
            for hfunc, _ in device[h]:
                hazards += _hazards(src, h, hfunc.child_by_field_name("body"), block_macros, volatile | _volatile_names(hfunc, True))
        reach = (function, *(f for h in reached for f, _ in device[h]))  # the kernel and every helper it reaches
        spans = [(f.start_byte, f.end_byte) for f in reach] + \
            [(node.start_byte, node.end_byte) for _, node, *_ in launches_of.get(name, ())]
        called = {c for f in reach for c in _callees(f)}
        unseen = called - device.keys()
        hazards += _syntax_hazards(src, spans, unseen, broken) + _set_aside_hazards(src, spans, broken)
        for callee in sorted(unseen & (in_headers.keys() | elsewhere.keys())):
            line = _first_call(reach, callee)
            if callee in in_headers:
                why = (f"calls {callee} (line {line}), which {in_headers[callee]} defines and which reads the block index: "
                       "swzc rewrites only this file, so it would go on reading the block the hardware ran")
            else:
                why = (f"calls {callee} (line {line}), a device function declared at {elsewhere[callee]} and defined in no "
                       "file swzc reads (another file's, under -rdc): it may read the block index")
            hazards.append(Hazard(line, why, "header-helper"))
        # calls through a name, `f(x)` (not a member's `node.f(x)`), of one that is a variable here
        through = {c for f in reach for c in _called_names(f)} - device.keys()
        through_pointer = sorted(through & variables) if escaping else []
        if through_pointer:  # a call through a variable, where a helper that reads the block index has its address taken
            callee = through_pointer[0]
            line = _first_call(reach, callee)
            hazards.append(Hazard(line, f"calls through {callee} (line {line}), and {escaping[0]}, which reads the block "
                                  f"index, is taken as a value (line {escaping[1]}): it may be what {callee} calls, and it "
                                  "would go on reading the block the hardware ran", "header-helper"))
        functor = next((where for where in (in_members.get("operator()"), in_headers.get("operator()")) if where), None)
        if functor is not None:  # an object called as a function, where some operator() reads the block index
            objects = {v for f in reach for v in _variable_names(f)}
            for callee in sorted(through & objects):
                line = _first_call(reach, callee)
                hazards.append(Hazard(line, f"calls the object {callee} (line {line}), and an operator() ({functor}) reads "
                                      "the block index: swzc does not rewrite it, so it would go on reading the block the "
                                      "hardware ran", "header-helper"))
        for callee in sorted(called & in_members.keys()):  # a file-scope function of the same name is no alibi
            line = _first_call(reach, callee)
            hazards.append(Hazard(line, f"calls {callee} (line {line}), a member function ({in_members[callee]}) that reads "
                                  "the block index: swzc does not rewrite member functions, so it would go on reading "
                                  "the block the hardware ran", "header-helper"))
        for h in sorted(reached):  # the rewrite changes what h computes: no other file may call it
            via = reads_via.get(h)
            for hfunc, _ in device[h] if via is not None else ():
                if external_linkage(hfunc):
                    what = "reads the block index" if via == h else f"calls {via}, which reads the block index,"
                    hazards.append(Hazard(_line(hfunc), f"helper {h} (line {_line(hfunc)}) {what} and has external "
                                          "linkage: under -rdc another file could call it from a kernel swzc does not "
                                          "rewrite; declare it static to let swzc rewrite it", "external-helper"))
        before = function.prev_sibling  # the header from there: an attribute blanked for the parser may precede the function
        header = src.data[before.end_byte if before is not None else 0 : body.start_byte]
        if b"__cluster_dims__" in header:
            hazards.append(Hazard(_line(function), "thread-block clusters (__cluster_dims__): cluster mates are consecutive blocks", "cluster"))
        notes: list[str] = []
        all_uses = uses + [u for h in helpers for u in helper_uses[h]]
        dims = max((" xyz".index(u.axis) if u.axis else 3 for u in all_uses), default=0)  # the whole blockIdx: all axes
        insert_at, indent, inline = _insertion(src, body, uses)
        divisor, decode_lines, note = _decode(src, body, uses)
        if note:
            notes.append(note)
        decode = None
        if divisor is not None:
            divisor_text = " ".join(text(divisor).split())
            splice, effect = (splice_text(divisor, function, insert_at, side_effect, f"the tile decode divisor {divisor_text!r}")
                              if insert_at is not None else (None, None))
            hazards += [effect] if effect is not None else []
            decode = Decode(divisor_text, splice, tuple(decode_lines))
        tiles = tileloop.find(function, uses, grid_reads, scope, side_effect)
        hazards += tiles.hazards
        notes += tiles.notes
        params, tparams = parameters(function)
        mine = []
        for kname, site, record, targs, kargs, host in launches_of.get(name, ()):
            if "Cooperative" in record.api:
                hazards.append(Hazard(record.line, f"launched cooperatively ({record.api}, line {record.line}): may sync the whole grid",
                                      "cooperative-launch"))
            ev = _Evaluator(host)
            bound: dict[str, Value] = {}
            types: dict[str, str] = {}
            for pname, arg in [*zip(tparams, targs), *zip(params, kargs)]:
                # a template argument naming a constant parses as a type: read it as an expression
                value = ev.value(expression_of(text(arg)) if arg.type == "type_descriptor" else arg)
                if value is not None:
                    bound[pname] = value
                elif arg.type == "type_descriptor":
                    types[pname] = " ".join(text(arg).split())
            types.update(_deduced_types(function, tparams, types, kargs, site, scope, src.tree.root_node))
            record = replace(record, bindings=tuple(sorted(bound.items())), type_args=tuple(sorted(types.items())))
            if divisor is not None:
                kscope = local_scope(function, divisor.start_byte, scope.child(bound))
                value = _Evaluator(kscope).value(divisor)
                record = replace(record, divisor=int(value) if value is not None else None)
            if tiles.loop is not None:
                count, columns = tileloop.launch_values(tiles.loop, function, scope.child(bound))
                record = replace(record, tiles=count, divisor=columns)
            mine.append(record)
        if facts and facts.get(name):
            mine = _with_facts(src, function, mine, facts[name], scope, divisor, tiles.loop)
        spelling = "hip" if uses and all(u.spelling == "hip" for u in uses) else "cuda"
        swizzled_by = tiles.swizzled_by or _swizzled_by(body) or next((_swizzled_by(f.child_by_field_name("body")) for h in sorted(reached) for f, _ in device[h] if _swizzled_by(f.child_by_field_name("body"))), "")
        records.append(
            KernelInfo(name, _line(function), tuple(uses), helpers, tuple(mine), dims, decode, tuple(_dedupe(hazards, off)),
                       tuple(notes), insert_at, indent, inline, _library_at(src, item), spelling, swizzled_by, tiles.loop)
        )
    global_macros = {name for name, bodies in pre.bodies.items() if any(re.search(r"\b__global__\b", b) for b in bodies)}
    records += [replace(r, hazards=tuple(_dedupe(list(r.hazards), off)))
                for r in _kernels_in_errors(src, {r.name for r in records}, global_macros, pre.inactive)]
    helper_records = {
        name: Helper(name, _line(device[name][0][0]), tuple(helper_uses[name]), helper_at[name])
        for name in device if helper_uses.get(name)
    }
    identifiers = frozenset(text(n) for n in walk(src.tree.root_node) if n.type in ("identifier", "type_identifier", "field_identifier"))
    newline = "\r\n" if src.data.count(b"\r\n") * 2 > src.data.count(b"\n") else "\n"
    notes = pre.notes + (("evaluation stopped at its work limit; what it had not reached is unknown",)
                         if scope.budget.exhausted and not pre.notes else ())
    if src.blanked:
        lines = sorted({src.line_col(a)[0] for a, _ in src.blanked})
        notes += (f"parsed as the build reads it: {len(src.blanked)} #if directive(s), branch(es) not taken, statement "
                  f"macro(s) or macro(s) that expand to qualifiers set aside (lines {', '.join(map(str, lines[:8]))}{', …' if len(lines) > 8 else ''}); -D changes "
                  "which #if branches are taken",)
    return FileAnalysis(src.path, src.dialect, tuple(records), helper_records,
                        {k: tuple(v) for k, v in callers.items()}, identifiers, newline, notes)


def _with_facts(src: SourceFile, function: Node, launches: list[Launch], facts: tuple[LaunchFact, ...], scope: Scope,
                divisor: Node | None, loop: TileLoop | None = None) -> list[Launch]:
    """The kernel's launches with what the user or a run says of them.  A --grid or --block that disagrees
    with a launch the file fixes is an input error naming both; a size the file leaves open is filled.
    Observed launches are what ran: they replace the file's (the most frequent first)."""
    name = function_name(function)
    given = [f for f in facts if f.origin != "observed"]
    observed = sorted((f for f in facts if f.origin == "observed"), key=lambda f: -f.count)
    out = []
    for launch in launches if not observed else []:
        for fact in given:
            for what, have, want in (("grid", launch.grid, fact.grid), ("block", launch.block, fact.block)):
                if have is not None and want is not None and have != want:
                    raise SwzcError(f"--{what} {name}={','.join(map(str, want))} contradicts the launch at {src.path}:{launch.line}, "
                                    f"whose {what} is {','.join(map(str, have))}")
            launch = replace(launch, grid=launch.grid or fact.grid, block=launch.block or fact.block,
                             bindings=tuple(sorted({**dict(fact.args), **dict(launch.bindings)}.items())))
        out.append(launch)
    if not out:
        for fact in observed or given:
            shown = lambda d: f"dim3({', '.join(map(str, d))})" if d else ""  # noqa: E731
            out.append(Launch(name, 0, fact.origin, shown(fact.grid), shown(fact.block), fact.grid, fact.block,
                              bindings=tuple(sorted(fact.args))))
    from swzc.analysis import tileloop

    for i, launch in enumerate(out):
        if loop is not None and launch.tiles is None:
            count, columns = tileloop.launch_values(loop, function, scope.child(dict(launch.bindings)))
            out[i] = replace(launch, tiles=count, divisor=columns)
        elif divisor is not None and launch.divisor is None:
            value = _Evaluator(local_scope(function, divisor.start_byte, scope.child(dict(launch.bindings)))).value(divisor)
            out[i] = replace(launch, divisor=int(value) if value is not None else None)
    return out


def _deduced_types(function: Node, tparams: list[str], fixed: Mapping[str, str], kargs: list[Node], site: Node,
                   scope: Scope, root: Node) -> dict[str, str]:
    """Type template parameters the launch leaves out, deduced as the compiler does from the declared types
    of its arguments (`float* d_A` passed for `const T* A` gives T = float)."""
    from swzc.analysis import templates

    found: dict[str, str] = {}
    for param, arg in zip(parameter_list(function), kargs):
        name = templates.base_type(param.type)
        if name not in tparams or name in fixed or name in found:
            continue
        declared = templates.argument_type(arg, site, root)
        if declared is not None and declared[1] == (1 if param.pointer else 0):
            found[name] = scope.resolve_type(templates.base_type(declared[0]))
    return found


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


def _header_readers(pre: Preprocessed, block_macros: set[str]) -> tuple[dict[str, str], set[str]]:
    """The functions the headers swzc read define (outside branches the compiler never takes) that read the
    block index: directly, through a macro that does, or through another function those headers define that
    does.  Name -> where ("h.cuh:12"; through another: "h.cuh:12, through g,"); and every name they define,
    in any branch."""
    found: dict[str, list[tuple[str, set[str]]]] = {}  # name -> (where, what it calls) of each definition
    readers: dict[str, str] = {}
    names: set[str] = set()
    for header in pre.headers:
        short = os.path.basename(header.path)
        skipped = Spans(header.inactive)
        for function in _definitions_in(header.src.tree.root_node):
            name = function_name(function)
            names.add(name)
            body = function.child_by_field_name("body")
            if body is None or skipped.holds(function.start_byte, function.end_byte):
                continue
            where = f"{short}:{_line(function)}"
            body_text = text(body)
            if _BLOCK_INDEX_TEXT.search(body_text) or not block_macros.isdisjoint(_WORDS.findall(body_text)):
                readers.setdefault(name, where)
            found.setdefault(name, []).append((where, _callees(function)))
    return _through_calls(found, readers), names


def _through_calls(found: dict[str, list[tuple[str, set[str]]]], readers: dict[str, str]) -> dict[str, str]:
    """`readers` and every function of `found` (name -> (where, what it calls) of each definition) that calls
    one, as name -> where ("h.cuh:12, through g,")."""
    callers: dict[str, list[tuple[str, str]]] = {}  # callee -> (caller, where the caller is)
    for name, definitions in found.items():
        for where, callees in definitions:
            for callee in callees:
                callers.setdefault(callee, []).append((name, where))
    todo = list(readers)
    while todo:
        callee = todo.pop()
        for name, where in callers.get(callee, ()):
            if name not in readers:
                readers[name] = f"{where}, through {callee},"
                todo.append(name)
    return readers


def _taken_as_value(root: Node, names: set[str]) -> tuple[str, int] | None:
    """The first of `names` (functions that read the block index) the file uses as a value, not called and not
    defined there (`Fn fp = pick;`, `&pick`): (name, line), or None."""
    if not names:
        return None
    for node in walk(root):
        if node.type not in ("identifier", "qualified_identifier") or text(node) not in names:
            continue
        parent = node.parent
        if parent is not None and (parent.type == "call_expression" and parent.child_by_field_name("function") == node
                                   or parent.type in ("function_declarator", "qualified_identifier", "template_function")):
            continue
        return text(node), _line(node)
    return None


def _first_call(functions: tuple[Node, ...], callee: str) -> int:
    """The first line, in any of `functions`, that calls `callee`."""
    return min(_line(n) for f in functions for n in walk(f.child_by_field_name("body"))
               if n.type == "call_expression" and _callee(n) == callee)


def _called_names(function: Node) -> set[str]:
    """The plain names a function's body calls (`f(x)`), not members (`obj.f(x)`) or qualified names."""
    return {text(f) for n in walk(function.child_by_field_name("body")) if n.type == "call_expression"
            for f in [n.child_by_field_name("function")] if f is not None and f.type == "identifier"}


def _variable_names(function: Node) -> set[str]:
    """The names a function declares: its parameters and its locals."""
    names = set()
    for node in walk(function):
        if node.type in ("parameter_declaration", "optional_parameter_declaration", "declaration"):
            names.update(declared_name(d) for d in node.children_by_field_name("declarator"))
    return names - {""}


def _member_readers(src: SourceFile, pre: Preprocessed, block_macros: set[str], top: set[int],
                    reading_helpers: set[str]) -> dict[str, str]:
    """The file's functions that are not at file scope or in a namespace (member functions, defined in a class
    or struct body; `top` holds where the others start), that read the block index: directly, through a
    macro, or by calling a helper that does (`reading_helpers`) or another such member.  Name -> "line 12"."""
    found: dict[str, list[tuple[str, set[str]]]] = {}
    readers: dict[str, str] = {}
    for function in _definitions_in(src.tree.root_node):
        body = function.child_by_field_name("body")
        if function.start_byte in top or body is None or not pre.active(function):
            continue
        name, where, body_text, callees = function_name(function), f"line {_line(function)}", text(body), _callees(function)
        if _BLOCK_INDEX_TEXT.search(body_text) or not block_macros.isdisjoint(_WORDS.findall(body_text)) \
                or not reading_helpers.isdisjoint(callees):
            readers.setdefault(name, where)
        found.setdefault(name, []).append((where, callees))
    return _through_calls(found, readers)


def _device_declarations(src: SourceFile, pre: Preprocessed) -> dict[str, str]:
    """Functions declared `__device__` without a body, in the file or the headers swzc read (outside branches
    the compiler never takes): name -> where ("line 3" in the file, "h.cuh:3" in a header)."""
    found: dict[str, str] = {}
    for tree_src, inactive, short in [(src, pre.inactive, ""),
                                      *((h.src, h.inactive, os.path.basename(h.path)) for h in pre.headers)]:
        skipped = Spans(inactive)
        todo = [tree_src.tree.root_node]
        while todo:
            node = todo.pop()
            for child in node.children:
                if child.type == "declaration":
                    declarator = child.child_by_field_name("declarator")
                    # one with an error in it may be the head of a definition that did not parse
                    if (declarator is not None and declarator.type == "function_declarator" and _has_token(child, "__device__")
                            and not child.has_error
                            and not skipped.holds(child.start_byte, child.end_byte)):
                        where = f"{short}:{_line(child)}" if short else f"line {_line(child)}"
                        found.setdefault(declared_name(declarator), where)
                elif child.child_count and child.type not in ("function_definition", "compound_statement"):
                    todo.append(child)
    return found


def _definitions_in(root: Node) -> Iterator[Node]:
    """Every function definition in a tree, in classes and namespaces too, but not inside another function."""
    todo = [root]
    while todo:
        node = todo.pop()
        for child in node.children:
            if child.type == "function_definition":
                yield child
            elif child.child_count and child.type not in ("compound_statement", "lambda_expression"):
                todo.append(child)


_WORDS = re.compile(r"[A-Za-z_]\w*")


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


def _callees(function: Node) -> set[str]:
    """The names a function's body calls."""
    return {c for c in (_callee(n) for n in walk(function.child_by_field_name("body")) if n.type == "call_expression") if c}


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


def _calls(function: Node, device: Mapping[str, object]) -> set[str]:
    return {c for c in _callees(function) if c in device}


def _reach(start: set[str], calls: Mapping[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += calls.get(name, ())
    return seen


def _first_readers(calls: Mapping[str, set[str]], readers: set[str]) -> dict[str, str]:
    """Each function that reaches one of `readers` through `calls` (itself included) -> the first of them it
    reaches, by name.  Each reader, in name order, claims the functions that reach it and that no reader
    before it claimed, walking the calls backwards: a chain of N functions costs N steps, not N per function."""
    callers: dict[str, set[str]] = {}
    for caller, callees in calls.items():
        for callee in callees:
            callers.setdefault(callee, set()).add(caller)
    first: dict[str, str] = {}
    for reader in sorted(readers):
        if reader in first:
            continue  # it reaches a reader before it in name order
        first[reader] = reader
        todo = [reader]
        while todo:
            for caller in callers.get(todo.pop(), ()):
                if caller not in first:  # one claimed already reaches an earlier reader, and so do its callers
                    first[caller] = reader
                    todo.append(caller)
    return first


def _dedupe(hazards: list[Hazard], off: frozenset[str] = frozenset()) -> list[Hazard]:
    return [h for h in dict.fromkeys(hazards) if h.rule not in off]


def _insertion(src: SourceFile, body: Node, uses: list[BlockUse]) -> tuple[int | None, str, bool]:
    """Before the body's top-level statement that holds the first block-index read."""
    if not uses:
        return None, "", False
    first = uses[0].start
    statement = next((s for s in body.named_children if s.start_byte <= first < s.end_byte), None)
    if statement is None:
        return None, "", False
    line_start = src.line_start(statement.start_byte)
    if _BLANK.fullmatch(src.data, line_start, statement.start_byte):  # (no copy of a long line's head to look at)
        prefix = src.data[line_start : statement.start_byte]
        at = line_start
        while at > 0:  # above the #pragma lines in front of it (`#pragma unroll` belongs to the loop after it)
            previous = src.data.rfind(b"\n", 0, at - 1) + 1
            use = _MACRO_LINE.fullmatch(src.data, previous, at)
            if not _PRAGMA_LINE.match(src.data, previous, at) and not (  # or a statement macro read past (a _Pragma)
                    use is not None and any(s <= use.start(1) < e for s, e in src.blanked)):
                break
            at = previous
        return at, prefix.decode("utf-8", "surrogateescape"), False
    return statement.start_byte, "", True


_BLANK = re.compile(rb"\s*")
_PRAGMA_LINE = re.compile(rb"[ \t]*(?:#[ \t]*pragma\b|_Pragma[ \t]*\()")
_MACRO_LINE = re.compile(rb"[ \t]*([A-Za-z_]\w*)[ \t]*(?:\([^\n]*\))?[ \t]*\r?\n")
