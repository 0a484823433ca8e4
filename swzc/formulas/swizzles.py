"""The built-in swizzles: a spec is a chain of steps, each from the one table of kinds (swzc.formulas.steps),
run over the kernel's grid by an adapter (swzc.formulas.adapters).  The C++ text produced here is what the
host prover compiles and what the rewrite splices in: one text.

A spec chains steps left to right: ``xcd:8+grouped:8`` first deals ids back to their chiplet, then groups
rows.  The kinds: ``colmajor``, ``grouped:G``, ``serpentine:G``, ``hilbert:K``, ``morton:K``, ``xcd:N`` and
``xcd:N:C`` (steps.py says what each does).  ``/int`` after a spec divides by the grid in integer instructions
instead of ``/`` (``grouped:8@1024/int``): the same order, other code around it (swzc.formulas.divide).

A candidate order (a *formula*) is either a chain of these steps (`SwizzleSpec`) or a function body that
came from outside the family, an LLM's, once swzc.search.llm.restrict has passed it (`CustomSwizzle`,
swzc.formulas.custom).  Both give the same things to the rest of swzc: a name, a kind, the device function
per adapter, and the C++ it needs.  Formulas, not their names, travel through the ranking, the attempts,
the proofs and the outcomes; a name is parsed back (`parse_spec`) only where a person wrote it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from swzc.formulas import divide
from swzc.formulas import steps as table
from swzc.formulas.adapters import Adapter
from swzc.formulas.custom import (  # noqa: F401 - the custom formula's names, where formulas are imported
    COMPILABLE_TEXT, CUSTOM_SIGNATURE, MIN_MAX_CXX, VARIABLE_PREFIX, CustomSwizzle, custom_function)


@dataclass(frozen=True, order=True)
class Step:
    """One step of a spec: its kind, its parameter (0 for colmajor) and, for xcd only, a chunk size (0: none)."""

    kind: str  # a key of swzc.formulas.steps.KINDS
    param: int = 0
    chunk: int = 0

    @property
    def name(self) -> str:
        """As the user writes it: ``colmajor``, ``grouped:8``, ``xcd:8:4``."""
        if table.KINDS[self.kind].letter is None:
            return self.kind
        return f"{self.kind}:{self.param}:{self.chunk}" if self.chunk else f"{self.kind}:{self.param}"

    @property
    def identifier(self) -> str:
        """The name as part of a C identifier: ``grouped8``, ``xcd8c4`` (``xcd84`` would also be xcd:84)."""
        if table.KINDS[self.kind].letter is None:
            return self.kind
        return f"{self.kind}{self.param}c{self.chunk}" if self.chunk else f"{self.kind}{self.param}"

    @property
    def formula(self) -> str:
        """The key of the C++ definition this step calls (swzc.formulas.steps.definitions)."""
        return table.KINDS[self.kind].chunked if self.chunk else self.kind

    def call_cxx(self, integer: bool = False) -> str:
        """The adapter's statement that applies this step to ``p`` (its definition in one division form)."""
        args = f"{self.param}u, {self.chunk}u" if self.chunk else f"{self.param}u"
        return f"  p = {table.function(self.formula, integer)}(p, m, n, {args});\n"


@dataclass(frozen=True)
class SwizzleSpec:
    steps: tuple[Step, ...]
    # A gate on the grid: the order applies only to grids of at least `gate` tiles (m x n, the tile grid's
    # rows times columns; z apart), smaller ones keep the hardware order.  Every block of a launch sees the
    # same grid, so a gated order is the identity or the order on each grid, a bijection either way; the
    # prover still checks the grids on both sides of the gate (swzc.formulas.prove.gate_shapes).  0: no gate.
    gate: int = 0
    # Divide by the grid in integer instructions, not `/` (swzc.formulas.divide): every block goes where it goes
    # with `/`; the code nvcc makes of the kernel around it differs, and the acceptance loop measures which is faster.
    integer: bool = False

    @property
    def name(self) -> str:
        """As the user writes it: ``grouped:8``, ``xcd:8+grouped:8``, ``grouped:64@16384`` (gated: from
        16,384 tiles up), ``grouped:8/int`` (the integer division)."""
        return (("+".join(step.name for step in self.steps) or "identity") + (f"@{self.gate}" if self.gate else "")
                + ("/int" if self.integer else ""))

    @property
    def ungated(self) -> SwizzleSpec:
        """The same order on every grid, as the L2 model ranks it (divided with ``/``: the form moves no block)."""
        return SwizzleSpec(self.steps)

    def gated(self, gate: int) -> SwizzleSpec:
        """The same order from `gate` tiles up (0 or 1: on every grid)."""
        return replace(self, gate=gate if gate > 1 else 0)

    def divided(self, integer: bool) -> SwizzleSpec:
        """The same order in one division form: integer instructions (True) or ``/``."""
        return replace(self, integer=integer)

    def divides(self, adapter: str) -> bool:
        """Whether its code over `adapter` divides by a run-time value (so that its two division forms differ)."""
        return divide.NAME + "(" in cxx_library([(self.divided(True), adapter)])

    @property
    def kind(self) -> str:
        """Its steps without their parameters (`xcd:8:4+grouped:8` -> `xcd+grouped`)."""
        return "+".join(step.kind for step in self.steps) or "identity"

    @property
    def is_identity(self) -> bool:
        return not self.steps

    @property
    def needs_tiles(self) -> bool:
        return any(table.KINDS[step.kind].tiles for step in self.steps)

    def function_name(self, adapter: str) -> str:
        gate = f"_from{self.gate}" if self.gate else ""
        form = divide.SUFFIX if self.integer else ""
        return "swzc_" + "_".join(step.identifier for step in self.steps) + gate + form + "_" + adapter

    def adapter_cxx(self, adapter: str) -> str:
        """The device function mapping the hardware block index to the swizzled one."""
        over = Adapter(adapter)
        body = "".join(step.call_cxx(self.integer) for step in self.steps)
        gate = (f"  if ((unsigned long long)m * n < {self.gate}ull) return make_uint3(bx, by, bz);"
                f"  // under {self.gate} tiles: the hardware order\n") if self.gate else ""
        doc = (f", from {self.gate} tiles up" if self.gate else "") + (", dividing in integer instructions" if self.integer else "")
        return (
            f"// {self.name} {over.doc}{doc}.\n"
            f"static __device__ __forceinline__ uint3 {self.function_name(adapter)}({over.parameters}) {{\n"
            f"{over.head(self.integer)}{gate}{body}{over.tail(self.integer)}}}\n"
        )


