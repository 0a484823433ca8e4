"""The command line: a thin layer over swzc.pipeline.driver that maps outcomes to messages and exit codes."""

from __future__ import annotations

import html
import importlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import wraps
from typing import Any, NoReturn, TypeVar

import click

from swzc import __version__
from swzc.target import hw as hwmodels

from swzc.core import clean

from swzc.pipeline import config

from swzc.core import outputs
from swzc.analysis.records import FileAnalysis
from swzc.verify.bench import PROFILERS, report_json
from swzc.core.signals import interrupt_received, report_interrupt
from swzc.verify.harness import gpu_name, gpu_present
from swzc.core.outputs import STDOUT, Output
from swzc.verify.program import CHECK_PATTERN, TIME_PATTERN, ProgramBench
from swzc.core.errors import ExitCode, SwzcError
from swzc.passes import block_swizzle
from swzc.rewrite.patch import header_path
from swzc.pipeline.driver import (Options, RewriteResult, analyze_file, load_hw, parse_bindings, parse_launch_facts, parse_swizzle,
                           rank_kernels, rewrite_file)
from swzc.report.run_report import search_report_json, search_report_markdown, searches_json
from swzc.frontend.preprocess import CompileContext, context_from_database, context_from_flags, find_compile_commands
from swzc.search.proposers import PROPOSERS
from swzc.model.rank import Ranking
from swzc.model.residency import Residency
from swzc.analysis.context import FileContext
from swzc.frontend.source import DEFAULT_MAX_BYTES, SyntaxIssue, max_input_bytes

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CODES = """\b
Exit codes:
  0  rewritten (analyze: would rewrite), or nothing to do (no kernel reads the block index)
  1  every kernel that reads the block index was refused, declined or left unranked
  2  bad input: unreadable file, kernels but none clear of syntax errors, unknown --hw, bad --swizzle, --set or --grid,
     --bench without a GPU, an output swzc must not write; nothing written
  3  a check of the rewrite failed (proof, re-parse, compile) or an internal error; nothing written
  130  interrupted (SIGINT or SIGTERM); nothing written"""


def examples(*lines: str) -> str:
    """An epilog: examples, then the exit codes every command shares."""
    return "\b\nExamples:\n" + "".join(f"  {line}\n" for line in lines) + "\n" + EXIT_CODES


def _fail(message: str, code: ExitCode) -> None:
    clean.echo(f"swzc: error: {message}", err=True)
    sys.exit(int(code))


def _json_error(exc: SwzcError) -> None:
    """With --json, the error as one JSON document on stdout too (a tool reading stdout gets the file's syntax
    errors, not nothing)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or not ctx.params.get("as_json"):
        return
    file = ctx.params.get("file")
    clean.echo(clean.dumps({"file": file, "exit_code": int(exc.code), "error": exc.message, **exc.details}))


def _interrupted() -> NoReturn:
    sys.exit(report_interrupt())


def guarded(func: F) -> F:
    """Every error reaches the user as a message and an exit code, never as a traceback."""

    @wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except KeyboardInterrupt:
            _interrupted()
        except SwzcError as exc:
            if interrupt_received():  # e.g. a compiler killed by the interrupt, reported as a failed check
                _interrupted()
            _json_error(exc)
            _fail(exc.message, exc.code)
        except Exception as exc:  # noqa: BLE001 - the boundary: report, never a traceback
            if interrupt_received():  # e.g. tree-sitter's QueryError when Ctrl-C lands in query compilation
                _interrupted()
            _fail(f"internal error: {type(exc).__name__}: {exc} (please report this with the input file)", ExitCode.CHECK_FAILED)

    return run  # type: ignore[return-value]


# Commands kept in modules of their own, loaded when named (or listed): `show` brings matplotlib, and a
# hook's `suggest` should not pay for what it does not use.
LAZY_COMMANDS = {"suggest": "swzc.commands.suggest", "review": "swzc.commands.review", "show": "swzc.commands.show"}


class Commands(click.Group):
    """click reports an interrupt during its own parsing as "Aborted!" with exit 1; swzc reports it as
    every other interrupt (exit 130).  The commands of LAZY_COMMANDS load when first named."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            self.add_command(importlib.import_module(LAZY_COMMANDS[cmd_name]).command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            _interrupted()
        except click.ClickException as exc:  # click quotes the command line (a file named like an option) as it is
            exc.message = clean.text(exc.message)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            _interrupted()
        except click.ClickException as exc:
            exc.message = clean.text(exc.message)
            raise


