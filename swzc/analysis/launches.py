"""The launches of a file's kernels: each `<<<…>>>`, `hipLaunchKernelGGL`, `cudaLaunchKernel`, … of a kernel
the file defines, its grid and block evaluated where the file fixes them, the kernel's (template)
parameters each launch binds and the types it fixes or lets the compiler deduce, the tile decode divisor
and tile count they give, and what --grid/--block or an observed run says of them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
import re
from dataclasses import dataclass, replace

from tree_sitter import Node

from swzc.analysis import templates, tileloop
from swzc.analysis.records import Launch, LaunchFact, TileLoop
from swzc.core.errors import SwzcError
from swzc.frontend.evaluate import FIELD_PATH, Dim3, Evaluator, Scope, Value, expression_of, field_name
from swzc.frontend.preprocess import Preprocessed
from swzc.frontend.scope import _Evaluator, local_scope
from swzc.frontend.source import SourceFile
from swzc.frontend.syntax import (_callee, _has_token, _line, _strip, ancestors, declared_name, function_name,
                                  parameter_declarations, parameter_list, root_of, text, walk)


@dataclass(frozen=True)
class Site:
    """A launch of one of the file's kernels, as the file writes it."""

    kernel: str
    node: Node  # the launch expression
    launch: Launch  # its grid and block, as far as the file fixes them
    template_args: list[Node]
    args: list[Node]  # the kernel's arguments, where the launch passes them
    host: Scope  # the names in scope where it is launched
    qualifier: str = ""  # `ns` of a launch of `ns::kernel`


def launch_sites(src: SourceFile, pre: Preprocessed, scope: Scope, kernels: Collection[str],
                 found: list[dict[str, list[Node]]]) -> dict[str, list[Site]]:
    """The launches of `kernels` outside branches the compiler never takes, by kernel, in the file's order;
    `found`: the file's matches of the "launches" query (swzc.analysis.context.FileContext.matches)."""
    sites: dict[str, list[Site]] = {}
    for site in _launches(src, scope, kernels, found):
        if pre.active(site.node):
            sites.setdefault(site.kernel, []).append(site)
    return sites


def foreign_launches(found: list[dict[str, list[Node]]], functions: Collection[str]) -> list[tuple[Node, str, str]]:
    """The launches (`<<<…>>>`, `hipLaunchKernelGGL`, `cudaLaunchKernel` …) whose kernel names none of `functions`
    (the file's), as (launch, name, the launch as written, shortened), in the file's order: a kernel a header
    defines, or one launched through a pointer (`kernel<<<grid, block>>>(…)` with `kernel` a variable), which no
    kernel's record holds."""
    seen = []
    for captures in found:
        if "config" in captures and "kernel" in captures:
            callee = captures["kernel"][0]
            written = f"{_short(text(callee))}<<<{_short(text(captures['config'][0])).strip('<>')}>>>"
        elif "api" in captures and "args" in captures:
            args = [c for c in captures["args"][0].named_children if c.type != "comment"]
            if not args:
                continue
            callee = args[0]
            written = f"{text(captures['api'][0]).split('::')[-1]}({', '.join(_short(text(a)) for a in args[:3])}, …)"
        else:
            continue
        name = text(_kernel_ref(callee)[0]).split("::")[-1].strip()
        if name not in functions:
            seen.append((captures["launch"][0], name, written))
    return sorted(seen, key=lambda launch: launch[0].start_byte)


def _short(written: str) -> str:
    """Code as a message quotes it: on one line, at most 80 characters."""
    return " ".join(written.split())[:80]


