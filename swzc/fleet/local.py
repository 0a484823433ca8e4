"""The jobs on this machine's GPUs: one worker per GPU, each running one job at a time in a process of its own
that sees that GPU alone (CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES), so that every candidate of a kernel is
measured on one GPU and two kernels never share one.

A job whose worker process dies (killed, crashed, past its time) is put back and run again by the next free
worker of its card model, up to `retries` more times; its result is stored once, by this process, as it
arrives (swzc.fleet.store).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from swzc.core import processes
from swzc.fleet.job import INTERNAL_ERROR
from swzc.fleet.jobs import ANY_CARD, Job
from swzc.fleet.store import Store
from swzc.verify.harness import Gpu

POLL_S = 0.2
JOB_TIMEOUT_S = 4 * 3600.0


@dataclass(frozen=True)
class Worker:
    """One GPU of this machine (None: no GPU, for a measurement command that needs none)."""

    gpu: Gpu | None
    card: str

    @property
    def name(self) -> str:
        return f"GPU {self.gpu.ident} ({self.card})" if self.gpu is not None else "the worker without a GPU"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.gpu is not None:
            env[self.gpu.variable] = self.gpu.ident
        return env


@dataclass
class Outcome:
    """What a run of the jobs did: results stored (or kept, already stored), and jobs given up."""

    stored: list[Job] = field(default_factory=list)
    failed: list[tuple[Job, str]] = field(default_factory=list)  # (job, why its last try failed)
    retried: int = 0


Report = Callable[[str, Job, str], None]  # ("stored" | "retry" | "failed" | "started", job, detail)


def run(jobs: Sequence[Job], workers: Sequence[Worker], store: Store, retries: int = 2, replace: bool = False,
        report: Report | None = None, timeout: float = JOB_TIMEOUT_S) -> Outcome:
    """Each job on a worker of its card model, results stored as they arrive."""
    outcome = Outcome()
    say = report or (lambda *_: None)
    cards = {w.card for w in workers}
    for job in jobs:
        if job.card != ANY_CARD and job.card not in cards:
            outcome.failed.append((job, f"no GPU of this machine is a {job.card}"))
    queue: deque[tuple[Job, int]] = deque((job, 1) for job in jobs if job.card in cards or job.card == ANY_CARD)
    running: dict[int, tuple[Job, int, processes.Started]] = {}
    with tempfile.TemporaryDirectory(prefix="swzc-tune-") as folder:
        try:
            while queue or running:
                for slot, worker in enumerate(workers):
                    if slot in running:
                        continue
                    picked = next((item for item in queue if item[0].card in (worker.card, ANY_CARD)), None)
                    if picked is None:
                        continue
                    queue.remove(picked)
                    job, tries = picked
                    where = Path(folder) / f"{len(outcome.stored) + len(outcome.failed)}-{slot}-{tries}-{time.monotonic_ns()}"
                    where.mkdir()
                    # -P and a private working folder: nothing of the folder swzc was started in is imported
                    command = [sys.executable, "-P", "-m", "swzc.fleet.job"]
                    running[slot] = (job, tries, processes.Started(command, json.dumps(job.as_dict()).encode(), where, timeout,
                                                                   worker.env()))
                    say("started", job, worker.name)
                for slot in list(running):
                    job, tries, child = running[slot]
                    done = child.poll()
                    if done is None:
                        continue
                    del running[slot]
                    result, why = _result(job, done)
                    if result is not None:
                        store.put(job, result, tries, replace)
                        outcome.stored.append(job)
                        say("stored", job, str(result.get("status", "")))
                    elif tries <= retries and done.returncode != INTERNAL_ERROR:
                        queue.appendleft((job, tries + 1))
                        outcome.retried += 1
                        say("retry", job, f"{workers[slot].name}: {why}")
                    else:
                        outcome.failed.append((job, why))
                        say("failed", job, why)
                time.sleep(POLL_S if running else 0)
        finally:
            for _, _, child in running.values():
                child.stop()
    return outcome


def _result(job: Job, done: processes.Finished) -> tuple[dict | None, str]:
    """The job's result from its worker's output, or why there is none (the worker did not finish it)."""
    if not done.ok:
        return None, f"the worker {done.status()}; its output began:\n{done.head()}"
    try:
        result = json.loads(done.stdout)
    except ValueError:
        return None, f"the worker printed no result; its output began:\n{done.head()}"
    if not isinstance(result, dict) or result.get("key") != job.key:
        return None, "the worker's result is not this job's"
    return result, ""
