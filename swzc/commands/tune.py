"""`swzc tune PATHS…`: every kernel of a project through the acceptance loop, each as a job on a GPU of this
machine or of a Ray cluster, each result stored as it arrives so that a rerun resumes where a run stopped.

It builds and runs the files' code (it is `rewrite --bench` for many kernels), so it runs only when asked,
on code the user chose.  Click only: the jobs, the store and the workers are swzc.fleet's, the lines and the
JSON swzc.report.tune's, the review formats swzc.report.emitters'.
"""

from __future__ import annotations

import os
import re
import sys
import click
from click.core import ParameterSource

from swzc.commands.cli import (build_options, guarded, json_option, program_bench, program_options, max_bytes_option, set_option,
                               verbosity, verbosity_options)
from swzc.core import clean, outputs
from swzc.core.errors import ExitCode, SwzcError
from swzc.core.outputs import STDOUT, Output
from swzc.frontend.build_context import absolute_flag
from swzc.fleet import jobs as planning
from swzc.fleet import local, results, store
from swzc.fleet.jobs import Job, Settings
from swzc.pipeline.driver import load_hw, parse_bindings, parse_launch_facts
from swzc.report import emitters
from swzc.report import tune as tune_report
from swzc.report.emitters import FORMATS
from swzc.verify.harness import ANY_CARD, Gpu, gpus, gpu_vendor

EPILOG = """\b
Examples:
  swzc tune src/                       every kernel under src/, on every GPU here
  swzc tune build/compile_commands.json --gpus 0,1
  swzc tune src/ --ray auto            on the Ray cluster this machine is part of
  swzc tune src/ --ray head:6379 --cards H100,H200    each kernel on each card model
  swzc tune src/ --report              what the store holds for src/'s kernels
  swzc tune src/ --report --format patch | git apply

\b
A job is one kernel's whole search on one card model: its candidates built,
checked and timed at its sizes, as `swzc rewrite FILE --bench` does for that
kernel.  Its result is stored under a key of the file's bytes, the kernel, the
card model, swzc's version and the settings, so a rerun (after a crash, a
Ctrl-C, or on a bigger set of files) measures only the jobs not yet stored;
--retune measures them all again.  The store is tune.sqlite in swzc's cache
folder unless --store names one.
\b
Local GPUs: one worker per GPU (CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES
narrows them, --gpus picks among them); each job runs in a process of its own
that sees its GPU alone.  A job whose worker dies is run again by the next free
worker, up to --retries more times.  With --bench-cmd and no GPU here, one
worker runs the command.
\b
Ray (pip install 'swzc[ray]'): each job is a task needing one GPU and, for a
card model, a node whose resources hold accelerator_type:MODEL.  Every node must
see the files at the same paths; a worker measures a file only if its bytes are
those the run was planned on.  A job whose node dies is run again elsewhere.
\b
Exit codes:
  0  every job has a stored result (measured now or before)
  1  some jobs have none: their workers failed too often, or no GPU of their
     card model was found (rerun to finish them); with --report, some
     kernels are not tuned yet
  2  bad input: a PATH that cannot be read or analysed, or a job that could
     not be carried out (each named on stderr; the others are still tuned,
     and such a job is run again next time), a bad option, no GPU and no
     --bench-cmd, a --store that is not a tune store
  3  an internal error
  130  interrupted (SIGINT or SIGTERM); every result stored so far is kept"""


@click.command(name="tune", epilog=EPILOG)
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=True))
@click.option("--store", "store_path", metavar="FILE", help="The SQLite store of results (default: tune.sqlite in swzc's cache folder).")
@click.option("--report", "report_only", is_flag=True, help="Measure nothing: print the newest result the store holds for each kernel of PATHS, as their bytes "
              "are now, whatever settings measured it.")
@click.option("--format", "output_format", type=click.Choice(FORMATS), help="With --report: the review format to write "
              "(as `swzc review` writes it), each file rewritten with the orders its kernels' jobs accepted.")