@contextmanager
def input_limit(max_bytes: int) -> Iterator[None]:
    token = max_input_bytes.set(max_bytes)
    try:
        yield
    finally:
        max_input_bytes.reset(token)


hw_option = click.option("--hw", "hw_name", default="h200", show_default=True, metavar="NAME",
                         help=f"Hardware model ({', '.join(hwmodels.available())}).")
set_option = click.option("--set", "bindings", multiple=True, metavar="NAME=VALUE",
                          help="Bind a macro, constant or kernel parameter the file leaves open (repeatable).")
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")
max_bytes_option = click.option("--max-bytes", type=click.IntRange(1), default=DEFAULT_MAX_BYTES, show_default=True,
                                metavar="N", help="Refuse input files larger than this.")


def build_options(func: F) -> F:
    """What the compiler would see: include folders, defines, a compilation database, launch sizes."""
    for option in reversed((
        click.option("-I", "--include-dir", "include_dirs", multiple=True, metavar="DIR",
                     help="Look for #include \"…\" headers here too, after FILE's folder (repeatable)."),
        click.option("-D", "--define", "defines", multiple=True, metavar="NAME[=VALUE]",
                     help="Define a macro as the build does, e.g. -D LARGE_DATASET or -D N=4096 (repeatable)."),
        click.option("-p", "--build-path", metavar="DIR", help="Folder of the compile_commands.json that gives FILE's "
                     "-I and -D flags (default: the first one found in FILE's folder or above)."),
        click.option("--grid", "grids", multiple=True, metavar="KERNEL=X[,Y[,Z]]",
                     help="A kernel's grid, where the file does not fix it (repeatable)."),
        click.option("--block", "blocks", multiple=True, metavar="KERNEL=X[,Y[,Z]]",
                     help="A kernel's block size, where the file does not fix it (repeatable)."),
    )):
        func = option(func)
    return func


def llm_options(func: F) -> F:
    """Where candidates come from, and the LLM's server (any OpenAI-compatible one) or a recorded transcript."""
    for option in reversed((
        click.option("--proposer", type=click.Choice(PROPOSERS), default="builtin", show_default=True,
                     help="Candidate orders from the built-in family, an LLM, or both (the LLM sees the family's "
                          "numbers). Every candidate is proven, predicted and, with --bench, measured."),
        click.option("--model", "llm_model", metavar="NAME", help="The LLM to ask (the key is read from OPENAI_API_KEY)."),
        click.option("--base-url", metavar="URL", help="An OpenAI-compatible server (default: OPENAI_BASE_URL, else OpenAI's)."),
        click.option("--llm-timeout", type=click.FloatRange(0.1, 3600), default=120.0, show_default=True, metavar="S",
                     help="Seconds one LLM request may take, its whole reply read; a question ends within S x (retries + 1)."),
        click.option("--llm-retries", type=click.IntRange(0, 10), default=2, show_default=True, metavar="N",
                     help="Extra tries after a failed LLM request (server error, timeout, malformed reply)."),
        click.option("--llm-replay", metavar="FILE", help="Answer from a recorded transcript instead of a server."),
        click.option("--llm-transcript", metavar="FILE", help="Write the LLM exchanges here (replay them with --llm-replay)."),
    )):
        func = option(func)
    return func


def build_llm(proposer: str, model: str | None, base_url: str | None, timeout_s: float, retries: int,
              replay: str | None) -> Any:
    """The LLM proposer for --proposer llm/both, or None; its modules (and the SDK) load only then."""
    if proposer == "builtin":
        if model or base_url or replay:
            raise SwzcError("--model, --base-url and --llm-replay go with --proposer llm or both")
        return None
    from swzc.search.llm.client import ChatClient, ReplayClient, settings_from
    from swzc.search.llm.proposer import LlmProposer

    if replay:
        if model or base_url:
            raise SwzcError("--llm-replay answers from its file: it does not go with --model or --base-url")
        client: Any = ReplayClient(replay)
    elif not model:
        raise SwzcError(f"--proposer {proposer} needs --model NAME (and --base-url for a server other than OpenAI's), "
                        "or --llm-replay FILE")
    else:
        client = ChatClient(settings_from(model, base_url, timeout_s, retries))  # a server only the user named
    return LlmProposer(client, fall_back=proposer == "both")


