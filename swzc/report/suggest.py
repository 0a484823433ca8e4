"""What `swzc suggest FILES…` reports: per FILE, the kernels the L2 model would swizzle, each with its numbers
and the `swzc rewrite` command that applies it, as lines of text or as one JSON document (--json).

One module per command's outputs (see swzc.report.rewrite): the records (a FILE's suggestions, or the error
that stopped it), how they are computed from the pipeline's result, the exit code they add up to, and the
two emitters.  The model alone decides (no GPU, no LLM, no compile check); nothing is written.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from swzc.analysis.kernels import launched_header
from swzc.core import clean, workers
from swzc.core.errors import ExitCode, SwzcError
from swzc.core.memo import Memo
from swzc.core.signals import interrupt_received
from swzc.frontend.build_context import HeaderParses
from swzc.frontend.preprocess import HEADER_NOT_FOUND
from swzc.frontend.evaluate import Value
from swzc.frontend.source import SyntaxIssue
from swzc.pipeline.driver import KernelOutcome, Options, parse_launch_facts, rewrite_file
from swzc.report.shared import syntax_json
from swzc.pipeline.reading import Included, build_context, input_limit
from swzc.rewrite.patch import quoted
from swzc.target.hw import HardwareModel

# Where several codes apply, the one the user must act on first: a broken check, then bad input, then advice.
SEVERITY = (ExitCode.OK, ExitCode.DECLINED, ExitCode.BAD_INPUT, ExitCode.CHECK_FAILED)


@dataclass(frozen=True)
class Predicted:
    """The L2 model's figures for one order of a kernel's blocks."""

    l2_hit_rate: float  # percent
    dram_bytes: float


@dataclass(frozen=True)
class Suggestion:
    """A kernel the model would rewrite: its figures before and after, and the command that does it."""

    kernel: str
    line: int
    swizzle: str
    identity: Predicted | None  # None only where the model's table lacks the order; `note` then says why it was chosen
    swizzled: Predicted | None
    note: str
    apply: str
    swept: str = ""  # where the grid is set at run time: the size the figures are at, and the order's gate


@dataclass(frozen=True)
class FileSuggestions:
    """One FILE's kernels and what the model suggests for them, or why the FILE could not be read."""

    path: str
    outcomes: tuple[KernelOutcome, ...] = ()  # without their sweeps (`sizes`): the suggestions hold what they say
    suggestions: tuple[Suggestion, ...] = ()
    error: str = ""
    code: ExitCode = ExitCode.OK  # the error's code; OK when there is none
    notes: tuple[str, ...] = ()  # what the analysis could not follow in the file (a header not found, ...)
    syntax_errors: tuple[SyntaxIssue, ...] = ()  # what tree-sitter could not parse and the analysis worked around
    error_details: Mapping[str, Any] = field(default_factory=dict)  # what the error carries for --json (its syntax errors)
    hw: str = ""  # the hardware model the FILE was read for (its project's [tool.swzc] may name its own)


@dataclass(frozen=True)
class Settings:
    """What every FILE is read with: the command line, parsed once."""

    hw: HardwareModel
    bound: Mapping[str, Value | str]  # --set, parsed
    include_dirs: tuple[str, ...]
    defines: tuple[str, ...]
    build_path: str | None
    grids: tuple[str, ...]
    blocks: tuple[str, ...]
    max_bytes: int
    # The apply command repeats what the command line said about how to read the files; a [tool.swzc]
    # default it leaves out, since `swzc rewrite` run in the same place reads the same pyproject.toml.
    passed: tuple[str, ...] = ()  # --hw, --set, -I, -D, -p, as words
    passed_launches: tuple[tuple[str, str], ...] = ()  # ("--grid" or "--block", KERNEL=X,Y), kept per FILE
    # launches of this FILE's kernels in another FILE of the run that includes it, and the macros it includes it with
    # (reading.launches_between); a --grid or --block given for a kernel comes first
    included: Included = field(default_factory=Included)
    parses: HeaderParses = field(default_factory=HeaderParses, compare=False)  # headers the files include, parsed once
    memo: Memo = field(default_factory=Memo, compare=False)  # the results cache (swzc.core.memo): off unless the command turns it on


def kernel_of(pair: str) -> str:
    """The kernel a --grid or --block KERNEL=X,Y names."""
    return pair.partition("=")[0].strip()


