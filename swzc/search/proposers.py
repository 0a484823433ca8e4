"""Where candidate orders come from, and the one loop that vets them.

A *proposer* offers formulas (swzc.formulas.swizzles.Formula) for one kernel, one at a time, and may read what
became of the earlier ones: the built-in family (its order fixed by the L2 model's ranking) or an LLM
(swzc.search.llm.proposer).  Whatever proposed it, a formula goes through the same steps before it counts:

  proof (a bijection of the grid or tile space, in bounds, not the identity)
  -> the L2 model's prediction, where it can rank the kernel
  -> with a GPU, the measured acceptance rule (swzc.verify.bench, swzc.verify.accept).

Each candidate leaves one `Tried` record in the kernel's history, rejected or judged, with the reason.
Nothing is accepted on a proposer's word.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from swzc.analysis.records import FileAnalysis, KernelInfo, Shape
from swzc.core.errors import SwzcError
from swzc.frontend.evaluate import Value
from swzc.target.hw import HardwareModel
from swzc.passes import block_swizzle
from swzc.formulas.prove import Proof, prove
from swzc.model.l2model import Prediction
from swzc.model.rank import Ranking, rank
from swzc.analysis.context import FileContext
from swzc.formulas.swizzles import Formula, Step, SwizzleSpec

PROPOSERS = ("builtin", "llm", "both")
EXPLORE = SwizzleSpec((Step("colmajor"),))  # the one candidate the loop measures when the model predicts no gain


@dataclass(frozen=True)
class KernelTask:
    """What a proposer may read about the kernel it proposes for."""

    ctx: FileContext
    analysis: FileAnalysis
    index: int
    hw: HardwareModel
    ranking: Ranking | str | None  # the L2 model's ranking of the family, or why it cannot rank
    bindings: Mapping[str, Value] = field(default_factory=dict)
    measured: bool = False  # a GPU judges the candidates

    @property
    def kernel(self) -> KernelInfo:
        return self.analysis.kernels[self.index]

    @property
    def adapter(self) -> str:
        return self.kernel.adapter

    @property
    def shapes(self) -> tuple[Shape, ...] | None:
        """The grids a candidate is proven on: the launches', or the grids a sweep of sizes ranked."""
        if self.kernel.shapes is None and isinstance(self.ranking, Ranking) and self.ranking.sweep is not None:
            return self.ranking.sweep.shapes
        return self.kernel.shapes


@dataclass(frozen=True)
class Proposed:
    """A proposer's answer: a formula, or why it could not give one (a reply that failed the safe subset)."""

    proposer: str
    formula: Formula | None
    note: str = ""  # what the proposer expects of it
    rejection: str = ""  # set when formula is None
    label: str = ""  # the name it was given, when there is no formula
    # an order tried before, in its other division form (swzc.formulas.divide): not counted among the iterations
    variant: bool = False


@dataclass(frozen=True)
class Tried:
    """One candidate and what became of it."""

    name: str
    proposer: str
    status: str  # "rejected", "predicted", "measured", "accepted"
    detail: str  # the reason: a counterexample, the model's numbers, the measured verdict
    formula: Formula | None = None
    predicted: float | None = None  # the L2 model's hit rate, %
    speedup: float | None = None  # measured, original time / candidate time
    note: str = ""
    by_size: tuple[tuple[int, float], ...] = ()  # measured at several sizes: (size, speedup) at each it ran at

    @property
    def judged(self) -> bool:
        return self.status != "rejected"


class Proposer(Protocol):
    name: str

    def propose(self, task: KernelTask, history: Sequence[Tried]) -> Proposed | None:
        """The next candidate, or None when this proposer has nothing more to offer."""