@click.option("--card", metavar="MODEL", help="With --report: this card model's results only (and, with --format, the ones "
              "applied, where the store holds several card models').")
@click.option("-o", "--output", metavar="OUT", help="With --format: write the review here ('-', the default: stdout).")
@click.option("--hw", "hw_name", default="h200", metavar="NAME",
              help="Hardware model for the ranking (default: the model each card is named after, e.g. h100 for an "
                   "NVIDIA H100, else h200).")
@set_option
@build_options
@click.option("--no-compile", is_flag=True, help="Rank without the compiler's resource report (the blocks per SM from the "
              "launch bounds or a stated default) and without the compile check of the chosen rewrite, as `rewrite --no-compile`; "
              "the candidates are still built to be timed.")
@click.option("--compile-flag", "compile_flags", multiple=True, metavar="FLAG", help="An extra flag for every compile (repeatable).")
@click.option("--max-iterations", type=click.IntRange(1, 64), default=4, show_default=True, help="Candidates measured per kernel.")
@click.option("--rounds", type=click.IntRange(3, 1000), default=30, show_default=True, help="Timed rounds per candidate (generated harness).")
@click.option("--launch-spec", metavar="FILE", help="TOML giving buffer sizes, scalars or the launch the files leave open.")
@program_options
@click.option("--gpus", metavar="N,N,...", help="The local GPUs to use, by their place among the visible ones (default: all).")
@click.option("--ray", "ray_address", metavar="ADDRESS", help="Run the jobs on this Ray cluster (host:port, or auto).")
@click.option("--cards", metavar="MODEL,...", help="With --ray: the card models to tune each kernel on (default: every model the "
              "cluster's nodes advertise; none: any GPU).")