def included_launches(src: SourceFile, pre: Preprocessed, scope: Scope, found: list[dict[str, list[Node]]],
                      defined: Mapping[str, Node]) -> list[tuple[Launch, LaunchFact | None]]:
    """The launches here of kernels a header defines (`defined`: name -> the header's definition), in the file's
    order: each with what its arguments give the kernel's parameters, and as the fact the header's own analysis
    takes where this file fixes its grid and block (else None: `Launch.sizes` names what sets them); the run that
    gives a fact to another file says where it is (`LaunchFact.where`)."""
    out: list[tuple[Launch, LaunchFact | None]] = []
    sites = launch_sites(src, pre, scope, set(defined), found)
    for name, function in defined.items():
        spaces = _namespaces(function)  # `b::k` is not the `k` of namespace a
        mine = [s for s in sites.get(name, ()) if not s.qualifier or spaces[-len(s.qualifier.split("::")):] == s.qualifier.split("::")]
        for record in kernel_launches(src, function, mine, scope, None, None, None):
            fact = None
            if record.grid is not None and record.block is not None:
                fact = LaunchFact(name, record.grid, record.block, record.bindings, "included", types=record.type_args,
                                  api=record.api)
            out.append((record, fact))
    return sorted(out, key=lambda pair: pair[0].line)


def _namespaces(node: Node) -> list[str]:
    """The names of the namespaces around a definition, outermost first."""
    names = []
    parent = node.parent
    while parent is not None:
        if parent.type == "namespace_definition" and parent.child_by_field_name("name") is not None:
            names.insert(0, "".join(text(parent.child_by_field_name("name")).split()))
        parent = parent.parent
    return names


def kernel_launches(src: SourceFile, function: Node, sites: Collection[Site], scope: Scope, divisor: Node | None,
                    loop: TileLoop | None, facts: tuple[LaunchFact, ...] | None) -> list[Launch]:
    """The launches of the kernel `function` defines: each with the (template) parameters it binds, the types
    it fixes or lets the compiler deduce, and the tile decode divisor (`divisor`) or the tile loop's count
    and columns (`loop`) they give; then with what --grid/--block or a run says of them (`facts`)."""
    params, tparams = parameters(function)
    integers = set(integer_parameters(function))
    launches = [_bound(src, function, site, params, tparams, scope, divisor, loop, integers) for site in sites]
    return _with_facts(src, function, launches, facts, scope, divisor, loop) if facts else launches


def integer_parameters(function: Node) -> tuple[str, ...]:
    """The names of a kernel's parameters of an integer type (passed by value)."""
    return tuple(p.name for p in parameter_list(function) if not p.pointer and _INTEGER.fullmatch(p.type))


MAX_FIELD_SIZES = 16  # of one struct parameter: more are read as unknown, as a field was before


# Besides _INTEGER's: the scalars and vectors with no fields to read as sizes (an int2's or a uint3's may be: `dims.x`)
_NOT_INTEGER = re.compile(r"(?:(?:unsigned|signed|long|short|int|char|bool|float|double|half|const|volatile)\s*)+|"
                          r"__half|__nv_bfloat16|nv_bfloat16|bfloat16|float[1-4]|double[1-4]")


def _fields_read(function: Node, param: str, scope: Scope) -> list[str]:
    """The fields of parameter `param` (a struct passed by value) the kernel reads through names (`p.n`, `p.dims.m`;
    swzc.frontend.evaluate.field_name), in the order it reads them, that may be integer sizes: where the launch
    passes the struct whole, a sweep binds them with the grid's sizes (the kernel's `p.k` is a problem size as an
    `int k` parameter would be).  Not one read as an array or a pointer (`p.x[i]`, `*p.y`), nor, where the file
    defines the struct, one of a type other than an integer's.  Found once for each kernel and parameter."""
    return scope.once(("fields", function, param), lambda: _struct_fields_read(function, param, scope))


def _struct_fields_read(function: Node, param: str, scope: Scope) -> list[str]:
    declared = next((q for q in parameter_list(function) if q.name == param), None)
    found: dict[str, None] = {}
    written = templates.base_type(declared.type) if declared is not None else ""
    if declared is not None and not declared.pointer and not _INTEGER.fullmatch(written) and not _NOT_INTEGER.fullmatch(written):
        integers = _struct_fields(function, scope).get(written)
        body = function.child_by_field_name("body")
        for node in walk(body) if body is not None else ():
            if node.type != "field_expression" or node.parent is not None and node.parent.type == "field_expression":
                continue
            name = field_name(node)
            if name is None or not name.startswith((f"{param}.", f"{param}->")) or _as_pointer(node):
                continue
            if integers is not None and re.split(r"\.|->", name)[1] not in integers:
                continue
            found.setdefault(name)
    return list(found)[:MAX_FIELD_SIZES]


