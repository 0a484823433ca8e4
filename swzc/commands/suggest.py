"""`swzc suggest FILES…`: the L2 model's swizzle for every kernel of many files, one line per kernel.

Written for a pre-commit hook, which runs on every commit, on a machine without a GPU, on code that may
come from others.  So it only predicts: no GPU run, no LLM, no compile check, and the user's code is never
built or run (the host prover, which compiles swzc's own C++ once and caches it, is the one compiler run).
It never writes the user's files (the only thing written is that prover, into swzc's own cache): each
suggestion names the `swzc rewrite` command that applies it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import click
from click.core import ParameterSource

from swzc.core import clean
from swzc.commands.cli import (build_context, build_options, guarded, hw_option, input_limit, json_option, max_bytes_option, set_option,
                      verbosity)
from swzc.core.signals import interrupt_received
from swzc.core.errors import ExitCode, SwzcError
from swzc.frontend.evaluate import Value
from swzc.target.hw import HardwareModel
from swzc.rewrite.patch import quoted
from swzc.pipeline.driver import KernelOutcome, Options, load_hw, parse_bindings, parse_launch_facts, rewrite_file

EPILOG = """\b
Examples:
  swzc suggest kernels/*.cu            one line per kernel the model would swizzle
  swzc suggest -v gemm.cu --set N=4096 also say why the other kernels are left alone
  swzc suggest --exit-zero --json src/*.cu src/*.hip

\b
As a pre-commit hook (.pre-commit-config.yaml):
  - repo: <this repository's URL>
    rev: <a tag or commit>
    hooks:
      - id: swzc-suggest

\b
Each suggestion ends with the command that applies it.  It is
`swzc rewrite PATH --swizzle S --in-place` when S is the order for every
kernel of PATH that reads the block index; otherwise `swzc rewrite PATH
--in-place`, which applies the model's choice kernel by kernel (a forced
--swizzle would also reach kernels the model leaves alone).

\b
Exit codes:
  (where several apply, the highest wins: 3 over 2 over 1 over 0)
  0  no suggestion (or --exit-zero)
  1  at least one kernel would be rewritten
  2  bad input: a FILE that cannot be read or analysed (the message is on
     stderr and the other FILEs are still checked), unknown --hw, bad --set,
     --grid or --block
  3  one of swzc's own checks failed on a FILE (proof, re-parse), or an
     internal error
  130  interrupted (SIGINT or SIGTERM)"""

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

    def text(self, path: str) -> str:
        if self.identity is not None and self.swizzled is not None:
            numbers = (f"predicted L2 hits {self.identity.l2_hit_rate:.1f} % -> {self.swizzled.l2_hit_rate:.1f} %, "
                       f"DRAM {self.identity.dram_bytes / 1e6:,.0f} MB -> {self.swizzled.dram_bytes / 1e6:,.0f} MB")
        else:
            numbers = self.note
        return f"{path}:{self.line}: kernel {self.kernel}: {self.swizzle} {numbers}; apply: {self.apply}"

    def as_json(self) -> dict[str, Any]:
        def figures(p: Predicted | None) -> dict[str, float] | None:
            return None if p is None else {"l2_hit_rate": p.l2_hit_rate, "dram_bytes": p.dram_bytes}

        return {"swizzle": self.swizzle, "identity": figures(self.identity), "swizzled": figures(self.swizzled),
                "chosen_by": self.note, "apply": self.apply}


@dataclass(frozen=True)
class FileSuggestions:
    """One FILE's kernels and what the model suggests for them, or why the FILE could not be read."""

    path: str
    outcomes: tuple[KernelOutcome, ...] = ()
    suggestions: tuple[Suggestion, ...] = ()
    error: str = ""
    code: ExitCode = ExitCode.OK  # the error's code; OK when there is none

    def lines(self, verbose: bool) -> list[str]:
        shown = quoted(self.path)  # a file named with a newline must not print a line of its own
        by_kernel = {(s.kernel, s.line): s for s in self.suggestions}
        lines = []
        for o in self.outcomes:
            found = by_kernel.get((o.name, o.line))
            if found is not None:
                lines.append(found.text(shown))
            elif verbose:
                reason = clean.one_line(o.reason)  # one line per kernel, whatever the reason holds
                lines.append(f"{shown}:{o.line}: kernel {o.name}: {o.status}: {reason}")
        if verbose and not self.outcomes and not self.error:
            lines.append(f"{shown}: no __global__ kernels")
        return lines

    def as_json(self) -> dict[str, Any]:
        by_kernel = {(s.kernel, s.line): s for s in self.suggestions}
        kernels = []
        for o in self.outcomes:
            found = by_kernel.get((o.name, o.line))
            status = "suggested" if found is not None else o.status  # nothing is rewritten here
            kernels.append({"name": o.name, "line": o.line, "status": status, "reason": o.reason, "rules": list(o.rules),
                            "suggestion": None if found is None else found.as_json()})
        return {"file": self.path, "error": self.error or None, "exit_code": int(self.code) if self.error else None,
                "kernels": kernels}


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


def _kernel_of(pair: str) -> str:
    return pair.partition("=")[0].strip()


def _apply_command(path: str, outcomes: tuple[KernelOutcome, ...], settings: Settings) -> str:
    """The `swzc rewrite` command that makes exactly the suggested changes to PATH, read as suggest read it.

    A forced --swizzle reaches every kernel it fits, including ones the model declined, and can even lift a
    refusal that came from kernels sharing a helper with different orders; so it is named only when every
    kernel that reads the block index was given that one order."""
    names = {o.name for o in outcomes}
    words = [*settings.passed]
    words += [w for option, pair in settings.passed_launches if _kernel_of(pair) in names for w in (option, pair)]
    reading = [o for o in outcomes if o.status != "untouched"]
    orders = {o.swizzle for o in reading}
    if reading and all(o.status == "rewritten" for o in reading) and len(orders) == 1:
        words += ["--swizzle", str(orders.pop())]
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
    return tuple(Suggestion(o.name, o.line, str(o.swizzle), _predicted(o.candidates, "identity"),
                            _predicted(o.candidates, o.swizzle), o.chosen_by, apply) for o in rewritten)


def suggest_file(path: str, settings: Settings) -> FileSuggestions:
    """The model's suggestions for one FILE, or the error that stopped it, as a record: the run goes on."""
    try:
        context, _ = build_context(path, settings.include_dirs, settings.defines, settings.build_path)
        with input_limit(settings.max_bytes):  # with several FILEs, a --grid may name a kernel of another one
            options = Options(hw=settings.hw, bindings=settings.bound, context=context,
                              facts=parse_launch_facts(settings.grids, settings.blocks), facts_elsewhere=True,
                              bench=False, compile=False, proposer="builtin")
            result = rewrite_file(path, options)
    except SwzcError as exc:
        if interrupt_received():
            raise KeyboardInterrupt from None
        message = exc.message if exc.message.startswith(f"{path}:") else f"{path}: {exc.message}"
        return FileSuggestions(path, error=message, code=exc.code)
    except Exception as exc:  # noqa: BLE001 - one FILE's failure must not hide the others' suggestions
        if interrupt_received():
            raise KeyboardInterrupt from None
        return FileSuggestions(path, error=f"{path}: internal error: {type(exc).__name__}: {exc} (please report this "
                                           "with the input file)", code=ExitCode.CHECK_FAILED)
    return FileSuggestions(path, result.outcomes, suggestions_of(path, result.outcomes, settings))


def exit_code(reports: list[FileSuggestions], exit_zero: bool) -> ExitCode:
    """The most severe code that applies (SEVERITY)."""
    codes = [r.code for r in reports if r.error]
    if any(r.suggestions for r in reports) and not exit_zero:
        codes.append(ExitCode.DECLINED)
    return max(codes, key=SEVERITY.index, default=ExitCode.OK)


@click.command(name="suggest", epilog=EPILOG)
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=True))
@hw_option
@set_option
@build_options
@max_bytes_option
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are suggestions (bad input and failed checks still exit 2 and 3).")
@click.option("-v", "--verbose", is_flag=True, help="Also print the kernels left alone, with their status and reason "
              "(as `swzc -v suggest`).")
@json_option
@guarded
def command(files: tuple[str, ...], hw_name: str, bindings: tuple[str, ...], include_dirs: tuple[str, ...],
            defines: tuple[str, ...], build_path: str | None, grids: tuple[str, ...], blocks: tuple[str, ...],
            max_bytes: int, exit_zero: bool, verbose: bool, as_json: bool) -> None:
    """Print the block swizzle the L2 model suggests for each kernel of FILES; write nothing.

    The model alone decides: no GPU, no LLM, no compile check, and FILES are never built or run, so this
    is safe and fast on every commit.  Prints one line per kernel that `swzc rewrite` would change
    (-v: every kernel)."""
    parse_launch_facts(grids, blocks)  # a malformed --grid or --block is the command line's error: exit 2 now
    ctx = click.get_current_context()

    def typed(name: str) -> bool:
        """Given on the command line: not a default, nor a [tool.swzc] setting."""
        return ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)

    passed: list[str] = []
    for option, name, values in (("--hw", "hw_name", (hw_name,)), ("--set", "bindings", bindings),
                                 ("-I", "include_dirs", include_dirs), ("-D", "defines", defines),
                                 ("-p", "build_path", (build_path,) if build_path else ())):
        if typed(name):
            passed += [word for value in values for word in (option, value)]
    launches = tuple((option, pair) for option, name, pairs in (("--grid", "grids", grids), ("--block", "blocks", blocks))
                     if typed(name) for pair in pairs)
    settings = Settings(load_hw(hw_name), parse_bindings(list(bindings)), include_dirs, defines, build_path, grids, blocks,
                        max_bytes, tuple(passed), launches)
    quiet, loud = verbosity()
    reports = []
    for path in files:
        report = suggest_file(path, settings)
        reports.append(report)
        if report.error:
            clean.echo(f"swzc: error: {report.error}", err=True)
        if not as_json and not quiet:
            for line in report.lines(verbose or loud):
                clean.echo(line)
    # A hook is given only the files a commit changed: a --grid for a kernel elsewhere is not an error.
    unused = sorted({_kernel_of(p) for p in (*grids, *blocks)} - {o.name for r in reports for o in r.outcomes})
    if unused and (verbose or loud):
        clean.echo(f"swzc: note: --grid/--block name kernel(s) {', '.join(unused)}, which are in none of these FILES", err=True)
    code = exit_code(reports, exit_zero)
    if as_json:
        clean.echo(clean.dumps({"hw": settings.hw.name, "exit_code": int(code), "files": [r.as_json() for r in reports]}))
    sys.exit(int(code))
