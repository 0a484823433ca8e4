"""The pipeline: parse -> analyse -> propose -> prove -> splice -> apply + re-parse -> patch -> compile.

A library API: `analyze_file` and `rewrite_file` return frozen results; input errors and failed checks
are raised as SwzcError with an exit code.  Nothing here prints or writes the user's files.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from swzc import hw as hwmodels
from swzc import source
from swzc.analysis import FileAnalysis, KernelInfo, analyze
from swzc.bench import KernelBench, bench_kernel
from swzc.compile import CompileReport, compile_check
from swzc.edits import rewrite
from swzc.errors import ExitCode, SwzcError
from swzc.evaluate import Value
from swzc.hw import HardwareModel
from swzc.passes import block_swizzle
from swzc.passes.block_swizzle import Decision, Proposal
from swzc.patch import patch_from_edits
from swzc.program import ProgramBench
from swzc.prove import Proof, prove
from swzc.rank import Ranking, rank
from swzc.swizzles import SwizzleSpec, parse_spec

EXPLORE = "colmajor"  # the one candidate the loop measures when the model predicts no gain


@dataclass(frozen=True)
class Options:
    hw: HardwareModel
    swizzle: SwizzleSpec | None = None  # None: the pass's documented default rule
    bindings: Mapping[str, Value] = field(default_factory=dict)
    compile: bool = True
    compile_flags: tuple[str, ...] = ()
    bench: bool = False  # run the acceptance loop on the local GPU
    max_iterations: int = 4  # candidates the loop tries per kernel
    launch_spec: str | None = None  # TOML with buffer sizes, scalars and launches the file leaves open
    rounds: int = 30  # timed rounds per candidate
    program: ProgramBench | None = None  # time the user's own program instead of the generated harness
    progress: Callable[[str], None] | None = None
    only: Mapping[int, SwizzleSpec] | None = None  # kernel index -> swizzle; other kernels are left alone
    declined: Mapping[int, str] = field(default_factory=dict)  # kernel index -> why the benchmark declined it
    notes: Mapping[int, str] = field(default_factory=dict)  # kernel index -> how its swizzle was chosen
    ranked: Mapping[int, Ranking | str] | None = None  # the L2 model's rankings, where already computed


@dataclass(frozen=True)
class KernelOutcome:
    name: str
    line: int
    status: str  # "rewritten", "refused", "declined", "untouched"
    reason: str
    swizzle: str | None = None
    adapter: str | None = None
    grids: tuple[tuple[int, int, int, int], ...] = ()
    proof: str = ""
    chosen_by: str = ""  # the L2 model's numbers, or why the default rule chose
    candidates: tuple[tuple[str, float, float], ...] = ()  # (name, predicted L2 hit %, predicted DRAM bytes)


@dataclass(frozen=True)
class RewriteResult:
    path: str
    dialect: str
    hw: str
    outcomes: tuple[KernelOutcome, ...]
    old: bytes
    new: bytes
    patch: str
    compile: CompileReport | None
    bench: tuple[KernelBench, ...] = ()
    benchmarked: bool = False

    @property
    def changed(self) -> bool:
        return self.old != self.new

    @property
    def exit_code(self) -> ExitCode:
        if self.changed or not any(o.status in ("refused", "declined") for o in self.outcomes):
            return ExitCode.OK
        return ExitCode.DECLINED


def parse_bindings(pairs: list[str] | tuple[str, ...]) -> dict[str, Value]:
    """--set NAME=VALUE, VALUE an integer (or a float)."""
    bound: dict[str, Value] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise SwzcError(f"--set {pair!r}: expected NAME=VALUE, e.g. --set N=4096")
        try:
            bound[name] = int(value.strip(), 0)
        except ValueError:
            try:
                number = float(value.strip())
            except ValueError:
                number = math.nan
            if not math.isfinite(number):
                raise SwzcError(f"--set {pair!r}: VALUE must be a finite number") from None
            bound[name] = number
    return bound


def parse_swizzle(text: str | None) -> SwizzleSpec | None:
    if text is None:
        return None
    try:
        return parse_spec(text)
    except ValueError as exc:
        raise SwzcError(f"--swizzle {text!r}: {exc}") from None


def load_hw(name: str) -> HardwareModel:
    return hwmodels.load(name)


def analyze_file(path: str, bindings: Mapping[str, Value] | None = None) -> tuple[source.SourceFile, FileAnalysis]:
    src = source.load(path)
    return src, analyze(src, bindings or {})


def rank_kernels(src: source.SourceFile, analysis: FileAnalysis, hw: HardwareModel,
                 bindings: Mapping[str, Value]) -> dict[int, Ranking | str]:
    """The L2 model's ranking for every kernel that could be swizzled (a reason string where it cannot rank)."""
    return {i: rank(src, k, hw, bindings) for i, k in enumerate(analysis.kernels) if block_swizzle.refusal(analysis, i) is None}


