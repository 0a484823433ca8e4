"""The pipeline: parse -> analyse -> propose -> prove -> splice -> apply + re-parse -> patch -> compile.

A library API: `analyze_file` and `rewrite_file` return frozen results; input errors and failed checks
are raised as SwzcError with an exit code.  Nothing here prints or writes the user's files.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from swzc.target import hw as hwmodels
from swzc.frontend import source
from swzc.analysis.kernels import analyze, open_template_parameters
from swzc.analysis.records import FileAnalysis, KernelInfo, LaunchFact
from swzc.verify.bench import Bencher, KernelBench, Size, SizedBencher
from swzc.target.compile import CompileReport, compile_check
from swzc.analysis.context import FileContext
from swzc.rewrite.edits import Edit, rewrite
from swzc.core import clean
from swzc.core.errors import ExitCode, SwzcError
from swzc.frontend.evaluate import FIELD_PATH, Dim3, Evaluator, Value, expression_of
from swzc.target.hw import HardwareModel
from swzc import passes
from swzc.passes import block_swizzle
from swzc.passes.block_swizzle import Decision, Proposal
from swzc.verify.observe import merged, observe_launches, observed_launches
from swzc.rewrite.patch import patch_from_edits
from swzc.frontend.preprocess import CompileContext, refine
from swzc.verify.program import OriginalFailed, ProgramBench
from swzc.formulas.prove import Proof, prove
from swzc.search.proposers import EXPLORE, BuiltinProposer, Forced, KernelTask, Proposer, Tried, search
from swzc.model.sweep import (kernel_at, measured_sizes, parameters_read, rank_over_launches, rank_over_sizes, sized_launch,
                              template_stand_ins, unsized)
from swzc.model.calibration import Calibration, calibrate
from swzc.model.footprint.values import UNFIXED_PARAMETER
from swzc.model.rank import MARGIN_POINTS, Ranking, SizeSweep, identity_order, rank, survey
from swzc.formulas.swizzles import Formula, SwizzleSpec, parse_spec

if TYPE_CHECKING:  # the LLM's modules (and the openai SDK) load only when an LLM is asked for
    from swzc.search.llm.proposer import Transcript



NOT_BENCHMARKED = "not benchmarked:"  # how a decline begins where the harness could not run the kernel


@dataclass(frozen=True)
class KernelFix:
    """One rewritten kernel's edits (and its helpers'), without the swizzle functions: the file's kernels
    share one insertion of those, RewriteResult.library."""

    kernel_index: int
    kernel: str
    line: int
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class KernelSearch:
    kernel: str
    history: tuple[Tried, ...]


@dataclass(frozen=True)
class Options:
    """The user's knobs for one run, the same for every file of it; frozen and hashable.  What a run decides
    for a file's kernels travels in a RunPlan."""

    hw: HardwareModel
    swizzle: Formula | None = None  # None: the proposers' choice (the L2 model's, or the measured one with bench)
    pinned: Mapping[str, Formula] = field(default_factory=dict)  # --swizzle KERNEL=SPEC: these kernels alone, these orders
    bindings: Mapping[str, Value] = field(default_factory=dict)
    compile: bool = True
    compile_flags: tuple[str, ...] = ()
    bench: bool = False  # run the acceptance loop on the local GPU
    max_iterations: int = 4  # candidates the loop tries per kernel
    launch_spec: str | None = None  # TOML with buffer sizes, scalars and launches the file leaves open
    rounds: int = 30  # timed rounds per candidate
    program: ProgramBench | None = None  # time the user's own program instead of the generated harness
    progress: Callable[[str], None] | None = None  # told each candidate as it is measured
    context: CompileContext = field(default_factory=CompileContext)  # include folders and defines of the build
    facts: Mapping[str, tuple[LaunchFact, ...]] = field(default_factory=dict)  # launches given by hand or observed
    proposer: str = "builtin"  # where candidates come from: "builtin", "llm" or "both" (swzc.search.proposers)
    llm: Proposer | None = None  # the LLM proposer, with its client (live or a recorded transcript)
    facts_elsewhere: bool = False  # `facts` may name kernels of other files (a command given several FILES)
    calibrate: bool = True  # with bench: one instrumented run of each kernel's original order sets the model's inputs

    def __hash__(self) -> int:
        """Over the knobs in a canonical form (mappings as sorted items); the LLM proposer is left out, as equal
        options must hash alike and two equal proposers may be two objects."""
        return hash((self.hw, self.swizzle, tuple(sorted(self.pinned.items())), tuple(sorted((k, repr(v)) for k, v in self.bindings.items())), self.compile,
                     self.compile_flags, self.bench, self.max_iterations, self.launch_spec, self.rounds, self.program,
                     self.progress, self.context, tuple(sorted((k, v) for k, v in self.facts.items())), self.proposer,
                     self.facts_elsewhere, self.calibrate))


@dataclass(frozen=True)
class RunPlan:
    """What the run decided for one file's kernels, by kernel index, for the rewrite that follows: built by
    the choosers (the L2 model and the LLM, or the acceptance loop), read by `rewrite_source`."""

    only: Mapping[int, Formula] | None = None  # these kernels with these formulas; the others are left alone
    chosen: Mapping[int, Formula] = field(default_factory=dict)  # the formula a search chose
    declined: Mapping[int, str] = field(default_factory=dict)  # why a search or the benchmark declined a kernel
    notes: Mapping[int, str] = field(default_factory=dict)  # how a kernel's formula was chosen
    ranked: Mapping[int, Ranking | str] | None = None  # the L2 model's rankings, where already computed
    searches: tuple[KernelSearch, ...] = ()  # every candidate each kernel's proposers offered, and its fate


