"""Benchmark: rank 100 candidate block orders of a 65,536-block grid with the L2 model, on one core.

    taskset -c 0 python bench/model_speed.py     # prints the times, writes bench/results/model_speed.json

The kernel is bench/l2/kernels/naive_gemm.cu (a 256 x 256 grid); the candidates are grouped:G and
serpentine:G, hilbert:K and morton:K, xcd:N and xcd:N:C chains and colmajor, 100 in all.  Times the block
orders (the compiled swizzle C++, run once for all candidates) and the predictions separately; the
footprint analysis and the residency (from nvcc when it is on PATH; compiled once, then cached) run once.
The same is timed at other sizes of the kernel (N = 1024 to 8192: 4,096 to 262,144 blocks; a grid past
65,536 blocks is modelled over its first 65,536 positions) to show how the cost grows.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

from swzc.target import hw as hwmodels
from swzc.frontend import source
from swzc.analysis.kernels import analyze
from swzc.model.footprint import footprint
from swzc.model.l2model import L2Model
from swzc.formulas.prove import dispatch_maps
from swzc.model.rank import MAX_MODEL_BLOCKS
from swzc.model.residency import residency
from swzc.formulas.swizzles import parse_spec
from swzc.analysis.context import FileContext

ROOT = Path(__file__).resolve().parents[1]


def specs() -> list[str]:
    names = ["identity", "colmajor"] + [f"grouped:{g}" for g in range(2, 38)] + [f"serpentine:{g}" for g in range(2, 18)]
    names += [f"{kind}:{k}" for kind in ("hilbert", "morton") for k in (2, 4, 8, 16, 32, 64)]
    names += [f"xcd:8:{c}+grouped:{g}" for c in (4, 16) for g in (2, 4, 8, 16, 32, 64)]
    names += [f"xcd:{n}+{kind}:8" for n in (2, 4, 8) for kind in ("hilbert", "morton", "serpentine")]
    names += [f"xcd:{n}" for n in (2, 3, 4, 5, 6, 7, 8)] + [f"xcd:8:{c}" for c in (1, 2, 4, 8, 16, 32)]
    return names[:100]


def timed(text: str, hw: hwmodels.HardwareModel, rounds: int) -> dict:
    src = source.load_bytes(str(ROOT / "bench/l2/kernels/naive_gemm.cu"), text.encode())
    ctx = FileContext(src)
    (kernel,) = analyze(ctx).kernels
    start = time.perf_counter()
    fp = footprint(ctx, kernel)
    t_footprint = time.perf_counter() - start
    assert not isinstance(fp, str)
    start = time.perf_counter()
    running = residency(ctx, kernel, hw, fp.threads)
    t_residency = time.perf_counter() - start
    candidates = [parse_spec(s) for s in specs()]
    runs = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        maps = dispatch_maps([(s, kernel.adapter) for s in candidates], (*fp.grid, 0), MAX_MODEL_BLOCKS)
        t1 = time.perf_counter()
        model = L2Model(fp, hw, running.resident_blocks(hw))
        for s, order in zip(candidates, maps):
            model.predict(s.name, order, kernel.adapter)
        t2 = time.perf_counter()
        runs.append((t1 - t0, t2 - t1))
    runs = runs[1:]  # the first round builds the prover
    doc = {"grid_blocks": fp.grid[0] * fp.grid[1] * fp.grid[2], "modelled_blocks": min(MAX_MODEL_BLOCKS, fp.grid[0] * fp.grid[1] * fp.grid[2]),
           "candidates": len(candidates), "footprint_s": round(t_footprint, 3),
           "residency_s": round(t_residency, 3), "residency": f"{running.blocks_per_cu} per SM ({running.source})",
           "orders_median_s": round(statistics.median(r[0] for r in runs), 3),
           "predict_median_s": round(statistics.median(r[1] for r in runs), 3)}
    doc["total_median_s"] = round(doc["orders_median_s"] + doc["predict_median_s"], 3)
    return doc


def main() -> None:
    hw = hwmodels.load("h200")
    text = (ROOT / "bench/l2/kernels/naive_gemm.cu").read_text()
    main_run = timed(text, hw, 6)
    sizes = [timed(text.replace("#define N 4096", f"#define N {n}"), hw, 3) for n in (1024, 2048, 8192)]
    doc = {
        "command": "taskset -c 0 python bench/model_speed.py",
        "cpus_allowed": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "target_s": 2.0,
        **main_run,
        "by_grid": sorted([main_run, *sizes], key=lambda d: d["grid_blocks"]),
    }
    (ROOT / "bench/results/model_speed.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