class BuiltinProposer:
    """The built-in family: the L2 model's candidates above identity, in the order a GPU should time them
    (swzc.model.rank.Ranking.to_measure: the best, then other kinds the model rates as ties); where it sees no gain, the
    transposed raster (only when a GPU measures it: the model is blind to write locality; over a sweep, gated from
    the first size whose written bytes exceed the L2: below it what the kernel writes fits there); where it cannot
    rank, an even spread of the family (only when measured: nothing is chosen blind).

    With a GPU, the first candidate is measured in both division forms (``/``, then ``/int``: swzc.formulas.divide),
    which put every block in the same place but make different code of the kernel around them; the other
    candidates are measured in the form that was faster (`_faster_form`).  Where the fastest accepted order so far
    has a slower one of its kind on one side, the next of its kind on the other side is measured before the
    ranking's next (`_along`).  Offline every candidate divides with ``/``."""

    name = "builtin"

    def candidates(self, task: KernelTask) -> list[tuple[SwizzleSpec, float | None]]:
        ranking = task.ranking
        if isinstance(ranking, Ranking) and ranking.sweep is not None and ranking.sweep.gated:
            # each order that pays from some size up, gated
            return [(spec, known.l2_hit_rate) for spec in ranking.sweep.gated
                    if (known := ranking.prediction(spec.ungated.name)) is not None]
        if isinstance(ranking, Ranking):
            if ranking.chosen is None:  # at its one grid, or at no size of its sweep (measured at each of them)
                explore = next((p for p in ranking.predictions if p.formula == EXPLORE), None)
                if explore is None or not task.measured:
                    return []
                sweep = ranking.sweep
                if sweep is not None and sweep.writes_past_l2 is not None:  # write locality shows from there up
                    return [(EXPLORE.gated(sweep.gate_at(sweep.writes_past_l2)), explore.l2_hit_rate)]
                return [(EXPLORE, explore.l2_hit_rate)]
            floor, bytes_floor = ranking.identity.l2_hit_rate, ranking.identity.dram_bytes
            return [(p.formula, p.l2_hit_rate) for p in ranking.to_measure  # none predicted to move more bytes
                    if p.formula is not None and not p.formula.is_identity and p.l2_hit_rate > floor
                    and p.dram_bytes <= bytes_floor]
        if not task.measured:
            return []
        return [(spec, None) for spec in block_swizzle.family(task.kernel, task.hw)]

    def propose(self, task: KernelTask, history: Sequence[Tried]) -> Proposed | None:
        done = {t.name for t in history}
        specs = [spec for spec, _ in self.candidates(task)]
        if not specs:
            return None
        first, integer = specs[0], specs[0].divided(True)
        if task.measured and first.divides(task.adapter) and integer.name not in done and any(
                t.formula == first and t.speedup is not None for t in history):
            return Proposed(self.name, integer, f"{first.name} again, dividing in integer instructions", variant=True)
        form = _faster_form(first, history)
        ahead = _along(specs, history, form)
        if ahead is not None and ahead.name not in done:
            return Proposed(self.name, ahead, "the next parameter of the fastest order's kind, past the slower one")
        for spec in specs:
            if spec.divided(form).name not in done:
                return Proposed(self.name, spec.divided(form))
        return None


