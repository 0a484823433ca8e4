"""Benchmark: rank 100 candidate block orders of a 65,536-block grid with the L2 model, on one core.

    taskset -c 0 python bench/model_speed.py     # prints the times, writes bench/results/model_speed.json

The kernel is bench/l2/kernels/naive_gemm.cu (a 256 x 256 grid); the candidates are grouped:1..64,
hilbert:2..64, xcd:2..8 chains and colmajor, 100 in all.  Times the block orders (the compiled swizzle
C++, run once for all candidates) and the predictions separately; the footprint analysis runs once.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

from swzc import hw as hwmodels
from swzc import source
from swzc.analysis import analyze
from swzc.footprint import footprint
from swzc.l2model import L2Model
from swzc.prove import dispatch_maps
from swzc.swizzles import parse_spec

ROOT = Path(__file__).resolve().parents[1]


def specs() -> list[str]:
    names = ["identity", "colmajor"] + [f"grouped:{g}" for g in range(1, 65)]
    names += [f"hilbert:{k}" for k in (2, 4, 8, 16, 32, 64)]
    names += [f"xcd:{n}+grouped:{g}" for n in (2, 4, 8) for g in (2, 4, 8, 16, 32, 64)]
    names += [f"xcd:{n}" for n in (2, 3, 4, 5, 6, 7, 8)] + ["xcd:8+colmajor", "xcd:4+colmajor", "xcd:2+colmajor"]
    return names[:100]


def main() -> None:
    src = source.load(str(ROOT / "bench/l2/kernels/naive_gemm.cu"))
    (kernel,) = analyze(src).kernels
    start = time.perf_counter()
    fp = footprint(src, kernel)
    t_footprint = time.perf_counter() - start
    assert not isinstance(fp, str)
    candidates = [parse_spec(s) for s in specs()]
    hw = hwmodels.load("h200")
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        maps = dispatch_maps([(s, kernel.adapter) for s in candidates], (*fp.grid, 0))
        t1 = time.perf_counter()
        model = L2Model(fp, hw)
        for s, order in zip(candidates, maps):
            model.predict(s.name, order, kernel.adapter)
        t2 = time.perf_counter()
        runs.append((t1 - t0, t2 - t1))
    doc = {
        "command": "taskset -c 0 python bench/model_speed.py",
        "grid_blocks": fp.grid[0] * fp.grid[1] * fp.grid[2],
        "candidates": len(candidates),
        "cpus_allowed": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "footprint_s": round(t_footprint, 3),
        "orders_median_s": round(statistics.median(r[0] for r in runs[1:]), 3),
        "predict_median_s": round(statistics.median(r[1] for r in runs[1:]), 3),
        "target_s": 2.0,
    }
    doc["total_median_s"] = round(doc["orders_median_s"] + doc["predict_median_s"], 3)
    (ROOT / "bench/results/model_speed.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
