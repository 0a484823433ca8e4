#!/usr/bin/env python3
"""Predicted (swzc's L2 model) against measured (ncu on the H200) L2 hit rate and DRAM bytes.

    python3 bench/l2/compare.py [--results bench/results/l2_ncu_h200.json] [--hw h200] [--out bench/results/l2_model_vs_ncu_h200.md]

Reads the measured table, predicts every (kernel, candidate) with the model swzc ranks with, and writes a
Markdown table with the mean absolute error of the hit rate and, per kernel, the model's top pick
against the best measured candidate.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from swzc import hw as hwmodels
from swzc import source
from swzc.analysis import analyze
from swzc.rank import Ranking, rank
from swzc.swizzles import parse_spec

from make_variants import kernel_source  # noqa: E402  (bench/l2 is the script's folder)

HERE = Path(__file__).resolve().parent


def predict_all(results: list[dict], hw_name: str) -> dict[tuple[str, str], object]:
    hw = hwmodels.load(hw_name)
    out = {}
    for kernel in sorted({r["kernel"] for r in results}):
        path, text = kernel_source(kernel)
        src = source.load_bytes(str(path), text.encode())
        (info,) = [k for k in analyze(src).kernels if k.name == kernel]
        specs = [parse_spec(r["candidate"]) for r in results if r["kernel"] == kernel]
        ranking = rank(src, info, hw, specs=specs)
        assert isinstance(ranking, Ranking), ranking
        out.update(((kernel, p.candidate), p) for p in ranking.predictions)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", default="bench/results/l2_ncu_h200.json")
    parser.add_argument("--hw", default="h200")
    parser.add_argument("--out", default="bench/results/l2_model_vs_ncu_h200.md")
    args = parser.parse_args()
    doc = json.loads(Path(args.results).read_text())
    results = [r for r in doc["results"] if r.get("ok", True) and r.get("l2_hit_pct") is not None]
    start = time.perf_counter()
    predicted = predict_all(results, args.hw)
    elapsed = time.perf_counter() - start
    lines = [f"# swzc's L2 model against ncu on the {doc.get('device', 'GPU')}", "",
             f"Measured {doc.get('date', '')} with: " + "; ".join(f"`{c}`" for c in doc.get("commands", [])) + ".",
             f"Predicted with `python3 bench/l2/compare.py --hw {args.hw}` ({elapsed:.1f} s for {len(results)} predictions).", "",
             "| kernel | candidate | measured L2 hit % | predicted L2 hit % | error (pt) | measured DRAM read MB | predicted DRAM MB (read + write) |",
             "|---|---|---:|---:|---:|---:|---:|"]
    errors, per_kernel = [], {}
    for r in results:
        p = predicted[r["kernel"], r["candidate"]]
        err = p.l2_hit_rate - r["l2_hit_pct"]
        errors.append(abs(err))
        per_kernel.setdefault(r["kernel"], []).append((r, p))
        lines.append(f"| {r['kernel']} | {r['candidate']} | {r['l2_hit_pct']:.1f} | {p.l2_hit_rate:.1f} | {err:+.1f} | "
                     f"{r['dram_read_bytes'] / 1e6:,.0f} | {p.dram_bytes / 1e6:,.0f} |")
    lines += ["", "| kernel | MAE (pt) | model's pick (by predicted hit rate) | its measured hit % | best measured | best measured hit % | pick within 3 pt |",
              "|---|---:|---|---:|---|---:|---|"]
    for kernel, rows in per_kernel.items():
        mae = statistics.mean(abs(p.l2_hit_rate - r["l2_hit_pct"]) for r, p in rows)
        pick_r, _ = min(rows, key=lambda rp: (-rp[1].l2_hit_rate, rp[1].dram_bytes))
        best_r = max(rows, key=lambda rp: rp[0]["l2_hit_pct"])[0]
        ok = best_r["l2_hit_pct"] - pick_r["l2_hit_pct"] <= 3.0
        lines.append(f"| {kernel} | {mae:.1f} | {pick_r['candidate']} | {pick_r['l2_hit_pct']:.1f} | {best_r['candidate']} | "
                     f"{best_r['l2_hit_pct']:.1f} | {'yes' if ok else 'no'} |")
    lines += ["", f"Mean absolute error over all {len(errors)} measurements: {statistics.mean(errors):.1f} points "
              f"(max {max(errors):.1f})."]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-len(per_kernel) - 4:]))


if __name__ == "__main__":
    main()