@dataclass(frozen=True)
class KernelOutcome:
    name: str
    line: int
    status: str  # "rewritten", "refused", "declined", "unranked", "untouched"
    reason: str
    swizzle: str | None = None
    adapter: str | None = None
    grids: tuple[tuple[int, int, int, int], ...] = ()
    proof: str = ""
    chosen_by: str = ""  # the L2 model's numbers, or the measured result
    candidates: tuple[tuple[str, float, float], ...] = ()  # (name, predicted L2 hit %, predicted DRAM bytes)
    rules: tuple[str, ...] = ()  # a refused kernel's hazard rule ids ("SWZ101", swzc.analysis.records.HAZARDS)
    formula: Formula | None = field(default=None, compare=False)  # the order spliced in; `swizzle` is its name
    sizes: SizeSweep | None = field(default=None, compare=False)  # where the grid is set at run time: the sizes ranked


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
    syntax_errors: tuple[source.SyntaxIssue, ...] = ()  # parts of the input tree-sitter could not parse, tolerated
    notes: tuple[str, ...] = ()  # what the analysis could not follow in the file (a missing header, a limit)
    searches: tuple[KernelSearch, ...] = ()  # every candidate each kernel's proposers offered, and its fate
    transcripts: tuple[Transcript, ...] = ()  # the LLM exchanges, per kernel
    fixes: tuple[KernelFix, ...] = ()  # per rewritten kernel, its edits on their own
    library: Edit | None = None  # the one insertion of the swizzle functions the rewritten kernels call
    llm_failure: str = ""  # under --proposer both, why the LLM was given up (its candidates were not asked for)

    @property
    def changed(self) -> bool:
        return self.old != self.new

    @property
    def exit_code(self) -> ExitCode:
        if self.changed or not any(o.status in ("refused", "declined", "unranked") for o in self.outcomes):
            return ExitCode.OK
        return ExitCode.DECLINED


_TYPE_NAME = re.compile(r"[A-Za-z_][\w:]*(?:\s*<[\w\s:,<>]*>)?(?:\s+[A-Za-z_][\w:]*)*")


def parse_bindings(pairs: list[str] | tuple[str, ...]) -> dict[str, Value | str]:
    """--set NAME=VALUE: VALUE an integer, a float, or a type name (`DATA_TYPE=float`, `T=unsigned int`); NAME.x,
    NAME.y or NAME.z=INTEGER one field of a dim3 or vector (`dims.x=4096`), the fields not given 1; any other field a
    file reads through names (`p.n=4096`, `args->m=512`) that field, a number."""
    bound: dict[str, Value | str] = {}
    fields: dict[str, list[int]] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name, value = name.strip(), value.strip()
        base, dot, axis = name.partition(".")
        if sep and dot and base.isidentifier() and axis in ("x", "y", "z"):
            try:
                number = int(value, 0)
            except ValueError:
                raise SwzcError(f"--set {pair!r}: a field ({name}) takes an integer") from None
            fields.setdefault(base, [1, 1, 1])["xyz".index(axis)] = number
            continue
        spaced = re.sub(r"\s*(\.|->)\s*", r"\1", name)
        field = bool(sep) and FIELD_PATH.fullmatch(spaced) is not None  # a struct's field, as the file reads it (`p.n`)
        if field:
            name = spaced
        elif not sep or not name.isidentifier():
            raise SwzcError(f"--set {pair!r}: expected NAME=VALUE, e.g. --set N=4096, --set DATA_TYPE=float or --set dims.x=4096")
        try:
            bound[name] = int(value, 0)
            continue
        except ValueError:
            pass
        try:
            number = float(value)
        except ValueError:
            if not field and _TYPE_NAME.fullmatch(value) and value.lower() not in ("nan", "inf", "infinity"):
                bound[name] = " ".join(value.split())
                continue
            raise SwzcError(f"--set {pair!r}: " + (f"a field ({name}) takes a number" if field else
                                                    "VALUE must be a number or a type name")) from None
        if not math.isfinite(number):
            raise SwzcError(f"--set {pair!r}: VALUE must be a finite number")
        bound[name] = number
    for base, values in fields.items():
        if base in bound:
            raise SwzcError(f"--set {base}=… and --set {base}.x/.y/.z=… both given: one or the other")
        bound[base] = tuple(values)  # type: ignore[assignment]  # as a sweep binds a dim3 (swzc.model.rank.size_bindings)
    return bound


def parse_launch_facts(grids: list[str] | tuple[str, ...], blocks: list[str] | tuple[str, ...]) -> dict[str, tuple[LaunchFact, ...]]:
    """--grid KERNEL=X[,Y[,Z]] and --block KERNEL=X[,Y[,Z]]."""
    sizes: dict[str, dict[str, Dim3]] = {}
    for what, pairs in (("grid", grids), ("block", blocks)):
        for pair in pairs:
            kernel, sep, value = pair.partition("=")
            parts = value.split(",")
            if not sep or not kernel.strip().isidentifier() or not 1 <= len(parts) <= 3 or not all(p.strip().isdigit() for p in parts):
                raise SwzcError(f"--{what} {pair!r}: expected KERNEL=X[,Y[,Z]], e.g. --{what} gemm=256,256")
            dims = [int(p) for p in parts] + [1] * (3 - len(parts))
            limits = (1 << 31, 1 << 16, 1 << 16) if what == "grid" else (1025, 1025, 65)
            if not all(1 <= d < limit for d, limit in zip(dims, limits)):
                raise SwzcError(f"--{what} {pair!r}: outside CUDA's limits for a {what}")
            if what in sizes.get(kernel.strip(), {}):
                raise SwzcError(f"--{what} is given twice for kernel {kernel.strip()}")
            sizes.setdefault(kernel.strip(), {})[what] = (dims[0], dims[1], dims[2])
    return {k: (LaunchFact(k, v.get("grid"), v.get("block")),) for k, v in sizes.items()}


def parse_swizzle(text: str | None) -> SwizzleSpec | None:
    if text is None:
        return None
    try:
        return parse_spec(text)
    except ValueError as exc:
        raise SwzcError(f"--swizzle {text!r}: {exc}") from None