def _proof_text(proof: Proof) -> str:
    if proof.sampled:
        return f"bijection on {len(proof.shapes)} sample grids (the file does not fix this kernel's grid)"
    shapes = ", ".join(f"{x}x{y}x{z}" + (f" n={n}" if n else "") for x, y, z, n in proof.shapes)
    return f"bijection on grid {shapes}"


def rewrite_file(path: str, options: Options) -> RewriteResult:
    src, analysis = analyze_file(path, options.bindings)
    if options.bench:
        return rewrite_benchmarked(src, analysis, options)
    return rewrite_source(src, analysis, options)


def rewrite_benchmarked(src: source.SourceFile, analysis: FileAnalysis, options: Options,
                        kernels: set[int] | None = None) -> RewriteResult:
    """The acceptance loop for every kernel that can be swizzled (or those in `kernels`), then the rewrite
    with what it accepted."""
    ranked = rank_kernels(src, analysis, options.hw, options.bindings) if options.swizzle is None else {}
    only: dict[int, SwizzleSpec] = {}
    declined: dict[int, str] = {}
    notes: dict[int, str] = {}
    benches = []
    exploring: set[int] = set()
    for index in range(len(analysis.kernels)):
        if block_swizzle.refusal(analysis, index) is not None or (kernels is not None and index not in kernels):
            continue
        ranking = ranked.get(index)
        if options.swizzle is not None:
            candidates = [(options.swizzle.name, None)]
        elif isinstance(ranking, Ranking):
            if ranking.chosen is None:
                # The L2 model sees no gain, but it is blind to DRAM-side effects (write locality): spend one
                # measured try on the transposed raster of a tile grid, which won on the H200's transpose.
                explore = next((p for p in ranking.predictions if p.candidate == EXPLORE), None)
                if explore is None:
                    declined[index] = ranking.reason
                    continue
                candidates = [(explore.candidate, explore.l2_hit_rate)]
                exploring.add(index)
            else:
                floor = ranking.identity.l2_hit_rate
                candidates = [(p.candidate, p.l2_hit_rate) for p in ranking.predictions
                              if p.candidate != "identity" and p.l2_hit_rate > floor][: options.max_iterations]
        else:
            fallback = block_swizzle.default_spec(analysis.kernels[index], options.hw)
            if fallback is None:  # the pass says why nothing applies
                declined[index] = block_swizzle.propose(analysis, index, options.hw, None, ranking).reason  # type: ignore[union-attr]
                continue
            candidates = [(fallback.name, None)]

        def rewrite_one(spec: SwizzleSpec, index: int = index) -> bytes:
            single = replace(options, bench=False, compile=False, only={index: spec}, declined={}, notes={})
            return rewrite_source(src, analysis, single).new

        try:
            result = bench_kernel(src, analysis, index, rewrite_one, candidates, options.hw,
                                  options.launch_spec, options.rounds, progress=options.progress, program=options.program)
        except SwzcError as exc:  # the harness cannot run this kernel: nothing is accepted unmeasured
            declined[index] = f"not benchmarked: {exc.message} (or use --no-bench)"
            continue
        benches.append(result)
        model = f"{ranked[index].reason}; the transposed raster was measured anyway: " if index in exploring else ""  # type: ignore[union-attr]
        if result.chosen is not None:
            only[index] = parse_spec(result.chosen)
            notes[index] = model + result.reason
        else:
            declined[index] = model + result.reason
    final = rewrite_source(src, analysis, replace(options, bench=False, only=only, declined=declined, notes=notes, ranked=ranked))
    return replace(final, bench=tuple(benches), benchmarked=True)