def _along(specs: Sequence[SwizzleSpec], history: Sequence[Tried], integer: bool) -> SwizzleSpec | None:
    """One step of a line search over a kind's parameter (the group height, the tile side), among the candidates in
    one division form: where the fastest accepted order so far has a slower one of its kind on one side, the
    candidate of that kind whose parameter comes next beyond the fastest, on the other side.  None where no order of
    its kind was slower, the fastest was slower on both sides of it, or the next beyond it was tried.  (Orders that
    move about as many bytes as each other are told apart by the time they take, not by the model.)"""
    def line(spec: SwizzleSpec) -> tuple | None:
        """The order with its last step's parameter left out; None where the last step has none."""
        last = spec.steps[-1] if spec.steps else None
        return None if last is None or not last.param else (spec.steps[:-1], last.kind, last.chunk)

    # (order, speedup, accepted) of each order timed in this form that has a parameter
    timed = [(t.formula, t.speedup, t.status == "accepted") for t in history if isinstance(t.formula, SwizzleSpec)
             and t.speedup is not None and t.formula.integer == integer and line(t.formula) is not None]
    fastest = max(((f, speedup) for f, speedup, accepted in timed if accepted), key=lambda x: x[1], default=None)
    if fastest is None:
        return None
    best, best_speedup = fastest
    kind, k = line(best), best.steps[-1].param
    mine = [(f.steps[-1].param, speedup) for f, speedup, _ in timed if line(f) == kind]
    slower = [p for p, speedup in mine if speedup < best_speedup]
    up, down = any(p < k for p in slower), any(p > k for p in slower)
    if up == down:
        return None
    beyond = sorted((spec.steps[-1].param, spec.ungated.name, spec) for spec in specs if line(spec) == kind
                    and (spec.steps[-1].param > k if up else spec.steps[-1].param < k))
    if not beyond:
        return None
    param, _, spec = beyond[0] if up else beyond[-1]
    return None if any(p == param for p, _ in mine) else spec.divided(integer)


def _faster_form(spec: SwizzleSpec, history: Sequence[Tried]) -> bool:
    """Whether the integer division form of `spec` measured faster than its `/` form: accepted where the other was
    not; else faster over the sizes both ran at (the geometric mean of the ratio of their speedups above 1: a loop
    over several sizes stops a candidate at the first size it is slower at), or at the one size measured.  False
    where either was not measured, and on a tie."""
    def measured(formula: SwizzleSpec) -> Tried | None:
        return next((t for t in history if t.formula == formula and t.speedup is not None), None)

    plain, integer = measured(spec.divided(False)), measured(spec.divided(True))
    if plain is None or integer is None:
        return False
    if (plain.status == "accepted") != (integer.status == "accepted"):
        return integer.status == "accepted"
    mine, theirs = dict(integer.by_size), dict(plain.by_size)
    common = sorted(mine.keys() & theirs.keys())
    if not common:
        return (integer.speedup or 0.0) > (plain.speedup or 0.0)
    return math.fsum(math.log(mine[s] / theirs[s]) for s in common) > 0.0


class Forced:
    """--swizzle: the one formula the user named."""

    name = "user"

    def __init__(self, formula: Formula) -> None:
        self.formula = formula

    def propose(self, task: KernelTask, history: Sequence[Tried]) -> Proposed | None:
        return None if history else Proposed(self.name, self.formula)


def vet(task: KernelTask, proposed: Proposed) -> Tried:
    """Prove a proposed formula for the kernel and, where the L2 model ranks the kernel, predict it."""
    formula = proposed.formula
    if formula is None:
        return Tried(proposed.label or "(no formula)", proposed.proposer, "rejected", proposed.rejection, note=proposed.note)
    try:
        (proof,) = prove([(formula, task.adapter, task.shapes)])
    except SwzcError as exc:  # a body that does not compile for the host, or a proof past its time
        return Tried(formula.name, proposed.proposer, "rejected", exc.message, formula, note=proposed.note)
    if not proof.ok:
        why = proof.failure if proof.failure.startswith("proven only on sample grids") else f"not a permutation: {proof.failure}"
        return Tried(formula.name, proposed.proposer, "rejected", why, formula, note=proposed.note)
    if proof.identity:
        return Tried(formula.name, proposed.proposer, "rejected", f"the identity on {_where(proof)}: it changes nothing",
                     formula, note=proposed.note)
    known = _prediction(task, formula)
    if isinstance(known, Prediction) and isinstance(task.ranking, Ranking) and known.dram_bytes > task.ranking.identity.dram_bytes:
        base = task.ranking.identity
        return Tried(formula.name, proposed.proposer, "rejected",
                     f"predicted to move more bytes from DRAM than the original ({known.dram_bytes / 1e6:,.0f} MB against "
                     f"{base.dram_bytes / 1e6:,.0f} MB, at {known.l2_hit_rate:.1f} % L2 hits): no such order is chosen or measured",
                     formula, known.l2_hit_rate, note=proposed.note)
    predicted, detail = _said(task, known)
    return Tried(formula.name, proposed.proposer, "predicted", detail, formula, predicted, note=proposed.note)


