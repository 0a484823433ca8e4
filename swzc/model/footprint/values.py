"""Integer values of a kernel's expressions as affine forms over the block's symbols: the thread and block
indices (decoded through the launch's adapter), cooperative groups' ranks and sizes, constants the file
fixes, the definitions and moves of locals, loop variables (each a symbol with its start, bound and step),
and the macros and one-statement helpers an expression calls, read with their parameters bound."""

from __future__ import annotations

import math
import re

from tree_sitter import Node

from swzc.analysis.records import TileLoop
from swzc.frontend.evaluate import Evaluator, Macro, Scope, expression_of
from swzc.frontend.source import SourceFile
from swzc.frontend.syntax import text
from swzc.model.footprint.affine import Affine, _CannotFollow, _Loop, _op, _symbols
from swzc.model.footprint.names import KernelNames

UNFIXED_PARAMETER_SAYS = "is a kernel parameter the launch does not fix"
UNFIXED_PARAMETER = re.compile(rf"\b([A-Za-z_]\w*) {UNFIXED_PARAMETER_SAYS}")  # the name a reason says --set must give
from swzc.model.footprint.sets import BlockSets
from swzc.model.footprint.sizes import TypeSizes
from swzc.model.footprint.tree import (_CASTS, _MAX_CHAIN, _MAX_NESTING, _VECTOR_MAKERS, _Ctx, _arguments, _callee,
                                       _conditional_between, _home, _inside_loop_with, _line, _loop_holding, _loop_of,
                                       _loop_symbol, _loop_var_name, _loop_var_names, _loops_around, _nested,
                                       _parameter_names, _short, _where, expression)


