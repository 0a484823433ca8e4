"""One job carried out where its GPU is: the kernel's acceptance loop, as `swzc rewrite --bench` runs it for
that kernel alone, and its result as plain data for the store.

`run` is called in a Ray worker; `python -m swzc.fleet.job` is the local worker process, one per job, which
reads the job as JSON on stdin and writes the result as JSON on stdout.  Either way the file is measured only
if its bytes are the ones the run was planned on.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from typing import Any

from swzc import __version__
from swzc.core.errors import SwzcError
from swzc.fleet.jobs import Job
from swzc.pipeline.driver import NOT_BENCHMARKED, analyze_file, rewrite_benchmarked
from swzc.pipeline.reading import input_limit
from swzc.verify.bench import Attempt
from swzc.verify.harness import gpu_name

INTERNAL_ERROR = 3  # the worker's exit status for a fault of swzc's own: the same again on any worker, so not retried
ATTEMPT_FIELDS = ("candidate", "size", "status", "accepted", "correct", "speedup", "lower_bound", "upper_bound", "noise",
                  "baseline_ms", "ms", "l2_hit_rate", "dram_read_bytes", "predicted_l2_hit_rate", "reason", "seconds")


def run(job: Job) -> dict[str, Any]:
    """The job's result: what the loop chose for the kernel and every measurement it made, or the input error
    that stopped it (an error of the file or the settings is a result too: running it again gives the same)."""
    started = time.monotonic()
    where = {"key": job.key, "measured_on": gpu_name() or "no GPU", "host": socket.gethostname(),
             "device": os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("HIP_VISIBLE_DEVICES") or "",
             "swzc": __version__}
    try:
        with input_limit(job.settings.max_bytes):
            options = job.settings.options(job.file)
            ctx, analysis = analyze_file(job.file, options.bindings, options.context, options.facts, facts_elsewhere=True,
                                         digest=job.digest)
            if job.index >= len(analysis.kernels) or analysis.kernels[job.index].name != job.kernel:
                raise SwzcError(f"{job.file}: kernel {job.kernel} is not where the run's plan found it")
            result = rewrite_benchmarked(ctx, analysis, options, kernels={job.index})
    except SwzcError as exc:  # kept, and run again by the next run: the file, a setting or the machine may change
        return {**where, "status": "error", "reason": exc.message, "code": int(exc.code), "chosen": None, "attempts": [],
                "final": False, "seconds": round(time.monotonic() - started, 3)}
    line = analysis.kernels[job.index].line
    outcome = next(o for o in result.outcomes if o.name == job.kernel and o.line == line)
    bench = next((b for b in result.bench if b.kernel == job.kernel and b.line == line), None)
    attempts = [_attempt(a) for a in (bench.by_size or bench.attempts)] if bench is not None else []
    unmeasured = outcome.status == "declined" and outcome.reason.startswith(NOT_BENCHMARKED)  # the harness could not run it
    return {**where, "status": outcome.status, "reason": outcome.reason, "chosen": outcome.swizzle if outcome.status == "rewritten" else None,
            "chosen_by": outcome.chosen_by, "attempts": attempts, "notes": list(result.notes), "final": not unmeasured,
            "seconds": round(time.monotonic() - started, 3)}


def _attempt(attempt: Attempt) -> dict[str, Any]:
    return {name: getattr(attempt, name) for name in ATTEMPT_FIELDS}


def _watch_parent() -> None:
    """A worker whose run is gone (killed, so it could not end its workers) ends itself, and what it started."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), 15)  # SIGTERM: unwinds as an interrupt, killing the builds and runs it started

    threading.Thread(target=watch, daemon=True).start()


def main() -> int:
    """The local worker: a job as JSON on stdin, its result as JSON on stdout; exit 0 when a result was written."""
    import shutil
    import tempfile

    from swzc.core.signals import install

    install()
    _watch_parent()
    folder = tempfile.mkdtemp(prefix="swzc-job-")
    tempfile.tempdir = folder  # every temporary file of this job in its own private folder
    try:
        job = Job.from_dict(json.loads(sys.stdin.read()))
        json.dump(run(job), sys.stdout)
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - swzc's own fault: one line for the run to report, never a traceback
        from swzc.core.clean import text

        print(text(f"internal error: {type(exc).__name__}: {exc}"), file=sys.stderr)
        return INTERNAL_ERROR
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
