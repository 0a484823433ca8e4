"""`swzc review`: the kernels swzc would swizzle, as findings with fixes, in a format code review bots read;
in SARIF and rdjson also the kernels it refuses, as display-only findings.

It runs where pull requests from strangers are checked: it only reads.  No benchmark, no LLM, nothing of
the files is built or run (the compile check is off unless --compile asks for it); the L2 model chooses.
Click only: the findings and every format are swzc.report's (findings, emitters).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace

import click

from swzc.analysis.records import LaunchFact
from swzc.commands.cli import (build_options, each_file, guarded, hw_option, max_bytes_option, per_project, results_cache,
                              set_option, verbosity, verbosity_options)
from swzc.core import clean, outputs, workers
from swzc.core.errors import ExitCode, SwzcError
from swzc.core.memo import Memo
from swzc.core.outputs import STDOUT, Output
from swzc.core.signals import interrupt_received
from swzc.frontend.evaluate import Value
from swzc.frontend.preprocess import CompileContext
from swzc.pipeline.driver import Options, RewriteResult, load_hw, parse_bindings, parse_launch_facts, rewrite_file
from swzc.pipeline.reading import build_context, input_limit, launches_between, source_files
from swzc.report import emitters
from swzc.report.emitters import FORMATS
from swzc.report.findings import changed_lines, findings_from
from swzc.target.hw import HardwareModel

FINDINGS = 1  # the exit status when findings are reported, as linters have it

EPILOG = """\b
Formats:
  patch   one unified diff for every FILE; `git apply` at the repository root takes it
  sarif   SARIF 2.1.0: a result per rewritten kernel (rule SWZ001 block-swizzle) at its line, with
          the kernel's fix; GitHub code scanning shows the results (and ignores fixes)
  rdjson  reviewdog's rdjson: a diagnostic per changed block of lines, each with one suggestion
          over exactly its lines (reviewdog -f=rdjson)