def _as_pointer(node: Node) -> bool:
    """Whether an expression is read as an array or a pointer where it is: indexed, dereferenced, called."""
    parent = node.parent
    return parent is not None and (parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node
                                   or parent.type == "pointer_expression"
                                   or parent.type == "call_expression" and parent.child_by_field_name("function") == node)


def _struct_fields(function: Node, scope: Scope) -> Mapping[str, frozenset[str]]:
    """The structs and classes the file that holds `function` defines, each with its fields of an integer type;
    found once for the file (a struct of a header's is not among them)."""
    root = root_of(function)
    return scope.once(("structs", root), lambda: _structs(root))


def _structs(root: Node) -> dict[str, frozenset[str]]:
    structs: dict[str, frozenset[str]] = {}
    for node in walk(root):
        if node.type in ("struct_specifier", "class_specifier") and node.child_by_field_name("body") is not None:
            named = node.child_by_field_name("name")
            if named is None:
                continue
            fields = set()
            for item in node.child_by_field_name("body").named_children:
                written = item.child_by_field_name("type") if item.type == "field_declaration" else None
                if written is not None and _INTEGER.fullmatch(templates.base_type(text(written))):
                    fields.update(declared_name(d) for d in item.children_by_field_name("declarator")
                                  if d.type in ("field_identifier", "identifier"))
            structs.setdefault(text(named), frozenset(fields))
    return structs


def _bound(src: SourceFile, function: Node, site: Site, params: list[str], tparams: list[str], scope: Scope,
           divisor: Node | None, loop: TileLoop | None, integers: Collection[str] = ()) -> Launch:
    """One launch with the values and types its arguments give the kernel's parameters, and what they make
    of the tile decode divisor or the tile loop; the names its integer arguments are set at run time by join
    the sizes of its grid (`Launch.sizes`)."""
    ev = _Evaluator(site.host)
    bound: dict[str, Value] = {}
    types: dict[str, str] = {}
    sizes = list(site.launch.sizes)
    for pname, arg in [*zip(tparams, site.template_args), *zip(params, site.args)]:
        # a template argument naming a constant parses as a type: read it as an expression
        value = ev.value(expression_of(text(arg)) if arg.type == "type_descriptor" else arg)
        if value is not None:
            bound[pname] = value
        elif arg.type == "type_descriptor":
            types[pname] = " ".join(text(arg).split())
        elif pname in integers:  # names and fields (`n`, `dims.x`, `p.k`): a call an argument reads is no size
            named: list[str] = []
            _Evaluator(site.host, named).value(arg)
            sizes += [n for n in named if n.isidentifier() or FIELD_PATH.fullmatch(n)]
        elif arg.type != "type_descriptor":  # a struct passed whole (`Params p`): the fields the kernel reads of it
            sizes += _fields_read(function, pname, scope)
    types.update(_deduced_types(function, tparams, types, site.args, site.node, scope, src.tree.root_node))
    record = replace(site.launch, bindings=tuple(sorted(bound.items())), type_args=tuple(sorted(types.items())),
                     sizes=tuple(n for n in dict.fromkeys(sizes) if n not in site.launch.block_sizes))
    if divisor is not None:
        kscope = local_scope(function, divisor.start_byte, scope.child(bound))
        value = _Evaluator(kscope).value(divisor)
        record = replace(record, divisor=int(value) if value is not None else None)
    if loop is not None:
        count, columns = tileloop.launch_values(loop, function, scope.child(bound))
        record = replace(record, tiles=count, divisor=columns)
    return record


