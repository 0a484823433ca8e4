"""The checks of the safe subset (swzc.search.llm.restrict) made on the parse: one walk over the body's tree.

Every rule accepts its node and the parts of it that it has looked at; at the end, every named node of the
body must have been accepted by a rule and every token must be one the subset knows (restrict_words), so
anything no rule speaks for is refused.  Locals are declared before use, in scopes; for loops have trip counts
that follow from their headers (restrict_numbers), and every path ends in a return.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from tree_sitter import Node

from swzc.search.llm.restrict_numbers import _INT, _INTEGER_TYPES, _IntType, _literal, _trips
from swzc.search.llm.restrict_violation import MAX_REPORTED, Violation, _line, _violation
from swzc.search.llm.restrict_words import (
    _ALLOWED_TYPES,
    _ASSIGNMENTS,
    _BINARY,
    _CALLEES,
    _FIELDS,
    _FORBIDDEN,
    _IDENTIFIER,
    _KEYWORDS,
    _LOOP_CONDITIONS,
    _LOOP_STEPS,
    _PARAMETERS,
    _RESERVED_NAMES,
    _TOKENS,
    _TYPE_NAMES,
    _UNARY,
    _forbidden,
    _reserved,
)

MAX_NESTED_TRIPS = 4096  # product of the trip counts of loops nested in one another
MAX_LOOP_DEPTH = 3


@dataclass(frozen=True)
class _Local:
    type: str  # canonical: "unsigned", "int", "unsigned long long", "long long", "bool" or "uint3"
    const: bool


_PARAMETER = _Local("uint3", const=True)


@dataclass(frozen=True)
class _Context:
    """What a node's position adds to the rules: the loops around it."""

    loops: int = 0
    trips: int = 1  # product of the trip counts of the loops around
    counters: frozenset[str] = frozenset()  # loop counters that may not be assigned here


@dataclass(frozen=True)
class _Visit:
    node: Node
    context: _Context
    statement: bool


@dataclass(frozen=True)
class _Declare:
    name: str
    local: _Local


@dataclass(frozen=True)
class _Scope:
    enter: bool  # True opens a scope, False closes the innermost one


_ENTER = _Scope(True)
_LEAVE = _Scope(False)
_Item = _Visit | _Declare | _Scope


@dataclass(frozen=True)
class _Loop:
    counter: str
    local: _Local
    declares: bool  # the counter is declared by the loop (else it is an earlier local)
    trips: int


