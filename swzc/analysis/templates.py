"""Template arguments of a kernel launch: the ones written at the launch, the rest deduced from the declared
types of the arguments (`float* d_A` passed for `const T* A` gives T = float), or taken from defaults.

The harness instantiates the kernel by name (`&gemm<float, 128>`), so every template parameter needs an
argument.  What cannot be fixed this way is returned as unknown, for the caller to refuse with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tree_sitter import Node

from swzc.frontend import queries
from swzc.analysis.records import Launch
from swzc.frontend.syntax import Parameter, ancestors, declared_name, text, walk
from swzc.frontend.evaluate import Budget, Scope, Value
from swzc.frontend.source import SourceFile

_QUALIFIERS = frozenset({"const", "volatile", "__restrict__", "__restrict", "restrict", "struct", "typename", "class"})
_MAX_STEPS = 128  # parentheses, operators and `auto` definitions an argument's type is followed through, in all
_INTEGRAL = frozenset({"int", "unsigned", "unsigned int", "long", "unsigned long", "long long", "unsigned long long",
                       "short", "unsigned short", "char", "signed char", "unsigned char", "size_t", "int64_t", "uint64_t",
                       "int32_t", "uint32_t", "int16_t", "uint16_t", "int8_t", "uint8_t", "ptrdiff_t"})


@dataclass(frozen=True)
class TemplateParameter:
    name: str
    kind: str  # "type" or "value"
    type: str  # a value parameter's declared type ("int", "bool"); "" for a type parameter
    default: str | None  # the default argument as written, if any


@dataclass(frozen=True)
class TemplateArguments:
    arguments: tuple[tuple[str, str], ...]  # parameter -> argument as C++ text, for every parameter fixed
    unknown: tuple[str, ...]  # parameters nothing fixes (and that have no default to fall back on)
    listing: str  # the argument list to instantiate with, e.g. "<float, 128>"; "" for a non-template

    def types(self, params: list[TemplateParameter]) -> dict[str, str]:
        kinds = {p.name: p.kind for p in params}
        return {name: arg for name, arg in self.arguments if kinds.get(name) == "type"}


def template_parameters(function: Node) -> list[TemplateParameter]:
    """The template parameters of a function definition, in order (none for a plain function)."""
    holder = function.parent
    if holder is None or holder.type != "template_declaration":
        return []
    plist = holder.child_by_field_name("parameters")
    found = []
    for p in plist.named_children if plist is not None else []:
        if p.type in ("type_parameter_declaration", "variadic_type_parameter_declaration"):
            name = next((text(c) for c in p.named_children if c.type == "type_identifier"), "")
            found.append(TemplateParameter(name, "type", "", None))
        elif p.type == "optional_type_parameter_declaration":
            found.append(TemplateParameter(text(p.child_by_field_name("name")), "type", "",
                                           _spaced(text(p.child_by_field_name("default_type")))))
        elif p.type in ("parameter_declaration", "optional_parameter_declaration", "variadic_parameter_declaration"):
            default = p.child_by_field_name("default_value")
            found.append(TemplateParameter(declared_name(p.child_by_field_name("declarator")), "value",
                                           base_type(text(p.child_by_field_name("type"))),
                                           _spaced(text(default)) if default is not None else None))
    return found


def base_type(written: str) -> str:
    """A type as written, without qualifiers, pointer stars or a std:: prefix: `const std::int32_t *` -> `int32_t`."""
    words = [w for w in written.replace("*", " ").replace("&", " ").split() if w not in _QUALIFIERS]
    return " ".join(words).removeprefix("std::").removeprefix("::")


def parse_listing(listing: str) -> list[str]:
    """`<float, Tile<2, 3>, 128>` -> ["float", "Tile<2, 3>", "128"]: the top-level arguments of a list."""
    inner = listing.strip()
    if inner.startswith("<") and inner.endswith(">"):
        inner = inner[1:-1]
    args, depth, current = [], 0, ""
    for ch in inner:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            args.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        args.append(current.strip())
    return args


def template_arguments(src: SourceFile, function: Node, params: list[Parameter], launch: Launch | None,
                       scope: Scope, given: str = "") -> TemplateArguments:
    """The kernel's template arguments: `given` (a launch spec's `template`) when set, else the launch's
    explicit ones, then those deduced from the arguments' declared types, then the defaults."""
    tparams = template_parameters(function)
    if not tparams:
        return TemplateArguments((), (), "")
    fixed: dict[str, str] = {}
    if given:
        for tp, arg in zip(tparams, parse_listing(given)):
            fixed[tp.name] = arg
    elif launch is not None:
        bound: Mapping[str, Value] = dict(launch.bindings)
        typed = dict(launch.type_args)
        site = launch_site(src, launch)
        for tp in tparams:
            if tp.kind == "type" and tp.name in typed:
                fixed[tp.name] = _canonical(typed[tp.name], scope)
            elif tp.kind == "value" and tp.name in bound and scope.resolve_type(tp.type) in _INTEGRAL | {"bool"}:
                fixed[tp.name] = _value_text(bound[tp.name], scope.resolve_type(tp.type))  # an enum's keeps its text
        if site is not None:
            explicit, arguments, call = site
            for tp, node in zip(tparams, explicit):  # what the evaluator could not read: enumerators, expressions
                if tp.name not in fixed:
                    fixed[tp.name] = _canonical(text(node), scope) if tp.kind == "type" else _spaced(text(node))
            for param, arg in zip(params, arguments):
                name = base_type(param.type)
                tp = next((t for t in tparams if t.name == name and t.kind == "type"), None)
                if tp is None or tp.name in fixed:
                    continue
                found = argument_type(arg, call, src.tree.root_node)
                if found is not None and found[1] == (1 if param.pointer else 0):
                    fixed[tp.name] = _canonical(found[0], scope)
    listing: list[str] = []
    unknown: list[str] = []
    for i, tp in enumerate(tparams):
        if tp.name in fixed:
            listing.append(fixed[tp.name])
        elif tp.default is not None and all(later.name not in fixed for later in tparams[i:]):
            break  # this and every later parameter take their defaults
        elif tp.default is not None and tp.kind == "type":
            fixed[tp.name] = _canonical(tp.default, scope)
            listing.append(fixed[tp.name])
        else:
            unknown.append(tp.name)
            listing.append(tp.name)
    return TemplateArguments(tuple(fixed.items()), tuple(unknown), "<" + ", ".join(listing) + ">")