def build_context(file: str, include_dirs: tuple[str, ...], defines: tuple[str, ...], build_path: str | None) -> tuple[CompileContext, list[str]]:
    """The compilation database's flags for FILE (never run), then the command line's."""
    notes: list[str] = []
    context = CompileContext()
    database = find_compile_commands(file, build_path)
    if database is not None and database.is_file():
        context, notes = context_from_database(database, file)
    elif build_path is not None:
        raise SwzcError(f"-p {build_path}: no compile_commands.json there")
    given = context_from_flags([*(f"-I{d}" for d in include_dirs), *(f"-D{d}" for d in defines)])
    for name, _ in given.defines:
        if not name.isidentifier():
            raise SwzcError(f"-D {name!r}: not a macro name")
    return context.merged(CompileContext(given.include_dirs, given.defines, "the command line" if given.include_dirs or given.defines else "")), notes


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES)
@click.version_option(__version__, prog_name="swzc")
@click.option("-q", "--quiet", is_flag=True, help="Print only errors (and what goes to stdout on request).")
@click.option("-v", "--verbose", is_flag=True, help="Also print every candidate each kernel's proposers tried.")
@click.pass_context
@guarded
def main(ctx: click.Context, quiet: bool, verbose: bool) -> None:
    """Hardware-aware block swizzles for CUDA and HIP kernels.

    Defaults for options can be set in the user's ~/.config/swzc/config.toml, and facts about the code
    (hardware, sizes, grids, include folders, defines) in [tool.swzc] of the project's pyproject.toml
    (the first one here or above, up to the git root); options on the command line override them.
    Colour and progress bars appear only on a terminal; NO_COLOR turns colour off.
    """
    ctx.obj = {"quiet": quiet, "verbose": verbose, "config": None}
    settings = config.load_user()
    found = config.find()
    if found is not None:
        ctx.obj["config"] = str(found)
        settings = {**settings, **config.load(found)}  # the project's facts over the user's defaults
    if settings:
        invoked = main.get_command(ctx, ctx.invoked_subcommand) if ctx.invoked_subcommand else None
        commands = [invoked] if invoked is not None else []
        ctx.default_map = config.default_map(commands, settings)


def verbosity() -> tuple[bool, bool]:
    """(quiet, verbose) from the command line."""
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    obj = root.obj if root is not None and isinstance(root.obj, dict) else {}
    return bool(obj.get("quiet")), bool(obj.get("verbose"))


@main.command(epilog=examples(
    "swzc rewrite gemm.cu -o gemm.swzc.cu          the L2 model's choice, proven and compile-checked",
    "swzc rewrite gemm.cu --patch gemm.patch --hw mi300x",
    "swzc rewrite gemm.cu --grid gemm=256,256 --block gemm=16,16 --in-place",
    "swzc rewrite gemm.cu --bench --report run     measure on this GPU (builds and runs gemm.cu's code)",
    "swzc rewrite gemm.cu --proposer both --model gpt-4.1 -o out.cu     an LLM's orders too"))
@click.argument("file", type=click.Path(dir_okay=True))
@click.option("-o", "--output", metavar="OUT", help="Write the rewritten file here ('-' for stdout).")
@click.option("--in-place", is_flag=True, help="Overwrite FILE with the rewritten file.")
@click.option("--patch", "patch_out", metavar="FILE", help="Write a unified diff (git apply accepts it; '-' for stdout).")
@click.option("--swizzle", metavar="SPEC", help="identity, colmajor, grouped:G, serpentine:G, hilbert:K, morton:K, "
              "xcd:N, xcd:N:C, or a chain joined by '+' (e.g. xcd:8+grouped:8). Default: the L2 model's choice, or the "
              "measured one with --bench.")
@hw_option
@set_option
@build_options
@click.option("--no-compile", is_flag=True,
              help="Compile nothing of FILE: no compile check of the rewritten file, and the L2 model takes the blocks "
                   "per SM from the launch bounds or a stated default instead of the compiler's resource report.")
@click.option("--bench/--no-bench", "bench", default=None,
              help="Check and time each candidate on the local GPU and keep only a measured win. This builds FILE "
                   "and runs its kernel and static initialisers (default: off; --bench-cmd turns it on).")
@click.option("--max-iterations", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Candidates each proposer offers per kernel: the benchmark's tries of the family, best predicted "
                   "first, and the LLM's requests.")
@llm_options
@click.option("--launch-spec", metavar="FILE", help="TOML giving buffer sizes, scalars or the launch the file leaves open.")
@click.option("--report", "report", metavar="PREFIX", help="With the benchmark: write PREFIX.json and PREFIX.md, every attempt.")
@click.option("--bench-cmd", metavar="CMD", help="Benchmark with your own program instead of the generated harness: a shell "
              "command run in a copy of FILE's folder ({file} is FILE's name, quoted for the shell) that prints a time in ms and a checksum.")