@dataclass
class _Walk:
    """One pass over the body with an explicit stack (the tree is as deep as the text lets it be).  Each rule
    accepts its node and the parts of it it has looked at; anything else in the tree is refused at the end."""

    source: bytes
    lines: int
    violations: list[Violation] = field(default_factory=list)
    renames: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, new name): min/max callees
    scopes: list[dict[str, _Local]] = field(default_factory=lambda: [{p: _PARAMETER for p in _PARAMETERS}])
    accepted: set[int] = field(default_factory=set)

    def run(self, body: Node) -> None:
        stack: list[_Item] = [_Visit(body, _Context(), statement=True)]
        while stack:
            item = stack.pop()
            if isinstance(item, _Declare):
                self.scopes[-1][item.name] = item.local
            elif isinstance(item, _Scope):
                if item.enter:
                    self.scopes.append({})
                else:
                    self.scopes.pop()
            else:
                stack.extend(reversed(self._visit(item)))
        if not any(self._returns(body)):
            self.violations.append(_violation(1, "the body never returns (it must return a uint3)"))
        elif not _always_returns(body):
            self.violations.append(_violation(self.lines, "the body can reach its end without returning "
                                                          "(end every path with a return)"))
        if not self.violations:
            self._nothing_else(body)

    # -- bookkeeping

    def report(self, node: Node, what: str) -> None:
        self.violations.append(_violation(_line(node, self.lines), what))

    def accept(self, *nodes: Node | None) -> None:
        self.accepted.update(n.id for n in nodes if n is not None)

    def text(self, node: Node) -> str:
        return self.source[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def lookup(self, name: str) -> _Local | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def _returns(self, body: Node) -> Iterator[Node]:
        stack = [body]
        while stack:
            node = stack.pop()
            if node.type == "return_statement":
                yield node
            stack.extend(node.named_children)

    def _nothing_else(self, body: Node) -> None:
        """The backstop of the whitelist: every named node was accepted by a rule, every token is known."""
        stack = list(body.children)
        while stack and len(self.violations) < MAX_REPORTED:
            node = stack.pop()
            if node.type == "comment":
                continue
            if node.is_named and node.id not in self.accepted:
                self.report(node, _forbidden(node))
                continue
            if not node.is_named and node.type not in _TOKENS:
                self.report(node, f"{node.type} is not allowed")
            stack.extend(node.children)

    # -- dispatch

    def _visit(self, item: _Visit) -> list[_Item]:
        node = item.node
        if node.type == "comment":
            return []
        kind = "statement" if item.statement else "expression"
        rule = getattr(self, f"_{kind}_{node.type}", None)
        if rule is None:
            self.report(node, _forbidden(node))
            return []
        self.accept(node)
        return rule(node, item.context)

    def _expressions(self, nodes: list[Node], context: _Context) -> list[_Item]:
        return [_Visit(n, context, statement=False) for n in nodes if n.type != "comment"]

    def _scoped(self, node: Node | None, context: _Context) -> list[_Item]:
        """A statement in its own scope, as the body of an if or else is."""
        return [] if node is None else [_ENTER, _Visit(node, context, statement=True), _LEAVE]

    # -- statements

    def _statement_compound_statement(self, node: Node, context: _Context) -> list[_Item]:
        return [_ENTER, *(_Visit(n, context, statement=True) for n in node.named_children), _LEAVE]

    def _statement_expression_statement(self, node: Node, context: _Context) -> list[_Item]:
        return self._expressions(node.named_children, context)

    def _statement_return_statement(self, node: Node, context: _Context) -> list[_Item]:
        values = [n for n in node.named_children if n.type != "comment"]
        if not values:
            self.report(node, "return must return a uint3 (no bare return)")
        return self._expressions(values, context)

    def _statement_break_statement(self, node: Node, context: _Context) -> list[_Item]:
        if not context.loops:
            self.report(node, "break is only allowed inside a for loop")
        return []

    def _statement_continue_statement(self, node: Node, context: _Context) -> list[_Item]:
        if not context.loops:
            self.report(node, "continue is only allowed inside a for loop")
        return []

    def _statement_if_statement(self, node: Node, context: _Context) -> list[_Item]:
        condition = node.child_by_field_name("condition")
        alternative = node.child_by_field_name("alternative")
        values = [n for n in condition.named_children if n.type != "comment"] if condition is not None else []
        value = condition.child_by_field_name("value") if condition is not None else None
        if value is None or len(values) != 1 or value.type == "declaration":
            self.report(node, "an if condition must be a single expression (no declarations or initialisers)")
            return []
        self.accept(condition)
        consequence = node.child_by_field_name("consequence")
        follow = [*self._expressions([value], context), *self._scoped(consequence, context)]
        if alternative is not None:
            self.accept(alternative)
            branch = [n for n in alternative.named_children if n.type != "comment"]
            follow += self._scoped(branch[0] if branch else None, context)
        return follow

    def _statement_declaration(self, node: Node, context: _Context) -> list[_Item]:
        declared = self._declared_type(node)
        if declared is None:
            return []
        follow: list[_Item] = []
        for i, child in enumerate(node.children):
            if node.field_name_for_child(i) == "declarator":
                follow += self._declarator(child, declared, context)
        return follow

    def _statement_for_statement(self, node: Node, context: _Context) -> list[_Item]:
        loop = self._loop(node, context)
        if loop is None:
            return []
        inner = _Context(context.loops + 1, context.trips * loop.trips, context.counters | {loop.counter})
        if inner.loops > MAX_LOOP_DEPTH:
            self.report(node, f"for loops nest deeper than {MAX_LOOP_DEPTH}")
            return []
        if inner.trips > MAX_NESTED_TRIPS:
            self.report(node, f"nested loops run {inner.trips} times in all (at most {MAX_NESTED_TRIPS})")
            return []
        follow: list[_Item] = [_ENTER]
        if loop.declares:
            follow.append(_Declare(loop.counter, loop.local))
        return [*follow, _Visit(node.child_by_field_name("body"), inner, statement=True), _LEAVE]

    # -- declarations

    def _declared_type(self, node: Node) -> _Local | None:
        """The type a declaration gives its names, or None (reported) when it is not an allowed one."""
        const = False
        type_name = None
        ok = True
        for i, child in enumerate(node.children):
            role = node.field_name_for_child(i)
            if role == "type":
                type_name = self._type(child)
                ok = ok and type_name is not None
            elif role == "declarator" or not child.is_named or child.type == "comment":
                continue
            elif child.type == "type_qualifier" and self.text(child) == "const":
                self.accept(child)
                const = True
            elif child.type == "type_qualifier":
                word = self.text(child)
                self.report(child, "constexpr is not allowed (use const)" if word == "constexpr"
                            else f"{word} is not allowed (locals are plain values)")
                ok = False
            elif child.type == "storage_class_specifier":
                self.report(child, f"{self.text(child)} is not allowed (only plain locals)")
                ok = False
            else:
                self.report(child, _forbidden(child))
                ok = False
        return _Local(type_name, const) if ok and type_name is not None else None

    def _type(self, node: Node) -> str | None:
        """The canonical name of an allowed type, or None (reported)."""
        if node.type == "placeholder_type_specifier":
            self.report(node, "auto is not allowed (write the type)")
            return None
        if node.type in _FORBIDDEN:
            self.report(node, _forbidden(node))
            return None
        words: list[str] = []
        parts = [node]
        if node.type == "sized_type_specifier":
            parts = [c for c in node.children if c.type != "comment"]
        elif node.type not in ("primitive_type", "type_identifier"):
            parts = []
        for part in parts:
            if part.is_named and part.type not in ("primitive_type", "type_identifier"):
                parts = []
                break
            words.append(self.text(part))
        name = _TYPE_NAMES.get(tuple(sorted(words))) if parts else None
        if name is None:
            shown = " ".join(self.text(node).split())[:40]
            self.report(node, f"type {shown} is not allowed (only {_ALLOWED_TYPES})")
            return None
        self.accept(node, *parts)
        return name

    def _declarator(self, node: Node, local: _Local, context: _Context) -> list[_Item]:
        if node.type == "identifier":
            self.report(node, f"{self.text(node)} must be initialised where it is declared")
            return []
        if node.type != "init_declarator":
            self.report(node, _forbidden(node))
            return []
        name = node.child_by_field_name("declarator")
        value = node.child_by_field_name("value")
        if name is None or name.type != "identifier":
            self.report(node, _forbidden(name) if name is not None else "a declaration needs a name")
            return []
        if value is None or value.type in ("initializer_list", "argument_list"):
            self.report(node, f"initialise {self.text(name)} with = (no braces or parentheses)")
            return []
        self.accept(node)
        if not self._new_name(name):
            return self._expressions([value], context)
        return [*self._expressions([value], context), _Declare(self.text(name), local)]

    def _new_name(self, node: Node) -> bool:
        """Whether a declared name is one the body may introduce; reported when not."""
        name = self.text(node)
        if not _IDENTIFIER.fullmatch(name):
            self.report(node, f"{name[:20]!r} is not a plain ASCII name")
        elif _reserved(name):
            self.report(node, f"{name} is reserved (names starting with __ or swzc_)")
        elif name in _RESERVED_NAMES:
            self.report(node, f"{name} is reserved")
        elif self.lookup(name) is not None:
            self.report(node, f"{name} is already declared (no redeclaring or shadowing)")
        else:
            self.accept(node)
            return True
        return False

    # -- expressions

    def _expression_identifier(self, node: Node, context: _Context) -> list[_Item]:
        name = self.text(node)
        if self.lookup(name) is not None:
            return []
        if name in _CALLEES:
            self.report(node, f"{name} may only be called")
        elif _reserved(name):
            self.report(node, f"{name} is reserved (names starting with __ or swzc_)")
        else:
            self.report(node, f"{name} is not declared (only block, grid and locals declared above it)")
        return []

    def _expression_number_literal(self, node: Node, context: _Context) -> list[_Item]:
        value = _literal(self.text(node))
        if isinstance(value, str):
            self.report(node, value)
        return []

    def _expression_true(self, node: Node, context: _Context) -> list[_Item]:
        return []

    def _expression_false(self, node: Node, context: _Context) -> list[_Item]:
        return []

    def _expression_parenthesized_expression(self, node: Node, context: _Context) -> list[_Item]:
        return self._expressions(node.named_children, context)

    def _expression_binary_expression(self, node: Node, context: _Context) -> list[_Item]:
        operator = node.child_by_field_name("operator")
        if operator is None or operator.type not in _BINARY:
            self.report(node, f"operator {operator.type if operator else '?'} is not allowed")
            return []
        return self._expressions([node.child_by_field_name("left"), node.child_by_field_name("right")], context)

    def _expression_unary_expression(self, node: Node, context: _Context) -> list[_Item]:
        operator = node.child_by_field_name("operator")
        if operator is None or operator.type not in _UNARY:
            self.report(node, f"operator {operator.type if operator else '?'} is not allowed")
            return []
        return self._expressions([node.child_by_field_name("argument")], context)

    def _expression_conditional_expression(self, node: Node, context: _Context) -> list[_Item]:
        parts = [node.child_by_field_name(f) for f in ("condition", "consequence", "alternative")]
        if any(p is None for p in parts):
            self.report(node, "?: needs all three operands")
            return []
        return self._expressions(parts, context)

    def _a_statement_of_its_own(self, node: Node) -> bool:
        """Whether an assignment or ++/-- is the whole of an expression statement.  Inside an expression its
        order against the other operands is unspecified (or undefined), and g++ on the host and nvcc on the
        device may take different orders: what is proven would not be what runs."""
        if node.parent is not None and node.parent.type == "expression_statement":
            return True
        self.report(node, "an assignment or ++/-- must be a statement of its own, not part of an expression")
        return False

    def _expression_assignment_expression(self, node: Node, context: _Context) -> list[_Item]:
        if not self._a_statement_of_its_own(node):
            return []
        operator = node.child_by_field_name("operator")
        if operator is None or operator.type not in _ASSIGNMENTS:
            self.report(node, f"operator {operator.type if operator else '?'} is not allowed")
            return []
        self._assignable(node.child_by_field_name("left"), context)
        return self._expressions([node.child_by_field_name("right")], context)

    def _expression_update_expression(self, node: Node, context: _Context) -> list[_Item]:
        if not self._a_statement_of_its_own(node):
            return []
        self._assignable(node.child_by_field_name("argument"), context)
        return []

    def _expression_field_expression(self, node: Node, context: _Context) -> list[_Item]:
        self._field(node)
        return []

    def _expression_cast_expression(self, node: Node, context: _Context) -> list[_Item]:
        descriptor = node.child_by_field_name("type")
        value = node.child_by_field_name("value")
        if descriptor is None or value is None or self._cast_type(descriptor) is None:
            return []
        return self._expressions([value], context)

    def _expression_call_expression(self, node: Node, context: _Context) -> list[_Item]:
        callee = node.child_by_field_name("function")
        arguments = node.child_by_field_name("arguments")
        name = self.text(callee) if callee is not None else ""
        if callee is None or callee.type != "identifier" or name not in _CALLEES:
            shown = " ".join(name.split())[:40]
            if (callee is not None and callee.type in ("primitive_type", "sized_type_specifier")) or name in _KEYWORDS:
                self.report(node, f"functional casts like {shown}(x) are not allowed (write ({shown})x)")
            elif callee is not None and callee.type not in ("identifier", "qualified_identifier") and (
                    callee.type in _FORBIDDEN or "asm" in callee.type):
                self.report(callee, _forbidden(callee))
            else:
                self.report(node, f"calling {shown} is not allowed (only min, max and make_uint3)")
            return []
        if arguments is None or arguments.type != "argument_list":
            self.report(node, f"{name} must be called with an argument list")
            return []
        operands = [n for n in arguments.named_children if n.type != "comment"]
        if len(operands) != _CALLEES[name]:
            self.report(node, f"{name} takes {_CALLEES[name]} arguments, not {len(operands)}")
            return []
        self.accept(callee, arguments)
        if name in ("min", "max"):
            self.renames.append((callee.start_byte, callee.end_byte, f"swzc_{name}"))
        return self._expressions(operands, context)

    # -- parts of expressions

    def _cast_type(self, descriptor: Node) -> str | None:
        if descriptor.type != "type_descriptor":
            self.report(descriptor, _forbidden(descriptor))
            return None
        name = None
        for i, child in enumerate(descriptor.children):
            role = descriptor.field_name_for_child(i)
            if role == "type":
                name = self._type(child)
            elif child.type == "type_qualifier" and self.text(child) == "const":
                self.accept(child)
            elif child.type == "type_qualifier":
                self.report(child, f"{self.text(child)} is not allowed in a cast")
                return None
            elif child.is_named and child.type != "comment":
                self.report(child, _forbidden(child))
                return None
        if name is not None:
            self.accept(descriptor)
        return name

    def _field(self, node: Node) -> tuple[str, _Local] | None:
        """The uint3 a field access reads (name and local), or None (reported)."""
        operator = node.child_by_field_name("operator")
        argument = node.child_by_field_name("argument")
        member = node.child_by_field_name("field")
        if operator is None or operator.type != ".":
            self.report(node, "-> is not allowed (no pointers)")
            return None
        if argument is None or argument.type != "identifier":
            self.report(node, "fields may only be read from block, grid or a uint3 local (X.x, X.y, X.z)")
            return None
        name = self.text(argument)
        local = self.lookup(name)
        if local is None:
            self._expression_identifier(argument, _Context())
            return None
        if local.type != "uint3":
            self.report(node, f"{name} is not a uint3: it has no fields")
            return None
        if member is None or member.type != "field_identifier" or self.text(member) not in _FIELDS:
            self.report(node, "only the fields .x, .y and .z exist")
            return None
        self.accept(argument, member)
        return name, local

    def _assignable(self, node: Node | None, context: _Context) -> None:
        """Whether `node` may be assigned to: a local that is not const and not a loop counter of an enclosing
        loop, or a field of such a uint3 local.  Reported when not."""
        if node is None:
            return
        if node.type == "field_expression":
            found = self._field(node)
            if found is None:
                return
            name, local = found
        elif node.type == "identifier":
            name = self.text(node)
            local = self.lookup(name)
            if local is None:
                self._expression_identifier(node, context)
                return
        else:
            self.report(node, _forbidden(node) if node.type in _FORBIDDEN
                        else "only a local variable or a field of a uint3 local may be assigned")
            return
        if name in _PARAMETERS:
            self.report(node, f"{name} is read-only")
        elif local.const:
            self.report(node, f"{name} is const")
        elif name in context.counters:
            self.report(node, f"the loop counter {name} may not be assigned inside its loop")
        else:
            self.accept(node)

    # -- for loops

    def _loop(self, node: Node, context: _Context) -> _Loop | None:
        """The loop's counter and trip count, when its header is one swzc can count from the text; reported
        when not."""
        start = self._loop_start(node.child_by_field_name("initializer"), context)
        if start is None:
            self.report(node, "a for loop must start by setting one integer counter to an integer literal "
                              "(for (int i = 0; ...))")
            return None
        counter, local, declares, value = start
        kind = _INTEGER_TYPES[local.type]
        condition = self._loop_condition(node.child_by_field_name("condition"), counter)
        if condition is None:
            self.report(node, f"a for loop's condition must compare {counter} with an integer literal "
                              f"({counter} < 16)")
            return None
        step = self._loop_step(node.child_by_field_name("update"), counter)
        if step is None:
            self.report(node, f"a for loop's step must be ++{counter}, --{counter}, or {counter} += k, -= k, *= k, "
                              f"/= k, <<= k, >>= k with a literal k")
            return None
        if node.child_by_field_name("body") is None:
            self.report(node, "a for loop needs a body")
            return None
        trips = _trips(value, kind, condition, step)
        if isinstance(trips, str):
            self.report(node, trips)
            return None
        return _Loop(counter, local, declares, trips)

    def _loop_start(self, node: Node | None, context: _Context) -> tuple[str, _Local, bool, int] | None:
        """(counter, its type, whether declared here, start value) of `int i = 0` or `i = 0`."""
        if node is None:
            return None
        if node.type == "declaration":
            declarators = [c for i, c in enumerate(node.children) if node.field_name_for_child(i) == "declarator"]
            if len(declarators) != 1 or declarators[0].type != "init_declarator":
                return None
            name = declarators[0].child_by_field_name("declarator")
            value = declarators[0].child_by_field_name("value")
            if name is None or name.type != "identifier" or value is None or value.type != "number_literal":
                return None
            local = self._declared_type(node)
            if local is None:
                return None
            if local.const or local.type not in _INTEGER_TYPES:
                self.report(node, "a loop counter must be a non-const integer "
                                  "(int, unsigned, long long, unsigned long long)")
                return None
            if not self._new_name(name):
                return None
            declares = True
        elif node.type == "assignment_expression":
            name = node.child_by_field_name("left")
            value = node.child_by_field_name("right")
            operator = node.child_by_field_name("operator")
            if (name is None or name.type != "identifier" or value is None or value.type != "number_literal"
                    or operator is None or operator.type != "="):
                return None
            local = self.lookup(self.text(name))
            if local is None or local.type not in _INTEGER_TYPES:
                return None
            self._assignable(name, context)
            declares = False
        else:
            return None
        literal = _literal(self.text(value))
        if isinstance(literal, str):
            self.report(value, literal)
            return None
        start = _INTEGER_TYPES[local.type].convert(literal[0])
        if start is None:
            self.report(value, f"{self.text(value)} does not fit the loop counter's type")
            return None
        self.accept(node, *[c for c in node.named_children if c.type != "comment"], name, value)
        return self.text(name), local, declares, start

    def _loop_condition(self, node: Node | None, counter: str) -> tuple[str, tuple[int, _IntType]] | None:
        if node is None or node.type != "binary_expression":
            return None
        left, operator, right = (node.child_by_field_name(f) for f in ("left", "operator", "right"))
        if (left is None or left.type != "identifier" or self.text(left) != counter or operator is None
                or operator.type not in _LOOP_CONDITIONS or right is None or right.type != "number_literal"):
            return None
        bound = _literal(self.text(right))
        if isinstance(bound, str):
            self.report(right, bound)
            return None
        self.accept(node, left, right)
        return operator.type, bound

    def _loop_step(self, node: Node | None, counter: str) -> tuple[str, tuple[int, _IntType]] | None:
        if node is None:
            return None
        if node.type == "update_expression":
            argument, operator = node.child_by_field_name("argument"), node.child_by_field_name("operator")
            if argument is None or argument.type != "identifier" or self.text(argument) != counter or operator is None:
                return None
            self.accept(node, argument)
            return ("+=" if operator.type == "++" else "-="), (1, _INT)
        if node.type == "assignment_expression":
            left, operator, right = (node.child_by_field_name(f) for f in ("left", "operator", "right"))
            if (left is None or left.type != "identifier" or self.text(left) != counter or operator is None
                    or operator.type not in _LOOP_STEPS or right is None or right.type != "number_literal"):
                return None
            amount = _literal(self.text(right))
            if isinstance(amount, str):
                self.report(right, amount)
                return None
            self.accept(node, left, right)
            return operator.type, amount
        return None


def _always_returns(node: Node, depth: int = 0) -> bool:
    """Whether every path through a statement ends in a return.  Conservative: loops never count (they may run
    zero times), and past a nesting of 32 the answer is no.  Flowing off the end of the function would be
    undefined behaviour, which the host prover and the device could resolve differently."""
    if depth > 32:
        return False
    if node.type == "return_statement":
        return True
    if node.type == "compound_statement":
        return any(_always_returns(child, depth + 1) for child in node.named_children)
    if node.type == "if_statement":
        consequence = node.child_by_field_name("consequence")
        alternative = node.child_by_field_name("alternative")
        if consequence is None or alternative is None:
            return False
        branch = [n for n in alternative.named_children if n.type != "comment"]
        return bool(branch) and _always_returns(consequence, depth + 1) and _always_returns(branch[0], depth + 1)
    return False
