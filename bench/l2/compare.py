#!/usr/bin/env python3
"""Predicted (swzc's L2 model) against measured (ncu on the H200) L2 hit rate and DRAM bytes.

    python3 bench/l2/compare.py [--results A.json,B.json] [--times bench/results/l2_times_h200.json] [--hw h200]
                                [--out bench/results/l2_model_vs_ncu_h200.md]
    python3 bench/l2/compare.py --predict bench/l2/variants/MANIFEST.json --out PREDICTED.json   # before a GPU run

Reads the measured tables (a later file's row for a (kernel, order) pair already read is ignored), predicts
every (kernel, order) with the model swzc ranks with (the residency from the compiler, as `swzc rewrite`
has it), and writes a Markdown table with the mean absolute error of the hit rate per kernel, marked as
in the half the model's constants were fitted on (bench/l2/fit.py) or held out; per kernel, the model's
top pick against the best measured hit rate; and, where the orders were timed, whether the fastest is
among the model's top four.  With --lrc (ncu's raw page from `LRC=1 bench/l2/l1_probe.sh`), it adds the
share of read sectors the L2 request coalescer merged against the model's.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import time
from pathlib import Path

from swzc.target import hw as hwmodels
from swzc.frontend import source
from swzc.analysis.kernels import analyze
from swzc.model.rank import Ranking, candidates, measuring_order, rank
from swzc.formulas.swizzles import parse_spec
from swzc.analysis.context import FileContext

from fit import DEFAULT_RESULTS, FIT, measurements, moved  # noqa: E402  (bench/l2 is the script's folder)
from make_variants import kernel_source  # noqa: E402

HERE = Path(__file__).resolve().parent


def predict_all(results: list[dict], hw_name: str) -> tuple[dict[tuple[str, str], object], dict[str, set[str]]]:
    """Every measured (kernel, order)'s prediction, and per kernel the orders swzc itself ranks on this GPU
    (the measured tables also hold a few orders from an earlier fixed list, xcd:8 on a GPU of one die)."""
    hw = hwmodels.load(hw_name)
    out, family = {}, {}
    for kernel in sorted({r["kernel"] for r in results}):
        path, text = kernel_source(kernel)
        src = source.load_bytes(str(path), text.encode())
        ctx = FileContext(src)
        (info,) = [k for k in analyze(ctx).kernels if k.name == kernel]
        specs = [parse_spec(r["candidate"]) for r in results if r["kernel"] == kernel]
        ranking = rank(ctx, info, hw, specs=specs, compiler=True)
        assert isinstance(ranking, Ranking), ranking
        out.update(((kernel, p.candidate), p) for p in ranking.predictions)
        family[kernel] = {spec.name for spec in candidates(ranking.footprint.adapter, ranking.footprint.tiles, hw)}
    return out, family


def _spreads(runs: list[dict]) -> dict[str, float]:
    """Per kernel, the median over its orders of (slowest run - fastest run) / median run, in percent."""
    by_order: dict[tuple[str, str], list[float]] = {}
    for run in runs:
        by_order.setdefault((run["kernel"], run["candidate"]), []).append(run["ms"])
    per_kernel: dict[str, list[float]] = {}
    for (kernel, _), ms in by_order.items():
        if len(ms) > 1:
            per_kernel.setdefault(kernel, []).append(100 * (max(ms) - min(ms)) / statistics.median(ms))
    return {kernel: statistics.median(values) for kernel, values in per_kernel.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", default=DEFAULT_RESULTS)
    parser.add_argument("--times", default="bench/results/l2_times_h200.json")
    parser.add_argument("--hw", default="h200")
    parser.add_argument("--out", default="bench/results/l2_model_vs_ncu_h200.md")
    parser.add_argument("--lrc", default="bench/results/lrc_probe_h200.csv,bench/results/lrc_probe_tiled_h200.csv,"
                        "bench/results/lrc_fabric_probe_async_h200.csv")
    parser.add_argument("--predict", metavar="MANIFEST", help="only predict every variant of a manifest (before it is "
                        "measured) and write the predictions as JSON to --out")
    args = parser.parse_args()
    if args.predict:
        variants = json.loads(Path(args.predict).read_text())["variants"]
        start = time.perf_counter()
        predicted, _ = predict_all([{"kernel": v["kernel"], "candidate": v["candidate"]} for v in variants], args.hw)
        rows = [{"kernel": k, "candidate": c, "l2_hit_pct": p.l2_hit_rate, "dram_bytes": p.dram_bytes, "lookups": p.requests,
                 "merged": p.merged, "fabric": p.fabric} for (k, c), p in predicted.items()]
        doc = {"command": f"python3 bench/l2/compare.py --predict {args.predict} --hw {args.hw} --out {args.out}",
               "seconds": round(time.perf_counter() - start, 1), "predictions": rows}
        Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"{len(rows)} predictions -> {args.out}")
        return
    paths = args.results.split(",")
    docs = [json.loads(Path(p).read_text()) for p in paths if Path(p).is_file()]
    results = measurements(paths)
    timing = json.loads(Path(args.times).read_text()) if Path(args.times).is_file() else {"median_ms": {}, "runs": []}
    times = timing["median_ms"]
    spreads = _spreads(timing["runs"])
    start = time.perf_counter()
    predicted, family = predict_all(results, args.hw)
    elapsed = time.perf_counter() - start
    commands = [c for doc in docs for c in doc.get("commands", [])]
    lines = [f"# swzc's L2 model against ncu on the {docs[0].get('device', 'GPU')}", "",
             "Measured with: " + "; ".join(f"`{c}`" for c in commands) + ".", "",
             f"Timed with: {', '.join(f'`{c}`' for c in json.loads(Path(args.times).read_text())['commands'])}." if times else "",
             f"Predicted with `python3 bench/l2/compare.py --hw {args.hw}` ({elapsed:.1f} s for {len(results)} predictions), "
             "the constants from `python3 bench/l2/fit.py` (bench/results/l2_fit_h200.json).", "",
             "| kernel | order | measured L2 hit % | predicted L2 hit % | error (pt) | measured DRAM read MB | predicted DRAM MB (read + write) | time ms |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    errors, per_kernel = [], {}
    for r in sorted(results, key=lambda r: (r["kernel"], -predicted[r["kernel"], r["candidate"]].l2_hit_rate)):
        p = predicted[r["kernel"], r["candidate"]]
        err = p.l2_hit_rate - r["l2_hit_pct"]
        errors.append(abs(err))
        per_kernel.setdefault(r["kernel"], []).append((r, p))
        ms = times.get(r["kernel"], {}).get(r["candidate"])
        lines.append(f"| {r['kernel']} | {r['candidate']} | {r['l2_hit_pct']:.1f} | {p.l2_hit_rate:.1f} | {err:+.1f} | "
                     f"{r['dram_read_bytes'] / 1e6:,.0f} | {p.dram_bytes / 1e6:,.0f} | {'' if ms is None else f'{ms:.3f}'} |")
    lines += ["", "| kernel | constants | orders | MAE (pt) | model's pick | its measured hit % | best measured | best measured hit % | "
              "pick within 3 pt | fastest measured (speed-up over identity) | its rank by the model | "
              "fastest of the model's top 4: time over the fastest | fastest of the 4 it times first: time over the fastest | "
             "runs' spread (median) |",
              "|---|---|---:|---:|---|---:|---|---:|---|---|---:|---|---|---:|"]
    for kernel, rows in per_kernel.items():
        mae = statistics.mean(abs(p.l2_hit_rate - r["l2_hit_pct"]) for r, p in rows)
        by_model = sorted(rows, key=lambda rp: (-rp[1].l2_hit_rate, rp[1].dram_bytes))
        pick_r = by_model[0][0]
        best_r = max(rows, key=lambda rp: rp[0]["l2_hit_pct"])[0]
        ok = best_r["l2_hit_pct"] - pick_r["l2_hit_pct"] <= 3.0
        fastest = place = top = timed_first = spread = ""
        timed = times.get(kernel, {})
        if timed:
            name = min((r["candidate"] for r, _ in rows if r["candidate"] in timed), key=timed.get)
            fastest = f"{name} ({timed['identity'] / timed[name]:.3f}x)" if "identity" in timed else name
            place = str(1 + [r["candidate"] for r, _ in by_model].index(name))
            four = [r["candidate"] for r, _ in by_model[:4] if r["candidate"] in timed]
            if four:
                quick = min(four, key=timed.get)
                top = f"{quick} +{100 * (timed[quick] / timed[name] - 1):.2f} %"
            ours = measuring_order([p for r, p in by_model if r["candidate"] in family[kernel]])
            first = [p.candidate for p in ours if p.candidate != "identity" and p.candidate in timed][:4]
            if first:
                quick = min(first, key=timed.get)
                timed_first = f"{quick} +{100 * (timed[quick] / timed[name] - 1):.2f} % ({', '.join(first)})"
            spread = f"{spreads.get(kernel, 0.0):.2f} %"
        lines.append(f"| {kernel} | {'fitted' if kernel in FIT else 'held out'} | {len(rows)} | {mae:.1f} | {pick_r['candidate']} | "
                     f"{pick_r['l2_hit_pct']:.1f} | {best_r['candidate']} | {best_r['l2_hit_pct']:.1f} | {'yes' if ok else 'no'} | "
                     f"{fastest} | {place} | {top} | {timed_first} | {spread} |")
    lines += ["", f"Mean absolute error over all {len(errors)} measurements: {statistics.mean(errors):.1f} points "
              f"(max {max(errors):.1f})."]
    lines += _dram_table(per_kernel)
    lrc = [path for path in args.lrc.split(",") if Path(path).is_file()]
    if lrc:
        lines += _merged_table(lrc, predicted)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-len(per_kernel) - 4:]))


def _dram_table(per_kernel: dict[str, list[tuple[dict, object]]], within: float = 0.15, pick: float = 0.03) -> list[str]:
    """Per kernel: predicted DRAM bytes (read misses + writes) against ncu's `dram__bytes_read.sum` +
    `dram__bytes_write.sum`, and the order the model predicts to move the fewest bytes against the order
    measured to move the fewest."""
    lines = ["", "## DRAM bytes", "",
             "Measured: ncu's `dram__bytes_read.sum` + `dram__bytes_write.sum`. Predicted: the model's read misses and "
             "writes, in bytes. Error: predicted / measured - 1. The model's least-bytes order: the order it predicts "
             "to move the fewest bytes (identity on a tie); its measured bytes over the least measured of any order. The "
             "model's pick: the order its ranking puts first (by predicted L2 hit rate), against the same least.", "",
             f"| kernel | constants | orders | within {within:.0%} | median error | worst error (order) | model's least-bytes "
             f"order | measured least-bytes order | least-bytes order over the least | within {pick:.0%} | model's pick | "
             f"pick over the least |",
             "|---|---|---:|---:|---:|---|---|---|---:|---|---|---:|"]
    counts = {"all": [0, 0], "held": [0, 0]}  # (within, orders)
    for kernel, rows in per_kernel.items():
        errs = [(p.dram_bytes / max(1, moved(r)) - 1, r["candidate"]) for r, p in rows]
        worst = max(errs, key=lambda e: abs(e[0]))
        least = min((r for r, _ in rows), key=moved)
        ours = min(rows, key=lambda rp: (rp[1].dram_bytes, rp[0]["candidate"] != "identity"))[0]
        ranked = min(rows, key=lambda rp: (-rp[1].l2_hit_rate, rp[1].dram_bytes))[0]
        over = moved(ours) / max(1, moved(least)) - 1
        good = sum(abs(e) <= within for e, _ in errs)
        for half in ("all",) if kernel in FIT else ("all", "held"):
            counts[half][0] += good
            counts[half][1] += len(errs)
        lines.append(f"| {kernel} | {'fitted' if kernel in FIT else 'held out'} | {len(rows)} | {good} | "
                     f"{statistics.median(e for e, _ in errs):+.1%} | {worst[0]:+.1%} ({worst[1]}) | {ours['candidate']} | "
                     f"{least['candidate']} | {over:+.1%} | {'yes' if over <= pick else 'no'} | {ranked['candidate']} | "
                     f"{moved(ranked) / max(1, moved(least)) - 1:+.1%} |")
    lines += ["", f"Within {within:.0%} of the measured DRAM bytes: {counts['all'][0]} of {counts['all'][1]} (kernel, order) "
              f"pairs; held-out kernels: {counts['held'][0]} of {counts['held'][1]}."]
    return lines


def ncu_page(path: str | Path, prefixes: tuple[str, ...] = ("lrc__",)) -> dict[str, dict[str, float]]:
    """ncu's raw page as l1_probe.sh writes it (a `### variant` line, then the header and a row), as the
    numeric metrics whose names start with one of `prefixes`, by variant."""
    rows, name, header = {}, "", None
    for line in Path(path).read_text().splitlines():
        if line.startswith("### "):
            name, header = line[4:].strip(), None
            continue
        row = next(csv.reader(io.StringIO(line)), [])
        if row and row[0] == "ID":
            header = row
        elif header and row and row[0].isdigit():
            values = {k: v.replace(",", "") for k, v in zip(header, row) if k.startswith(prefixes)}
            rows[name] = {k: float(v) for k, v in values.items() if v.replace(".", "", 1).isdigit()}
    return rows


def _merged_table(paths: list[str], predicted: dict) -> list[str]:
    """The share of read sectors the L2 request coalescer merged (ncu) against the model's merged reads."""
    lines = ["", f"## Reads merged before L2 ({', '.join(f'`{p}`' for p in paths)})", "",
             "Measured: `lrc__request_sectors_op_read_coalescing_achieved_type_hardware` over "
             "`lrc__xbar2gpc_sectors_op_read` (the sectors L1 received). Predicted: the model's merged reads over the "
             "footprint's reads; it merges only in kernels that stage their reads through shared memory.", "",
             "| kernel | order | measured merged % | predicted merged % |", "|---|---|---:|---:|"]
    for variant, counters in (item for path in paths for item in ncu_page(path).items()):
        kernel, _, stem = variant.partition("__")
        p = predicted.get((kernel, stem.replace("-", "+").replace("_", ":")))
        delivered = counters.get("lrc__xbar2gpc_sectors_op_read.sum")
        merged = counters.get("lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum")
        if p is None or not delivered or merged is None:
            continue
        lines.append(f"| {kernel} | {p.candidate} | {100 * merged / delivered:.1f} | {100 * p.merged / max(1, p.reads):.1f} |")
    return lines


if __name__ == "__main__":
    main()
