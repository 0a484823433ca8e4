#!/usr/bin/env python3
"""How fast co-resident blocks drift out of step: the L2 model's DRIFT tried on every kernel measured.

    python3 bench/l2/drift.py [--drift 1,2,3,4,6,8,12,16] [--out bench/results/l2_drift.md]

The model counts a share IN_STEP * (1 - g / resident) ** DRIFT of the reuses between blocks g dispatch positions
apart as in step (swzc.model.l2model).  For each value of DRIFT, every measured (kernel, order) of the H200's
files (the fit's) and of the H100's (three shapes, two more, both measured after the fit) is predicted with
its card's model and the other constants as they are; per kernel: the hit rate's mean absolute error, the
mean absolute log ratio of predicted to measured DRAM bytes, how many orders' DRAM bytes are within 15 %, and
the original order's hit-rate error.  No value is chosen here: the table is what the choice of DRIFT rests on.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

from swzc.target import hw as hwmodels

from fit import DEFAULT_RESULTS, Kernel, measurements, moved  # noqa: E402  (bench/l2 is the script's folder)

SETS = (("h200", DEFAULT_RESULTS), ("h100", "bench/results/l2_ncu_h100_shapes.json"),
        ("h100", "bench/results/l2_ncu_h100_new.json"))


def scores(kernel: Kernel, drift: float) -> dict[str, float]:
    predicted = kernel.predictions(drift=drift)
    measured = [moved(r) for r in kernel.rows]
    identity = [p.l2_hit_rate - r["l2_hit_pct"] for p, r in zip(predicted, kernel.rows) if r["candidate"] == "identity"]
    return {"hit_mae": statistics.mean(abs(p.l2_hit_rate - r["l2_hit_pct"]) for p, r in zip(predicted, kernel.rows)),
            "dram_log": statistics.mean(abs(math.log(max(p.dram_bytes, 1.0) / max(1, m))) for p, m in zip(predicted, measured)),
            "within_15": sum(abs(p.dram_bytes / max(1, m) - 1) <= 0.15 for p, m in zip(predicted, measured)),
            "identity_error": identity[0] if identity else math.nan}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--drift", default="1,2,3,4,6,8,12,16")
    parser.add_argument("--out", default="bench/results/l2_drift.md")
    args = parser.parse_args()
    values = [float(v) for v in args.drift.split(",")]
    start = time.perf_counter()
    kernels: list[tuple[str, str, Kernel]] = []
    for card, paths in SETS:
        hw = hwmodels.load(card)
        rows = measurements(paths.split(","))
        for name in sorted({r["kernel"] for r in rows}):
            kernels.append((card, name, Kernel(name, [r for r in rows if r["kernel"] == name], hw)))
    table = {(card, name): [scores(k, d) for d in values] for card, name, k in kernels}
    head = " | ".join(f"{d:g}" for d in values)
    lines = ["# The in-step share's drift exponent (DRIFT) on every kernel measured", "",
             f"`python3 bench/l2/drift.py --drift {args.drift}` ({time.perf_counter() - start:.0f} s). Each cell: the hit "
             "rate's mean absolute error (points) / the mean absolute log ratio of predicted to measured DRAM bytes. "
             "The model uses DRIFT = 2.", "",
             f"| card | kernel | blocks per SM | orders | {head} |", "|---|---|---:|---:|" + "---|" * len(values)]
    for card, name, k in kernels:
        cells = " | ".join(f"{s['hit_mae']:.1f} / {s['dram_log']:.2f}" for s in table[card, name])
        lines.append(f"| {card} | {name} | {k.residency.blocks_per_cu} | {len(k.rows)} | {cells} |")
    total = sum(len(k.rows) for _, _, k in kernels)
    lines += ["", f"| over all {total} (kernel, order) pairs | " + " | ".join(f"DRIFT {d:g}" for d in values) + " |",
              "|---|" + "---:|" * len(values)]
    within = [sum(table[key][i]["within_15"] for key in table) for i in range(len(values))]
    lines.append("| DRAM bytes within 15 % | " + " | ".join(str(w) for w in within) + " |")
    mean_hit = [statistics.mean(table[key][i]["hit_mae"] for key in table) for i in range(len(values))]
    lines.append("| hit rate MAE, mean over kernels (pt) | " + " | ".join(f"{m:.2f}" for m in mean_hit) + " |")
    worst = [max(table[key][i]["hit_mae"] for key in table) for i in range(len(values))]
    lines.append("| hit rate MAE, worst kernel (pt) | " + " | ".join(f"{m:.1f}" for m in worst) + " |")
    ident = [statistics.mean(abs(table[key][i]["identity_error"]) for key in table) for i in range(len(values))]
    lines.append("| the original order's hit-rate error, mean absolute (pt) | " + " | ".join(f"{m:.1f}" for m in ident) + " |")
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
