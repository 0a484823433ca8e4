"""The command line: a thin layer over swzc.pipeline.driver that maps outcomes to messages and exit codes.

The click group, the options the commands share, and the commands `rewrite`, `analyze` and `probe`; `suggest`,
`review` and `show` have modules of their own.  A command parses its arguments, builds the pipeline's options,
calls the pipeline, hands the result to its emitter in swzc.report (the module named as the command) and writes
through swzc.core.outputs; what it prints is never built here."""

from __future__ import annotations

import importlib
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from functools import wraps
from typing import Any, NoReturn, TypeVar

import click
from click.core import ParameterSource

from swzc import __version__
from swzc.target import hw as hwmodels

from swzc.core import clean

from swzc.pipeline import config

from swzc.core import outputs
from swzc.core.signals import interrupt_received, report_interrupt
from swzc.verify.harness import gpu_name, gpu_present
from swzc.core.outputs import STDOUT, Output
from swzc.verify.program import CHECK_PATTERN, TIME_PATTERN, ProgramBench
from swzc.core.errors import ExitCode, SwzcError
from swzc.core.memo import Memo, disabled_by_environment
from swzc.rewrite.patch import header_path
from swzc.pipeline.driver import (Options, analyze_file, llm_note, load_hw, parse_bindings, parse_launch_facts, parse_swizzles,
                           rewrite_file)
from swzc.frontend.build_context import absolute_flag
from swzc.pipeline.reading import build_context, input_limit
from swzc.report import analyze as analyze_report
from swzc.report import rewrite as rewrite_report
from swzc.report.run_report import report_page, search_report_json, search_report_markdown
from swzc.report.shared import error_json
from swzc.search.proposers import PROPOSERS
from swzc.frontend.source import DEFAULT_MAX_BYTES

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

EXIT_CODES = """\b
Exit codes:
  0  rewritten, or nothing to do (no kernel reads the block index)
  1  every kernel that reads the block index was refused, declined or left unranked
  2  bad input: unreadable file, kernels but none clear of syntax errors, unknown --hw, bad --swizzle, --set or --grid,
     --bench without a GPU, an output swzc must not write; nothing written
  3  a check of the rewrite failed (proof, re-parse, compile) or an internal error; nothing written
  130  interrupted (SIGINT or SIGTERM); nothing written"""


def examples(*lines: str, codes: str = EXIT_CODES) -> str:
    """An epilog: examples, then the command's exit codes (those `rewrite` and `analyze` share by default)."""
    return "\b\nExamples:\n" + "".join(f"  {line}\n" for line in lines) + "\n" + codes


def _fail(message: str, code: ExitCode) -> None:
    clean.echo(f"swzc: error: {message}", err=True, kind="error")
    sys.exit(int(code))


def _json_error(exc: SwzcError) -> None:
    """With --json, the error as one JSON document on stdout too (a tool reading stdout gets the file's syntax
    errors, not nothing)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return
    as_json, file = ctx.params.get("as_json"), ctx.params.get("file")
    if ctx.parent is None:  # swzc's own step, before the command's (its configuration): the command's --json as typed
        typed = list(ctx.meta.get(COMMAND_ARGS, []))
        as_json = "--json" in (typed[:typed.index("--")] if "--" in typed else typed)
        named = named_paths(ctx)
        file = named[0] if len(named) == 1 else None
    if as_json:
        clean.echo(error_json(file, int(exc.code), exc.message, exc.details))


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
LAZY_COMMANDS = {"suggest": "swzc.commands.suggest", "review": "swzc.commands.review", "show": "swzc.commands.show",
                 "tune": "swzc.commands.tune"}


class Commands(click.Group):
    """click reports an interrupt during its own parsing as "Aborted!" with exit 1; swzc reports it as
    every other interrupt (exit 130).  The commands of LAZY_COMMANDS load when first named."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            self.add_command(importlib.import_module(LAZY_COMMANDS[cmd_name]).command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, _options_after_command(self, ctx, args))

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            _interrupted()
        except click.ClickException as exc:  # click quotes the command line (a file named like an option) as it is
            exc.message = clean.text(exc.message)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        ctx.meta[COMMAND_ARGS] = list(ctx.args)  # the command's own arguments: where its files are (`named_paths`)
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            _interrupted()
        except click.ClickException as exc:
            exc.message = clean.text(exc.message)
            raise