def _launches(src: SourceFile, scope: Scope, kernels: Collection[str], matched: list[dict[str, list[Node]]]) -> list[Site]:
    """Every launch in the file of one of `kernels`, through a kernel pointer the function sets too (`_pointed_to`);
    one in a function the file calls, once for each call that fixes something of it (`_callers`)."""
    found = []
    calls: _Calls | None = None  # the file's calls, found at the first need
    hosts_of: dict[int, list[Scope]] = {}  # a launching function's scopes, by its start: read once for its launches
    for captures in matched:
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
        function = next((a for a in reversed(ancestors(src.tree.root_node, launch)) if a.type == "function_definition"), None)
        if name in kernels:
            named = [(name, targs, "".join(text(callee).split()).rpartition("::")[0])]
        elif callee.type == "identifier" and function is not None:  # a kernel pointer: each kernel the function points it at
            calls = calls or _calls_of(src, scope)
            if name in calls.defined:  # a function of the file's, not a pointer
                continue
            pointed = scope.once(("pointed", function, name), lambda: _pointed_to(function, name))
            named = [(k, kt, "") for k, kt in pointed if k in kernels]
        else:
            continue
        if not named:
            continue
        if function is None:
            hosts = [scope]
        else:  # once for each call of the launching function the file makes with values it fixes, else as written
            if function.start_byte not in hosts_of:
                calls = calls or _calls_of(src, scope)
                hosts_of[function.start_byte] = _callers(src, scope, function, calls) or [scope]
            hosts = [local_scope(function, launch.start_byte, outer) for outer in hosts_of[function.start_byte]]
        for host in hosts:
            ev = _Evaluator(host)
            record = Launch(name, _line(launch), api, _source_text(src, grid), _source_text(src, block),
                            _valid(_size(src, ev, grid)), _valid(_size(src, ev, block)))
            if record.grid is None:
                sizes, held = _sizes(src, host, grid, block)
                record = replace(record, sizes=sizes, block_sizes=held if record.block is None else ())
            found += [Site(kernel, launch, replace(record, kernel=kernel), ktargs, kargs, host, qualifier)
                      for kernel, ktargs, qualifier in named]
    return found


MAX_POINTED = 32  # kernels one kernel pointer is set to: its launch is each one's, the first so many


def _pointed_to(function: Node, pointer: str) -> list[tuple[str, list[Node]]]:
    """The kernels `function` sets its local or parameter `pointer` to (`kernel = &transposeNaive;`, `auto k =
    copy<float>;`), each with the template arguments it names, in the function's order: a launch through the
    pointer (`kernel<<<grid, block>>>(…)`) launches each of them."""
    body = function.child_by_field_name("body")
    found: dict[str, list[Node]] = {}
    for node in walk(body) if body is not None else ():
        if node.type == "assignment_expression" and text(node.child_by_field_name("operator")) == "=":
            left, value = node.child_by_field_name("left"), node.child_by_field_name("right")
            target = text(left) if left is not None and left.type == "identifier" else None
        elif node.type == "init_declarator":
            target, value = declared_name(node), node.child_by_field_name("value")
        else:
            continue
        if target == pointer and value is not None:
            named, targs = _kernel_ref(value)
            if named.type in ("identifier", "qualified_identifier"):
                found.setdefault(text(named).split("::")[-1].strip(), targs)
    return list(found.items())[:MAX_POINTED]


MAX_CALLERS = 16  # calls of one launching function: its launches are read once for each distinct one, the first so many


@dataclass(frozen=True)
class _Call:
    node: Node
    targs: list[Node]
    args: list[Node]
    caller: Node | None  # the function definition it is in


@dataclass(frozen=True)
class _Calls:
    """The file's function calls and function definitions, by name, found in one walk of its tree."""

    calls: Mapping[str, list[_Call]]
    defined: Mapping[str, list[Node]]  # name -> its definitions (overloads)


def _calls_of(src: SourceFile, scope: Scope) -> _Calls:
    """The file's `_calls`, found once for every scope of the file."""
    return scope.once(("calls", src.tree.root_node), lambda: _calls(src.tree.root_node))


