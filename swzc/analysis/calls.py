"""The calls of a file's functions: the device functions a kernel reaches, those that read the block index
(themselves, or through one they call), and the readers of the block index the rewrite cannot follow: a
function a header defines, a member function, a device function declared here and defined in another file,
one taken as a value (and maybe called through a pointer).  Calling one of those, or reaching a helper
the rewrite would change that other files could call, is a hazard (header-helper, external-helper).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

from tree_sitter import Node

from swzc.analysis.hazards import _BLOCK_INDEX_TEXT
from swzc.analysis.records import BlockUse, Hazard
from swzc.analysis.splice_safety import external_linkage
from swzc.frontend.preprocess import Preprocessed, Spans
from swzc.frontend.source import SourceFile
from swzc.frontend.syntax import _callee, _has_token, _line, declared_name, function_name, functions, text, walk


@dataclass(frozen=True)
class Readers:
    """The functions that read the block index, found once for the file.  Name -> where, unless said."""

    reads_via: dict[str, str]  # each device function that reads it, itself or through one it calls -> the first reader
    in_headers: dict[str, str]  # functions the headers swzc read define ("h.cuh:12")
    in_members: dict[str, str]  # member functions ("line 12")
    elsewhere: dict[str, str]  # device functions declared, in the file or its headers, and defined in neither
    escaping: tuple[str, int] | None  # the first reader the file takes as a value (name, line): maybe called through a pointer
    variables: set[str]  # the names the file declares, where one escapes (a call through one may reach it)


def find_readers(src: SourceFile, pre: Preprocessed, block_macros: set[str], device: dict[str, list[tuple[Node, Node]]],
                 helper_uses: dict[str, list[BlockUse]], calls: dict[str, set[str]]) -> Readers:
    """The readers of the block index in the file and its headers: `device` the file's device functions by
    name, `helper_uses` what each reads itself, `calls` which device functions each calls."""
    root = src.tree.root_node
    in_headers, header_defined = _header_readers(pre, block_macros)
    # each device function that reads the block index, itself or through one it calls: name -> the first reader
    first = _first_readers(calls, {h for h in device if helper_uses.get(h)})
    reads_via = {h: first[h] for h in device if h in first}
    in_members = _member_readers(src, pre, block_macros, {f.start_byte for f, _ in functions(root)}, set(reads_via))
    escaping = _taken_as_value(root, reads_via.keys() | in_members.keys())
    variables = _variable_names(root) if escaping else set()
    # device functions declared (in the file or its headers) and defined in neither: another file's, under -rdc
    defined = header_defined | {function_name(f) for f in _definitions_in(root)}
    elsewhere = {name: line for name, line in _device_declarations(src, pre).items() if name not in defined}
    return Readers(reads_via, in_headers, in_members, elsewhere, escaping, variables)


def unseen_reader_hazards(readers: Readers, reach: tuple[Node, ...], called: set[str], unseen: set[str],
                          device: Collection[str]) -> list[Hazard]:
    """The calls, in the kernel and the helpers it reaches (`reach`), that may reach a reader of the block index
    the rewrite does not change: a function a header defines or only declared here (of `unseen`, what they
    call that the file defines no device function for), a call through a pointer or of an object, a member
    function (of `called`, all they call)."""
    hazards = []
    in_headers, in_members, elsewhere, escaping = readers.in_headers, readers.in_members, readers.elsewhere, readers.escaping
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
    through = {c for f in reach for c in _called_names(f)} - device
    through_pointer = sorted(through & readers.variables) if escaping else []
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
    return hazards


def external_helper_hazards(readers: Readers, reached: set[str], device: dict[str, list[tuple[Node, Node]]]) -> list[Hazard]:
    """The helpers of `reached` the rewrite would change (they read the block index, or call one that does)
    that have external linkage."""
    hazards = []
    for h in sorted(reached):  # the rewrite changes what h computes: no other file may call it
        via = readers.reads_via.get(h)
        for hfunc, _ in device[h] if via is not None else ():
            if external_linkage(hfunc):
                what = "reads the block index" if via == h else f"calls {via}, which reads the block index,"
                hazards.append(Hazard(_line(hfunc), f"helper {h} (line {_line(hfunc)}) {what} and has external "
                                      "linkage: under -rdc another file could call it from a kernel swzc does not "
                                      "rewrite; declare it static to let swzc rewrite it", "external-helper"))
    return hazards


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


def _callees(function: Node) -> set[str]:
    """The names a function's body calls."""
    return {c for c in (_callee(n) for n in walk(function.child_by_field_name("body")) if n.type == "call_expression") if c}


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