def _options_after_command(group: click.Group, ctx: click.Context, args: list[str]) -> list[str]:
    """`swzc -j 2 --json suggest F` read as `swzc suggest -j 2 --json F`: a command's options given before its name
    go after it, as -q and -v may (swzc's own options, -q, -v, --no-cache, --version and --help, stay)."""
    names = set(group.list_commands(ctx))
    at = next((i for i, word in enumerate(args) if word == "--" or not word.startswith("-")), len(args))
    while at < len(args) and args[at] != "--" and args[at] not in names and at > 0:
        at = next((i for i in range(at + 1, len(args)) if args[i] == "--" or not args[i].startswith("-")), len(args))
    if at >= len(args) or args[at] not in names or at == 0:
        return args
    own = {opt for param in group.params for opt in (*param.opts, *param.secondary_opts)} | set(ctx.help_option_names)
    kept = [w for w in args[:at] if w in own or re.fullmatch(r"-[qv]+", w)]
    moved = [w for w in args[:at] if not (w in own or re.fullmatch(r"-[qv]+", w))]
    return [*kept, args[at], *moved, *args[at + 1:]]


hw_option = click.option("--hw", "hw_name", default="h200", show_default=True, metavar="NAME",
                         help=f"Hardware model ({', '.join(hwmodels.available())}).")
set_option = click.option("--set", "bindings", multiple=True, metavar="NAME=VALUE",
                          help="Bind a macro, constant or kernel parameter the file leaves open, or a field of one (dims.x=4096) (repeatable).")
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")
max_bytes_option = click.option("--max-bytes", type=click.IntRange(1), default=DEFAULT_MAX_BYTES, show_default=True,
                                metavar="N", help="Refuse input files larger than this.")


def build_options(func: F) -> F:
    """What the compiler would see: include folders, defines, a compilation database, launch sizes."""
    for option in reversed((
        click.option("-I", "--include-dir", "include_dirs", multiple=True, metavar="DIR",
                     help="Look for headers here: #include \"…\" after FILE's folder, #include <…> (a folder "
                          "relative to the working folder; repeatable)."),
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


def program_options(func: F) -> F:
    """--bench-cmd and the options that go with it: the user's own program, timed instead of the generated harness."""
    for option in reversed((
        click.option("--bench-cmd", metavar="CMD", help="Benchmark with your own program instead of the generated harness: a "
                     "shell command run in a copy of FILE's folder ({file} is FILE's name, quoted for the shell) that prints a "
                     "time in ms and a checksum."),
        click.option("--build-cmd", metavar="CMD", help="With --bench-cmd: build the program once per version first."),
        click.option("--bench-runs", type=click.IntRange(1, 1000), default=5, show_default=True,
                     help="With --bench-cmd: timed runs per version."),
        click.option("--bench-sizes", metavar="S1,S2,...", help="With --bench-cmd holding {size}: run it at each of these sizes "
                     "(three or more spanning the crossover); a candidate is kept only if it is slower at none and faster at "
                     "the largest."),
        click.option("--time-regex", default=TIME_PATTERN, show_default=False, metavar="RE",
                     help="With --bench-cmd: where the time (ms) is in the output (first group that matches)."),
        click.option("--check-regex", default=CHECK_PATTERN, show_default=False, metavar="RE",
                     help="With --bench-cmd: where the check value is in the output; both versions must print the same."),
    )):
        func = option(func)
    return func


def program_bench(bench_cmd: str | None, build_cmd: str | None, runs: int, sizes: str | None, time_regex: str,
                  check_regex: str) -> ProgramBench | None:
    """The user's program as --bench-cmd and its options give it, checked (exit 2 on a bad one); None without it."""
    if not bench_cmd:
        if build_cmd or sizes:
            raise SwzcError(f"{'--build-cmd' if build_cmd else '--bench-sizes'} goes with --bench-cmd")
        return None
    for pattern in (time_regex, check_regex):
        try:
            re.compile(pattern)
        except re.error as exc:
            raise SwzcError(f"bad regular expression {pattern!r}: {exc}") from None
    return ProgramBench(bench_cmd, build_cmd, runs, time_regex, check_regex, _bench_sizes(bench_cmd, sizes))


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


QUIET_HELP = "-q: print the findings and errors only (no notes, hints or summaries); -qq: errors only."
VERBOSE_HELP = "Also print every kernel's status and reason, and every candidate its proposers tried."


def _count(name: str) -> Callable[[click.Context, click.Parameter, int], None]:
    """A -q or -v given after the subcommand adds to the one given before it (as ruff takes them)."""

    def add(ctx: click.Context, _: click.Parameter, value: int) -> None:
        root = ctx.find_root()
        if not isinstance(root.obj, dict):
            return
        root.obj[name] += value
        if root.obj["quiet"] and root.obj["verbose"]:  # given before the command, after it, or both
            raise click.UsageError("-q and -v do not go together: -q prints less (findings and errors), -v more "
                                   "(every kernel's reason)", ctx)

    return add


def verbosity_options(func: F) -> F:
    """-q/-qq and -v on a subcommand, as on swzc itself."""
    func = click.option("-v", "--verbose", count=True, expose_value=False, callback=_count("verbose"), help=VERBOSE_HELP)(func)
    return click.option("-q", "--quiet", count=True, expose_value=False, callback=_count("quiet"), help=QUIET_HELP)(func)


MAIN_EXIT_CODES = """\b
Exit codes (each command's --help gives its own):
  0  done: rewritten, nothing to suggest or report, or nothing to do
  1  something to look at: suggest and review found a suggestion; rewrite and analyze left every kernel that reads the
     block index refused, declined or unranked; tune has jobs without a result yet
  2  bad input (a file, an option, the config, an output swzc must not write); nothing written
  3  a check of the rewrite failed (proof, re-parse, compile) or an internal error; nothing written
  130  interrupted (SIGINT or SIGTERM); nothing written"""


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]}, epilog=MAIN_EXIT_CODES)
@click.version_option(__version__, prog_name="swzc")
@click.option("-q", "--quiet", count=True, help=QUIET_HELP)
@click.option("-v", "--verbose", count=True, help=VERBOSE_HELP)
@click.option("--no-cache", is_flag=True, help="Compute every L2 model figure afresh: neither read nor add to swzc's results "
              "cache ($XDG_CACHE_HOME/swzc, else ~/.cache/swzc: this user's own; SWZC_NO_CACHE=1 does the same).")