def _apply_command(path: str, outcomes: tuple[KernelOutcome, ...], settings: Settings) -> str:
    """The `swzc rewrite` command that makes exactly the suggested changes to PATH, read as suggest read it.

    Each suggested order is named, so that `rewrite`, which may rank with the compiler's figures where suggest
    never compiles, writes what was suggested: `--swizzle SPEC` where every kernel that reads the block index was
    given that one order (a forced --swizzle reaches every kernel it fits), else `--swizzle KERNEL=SPEC` for each
    kernel suggested, which leaves the others alone."""
    names = {o.name for o in outcomes}
    words = [*settings.passed, *(w for define in settings.included.defines for w in ("-D", define))]
    words += [w for option, pair in settings.passed_launches if kernel_of(pair) in names for w in (option, pair)]
    reading = [o for o in outcomes if o.status != "untouched"]
    orders = {o.swizzle for o in reading}
    rewritten = [o for o in reading if o.status == "rewritten" and o.swizzle]
    by_name: dict[str, set[str]] = {}
    for o in reading:  # two kernels of one name (overloads) are pinned together only where they agree
        by_name.setdefault(o.name, set()).add(str(o.swizzle) if o.status == "rewritten" else "")
    if reading and all(o.status == "rewritten" for o in reading) and len(orders) == 1:
        words += ["--swizzle", str(orders.pop())]
    elif rewritten and all(len(by_name[o.name]) == 1 for o in rewritten):
        for name in dict.fromkeys(o.name for o in rewritten):
            words += ["--swizzle", f"{name}={next(iter(by_name[name]))}"]
    words.append("--in-place")
    # PATH as a name even where it starts with '-'; every word quoted, an unsafe character as a $'…' escape
    return " ".join(["swzc", "rewrite", clean.shell_path(path), *map(clean.shell_word, words)])


def _predicted(candidates: tuple[tuple[str, float, float], ...], name: str | None) -> Predicted | None:
    found = next((c for c in candidates if c[0] == name), None)
    return None if found is None else Predicted(found[1], found[2])


def suggestions_of(path: str, outcomes: tuple[KernelOutcome, ...], settings: Settings) -> tuple[Suggestion, ...]:
    """A suggestion per kernel the model would rewrite, with identity's and the chosen order's figures."""
    rewritten = [o for o in outcomes if o.status == "rewritten" and o.swizzle]
    if not rewritten:
        return ()
    apply = _apply_command(path, outcomes, settings)
    # a gated order's figures are its own, ungated, at the largest size ranked (as identity's are); an order's
    # division form (/int) moves no block: the model ranked it as its / form
    return tuple(Suggestion(o.name, o.line, str(o.swizzle), _predicted(o.candidates, "identity"),
                            _predicted(o.candidates, str(o.swizzle).partition("@")[0].removesuffix("/int")), o.chosen_by, apply,
                            "; ".join(filter(None, (_swept(o), _launched_from(o.name, settings)))))
                 for o in rewritten)


def _launched_from(kernel: str, settings: Settings) -> str:
    """For a kernel read with a launch in another FILE that includes it (and no --grid of the user's): that launch."""
    given = {kernel_of(pair) for pair in (*settings.grids, *settings.blocks)}
    facts = settings.included.facts.get(kernel, ()) if kernel not in given else ()
    fixed = [f for f in facts if f.grid is not None]  # the ranking reads the largest grid a launch fixes, else the sweep
    ranked = max(fixed, key=lambda f: f.grid[0] * f.grid[1] * f.grid[2]) if fixed else facts[0] if facts else None
    macros = f"; read with {settings.included.said()}, as {settings.included.by} includes it" if settings.included.macros else ""
    return f"its launch at {ranked.where}{macros}" if ranked is not None else ""


def _swept(o: KernelOutcome) -> str:
    """For a kernel ranked over sizes: at which the figures are, and below what the order is gated off."""
    sweep = o.sizes
    if sweep is None or not sweep.points:
        return ""
    at = (f"{' = '.join(sweep.names)} = {sweep.points[-1].size}, the largest size swept" if sweep.names
          else "the largest grid it is launched with")
    gate = sweep.chosen.gate if sweep.chosen is not None else 0
    block = f"; its block taken as {', '.join(f'{n} = {v}' for n, v in sweep.assumed)}" if sweep.assumed else ""
    return at + block + (f"; the kernel's own order under {gate:,} tiles" if gate else "")


