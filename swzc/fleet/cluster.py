"""The jobs on a Ray cluster (`swzc tune --ray ADDRESS`; Ray is the optional extra `swzc[ray]`).

Each job is a Ray task that needs one GPU; a job for a card model also needs a node of that model, through the
resource Ray gives a node with NVIDIA GPUs, `accelerator_type:<model>` (e.g. `accelerator_type:H100`; a node
can be given it with `ray start --resources`).  Ray makes the task's GPU the only one it sees, so a kernel's
candidates are measured on one GPU.  Every node must hold the files at the same paths (a shared file system, or
the same checkout): a worker measures a file only if its bytes are those the run was planned on.

A task whose worker or node dies is submitted again, up to `retries` more times, and Ray places it on a node
still alive; its result is stored once, by this process, as it arrives.  An error raised by the job itself is
not retried: running it again would raise it again.
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
from collections.abc import Sequence
from typing import Any

from swzc.core.errors import ExitCode, SwzcError
from swzc.fleet.jobs import ANY_CARD, Job
from swzc.fleet.local import Outcome, Report
from swzc.fleet.store import Store

RAY_EXTRA = "pip install 'swzc[ray]'"
RESOURCE = "accelerator_type:"
WAIT_S = 1.0


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise SwzcError(f"--ray needs Ray, which is not installed: {RAY_EXTRA}", ExitCode.BAD_INPUT) from None
    return ray


def connect(address: str) -> Any:
    """Ray, connected to the cluster at ADDRESS (as `ray.init(address=...)` reads it: host:port, or "auto")."""
    ray = _ray()
    _reachable(address)
    here = os.getcwd()
    os.chdir(tempfile.mkdtemp(prefix="swzc-ray-"))  # Ray puts the driver's working folder on its workers' import path
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False, configure_logging=True)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise SwzcError(f"--ray {address}: cannot reach the cluster: {exc}", ExitCode.BAD_INPUT) from None
    finally:
        os.chdir(here)
    return ray


def _reachable(address: str, timeout: float = 5.0) -> None:
    """A HOST:PORT that nothing answers on is said at once: Ray itself would try it for minutes."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "/" in address:
        return  # "auto", "local", a ray:// address: Ray's to resolve
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except (OSError, ValueError) as exc:
        raise SwzcError(f"--ray {address}: nothing answers there ({exc.strerror or exc})", ExitCode.BAD_INPUT) from None


def cards(ray: Any) -> list[str]:
    """The card models the cluster's nodes advertise, sorted."""
    return sorted(name[len(RESOURCE):] for name in ray.cluster_resources() if name.startswith(RESOURCE))


def run(ray: Any, jobs: Sequence[Job], store: Store, retries: int = 2, replace: bool = False,
        report: Report | None = None) -> Outcome:
    """Each job as a Ray task on a GPU of its card model, results stored as they arrive."""
    say = report or (lambda *_: None)
    remote = ray.remote(_task)
    outcome = Outcome()
    pending: dict[Any, tuple[Job, int]] = {}

    def submit(job: Job, tries: int) -> None:
        wanted: dict[str, Any] = {"num_gpus": 1, "max_retries": 0}
        if job.card != ANY_CARD:
            wanted["accelerator_type"] = job.card
        pending[remote.options(**wanted).remote(job.as_dict())] = (job, tries)
        say("started", job, "on the cluster")

    def placeable(job: Job) -> bool:
        """Whether a node alive now can take the job; where none can, Ray would wait for one for ever."""
        offered = ray.cluster_resources()
        wanted = "GPU" if job.card == ANY_CARD else f"{RESOURCE}{job.card}"
        if offered.get(wanted) and offered.get("GPU"):
            return True
        why = "the cluster has no GPU" if not offered.get("GPU") else f"no node of the cluster has a {job.card}"
        outcome.failed.append((job, why))
        say("failed", job, why)
        return False

    for job in jobs:
        if placeable(job):
            submit(job, 1)
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=WAIT_S)
            for ref in done:
                job, tries = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:  # the job itself raised: the same again on any node
                    outcome.failed.append((job, f"the job failed: {exc.cause!r}"))
                    say("failed", job, repr(exc.cause))
                    continue
                except ray.exceptions.RayError as exc:  # its worker or node died, or Ray lost its result
                    if tries > retries:
                        outcome.failed.append((job, f"its worker failed {tries} times; last: {type(exc).__name__}"))
                        say("failed", job, type(exc).__name__)
                    elif placeable(job):  # (where no node is left for it, placeable says so)
                        outcome.retried += 1
                        say("retry", job, type(exc).__name__)
                        submit(job, tries + 1)
                    continue
                if not isinstance(result, dict) or result.get("key") != job.key:
                    outcome.failed.append((job, "the worker's result is not this job's"))
                    say("failed", job, "the worker's result is not this job's")
                    continue
                store.put(job, result, tries, replace)
                outcome.stored.append(job)
                say("stored", job, str(result.get("status", "")))
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
    return outcome


def _task(data: dict[str, Any]) -> dict[str, Any]:
    """The Ray task: the job run in this worker process (its temporary files in private folders of their own, as
    everywhere in swzc; the worker's tempfile settings are left as Ray set them, for the next task)."""
    import ray

    from swzc.fleet import job

    return {**job.run(Job.from_dict(data)), "node": ray.get_runtime_context().get_node_id()}