def _canonical(written: str, scope: Scope) -> str:
    """A type argument with the file's aliases and type macros followed, pointer stars kept."""
    return scope.resolve_type(base_type(written)) + "*" * written.count("*")


def _value_text(value: Value, declared: str) -> str:
    if declared == "bool":
        return "true" if value else "false"
    if isinstance(value, float) and declared in _INTEGRAL:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def _spaced(written: str) -> str:
    return " ".join(written.split())


def launch_site(src: SourceFile, launch: Launch) -> tuple[list[Node], list[Node], Node] | None:
    """(explicit template argument nodes, kernel argument nodes, the launch call) of `launch`, found again in
    the tree by its line and kernel; None where the file has no such launch."""
    for captures in queries.matches(src.dialect, "launches", src.tree.root_node):
        (call,) = captures["launch"]
        if call.start_point.row + 1 != launch.line:
            continue
        args = [c for c in captures["args"][0].named_children if c.type != "comment"]
        if "config" in captures:
            callee, kernel_args = captures["kernel"][0], args
        elif args:
            api = text(captures["api"][0]).split("::")[-1]
            callee, kernel_args = args[0], args[5:] if api == "hipLaunchKernelGGL" else []
        else:
            continue
        name, explicit = _kernel_named(callee)
        if name == launch.kernel:
            return explicit, kernel_args, call
    return None


def _kernel_named(node: Node) -> tuple[str, list[Node]]:
    """The kernel a launch names and its explicit template arguments, through casts, `&` and HIP_KERNEL_NAME()."""
    if node.type in ("identifier", "qualified_identifier"):
        return text(node).split("::")[-1].strip(), []
    for inner in walk(node):
        if inner.type == "template_function":
            targs = inner.child_by_field_name("arguments")
            name = text(inner.child_by_field_name("name")).split("::")[-1].strip()
            return name, [c for c in targs.named_children if c.type != "comment"] if targs is not None else []
        if inner.type in ("identifier", "qualified_identifier") and not (
            inner.parent is not None and inner.parent.type == "call_expression" and inner.parent.child_by_field_name("function") == inner
        ):
            return text(inner).split("::")[-1].strip(), []
    return "", []


def argument_type(arg: Node, site: Node, root: Node | None = None) -> tuple[str, int] | None:
    """The declared type of an argument expression at `site`, as (base type as written, pointer depth); None
    where it is not plain to see (a call's result, a member, a template's value type), or not within
    _MAX_STEPS steps through parentheses, operators and `auto` definitions.  `root`, the root of `site`'s
    tree, is where the blocks around `site` are found from: in a deep tree, faster than stepping up."""
    around = ancestors(root, site)[::-1] if root is not None else _parents(site)
    return _argument_type(arg, _Search(site, around, Budget(_MAX_STEPS)))


@dataclass
class _Search:
    site: Node
    around: list[Node]  # the nodes holding `site`, innermost first
    steps: Budget  # shared by the whole search: `auto b = a + a; auto c = b + b; …` would double the work at each