def suggest_file(path: str, settings: Settings) -> FileSuggestions:
    """The model's suggestions for one FILE, or the error that stopped it, as a record: the run goes on."""
    try:
        context, context_notes = build_context(path, settings.include_dirs, (*settings.defines, *settings.included.defines),
                                               settings.build_path, settings.parses, settings.memo)
        with input_limit(settings.max_bytes):  # with several FILEs, a --grid may name a kernel of another one
            options = Options(hw=settings.hw, bindings=settings.bound, context=context,
                              facts={**settings.included.facts, **parse_launch_facts(settings.grids, settings.blocks)}, facts_elsewhere=True,
                              bench=False, compile=False, proposer="builtin")
            result = rewrite_file(path, options)
    except SwzcError as exc:
        if interrupt_received():
            raise KeyboardInterrupt from None
        message = exc.message if exc.message.startswith(f"{path}:") else f"{path}: {exc.message}"
        return FileSuggestions(path, error=message, code=exc.code, error_details=dict(exc.details), hw=settings.hw.name)
    except Exception as exc:  # noqa: BLE001 - one FILE's failure must not hide the others' suggestions
        if interrupt_received():
            raise KeyboardInterrupt from None
        return FileSuggestions(path, error=f"{path}: internal error: {type(exc).__name__}: {exc} (please report this "
                                           "with the input file)", code=ExitCode.CHECK_FAILED, hw=settings.hw.name)
    # The suggestions read the sweeps (`KernelOutcome.sizes`); the record goes on without them, as nothing else
    # here reads them and their rankings at every size (footprints included) are tens of megabytes to send back
    # from a worker.
    outcomes = tuple(replace(o, sizes=None) for o in result.outcomes)
    return FileSuggestions(path, outcomes, suggestions_of(path, result.outcomes, settings),
                           notes=(*context_notes, *settings.included.notes, *result.notes), syntax_errors=result.syntax_errors, hw=settings.hw.name)


def suggest_files(work: Sequence[tuple[str, Settings]], jobs: int = 1, done: Callable[[int], None] | None = None
                  ) -> Iterator[FileSuggestions]:
    """Each FILE's suggestions, read with its settings (its project's), in the order given: one FILE at a time, or
    `jobs` at once here and on worker processes (swzc.core.workers), the largest first; `done(index)` as each ends."""
    return workers.in_order(_suggest_one, work, jobs, cost=_size, done=done)


def _suggest_one(item: tuple[str, Settings]) -> FileSuggestions:
    return suggest_file(*item)


def _size(item: tuple[str, Settings]) -> float:
    """A FILE's bytes, for the workers to take the largest first (0 where it cannot be told: it fails soon)."""
    try:
        return os.stat(item[0]).st_size
    except (OSError, ValueError):
        return 0


def exit_code(reports: Sequence[FileSuggestions], exit_zero: bool) -> ExitCode:
    """The most severe code that applies (SEVERITY)."""
    codes = [r.code for r in reports if r.error]
    if any(r.suggestions for r in reports) and not exit_zero:
        codes.append(ExitCode.DECLINED)
    return max(codes, key=SEVERITY.index, default=ExitCode.OK)


# ---- text ---------------------------------------------------------------------------------------------


def render_lines(report: FileSuggestions, verbose: bool, said: set[str] | None = None) -> list[str]:
    """A FILE's lines: one per suggestion (verbose: one per kernel, with why the others are left alone, and the
    file's notes, each note once a run: `said` holds those an earlier file gave, a header's that several include)."""
    shown = quoted(report.path)  # a file named with a newline must not print a line of its own
    by_kernel = {(s.kernel, s.line): s for s in report.suggestions}
    several = len(report.suggestions) > 1  # one command applies them all: said once, after them
    lines = []
    for o in report.outcomes:
        found = by_kernel.get((o.name, o.line))
        if found is not None:
            lines.append(_suggestion_text(found, shown, "see below" if several else found.apply))
        elif verbose:
            reason = clean.one_line(o.reason)  # one line per kernel, whatever the reason holds
            lines.append(f"{shown}:{o.line}: kernel {o.name}: {o.status}: {reason}")
    if several:
        lines.append(f"{shown}: apply all {len(report.suggestions)}: {report.suggestions[0].apply}")
    if verbose and not report.outcomes and not report.error:
        lines.append(f"{shown}: no __global__ kernels")
    if verbose:  # what the reasons above may come from: a header not found, a limit reached
        fresh = [note for note in report.notes if said is None or note not in said]
        lines += [f"{shown}: note: {clean.one_line(note)}" for note in fresh]
        if said is not None:
            said.update(fresh)
    return lines


