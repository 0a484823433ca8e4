"""Benchmark: how the cost of `swzc rewrite` grows with the file: 1k, 10k and 50k lines.

    taskset -c 0 python bench/scaling.py          # prints a table, writes bench/results/scaling.json

Each file is generated: 71 launched kernels per 1,000 lines (tiled GEMMs, 1D-decoded copies, kernels with a
block-index helper, refused atomic-ticket kernels; three problem sizes, so kernels of one shape recur as in
generated code), every grid fixed by the file, and host helpers for bulk.  One child process per file runs
the library call `rewrite_file` with the default choice (the L2 model ranks every kernel; no nvcc compile
check), so the times include parsing, the analysis, the model, the proof, the splice and the patch.  Targets:
10k lines in 10 s and 50k lines in 60 s on one core, and time per line not growing with the file.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from rewrite_speed import FILLER, KERNELS  # noqa: E402

SIZES = (1000, 10000, 50000)
KERNELS_PER_1000_LINES = 71
TARGETS_S = {10000: 10.0, 50000: 60.0}


def generate(lines: int) -> str:
    kinds = list(KERNELS)
    count = lines * KERNELS_PER_1000_LINES // 1000
    parts = ["#include <cuda_runtime.h>\n#define TILE 16\n"]
    launches = []
    for i in range(count):
        kind = kinds[i % len(kinds)]
        parts.append(KERNELS[kind].format(i=i))
        n = (2048, 4096, 8192)[i // len(kinds) % 3]
        name = {"naive": "naive", "decoded": "decoded", "helper": "helper", "refused": "ticket"}[kind]
        args = {"naive": f"A, B, C, {n}", "decoded": f"A, C, {n}, {n} / TILE", "helper": f"C, {n}", "refused": "C, counter"}[kind]
        grid = f"dim3({n} / TILE * ({n} / TILE))" if kind == "decoded" else f"dim3({n} / TILE, {n} / TILE)"
        launches.append(f"  {name}_{i}<<<{grid}, dim3(TILE, TILE)>>>({args});\n")
    body = "".join(parts)
    main = "int main() {\n  float *A = 0, *B = 0, *C = 0;\n  unsigned* counter = 0;\n" + "".join(launches) + "  return 0;\n}\n"
    i = 0
    filler = []
    have = body.count("\n") + main.count("\n")
    per = FILLER.count("\n")
    while have < lines:
        filler.append(FILLER.format(i=i))
        have += per
        i += 1
    return body + "".join(filler) + main


def child(path: str) -> None:
    from swzc.pipeline.driver import Options, load_hw, rewrite_file

    start = time.perf_counter()
    result = rewrite_file(path, Options(hw=load_hw("h200"), compile=False))
    seconds = time.perf_counter() - start
    statuses = [o.status for o in result.outcomes]
    print(json.dumps({"seconds": seconds, "kernels": len(statuses), "rewritten": statuses.count("rewritten"),
                      "patch_lines": result.patch.count("\n"),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def measure(path: Path, lines: int) -> dict:
    """One file rewritten in a child process: its lines, the child's figures and the time per 1,000 lines."""
    real_lines = path.read_text().count("\n")
    run = subprocess.run([sys.executable, __file__, "--child", str(path)], capture_output=True, text=True, check=True)
    doc = json.loads(run.stdout.strip().splitlines()[-1])
    return {"lines": real_lines, **doc, "ms_per_1000_lines": 1000 * 1000 * doc["seconds"] / real_lines,
            "target_s": TARGETS_S.get(lines)}


def record(command: str, rows: list[dict], name: str) -> int | None:
    """Write the runs to bench/results/NAME with the machine they ran on; the CPUs allowed."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    out = {"command": command, "cpus_allowed": affinity, "machine": platform.machine(),
           "python": platform.python_version(), "date": time.strftime("%Y-%m-%d"), "runs": rows}
    (Path(__file__).parent / "results" / name).write_text(json.dumps(out, indent=2) + "\n")
    return affinity


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="swzc-scaling-") as tmp:
        for lines in SIZES:
            path = Path(tmp) / f"generated_{lines}.cu"
            path.write_text(generate(lines))
            rows.append(measure(path, lines))
    show(rows, record("taskset -c 0 python bench/scaling.py", rows, "scaling.json"))


def show(rows: list[dict], affinity: int | None) -> None:
    """The runs as a table (with the kind of file first, where the rows say)."""
    print(f"cpus allowed: {affinity}")
    kind = "file" in rows[0] if rows else False
    print(f"{'file':>9} " * kind + f"{'lines':>7} {'kernels':>8} {'rewritten':>9} {'seconds':>8} {'ms/1k lines':>12} {'peak MB':>8} {'target s':>9}")
    for r in rows:
        print(f"{r.get('file', ''):>9} " * kind + f"{r['lines']:>7} {r['kernels']:>8} {r['rewritten']:>9} {r['seconds']:>8.2f} "
              f"{r['ms_per_1000_lines']:>12.0f} {r['peak_rss_mb']:>8.0f} {r['target_s'] or '':>9}")


if __name__ == "__main__":
    main()