@click.pass_context
@guarded
def main(ctx: click.Context, quiet: int, verbose: int, no_cache: bool) -> None:
    """Hardware-aware block swizzles for CUDA and HIP kernels.

    Defaults for options can be set in the user's ~/.config/swzc/config.toml, and facts about the code
    (hardware, sizes, grids, include folders, defines) in [tool.swzc] of the project's pyproject.toml
    (each file's: the first one in its folder or above, up to the git root); options on the command line
    override them.
    Colour and progress bars appear only on a terminal; NO_COLOR turns colour off, FORCE_COLOR on.
    """
    ctx.obj = {"quiet": quiet, "verbose": verbose, "config": None, "cache": not no_cache}
    settings = config.load_user()
    # a command over many FILES reads each with its own project's [tool.swzc] (`per_project`)
    found = config.find_for(named_paths(ctx)) if ctx.invoked_subcommand not in PER_FILE_COMMANDS else None
    if found is not None:
        ctx.obj["config"] = str(found)
        settings = {**settings, **config.load(found)}  # the project's facts over the user's defaults
    if settings:
        invoked = main.get_command(ctx, ctx.invoked_subcommand) if ctx.invoked_subcommand else None
        commands = [invoked] if invoked is not None else []
        ctx.default_map = config.default_map(commands, settings)


COMMAND_ARGS = "swzc.command_args"
PER_FILE_COMMANDS = ("suggest", "review")