def _calls(root: Node) -> _Calls:
    """The file's calls by the called name (`run(4096)`, `launch<64, 2>(q, k)`, `ns::run(n)`), each with the
    function it is in, and its function definitions by name, in one walk."""
    calls: dict[str, list[_Call]] = {}
    defined: dict[str, list[Node]] = {}
    open_: list[Node] = []  # the definitions the walk is in, innermost last
    for node in walk(root):
        while open_ and node.start_byte >= open_[-1].end_byte:
            open_.pop()
        if node.type == "function_definition":
            defined.setdefault(function_name(node).split("::")[-1], []).append(node)
            open_.append(node)
            continue
        called = node.child_by_field_name("function") if node.type == "call_expression" else None
        if called is None:
            continue
        targs: list[Node] = []
        if called.type == "template_function":
            listed = called.child_by_field_name("arguments")
            targs = [c for c in listed.named_children if c.type != "comment"] if listed is not None else []
            called = called.child_by_field_name("name")
        if called is None or called.type not in ("identifier", "qualified_identifier"):
            continue
        args = node.child_by_field_name("arguments")
        calls.setdefault(text(called).split("::")[-1].strip(), []).append(
            _Call(node, targs, [c for c in args.named_children if c.type != "comment"] if args is not None else [],
                  open_[-1] if open_ else None))
    return _Calls(calls, defined)


def _arity(function: Node) -> tuple[int, int, int]:
    """(the arguments a call must pass, the most it may pass, the template arguments it may name) of a definition."""
    declared = parameter_declarations(function)
    most = 1 << 30 if any(d.type.startswith("variadic") for d in declared) else len(declared)
    return sum(1 for d in declared if d.type == "parameter_declaration"), most, len(templates.template_parameters(function))


def _fits(arity: tuple[int, int, int], call: _Call) -> bool:
    return arity[0] <= len(call.args) <= arity[1] and len(call.targs) <= arity[2]


def _callers(src: SourceFile, scope: Scope, function: Node, found: _Calls) -> list[Scope]:
    """For the function a launch is in: a scope for each call of it in the file, binding what that call fixes of
    its value template parameters (`launch<64>(…)` of `template <int kHeadDim> void launch(…)`, and the defaults of
    those it leaves out) and of its parameters (`run(ni, nj, nk)` from a `main` whose `int nk = NK;`), each argument
    read where the call is; the distinct ones in the file's order, at most MAX_CALLERS.  A call in a branch the
    compiler never takes, or one that fits another definition of the name as well (an overload), is none of its
    calls.  None where no call fixes anything (a function called from another file, or only with what is set at run
    time): then it is read as it is written.  Found once for each function and set of --set bindings."""
    return scope.once(("callers", function, tuple(sorted(scope.user.items()))), lambda: _read_callers(src, scope, function, found))


def _read_callers(src: SourceFile, scope: Scope, function: Node, found: _Calls) -> list[Scope]:
    tparams = templates.template_parameters(function)
    params = [p.name for p in parameter_list(function)]
    out: list[Scope] = []
    if params or any(p.kind == "value" for p in tparams):
        name = function_name(function).split("::")[-1]
        mine = _arity(function)
        others = [_arity(f) for f in found.defined.get(name, ()) if f != function and not _has_token(f, "__global__")]  # a kernel is launched
        untaken = scope.untaken.for_tree_of(src.tree.root_node) if scope.untaken is not None else None
        seen: dict[tuple, Scope] = {}
        read: set[tuple] = set()  # (caller, the call as written): read once
        for call in found.calls.get(name, ()):
            written = (call.caller.start_byte if call.caller is not None else -1, text(call.node))
            if written in read or not _fits(mine, call) or any(_fits(other, call) for other in others) or (
                    untaken is not None and untaken.holds(call.node)):
                continue
            read.add(written)
            bound = _bound_by(call, tparams, params, scope)
            if bound and tuple(sorted(bound.items())) not in seen:
                seen[tuple(sorted(bound.items()))] = scope.child(bound)
                if len(seen) == MAX_CALLERS:
                    break
        out = list(seen.values())
    return out


