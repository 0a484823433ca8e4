"""Analysis before editing: a file's kernels as frozen records, with their block-index uses, the helpers they
reach, launches, tile decodes and hazards.

`analyze` is the orchestration: it finds the kernels, the device functions they call and what each reads of
the block index, and asks the rest of swzc.analysis for the helpers they reach (calls), their launches
(launches), tile loops (tileloop) and hazards (hazards).  Everything here reads the original tree and returns
frozen records holding byte offsets and text (no tree nodes), which the passes and the pipeline read.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tree_sitter import Node

from swzc.analysis import tileloop
from swzc.analysis.calls import Readers, _callees, _calls, _reach, external_helper_hazards, find_readers, unseen_reader_hazards
from swzc.analysis.hazards import (_BLOCK_INDEX_TEXT, _block_macros, _Broken, _hazards, _kernels_in_errors, _set_aside_hazards,
                                   _syntax_hazards, _volatile_names)
from swzc.analysis.launches import Site, foreign_launches, included_launches, integer_parameters, kernel_launches, launch_sites
from swzc.analysis.records import BlockUse, Decode, FileAnalysis, Hazard, Helper, KernelInfo, Launch, LaunchFact
from swzc.analysis.splice_safety import side_effect_in, splice_text
from swzc.analysis.templates import TemplateParameter, template_parameters
from swzc.core import clean
from swzc.frontend import queries
from swzc.frontend.evaluate import Scope, Value
from swzc.frontend.preprocess import Preprocessed, defines_of
from swzc.frontend.source import SourceFile
from swzc.frontend.syntax import (NAME_TYPES, _callee, _has_token, _line, _strip, declared_name, function_name, functions, text,
                                  walk)

if TYPE_CHECKING:
    from swzc.analysis.context import FileContext


def kernel_function(ctx: FileContext, kernel: KernelInfo) -> Node | None:
    """The definition a KernelInfo was made from (the file's functions are indexed once, in its context)."""
    return ctx.definitions().get((kernel.name, kernel.line))


def integer_arguments(ctx: FileContext, kernel: KernelInfo) -> tuple[str, ...]:
    """The kernel's parameters of an integer type, by name; () where its definition is not in the file."""
    function = kernel_function(ctx, kernel)
    return integer_parameters(function) if function is not None else ()


def open_template_parameters(ctx: FileContext, kernel: KernelInfo, user: Mapping[str, Value | str]) -> list[TemplateParameter]:
    """The kernel's template parameters that nothing here gives: no default, no --set (`user`) and no launch in the
    file that fixes them (a kernel launched nowhere has none); in their declared order."""
    function = kernel_function(ctx, kernel)
    fixed = {name for launch in kernel.launches for name, _ in (*launch.bindings, *launch.type_args)}
    return [p for p in (template_parameters(function) if function is not None else [])
            if p.default is None and p.name not in user and p.name not in fixed]


def relaunched(ctx: FileContext, kernel: KernelInfo, user: Mapping[str, Value | str]) -> KernelInfo | None:
    """The kernel's record with its launches evaluated again under `user` (a sweep's sizes: swzc.model.sweep):
    the file's launches of it and what their arguments give, the rest of the record as it was.  None where its
    definition is not in the file."""
    function = kernel_function(ctx, kernel)
    if function is None:
        return None
    pre, scope = ctx.prepared(user)
    sites = launch_sites(ctx.src, pre, scope, {kernel.name}, ctx.matches("launches")).get(kernel.name, ())
    body = function.child_by_field_name("body")
    divisor = _decode(ctx.src, body, list(kernel.uses))[0] if kernel.decode is not None and body is not None else None
    return replace(kernel, launches=tuple(kernel_launches(ctx.src, function, sites, scope, divisor, kernel.tile_loop,
                                                          None if sites else _included_at(kernel, user))))


def _included_at(kernel: KernelInfo, user: Mapping[str, Value | str]) -> tuple[LaunchFact, ...] | None:
    """A launch in a file including this one, whose grid is set at run time there, at the size `user` binds its
    sizes to (`Launch.by_size`): its grid and what it gives the kernel's parameters there; None at another size."""
    launch = next((la for la in kernel.launches if la.by_size), None)
    size = user.get(launch.sizes[0]) if launch is not None and launch.sizes else None
    for at, grid, args in launch.by_size if launch is not None else ():
        if at == size:
            return (LaunchFact(kernel.name, grid, launch.block, args, "included", types=launch.type_args, where=launch.where),)
    return None


def analyze(ctx: FileContext, user: Mapping[str, Value | str] | None = None,
            facts: Mapping[str, tuple[LaunchFact, ...]] | None = None, off: frozenset[str] = frozenset()) -> FileAnalysis:
    """The file's kernels as frozen records.  `ctx` holds the file and the build's include folders and
    defines, `user` the --set bindings, `facts` launches known from outside the file (--grid/--block, or
    observed).  `off` switches hazard rules off by name (swzc.analysis.records.HAZARDS): their detectors' findings
    are dropped, which only the registry's tests do, to show each rule's fixture is caught by that rule."""
    src = ctx.src
    root = src.tree.root_node
    pre, scope = ctx.prepared(user)
    side_effect = side_effect_in(root, scope.macros)
    block_macros = _block_macros(pre.bodies)
    volatile = _volatile_names(root)
    kernels, device = _functions_of(src, pre)
    helper_uses, helper_at, calls = _helper_reads(src, device)
    readers = find_readers(src, pre, block_macros, device, helper_uses, calls)
    sites = launch_sites(src, pre, scope, {function_name(function) for function, _ in kernels}, ctx.matches("launches"))
    file = _File(src, scope, side_effect, block_macros, volatile, device, helper_uses, calls, readers, _Broken(src), off)
    records: list[KernelInfo] = []
    callers: dict[str, list[str]] = {}
    for function, item in kernels:
        name = function_name(function)
        reached = _reach(_calls(function, device), calls)
        helpers = tuple(sorted(h for h in reached if helper_uses.get(h)))
        for h in helpers:
            callers.setdefault(h, []).append(name)
        records.append(_kernel(file, function, item, reached, helpers, sites.get(name, ()), facts.get(name) if facts else None))
    global_macros = {name for name, bodies in pre.bodies.items() if any(re.search(r"\b__global__\b", b) for b in bodies)}
    records += [replace(r, hazards=tuple(_dedupe(list(r.hazards), off)))
                for r in _kernels_in_errors(src, {r.name for r in records}, global_macros, pre.inactive)]
    helper_records = {
        name: Helper(name, _line(device[name][0][0]), tuple(helper_uses[name]), helper_at[name])
        for name in device if helper_uses.get(name)
    }
    identifiers = frozenset(text(n) for n in walk(root) if n.type in NAME_TYPES)
    newline = "\r\n" if src.data.count(b"\r\n") * 2 > src.data.count(b"\n") else "\n"
    notes = _notes(src, pre, scope) + _launched_from_here(ctx, pre, scope, {function_name(f) for f, _ in kernels})
    return FileAnalysis(src.path, src.dialect, tuple(records), helper_records,
                        {k: tuple(v) for k, v in callers.items()}, identifiers, newline, notes,
                        frozenset(pre.bodies) | frozenset(pre.macros))


def header_kernels(src: SourceFile, pre: Preprocessed) -> dict[str, str]:
    """The kernels the headers `src` includes define, each with its header's path as `src`'s path names it."""
    return {name: shown for name, (_, _, shown) in _header_definitions(src, pre)[0].items()}


def _header_definitions(src: SourceFile, pre: Preprocessed) -> tuple[dict[str, tuple[Node, str, str]], set[str]]:
    """The kernels the headers `src` includes define: name -> (definition, the header's real path, its path as
    `src`'s path names it), the first of a name; and the names two definitions share."""
    found: dict[str, tuple[Node, str, str]] = {}
    twice: set[str] = set()  # defined in two places (two namespaces, say): which one a launch means is not read here
    here = os.path.dirname(os.path.abspath(src.path))
    for header in pre.headers:
        for function, _ in functions(header.src.tree.root_node):
            if function.child_by_field_name("body") is not None and _has_token(function, "__global__"):
                shown = os.path.join(os.path.dirname(src.path), os.path.relpath(header.path, here))
                name, real = function_name(function), os.path.realpath(header.path)
                if name in found and (found[name][1], found[name][0].start_byte) != (real, function.start_byte):
                    twice.add(name)
                found.setdefault(name, (function, real, shown))
    return found, twice


def launches_of_header_kernels(ctx: FileContext, user: Mapping[str, Value | str] | None = None
                               ) -> list[tuple[str, Launch, LaunchFact | None]]:
    """The launches in this file of kernels its headers define, in the file's order, each with its header's real
    path and, where this file fixes its grid and block, the fact the header's analysis takes (`included_launches`)."""
    pre, scope = ctx.prepared(user)
    own = {function_name(f) for f, _ in _functions_of(ctx.src, pre)[0]}  # its kernels: a host function may share a name
    return _header_launches(ctx, pre, scope, own, _header_definitions(ctx.src, pre))


def _header_launches(ctx: FileContext, pre: Preprocessed, scope: Scope, own: set[str],
                     definitions: tuple[dict[str, tuple[Node, str, str]], set[str]]) -> list[tuple[str, Launch, LaunchFact | None]]:
    """`launches_of_header_kernels`, given the file's own kernels and its headers' (`_header_definitions`)."""
    found, twice = definitions  # of a name defined twice, which one a launch means is not read
    defined = {name: d for name, d in found.items() if name not in own and name not in twice}
    if not defined:
        return []
    launched = included_launches(ctx.src, pre, scope, ctx.matches("launches"), {name: d[0] for name, d in defined.items()})
    return [(defined[launch.kernel][1], launch, fact) for launch, fact in launched]


_HEADER_LAUNCH = re.compile(r"^line \d+ launches kernel \w+ of ('(?:[^']|'\"'\"')*'|[^'\s$]\S*) \(")


def launched_header(note: str) -> str | None:
    """The header a note of `_launched_from_here` names (as a shell reads the word it is written as), or None."""
    found = _HEADER_LAUNCH.match(note)
    return shlex.split(found.group(1))[0] if found else None


def own_launched_kernels(ctx: FileContext) -> set[str]:
    """The kernels this file defines and launches itself."""
    pre, scope = ctx.prepared()
    defined = {function_name(f) for f, _ in functions(ctx.src.tree.root_node) if _has_token(f, "__global__")}
    return set(launch_sites(ctx.src, pre, scope, defined, ctx.matches("launches")))


def _launched_from_here(ctx: FileContext, pre: Preprocessed, scope: Scope, defined: set[str]) -> tuple[str, ...]:
    """Launches here of kernels a header defines (a runner including its kernels' headers): swzc reads a kernel
    in the file that defines it, so each is said with the file to name and what this launch gives it: the
    command that reads the header with it, where this file fixes the launch."""
    definitions = _header_definitions(ctx.src, pre)  # walked once, for the notes and the launches
    in_headers = {name: shown for name, (_, _, shown) in definitions[0].items()}
    launched = {(launch.kernel, launch.line): (launch, fact)
                for _, launch, fact in _header_launches(ctx, pre, scope, defined, definitions)}
    said: dict[str, str] = {}  # one note a kernel: its first launch here
    for node, name, written in foreign_launches(ctx.matches("launches"), defined):
        if name not in in_headers or not pre.active(node) or name in said:
            continue
        head = f"line {_line(node)} launches kernel {name} of {clean.shell_path(in_headers[name])} ({written})"
        launch, fact = launched.get((name, _line(node)), (None, None))
        if fact is not None:
            macros = defines_of(pre.outside(definitions[0][name][1]), ctx.build.defines)  # not what it is read with anyway
            said[name] = (f"{head}: swzc reads a kernel in the file that defines it; with this launch: "
                          f"{_header_command(in_headers[name], fact, macros)} (or name both files in one suggest or review)")
        else:
            open_ = f"; its grid is set at run time by {', '.join(launch.sizes)}" if launch is not None and launch.sizes else ""
            both = " ".join(["swzc", "suggest", clean.shell_path(ctx.src.path), clean.shell_path(in_headers[name])])
            said[name] = (f"{head}{open_}: swzc reads a kernel in the file that defines it; name both files in one run "
                          f"({both}), which reads it with this launch, or name the header with --grid, --block and --set "
                          "for what this launch gives it")
    return tuple(said.values())


def _header_command(header: str, fact: LaunchFact, macros: Sequence[tuple[str, str]] = ()) -> str:
    """`swzc suggest HEADER --grid K=X,Y --block K=X --set P=V … -D M=V …`: the header read with one launch of its
    kernel, and the macros this file includes it with (`macros`, as NAME, body)."""
    dims = lambda d: ",".join(map(str, d[:max(i + 1 for i, v in enumerate(d) if v != 1 or i == 0)]))  # noqa: E731
    words = ["swzc", "suggest", clean.shell_path(header), "--grid", f"{fact.kernel}={dims(fact.grid)}",
             "--block", f"{fact.kernel}={dims(fact.block)}"]
    for name, value in (*fact.args, *fact.types):
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            words += ["--set", clean.shell_word(f"{name}={value}")]
    words += [w for name, body in macros for w in ("-D", clean.shell_word(f"{name}={body}"))]
    return " ".join(words)


# ---- one kernel ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _File:
    """What `analyze` finds once for the whole file, which each kernel's record reads."""

    src: SourceFile
    scope: Scope
    side_effect: Callable[[Node], str | None]  # what of an expression the splice may not copy (splice_safety)
    block_macros: set[str]  # macros whose expansion reads the block index
    volatile: set[str]  # names declared volatile outside any function
    device: dict[str, list[tuple[Node, Node]]]  # function name -> (definition, top-level item) of each
    helper_uses: dict[str, list[BlockUse]]  # device function -> its own reads of the block index
    calls: dict[str, set[str]]  # device function -> the device functions it calls
    readers: Readers
    broken: _Broken  # what of the file did not parse
    off: frozenset[str]  # hazard rules switched off


def _functions_of(src: SourceFile, pre: Preprocessed) -> tuple[list[tuple[Node, Node]], dict[str, list[tuple[Node, Node]]]]:
    """The file's kernels in order, and its other functions by name, as (definition, top-level item): each
    with a body, outside branches the compiler never takes."""
    kernels: list[tuple[Node, Node]] = []
    device: dict[str, list[tuple[Node, Node]]] = {}
    for function, item in functions(src.tree.root_node):
        if function.child_by_field_name("body") is None or not pre.active(function):
            continue  # a declaration, or in a branch the compiler never takes
        if _has_token(function, "__global__"):
            kernels.append((function, item))
        else:  # called from a kernel, any function is device code, whatever macro spells its qualifiers
            device.setdefault(function_name(function), []).append((function, item))
    return kernels, device


def _helper_reads(src: SourceFile, device: dict[str, list[tuple[Node, Node]]]
                  ) -> tuple[dict[str, list[BlockUse]], dict[str, int], dict[str, set[str]]]:
    """What each device function reads of the block index, where its library code would go (before the first
    of its definitions), and which device functions it calls."""
    helper_uses: dict[str, list[BlockUse]] = {}
    helper_at: dict[str, int] = {}
    calls: dict[str, set[str]] = {}
    for name, defs in device.items():
        for function, item in defs:
            uses, _ = _uses_in(src, function.child_by_field_name("body"), name)
            helper_uses.setdefault(name, []).extend(uses)
            helper_at[name] = min(helper_at.get(name, len(src.data)), _library_at(src, item))
            calls.setdefault(name, set()).update(_calls(function, device))
    return helper_uses, helper_at, calls


def _kernel(file: _File, function: Node, item: Node, reached: set[str], helpers: tuple[str, ...], sites: Sequence[Site],
            facts: tuple[LaunchFact, ...] | None) -> KernelInfo:
    """One kernel's record: its uses, the helpers it reaches that read the block index (`helpers`, of the
    device functions it reaches, `reached`), its hazards, tile decode or tile loop, and its launches
    (`sites`, and `facts` from outside the file)."""
    src, scope = file.src, file.scope
    name = function_name(function)
    body = function.child_by_field_name("body")
    uses, grid_reads = _uses_in(src, body, name)
    hazards = _kernel_hazards(file, function, reached, sites)
    notes: list[str] = []
    all_uses = uses + [u for h in helpers for u in file.helper_uses[h]]
    dims = max((" xyz".index(u.axis) if u.axis else 3 for u in all_uses), default=0)  # the whole blockIdx: all axes
    insert_at, indent, inline = _insertion(src, body, uses)
    divisor, decode_lines, note = _decode(src, body, uses)
    if note:
        notes.append(note)
    decode = None
    if divisor is not None:
        divisor_text = " ".join(text(divisor).split())
        splice, effect = (splice_text(divisor, function, insert_at, file.side_effect, f"the tile decode divisor {divisor_text!r}")
                          if insert_at is not None else (None, None))
        hazards += [effect] if effect is not None else []
        decode = Decode(divisor_text, splice, tuple(decode_lines))
    tiles = tileloop.find(function, uses, grid_reads, scope, file.side_effect)
    hazards += tiles.hazards
    notes += tiles.notes
    for site in sites:
        if "Cooperative" in site.launch.api:
            hazards.append(Hazard(site.launch.line, f"launched cooperatively ({site.launch.api}, line {site.launch.line}): may "
                                  "sync the whole grid", "cooperative-launch"))
    for fact in facts or ():  # a launch in a file that includes this one: the same rule
        if "Cooperative" in fact.api:
            hazards.append(Hazard(_line(function), f"launched cooperatively ({fact.api}, {fact.where}): may sync the whole grid",
                                  "cooperative-launch"))
    launches = kernel_launches(src, function, sites, scope, divisor, tiles.loop, facts)
    spelling = "hip" if uses and all(u.spelling == "hip" for u in uses) else "cuda"
    swizzled_by = tiles.swizzled_by or _swizzled_by(body) or next(
        (_swizzled_by(f.child_by_field_name("body")) for h in sorted(reached) for f, _ in file.device[h]
         if _swizzled_by(f.child_by_field_name("body"))), "")
    return KernelInfo(name, _line(function), tuple(uses), helpers, tuple(launches), dims, decode, tuple(_dedupe(hazards, file.off)),
                      tuple(notes), insert_at, indent, inline, _library_at(src, item), spelling, swizzled_by, tiles.loop,
                      _ignore_mark(function, item))


IGNORE_MARK = re.compile(r"\bswzc:\s*ignore\b", re.IGNORECASE)  # `// swzc: ignore`, as ruff's `# noqa` marks a line


def _ignore_mark(function: Node, item: Node) -> int:
    """The line of a `swzc: ignore` comment in the comments just above the kernel (or its template) or on the
    lines of its signature up to the body's `{`; 0 where there is none."""
    above = []
    node = item.prev_sibling
    while node is not None and node.type == "comment":
        above.append(node)
        node = node.prev_sibling
    body = function.child_by_field_name("body")
    last = body.start_point.row if body is not None else function.start_point.row
    inside = [c for c in walk(item) if c.type == "comment" and c.start_point.row <= last]  # `{  // swzc: ignore` too
    marked = [c for c in (*above, *inside) if IGNORE_MARK.search(text(c))]
    return min((c.start_point.row + 1 for c in marked), default=0)


def _kernel_hazards(file: _File, function: Node, reached: set[str], sites: Sequence[Site]) -> list[Hazard]:
    """What the detectors find in the kernel and the device functions it reaches (`reached`), what it
    touches of the file that did not parse, the calls the rewrite cannot follow, the helpers it would
    change that other files could call, and clusters in the kernel's head."""
    src, device = file.src, file.device
    body = function.child_by_field_name("body")
    hazards = _hazards(src, "", body, file.block_macros, file.volatile | _volatile_names(function, True))
    for h in sorted(reached):
        for hfunc, _ in device[h]:
            hazards += _hazards(src, h, hfunc.child_by_field_name("body"), file.block_macros, file.volatile | _volatile_names(hfunc, True))
    reach = (function, *(f for h in reached for f, _ in device[h]))  # the kernel and every helper it reaches
    spans = [(f.start_byte, f.end_byte) for f in reach] + [(site.node.start_byte, site.node.end_byte) for site in sites]
    called = {c for f in reach for c in _callees(f)}
    unseen = called - device.keys()
    hazards += _syntax_hazards(src, spans, unseen, file.broken) + _set_aside_hazards(src, spans, file.broken)
    hazards += unseen_reader_hazards(file.readers, reach, called, unseen, device.keys())
    hazards += external_helper_hazards(file.readers, reached, device)
    before = function.prev_sibling  # the header from there: an attribute blanked for the parser may precede the function
    header = src.data[before.end_byte if before is not None else 0 : body.start_byte]
    if b"__cluster_dims__" in header:
        hazards.append(Hazard(_line(function), "thread-block clusters (__cluster_dims__): cluster mates are consecutive blocks", "cluster"))
    return hazards


def _notes(src: SourceFile, pre: Preprocessed, scope: Scope) -> tuple[str, ...]:
    """What the analysis could not follow in the file, and what it set aside to parse it."""
    notes = pre.notes + (("evaluation stopped at its work limit; what it had not reached is unknown",)
                         if scope.budget.exhausted and not pre.notes else ())
    if src.blanked:
        lines = sorted({src.line_col(a)[0] for a, _ in src.blanked})
        notes += (f"parsed as the build reads it: {len(src.blanked)} #if directive(s), branch(es) not taken, statement "
                  f"macro(s) or macro(s) that expand to qualifiers set aside (lines {', '.join(map(str, lines[:8]))}{', …' if len(lines) > 8 else ''}); -D changes "
                  "which #if branches are taken",)
    return notes


def _dedupe(hazards: list[Hazard], off: frozenset[str] = frozenset()) -> list[Hazard]:
    return [h for h in dict.fromkeys(hazards) if h.rule not in off]


# ---- block-index uses -------------------------------------------------------------------------------------


def _library_at(src: SourceFile, item: Node) -> int:
    """Where generated code goes in front of a top-level item: before its leading comments, at a line start."""
    start = item
    sibling = item.prev_sibling
    while sibling is not None and sibling.type == "comment" and start.start_point.row - sibling.end_point.row <= 1:
        start = sibling
        sibling = sibling.prev_sibling
    return src.line_start(start.start_byte)


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