def parse_swizzles(texts: Sequence[str]) -> tuple[SwizzleSpec | None, dict[str, SwizzleSpec]]:
    """--swizzle, given once as SPEC (every kernel it fits) or as KERNEL=SPEC, once per kernel (those kernels
    alone, each with its order; the others are left as they are)."""
    plain = [t for t in texts if "=" not in t]
    pinned: dict[str, SwizzleSpec] = {}
    for text in texts:
        if "=" not in text:
            continue
        kernel, _, spec = text.partition("=")
        kernel = kernel.strip()
        if not kernel.isidentifier() or kernel in pinned:
            raise SwzcError(f"--swizzle {text!r}: expected KERNEL=SPEC, each kernel once (a kernel's name, then its order)")
        pinned[kernel] = parse_swizzle(spec.strip())  # type: ignore[assignment]
    if len(plain) > 1 or (plain and pinned):
        raise SwzcError("--swizzle takes one SPEC for every kernel, or KERNEL=SPEC for each kernel named, not both")
    return parse_swizzle(plain[0]) if plain else None, pinned


def load_hw(name: str) -> HardwareModel:
    return hwmodels.load(name)


def analyze_file(path: str, bindings: Mapping[str, Value | str] | None = None, context: CompileContext | None = None,
                 facts: Mapping[str, tuple[LaunchFact, ...]] | None = None,
                 facts_elsewhere: bool = False, digest: str | None = None) -> tuple[FileContext, FileAnalysis]:
    """The file read, in its build's context, and its kernels analysed; the context goes on to every later stage.
    With `digest`, the bytes read must be those whose SHA-256 it is (a job planned on them)."""
    ctx = FileContext(source.load(path), context or CompileContext())
    if digest is not None and hashlib.sha256(ctx.src.data).hexdigest() != digest:
        raise SwzcError(f"{path} is not the file the run was planned on: it changed since, or this machine has another "
                        "file at that path", ExitCode.BAD_INPUT)
    if ctx.src.errors:  # read it again as the compiler would: decided #if branches, statement macros
        ctx = ctx.reparsed(refine(ctx.src, context, ctx.prepared(bindings)[0]))
    src = ctx.src
    analysis = analyze(ctx, bindings or {}, facts)
    _check_bindings(ctx, analysis, bindings or {}, {} if facts_elsewhere else facts or {})
    unused = unspelled(ctx, bindings or {})
    if unused:  # a typo, or (with several FILEs) a name of another file: said, never an error
        analysis = replace(analysis, notes=(*analysis.notes, *map(unspelled_note, unused)))
    if src.errors and analysis.kernels and all(any(h.rule == "syntax-error" for h in k.hazards) for k in analysis.kernels):
        # parse errors, and no kernel clear of them: nothing in the file can be analysed.  (A file with no
        # kernel at all, a `__global__` in its unparsed parts included, has nothing to rewrite: its errors are
        # listed and it is not bad input.  A file-scope macro that expands to definitions is one such.)
        more = f" ({len(src.errors) - 1} more error(s) in the file)" if len(src.errors) > 1 else ""
        raise SwzcError(src.error_message(src.errors[0]) + more, ExitCode.BAD_INPUT, {
            "kernels": [{"name": k.name, "line": k.line, "status": "refused", "reason": k.hazards[0].reason,
                         "rules": [k.hazards[0].rule_id]} for k in analysis.kernels],
            "syntax_errors": [{"line": e.line, "col": e.col, "message": e.what} for e in src.errors]})
    return ctx, analysis


def unspelled_note(name: str) -> str:
    """The note on a --set name that neither the file nor a header it reads spells (`unspelled`)."""
    return f"--set {name}: neither this file nor a header it reads names it"


def unspelled(ctx: FileContext, bindings: Mapping[str, Value | str]) -> list[str]:
    """The --set names (a dim3's `dims.x` by `dims`) that neither the file nor a header it reads spells as a word."""
    texts = [ctx.src.data, *(h.src.data for h in ctx.prepared()[0].headers)]
    found = []
    for name in bindings:
        word = re.compile(rb"(?<![A-Za-z0-9_])" + re.escape(name.partition(".")[0].encode()) + rb"(?![A-Za-z0-9_])")
        if not any(word.search(text) for text in texts):
            found.append(name)
    return found


def _check_bindings(ctx: FileContext, analysis: FileAnalysis, bindings: Mapping[str, Value | str],
                    facts: Mapping[str, tuple[LaunchFact, ...]]) -> None:
    """A --set that contradicts what the file fixes, or a --grid for a kernel the file lacks, is an input error."""
    src = ctx.src
    scope = ctx.scope(bindings)
    plain = replace(scope, user={})
    for name, value in bindings.items():
        if isinstance(value, str):
            fixed: Value | str | None = plain.resolve_type(name)
            fixed = None if fixed == name else fixed
        else:
            fixed = Evaluator(plain).value(expression_of(name))
        if fixed is not None and fixed != value:
            macro = f"; it is a macro: -D {name}={value} defines it as the build would" if name in plain.macros else ""
            raise SwzcError(f"--set {name}={value} contradicts the file, where {name} is {fixed}{macro}")
    names = {k.name for k in analysis.kernels}
    for kernel in facts:
        if kernel not in names:
            raise SwzcError(f"--grid/--block name kernel {kernel}, which is not in {src.path} (kernels: {', '.join(sorted(names)) or 'none'})")


def rank_kernels(ctx: FileContext, analysis: FileAnalysis, hw: HardwareModel, bindings: Mapping[str, Value],
                 compiler: bool = False, flags: tuple[str, ...] = (), sizes: bool = True, choosing: bool = False
                 ) -> dict[int, Ranking | str]:
    """The L2 model's ranking for every kernel that could be swizzled (a reason string where it cannot rank).

    `compiler`: the blocks resident at once come from compiling the file with `flags` (never running it).
    `sizes`: a kernel whose grid the file sets at run time is ranked over a sweep of sizes (swzc.model.sweep).
    `choosing`: only the kernels the family has an order for, where a ranking only chooses (a 1D grid with no
    tile decode on a GPU of one L2 is declined whatever the model says: not modelled for nothing)."""
    return {i: _rank(ctx, k, hw, bindings, compiler, flags, sizes) for i, k in enumerate(analysis.kernels)
            if block_swizzle.refusal(analysis, i) is None and (not choosing or block_swizzle.family(k, hw))}


