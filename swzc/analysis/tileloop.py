"""Persistent tile loops: ``for (t = blockIdx.x; t < T; t += gridDim.x)`` and its ``while`` form.

Permuting blocks is safe for any kernel whose blocks do not talk to each other, grid-stride loop or not:
the blocks together still do the same work.  In a persistent kernel, though, the block index is only where
a block starts walking the tiles, so block order hardly changes which tiles run together.  The swizzle goes
inside the loop instead: the body reads ``f(t)`` for a permutation ``f`` of ``[0, T)``.  The blocks
together visit every ``t`` in ``[0, T)`` exactly once, so they visit every ``f(t)`` exactly once, in the
order ``f`` gives.  The loop's own condition and step keep ``t``.

That argument holds only while the loop really is such a walk, and `find` refuses (as hazards, with the
line) what could break it: a body that changes ``t`` or leaves early, a tile count that changes inside
the loop or differs between threads, a loop some blocks skip, and a body that combines ``t`` with the
block index (``t + gridDim.x`` to prefetch the next tile, ``t == blockIdx.x`` for the first one), which
would follow the old order while the tile follows the new one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tree_sitter import Node

from swzc.analysis.records import BlockUse, Decode, Hazard, TileLoop
from swzc.frontend.scope import local_scope
from swzc.analysis.splice_safety import splice_text
from swzc.frontend.syntax import _strip, declared_name, parameter_list, text, walk
from swzc.frontend.evaluate import Evaluator, Scope, expression_of

VARIABLE = "swzc_tile"  # the swizzled tile index the rewrite declares (a fresh name where this one is taken)

# Index types of at most 32 bits: the swizzle functions compute on unsigned 32-bit ids.
_NARROW_TYPES = re.compile(r"^(auto|int|signed|unsigned|signed int|unsigned int|short|unsigned short|short int|"
                           r"char|unsigned char|signed char|uint|u?int(8|16|32)_t|u?int_fast(8|16|32)_t)$")
_INDEX_NAMES = re.compile(r"^(::)?(blockIdx|threadIdx)$|^hip(Block|Thread)Idx_[xyz]$")
_STATEMENT_LISTS = ("compound_statement", "else_clause", "case_statement", "labeled_statement", "translation_unit")
_CONTROL = ("if_statement", "for_statement", "while_statement", "do_statement", "switch_statement", "for_range_loop")
_BODY_FIELDS = ("body", "consequence", "alternative")
_BREAK_TARGETS = ("for_statement", "while_statement", "do_statement", "switch_statement", "for_range_loop")


@dataclass(frozen=True)
class Found:
    """What `find` saw in one kernel."""

    loop: TileLoop | None
    hazards: tuple[Hazard, ...] = ()  # why the loop's tiles must not be permuted
    notes: tuple[str, ...] = ()
    swizzled_by: str = ""  # the swzc function the loop already calls (a file swzc rewrote before)


@dataclass(frozen=True)
class _Match:
    var: str
    loop: Node
    body: Node
    count: Node
    start: Node  # the statement or expression that sets var to blockIdx.x
    update: Node | None  # the `while` form's stepping statement, the last of its body


def find(function: Node, uses: Sequence[BlockUse], grid_reads: Sequence[Node], scope: Scope,
         side_effect: Callable[[Node], str | None]) -> Found:
    """The kernel's tile loop, if it has one: a loop over a variable that starts at blockIdx.x, steps by
    gridDim.x (or a local equal to it) and runs while it is below a count.  `side_effect` says what in an
    expression must not be copied to the top of the body (swzc.analysis.splice_safety)."""
    body = function.child_by_field_name("body")
    starts = {(u.start, u.end) for u in uses if u.axis in ("x", "")}
    grid_x = {(n.start_byte, n.end_byte) for n in grid_reads if text(n).endswith("x")}
    strides = _copies_of(body, grid_x)

    def is_grid_x(node: Node | None) -> bool:
        if node is None:
            return False
        node = _strip(node)
        return (node.start_byte, node.end_byte) in grid_x or node.type == "identifier" and text(node) in strides

    matches = [m for m in (_match(node, starts, is_grid_x) for node in walk(body) if node.type in ("for_statement", "while_statement")) if m]
    if not matches:
        return Found(None)
    if len(matches) > 1:
        lines = " and ".join(str(_line(m.loop)) for m in matches[:2])
        return Found(None, (Hazard(_line(matches[1].loop), f"tile loops at lines {lines}: swzc permutes the tiles of one "
                                   "loop per kernel", "tile-loop"),))
    m = matches[0]
    skip = (m.update.start_byte, m.update.end_byte) if m.update is not None else (0, 0)

    def in_body(node: Node) -> bool:
        return not skip[0] <= node.start_byte < skip[1]

    block_x = _derived(body, lambda n: (n.start_byte, n.end_byte) in starts or (n.start_byte, n.end_byte) in grid_x, {m.var})
    hazards = _hazards(function, m, scope, starts, grid_x, block_x, in_body)
    index_type, type_hazard = _index_type(function, m, scope)
    hazards += type_hazard
    insert_at, indent, inline = _insertion(m.body)
    reads = tuple((n.start_byte, n.end_byte) for n in walk(m.body) if _reads(n, m.var) and in_body(n))
    count_text = " ".join(text(m.count).split())
    count_splice, effect = splice_text(m.count, function, insert_at, side_effect, f"the tile count {count_text!r}")
    hazards += [effect] if effect else []
    notes: list[str] = []
    decode = None
    divisor, lines, note = _decode(m, in_body)
    if note:
        notes.append(note)
    if divisor is not None:
        divisor_text = " ".join(text(divisor).split())
        hazards += _varies(divisor, function, m, f"the decode divisor {divisor_text!r}")
        splice, effect = splice_text(divisor, function, insert_at, side_effect, f"the decode divisor {divisor_text!r}")
        hazards += [effect] if effect else []
        decode = Decode(divisor_text, splice, tuple(lines))
    loop = TileLoop(m.var, _line(m.loop), m.loop.start_byte, m.loop.end_byte, m.body.start_byte, m.body.end_byte,
                    count_text, count_splice, decode, reads, index_type, insert_at, indent, inline,
                    m.body.type == "compound_statement")
    shape = f"decoded as {m.var} / {decode.divisor}" if decode else "not decoded into rows and columns"
    notes.append(f"tile loop over {m.var} (line {loop.line}): {count_text} tiles, {shape}; a swizzle permutes the "
                 "tiles inside the loop, not the blocks")
    return Found(loop, tuple(dict.fromkeys(hazards)), tuple(notes), _swizzled_by(m))


def launch_values(loop: TileLoop, function: Node, scope: Scope) -> tuple[int | None, int | None]:
    """(T, n) for one launch, `scope` holding what the launch binds: evaluated as the spliced text reads them."""
    ev = Evaluator(local_scope(function, loop.insert_at, scope))

    def value(splice: str | None) -> int | None:
        node = expression_of(splice) if splice else None
        got = ev.value(node) if node is not None else None
        return int(got) if got is not None and got >= 1 and float(got).is_integer() else None

    return value(loop.count_splice), value(loop.decode.splice_text) if loop.decode is not None else None


# ---- recognising the loop -------------------------------------------------------------------------------


def _match(node: Node, starts: set[tuple[int, int]], is_grid_x: Callable[[Node | None], bool]) -> _Match | None:
    body = node.child_by_field_name("body")
    if body is None:
        return None
    update: Node | None = None
    if node.type == "for_statement":
        var = _stepped(node.child_by_field_name("update"), is_grid_x)
        condition = node.child_by_field_name("condition")
        init = node.child_by_field_name("initializer")
        start = init if init is not None and var and _sets_to_block(init, var, starts) else None
        if init is None and var:
            start = _set_before(node, var, starts)
    else:
        statements = [c for c in body.named_children if c.type != "comment"] if body.type == "compound_statement" else []
        last = statements[-1] if statements else None
        if last is None or last.type != "expression_statement" or last.named_child_count != 1:
            return None
        var = _stepped(last.named_children[0], is_grid_x)
        update = last
        clause = node.child_by_field_name("condition")
        condition = clause.child_by_field_name("value") if clause is not None and clause.type == "condition_clause" else clause
        start = _set_before(node, var, starts) if var else None
    if not var or start is None or condition is None:
        return None
    count = _bound(condition, var)
    return _Match(var, node, body, count, start, update) if count is not None else None


def _stepped(expr: Node | None, is_grid_x: Callable[[Node | None], bool]) -> str:
    """v for `v += gridDim.x` or `v = v + gridDim.x` (either order), else ''."""
    if expr is None or expr.type != "assignment_expression":
        return ""
    left, right = _strip(expr.child_by_field_name("left")), expr.child_by_field_name("right")
    op = text(expr.child_by_field_name("operator"))
    if left.type != "identifier" or right is None:
        return ""
    var = text(left)
    if op == "+=" and is_grid_x(right):
        return var
    right = _strip(right)
    if op == "=" and right.type == "binary_expression" and text(right.child_by_field_name("operator")) == "+":
        a, b = _strip(right.child_by_field_name("left")), _strip(right.child_by_field_name("right"))
        if a.type == "identifier" and text(a) == var and is_grid_x(b) or b.type == "identifier" and text(b) == var and is_grid_x(a):
            return var
    return ""


def _sets_to_block(node: Node, var: str, starts: set[tuple[int, int]]) -> bool:
    """`int var = blockIdx.x` or `var = blockIdx.x` (casts allowed)."""
    if node.type == "expression_statement" and node.named_child_count == 1:
        node = node.named_children[0]
    if node.type == "declaration":
        for decl in node.children_by_field_name("declarator"):
            if decl.type == "init_declarator" and declared_name(decl) == var:
                value = decl.child_by_field_name("value")
                return value is not None and _at(_strip(value)) in starts
        return False
    if node.type == "assignment_expression" and text(node.child_by_field_name("operator")) == "=":
        left, right = _strip(node.child_by_field_name("left")), node.child_by_field_name("right")
        return left.type == "identifier" and text(left) == var and right is not None and _at(_strip(right)) in starts
    return False


def _set_before(loop: Node, var: str, starts: set[tuple[int, int]]) -> Node | None:
    """The statement before the loop, in its block, that last sets var, if it sets it to blockIdx.x."""
    sibling = loop.prev_named_sibling
    while sibling is not None:
        if any(_writes(n, var) or n.type == "init_declarator" and declared_name(n) == var for n in walk(sibling)):
            return sibling if _sets_to_block(sibling, var, starts) else None
        sibling = sibling.prev_named_sibling
    return None


def _bound(condition: Node, var: str) -> Node | None:
    """T in `var < T` or `T > var`."""
    condition = _strip(condition)
    if condition.type != "binary_expression":
        return None
    op = text(condition.child_by_field_name("operator"))
    left, right = condition.child_by_field_name("left"), condition.child_by_field_name("right")
    if op == "<" and _is_var(left, var):
        return right
    if op == ">" and _is_var(right, var):
        return left
    return None


def _copies_of(body: Node, grid_x: set[tuple[int, int]]) -> set[str]:
    """Locals whose one definition is `= gridDim.x` and that never change: a stride held in a variable."""
    found: dict[str, int] = {}
    changed: set[str] = set()
    for node in walk(body):
        if node.type == "init_declarator":
            value = node.child_by_field_name("value")
            name = declared_name(node)
            found[name] = found.get(name, 0) + (1 if value is not None and _at(_strip(value)) in grid_x else 2)
        elif node.type in ("assignment_expression", "update_expression", "pointer_expression"):
            target = node.child_by_field_name("left") or node.child_by_field_name("argument")
            if target is not None and (node.type != "pointer_expression" or text(node.child_by_field_name("operator")) == "&"):
                changed.add(text(_strip(target)))
    return {name for name, count in found.items() if count == 1 and name not in changed}


# ---- what would break a permutation of the tiles ----------------------------------------------------------


def _hazards(function: Node, m: _Match, scope: Scope, starts: set[tuple[int, int]], grid_x: set[tuple[int, int]],
             block_x: set[str], in_body: Callable[[Node], bool]) -> list[Hazard]:
    found: list[Hazard] = []
    var = m.var
    for node in walk(m.body):
        if not in_body(node):
            continue
        line = _line(node)
        if _writes(node, var):
            what = "takes its address" if node.type == "pointer_expression" else "changes it"
            found.append(Hazard(line, f"the tile loop's variable {var} is not only stepped by the loop: line {line} {what}; "
                                "a permuted tile index would no longer follow it", "tile-loop"))
        elif node.type == "init_declarator" and declared_name(node) == var or node.type == "declaration" and any(
                d.type == "identifier" and text(d) == var for d in node.children_by_field_name("declarator")):
            found.append(Hazard(line, f"line {line} declares another {var} inside the tile loop", "tile-loop"))
        elif node.type in ("break_statement", "return_statement", "goto_statement") and _leaves(node, m.loop):
            word = node.type.split("_")[0]
            found.append(Hazard(line, f"the tile loop can stop early ({word}, line {line}): which tiles it visits would "
                                "then depend on their order", "tile-loop"))
        elif node.type == "identifier" and scope.macros.get(text(node)) is not None:
            macro = scope.macros[text(node)]
            assert macro is not None
            if var not in (macro.params or ()) and var in _identifiers(macro.body):
                found.append(Hazard(line, f"macro {text(node)} reads the tile loop's variable {var} (line {line}); macro "
                                    "bodies are opaque to the rewrite", "tile-loop"))
        elif node.type == "assignment_expression" and text(_strip(node.child_by_field_name("left"))) in block_x:
            name = text(_strip(node.child_by_field_name("left")))
            found.append(Hazard(line, f"{name}, computed from blockIdx.x or gridDim.x, changes inside the tile loop "
                                f"(line {line}): it may follow the tile order, which the swizzle changes", "tile-loop"))
    tile = _derived(function.child_by_field_name("body"), lambda n: _is_var(n, var), {var})

    def reads_tile(node: Node) -> bool:
        return any(in_body(n) and (_reads(n, var) or n.type == "identifier" and text(n) in tile) for n in walk(node))

    for node in walk(m.body):
        if not in_body(node) or not (_at(node) in starts or _at(node) in grid_x or text(node) in block_x and _reads(node, text(node))):
            continue
        if any(_writes(n, var) for n in walk(_unit(node))):
            continue  # reported above
        if _combines(node, reads_tile):
            line = _line(node)
            found.append(Hazard(line, f"line {line} combines the tile index {var} with the block index ({text(node)}): it "
                                "would follow the old tile order while the tile follows the new one", "tile-loop"))
            break
    found += _varies(m.count, function, m, f"the tile count {' '.join(text(m.count).split())!r}")
    found += _skipped_by_some_blocks(function, m, starts, grid_x, block_x)
    return found


def _varies(expr: Node, function: Node, m: _Match, label: str) -> list[Hazard]:
    """A tile count or divisor that is not one value for the whole loop and every thread of a block."""
    body = function.child_by_field_name("body")
    line = _line(expr)
    index = _derived(body, lambda n: n.type in ("identifier", "field_expression") and _is_index_x_or_thread(n), set())
    if any(_is_var(n, m.var) for n in walk(expr)):
        return [Hazard(line, f"{label} (line {line}) depends on the loop variable {m.var}", "tile-loop")]
    if any(n.type in ("identifier", "field_expression") and _is_index_x_or_thread(n) or n.type == "identifier" and text(n) in index
           for n in walk(expr)):
        return [Hazard(line, f"{label} (line {line}) depends on blockIdx.x or threadIdx: blocks or threads would permute "
                       "different tile spaces", "tile-loop")]
    names = {text(n) for n in walk(expr) if n.type == "identifier"}
    for node in walk(m.loop):
        if _writes(node, *names) and node.start_byte >= m.body.start_byte:
            return [Hazard(line, f"{label} changes inside the tile loop (line {_line(node)})", "tile-loop")]
    return []


def _is_index_x_or_thread(node: Node) -> bool:
    """blockIdx.x, the whole blockIdx, or any threadIdx: what a tile count must not depend on."""
    if node.type == "field_expression":
        base = _strip(node.child_by_field_name("argument"))
        field = text(node.child_by_field_name("field"))
        return text(base).lstrip(":") == "blockIdx" and field == "x" or text(base).lstrip(":") == "threadIdx"
    name = text(node)
    if name in ("hipBlockIdx_x",) or name.startswith("hipThreadIdx_"):
        return True
    parent = node.parent
    return name.lstrip(":") == "blockIdx" and not (parent is not None and parent.type == "field_expression")


def _skipped_by_some_blocks(function: Node, m: _Match, starts: set[tuple[int, int]], grid_x: set[tuple[int, int]],
                            block_x: set[str]) -> list[Hazard]:
    """A loop that some blocks never reach (a branch or an early return on blockIdx.x) does not visit every tile,
    and a permutation would change which ones it visits.  `if (blockIdx.x >= T) return;` is harmless: those
    blocks start past the last tile anyway."""

    def reads_block_x(node: Node) -> bool:  # before the loop, its variable is blockIdx.x too
        return any(_at(n) in starts or _at(n) in grid_x or n.type == "identifier" and text(n) in block_x
                   or n.end_byte <= m.loop.start_byte and _reads(n, m.var) for n in walk(node))

    def guards(node: Node) -> Node | None:
        """The nearest control statement whose condition decides whether `node` runs, and reads blockIdx.x."""
        child, parent = node, node.parent
        while parent is not None and parent != function:
            if parent.type in _CONTROL or parent.type == "conditional_expression":
                header = [c for i, c in enumerate(parent.children) if parent.field_name_for_child(i) not in (*_BODY_FIELDS, None)]
                if child not in header and any(reads_block_x(h) for h in header) and not _past_last_tile(header, m):
                    return parent
            child, parent = parent, parent.parent
        return None

    guard = guards(m.loop)
    if guard is not None:
        return [Hazard(_line(guard), f"the tile loop runs only in some blocks (line {_line(guard)} tests blockIdx.x): it "
                       "would not visit every tile, and a permutation would change which", "tile-loop")]
    for node in walk(function.child_by_field_name("body")):
        if node.type == "return_statement" and node.end_byte <= m.loop.start_byte and not _in_lambda(node):
            guard = guards(node)
            if guard is not None:
                return [Hazard(_line(node), f"blocks may return before the tile loop (line {_line(node)}, on blockIdx.x): "
                               "it would not visit every tile, and a permutation would change which", "tile-loop")]
    return []


def _past_last_tile(header: list[Node], m: _Match) -> bool:
    """`blockIdx.x >= T` (or `T <= blockIdx.x`, or the loop variable before the loop) with T the loop's own count:
    true only for blocks that have no tile anyway."""
    count = " ".join(text(m.count).split())
    for node in header:
        node = _strip(node.child_by_field_name("value") or node) if node.type == "condition_clause" else _strip(node)
        if node.type != "binary_expression":
            continue
        op = text(node.child_by_field_name("operator"))
        left, right = _strip(node.child_by_field_name("left")), _strip(node.child_by_field_name("right"))
        sides = {">=": (left, right), "<=": (right, left)}.get(op)
        if sides and (_BLOCK_X.match(text(sides[0])) or _is_var(sides[0], m.var)) and " ".join(text(sides[1]).split()) == count:
            return True
    return False


_BLOCK_X = re.compile(r"^\s*(::)?blockIdx\s*\.\s*x\s*$|^\s*hipBlockIdx_x\s*$")


def _leaves(node: Node, loop: Node) -> bool:
    """A break that ends `loop` itself, or a return or goto anywhere in it (not inside a lambda)."""
    if _in_lambda(node, loop):
        return False
    if node.type != "break_statement":
        return True
    parent = node.parent
    while parent is not None and parent != loop:
        if parent.type in _BREAK_TARGETS:
            return False
        parent = parent.parent
    return True


def _in_lambda(node: Node, stop: Node | None = None) -> bool:
    parent = node.parent
    while parent is not None and parent != stop:
        if parent.type == "lambda_expression":
            return True
        parent = parent.parent
    return False


def _combines(node: Node, reads_tile: Callable[[Node], bool]) -> bool:
    """Whether a read of the block index (`node`) meets the tile index in one value (`t + gridDim.x`,
    `t == blockIdx.x`, `out[blockIdx.x * T + t]`), or decides whether code that reads the tile runs.  A per-block
    address is neither (`scratch[blockIdx.x] = f(t)`, `x = mine[i]` with `mine = work + blockIdx.x * S`): the
    blocks are not permuted, and what such an access yields is data, not the block index."""
    unit = _unit(node)
    if unit.type in _CONTROL:  # node is in the condition: what it decides reads the tile?
        return reads_tile(unit)
    current = node.parent
    while current is not None:
        if reads_tile(current):
            return True
        if current.type == "subscript_expression" or current.type == "pointer_expression" and text(current.child_by_field_name("operator")) == "*":
            return False  # an address: the value above it is what memory holds there
        if current == unit:
            return False
        current = current.parent
    return False


def _unit(node: Node) -> Node:
    """The statement `node` is part of; for a node in the condition or header of an if, loop or switch, the
    whole statement with its body (what the condition decides is part of the computation)."""
    while node.parent is not None:
        parent = node.parent
        if parent.type in _STATEMENT_LISTS:
            return node
        if parent.type in _CONTROL:
            index = next(i for i, c in enumerate(parent.children) if c == node)
            return node if parent.field_name_for_child(index) in _BODY_FIELDS else parent
        node = parent
    return node


def _derived(body: Node, seed: Callable[[Node], bool], exclude: set[str]) -> set[str]:
    """Locals computed from what `seed` matches, directly or through other such locals."""
    definitions: list[tuple[str, Node]] = []
    for node in walk(body):
        if node.type == "init_declarator" and node.child_by_field_name("value") is not None:
            definitions.append((declared_name(node), node.child_by_field_name("value")))  # type: ignore[arg-type]
        elif node.type == "assignment_expression" and _strip(node.child_by_field_name("left")).type == "identifier":
            definitions.append((text(_strip(node.child_by_field_name("left"))), node.child_by_field_name("right")))  # type: ignore[arg-type]
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, value in definitions:
            if name not in found and name not in exclude and any(seed(n) or n.type == "identifier" and text(n) in found for n in walk(value)):
                found.add(name)
                changed = True
    return found


# ---- the decode, the type, the insertion point ---------------------------------------------------------


def _decode(m: _Match, in_body: Callable[[Node], bool]) -> tuple[Node | None, list[int], str | None]:
    """The divisor n of `t / n` and `t % n` in the body (directly or through a copy of t)."""
    aliases = {declared_name(n) for n in walk(m.body) if n.type == "init_declarator" and in_body(n)
               and _is_var(n.child_by_field_name("value"), m.var)}
    aliases -= {text(_strip(n.child_by_field_name("left") or n.child_by_field_name("argument")))
                for n in walk(m.body) if n.type in ("assignment_expression", "update_expression")}
    divisors: dict[str, Node] = {}
    lines: list[int] = []
    for node in walk(m.body):
        if node.type == "binary_expression" and in_body(node) and text(node.child_by_field_name("operator")) in ("/", "%"):
            left = _strip(node.child_by_field_name("left"))
            if left.type == "identifier" and text(left) in (m.var, *aliases):
                right = node.child_by_field_name("right")
                divisors.setdefault(" ".join(text(right).split()), right)
                lines.append(_line(node))
    if len(divisors) > 1:
        return None, [], f"{m.var} is divided by different values ({', '.join(divisors)}): no single tile decode"
    if not divisors:
        return None, [], None
    return next(iter(divisors.values())), lines, None


def _index_type(function: Node, m: _Match, scope: Scope) -> tuple[str, list[Hazard]]:
    """The loop variable's declared type, which the swizzled copy takes too (same signedness in arithmetic)."""
    declared = ""
    if m.start.type == "declaration":
        declared = text(m.start.child_by_field_name("type"))
    else:
        earlier = [n for n in walk(function.child_by_field_name("body")) if n.type == "declaration" and n.end_byte <= m.loop.start_byte
                   and any(declared_name(d) == m.var for d in n.children_by_field_name("declarator"))]
        if earlier:
            declared = text(earlier[-1].child_by_field_name("type"))
        else:
            declared = next((p.type for p in parameter_list(function) if p.name == m.var and not p.pointer), "")
    declared = " ".join(declared.split())
    resolved = scope.resolve_type(declared)
    if _NARROW_TYPES.match(resolved):
        return declared, []
    line = _line(m.loop)
    why = f"is a {resolved}, wider than" if resolved and re.search(r"long|64|size_t|ptrdiff", resolved) else \
        f"has type {declared or 'unknown'}, not known to fit in"
    return declared or "unsigned", [Hazard(line, f"the tile loop's variable {m.var} {why} the 32 bits the swizzle "
                                          f"functions compute with (line {line})", "tile-loop")]