@click.option("--retries", type=click.IntRange(0, 10), default=2, show_default=True, help="Extra tries of a job whose worker died.")
@click.option("--retune", is_flag=True, help="Measure every job again, replacing what the store holds for it.")
@click.option("-j", "--jobs", "plan_jobs", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Files analysed at once while the jobs are planned.")
@max_bytes_option
@json_option
@verbosity_options
@guarded
def command(paths: tuple[str, ...], store_path: str | None, report_only: bool, output_format: str | None, card: str | None,
            output: str | None, hw_name: str, bindings: tuple[str, ...], include_dirs: tuple[str, ...], defines: tuple[str, ...],
            build_path: str | None, grids: tuple[str, ...], blocks: tuple[str, ...], no_compile: bool,
            compile_flags: tuple[str, ...], max_iterations: int, rounds: int, launch_spec: str | None, bench_cmd: str | None,
            build_cmd: str | None, bench_runs: int, bench_sizes: str | None, time_regex: str, check_regex: str,
            gpus: str | None, ray_address: str | None, cards: str | None, retries: int, retune: bool, plan_jobs: int,
            max_bytes: int, as_json: bool) -> None:
    """Search and measure every kernel of PATHS (files, folders or a compile_commands.json), each as a job on a
    GPU; keep each result in a store, so that a rerun measures only what is missing."""
    if (output_format or card or output) and not report_only:
        raise SwzcError("--format, --card and -o go with --report")
    if output and not output_format:
        raise SwzcError("-o goes with --format")
    if report_only and (ray_address or gpus or retune):
        raise SwzcError("--report measures nothing: it does not go with --ray, --gpus or --retune")
    if cards and not ray_address:
        raise SwzcError("--cards goes with --ray (local jobs are tuned on the card models of this machine's GPUs)")
    if ray_address and gpus:
        raise SwzcError("--gpus picks this machine's GPUs; with --ray the cluster places the jobs")
    program = program_bench(bench_cmd, build_cmd, bench_runs, bench_sizes, time_regex, check_regex)
    load_hw(hw_name)  # an unknown --hw, a bad --set, --grid or --block: exit 2 before any work
    parse_bindings(list(bindings))
    parse_launch_facts(grids, blocks)
    # paths as this folder reads them: the workers run elsewhere (a private folder, another machine)
    settings = Settings(os.path.abspath(hw_name) if hw_name.endswith(".toml") else hw_name, bindings,
                        tuple(os.path.abspath(d) for d in include_dirs), defines,
                        os.path.abspath(build_path) if build_path else None, grids, blocks, not no_compile,
                        tuple(absolute_flag(flag, os.getcwd()) for flag in compile_flags),
                        max_iterations, rounds, os.path.abspath(launch_spec) if launch_spec else None, bench_cmd, build_cmd, bench_runs,
                        program.sizes if program is not None else (), time_regex, check_regex, max_bytes)
    target = Output("-o", output) if output and output != STDOUT else None
    quiet, verbose = verbosity()
    if store_path is not None and store_path in ("", "-"):
        raise SwzcError(f"--store {store_path!r}: name a file (the store is not written to stdout)")
    where = store_path if store_path is not None else store.default_path()
    workers = [] if report_only or ray_address else _local_workers(gpus, bench_cmd)  # no GPU: said before any work
    plan = planning.plan(paths, settings, [], plan_jobs)  # on any card: the card models are set below
    # --hw not given (on the command line or in a configuration): each card's jobs ranked with its own model
    hw_by_card = click.get_current_context().get_parameter_source("hw_name") == ParameterSource.DEFAULT
    if not plan.files:
        raise SwzcError("no .cu, .cuh or .hip file in PATHS (a folder is searched for them)")
    for file in plan.files:  # neither the store nor the review is ever one of the files read
        outputs.check(file, [Output("--store", where), *([target] if target is not None else [])])
    ray = None
    if ray_address:
        from swzc.fleet import cluster

        ray = cluster.connect(ray_address)
        card_models = [c.strip() for c in cards.split(",") if c.strip()] if cards else cluster.cards(ray)
        plan = plan.on(card_models, hw_by_card) if card_models else plan
    elif not report_only:
        card_models = sorted({w.card for w in workers} - {ANY_CARD})
        plan = plan.on(card_models, hw_by_card) if card_models else plan
    for file, message, _ in plan.failed:
        clean.echo(f"swzc: error: {message}", err=True, kind="error")
    code = max((ExitCode(c) for _, _, c in plan.failed), default=ExitCode.OK)
    failed: list[tuple[Job, str]] = []
    if report_only:
        rows: list[dict] = []
        if os.path.lexists(where):  # nothing stored yet: the report makes no store
            with store.opened(where) as kept:
                rows = kept.of_files({j.digest for j in plan.jobs})
        found = results.latest(plan, rows, card)
        counts: dict[str, int] = {"jobs": len(found), "stored_before": sum(1 for f in found if f.row is not None)}
    else:
        with store.opened(where) as kept:
            before = {key: row for key, row in kept.stored(j.key for j in plan.jobs).items() if row["final"]}
            counts = {"jobs": len(plan.jobs), "stored_before": len(before)}
            todo = [j for j in plan.jobs if retune or j.key not in before]  # an error or an unmeasured kernel: again
            say = _reporter(len(todo), quiet, verbose)
            if ray is not None:
                from swzc.fleet import cluster

                try:
                    outcome = cluster.run(ray, todo, kept, retries, retune, say)
                finally:
                    ray.shutdown()
            else:
                outcome = local.run(todo, workers, kept, retries, retune, say)
            failed = outcome.failed
            counts.update(measured=len(outcome.stored), retried=outcome.retried, failed=len(failed))
            found = results.found(plan, kept.stored(j.key for j in plan.jobs))
    entries = [f.as_dict() for f in found]
    errors = [e for e in entries if e["status"] == "error"]  # the job could not be carried out: the file, a setting
    for entry in errors:
        code = max(code, ExitCode(entry["code"]) if entry.get("code") in (2, 3) else ExitCode.BAD_INPUT)
    counts["not_tuned"] = sum(1 for e in entries if e["status"] == "not tuned") if report_only else 0
    if failed or counts["not_tuned"]:
        code = max(code, ExitCode.DECLINED)
    if output_format:
        _review(plan, found, output_format, card, target)
    elif as_json:
        clean.echo(tune_report.render_json(entries, counts, where, [{"file": j.file, "kernel": j.kernel, "card": j.card, "why": why}
                                                                     for j, why in failed]))
    elif quiet < 2:
        for entry in entries:
            if entry["status"] == "error":
                clean.echo(f"swzc: error: {tune_report.line(entry)}", err=True, kind="error")
            else:
                clean.echo(tune_report.line(entry), kind="finding" if entry["status"] == "rewritten" else None)
        for job, why in failed:
            clean.echo(f"swzc: error: {job.name}: not finished: {why}", err=True, kind="error")
        if not quiet:
            clean.echo(tune_report.summary(counts, where), err=True, kind="note")
    sys.exit(int(code))


def _local_workers(chosen: str | None, bench_cmd: str | None) -> list[local.Worker]:
    """One worker per GPU of this machine (those --gpus picks), named by its model; with --bench-cmd and no GPU,
    one worker without a device (--gpus then names the devices as they are to be set, unchecked)."""
    listed = gpus()
    if not listed and not bench_cmd:
        raise SwzcError("tune needs a GPU here (an NVIDIA GPU with nvcc, or an AMD GPU with hipcc), --bench-cmd, "
                        "or --ray ADDRESS; none was found")
    if not chosen:
        return [local.Worker(g, g.name or ANY_CARD) for g in listed] or [local.Worker(None, ANY_CARD)]
    picked = [p.strip() for p in chosen.split(",")]
    if len(set(picked)) != len(picked) or not all(re.fullmatch(r"[0-9]{1,3}", p) for p in picked):
        raise SwzcError(f"--gpus {chosen!r}: expected distinct GPU numbers separated by commas, e.g. 0,1")
    if not listed:
        variable = "HIP_VISIBLE_DEVICES" if gpu_vendor() == "amd" else "CUDA_VISIBLE_DEVICES"
        return [local.Worker(Gpu(p, "", variable), ANY_CARD) for p in picked]
    if any(int(p) >= len(listed) for p in picked):
        raise SwzcError(f"--gpus {chosen!r}: {len(listed)} GPU(s) are visible here, numbered 0 to {len(listed) - 1}")
    return [local.Worker(listed[int(p)], listed[int(p)].name or ANY_CARD) for p in picked]


def _reporter(total: int, quiet: int, verbose: bool) -> local.Report:
    """Each job's progress on stderr, as it happens (not with -q): stored results and failures; -v: each start."""
    count = {"done": 0}

    def say(event: str, job: Job, detail: str) -> None:
        if quiet or (event == "started" and not verbose):
            return
        if event in ("stored", "failed"):
            count["done"] += 1
        first = detail.splitlines()[0] if detail else ""
        clean.echo(f"swzc tune: [{count['done']}/{total}] {job.name}: {event}" + (f": {first}" if first else ""), err=True)

    return say


def _review(plan: planning.Plan, found: list[results.Found], output_format: str, card: str | None, target: Output | None) -> None:
    """The review format of the stored results, each file rewritten with the orders accepted on one card model."""
    models = sorted({f.job.card for f in found if f.row is not None})
    if card is None and len(models) > 1:
        raise SwzcError(f"the store holds results for several card models ({', '.join(models)}): choose one with --card")
    chosen_card = card or (models[0] if models else ANY_CARD)
    rewritten = results.rewritten(plan, found, chosen_card)
    data = emitters.render(output_format, rewritten, None, True).encode("utf-8", "surrogateescape")
    if target is not None:
        outputs.write_together(plan.files[0], [(target, data)])
    else:
        clean.write_exact(data)