def unranked_hint(reports: Sequence[FileSuggestions]) -> str:
    """One line on the kernels the model could not rank, which the default output passes over ('' where none):
    how many, where, and how to see why."""
    unranked = [(r.path, o.name) for r in reports for o in r.outcomes if o.status == "unranked"]
    if not unranked:
        return ""
    files = list(dict.fromkeys(path for path, _ in unranked))
    where = quoted(files[0]) if len(files) == 1 else f"{len(files)} files"
    # a header not found hides macros, sizes and helpers: where their files miss one, -I comes first
    missing = list(dict.fromkeys(m.group(1) for r in reports if r.path in files for n in r.notes
                                 for m in [HEADER_NOT_FOUND.search(n)] if m))
    named = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    lacks = (f"{len(missing)} header(s) they include were not found ({named}): -I adds their folders; then --grid, --block "
             "or --set" if missing else "--grid, --block or --set")
    return (f"{len(unranked)} kernel(s) in {where} could not be ranked by the L2 model and get no suggestion "
            f"(`swzc suggest -v` says why; {lacks} often gives what it lacks)")


def without_named_headers(report: FileSuggestions, files: Sequence[str]) -> FileSuggestions:
    """The report without its notes on launches of kernels that headers among FILES define: those headers were read
    with the launches, and the notes' advice to name them is moot."""
    named = {os.path.realpath(f) for f in files}
    kept = tuple(n for n in report.notes if not ((h := launched_header(n)) and os.path.realpath(h) in named))
    return replace(report, notes=kept) if kept != report.notes else report


def elsewhere_hint(reports: Sequence[FileSuggestions], files: Sequence[str]) -> str:
    """One line on the kernels FILES launch that headers outside the run define, which the default output passes
    over ('' where none): swzc reads a kernel in its own file, and -v gives the command that reads it with the launch."""
    named = {os.path.realpath(f) for f in files}
    launching = [(r.path, header) for r in reports for n in r.notes for header in [launched_header(n)]
                 if header and os.path.realpath(header) not in named]
    if not launching:
        return ""
    paths = list(dict.fromkeys(path for path, _ in launching))
    headers = list(dict.fromkeys(header for _, header in launching))
    where = quoted(paths[0]) if len(paths) == 1 else f"{len(paths)} files"
    shown = ", ".join(quoted(h) for h in headers[:3]) + (f" and {len(headers) - 3} more" if len(headers) > 3 else "")
    verb = "launches" if len(paths) == 1 else "launch"
    return (f"{where} {verb} kernels defined in {shown}: swzc reads a kernel in the file that defines it; "
            "name that file too, in the same run, to have it read with the launch (`swzc suggest -v` says more)")


def _suggestion_text(s: Suggestion, path: str, apply: str) -> str:
    if s.identity is not None and s.swizzled is not None:
        numbers = (f"predicted L2 hits {s.identity.l2_hit_rate:.1f} % -> {s.swizzled.l2_hit_rate:.1f} %, "
                   f"DRAM {s.identity.dram_bytes / 1e6:,.0f} MB -> {s.swizzled.dram_bytes / 1e6:,.0f} MB"
                   + (f" (at {s.swept})" if s.swept else ""))
    else:
        numbers = s.note
    return f"{path}:{s.line}: kernel {s.kernel}: {s.swizzle} {numbers}; apply: {apply}"


# ---- JSON ---------------------------------------------------------------------------------------------


def render_json(hw: str, code: ExitCode, reports: Sequence[FileSuggestions]) -> str:
    """Every FILE, each kernel with its status and, where the model would rewrite it, its suggestion."""
    return clean.dumps({"hw": hw, "exit_code": int(code), "files": [_file_json(r) for r in reports]})


def _file_json(report: FileSuggestions) -> dict[str, Any]:
    by_kernel = {(s.kernel, s.line): s for s in report.suggestions}
    kernels = []
    for o in report.outcomes:
        found = by_kernel.get((o.name, o.line))
        status = "suggested" if found is not None else o.status  # nothing is rewritten here
        kernels.append({"name": o.name, "line": o.line, "status": status, "reason": o.reason, "rules": list(o.rules),
                        "suggestion": None if found is None else _suggestion_json(found)})
    if report.error:  # a file that could not be analysed: what the error knows of it (its kernels, its syntax errors)
        kernels = [{**k, "suggestion": None} for k in report.error_details.get("kernels", [])]
    syntax = syntax_json(report.syntax_errors) or list(report.error_details.get("syntax_errors", []))
    return {"file": report.path, "hw": report.hw, "error": report.error or None, "exit_code": int(report.code) if report.error else None,
            "kernels": kernels, "notes": list(report.notes), "syntax_errors": syntax}


def _suggestion_json(s: Suggestion) -> dict[str, Any]:
    def figures(p: Predicted | None) -> dict[str, float] | None:
        return None if p is None else {"l2_hit_rate": p.l2_hit_rate, "dram_bytes": round(p.dram_bytes)}

    return {"swizzle": s.swizzle, "identity": figures(s.identity), "swizzled": figures(s.swizzled),
            "chosen_by": s.note, "apply": s.apply, "swept": s.swept or None}
