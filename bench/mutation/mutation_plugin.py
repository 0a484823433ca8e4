"""pytest plugin of the mutation run (bench/mutation/run.py), loaded with `-p mutation_plugin`.

Two jobs, each switched on by an environment variable the driver sets:

- MUTATION_TRACE_OUT=FILE: record, per test, which lines of the mutated modules it runs (setup, call and
  teardown), and its outcome and duration; written to FILE at the end.  Processes a test starts run
  sitecustomize.py from this folder, which records their lines for the same test (MUTATION_TRACE_TEST).
  The prover cache in memory is emptied before each test, so a test that needs a prover builds it itself
  and the lines that build it count for that test.
- MUTATION_SELECT=FILE: run only the tests FILE lists (a JSON list of node ids), in its order.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import pytest

import mutation_trace


def pytest_collection_modifyitems(session, config, items):
    chosen = os.environ.get("MUTATION_SELECT")
    if not chosen:
        return
    with open(chosen, encoding="utf-8") as f:
        order = {nodeid: rank for rank, nodeid in enumerate(json.load(f))}
    keep = sorted((item for item in items if item.nodeid in order), key=lambda item: order[item.nodeid])
    dropped = [item for item in items if item.nodeid not in order]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


_RECORDS: dict[str, dict] = {}


def _empty_caches() -> None:
    prove = sys.modules.get("swzc.formulas.prove")
    if prove is not None:
        prove.build_prover.cache_clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    out = os.environ.get("MUTATION_TRACE_OUT")
    if not out:
        yield
        return
    _empty_caches()
    os.environ["MUTATION_TRACE_TEST"] = item.nodeid
    lines: set[tuple[str, int]] = set()
    tracer = mutation_trace.tracer(lines)
    start = time.perf_counter()
    threading.settrace(tracer)
    sys.settrace(tracer)
    try:
        yield
    finally:
        sys.settrace(None)
        threading.settrace(None)
        record = _RECORDS.setdefault(item.nodeid, {"outcome": "passed"})
        record["seconds"] = time.perf_counter() - start
        record["lines"] = mutation_trace.by_file(lines)
        os.environ.pop("MUTATION_TRACE_TEST", None)


def pytest_runtest_logreport(report):
    if not os.environ.get("MUTATION_TRACE_OUT"):
        return
    record = _RECORDS.setdefault(report.nodeid, {"outcome": "passed"})
    if report.failed:
        record["outcome"] = "failed"
    elif report.skipped and record["outcome"] == "passed":
        record["outcome"] = "skipped"


def pytest_sessionfinish(session, exitstatus):
    out = os.environ.get("MUTATION_TRACE_OUT")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(_RECORDS, f)