@click.option("--build-cmd", metavar="CMD", help="With --bench-cmd: build the program once per version first.")
@click.option("--bench-runs", type=click.IntRange(1, 1000), default=5, show_default=True, help="With --bench-cmd: timed runs per version.")
@click.option("--time-regex", default=TIME_PATTERN, show_default=False, metavar="RE",
              help="With --bench-cmd: where the time (ms) is in the output (first group that matches).")
@click.option("--check-regex", default=CHECK_PATTERN, show_default=False, metavar="RE",
              help="With --bench-cmd: where the check value is in the output; both versions must print the same.")
@click.option("--compile-flag", "compile_flags", multiple=True, metavar="FLAG",
              help="Extra flag for the compile check, e.g. --compile-flag=-Iinclude (repeatable).")
@max_bytes_option
@json_option
@guarded
def rewrite(file: str, output: str | None, in_place: bool, patch_out: str | None, swizzle: str | None, hw_name: str,
            bindings: tuple[str, ...], no_compile: bool, bench: bool | None, max_iterations: int, launch_spec: str | None,
            report: str | None, bench_cmd: str | None, build_cmd: str | None, bench_runs: int, time_regex: str,
            check_regex: str, compile_flags: tuple[str, ...], max_bytes: int, as_json: bool, include_dirs: tuple[str, ...],
            defines: tuple[str, ...], build_path: str | None, grids: tuple[str, ...], blocks: tuple[str, ...],
            proposer: str, llm_model: str | None, base_url: str | None, llm_timeout: float, llm_retries: int,
            llm_replay: str | None, llm_transcript: str | None) -> None:
    """Give each kernel in FILE a block swizzle; write the result and/or a patch."""
    if output and in_place:
        raise SwzcError("use either -o/--output or --in-place, not both")
    if output == STDOUT and patch_out == STDOUT:
        raise SwzcError("-o - and --patch - would both write to stdout")
    outputs.check(file, _rewrite_outputs(file, output, in_place, patch_out, report, llm_transcript))
    if llm_transcript and proposer == "builtin":
        raise SwzcError("--llm-transcript goes with --proposer llm or both")
    if swizzle and proposer != "builtin":
        raise SwzcError(f"--swizzle forces one order for every kernel; it does not go with --proposer {proposer}")
    llm = build_llm(proposer, llm_model, base_url, llm_timeout, llm_retries, llm_replay)
    program = None
    if bench_cmd:
        for pattern in (time_regex, check_regex):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise SwzcError(f"bad regular expression {pattern!r}: {exc}") from None
        program = ProgramBench(bench_cmd, build_cmd, bench_runs, time_regex, check_regex)
        bench = True if bench is None else bench
    elif build_cmd:
        raise SwzcError("--build-cmd goes with --bench-cmd")
    if bench is None:
        bench = False  # benchmarking runs the file's own code: only when asked for
    elif bench and program is None and not gpu_present():
        raise SwzcError("--bench needs a GPU here: an NVIDIA GPU with nvcc, or an AMD GPU with hipcc; none was found")
    context, context_notes = build_context(file, include_dirs, defines, build_path)
    options = Options(hw=load_hw(hw_name), swizzle=parse_swizzle(swizzle), bindings=parse_bindings(list(bindings)),
                      context=context, facts=parse_launch_facts(grids, blocks),
                      compile=not no_compile, compile_flags=compile_flags, bench=bench, max_iterations=max_iterations,
                      launch_spec=launch_spec, program=program, proposer=proposer, llm=llm)
    if bench:
        from rich.console import Console  # only the benchmark shows progress
        from rich.markup import escape
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task("benchmarking", total=None)

            def progress(text: str) -> None:  # "kernel: candidate (n/N)"
                text = escape(clean.text(text))  # kernel and candidate names: shown, not obeyed (rich reads markup)
                counted = re.search(r" \((\d+)/(\d+)\)$", text)
                if counted is None:
                    bar.update(task, description=f"benchmarking {text}")
                    return
                bar.update(task, description=f"benchmarking {text[: counted.start()]}", completed=int(counted[1]) - 1,
                           total=int(counted[2]))

            with input_limit(max_bytes):
                result = rewrite_file(file, replace(options, progress=progress))
    else:
        with input_limit(max_bytes):
            result = rewrite_file(file, options)
    patch = result.patch.encode("utf-8", "surrogateescape")
    writes = [(out, patch if out.option == "--patch" else result.new)
              for out in _rewrite_outputs(file, output, in_place and result.changed, patch_out, None)]
    if report and (result.benchmarked or result.searches):
        meta = {"file": result.path, "hw": result.hw, "device": gpu_name() if result.benchmarked else "none (not benchmarked)",
                "date": time.strftime("%Y-%m-%d"), "proposer": proposer}
        json_out, md_out, html_out = _rewrite_outputs(file, None, False, None, report)
        writes += [(json_out, search_report_json(result, meta).encode()),
                   (md_out, search_report_markdown(result, meta).encode())]
        if result.benchmarked:
            writes.append((html_out, _report_page(file, result, options).encode("utf-8")))
    if llm_transcript:
        from swzc.search.llm.client import transcript_json

        writes.append((Output("--llm-transcript", llm_transcript),
                       transcript_json([e for t in result.transcripts for e in t.exchanges]).encode()))
    outputs.write_together(file, writes)
    to_stdout = output == STDOUT or patch_out == STDOUT
    patch_note = header_path(file)[1] if patch_out and result.changed else ""
    result = replace(result, notes=(*context_notes, *result.notes))
    quiet, verbose = verbosity()
    report = (_rewrite_json(result, output, in_place, patch_out) if as_json
              else _rewrite_text(result, bool(output or in_place or patch_out), patch_note, verbose))
    if not quiet or as_json:
        clean.echo(report, err=to_stdout)
    if output == STDOUT:  # exact to a pipe; a terminal is shown the file's control characters as escapes
        clean.write_exact(result.new)
    if patch_out == STDOUT:
        clean.write_exact(patch)
    sys.exit(int(result.exit_code))