class Values:
    """The values of one kernel's expressions under one launch."""

    def __init__(self, src: SourceFile, ev: Evaluator, scope: Scope, launch_grid: tuple[int, int, int],
                 block: tuple[int, int, int], adapter: str, divisor: int | None, tile_loop: TileLoop | None,
                 names: KernelNames, sets: BlockSets, types: TypeSizes) -> None:
        self.src = src
        self.ev = ev
        self.scope = scope
        self.launch_grid = launch_grid
        self.block = block
        self.adapter = adapter
        self.divisor = divisor
        self.tile_loop = tile_loop
        self.names = names
        self.sets = sets
        self.types = types
        self.cache: dict[tuple[int, int, str], Affine] = {}

    def value(self, node: Node | None, ctx: _Ctx | None = None, depth: int = 0) -> Affine:
        if node is None or depth > 60:
            raise _CannotFollow("expression too deep")
        key = (node.start_byte, node.end_byte, node.type)
        if ctx is None and key in self.cache:
            return self.cache[key]
        result = self._value(node, ctx, depth + 1)
        if ctx is None:
            self.cache[key] = result
        return result

    def _value(self, node: Node, ctx: _Ctx | None, depth: int) -> Affine:
        kind = node.type
        if kind == "parenthesized_expression" and node.named_child_count == 1:
            return self.value(node.named_children[0], ctx, depth)
        if kind in ("number_literal", "true", "false", "sizeof_expression", "char_literal"):
            if kind == "sizeof_expression" and node.child_by_field_name("type") is not None:
                size = self.types.sizeof(text(node.child_by_field_name("type")))
                if size:
                    return Affine.of(size)
            return self._constant(node)
        if kind == "cast_expression":
            folded = self.ev.value(node) if ctx is None else None
            if isinstance(folded, int):
                return Affine.of(folded)
            return self.value(node.child_by_field_name("value"), ctx, depth)
        if kind == "field_expression":
            return self._field(node, ctx)
        if kind == "identifier":
            return self._identifier(node, ctx, depth)
        if kind == "unary_expression":
            op = text(node.child_by_field_name("operator"))
            arg = self.value(node.child_by_field_name("argument"), ctx, depth)
            if op in ("-", "+"):
                return arg.scale(-1 if op == "-" else 1)
            return _op(op, arg)
        if kind == "binary_expression":
            return self._binary(node, ctx, depth)
        if kind == "conditional_expression":
            cond = self.value(node.child_by_field_name("condition"), ctx, depth)
            yes = self.value(node.child_by_field_name("consequence"), ctx, depth)
            no = self.value(node.child_by_field_name("alternative"), ctx, depth)
            if cond.is_const:
                return yes if cond.const else no
            if yes.block != no.block:
                raise _CannotFollow(f"a choice between block-dependent values: {_short(node)}")
            return yes.block + _op("?:", cond, yes.local, no.local)
        if kind == "call_expression":
            return self._call_value(node, ctx, depth)
        if kind in ("subscript_expression", "pointer_expression") or kind == "field_expression" and "->" in text(node):
            raise _CannotFollow(f"an index read from memory: {_short(node)}")
        return self._constant(node)

    def _constant(self, node: Node) -> Affine:
        value = self.ev.value(node)
        if isinstance(value, int):
            return Affine.of(value)
        if isinstance(value, float) and value.is_integer() and node.type != "number_literal":
            return Affine.of(int(value))
        raise _CannotFollow(f"not an integer the file fixes: {_short(node)}")

    def _binary(self, node: Node, ctx: _Ctx | None, depth: int) -> Affine:
        op = text(node.child_by_field_name("operator"))
        a = self.value(node.child_by_field_name("left"), ctx, depth)
        b = self.value(node.child_by_field_name("right"), ctx, depth)
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            if a.is_const or b.is_const:
                return b.scale(a.const) if a.is_const else a.scale(b.const)
            if a.block.terms or b.block.terms:
                raise _CannotFollow(f"product of a block-dependent and a varying term: {_short(node)}")
            return _op("*", a, b)
        if op == "<<" and b.is_const and 0 <= b.const < 62:
            return a.scale(1 << b.const)
        if op in ("/", "%") and b.is_const and b.const > 0:
            return self._divide(a, b.const, op, node)
        if op == ">>" and b.is_const and 0 <= b.const < 62:
            return self._divide(a, 1 << b.const, ">>", node)
        if op == "&" and (b.is_const or a.is_const):
            mask, other = (b.const, a) if b.is_const else (a.const, b)
            if mask >= 0 and ((mask + 1) & mask) == 0:  # a low-bit mask is a remainder
                return self._divide(other, mask + 1, "&", node)
            return _op("&", other, Affine.of(mask))
        if op in ("<", ">", "<=", ">=", "==", "!=", "&&", "||", "|", "^", "&", "<<", ">>", "/", "%"):
            return _op(op, a, b)
        raise _CannotFollow(f"operator {op}: {_short(node)}")

    def _divide(self, a: Affine, d: int, op: str, node: Node) -> Affine:
        """a / d or a % d (op "/" or "%", C truncation; ">>" and "&" floor, the same on values >= 0).

        The block terms must stay outside the per-block part: exact when the block coefficients are
        multiples of d and the rest is not negative, or when the block terms that are not multiples,
        with the rest, stay in [0, d) (``blockIdx.x / n`` over a decoded grid)."""
        quotient = op in ("/", ">>")
        if not a.block.terms:
            digit = self._digit(a, d, quotient)
            if digit is not None:
                return digit
            if all(c % d == 0 for _, c in a.terms) and a.const % d == 0:
                return Affine(tuple((s, c // d) for s, c in a.terms), a.const // d) if quotient else Affine.of(0)
            operand = {"/": d, "%": d, "&": d - 1, ">>": d.bit_length() - 1}[op]
            return _op(op, a, Affine.of(operand))
        if any(c < 0 for _, c in a.block.terms):
            raise _CannotFollow(f"division of a value that falls as the block index grows: {_short(node)}")
        whole = Affine(tuple((s, c) for s, c in a.block.terms if c % d == 0), 0)
        rest = Affine(tuple((s, c) for s, c in a.block.terms if c % d), 0)
        lo, hi = self.sets.bounds_of(a.local)
        rlo, rhi = self.sets.bounds_of(rest)
        if rest.terms:
            if rlo + lo >= 0 and rhi + hi < d:
                return Affine(tuple((s, c // d) for s, c in whole.terms), 0) if quotient else rest + a.local
        elif lo >= 0:
            inner = self._divide(a.local, d, op, node)
            return Affine(tuple((s, c // d) for s, c in whole.terms), 0) + inner if quotient else inner
        raise _CannotFollow(f"division with a remainder that varies: {_short(node)}")

    def _digit(self, a: Affine, d: int, quotient: bool) -> Affine | None:
        """a / d and a % d of a value in [0, d), or of a thread index whose range d divides."""
        try:
            lo, hi = self.sets.bounds_of(a)
        except _CannotFollow:
            return None
        if 0 <= lo and hi < d:
            return Affine.of(0) if quotient else a
        if len(a.terms) != 1 or a.const or a.terms[0][1] != 1 or not self.sets.is_thread(a.terms[0][0]):
            return None
        t = a.terms[0][0]
        if self.sets.ranges[t] % d or self.sets.splits.get(t, (d,))[0] != d:
            return None
        if t not in self.sets.splits:
            self.sets.split(t, d)
        return Affine.of(1, self.sets.splits[t][1 if quotient else 2])


    def _field(self, node: Node, ctx: _Ctx | None) -> Affine:
        obj = text(node.child_by_field_name("argument")).lstrip(":")
        axis = text(node.child_by_field_name("field"))
        if axis in ("x", "y", "z"):
            i = "xyz".index(axis)
            if obj == "threadIdx":
                return Affine.of(1, "t" + axis)
            if obj == "blockDim":
                return Affine.of(self.block[i])
            if obj == "gridDim":
                return Affine.of(self.launch_grid[i])
            if obj in ("blockIdx", "swzc_block"):
                return self.block_index(axis)
        made = self._made_vector_part(node, axis, ctx)
        if made is not None:
            return made
        return self._constant(node)

    def _made_vector_part(self, node: Node, axis: str, ctx: _Ctx | None) -> Affine | None:
        """`p.y` of a local `int2 p = make_int2(a, b)` that nothing writes after: b.  None where it is not one."""
        base = node.child_by_field_name("argument")
        if axis not in ("x", "y", "z", "w") or base is None or base.type != "identifier" or ctx is not None and text(base) in ctx.env:
            return None
        name, at = text(base), _where(node, ctx)
        found = self.names.reaching(name, at)
        if found is None or found[1] is None or found[1].type != "call_expression" or _callee(found[1]) not in _VECTOR_MAKERS:
            return None
        where, value = found
        if _loop_of(where) is not None or _conditional_between(where, at) or self.names.is_written(name, where):
            raise _CannotFollow(f"{name} is a vector whose parts change after it is made")
        args = _arguments(value)
        index = "xyzw".index(axis)
        if index >= len(args):
            raise _CannotFollow(f"{_short(node)}: {name} has no part {axis}")
        return self.value(args[index], _home(ctx))


    def block_index(self, axis: str) -> Affine:
        if self.tile_loop is not None:
            raise _CannotFollow("reads the block index inside the tile loop")
        return self._tile_index(axis)

    def _tile_index(self, axis: str) -> Affine:
        if self.adapter == "1d" and axis == "x":
            assert self.divisor is not None
            return Affine((("col", 1), ("row", self.divisor)), 0)
        if self.adapter == "linear" and axis == "x":
            return Affine.of(1, "col")
        if self.adapter in ("1d", "linear") and axis in ("y", "z"):
            # A 1D grid's tiles are all in x; y and z are slices, counted as z * gridDim.y + y (l2model._tiles_of).
            # That count is affine in y alone or in z alone, not in both.
            if self.launch_grid[1] > 1 and self.launch_grid[2] > 1:
                raise _CannotFollow("blockIdx.y and blockIdx.z both vary beside a 1D grid's tiles")
            return Affine.of(1 if axis == "y" else self.launch_grid[1], "z")
        return Affine.of(1, {"x": "col", "y": "row", "z": "z"}[axis])

    def _identifier(self, node: Node, ctx: _Ctx | None, depth: int) -> Affine:
        name = text(node)
        if ctx is not None and name in ctx.env:
            arg, outer = ctx.env[name]
            return self.value(arg, outer, depth)
        at = _where(node, ctx)
        hip = re.fullmatch(r"hip(ThreadIdx|BlockIdx|BlockDim|GridDim)_([xyz])", name)
        if hip:
            kind, axis = hip.groups()
            i = "xyz".index(axis)
            if kind == "ThreadIdx":
                return Affine.of(1, "t" + axis)
            if kind == "BlockIdx":
                return self.block_index(axis)
            return Affine.of((self.block if kind == "BlockDim" else self.launch_grid)[i])
        tile = self.tile_loop
        if tile is not None and name == tile.var and tile.body_start <= at.start_byte < tile.body_end:
            return self._tile_index("x")  # inside the tile loop, its variable is the linear tile index
        found = self.names.reaching(name, at)
        home = _home(ctx)
        if found is not None:
            where, value = found
            loop = _loop_of(where)
            if loop is not None:
                base = self._loop_var(name, where, loop, depth, home)
            else:
                if _conditional_between(where, at):
                    raise _CannotFollow(f"{name} is assigned under a condition or in a loop")
                if value is None:
                    raise _CannotFollow(f"{name} has no initialiser")
                base = self.value(value, home, depth)
            return base + self.moved(name, where, at, 1, depth, home)
        if name in self.names.params and name not in self.names.param_types and self.names.moves.get(name):
            base = self._constant(node)
            return base + self.moved(name, None, at, 1, depth, home)
        if name == "warpSize":
            return Affine.of(64 if self.src.dialect == "hip" else 32)  # HIP's target here: the 64-wide CDNA GPUs
        try:
            return self._constant(node)
        except _CannotFollow:
            if name in self.names.params and ctx is None:
                raise _CannotFollow(f"{name} {UNFIXED_PARAMETER_SAYS} (use --set)") from None
            macro = self.scope.find(name)
            if isinstance(macro, Macro) and macro.params is None and expression_of(macro.body) is not None \
                    and (ctx.depth if ctx else 0) < _MAX_NESTING:
                return self.value(expression_of(macro.body), _nested({}, at, False, ctx), depth)
            raise _CannotFollow(f"{name} is not known") from None

    def _call_value(self, node: Node, ctx: _Ctx | None, depth: int) -> Affine:
        callee = _callee(node)
        args = _arguments(node)
        function = node.child_by_field_name("function")
        if function is not None and function.type == "template_function" and callee in _CASTS and len(args) == 1:
            return self.value(args[0], ctx, depth)
        if callee in ("min", "max", "umin", "umax", "__mul24", "__umul24") and len(args) == 2:
            a, b = (self.value(x, ctx, depth) for x in args)
            if callee in ("__mul24", "__umul24"):
                return self._binary_values("*", a, b, node)
            return _op(callee.lstrip("u"), a, b)
        if ctx is None:
            folded = self.ev.value(node)
            if isinstance(folded, int):
                return Affine.of(folded)
        group = self._group_call(node, ctx)
        if group is not None:
            return group
        expansion = self.expansion(node, ctx)
        if expansion is not None:
            body, inner = expansion
            return self.value(body, inner, depth)
        raise _CannotFollow(f"call to {callee}(): {_short(node)}")

    # -- cooperative groups --------------------------------------------------------------------------------
    def _group_call(self, node: Node, ctx: _Ctx | None) -> Affine | None:
        """Ranks and sizes of cooperative groups: the block, a tile of N threads, the grid."""
        function = node.child_by_field_name("function")
        if function is None or function.type != "field_expression":
            return None
        group = self._group_of(function.child_by_field_name("argument"), ctx)
        if group is None:
            return None
        kind, n = group
        method = text(function.child_by_field_name("field"))
        bx, by, bz = self.block
        threads = bx * by * bz
        rank = Affine((("tx", 1), ("ty", bx), ("tz", bx * by)), 0)
        rank = Affine(tuple(t for t in rank.terms if self.sets.ranges[t[0]] > 1), 0)
        sizes = {"block": threads, "tile": n, "grid": threads * math.prod(self.launch_grid)}
        if method in ("size", "num_threads"):
            return Affine.of(sizes[kind])
        if kind == "tile" and method in ("thread_rank", "meta_group_rank"):
            return self._divide(rank, n, "%" if method == "thread_rank" else "/", node)
        if kind == "tile" and method == "meta_group_size":
            return Affine.of(-(-threads // n))
        if kind == "block" and method == "thread_rank":
            return rank
        if kind == "grid" and method in ("thread_rank", "block_rank"):
            gx, gy, _ = self.launch_grid
            block = self.block_index("x") + self.block_index("y").scale(gx) + self.block_index("z").scale(gx * gy)
            return block.scale(threads) + rank if method == "thread_rank" else block
        return None

    def _group_of(self, obj: Node | None, ctx: _Ctx | None, depth: int = 0) -> tuple[str, int] | None:
        """("block" | "tile" | "grid", tile size) of a cooperative group expression."""
        if obj is None:
            return None
        if depth > _MAX_CHAIN:
            raise _CannotFollow(f"{_short(obj)}: a group named through more than {_MAX_CHAIN} definitions")
        if obj.type == "identifier":
            name = text(obj)
            if ctx is not None and name in ctx.env:
                return self._group_of(*ctx.env[name], depth + 1)
            found = self.names.kind(name, _where(obj, ctx))
            if found is None:  # `cg::thread_block_tile<32> warp = …` can parse as a comparison: read the value
                reaching = self.names.reaching(name, _where(obj, ctx))
                return self._group_of(reaching[1], _home(ctx), depth + 1) if reaching is not None else None
            declaration = found[0].parent
            type_text = text(declaration.child_by_field_name("type")) if declaration is not None else ""
            value = found[0].child_by_field_name("value")
            if "auto" in type_text and value is not None:
                return self._group_of(value, _home(ctx), depth + 1)
            return self._group_type(type_text, ctx)
        if obj.type == "call_expression":
            callee = _callee(obj)
            if callee.endswith("this_thread_block"):
                return "block", 0
            if callee.endswith("this_grid"):
                return "grid", 0
            if callee.endswith("tiled_partition"):
                function = obj.child_by_field_name("function")
                while function is not None and function.type == "qualified_identifier":
                    function = function.child_by_field_name("name")
                targs = function.child_by_field_name("arguments") if function is not None and function.type == "template_function" else None
                return self._group_type(f"thread_block_tile{text(targs)}", ctx) if targs is not None else None
        return None

    def _group_type(self, type_text: str, ctx: _Ctx | None) -> tuple[str, int] | None:
        tile = re.search(r"thread_block_tile\s*<\s*([^,>]+)", type_text)
        if tile:
            size = expression(tile.group(1))
            value = self.ev.value(size) if size is not None else None
            return ("tile", int(value)) if isinstance(value, int) and value > 0 else None
        if re.search(r"\bthread_block\b", type_text):
            return "block", 0
        if re.search(r"\bgrid_group\b", type_text):
            return "grid", 0
        return None

    def _binary_values(self, op: str, a: Affine, b: Affine, node: Node) -> Affine:
        if a.is_const or b.is_const:
            return b.scale(a.const) if a.is_const else a.scale(b.const)
        if a.block.terms or b.block.terms:
            raise _CannotFollow(f"product of a block-dependent and a varying term: {_short(node)}")
        return _op(op, a, b)

    # -- macros and helpers read in place ------------------------------------------------------------------
    def expansion(self, call: Node, ctx: _Ctx | None) -> tuple[Node, _Ctx] | None:
        """The body of a function-like macro, or the returned expression of a one-statement helper, with
        its parameters bound to the call's arguments."""
        callee = _callee(call)
        args = _arguments(call)
        depth = ctx.depth if ctx else 0
        if depth >= _MAX_NESTING:
            return None
        macro = self.scope.find(callee)
        if isinstance(macro, Macro) and macro.params is not None and len(macro.params) == len(args):
            body = expression_of(macro.body)
            if body is not None:
                return body, _nested({p: (a, ctx) for p, a in zip(macro.params, args)}, _where(call, ctx), False, ctx)
        helper = self.names.helpers.get(callee)
        if helper is not None:
            statements = [s for s in helper.child_by_field_name("body").named_children if s.type != "comment"]
            if len(statements) == 1 and statements[0].type == "return_statement" and statements[0].named_child_count == 1:
                names = _parameter_names(helper)
                if len(names) == len(args):
                    return statements[0].named_children[0], _nested({p: (a, ctx) for p, a in zip(names, args)}, _where(call, ctx), True, ctx, callee)
        return None


    # -- moves and loop variables ---------------------------------------------------------------------------
    def moved(self, name: str, where: Node | None, use: Node, unit: int, depth: int, home: _Ctx | None) -> Affine:
        """How far `name` has moved from its definition `where` (None: the start of the kernel) by `use`,
        through `x += e`, `x++`, `x = x + e` in straight-line code or once per iteration of a loop that
        holds the use; in units of `unit` (the pointee's size for a pointer)."""
        total = Affine.of(0)
        function_at = self.names.function_of(use)
        for move, step_node, sign in self.names.moves.get(name, []):
            if self.names.function_of(move) != function_at or (where is not None and move.start_byte < where.end_byte):
                continue
            if not sign:
                raise _CannotFollow(f"{name} changes at line {_line(move)} in a way the analysis does not follow")
            if where is not None and _loop_of(where) is not None:
                raise _CannotFollow(f"loop variable {name} also changes at line {_line(move)}")
            loop, guarded = _loop_holding(move)
            if guarded:
                raise _CannotFollow(f"{name} moves under a condition at line {_line(move)}")
            if loop is None or (where is not None and loop.start_byte <= where.start_byte < loop.end_byte):
                if move.end_byte <= use.start_byte:
                    total = total + self._step_of(step_node, sign, unit, depth, home)
                continue
            if not (loop.start_byte <= use.start_byte < loop.end_byte):
                if loop.start_byte > use.start_byte and not _inside_loop_with(use, loop):
                    continue  # moves only after this use
                raise _CannotFollow(f"{name} moves in the loop at line {_line(loop)}, before this use")
            if where is not None and any(not (o.start_byte <= where.start_byte < o.end_byte) for o in _loops_around(loop)):
                raise _CannotFollow(f"{name} moves in a nested loop at line {_line(loop)}")
            if where is None and _loops_around(loop):
                raise _CannotFollow(f"{name} moves in a nested loop at line {_line(loop)}")
            step = self._step_of(step_node, sign, unit, depth, home)
            if any(s in self.sets.loop_nodes and loop.start_byte <= self.sets.loop_nodes[s].start_byte < loop.end_byte
                   for s in _symbols(step)):
                raise _CannotFollow(f"{name} moves by a step that changes in the loop at line {_line(loop)}")
            iterations = self._iterations(loop, depth, home)
            total = total + self._binary_values("*", iterations, step, move)
            header = loop.child_by_field_name("body")
            in_header = header is not None and not (header.start_byte <= move.start_byte < header.end_byte)
            if not in_header and move.end_byte <= use.start_byte:
                total = total + step  # already moved in this iteration
        return total

    def _step_of(self, node: Node | None, sign: int, unit: int, depth: int, home: _Ctx | None) -> Affine:
        step = Affine.of(1) if node is None else self.value(node, home, depth)
        return step.scale(sign * unit)

    def _iterations(self, loop: Node, depth: int, home: _Ctx | None) -> Affine:
        """Completed iterations of a `for` loop, at a point inside it."""
        if loop.type != "for_statement":
            raise _CannotFollow(f"moves in a loop at line {_line(loop)} without a counter")
        init = loop.child_by_field_name("initializer")
        where = None
        if init is not None and init.type == "declaration":
            where = next(iter(init.children_by_field_name("declarator")), None)
        elif init is not None and init.type in ("assignment_expression", "comma_expression"):
            where = init
            while where is not None and where.type == "comma_expression":  # `a = 0, b = 4`: the counter, a
                where = where.child_by_field_name("left")
        name = _loop_var_name(loop)
        if where is None or not name:
            raise _CannotFollow(f"moves in the loop at line {_line(loop)}, which has no counter")
        var = self._loop_var(name, where, loop, depth, home)
        record = self.sets.loops[_loop_symbol(name, where, home)]
        moved = var - record.block - record.start
        step = abs(record.step)
        moved = moved.scale(1 if record.step > 0 else -1)
        if all(c % step == 0 for _, c in moved.terms) and moved.const % step == 0:
            return Affine(tuple((s, c // step) for s, c in moved.terms), moved.const // step)
        return _op("/", moved, Affine.of(step))

    def _loop_var(self, name: str, where: Node, loop: Node, depth: int, home: _Ctx | None) -> Affine:
        names = _loop_var_names(loop)
        if names and name != names[0] and name in names[1:]:  # `for (a = …, b = …; a < n; a += s, b += t)`
            value = where.child_by_field_name("value") if where.type == "init_declarator" else where.child_by_field_name("right")
            step = _step(loop.child_by_field_name("update"), name, self, home)
            if value is None or step is None:
                raise _CannotFollow(f"loop variable {name} with a start or step the analysis cannot read")
            return self.value(value, home, depth) + self._iterations(loop, depth, home).scale(step)
        symbol = _loop_symbol(name, where, home)
        if symbol not in self.sets.loops:
            self.sets.loop_nodes[symbol] = loop
            value = where.child_by_field_name("value") if where.type == "init_declarator" else where.child_by_field_name("right")
            start = self.value(value, home, depth)
            cond = loop.child_by_field_name("condition")
            if cond is not None and cond.type == "condition_clause":
                cond = cond.named_children[-1] if cond.named_children else None
            while cond is not None and cond.type == "parenthesized_expression" and cond.named_child_count == 1:
                cond = cond.named_children[0]
            if cond is None or cond.type != "binary_expression":
                raise _CannotFollow(f"loop over {name} without a `{name} < bound` condition")
            op = text(cond.child_by_field_name("operator"))
            left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
            if _counter_side(left, name) is None and _counter_side(right, name) is not None:
                left, right, op = right, left, {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
            side = _counter_side(left, name)
            if side is None or op not in ("<", "<=", ">", ">=", "!="):
                raise _CannotFollow(f"loop over {name} with the condition {_short(cond)}")
            bound = self.value(right, home, depth)
            shift, sign = side  # `name + s < bound` is `name < bound - s`
            if shift is not None:
                moved = self.value(shift, home, depth)
                bound = bound - moved if sign > 0 else bound + moved
            step = _step(loop.child_by_field_name("update"), name, self, home)
            if not step:
                raise _CannotFollow(f"loop over {name} with a step the analysis cannot read")
            if op == "!=":
                op = "<" if step > 0 else ">"
            if (op in ("<", "<=")) != (step > 0):
                raise _CannotFollow(f"loop over {name} that steps away from its bound")
            if bound.block.terms and bound.block != start.block:
                raise _CannotFollow(f"loop over {name} whose bound depends on the block index")
            self.sets.loops[symbol] = _Loop(start.local, bound.local, step, op, start.block,
                                       bool(start.block.terms) and not bound.block.terms)
        return self.sets.loops[symbol].block + Affine.of(1, symbol)


def _counter_side(node: Node | None, name: str) -> tuple[Node | None, int] | None:
    """Whether one side of a loop's condition is its counter: `name` (None, 1), `name + s` or `s + name` (s, 1),
    `name - s` (s, -1); None for anything else."""
    if node is None:
        return None
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    if text(node) == name:
        return None, 1
    if node.type != "binary_expression":
        return None
    op = text(node.child_by_field_name("operator"))
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    if op in ("+", "-") and text(left) == name and not re.search(rf"\b{re.escape(name)}\b", text(right)):
        return right, 1 if op == "+" else -1
    if op == "+" and text(right) == name and not re.search(rf"\b{re.escape(name)}\b", text(left)):
        return left, 1
    return None


def _step(update: Node | None, name: str, values: Values, home: _Ctx | None) -> int | None:
    if update is None:
        return None
    if update.type == "comma_expression":  # `a += s, b += t`: the part that moves `name`, if only one does
        steps = [_step(update.child_by_field_name(side), name, values, home) for side in ("left", "right")]
        moving = [step for step in steps if step is not None]
        mentions = sum(bool(re.search(rf"\b{re.escape(name)}\b", text(update.child_by_field_name(side)))) for side in ("left", "right"))
        return moving[0] if len(moving) == 1 and mentions == 1 else None
    t = " ".join(text(update).split())
    if t in (f"{name}++", f"++{name}"):
        return 1
    if t in (f"{name}--", f"--{name}"):
        return -1
    if update.type == "assignment_expression" and text(update.child_by_field_name("left")) == name:
        op = text(update.child_by_field_name("operator"))
        right = update.child_by_field_name("right")
        try:
            if op in ("+=", "-="):
                step = values.value(right, home)
                return (step.const if op == "+=" else -step.const) if step.is_const else None
            if op == "=" and right is not None and right.type == "binary_expression" and text(right.child_by_field_name("left")) == name \
                    and text(right.child_by_field_name("operator")) in ("+", "-"):
                step = values.value(right.child_by_field_name("right"), home)
                sign = 1 if text(right.child_by_field_name("operator")) == "+" else -1
                return sign * step.const if step.is_const else None
        except _CannotFollow:
            return None
    return None
