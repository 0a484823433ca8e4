"""Work spread over worker processes: a function of each item, the results in the items' order.

The workers are started afresh (the "spawn" start method: nothing of this process's state is inherited) and
leave SIGINT to this process, which Ctrl-C reaches with them: an interrupt, or an error here, ends them all
at once (swzc.core.signals then unwinds the run as usual).  The function and the items must pickle.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def in_order(function: Callable[[T], R], items: Sequence[T], jobs: int = 1) -> Iterator[R]:
    """`function(item)` for each item, in order: here, one at a time, or with `jobs` > 1 on that many workers."""
    if jobs <= 1 or len(items) < 2:
        for item in items:
            yield function(item)
        return
    pool = multiprocessing.get_context("spawn").Pool(min(jobs, len(items)), initializer=_worker)
    done = False
    try:
        yield from pool.imap(function, items)
        done = True
    finally:
        if done:
            pool.close()
        else:
            pool.terminate()
        pool.join()


def _worker() -> None:
    """A worker process: SIGINT (Ctrl-C reaches the whole process group) is the parent's to act on."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