def _rewrite_outputs(file: str, output: str | None, in_place: bool, patch_out: str | None,
                     report: str | None, transcript: str | None = None) -> list[Output]:
    """The files `rewrite` writes (stdout is not one)."""
    found = [Output("-o", output)] if output and output != STDOUT else []
    found += [Output("--in-place", file)] if in_place else []
    found += [Output("--patch", patch_out)] if patch_out and patch_out != STDOUT else []
    found += [Output("--report", report + ".json"), Output("--report", report + ".md"), Output("--report", report + ".html")] if report else []
    found += [Output("--llm-transcript", transcript)] if transcript else []
    return found


def _report_page(file: str, result: RewriteResult, options: Options) -> str:
    """The benchmark report as a page: per measured kernel, the picture of its order (the accepted one, else
    the first measured) beside the model's predictions and the measured table."""
    from swzc.report import picture

    ctx, analysis = analyze_file(file, options.bindings, options.context, options.facts)
    formulas = {t.name: t.formula for s in result.searches for t in s.history if t.formula is not None}
    sections = []
    for bench in result.bench:
        shown = bench.chosen or next((a.candidate for a in bench.attempts if a.speedup is not None), None)
        try:
            if shown is None or shown not in formulas:
                raise SwzcError("no measured order to draw")
            drawn = picture.kernel_picture(ctx, analysis, options.hw, options.bindings, bench.kernel, formulas[shown])  # type: ignore[arg-type]
            image = picture.render(drawn.picture, "png")
        except SwzcError as exc:
            sections.append(f"<section><h1>{html.escape(bench.kernel)}</h1><p>not drawn: {html.escape(exc.message)}</p></section>")
            continue
        predictions = drawn.ranking.predictions if drawn.ranking is not None else ()
        sections.append(picture.html_section(image, "png", drawn.picture.title, predictions,
                                             [p.name for p in drawn.picture.panels], bench))
    return picture.html_report(f"swzc benchmark report: {result.path}", sections)


