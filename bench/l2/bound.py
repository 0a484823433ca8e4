#!/usr/bin/env python3
"""How close the L2 model's DRAM bytes can come to ncu's when each kernel gets its own constants: the most
orders within 15 % that any per-kernel setting reaches, against what the model gets as it ranks and with the
inputs one run of the original measures.  Computed from measurements already recorded; nothing runs.

    python3 bench/l2/bound.py [--jobs 2] [--out bench/results/l2_dram_bound_h200]   # writes .json and .md

Three parts.

**1. Per-kernel forms (the H200's ten kernels).**  Every form runs with the calibration of `--bench` (calibrated.py: crisp waves where the original's later
waves started at once, the coalescer's measured share on staged kernels).  Per kernel:
- **as calibrated**: the fitted IN_STEP, DRIFT and UNIQUE;
- **one more input, solved at the original order**: IN_STEP, or DRIFT, solved so that the model's DRAM bytes
  at the original order are the ones ncu measured there (bisection; where no value reaches them, the end of
  the range nearest them), as a `--bench` run could do with the DRAM bytes its ncu run already reads;
- **the measured lag**: IN_STEP set to 1 - the measured lag of the pairs one tile row apart
  (bench/results/timeline_h200.json; 0: they start together, 1: as spread as the waves);
- **the bound**: the best of a grid of IN_STEP x DRIFT x UNIQUE for that kernel alone, scored on its own
  measured orders.  No input measured before a run can do better than this with the model's present form.

Each form reports the orders within 15 % of ncu's DRAM bytes (read + written) and the hit rate's mean absolute
error at the same constants.  Crisp-wave kernels keep their calibrated form everywhere (the in-step share
does not apply to them).

**2. The least-bytes order against the L2 share distinct data may use (UNIQUE).**  For each UNIQUE, on the
H200's ten kernels and the H100's five other shapes (the model as it ranks, offline): the measured bytes of the
order the model predicts to move the least, over the least any order measured.  It shows how far the pick
depends on where a large group's working set falls against the capacity.

**3. IN_STEP, DRIFT and UNIQUE fitted together on the DRAM bytes**, on the fit half only (fit.py's FIT, its
objective of `--dram`: the mean absolute log ratio), and the result on every kernel of both cards beside the
constants the model has.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from calibrated import CRISP_SPREAD, STAGED, TIMELINE, merged_share_at_identity, solve_merged  # noqa: E402
from fit import DEFAULT_RESULTS, FIT, HELD_OUT, Kernel, least_over, measurements, moved  # noqa: E402
from swzc.model.l2model import DRIFT, EFFECTIVE, IN_STEP, SOFTNESS, UNIQUE, L2Model  # noqa: E402
from swzc.target import hw as hwmodels  # noqa: E402

WITHIN = 0.15
GRID = {"in_step": (0.0, 0.2, 0.4, 0.6, 0.8, 1.0), "drift": (1.0, 2.0, 4.0, 8.0, 16.0), "unique": (0.4, 0.55, 0.7, 0.85, 1.0)}
SOLVED = {"in_step": (0.0, 1.0), "drift": (0.5, 16.0)}
SOLVE_STEPS = 12
FORMS = ("as calibrated", "IN_STEP solved at the original", "DRIFT solved at the original", "IN_STEP = 1 - measured lag",
         "bound")  # part 1's columns; a crisp-wave kernel has the first and the last only
UNIQUES = (0.4, 0.5, 0.6, 0.7, 0.85, 1.0)
SOFTNESSES = (0.25, 0.5)  # the model's, and the one fit.py --dram --least-first chooses
JOINT = {"in_step": (0.6, 0.8, 1.0), "drift": (2.0, 3.0, 4.0, 6.0, 8.0), "unique": (0.5, 0.6, 0.7, 0.85)}
H100_RESULTS = ("bench/results/l2_ncu_h100_shapes.json", "bench/results/l2_ncu_h100_new.json")
H100_KERNELS = ("naive_gemm_32x8", "decoded_sgemm", "bf16_gemm_2d", "naive_gemm_rect", "smem_gemm_bf16")


def solve_to(at, target: float, lo: float, hi: float, steps: int = SOLVE_STEPS) -> float:
    """The x in [lo, hi] at which the monotone `at(x)` crosses `target` (bisection); where it never does, the
    end nearest it."""
    at_lo, at_hi = at(lo), at(hi)
    if (at_lo > target) == (at_hi > target):
        return lo if abs(at_lo - target) <= abs(at_hi - target) else hi
    low = at_lo > target
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if (at(mid) > target) == low else (lo, mid)
    return (lo + hi) / 2


class Scored:
    """One kernel with its calibrated inputs: the model at any constants, scored on its measured orders."""

    def __init__(self, name: str, hw_name: str, timeline: list[dict]) -> None:
        hw = hwmodels.load(hw_name)
        self.k = Kernel(name, [r for r in measurements(DEFAULT_RESULTS.split(",")) if r["kernel"] == name], hw)
        spread = next((r["later_wave_spread"] for r in timeline if r["kernel"] == name and r["order"] == "identity"), None)
        self.lag = next((r["col_pairs_lag"] for r in timeline if r["kernel"] == name and r["order"] == "identity"), None)
        self.crisp = spread is not None and spread < CRISP_SPREAD
        shares = merged_share_at_identity()
        self.merged = solve_merged(self.k, shares[name], self.crisp) if name in STAGED and name in shares else None
        self.identity = next(i for i, r in enumerate(self.k.rows) if r["candidate"] == "identity")
        self.measured = [moved(r) for r in self.k.rows]
        self.blocks = self.k.fp.grid[0] * self.k.fp.grid[1] * self.k.fp.grid[2]

    def model(self, in_step: float = IN_STEP, drift: float = DRIFT, unique: float = UNIQUE) -> L2Model:
        k = self.k
        extra = {"merged": self.merged} if self.merged is not None else {}
        return L2Model(k.fp, k.hw, k.resident, EFFECTIVE, SOFTNESS, in_step, crisp_waves=self.crisp, unique=unique,
                       drift=drift, **extra)

    def predict(self, model: L2Model, only: int | None = None) -> list:
        k = self.k
        pairs = list(zip(k.rows, k.maps)) if only is None else [(k.rows[only], k.maps[only])]
        return [model.predict(r["candidate"], o, k.fp.adapter, k.fp.divisor).scaled(self.blocks / o.shape[0]) for r, o in pairs]

    def score(self, constants: dict[str, float]) -> dict:
        predicted = self.predict(self.model(**constants))
        within = sum(abs(p.dram_bytes / m - 1) <= WITHIN for p, m in zip(predicted, self.measured))
        hit = statistics.mean(abs(p.l2_hit_rate - r["l2_hit_pct"]) for p, r in zip(predicted, self.k.rows))
        return {"constants": {c: round(v, 3) for c, v in constants.items()}, "within_15": within, "hit_mae": round(hit, 2)}

    def solve(self, name: str) -> dict[str, float]:
        """`name` (IN_STEP or DRIFT) so that the DRAM bytes at the original order are the measured ones."""
        at = lambda x: self.predict(self.model(**{name: x}), self.identity)[0].dram_bytes  # noqa: E731
        return {name: solve_to(at, self.measured[self.identity], *SOLVED[name])}


def kernel_report(args: tuple[str, str, list[dict]]) -> dict:
    name, hw_name, timeline = args
    s = Scored(name, hw_name, timeline)
    calibrated, solved_in_step, solved_drift, lagged, bound = FORMS
    forms = {calibrated: s.score({})}
    if not s.crisp:
        forms[solved_in_step] = s.score(s.solve("in_step"))
        forms[solved_drift] = s.score(s.solve("drift"))
        if s.lag is not None and s.lag == s.lag:  # NaN: no pairs one tile row apart
            forms[lagged] = s.score({"in_step": min(1.0, max(0.0, 1.0 - s.lag))})
    grid = [dict(zip(GRID, values)) for values in itertools.product(*GRID.values())] if not s.crisp else [{}]
    scored = [s.score(c) for c in grid]
    forms[bound] = max(scored, key=lambda f: (f["within_15"], -f["hit_mae"]))
    return {"kernel": name, "half": "fit" if name in FIT else "held out", "orders": len(s.measured), "crisp": s.crisp,
            "forms": forms}


def offline_report(args: tuple[str, str, tuple[str, ...]]) -> dict:
    """Parts 2 and 3 for one kernel, with the model as it ranks (no run's inputs)."""
    name, hw_name, results = args
    k = Kernel(name, [r for r in measurements(list(results)) if r["kernel"] == name], hwmodels.load(hw_name))
    measured = [moved(r) for r in k.rows]
    least = {soft: {u: least_over([p.dram_bytes for p in k.predictions(unique=u, softness=soft)], measured) for u in UNIQUES}
             for soft in SOFTNESSES}
    joint = {}
    for in_step, drift, unique in itertools.product(*JOINT.values()):
        predicted = k.predictions(in_step=in_step, unique=unique, drift=drift)
        joint[(in_step, drift, unique)] = {
            "log_error": statistics.mean(abs(math.log(max(p.dram_bytes, 1.0) / m)) for p, m in zip(predicted, measured)),
            "within_15": sum(abs(p.dram_bytes / m - 1) <= WITHIN for p, m in zip(predicted, measured)),
            "hit_mae": statistics.mean(abs(p.l2_hit_rate - r["l2_hit_pct"]) for p, r in zip(predicted, k.rows)),
            "least_over": least_over([p.dram_bytes for p in predicted], measured)}
    return {"kernel": name, "hw": hw_name, "orders": len(measured), "least_over_by_unique": least, "joint": joint}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hw", default="h200")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default="bench/results/l2_dram_bound_h200")
    args = parser.parse_args()
    start = time.perf_counter()
    timeline = json.loads(Path(TIMELINE).read_text())
    h200 = tuple(DEFAULT_RESULTS.split(","))
    offline_args = [(n, "h200", h200) for n in (*FIT, *HELD_OUT)] + [(n, "h100", H100_RESULTS) for n in H100_KERNELS]
    with ProcessPoolExecutor(args.jobs) as pool:
        kernels = list(pool.map(kernel_report, [(n, args.hw, timeline) for n in (*FIT, *HELD_OUT)]))
        offline = list(pool.map(offline_report, offline_args))
    totals = {f: sum(k["forms"].get(f, k["forms"][FORMS[0]])["within_15"] for k in kernels) for f in FORMS}
    orders = sum(k["orders"] for k in kernels)
    fitted = min(itertools.product(*JOINT.values()),
                 key=lambda c: statistics.mean(o["joint"][c]["log_error"] for o in offline if o["kernel"] in FIT and o["hw"] == "h200"))
    now = (IN_STEP, DRIFT, UNIQUE)
    doc = {"command": f"python3 bench/l2/bound.py --hw {args.hw}", "results": DEFAULT_RESULTS.split(","), "grid": GRID,
           "within": WITHIN, "orders": orders, "totals": totals, "kernels": kernels,
           "least_over_by_unique": {f"{o['kernel']} ({o['hw']})": o["least_over_by_unique"] for o in offline},
           "joint_grid": JOINT, "joint_fitted": dict(zip(JOINT, fitted)),
           "joint": {f"{o['kernel']} ({o['hw']})": {"now": o["joint"].get(now), "fitted": o["joint"][fitted]} for o in offline},
           "seconds": round(time.perf_counter() - start, 1)}
    Path(args.out + ".json").write_text(json.dumps(doc, indent=1) + "\n")
    lines = [f"# DRAM bytes within 15 % of ncu's: the model's present form, with per-kernel constants ({args.hw.upper()})", "",
             f"Computed with `python3 bench/l2/bound.py` from the measurements `fit.py` reads ({doc['seconds']:.0f} s); every "
             "form runs with the calibration of `--bench`.  Each cell: orders within 15 % / the kernel's orders, and the hit "
             "rate's mean absolute error in points.  Crisp-wave kernels keep their calibrated form in every column.", "",
             "| kernel | half | " + " | ".join(FORMS) + " |", "|---|---|" + "---:|" * len(FORMS)]
    for k in kernels:
        cells = []
        for f in FORMS:
            form = k["forms"].get(f, k["forms"][FORMS[0]])
            cells.append(f"{form['within_15']}/{k['orders']}, {form['hit_mae']:.1f}"
                         + (" (" + ", ".join(f"{c} {v:g}" for c, v in form["constants"].items()) + ")" if form["constants"] else ""))
        lines.append(f"| {k['kernel']} | {k['half']} | " + " | ".join(cells) + " |")
    lines.append("| all | | " + " | ".join(f"{totals[f]}/{orders}" for f in FORMS) + " |")
    lines += ["", "## The least-bytes order against UNIQUE (the model as it ranks)", "",
              "The measured bytes of the order the model predicts to move the least, over the least measured (today's "
              f"UNIQUE is {UNIQUE:g} and SOFTNESS {SOFTNESS:g})."]
    for soft in SOFTNESSES:
        lines += ["", f"SOFTNESS {soft:g}:", "", "| kernel | card | " + " | ".join(f"{u:g}" for u in UNIQUES) + " |",
                  "|---|---|" + "---:|" * len(UNIQUES)]
        for o in offline:
            lines.append(f"| {o['kernel']} | {o['hw'].upper()} | "
                         + " | ".join(f"{100 * o['least_over_by_unique'][soft][u]:+.0f} %" for u in UNIQUES) + " |")
        lines.append("| within 3 % | | " + " | ".join(
            f"{sum(o['least_over_by_unique'][soft][u] <= 0.03 for o in offline)}/{len(offline)}" for u in UNIQUES) + " |")
    lines += ["", "## IN_STEP, DRIFT and UNIQUE fitted together on the DRAM bytes (fit half only)", "",
              f"Grid {JOINT}; chosen: IN_STEP {fitted[0]:g}, DRIFT {fitted[1]:g}, UNIQUE {fitted[2]:g} (the model's: "
              f"{now[0]:g}, {now[1]:g}, {now[2]:g}).  Each cell: orders within 15 %, hit-rate MAE, the least-bytes pick's excess.", "",
              "| kernel | card | half | the model's constants | fitted together |", "|---|---|---|---:|---:|"]
    cell = lambda j: f"{j['within_15']}/{{n}}, {j['hit_mae']:.1f} pt, {100 * j['least_over']:+.0f} %"  # noqa: E731
    for o in offline:
        half = "fit" if o["kernel"] in FIT and o["hw"] == "h200" else "held out"
        row = [cell(o["joint"][c]).format(n=o["orders"]) if c in o["joint"] else "" for c in (now, fitted)]
        lines.append(f"| {o['kernel']} | {o['hw'].upper()} | {half} | " + " | ".join(row) + " |")
    for card in ("h200", "h100"):
        sums = [sum(o["joint"][c]["within_15"] for o in offline if o["hw"] == card) if all(c in o["joint"] for o in offline) else None
                for c in (now, fitted)]
        total = sum(o["orders"] for o in offline if o["hw"] == card)
        lines.append(f"| all | {card.upper()} | | " + " | ".join("" if v is None else f"{v}/{total}" for v in sums) + " |")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