def _where(proof: Proof) -> str:
    if proof.sampled:
        return f"{len(proof.shapes)} sample grids"
    return ", ".join(f"{x}x{y}x{z}" + (f" n={n}" if n else "") for x, y, z, n in proof.shapes)


def _prediction(task: KernelTask, formula: Formula) -> Prediction | str:
    """The L2 model's prediction for a formula, from the kernel's ranking where it has it; why not, where the
    model cannot rank it."""
    ranking = task.ranking
    if not isinstance(ranking, Ranking):
        return f"proven; the L2 model cannot rank this kernel ({ranking or 'no ranking'})"
    gated = isinstance(formula, SwizzleSpec) and formula.gate
    if isinstance(formula, SwizzleSpec):
        formula = formula.divided(False)  # the model sees where blocks go, not how their place is computed
    known = next((p for p in ranking.predictions if p.formula == (formula.ungated if gated else formula)), None)  # type: ignore[union-attr]
    if known is None and gated:
        return f"proven; the L2 model did not rank {formula.name} over the sizes swept"
    if known is None:
        # with the residency the family was ranked with, so that the numbers compare
        got = rank(task.ctx, task.kernel, task.hw, task.bindings, [SwizzleSpec(()), formula], running=ranking.residency)
        if not isinstance(got, Ranking):
            return f"proven; the L2 model cannot rank it ({got})"
        known = next(p for p in got.predictions if p.formula == formula)
    return known


def predict(task: KernelTask, formula: Formula) -> tuple[float | None, str]:
    """The L2 model's hit rate for a formula, from the kernel's ranking where it has it; (None, why) when the
    model cannot rank the kernel."""
    return _said(task, _prediction(task, formula))


def _said(task: KernelTask, known: Prediction | str) -> tuple[float | None, str]:
    """A prediction (`_prediction`'s) as the hit rate and the line that says it beside identity's."""
    if isinstance(known, str):
        return None, known
    ranking = task.ranking
    assert isinstance(ranking, Ranking)
    base = ranking.identity
    at = f" at the largest size swept ({ranking.sweep.points[-1].size})" if ranking.sweep is not None else ""
    return known.l2_hit_rate, (f"proven; predicted {known.l2_hit_rate:.1f} % L2 hits and {known.dram_bytes / 1e6:,.0f} MB "
                               f"from DRAM{at} (identity {base.l2_hit_rate:.1f} %, {base.dram_bytes / 1e6:,.0f} MB)")


Measure = Callable[[Formula, float | None, str], Tried]


def search(task: KernelTask, proposers: Sequence[Proposer], iterations: int, measure: Measure | None = None,
           history: list[Tried] | None = None) -> list[Tried]:
    """Ask each proposer in turn for up to `iterations` candidates, vet each, and measure the proven ones
    when a GPU is at hand.  Every proposer sees everything tried before it, by itself or by the others."""
    history = [] if history is None else history
    for proposer in proposers:
        step, spared = 0, False
        while step < iterations:
            proposed = proposer.propose(task, history)
            if proposed is None:
                break
            if proposed.variant and not spared:
                spared = True  # one order in its other division form, beside its first: not counted
            else:
                step += 1
            tried = vet(task, proposed)
            if tried.judged and measure is not None:
                assert tried.formula is not None
                tried = measure(tried.formula, tried.predicted, f"{step}/{iterations}")
                tried = replace(tried, proposer=proposed.proposer, note=proposed.note)
            history.append(tried)
    return history