def _rank(ctx: FileContext, kernel: KernelInfo, hw: HardwareModel, bindings: Mapping[str, Value],
          compiler: bool, flags: tuple[str, ...], sizes: bool = True, calibration: Calibration | None = None
          ) -> Ranking | str:
    got = rank(ctx, kernel, hw, bindings, compiler=compiler, flags=flags, calibration=calibration)
    if isinstance(got, Ranking) and kernel.tile_loop is None:  # launched with several grids: the order must hold at each
        got = rank_over_launches(ctx, kernel, hw, bindings, compiler, flags, calibration) or got
    launch = sized_launch(kernel)
    if isinstance(got, str) and sizes and kernel.tile_loop is None and launch is not None:
        swept = rank_over_sizes(ctx, kernel, hw, bindings, compiler, flags, calibration)
        if isinstance(swept, Ranking):
            return swept
        return f"{swept} (the grid at {launch.at} is set at run time by {', '.join(launch.sizes)})"
    if isinstance(got, str) and sizes and got.startswith("no launch in this file fixes"):
        # said now, not after the --grid this asks for: one round, not two or more
        open_ = open_template_parameters(ctx, kernel, bindings)
        probing = {**bindings, **template_stand_ins(open_)}
        found = unsized(ctx, kernel, hw, probing)
        needed, written = ([], []) if found else parameters_read(ctx, kernel, hw, probing)
        if open_:  # what the probe found with stand-ins for them may be the stand-ins' doing: not said
            first = open_[0]
            got += (f"; no launch here gives its template arguments {_and(p.name for p in open_)}, which --set gives as "
                    f"the program instantiates it (--set {first.name}={'float' if first.kind == 'type' else 128}, say)"
                    f"{'; what else its reads need is said once they are given' if found else ''}")
            found = ""
        if needed:
            got += f"; its reads also use {_and(needed)}, which --set gives (--set {needed[0]}=4096, say): --grid alone does not rank it"
        got = found or (got + _writes_clause(written))
    elif isinstance(got, str) and sizes and UNFIXED_PARAMETER.search(got):
        named = set(UNFIXED_PARAMETER.findall(got))
        reads, written = parameters_read(ctx, kernel, hw, bindings)
        more = [n for n in reads if n not in named]
        if more:  # the reads name the first each stops at: said now, not one run later
            got += f"; its reads also use {_and(more)}, which --set gives"
        got += _writes_clause(written)
    loop = kernel.tile_loop
    if loop is not None and isinstance(got, Ranking):
        # A ranking of a tile loop is only meaningful over its tiles; a model of the launch grid would rank the
        # blocks, which the swizzle does not move.
        launch = next((la for la in kernel.launches if la.grid is not None), None)
        rows, cols, _ = got.footprint.tiles
        if launch is None or launch.tiles is None or rows * cols != launch.tiles:
            return f"the L2 model does not follow the tile loop over {loop.var} (line {loop.line})"
    return got


def _writes_clause(written: Sequence[str]) -> str:
    """What a reason adds for the parameters only a kernel's writes use ('' where there are none)."""
    return f"; its writes use {_and(written)}, which --set gives too (without them its writes are not modelled)" if written else ""


def _and(names: Iterable[str]) -> str:
    """`A`, `A and B`, `A, B and C`."""
    listed = list(names)
    return ", ".join(listed[:-1]) + " and " + listed[-1] if len(listed) > 1 else "".join(listed)


def _compiler(options: Options) -> tuple[bool, tuple[str, ...]]:
    """Whether the ranking may compile the file for its residency, and with which flags: as the compile
    check would (the file is compiled, never run)."""
    return options.compile, (*options.context.compile_flags(), *options.compile_flags)


def _proof_text(proof: Proof, kernel: KernelInfo, spec: Formula | None = None) -> str:
    if isinstance(spec, SwizzleSpec) and spec.gate and not proof.sampled:
        return (f"bijection on {len(proof.shapes)} grids: its own (those swept, where its sizes are set at run time), "
                f"{spec.gate - 1}, {spec.gate} and {spec.gate + 1} tiles on either side of the gate, and small non-divisible ones")
    if kernel.tile_loop is not None:  # proven over the tiles the loop walks, not over the blocks
        if proof.sampled:
            return f"bijection on {len(proof.shapes)} sample tile spaces (the file does not fix this loop's tile count)"
        return f"bijection on tile space {_tile_spaces(proof.shapes)}"
    if proof.sampled:
        return f"bijection on {len(proof.shapes)} sample grids ({proof.why_sampled})"
    shapes = ", ".join(f"{x}x{y}x{z}" + (f" n={n}" if n else "") for x, y, z, n in proof.shapes)
    return f"bijection on grid {shapes}"


def _tile_spaces(shapes: tuple[tuple[int, int, int, int], ...]) -> str:
    return ", ".join(f"T={t}" + (f" n={n}" if n else "") for t, _, _, n in shapes)


def rewrite_file(path: str, options: Options) -> RewriteResult:
    ctx, analysis = analyze_file(path, options.bindings, options.context, options.facts, options.facts_elsewhere)
    names = {k.name for k in analysis.kernels}
    if set(options.pinned) - names:
        raise SwzcError(f"--swizzle names kernel(s) {', '.join(sorted(set(options.pinned) - names))}, which are not in "
                        f"{ctx.src.path} (kernels: {', '.join(sorted(names)) or 'none'})")
    if options.bench:
        result = rewrite_benchmarked(ctx, analysis, options)
    elif options.pinned:  # those kernels with those orders, the others left alone
        only = {i: options.pinned[k.name] for i, k in enumerate(analysis.kernels) if k.name in options.pinned}
        result = rewrite_source(ctx, analysis, options, RunPlan(only=only))
    else:
        plan = choose_by_model(ctx, analysis, options)
        result = replace(rewrite_source(ctx, analysis, options, plan), searches=plan.searches,
                         transcripts=_transcripts(options, plan.searches))
    given_up = getattr(options.llm, "failure", "")  # under --proposer both, an LLM that failed is let go
    if given_up:
        result = replace(result, llm_failure=given_up, notes=(*result.notes, llm_note(given_up)))
    return result


def llm_note(failure: str) -> str:
    """The note on an LLM given up under --proposer both."""
    return f"the LLM was not used: a request failed ({failure}); the built-in family's candidates were used alone"