def per_project(files: Sequence[str], given: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each FILE's values of the options `given` (by parameter name, as parsed): where its project's [tool.swzc]
    (the first pyproject.toml with one in its folder or above: swzc.pipeline.config) sets one that the command
    line did not, that value, read as the option reads it.  FILEs of one project share one dict."""
    ctx = click.get_current_context()
    command = ctx.command
    params = {p.name: p for p in command.params}
    found = config.find_each(files)
    by_project: dict[Any, dict[str, Any]] = {}
    for project in dict.fromkeys(found.values()):
        values = dict(given)
        if project is not None:
            mine = config.default_map([command], config.load(project)).get(command.name or "", {})
            for name, value in mine.items():
                typed = ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
                if name in values and not typed:
                    values[name] = params[name].type_cast_value(ctx, value)
        by_project[project] = values
    return {file: by_project[found[file]] for file in files}


def named_paths(ctx: click.Context) -> list[str]:
    """The values of the invoked command's arguments (its FILE, FILES or PATHS), read from its command line by
    click's own parser alone: no option's callback or type runs here, and a command line click will refuse
    names none."""
    command = main.get_command(ctx, ctx.invoked_subcommand) if ctx.invoked_subcommand else None
    if command is None:
        return []
    probe = click.Context(command, parent=ctx, info_name=ctx.invoked_subcommand, resilient_parsing=True)
    try:
        opts, _, _ = command.make_parser(probe).parse_args(list(ctx.meta.get(COMMAND_ARGS, [])))
    except click.ClickException:
        return []
    named: list[str] = []
    for param in command.params:
        value = opts.get(param.name) if isinstance(param, click.Argument) else None
        values = [value] if isinstance(value, str) else value if isinstance(value, (list, tuple)) else []
        named += [v for v in values if isinstance(v, str)]
    return named


def each_file(run: Callable[[Callable[[int], None] | None], Iterable[T]], files: Sequence[str], what: str) -> Iterator[T]:
    """`run(done)`'s results (one per FILE, in order) passed through, with a progress bar on stderr where stderr is a
    terminal, there are several FILES and -q was not given: "{what} 3/20 name.cu", moved on by `done(index)` as
    each FILE ends, whichever ends first.  Where stdout is a terminal too, the bar is taken off while the caller
    prints each result's lines, and put back after them: the lines stay, the bar stays below them."""
    quiet, _ = verbosity()
    shown = len(files) > 1 and not quiet and clean.is_terminal(sys.stderr)
    if not shown:
        yield from run(None)
        return
    from rich.markup import escape

    printed_here = clean.is_terminal(sys.stdout)
    with _progress_bar() as bar:
        task = bar.add_task(what, total=len(files))

        def done(index: int) -> None:
            bar.update(task, advance=1, description=f"{what} {escape(clean.text(os.path.basename(files[index])))}")

        for item in run(done):
            if printed_here:
                bar.stop()  # transient: the bar's line is cleared, and the result's lines take it
            yield item
            if printed_here:
                bar.start()


def _progress_bar() -> Any:
    """The one progress display (rich's, on stderr, gone when done): the benchmark's candidates, or FILES."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    return Progress(*columns, console=Console(stderr=True), transient=True)


def results_cache() -> Memo:
    """The run's results cache (swzc.core.memo): on unless --no-cache or SWZC_NO_CACHE says otherwise."""
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    obj = root.obj if root is not None and isinstance(root.obj, dict) else {}
    return Memo(enabled=bool(obj.get("cache", True)) and not disabled_by_environment())


def verbosity() -> tuple[int, bool]:
    """(quiet, verbose) from the command line, before and after the subcommand: quiet is 0, 1 (-q: findings
    and errors) or 2 (-qq: errors only)."""
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    obj = root.obj if root is not None and isinstance(root.obj, dict) else {}
    return min(2, int(obj.get("quiet") or 0)), bool(obj.get("verbose"))


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
@click.option("--swizzle", "swizzles", multiple=True, metavar="[KERNEL=]SPEC",
              help="identity, colmajor, grouped:G, serpentine:G, hilbert:K, morton:K, xcd:N, xcd:N:C, or a chain joined "
              "by '+' (e.g. xcd:8+grouped:8), for every kernel it fits; or KERNEL=SPEC, repeated, for those kernels alone "
              "(the others are left as they are). Default: the L2 model's choice, or the measured one with --bench.")
@hw_option
@set_option
@build_options
@click.option("--no-compile", is_flag=True,
              help="Compile nothing of FILE: no compile check of the rewritten file, and the L2 model takes the blocks "
                   "per SM from the launch bounds or a stated default instead of the compiler's resource report.")
@click.option("--bench/--no-bench", "bench", default=None,
              help="Check and time each candidate on the local GPU and keep only a measured win. This builds FILE "
                   "and runs its kernel and static initialisers (default: off; --bench-cmd turns it on).")
@click.option("--calibrate/--no-calibrate", default=True, show_default=True,
              help="With --bench: first run the original once with its blocks' start times stamped, and profile it, "
                   "so that the L2 model ranks with what that run measured (whether its waves start together, the "
                   "share of reads the L2 merges). NVIDIA only.")
@click.option("--max-iterations", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Candidates each proposer offers per kernel: the benchmark's tries of the family, best predicted "
                   "first (the first also in its other division form, ORDER/int, not counted), and the LLM's requests.")
@llm_options
@click.option("--launch-spec", metavar="FILE", help="TOML giving buffer sizes, scalars or the launch the file leaves open.")
@click.option("--report", "report", metavar="PREFIX", help="With the benchmark: write PREFIX.json and PREFIX.md, every attempt.")
@program_options
@click.option("--compile-flag", "compile_flags", multiple=True, metavar="FLAG",
              help="Extra flag for the compile check, e.g. --compile-flag=-Iinclude (repeatable).")
@max_bytes_option
@json_option
@verbosity_options
@guarded
def rewrite(file: str, output: str | None, in_place: bool, patch_out: str | None, swizzles: tuple[str, ...], hw_name: str,
            bindings: tuple[str, ...], no_compile: bool, bench: bool | None, calibrate: bool, max_iterations: int, launch_spec: str | None,
            report: str | None, bench_cmd: str | None, build_cmd: str | None, bench_runs: int, bench_sizes: str | None, time_regex: str,
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
    swizzle, pinned = parse_swizzles(swizzles)
    if (swizzle or pinned) and proposer != "builtin":
        raise SwzcError(f"--swizzle forces the orders; it does not go with --proposer {proposer}")
    llm = build_llm(proposer, llm_model, base_url, llm_timeout, llm_retries, llm_replay)
    program = program_bench(bench_cmd, build_cmd, bench_runs, bench_sizes, time_regex, check_regex)
    if program is not None:
        bench = True if bench is None else bench
    if bench is None:
        bench = False  # benchmarking runs the file's own code: only when asked for
    elif bench and program is None and not gpu_present():
        raise SwzcError("--bench needs a GPU here: an NVIDIA GPU with nvcc, or an AMD GPU with hipcc; none was found")
    context, context_notes = build_context(file, include_dirs, defines, build_path, memo=results_cache())
    options = Options(hw=load_hw(hw_name), swizzle=swizzle, pinned=pinned, bindings=parse_bindings(list(bindings)),
                      context=context, facts=parse_launch_facts(grids, blocks),
                      compile=not no_compile, compile_flags=tuple(absolute_flag(f, os.getcwd()) for f in compile_flags),
                      bench=bench, max_iterations=max_iterations,
                      launch_spec=launch_spec, program=program, proposer=proposer, llm=llm, calibrate=calibrate)
    if bench:
        from rich.markup import escape

        with _progress_bar() as bar:
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
            writes.append((html_out, report_page(file, result, options).encode("utf-8")))
    if llm_transcript:
        from swzc.search.llm.client import transcript_json

        writes.append((Output("--llm-transcript", llm_transcript),
                       transcript_json([e for t in result.transcripts for e in t.exchanges]).encode()))
    outputs.write_together(file, writes)
    to_stdout = output == STDOUT or patch_out == STDOUT
    patch_note = header_path(file)[1] if patch_out and result.changed else ""
    result = replace(result, notes=(*context_notes, *result.notes))
    quiet, verbose = verbosity()
    report = (rewrite_report.render_json(result, output, in_place, patch_out) if as_json
              else rewrite_report.render_text(result, bool(output or in_place or patch_out), patch_note, verbose, notes=not quiet))
    if (quiet < 2 and report) or as_json:  # -q with nothing found: nothing
        clean.echo(report, err=to_stdout, kind=None if as_json else "summary")
    # the report's own notes went where stderr goes (the report to stderr, or both to one terminal): said once
    seen = not as_json and not quiet and (to_stdout or (sys.stdout.isatty() and sys.stderr.isatty()))
    if result.llm_failure and quiet < 2 and not seen:  # asked for and not had: said where errors go too, -q or not
        clean.echo(f"swzc: note: {llm_note(result.llm_failure)}", err=True, kind="note")
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


ANALYZE_EXIT_CODES = """\b
Exit codes:
  0  some kernel would be rewritten, or no kernel reads the block index
  1  every kernel that reads the block index would be refused, declined or left unranked
  2  bad input: unreadable file, kernels but none clear of syntax errors, unknown --hw, bad --set, --grid or --block
  3  an internal error
  130  interrupted (SIGINT or SIGTERM)"""


@main.command(epilog=examples("swzc analyze gemm.cu", "swzc analyze gemm.cu --hw mi300x --set N=8192 --json",
                              codes=ANALYZE_EXIT_CODES))
@click.argument("file", type=click.Path(dir_okay=True))
@hw_option
@set_option
@build_options
@max_bytes_option
@json_option
@click.option("--compile/--no-compile", "compile_file", default=True, show_default=True,
              help="Compile FILE (never run it) for each kernel's registers and shared memory, which set how many "
                   "blocks run at once in the L2 model; without it, the launch bounds or a stated default.")
@verbosity_options
@guarded
def analyze(file: str, hw_name: str, bindings: tuple[str, ...], max_bytes: int, as_json: bool, include_dirs: tuple[str, ...],
            defines: tuple[str, ...], build_path: str | None, grids: tuple[str, ...], blocks: tuple[str, ...],
            compile_file: bool) -> None:
    """Show FILE's kernels, block-index reads, launches, tile decodes and refusals."""
    hw = load_hw(hw_name)
    bound = parse_bindings(list(bindings))
    context, context_notes = build_context(file, include_dirs, defines, build_path, memo=results_cache())
    with input_limit(max_bytes):
        ctx, analysis = analyze_file(file, bound, context, parse_launch_facts(grids, blocks))
    report = analyze_report.analyzed(ctx, analysis, hw, bound, compile_file, context.compile_flags(),
                                     (*context_notes, *analysis.notes))
    if verbosity()[0] < 2 or as_json:
        clean.echo(analyze_report.render_json(report) if as_json else analyze_report.render_text(report),
                   kind=None if as_json else "summary")
    if report.exit_code != ExitCode.OK:  # as `rewrite` would end: kernels read the block index, none would be rewritten
        sys.exit(int(report.exit_code))


PROBE_EXIT_CODES = """\b
Exit codes:
  0  the model was written (or printed)
  2  bad input: unknown --base, an --arch or --hip the base model's GPU does not take, no compiler or no usable
     GPU here, a saved --from-output that does not parse, an output swzc must not write; nothing written
  3  the probe failed to build, run or finish, or printed what does not parse; nothing written
  130  interrupted (SIGINT or SIGTERM); nothing written"""


@main.command(epilog=examples("swzc probe --output hwmodels/mygpu.toml --name mygpu",
                              "swzc probe --from-output probe.txt --base h100 --output h100-measured.toml", codes=PROBE_EXIT_CODES))
@click.option("--base", "base_name", default="h200", show_default=True, metavar="NAME",
              help="Hardware model to start from; figures the probe does not measure keep its values and sources.")
@click.option("--output", metavar="FILE", help="Write the model file here (default: print it).")
@click.option("--name", metavar="NAME", help="Name of the new model (default: the base model's).")
@click.option("--arch", metavar="ARCH", help="Compiler target of the probe, e.g. sm_90 (default: the base model's).")
@click.option("--hip", is_flag=True, help="Build probe.hip with hipcc (AMD) instead of probe.cu with nvcc.")
@click.option("--from-output", "from_output", metavar="FILE",
              help="Parse a saved probe output (e.g. from the GPU's machine) instead of building and running the probe.")
@click.option("--save-output", "save_output", metavar="FILE", help="Keep the probe's raw output here.")
@verbosity_options
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


def _bench_sizes(bench_cmd: str, text: str | None) -> tuple[int, ...]:
    """--bench-sizes S1,S2,...: each a positive integer, at most 16, given exactly when the command holds {size}."""
    if text is None:
        if "{size}" in bench_cmd:
            raise SwzcError("--bench-cmd holds {size}: give the sizes to run it at with --bench-sizes, e.g. 1024,4096,8192")
        return ()
    if "{size}" not in bench_cmd:
        raise SwzcError("--bench-sizes needs {size} in --bench-cmd, where each size goes")
    parts = [p.strip() for p in text.split(",")]
    if not 1 <= len(parts) <= 16 or not all(p.isdigit() and 0 < int(p) < 1 << 31 for p in parts):
        raise SwzcError(f"--bench-sizes {text!r}: expected up to 16 positive integers separated by commas, e.g. 1024,4096,8192")
    return tuple(sorted({int(p) for p in parts}))


if __name__ == "__main__":
    main()