def _bound_by(call: _Call, tparams: list, params: list[str], scope: Scope) -> dict[str, Value]:
    """What one call fixes of a function's value template parameters (or their defaults) and its parameters."""
    ev = _Evaluator(local_scope(call.caller, call.node.start_byte, scope) if call.caller is not None else scope)
    bound: dict[str, Value] = {}
    for i, param in enumerate(tparams):
        if param.kind != "value":
            continue
        arg = call.targs[i] if i < len(call.targs) else None
        if arg is not None:
            value = ev.value(expression_of(text(arg)) if arg.type == "type_descriptor" else arg)
        else:  # a default, read where the template is, with the parameters before it
            value = _Evaluator(scope.child(bound)).value(expression_of(param.default)) if param.default else None
        if value is not None:
            bound[param.name] = value
    for pname, arg in zip(params, call.args):
        value = ev.value(arg)
        if value is not None and pname:
            bound[pname] = value
    return bound


_INTEGER = re.compile(r"(?:(?:unsigned|signed|long|short|int|const)\s*)+|(?:std::)?u?int(?:8|16|32|64)_t|(?:std::)?size_t|"
                      r"(?:s|u)?size_t|ptrdiff_t|uint|index_t|dim_t")


def _sizes(src: SourceFile, host: Scope, grid: Node | None, block: Node | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names a launch's grid is set at run time by (`Launch.sizes`: those its value could not be found for;
    `_bound` leaves out any the block also names, with the kernel's integer arguments') and the names the
    block is set by (`Launch.block_sizes`: a block set at run time is not a problem size)."""
    names: list[str] = []
    _size(src, _Evaluator(host, names), grid)
    held: list[str] = []
    _size(src, _Evaluator(host, held), block)
    return tuple(dict.fromkeys(names)), tuple(dict.fromkeys(held))


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


def parameters(function: Node) -> tuple[list[str], list[str]]:
    """(value parameter names, template parameter names) of a function definition."""
    params = [p.name for p in parameter_list(function)]
    tparams = []
    if function.parent is not None and function.parent.type == "template_declaration":
        tlist = function.parent.child_by_field_name("parameters")
        for p in tlist.named_children if tlist else []:
            tparams.append(declared_name(p.child_by_field_name("declarator")) if p.child_by_field_name("declarator") else text(p).split()[-1])
    return params, tparams


def _with_facts(src: SourceFile, function: Node, launches: list[Launch], facts: tuple[LaunchFact, ...], scope: Scope,
                divisor: Node | None, loop: TileLoop | None = None) -> list[Launch]:
    """The kernel's launches with what the user or a run says of them.  A --grid or --block that disagrees
    with a launch the file fixes is an input error naming both; a size the file leaves open is filled.
    Observed launches are what ran: they replace the file's (the most frequent first).  A launch in a file that
    includes this one is the kernel's launch only where the kernel has no other."""
    name = function_name(function)
    given = [f for f in facts if f.origin not in ("observed", "included")]
    observed = sorted((f for f in facts if f.origin == "observed"), key=lambda f: -f.count)
    included = [f for f in facts if f.origin == "included"]
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
        for fact in observed or given or included:
            shown = lambda d: f"dim3({', '.join(map(str, d))})" if d else ""  # noqa: E731
            out.append(Launch(name, 0, "<<<>>>" if fact.where else fact.origin, shown(fact.grid), shown(fact.block), fact.grid,
                              fact.block, bindings=tuple(sorted(fact.args)), type_args=fact.types, sizes=fact.sizes,
                              by_size=fact.by_size, where=fact.where))
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
    found: dict[str, str] = {}
    for param, arg in zip(parameter_list(function), kargs):
        name = templates.base_type(param.type)
        if name not in tparams or name in fixed or name in found:
            continue
        declared = templates.argument_type(arg, site, root)
        if declared is not None and declared[1] == (1 if param.pointer else 0):
            found[name] = scope.resolve_type(templates.base_type(declared[0]))
    return found
