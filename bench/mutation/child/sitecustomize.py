"""Traces a Python process a test starts (the swzc console script, `python -m swzc`) during the mutation
run's coverage pass; does nothing unless MUTATION_TRACE_TEST and MUTATION_TRACE_DIR are set."""

import os

if os.environ.get("MUTATION_TRACE_TEST") and os.environ.get("MUTATION_TRACE_DIR"):
    import atexit
    import json
    import sys
    import threading

    import mutation_trace

    _lines: set = set()
    _tracer = mutation_trace.tracer(_lines)
    threading.settrace(_tracer)
    sys.settrace(_tracer)

    def _dump() -> None:
        sys.settrace(None)
        path = os.path.join(os.environ["MUTATION_TRACE_DIR"], f"child-{os.getpid()}-{id(_lines)}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"test": os.environ["MUTATION_TRACE_TEST"], "lines": mutation_trace.by_file(_lines)}, f)

    atexit.register(_dump)