def rewrite_benchmarked(ctx: FileContext, analysis: FileAnalysis, options: Options,
                        kernels: set[int] | None = None) -> RewriteResult:
    """The acceptance loop for every kernel that can be swizzled (or those in `kernels`), then the rewrite
    with what it accepted.  Each kernel's proposers (the built-in family, the LLM, or both) offer
    candidates one at a time into one history; each is proven and measured (swzc.search.proposers.search).  With
    the user's own program, it is run once first under a launch interposer, and each kernel is ranked and
    proven with the launches it really made."""
    observed: tuple[str, ...] = ()
    if options.program is not None:
        analysis, observed = with_observed_launches(ctx, analysis, options.program)
    # a kernel sized at run time is ranked over a sweep and measured at several of its sizes on the generated
    # harness; the user's own program runs at the sizes it chooses
    ranked = (rank_kernels(ctx, analysis, options.hw, options.bindings, *_compiler(options), sizes=options.program is None,
                           choosing=True) if options.swizzle is None and not options.pinned else {})
    chosen: dict[int, Formula] = {}
    declined: dict[int, str] = {}
    notes: dict[int, str] = {}
    benches = []
    searches: list[KernelSearch] = []
    for index in range(len(analysis.kernels)):
        if block_swizzle.refusal(analysis, index) is not None or (kernels is not None and index not in kernels):
            continue
        if options.pinned and analysis.kernels[index].name not in options.pinned:
            continue  # --swizzle KERNEL=SPEC: the kernels not named are left alone
        ranking = ranked.get(index)
        task = KernelTask(ctx, analysis, index, options.hw, ranking, options.bindings, measured=True)
        pinned = options.pinned.get(analysis.kernels[index].name, options.swizzle)
        if pinned is not None:
            forced = block_swizzle.propose(analysis, index, options.hw, pinned)
            if isinstance(forced, Decision):  # the swizzle does not fit this kernel: nothing to measure
                declined[index] = forced.reason
                continue
            proposers: list[Proposer] = [Forced(pinned)]
        else:
            proposers = _proposers(options)
            if options.proposer == "builtin" and not BuiltinProposer().candidates(task):
                declined[index] = _nothing_to_measure(analysis, index, options.hw, ranking)
                continue

        def rewrite_one(formula: Formula, index: int = index) -> bytes:
            return rewrite_source(ctx, analysis, replace(options, bench=False, compile=False), RunPlan(only={index: formula})).new

        sweep = ranking.sweep if isinstance(ranking, Ranking) and options.program is None else None
        measured_at: list[Size] = []
        try:
            bencher: Bencher | SizedBencher
            if sweep is not None:
                measured_at = _sizes(ctx, analysis.kernels[index], sweep, options)
                bencher = SizedBencher(ctx, measured_at, rewrite_one, options.hw,
                                       options.launch_spec, options.rounds, options.progress, _compiler(options)[1])
            else:
                bencher = Bencher(ctx, analysis, index, rewrite_one, options.hw, options.launch_spec, options.rounds,
                                  progress=options.progress, program=options.program, flags=_compiler(options)[1])
        except SwzcError as exc:  # the harness cannot run this kernel: nothing is accepted unmeasured
            declined[index] = f"{NOT_BENCHMARKED} {exc.message} (or use --no-bench)"
            continue

        def measure(formula: Formula, predicted: float | None, position: str) -> Tried:
            if isinstance(formula, SwizzleSpec) and formula.integer and planned and formula.divided(False) != planned[0]:
                # the first candidate measured faster dividing in integer instructions: so are the rest of the plan
                # measured, and built in one batch
                try:
                    bencher.prebuild(list(dict.fromkeys(f.divided(True) for f in planned if isinstance(f, SwizzleSpec))))
                except SwzcError:
                    pass  # each is then built as it is measured
            a = bencher.measure(formula, predicted, position)
            status = "accepted" if a.accepted else "measured" if a.speedup is not None else "rejected"
            profiled = (f", {a.l2_hit_rate:.1f} % L2 hits" if a.l2_hit_rate is not None else "") + (
                f", {a.dram_read_bytes / 1e6:,.0f} MB read from DRAM" if a.dram_read_bytes is not None else "")
            detail = a.reason if a.speedup is None else f"measured {a.speedup:.3f}x{profiled}: {a.reason}"
            sizes = tuple((x.size, x.speedup) for x in bencher.by_size if x.candidate == formula.name
                          and x.size is not None and x.speedup is not None)
            return Tried(formula.name, "", status, detail, formula, predicted, a.speedup, by_size=sizes)

        calibration: Calibration | None = None
        planned: list[Formula] = []
        try:
            try:
                planned = _planned(task, proposers, options.max_iterations)  # what is known to be tried, built at once
                if options.calibrate and options.program is None and isinstance(ranking, Ranking):  # no ranking: a pinned order
                    ranking, calibration = _calibrated(ctx, analysis.kernels[index], ranking, bencher, planned,
                                                       measured_at[-1] if measured_at else None, options)
                    ranked[index] = ranking
                    task = replace(task, ranking=ranking)
                    planned = _planned(task, proposers, options.max_iterations)
                    if isinstance(bencher, SizedBencher) and ranking.sweep is not None and calibration is not None:
                        stayed = bencher.at_sizes(_sizes(ctx, analysis.kernels[index], ranking.sweep, options))  # a crossover moved
                        if stayed:
                            calibration = replace(calibration, notes=(*calibration.notes, stayed))
                bencher.prebuild(planned)
            except SwzcError:
                pass  # each candidate is then built as it is measured, and a build that fails is said there
            history = search(task, proposers, options.max_iterations, measure)
        finally:
            bencher.close()
        searches.append(KernelSearch(analysis.kernels[index].name, tuple(history)))
        if not bencher.attempts:
            declined[index] = _nothing_to_measure(analysis, index, options.hw, ranking, history)
            continue
        result = replace(bencher.result(), calibration=calibration)
        benches.append(result)
        exploring = isinstance(ranking, Ranking) and ranking.chosen is None and any(
            isinstance(t.formula, SwizzleSpec) and t.formula.ungated == EXPLORE and t.proposer == "builtin" for t in history)
        model = f"{ranking.reason}; the transposed raster was measured anyway{_explored_from(ranking)}: " if exploring else ""  # type: ignore[arg-type]
        if result.formula is not None:
            chosen[index] = result.formula
            notes[index] = model + result.reason
        else:
            declined[index] = model + result.reason
    final = rewrite_source(ctx, analysis, replace(options, bench=False),
                           RunPlan(only=chosen, declined=declined, notes=notes, ranked=ranked))
    return replace(final, bench=tuple(benches), benchmarked=True, notes=(*observed, *final.notes), searches=tuple(searches),
                   transcripts=_transcripts(options, searches))


