"""`swzc suggest FILES…`: the L2 model's swizzle for every kernel of many files, one line per kernel.

Written for a pre-commit hook, which runs on every commit, on a machine without a GPU, on code that may
come from others.  So it only predicts: no GPU run, no LLM, no compile check, and the user's code is never
built or run (the host prover, which compiles swzc's own C++ once and caches it, is the one compiler run).
It never writes the user's files (the only thing written is that prover, into swzc's own cache): each
suggestion names the `swzc rewrite` command that applies it.

Click only: the suggestions, the exit code they add up to and both outputs are swzc.report.suggest's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import replace

import click
from click.core import ParameterSource

from swzc.commands.cli import (build_options, each_file, guarded, hw_option, json_option, max_bytes_option, per_project,
                               results_cache, set_option, verbosity, verbosity_options)
from swzc.core import clean
from swzc.frontend.evaluate import Value
from swzc.frontend.preprocess import CompileContext
from swzc.pipeline.driver import load_hw, parse_bindings, parse_launch_facts, unspelled_note
from swzc.pipeline.reading import NO_SUCH_FOLDER, build_context, launches_between, source_files
from swzc.report import suggest as suggest_report
from swzc.report.suggest import Settings, exit_code, kernel_of, suggest_files

EPILOG = """\b
Examples:
  swzc suggest kernels/*.cu            one line per kernel the model would swizzle
  swzc suggest -v gemm.cu --set N=4096 also say why the other kernels are left alone
  swzc suggest --exit-zero --json src/*.cu src/*.hip
  swzc suggest -j 4 src/*.cu           four FILEs at once

\b
As a pre-commit hook (.pre-commit-config.yaml):
  - repo: <this repository's URL>
    rev: <a tag or commit>
    hooks:
      - id: swzc-suggest

\b
Each suggestion ends with the command that applies it (a FILE with
several: one line after them, "apply all N", with one command for them
all).  It is `swzc rewrite PATH --swizzle S --in-place` when S is the order
for every kernel of PATH that reads the block index; otherwise it names
each kernel's order, `--swizzle KERNEL=S`, and leaves the others alone.
It repeats the --hw, --set, -I, -D and -p typed here.

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


@click.command(name="suggest", epilog=EPILOG)
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=True))
@hw_option
@set_option
@build_options
@max_bytes_option
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are suggestions (bad input and failed checks still exit 2 and 3).")
@click.option("-j", "--jobs", type=click.IntRange(1, 64), default=1, show_default=True,
              help="FILEs analysed at once (this process and N - 1 workers, the largest first); the output is the same, in the same order.")
@json_option
@verbosity_options
@guarded
def command(files: tuple[str, ...], hw_name: str, bindings: tuple[str, ...], include_dirs: tuple[str, ...],
            defines: tuple[str, ...], build_path: str | None, grids: tuple[str, ...], blocks: tuple[str, ...],
            max_bytes: int, exit_zero: bool, jobs: int, as_json: bool) -> None:
    """Print the block swizzle the L2 model suggests for each kernel of FILES; write nothing.

    The model alone decides: no GPU, no LLM, no compile check, and FILES are never built or run, so this
    is safe and fast on every commit.  Prints one line per kernel that `swzc rewrite` would change, with the
    model's predictions for the kernel's own order and the suggested one (the share of L2 requests that hit,
    the bytes read from DRAM), and the command that applies it (-v: every kernel).  The model's figures are
    kept in swzc's results cache ($XDG_CACHE_HOME/swzc, else ~/.cache/swzc; swzc --no-cache … computes them
    afresh).  FILES may name folders (searched for .cu, .cuh and .hip files); each FILE is read with its own
    project's [tool.swzc] where the command line leaves an option open."""
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
                        max_bytes, tuple(passed), launches, memo=results_cache())
    quiet, verbose = verbosity()
    given, files = files, source_files(files)
    # each FILE as its own project's [tool.swzc] says, where the command line leaves an option to it
    per_file = per_project(files, {"hw_name": hw_name, "bindings": bindings, "include_dirs": include_dirs,
                                   "defines": defines, "build_path": build_path, "grids": grids, "blocks": blocks})
    made: dict[int, Settings] = {}
    for values in per_file.values():
        if id(values) not in made:
            parse_launch_facts(values["grids"], values["blocks"])
            made[id(values)] = replace(settings, hw=load_hw(values["hw_name"]), bound=parse_bindings(list(values["bindings"])),
                                       include_dirs=values["include_dirs"], defines=values["defines"],
                                       build_path=values["build_path"], grids=values["grids"], blocks=values["blocks"])
    work = [(file, made[id(per_file[file])]) for file in files]
    # a kernel defined in one FILE and launched from another that includes it is read with that launch
    def reading(file: str) -> tuple[CompileContext, Mapping[str, Value | str]]:
        read = made[id(per_file[file])]
        return build_context(file, read.include_dirs, read.defines, read.build_path, read.parses, read.memo)[0], read.bound

    included = launches_between(files, reading, max_bytes)
    work = [(file, replace(s, included=included[file]) if file in included else s) for file, s in work]  # and its macros
    empty = [d for d in given if os.path.isdir(d) and not any(f.startswith(os.path.join(d, "")) for f in files)]
    if empty and not quiet:
        clean.echo(f"swzc: note: no .cu, .cuh or .hip file under {', '.join(empty)}", err=True, kind="note")
    reports = []
    said: set[str] = set()  # notes given for an earlier file: a header several files include says them once
    for report in each_file(lambda done: suggest_files(work, jobs, done), files, "suggest"):
        report = suggest_report.without_named_headers(report, files)
        reports.append(report)
        if report.error:
            clean.echo(f"swzc: error: {report.error}", err=True, kind="error")
        if not as_json and quiet < 2:
            for line in suggest_report.render_lines(report, verbose, said):
                clean.echo(line, kind="finding")
    # A hook is given only the files a commit changed: a --grid for a kernel elsewhere is not an error.
    unused = sorted({kernel_of(p) for p in (*grids, *blocks)} - {o.name for r in reports for o in r.outcomes})
    if unused and verbose:
        clean.echo(f"swzc: note: --grid/--block name kernel(s) {', '.join(unused)}, which are in none of these FILES", err=True, kind="note")
    read = [r for r in reports if not r.error]
    unspelled = [name for name in settings.bound if read and all(unspelled_note(name) in r.notes for r in read)]
    if unspelled and not quiet:  # a typo is the likeliest: it binds nothing, and the apply command repeats it
        clean.echo(f"swzc: note: --set {', '.join(unspelled)}: no FILE (nor a header one reads) names it", err=True, kind="note")
    folders = list(dict.fromkeys(n for r in read for n in r.notes if NO_SUCH_FOLDER.match(n)))
    if folders and not quiet and not verbose:  # a typo in -I hides every header there: said once, whatever else is
        for note in folders:
            clean.echo(f"swzc: note: {note}", err=True, kind="note")
    for hint in (suggest_report.unranked_hint(reports), suggest_report.elsewhere_hint(reports, files)):
        if hint and not quiet and not verbose and not as_json:  # -v prints each one's reason instead
            clean.echo(f"swzc: note: {hint}", err=True, kind="note")
    code = exit_code(reports, exit_zero)
    if as_json:
        read_for = {r.hw for r in reports if r.hw}  # each FILE's is in the document too
        clean.echo(suggest_report.render_json(read_for.pop() if len(read_for) == 1 else settings.hw.name, code, reports))
    sys.exit(int(code))