def _rewrite_text(result: RewriteResult, wrote: bool, patch_note: str = "", verbose: bool = False) -> str:
    lines = [f"{result.path} ({result.dialect}, hw {result.hw})"]
    for o in result.outcomes:
        head = f"  {o.name} (line {o.line}): {o.status}"
        if o.status == "rewritten":
            lines.append(f"{head} with {o.swizzle}")
            lines.append(f"      {o.reason}")
            if o.chosen_by:
                lines.append(f"      chosen: {o.chosen_by}")
            lines.append(f"      proof: {o.proof}")
        else:
            lines.append(f"{head}: {o.reason}")
    if not result.outcomes:
        lines.append("  no __global__ kernels in this file")
    lines += _syntax_lines(result.path, result.syntax_errors)
    lines += [f"  note: {note}" for note in result.notes]
    if result.compile is not None:
        c = result.compile
        lines.append(f"  compile check: {c.status}" + (f" ({c.detail})" if c.detail else ""))
        if c.command and c.status != "ok":
            lines.append(f"      {c.command}")
    if not result.changed:
        lines.append("  nothing to do: no kernel was rewritten" if result.exit_code == ExitCode.OK else "  no kernel was rewritten")
    for b in result.bench:
        reason = b.reason.replace("\n", "\n      ")  # a failed check carries the harness's own lines
        lines.append(f"  benchmark {b.kernel}: {b.chosen + ' accepted' if b.chosen else 'declined'}: {reason}")
        if b.profiler not in PROFILERS.values():  # no L2 figures: say why
            lines.append(f"      profiler: {b.profiler}")
    for search in result.searches:
        if not verbose and not any(t.proposer == "llm" for t in search.history):
            continue
        lines.append(f"  candidates for {search.kernel}:")
        for t in search.history:
            lines.append(f"      {t.name} ({t.proposer}): {t.status}: {t.detail.splitlines()[0] if t.detail else ''}")
    if patch_note:
        lines.append(f"  note: {patch_note}")
    if result.changed and not result.benchmarked:
        lines.append("  not benchmarked: no GPU run was made for this patch")
        if not wrote:
            lines.append("  dry run: nothing written (use -o OUT, --in-place or --patch FILE)")
    return "\n".join(lines)


def _syntax_lines(path: str, errors: tuple[SyntaxIssue, ...], shown: int = 3) -> list[str]:
    """The parse errors swzc worked around, as summary lines."""
    if not errors:
        return []
    lines = [f"  {len(errors)} part(s) of the file could not be parsed; kernels clear of them were analysed:"]
    lines += [f"      {path}:{e.line}:{e.col}: {e.what}" for e in errors[:shown]]
    if len(errors) > shown:
        lines.append(f"      … and {len(errors) - shown} more (--json lists them all)")
    return lines


def _syntax_json(errors: tuple[SyntaxIssue, ...]) -> list[dict[str, Any]]:
    return [{"line": e.line, "col": e.col, "message": e.what} for e in errors]


def _rewrite_json(result: RewriteResult, output: str | None, in_place: bool, patch_out: str | None) -> str:
    doc = {
        "file": result.path,
        "dialect": result.dialect,
        "hw": result.hw,
        "changed": result.changed,
        "exit_code": int(result.exit_code),
        "benchmarked": result.benchmarked,
        "bench": json.loads(report_json(list(result.bench), {}))["kernels"] if result.benchmarked else [],
        "kernels": [
            {"name": o.name, "line": o.line, "status": o.status, "reason": o.reason, "swizzle": o.swizzle,
             "adapter": o.adapter, "grids": [list(g) for g in o.grids], "proof": o.proof, "chosen_by": o.chosen_by,
             "candidates": _candidates_json(o.candidates), "rules": list(o.rules)}
            for o in result.outcomes
        ],
        "syntax_errors": _syntax_json(result.syntax_errors),
        "notes": list(result.notes),
        "searches": searches_json(result),
        "compile": None if result.compile is None else {"status": result.compile.status, "command": result.compile.command,
                                                         "detail": result.compile.detail},
        "outputs": {"file": output if output else (result.path if in_place and result.changed else None), "patch": patch_out},
    }
    return clean.dumps(doc)


@main.command(epilog=examples("swzc analyze gemm.cu", "swzc analyze gemm.cu --hw mi300x --set N=8192 --json"))
@click.argument("file", type=click.Path(dir_okay=True))
@hw_option
@set_option
@build_options
@max_bytes_option
@json_option
@click.option("--compile/--no-compile", "compile_file", default=True, show_default=True,
              help="Compile FILE (never run it) for each kernel's registers and shared memory, which set how many "
                   "blocks run at once in the L2 model; without it, the launch bounds or a stated default.")
@guarded
def analyze(file: str, hw_name: str, bindings: tuple[str, ...], max_bytes: int, as_json: bool, include_dirs: tuple[str, ...],
            defines: tuple[str, ...], build_path: str | None, grids: tuple[str, ...], blocks: tuple[str, ...],
            compile_file: bool) -> None:
    """Show FILE's kernels, block-index reads, launches, tile decodes and refusals."""
    hw = load_hw(hw_name)
    bound = parse_bindings(list(bindings))
    context, context_notes = build_context(file, include_dirs, defines, build_path)
    with input_limit(max_bytes):
        ctx, analysis = analyze_file(file, bound, context, parse_launch_facts(grids, blocks))
    src = ctx.src
    records = _analysis_records(ctx, analysis, hw, bound, compile_file, context.compile_flags())
    notes = [*context_notes, *analysis.notes]
    if as_json:
        clean.echo(clean.dumps({"file": analysis.path, "dialect": analysis.dialect, "hw": hw.name, "kernels": records,
                                "syntax_errors": _syntax_json(src.errors), "notes": notes}))
    else:
        clean.echo("\n".join([_analysis_text(analysis, hw, records), *_syntax_lines(src.path, src.errors),
                              *(f"  note: {n}" for n in notes)]))
    # as `rewrite` would end: 1 when kernels read the block index and none would be rewritten
    if any(r["status"] in ("refused", "declined", "unranked") for r in records) and not any(r["status"] == "candidate" for r in records):
        sys.exit(int(ExitCode.DECLINED))