def _parents(node: Node) -> list[Node]:
    found = []
    parent = node.parent
    while parent is not None:
        found.append(parent)
        parent = parent.parent
    return found


def _argument_type(arg: Node, search: _Search) -> tuple[str, int] | None:
    if not search.steps.spend():
        return None
    kind = arg.type
    if kind == "parenthesized_expression" and arg.named_child_count == 1:
        return _argument_type(arg.named_children[0], search)
    if kind == "identifier":
        return _declared(text(arg), search)
    if kind == "number_literal":
        literal = text(arg).lower()
        hexadecimal = literal.startswith("0x")
        if not hexadecimal and ("." in literal or "e" in literal) or hexadecimal and "p" in literal:
            return ("float" if literal.endswith("f") else "double"), 0
        suffix = literal.lstrip("0123456789abcdefx'")
        size = "long long" if "ll" in suffix else "long" if "l" in suffix else "int"
        return ("unsigned " + size if "u" in suffix else size), 0
    if kind in ("true", "false"):
        return "bool", 0
    if kind == "char_literal":
        return "char", 0
    if kind == "cast_expression":
        return _type_descriptor(arg.child_by_field_name("type"))
    if kind == "call_expression":  # static_cast<float*>(p), reinterpret_cast<half*>(p)
        function = arg.child_by_field_name("function")
        if function is not None and function.type == "template_function" and \
                text(function.child_by_field_name("name")).split("::")[-1] in ("static_cast", "reinterpret_cast", "const_cast"):
            targs = function.child_by_field_name("arguments")
            descriptors = [c for c in targs.named_children if c.type == "type_descriptor"] if targs is not None else []
            return _type_descriptor(descriptors[0]) if len(descriptors) == 1 else None
        return None
    if kind == "pointer_expression":
        inner = _argument_type(arg.child_by_field_name("argument"), search)
        if inner is None:
            return None
        step = 1 if text(arg.child_by_field_name("operator")) == "&" else -1
        return (inner[0], inner[1] + step) if inner[1] + step >= 0 else None
    if kind == "subscript_expression":
        inner = _argument_type(arg.child_by_field_name("argument"), search)
        return (inner[0], inner[1] - 1) if inner is not None and inner[1] >= 1 else None
    if kind == "binary_expression" and text(arg.child_by_field_name("operator")) in ("+", "-"):
        for side in ("left", "right"):  # pointer arithmetic keeps the pointer's type
            found = _argument_type(arg.child_by_field_name(side), search)
            if found is not None and found[1] >= 1:
                return found
    return None


def _type_descriptor(node: Node | None) -> tuple[str, int] | None:
    if node is None:
        return None
    written = text(node.child_by_field_name("type"))
    depth = sum(1 for n in walk(node) if n.type == "abstract_pointer_declarator")
    return (base_type(written), depth) if written else None


def _declared(name: str, search: _Search) -> tuple[str, int] | None:
    """The type `name` is declared with where the search's site reads it: the nearest declaration before it
    in an enclosing block, a for-loop's initialiser, the enclosing function's parameters, or a global."""
    site = search.site
    for node in search.around:
        scope_items: list[Node] = []
        if node.type in ("compound_statement", "translation_unit", "declaration_list"):
            scope_items = [c for c in node.named_children if c.end_byte <= site.start_byte]
        elif node.type == "for_statement":
            scope_items = [c for c in node.named_children if c.type == "declaration" and c.end_byte <= site.start_byte]
        elif node.type == "function_definition":
            declarator = node.child_by_field_name("declarator")
            while declarator is not None and declarator.type != "function_declarator":
                declarator = declarator.child_by_field_name("declarator")
            plist = declarator.child_by_field_name("parameters") if declarator is not None else None
            scope_items = list(plist.named_children) if plist is not None else []
        for item in reversed(scope_items):  # the nearest declaration wins
            found = _from_declaration(item, name, search)
            if found is not None:
                return found
    return None


def _from_declaration(item: Node, name: str, search: _Search) -> tuple[str, int] | None:
    if item.type not in ("declaration", "parameter_declaration"):
        return None
    written = base_type(text(item.child_by_field_name("type")))
    for decl in item.children_by_field_name("declarator"):
        if declared_name(decl) != name:
            continue
        depth = 0
        value = decl.child_by_field_name("value") if decl.type == "init_declarator" else None
        node: Node | None = decl
        while node is not None and node.type not in ("identifier", "field_identifier"):
            depth += node.type in ("pointer_declarator", "array_declarator")
            node = node.child_by_field_name("declarator")
        if written == "auto":  # `auto* p = (float*)x;`: the initialiser's type
            return _argument_type(value, search) if value is not None else None
        return written, depth
    return None