def parse_spec(text: str) -> SwizzleSpec:
    """Parse ``identity`` or a chain of steps joined by ``+``, each a kind of swzc.formulas.steps.KINDS with its
    parameter (``grouped:8``) and, for a kind with a chunked form, a chunk size (``xcd:8:4``).  Every parameter
    is from 1 to table.MAX_PARAM; a panel side is a power of two from 2 to 1024.  ``@T`` after the chain gates
    it: the order applies to grids of at least T tiles (``grouped:64@16384``), smaller ones keep theirs.  ``/int``
    last divides by the grid in integer instructions (``grouped:64@16384/int``)."""
    text = text.strip()
    chain, slash, form = text.rpartition("/")
    if slash:
        if form.strip() != "int":
            last = ": /int comes last, after any gate (grouped:8@1024/int)" if form.strip().startswith("int@") else ""
            raise ValueError(f"{text}: after / comes int (the integer division), as in grouped:8/int{last}")
        spec = parse_spec(chain)
        if spec.is_identity or spec.integer:
            raise ValueError(f"{text}: only an order of steps takes /int")
        return spec.divided(True)
    chain, at, gate_text = text.partition("@")
    if at:
        if not re.fullmatch(r"\s*\d{1,10}\s*", gate_text) or not 2 <= int(gate_text) <= table.MAX_GATE:
            raise ValueError(f"{text}: the gate after @ is a tile count from 2 to {table.MAX_GATE}")
        spec = parse_spec(chain)
        if spec.is_identity or spec.gate:
            raise ValueError(f"{text}: only an order of steps takes a gate")
        return spec.gated(int(gate_text))
    if text == "identity":
        return SwizzleSpec(())
    steps = []
    for part in text.split("+"):
        match = re.fullmatch(r"\s*([a-z]+)(?::(\d+))?(?::(\d+))?\s*", part)
        kind = table.KINDS.get(match.group(1)) if match else None
        if kind is None:
            raise ValueError(f"unknown swizzle {part.strip()!r}; known: {table.known()}")
        assert match is not None
        written = part.strip()
        if kind.letter is None:
            if match.group(2) is not None:
                raise ValueError(f"{kind.name} takes no parameter")
            steps.append(Step(kind.name))
            continue
        if match.group(2) is None:
            raise ValueError(f"{kind.name} needs a parameter, e.g. {kind.name}:8")
        value = int(match.group(2))
        if not 1 <= value <= table.MAX_PARAM:
            raise ValueError(f"{written}: {kind.letter} must be between 1 and {table.MAX_PARAM}")
        if kind.panel and (value < 2 or value & (value - 1) or value > table.MAX_PANEL):
            raise ValueError(f"{written}: K must be a power of two from 2 to {table.MAX_PANEL}")
        chunk = 0
        if match.group(3) is not None:
            if kind.chunked_cxx is None:
                raise ValueError(f"{written}: {kind.name} takes one parameter ({kind.name}:{kind.letter}), not two")
            chunk = int(match.group(3))
            if not 1 <= chunk <= table.MAX_PARAM:
                raise ValueError(f"{written}: C must be between 1 and {table.MAX_PARAM}")
        steps.append(Step(kind.name, value, chunk))
    return SwizzleSpec(tuple(steps))


Formula = SwizzleSpec | CustomSwizzle  # a candidate order, whatever proposed it


def cxx_library(uses: list[tuple[Formula, str]]) -> str:
    """The formulas and adapters that a set of (formula, adapter) pairs needs, each once, in a stable order."""
    return "".join(cxx_definitions(uses))


def cxx_definitions(uses: list[tuple[Formula, str]]) -> list[str]:
    """`cxx_library`'s definitions, one by one (each a comment and one function, or the helpers custom bodies use)."""
    formulas = sorted({(step.formula, spec.integer) for spec, _ in uses if isinstance(spec, SwizzleSpec) for step in spec.steps})
    customs = sorted({spec for spec, _ in uses if isinstance(spec, CustomSwizzle)}, key=lambda c: c.key)
    adapters = sorted(set(uses), key=lambda use: use[0].function_name(use[1]))
    cxx = {integer: table.definitions(integer) for integer in {integer for _, integer in formulas}}  # the forms used
    out = ([cxx[integer][formula] for formula, integer in formulas] + ([MIN_MAX_CXX] if customs else [])
           + [c.definition() for c in customs] + [spec.adapter_cxx(adapter) for spec, adapter in adapters])
    # the integer division the integer forms call, first; a custom body cannot call it (its names are checked)
    return divide.helpers("".join(out)) + out