def _candidates_json(table: tuple[tuple[str, float, float], ...]) -> list[dict[str, Any]]:
    return [{"name": n, "predicted_l2_hit_rate": hit, "predicted_dram_bytes": dram} for n, hit, dram in table]


def _analysis_records(ctx: FileContext, analysis: FileAnalysis, hw: hwmodels.HardwareModel,
                      bindings: dict[str, float | int], compiler: bool = False, flags: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    records = []
    ranked = rank_kernels(ctx, analysis, hw, bindings, compiler, flags)
    for index, k in enumerate(analysis.kernels):
        ranking = ranked.get(index)
        got = block_swizzle.propose(analysis, index, hw, None, ranking)
        proposal = isinstance(got, block_swizzle.Proposal)
        grids = [launch.grid for launch in k.launches if launch.grid is not None]
        records.append({
            "name": k.name,
            "line": k.line,
            "status": "candidate" if proposal else got.status,  # type: ignore[union-attr]
            "reason": "" if proposal else got.reason,  # type: ignore[union-attr]
            "rules": [] if proposal else list(got.rules),  # type: ignore[union-attr]
            "grid": list(grids[0]) if grids else None,
            "adapter": k.adapter if k.reads_block_index else None,
            "chosen": got.spec.name if proposal else None,  # type: ignore[union-attr]
            "chosen_by": got.note if proposal else "",  # type: ignore[union-attr]
            "candidates": _candidates_json(tuple((p.candidate, p.l2_hit_rate, p.dram_bytes) for p in ranking.predictions)
                                           if isinstance(ranking, Ranking) else ()),
            "model": ranking if isinstance(ranking, str) else "",
            "residency": _residency_json(ranking.residency) if isinstance(ranking, Ranking) and ranking.residency else None,
            # reads copied to shared memory behind a barrier, pass after pass: what the model's coalescer term needs
            "staged_reads": ranking.footprint.staged if isinstance(ranking, Ranking) else None,
            "block_index_reads": [{"line": u.line, "text": u.text, "axis": u.axis, "in": u.function} for u in
                                  (*k.uses, *(u for h in k.helpers for u in analysis.helpers[h].uses))],
            "helpers": list(k.helpers),
            "launches": [{"line": la.line, "api": la.api, "grid": la.grid_text, "grid_value": list(la.grid) if la.grid else None,
                          "block": la.block_text, "block_value": list(la.block) if la.block else None,
                          "decode_divisor_value": la.divisor} for la in k.launches],
            "decode": None if k.decode is None else {"divisor": k.decode.divisor, "lines": list(k.decode.lines)},
            "hazards": [{"line": h.line, "reason": h.reason, "rule": h.rule, "id": h.rule_id} for h in k.hazards],
            "notes": list(k.notes),
        })
    return records


def _residency_json(running: Residency) -> dict[str, Any]:
    return {"blocks_per_cu": running.blocks_per_cu, "limit": running.limit, "source": running.source,
            "registers_per_thread": running.registers_per_thread, "shared_bytes_per_block": running.shared_bytes_per_block}


def _analysis_text(analysis: FileAnalysis, hw: hwmodels.HardwareModel, records: list[dict[str, Any]]) -> str:
    lines = [f"{analysis.path} ({analysis.dialect}, hw {hw.name}): {len(records)} kernel(s)"]
    for r in records:
        status = f"would rewrite with {r['chosen']}" if r["status"] == "candidate" else f"{r['status']}: {r['reason']}"
        lines.append(f"\n  kernel {r['name']} (line {r['line']}): {status}")
        if r["adapter"]:
            lines.append(f"    grid shape: {r['adapter']}" + (f", decoded as blockIdx.x / {r['decode']['divisor']} (lines "
                                                               f"{', '.join(map(str, r['decode']['lines']))})" if r["decode"] else ""))
        for u in r["block_index_reads"]:
            lines.append(f"    reads {u['text']} at line {u['line']}" + (f" (in helper {u['in']})" if u["in"] != r["name"] else ""))
        for la in r["launches"]:
            grid = "x".join(map(str, la["grid_value"])) if la["grid_value"] else "unknown"
            extra = f", tile columns {la['decode_divisor_value']}" if la["decode_divisor_value"] is not None else ""
            lines.append(f"    launched at line {la['line']} via {la['api']}: grid {la['grid']} = {grid}{extra}")
        if not r["launches"]:
            lines.append("    no launch in this file")
        for h in r["hazards"]:
            lines.append(f"    hazard: {h['reason']}")
        if r["residency"]:
            res = r["residency"]
            lines.append(f"    resident: {res['blocks_per_cu']} blocks per SM or CU, bound by {res['limit']} ({res['source']})")
        if r["staged_reads"]:
            lines.append("    reads staged: a loop copies them to shared memory behind a barrier; "
                         + ("the model counts the reads the L2 request coalescer merges" if hw.l2_request_coalescer
                            else f"{hw.name} has no L2 request coalescer in its model"))
        if r["candidates"]:
            lines.append("    L2 model:  candidate            L2 hits   DRAM bytes")
            for c in r["candidates"]:
                mark = "  <- chosen" if c["name"] == r["chosen"] else ""
                lines.append(f"               {c['name']:<20} {c['predicted_l2_hit_rate']:6.1f} % {c['predicted_dram_bytes'] / 1e6:10,.0f} MB{mark}")
        elif r["model"]:
            lines.append(f"    L2 model: not ranked: {r['model']}")
        for n in r["notes"]:
            lines.append(f"    note: {n}")
    return "\n".join(lines)


@main.command(epilog=examples("swzc probe --output hwmodels/mygpu.toml --name mygpu",
                              "swzc probe --from-output probe.txt --base h100 --output h100-measured.toml"))
@click.option("--base", "base_name", default="h200", show_default=True, metavar="NAME",
              help="Hardware model to start from; figures the probe does not measure keep its values and sources.")
@click.option("--output", metavar="FILE", help="Write the model file here (default: print it).")
@click.option("--name", metavar="NAME", help="Name of the new model (default: the base model's).")
@click.option("--arch", metavar="ARCH", help="Compiler target of the probe, e.g. sm_90 (default: the base model's).")
@click.option("--hip", is_flag=True, help="Build probe.hip with hipcc (AMD) instead of probe.cu with nvcc.")
@click.option("--from-output", "from_output", metavar="FILE",
              help="Parse a saved probe output (e.g. from the GPU's machine) instead of building and running the probe.")
@click.option("--save-output", "save_output", metavar="FILE", help="Keep the probe's raw output here.")
@guarded
def probe(base_name: str, output: str | None, name: str | None, arch: str | None, hip: bool, from_output: str | None,
          save_output: str | None) -> None:
    """Measure the local GPU with a small probe program and write a hardware model from it."""
    import datetime
    import shlex

    from swzc.target import probe as probing

    base = hwmodels.load(base_name)
    written = [Output("--output", output)] if output else []
    written += [Output("--save-output", save_output)] if save_output else []
    outputs.check(from_output, written)
    if from_output:
        if hip or arch:
            raise SwzcError("--hip and --arch choose how to build the probe; they do not go with --from-output")
        text = probing.read_output(from_output)
        command = f"swzc probe --from-output {shlex.quote(os.path.basename(from_output))}"
    else:
        vendor = "amd" if hip else "nvidia"
        if base.vendor != vendor:
            raise SwzcError(f"--base {base_name} is a model of {base.vendor} GPUs; "
                            + ("--hip needs an AMD base model" if hip else "use --hip for an AMD GPU"))
        target = arch or base.arch
        text = probing.run_probe(target, hip=hip)
        command = f"swzc probe{' --hip' if hip else ''} --arch {target}"
    if save_output:  # kept even when the output does not parse: it is what the GPU said
        outputs.write_together(from_output, [(Output("--save-output", save_output), text.encode("utf-8"))])
    result = probing.parse_output(text, from_output or "the probe's output",
                                  ExitCode.BAD_INPUT if from_output else ExitCode.CHECK_FAILED)
    date = result.date or datetime.date.today().isoformat()
    model = probing.to_toml(base, result, command, date, name=name)
    report = probing.summary(result)
    if output:
        outputs.write_together(from_output, [(Output("--output", output), model.encode("utf-8"))])
        clean.echo(f"{report}\n  wrote {output}")
    else:
        clean.echo(report, err=True)
        clean.echo(model, nl=False)


if __name__ == "__main__":
    main()