def rewrite_source(src: source.SourceFile, analysis: FileAnalysis, options: Options) -> RewriteResult:
    decisions: dict[int, Decision] = {}
    proposals: dict[int, Proposal] = {}
    selecting = options.only is not None
    if options.ranked is not None:
        ranked = options.ranked
    else:
        ranked = rank_kernels(src, analysis, options.hw, options.bindings) if options.swizzle is None and not selecting else {}
    for index in range(len(analysis.kernels)):
        if index in options.declined:
            decisions[index] = Decision(index, "declined", options.declined[index])
            continue
        if selecting and index not in options.only:  # type: ignore[operator]
            decisions[index] = block_swizzle.refusal(analysis, index) or Decision(index, "untouched", "not selected")
            continue
        requested = options.only[index] if selecting else options.swizzle  # type: ignore[index]
        got = block_swizzle.propose(analysis, index, options.hw, requested, ranked.get(index))
        if isinstance(got, Proposal) and index in options.notes:
            got = replace(got, note=options.notes[index])
        if isinstance(got, Proposal):
            proposals[index] = got
        else:
            decisions[index] = got

    proofs: dict[int, Proof] = {}
    if proposals:
        order = sorted(proposals)
        results = prove([(proposals[i].spec, proposals[i].adapter, proposals[i].shapes) for i in order])
        for index, proof in zip(order, results):
            if not proof.ok:
                raise SwzcError(
                    f"{src.path}: kernel {analysis.kernels[index].name}: {proof.spec} is not a permutation of the "
                    f"grid: {proof.failure}; nothing written",
                    ExitCode.CHECK_FAILED,
                )
            proofs[index] = proof
            if proof.identity:
                shapes = ", ".join(f"{x}x{y}x{z}" for x, y, z, _ in proof.shapes)
                decisions[index] = Decision(index, "declined", f"{proof.spec} leaves every block in place on grid {shapes}")
                del proposals[index]

    accepted, refused = block_swizzle.settle(analysis, proposals)
    for decision in refused:
        decisions[decision.kernel] = decision

    edits = block_swizzle.splice(analysis, accepted)
    new_src = rewrite(src, edits) if edits else src
    patch = patch_from_edits(src.path, src.data, edits, new_src.data)

    report = None
    if options.compile and edits:
        report = compile_check(src.path, src.data, new_src.data, src.dialect, options.hw, options.compile_flags)
        if report.status == "failed":
            raise SwzcError(
                f"{src.path}: the rewritten file does not compile (the original does); nothing written.\n"
                f"  command: {report.command}\n{report.detail}",
                ExitCode.CHECK_FAILED,
            )

    outcomes = []
    for index, kernel in enumerate(analysis.kernels):
        grids = kernel.shapes or ()
        ranking = ranked.get(index)
        table = tuple((p.candidate, p.l2_hit_rate, p.dram_bytes) for p in ranking.predictions) if isinstance(ranking, Ranking) else ()
        if index in accepted:
            p = accepted[index]
            outcomes.append(KernelOutcome(kernel.name, kernel.line, "rewritten", _describe(kernel, p), p.spec.name,
                                          p.adapter, grids, _proof_text(proofs[index]), p.note, table))
        else:
            d = decisions[index]
            outcomes.append(KernelOutcome(kernel.name, kernel.line, d.status, d.reason, None,
                                          kernel.adapter if kernel.reads_block_index else None, grids, candidates=table))
    return RewriteResult(src.path, src.dialect, options.hw.name, tuple(outcomes), src.data, new_src.data, patch, report)


def _describe(kernel: KernelInfo, proposal: Proposal) -> str:
    where = {
        "2d": "2D grid (rows blockIdx.y)",
        "1d": f"1D grid decoded into tiles of {kernel.decode.divisor if kernel.decode else '?'} columns",
        "linear": "1D grid",
    }[proposal.adapter]
    reads = [f"{len(kernel.uses)} block-index read(s) rewritten"] if kernel.uses else []
    if kernel.helpers:
        reads.append(f"helper(s) {', '.join(kernel.helpers)} rewritten")
    return f"{proposal.spec.name} over the {where}; {' and '.join(reads)}"
