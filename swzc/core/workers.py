"""Work spread over worker processes: a function of each item, the results in the items' order.

The workers are started afresh (the "spawn" start method: nothing of this process's state is inherited) and
leave SIGINT to this process, which Ctrl-C reaches with them: an interrupt, or an error here, ends them all
at once (swzc.core.signals then unwinds the run as usual).  The function and the items must pickle.
"""

from __future__ import annotations

import functools
import multiprocessing
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def in_order(function: Callable[[T], R], items: Sequence[T], jobs: int = 1, cost: Callable[[T], float] | None = None,
             done: Callable[[int], None] | None = None) -> Iterator[R]:
    """`function(item)` for each item, in order: here, one at a time, or with `jobs` > 1 on that many processes,
    this one and `jobs` - 1 workers.  Each worker is kept two items ahead (given the next as each result comes
    back), and this process runs the next item itself meanwhile.  `cost`: an estimate of each item's work; the
    costliest go first (so that no long item starts last while the others sit idle).  The results come in the
    items' order either way; a failure is raised at its item's turn.  `done(index)`: told here, in this thread,
    as each item ends (in the order they end: a progress display), before its result is given."""
    if jobs <= 1 or len(items) < 2:
        for index, item in enumerate(items):
            result = function(item)
            if done is not None:
                done(index)
            yield result
        return
    order = list(range(len(items)))
    if cost is not None:
        order.sort(key=lambda i: -cost(items[i]))
    workers = min(jobs, len(items)) - 1
    pool = multiprocessing.get_context("spawn").Pool(workers, initializer=_worker)
    arrived = threading.Condition()  # guards `order`, `results` and `given`
    results: dict[int, tuple[bool, Any]] = {}  # (raised, the result or the exception), by index
    given = [0]  # items with the workers

    def hand_out() -> None:  # with `arrived` held
        while order and given[0] < 2 * workers:
            index = order.pop(0)
            given[0] += 1
            pool.apply_async(function, (items[index],), callback=functools.partial(back, index, False),
                             error_callback=functools.partial(back, index, True))

    def back(index: int, raised: bool, value: Any) -> None:  # on the pool's thread that collects results
        with arrived:
            results[index] = (raised, value)
            given[0] -= 1
            hand_out()
            arrived.notify_all()

    finished = False
    try:
        with arrived:
            hand_out()
        told: set[int] = set()

        def tell() -> None:  # `done` for every item ended since last told, outside the lock
            with arrived:
                ended = [i for i in results if i not in told]
            for i in sorted(ended):
                told.add(i)
                if done is not None:
                    done(i)

        for ready in range(len(items)):
            while True:
                tell()
                with arrived:
                    if ready in results:
                        raised, value = results.pop(ready)
                        late = ready not in told  # ended since `tell`
                        break
                    index = order.pop(0) if order else None
                    if index is None:
                        arrived.wait()
                        continue
                outcome = _outcome(lambda: function(items[index]))  # the workers are busy: this one here
                with arrived:
                    results[index] = outcome
            if late:
                told.add(ready)
                if done is not None:
                    done(ready)
            if raised:
                raise value
            yield value
        finished = True
    finally:
        if finished:
            pool.close()
        else:
            pool.terminate()
        pool.join()


def _outcome(call: Callable[[], Any]) -> tuple[bool, Any]:
    """(False, what `call` returned), or (True, the exception it raised): raised when its turn comes."""
    try:
        return False, call()
    except Exception as exc:
        return True, exc


def _worker() -> None:
    """A worker process: SIGINT (Ctrl-C reaches the whole process group) is the parent's to act on."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