def _calibrated(ctx: FileContext, kernel: KernelInfo, ranking: Ranking, bencher: Bencher | SizedBencher,
                planned: list[Formula], size: Size | None, options: Options) -> tuple[Ranking, Calibration | None]:
    """The kernel ranked again with the model's inputs measured on one instrumented run of its original order
    (swzc.model.calibration), at the launch the loop profiles (`size`: the largest of a loop over several); the
    ranking as it was where the model cannot follow that launch."""
    bound = {**options.bindings, **ranking.sweep.bindings(size.size)} if size is not None and ranking.sweep else options.bindings
    at = size.kernel if size is not None else kernel
    surveyed = survey(ctx, at, options.hw, bound, *_compiler(options), ranking.residency)
    if isinstance(surveyed, str):
        return ranking, None
    fp, _, resident = surveyed
    if options.progress:
        options.progress(f"{kernel.name}: calibrating (the original, instrumented)")
    seen = bencher.calibrate(planned, options.hw.l2_request_coalescer and fp.staged)
    running = seen.running if kernel.tile_loop is None else None  # a tile loop's blocks each walk many tiles
    compiled = ranking.residency is not None and ranking.residency.compiled
    calibration = calibrate(fp, options.hw, resident, identity_order(fp), seen.spread, seen.merged_share, seen.notes,
                            running, compiled)
    if not calibration.changes_model:
        return replace(ranking, calibration=calibration), calibration
    again = _rank(ctx, kernel, options.hw, options.bindings, *_compiler(options), calibration=calibration)
    return (again if isinstance(again, Ranking) else replace(ranking, calibration=calibration)), calibration


def _explored_from(ranking: Ranking) -> str:
    """Where a sweep gates the transposed raster it measures where no order pays: from the size its writes exceed the L2."""
    sweep = ranking.sweep
    if sweep is None or sweep.writes_past_l2 is None or not sweep.gate_at(sweep.writes_past_l2):
        return ""
    at = (" = ".join(sweep.names) + f" = {sweep.writes_past_l2}") if sweep.names else f"{sweep.writes_past_l2:,} tiles"
    return f", gated from {at} up (what the kernel writes exceeds the L2 from there)"


def _planned(task: KernelTask, proposers: list[Proposer], iterations: int) -> list[Formula]:
    """The candidates a loop will measure that are known before it starts: the built-in ones (the first in both
    division forms), a forced order."""
    planned: list[Formula] = []
    for proposer in proposers:
        if isinstance(proposer, BuiltinProposer):
            found = [formula for formula, _ in proposer.candidates(task)][:iterations]
            planned += found
            if found and found[0].divides(task.adapter):
                planned.append(found[0].divided(True))
        elif isinstance(proposer, Forced):
            planned.append(proposer.formula)
    return planned


def _sizes(ctx: FileContext, kernel: KernelInfo, sweep: SizeSweep, options: Options) -> list[Size]:
    """The sizes the loop measures a swept kernel at (swzc.model.sweep.measured_sizes), each with the file's analysis there."""
    sizes = []
    for size in measured_sizes(sweep):
        if not sweep.names:  # the grids it is launched with: the kernel with that launch alone
            point = next(pt for pt in sweep.points if pt.size == size)
            sizes.append(Size(size, replace(kernel, launches=(next(la for la in kernel.launches if la.grid == point.grid),))))
            continue
        at = kernel_at(ctx, kernel, {**options.bindings, **sweep.bindings(size)})
        if at is not None:
            sizes.append(Size(size, at))
    return sizes


def _proposers(options: Options) -> list[Proposer]:
    return ([BuiltinProposer()] if options.proposer in ("builtin", "both") else []) + (
        [_llm(options)] if options.proposer in ("llm", "both") else [])


def _llm(options: Options) -> Proposer:
    if options.llm is None:
        raise SwzcError(f"--proposer {options.proposer} needs an LLM: give --model (and --base-url), or --llm-replay FILE")
    return options.llm


def _nothing_to_measure(analysis: FileAnalysis, index: int, hw: HardwareModel, ranking: Ranking | str | None,
                        history: Sequence[Tried] = ()) -> str:
    """Why no candidate of a kernel was measured: what the model said, or what the pass says of the family."""
    rejected = [f"{t.name}: {t.detail}" for t in history if t.status == "rejected"]
    tail = f"; rejected: {'; '.join(rejected[:3])}" if rejected else ""
    if isinstance(ranking, Ranking):
        return ranking.reason + tail
    got = block_swizzle.propose(analysis, index, hw, None, ranking)
    return (got.reason if isinstance(got, Decision) else "no candidate to measure") + tail


def _transcripts(options: Options, searches: Sequence[KernelSearch]) -> tuple[Transcript, ...]:
    transcripts = getattr(options.llm, "transcripts", None)  # the LLM proposer keeps its exchanges
    return transcripts({s.kernel: s.history for s in searches}) if transcripts is not None else ()


# An LLM's body is accepted only on the grid it runs at, every block checked (swzc.formulas.prove), and the L2 model
# ranks it at one size: a kernel whose grid is set at run time runs at sizes that neither reaches.
NOT_ASKED = ("the LLM was not asked: the kernel's grid is set at run time, and an order from outside the built-in family "
             "is accepted only on the one grid it runs at, every block checked")