\b
sarif and rdjson also say why a kernel is left alone: a refused kernel is a display-only finding
(no fix, no suggestion) per hazard rule that refused it, SWZ101-SWZ114 at level note, at the
kernel's line.  --no-refusals leaves them out.  They never change the exit code, and github and
patch carry fixes only.
  github  a JSON list of review comments for GitHub's create-review API: {"path", "line",
          "side": "RIGHT", "body"} (and "start_line", "start_side" for several lines), a
          ```suggestion per changed block; a file-level note is {"path", "subject_type": "file",
          "body"}
\b
With --diff-base REF (github only), the lines `git diff REF -- FILE` adds or changes are the
pull request's: a kernel's fix becomes suggestions only when all its lines (the swizzle functions
it calls included) are among them; otherwise one plain comment carries the fix as a diff, at the
kernel's line if it is changed, else at the file's first changed line, else as a file-level note.
\b
Examples:
  swzc review src/*.cu --format sarif -o swzc.sarif
  swzc review src/gemm.cu --format rdjson | reviewdog -f=rdjson -reporter=github-pr-review
  swzc review src/gemm.cu --format github --diff-base "$(git merge-base origin/main HEAD)"
  swzc review src/*.cu --format patch | git apply
\b
Exit codes:
  0  no finding with a fix: no kernel of FILES would be rewritten (refusals alone exit 0)
  1  findings with fixes reported (as a linter reports them)
  2  bad input: an unreadable FILE, one whose kernels are none of them clear of syntax errors, over --max-bytes,
     a bad --hw, --set, --grid or --block, a bad --diff-base, an output swzc must not write.
     Every FILE is still read and each failure named on stderr; nothing is written
  3  one of swzc's own checks failed (proof, re-parse, --compile) or an internal error;
     nothing is written
  130  interrupted (SIGINT or SIGTERM); nothing written"""


@click.command(name="review", epilog=EPILOG)
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=True))
@click.option("--format", "output_format", required=True, type=click.Choice(FORMATS), help="What to write (see below).")
@click.option("-o", "--output", metavar="OUT", help="Write the review here ('-', the default: stdout). Never one of FILES.")
@click.option("--diff-base", metavar="REF", help="With --format github: the pull request's base (a commit, branch or tag); "
              "fixes outside the lines changed since REF become plain comments.")
@hw_option
@set_option
@build_options
@click.option("--refusals/--no-refusals", default=True, show_default=True,
              help="With --format sarif or rdjson: also report each refused kernel, with the hazard rules "
                   "(SWZ101-SWZ114) that refused it, as a display-only finding.")
@click.option("--compile/--no-compile", "compile_check", default=False, show_default=True,
              help="Compile each rewritten file with nvcc/hipcc as `rewrite` does (off: review builds nothing it reads).")
@max_bytes_option
@click.option("-j", "--jobs", type=click.IntRange(1, 64), default=1, show_default=True,
              help="FILEs analysed at once (this process and N - 1 workers, the largest first); the review is the same, in the same order.")
@verbosity_options
@guarded
def command(files: tuple[str, ...], output_format: str, output: str | None, diff_base: str | None, hw_name: str,
            bindings: tuple[str, ...], refusals: bool, compile_check: bool, max_bytes: int, jobs: int, include_dirs: tuple[str, ...],
            defines: tuple[str, ...], build_path: str | None, grids: tuple[str, ...], blocks: tuple[str, ...]) -> None:
    """Report the kernels of FILES that swzc would give a block swizzle, with their fixes, for code review."""
    if diff_base is not None and output_format != "github":
        raise SwzcError("--diff-base goes with --format github")
    target = Output("-o", output) if output and output != STDOUT else None
    given, files = files, source_files(files)  # each file once, whatever name it is given by
    if not files and not (given and all(os.path.isdir(d) for d in given)):
        raise SwzcError("no .cu, .cuh or .hip file in FILES (a folder is searched for them)")
    if not files:  # only folders, none holding a source file: an empty review, as suggest says nothing to fix
        clean.echo(f"swzc: note: no .cu, .cuh or .hip file under {', '.join(given)}", err=True, kind="note")
    for file in files:
        outputs.check(file, [target] if target else [])
    load_hw(hw_name)  # the command line's own errors first: exit 2 before any FILE
    parse_bindings(list(bindings))
    facts = parse_launch_facts(grids, blocks)
    # each FILE as its own project's [tool.swzc] says, where the command line leaves an option to it
    per_file = per_project(files, {"hw_name": hw_name, "bindings": bindings, "include_dirs": include_dirs,
                                   "defines": defines, "build_path": build_path, "grids": grids, "blocks": blocks})
    made: dict[int, _Read] = {}
    for values in per_file.values():
        if id(values) not in made:
            made[id(values)] = _Read(load_hw(values["hw_name"]), parse_bindings(list(values["bindings"])),
                                     parse_launch_facts(values["grids"], values["blocks"]), values["include_dirs"],
                                     values["defines"], values["build_path"])
    work = [(file, made[id(per_file[file])]) for file in files]
    facts = {kernel: fact for read in made.values() for kernel, fact in read.facts.items()} or facts

    def reading(file: str) -> tuple[CompileContext, Mapping[str, Value | str]]:
        read = made[id(per_file[file])]
        return build_context(file, read.include_dirs, read.defines, read.build_path)[0], read.bound

    # a kernel defined in one FILE and launched from another that includes it is read with that launch
    included = launches_between(files, reading, max_bytes)
    work = [(file, replace(read, facts={**included[file].facts, **read.facts}, defines=(*read.defines, *included[file].defines))
             if file in included else read) for file, read in work]
    results: list[RewriteResult] = []
    changed: dict[str, frozenset[int]] = {}
    failed: list[SwzcError] = []
    named: set[str] = set()
    review = functools.partial(_review_one, compile_check=compile_check, memo=results_cache(), max_bytes=max_bytes)
    for file, (result, error) in zip(files, each_file(lambda done: workers.in_order(review, work, jobs, done=done), files, "review")):
        try:
            if error is not None:
                raise SwzcError(error[0], ExitCode(error[1]))
            assert result is not None
            named |= {o.name for o in result.outcomes} & set(facts)
            if diff_base is not None and result.changed:
                changed[result.path] = changed_lines(file, diff_base)
            results.append(result)
        except SwzcError as exc:
            if interrupt_received():  # a compiler killed by the interrupt reads as a failed check
                raise KeyboardInterrupt from None
            clean.echo(f"swzc: error: {exc.message}", err=True, kind="error")
            failed.append(exc)
    if not failed and set(facts) - named:
        raise SwzcError(f"--grid/--block name kernel(s) {', '.join(sorted(set(facts) - named))}, in none of FILES")
    if failed:
        clean.echo(f"swzc: {len(failed)} of {len(files)} file(s) failed; nothing written", err=True)
        sys.exit(int(max(exc.code for exc in failed)))
    found = sum(len(findings_from(r)) for r in results)
    text = emitters.render(output_format, results, changed if diff_base is not None else None, refusals)
    data = text.encode("utf-8", "surrogateescape")  # a patch keeps the file's bytes; JSON is ASCII
    if target:  # checked against every FILE before any work; write_together checks it once more against the first
        outputs.write_together(files[0] if files else None, [(target, data)])
        if not verbosity()[0]:  # the report is in a file: say what it holds
            clean.echo(f"swzc: wrote {output}: {found} finding(s) in {len(results)} file(s)", err=True, kind="note")
    else:  # exact to a pipe; a terminal is shown the patch's control characters as escapes
        clean.write_exact(data)
    sys.exit(FINDINGS if found else 0)


@dataclass(frozen=True)
class _Read:
    """How one project's FILEs are read: the command line's options, and its [tool.swzc] where those leave one open."""

    hw: HardwareModel
    bound: Mapping[str, Value | str]
    facts: Mapping[str, tuple[LaunchFact, ...]]
    include_dirs: tuple[str, ...]
    defines: tuple[str, ...]
    build_path: str | None


def _review_one(item: tuple[str, _Read], compile_check: bool, max_bytes: int, memo: Memo
                ) -> tuple[RewriteResult | None, tuple[str, int] | None]:
    """`_review` under the input limit, here or on a worker: the result, or the error's message and exit code
    (an exception would lose its code on the way back from a worker)."""
    try:
        with input_limit(max_bytes):
            return _review(*item, compile_check, memo), None
    except SwzcError as exc:
        return None, (exc.message, int(exc.code))


def _review(file: str, read: _Read, compile_check: bool, memo: Memo) -> RewriteResult:
    """One file's rewrite by the L2 model alone; --grid/--block may name kernels of any of FILES."""
    context, _ = build_context(file, read.include_dirs, read.defines, read.build_path, memo=memo)
    options = Options(hw=read.hw, bindings=read.bound, context=context, facts=read.facts, facts_elsewhere=True,
                      compile=compile_check, bench=False)
    return rewrite_file(file, options)