def _insertion(body: Node) -> tuple[int, str, bool]:
    """Where the swizzled index is declared: before the body's first statement, on a line of its own where that
    statement starts a line.  (offset, indent, inline)"""
    if body.type != "compound_statement":
        return body.start_byte, "", True
    first = next((c for c in body.named_children if c.type != "comment"), None)
    if first is None:
        return body.start_byte + 1, "", True
    data = body.text or b""
    offset = first.start_byte - body.start_byte
    line_start = data.rfind(b"\n", 0, offset) + 1  # 0: on the brace's line
    prefix = data[line_start:offset]
    if line_start > 0 and prefix.strip() == b"":
        return body.start_byte + line_start, prefix.decode("utf-8", "surrogateescape"), False
    return first.start_byte, "", True


def _swizzled_by(m: _Match) -> str:
    for node in walk(m.body):
        if node.type == "call_expression":
            name = text(node.child_by_field_name("function"))
            args = node.child_by_field_name("arguments")
            first = next((c for c in args.named_children if c.type != "comment"), None) if args is not None else None
            if name.startswith("swzc_") and first is not None and _is_var(first, m.var):
                return name
    return ""


# ---- small tree predicates -------------------------------------------------------------------------------


def _identifiers(code: str) -> set[str]:
    """The names in a macro body, its comments and literals left out."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/|\"(\\.|[^\"\\])*\"|'(\\.|[^'\\])*'", " ", code, flags=re.S)
    return set(re.findall(r"[A-Za-z_]\w*", code))


def _at(node: Node) -> tuple[int, int]:
    return node.start_byte, node.end_byte


def _line(node: Node) -> int:
    return node.start_point.row + 1


def _is_var(node: Node | None, var: str) -> bool:
    return node is not None and _strip(node).type == "identifier" and text(_strip(node)) == var


def _reads(node: Node, var: str) -> bool:
    """An identifier node that reads `var` (not a declarator, a field or a callee)."""
    if node.type != "identifier" or text(node) != var:
        return False
    parent = node.parent
    if parent is None:
        return True
    if parent.type in ("init_declarator", "declaration", "parameter_declaration") and parent.child_by_field_name("declarator") == node:
        return False
    return not (parent.type == "call_expression" and parent.child_by_field_name("function") == node)


def _writes(node: Node, *names: str) -> bool:
    """An assignment, ++/-- or & of one of `names`."""
    if node.type == "assignment_expression":
        target = node.child_by_field_name("left")
    elif node.type == "update_expression":
        target = node.child_by_field_name("argument")
    elif node.type == "pointer_expression" and text(node.child_by_field_name("operator")) == "&":
        target = node.child_by_field_name("argument")
    else:
        return False
    return target is not None and _strip(target).type == "identifier" and text(_strip(target)) in names