def choose_by_model(ctx: FileContext, analysis: FileAnalysis, options: Options) -> RunPlan:
    """Without a GPU, an LLM's proven candidates are judged by the L2 model alone: one is chosen when its
    predicted hit rate beats identity by the margin and, under `both`, the built-in family's best.  Where
    the model cannot rank a kernel, nothing would judge the LLM's candidates: it is not asked."""
    if options.proposer == "builtin" or options.swizzle is not None or options.pinned:
        return RunPlan()
    ranked = rank_kernels(ctx, analysis, options.hw, options.bindings, *_compiler(options))
    chosen: dict[int, Formula] = {}
    declined: dict[int, str] = {}
    notes: dict[int, str] = {}
    searches: list[KernelSearch] = []
    llm = [_llm(options)]
    for index, ranking in ranked.items():
        if not isinstance(ranking, Ranking) or block_swizzle.refusal(analysis, index) is not None:
            continue
        if ranking.sweep is not None:  # sized at run time: no body of the LLM's could be accepted, so none is asked for
            if options.proposer == "llm":
                declined[index] = f"{NOT_ASKED}; the built-in family (--proposer builtin or both) is ranked over its sizes"
            elif ranking.chosen is not None:
                notes[index] = f"{ranking.reason}; {NOT_ASKED}"
            continue
        task = KernelTask(ctx, analysis, index, options.hw, ranking, options.bindings, measured=False)
        history = search(task, llm, options.max_iterations)
        searches.append(KernelSearch(analysis.kernels[index].name, tuple(history)))
        best = max((t for t in history if t.predicted is not None), key=lambda t: t.predicted or 0.0, default=None)
        floor = ranking.identity.l2_hit_rate + MARGIN_POINTS
        builtin = ranking.prediction(ranking.chosen.ungated.name) if options.proposer == "both" and ranking.chosen else None
        if best is not None and best.predicted is not None and best.predicted >= floor and (
                builtin is None or best.predicted > builtin.l2_hit_rate):
            assert best.formula is not None
            chosen[index] = best.formula
            notes[index] = f"the LLM's {best.name}, {best.detail}"
            family = ranking.prediction(ranking.chosen.ungated.name) if ranking.chosen is not None else None
            if options.proposer == "llm" and family is not None and family.l2_hit_rate > best.predicted:
                notes[index] += (f"; the built-in family's best, {family.candidate}, is predicted higher, at "
                                 f"{family.l2_hit_rate:.1f} % (--proposer both would take it)")
        elif options.proposer == "llm":
            tried = f"best {best.name} at {best.predicted:.1f} %" if best is not None and best.predicted is not None else "none proven"
            declined[index] = (f"no LLM candidate beats identity ({ranking.identity.l2_hit_rate:.1f} %) by {MARGIN_POINTS:g} "
                               f"points in the L2 model: {tried} after {len(history)} attempt(s)")
    return RunPlan(chosen=chosen, declined=declined, notes=notes, ranked=ranked, searches=tuple(searches))


def with_observed_launches(ctx: FileContext, analysis: FileAnalysis, program: ProgramBench) -> tuple[FileAnalysis, tuple[str, ...]]:
    """The analysis with each kernel's launches as one run of the program made them (swzc.verify.observe), and
    notes saying what was seen; kernels the run did not launch keep the file's launches."""
    wanted = {k.name for k in analysis.kernels if k.reads_block_index}
    run = merged([observe_launches(ctx, one, wanted) for _, one in program.each])  # at each of --bench-sizes
    if run.unreadable:  # the program as it is prints no check value or time: nothing could be measured against it
        raise OriginalFailed(f"`{program.bench_cmd}` on the original program {run.unreadable}", ExitCode.BAD_INPUT)
    if not run.ok:
        return analysis, (f"launches not observed: {run.note}",)
    kernels = []
    notes = []
    for kernel in analysis.kernels:
        seen = observed_launches(ctx, kernel, run)
        if seen:
            kernel = replace(kernel, launches=seen)
            configs = list(dict.fromkeys(f"grid {'x'.join(map(str, la.grid or ()))}, block {'x'.join(map(str, la.block or ()))}"
                                         for la in seen))
            notes.append(f"{kernel.name}: launches observed with {run.tool}: {'; '.join(configs[:3])}" + (" …" if len(configs) > 3 else ""))
        kernels.append(kernel)
    if run.note:
        notes.append(run.note)
    return replace(analysis, kernels=tuple(kernels)), tuple(notes)


def rewrite_source(ctx: FileContext, analysis: FileAnalysis, options: Options, plan: RunPlan = RunPlan()) -> RewriteResult:
    """The file rewritten as `plan` says (with no plan: each kernel with the forced --swizzle, or the L2 model's
    choice), proven, spliced, patched and compile-checked."""
    src = ctx.src
    decisions: dict[int, Decision] = {}
    proposals: dict[int, Proposal] = {}
    selecting = plan.only is not None
    if plan.ranked is not None:
        ranked = plan.ranked
    else:
        ranked = (rank_kernels(ctx, analysis, options.hw, options.bindings, *_compiler(options), choosing=True)
                  if options.swizzle is None and not selecting else {})
    for index in range(len(analysis.kernels)):
        if index in plan.declined:
            decisions[index] = Decision(index, "declined", plan.declined[index])
            continue
        if selecting and index not in plan.only:  # type: ignore[operator]
            decisions[index] = block_swizzle.refusal(analysis, index) or Decision(
                index, "untouched", "not named by --swizzle KERNEL=SPEC" if options.pinned else "not selected")
            continue
        requested = plan.only[index] if selecting else plan.chosen.get(index, options.swizzle)  # type: ignore[index]
        got = block_swizzle.propose(analysis, index, options.hw, requested, ranked.get(index))
        if isinstance(got, Proposal):
            if index in plan.notes:
                got = replace(got, note=plan.notes[index])
            got = passes.name_clash(analysis, src, got) or got
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
                if analysis.kernels[index].tile_loop is not None:
                    where = f"tile in place on tile space {_tile_spaces(proof.shapes)}"
                else:
                    where = "block in place on grid " + ", ".join(f"{x}x{y}x{z}" for x, y, z, _ in proof.shapes)
                decisions[index] = Decision(index, "declined", f"{proof.spec} leaves every {where}")
                del proposals[index]

    unranked = [i for i, d in decisions.items() if d.status == "unranked"]
    if unranked:
        decisions.update(_unranked(ctx.src, analysis, options, unranked, decisions))
    accepted, refused = block_swizzle.settle(analysis, proposals)
    for decision in refused:
        decisions[decision.kernel] = decision

    edits = passes.run(analysis, accepted)
    new_src = rewrite(src, edits) if edits else src
    patch = patch_from_edits(src.path, src.data, edits, new_src.data)

    report = None
    if options.compile and edits:
        report = compile_check(src.path, src.data, new_src.data, src.dialect, options.hw,
                               (*options.context.compile_flags(), *options.compile_flags))
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
        sizes = ranking.sweep if isinstance(ranking, Ranking) else None
        if index in accepted:
            p = accepted[index]
            outcomes.append(KernelOutcome(kernel.name, kernel.line, "rewritten", _describe(kernel, p), p.spec.name,
                                          p.adapter, grids, _proof_text(proofs[index], kernel, p.spec), p.note, table,
                                          formula=p.spec, sizes=sizes))
        else:
            d = decisions[index]
            outcomes.append(KernelOutcome(kernel.name, kernel.line, d.status, d.reason, None,
                                          kernel.adapter if kernel.reads_block_index else None, grids, candidates=table,
                                          rules=d.rules, sizes=sizes))
    fixes = tuple(KernelFix(index, analysis.kernels[index].name, analysis.kernels[index].line, _alone(analysis, index, p))
                  for index, p in sorted(accepted.items()))
    return RewriteResult(src.path, src.dialect, options.hw.name, tuple(outcomes), src.data, new_src.data, patch, report,
                         syntax_errors=src.errors, notes=analysis.notes, fixes=fixes, library=edits[-1] if edits else None)


# The names a reason asks --set for, in the words the reasons use (swzc.model.footprint's unknown parameters,
# `_rank`'s template arguments and the parameters its reads also use).
_SET_NAMES = (UNFIXED_PARAMETER,
              re.compile(r"(?:its template arguments|its reads also use|its writes use) ([\w, ]+?), which --set gives"),
              re.compile(r"not an integer the file fixes: ([A-Za-z_]\w*(?:(?:\.|->)[A-Za-z_]\w*)*)\b"))


def _named_for_set(reason: str) -> list[str]:
    """The names a reason says --set gives, in the order it names them, each once."""
    found = [(m.start(), i, name) for pattern in _SET_NAMES for m in pattern.finditer(reason)
             for i, name in enumerate(re.split(r", | and ", m.group(1)))]
    return list(dict.fromkeys(name for _, _, name in sorted(found) if name.isidentifier() or FIELD_PATH.fullmatch(name)))


def _alone(analysis: FileAnalysis, index: int, proposal: Proposal) -> tuple[Edit, ...]:
    """One kernel's own edits (and its helpers'), without the library insertion, which splice puts last."""
    return tuple(passes.run(analysis, {index: proposal})[:-1])


def _unranked(src: source.SourceFile, analysis: FileAnalysis, options: Options, indices: list[int],
              decisions: Mapping[int, Decision]) -> dict[int, Decision]:
    """Kernels nothing chose an order for: which of the family are proven for them, and the command that
    would settle the choice (the launch sizes the model needs, or a GPU run)."""
    jobs = [(index, spec) for index in indices for spec in block_swizzle.family(analysis.kernels[index], options.hw)]
    proofs = prove([(spec, analysis.kernels[i].adapter, analysis.kernels[i].shapes) for i, spec in jobs])
    out = {}
    for index in indices:
        kernel = analysis.kernels[index]
        proven = [proof.spec for (i, _), proof in zip(jobs, proofs) if i == index and proof.ok and not proof.identity]
        where = "its grid" if kernel.shapes else "sample grids (its grid is not known)"
        reason = decisions[index].reason
        sets = "".join(f" --set {clean.shell_word(f'{name}=VALUE')}" for name in _named_for_set(reason))  # `p->n` is quoted
        unfollowed = "the model cannot follow" in reason and not sets  # a grid alone would not rank it: a run can
        if not any(la.grid is not None and la.block is not None for la in kernel.launches):
            settle = (f"swzc rewrite {clean.shell_path(src.path)} {'--bench ' if unfollowed else ''}--grid {kernel.name}=X,Y --block {kernel.name}=X,Y"
                      f"{sets}{' (on a GPU)' if unfollowed else ''} (or --bench-cmd to observe a run)")
        elif sets:  # the values the reason names rank it: no GPU needed
            settle = f"swzc rewrite {clean.shell_path(src.path)}{sets} (the values the program runs with)"
        else:
            settle = f"swzc rewrite {clean.shell_path(src.path)} --bench (on a GPU: measures {', '.join(proven[: options.max_iterations])})"
        out[index] = Decision(index, "unranked", f"{decisions[index].reason}; nothing is rewritten blind. Proven on {where}: "
                              f"{', '.join(proven) or 'none'}. To choose: {settle}, or force one with --swizzle")
    return out


def _describe(kernel: KernelInfo, proposal: Proposal) -> str:
    loop = kernel.tile_loop
    if loop is not None:
        shape = f"decoded into tiles of {loop.decode.divisor} columns" if loop.decode else "one row of tiles"
        return (f"{proposal.spec.name} over the tile loop at line {loop.line} ({loop.count} tiles, {shape}); "
                f"{len(loop.reads)} read(s) of {loop.var} in its body rewritten")
    where = {
        "2d": "2D grid (rows blockIdx.y)",
        "1d": f"1D grid decoded into tiles of {kernel.decode.divisor if kernel.decode else '?'} columns",
        "linear": "1D grid",
    }[proposal.adapter]
    reads = [f"{len(kernel.uses)} block-index read(s) rewritten"] if kernel.uses else []
    if kernel.helpers:
        reads.append(f"helper(s) {', '.join(kernel.helpers)} rewritten")
    return f"{proposal.spec.name} over the {where}; {' and '.join(reads)}"
