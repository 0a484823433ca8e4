#!/usr/bin/env python3
"""Kernels sized at run time, measured at several sizes: what the sweep predicts, what the acceptance loop
accepts, and every order measured at every size swept (the oracle).

    python3 bench/sizes/run_sizes.py --out DIR [--kernels a,b] [--rounds 10] [--hw h100] [--oracle-sizes all|loop|none]
                                     [--family-at-largest] [--orders A,B]

For each kernel below, a runtime-sized variant is written to DIR/src (the suite's programs with their size
`#define`s turned into variables that `main` reads from argv; bench/sizes/kernels holds programs written
that way), then:

1. the sweep (swzc.model.sweep): the sizes, each order's predicted crossover, the gated choice;
2. the acceptance loop, `swzc rewrite --bench` as a user runs it (the wall time is recorded): the accepted
   order and its measured speedup at each size it measured;
3. the oracle: the loop's accepted order and the sweep's chosen one ungated, the model's best three at the largest
   size (these in both division forms, ``/`` and ``/int``) and three orders of the family, each measured at every
   size of the sweep (or the loop's sizes) on the same harness; with --family-at-largest, every other order the
   model ranks, in both forms, at the largest size.

From these: whether the accepted rewrite is slower than the original beyond the noise at any size; its gain
at the largest size against the best order's there (as the oracle measured it, beside the others, and as the
loop did); the predicted crossover of the accepted order against
the measured one (the smallest size from which it is faster beyond the noise at every larger size
measured).  Writes DIR/sizes.json and DIR/sizes.md and prints the Markdown.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from swzc.analysis.context import FileContext
from swzc.analysis.kernels import analyze
from swzc.formulas.swizzles import SwizzleSpec, parse_spec
from swzc.frontend import source
from swzc.model.rank import Ranking
from swzc.model.sweep import kernel_at, measured_sizes
from swzc.pipeline.driver import Options, RunPlan, rank_kernels, rewrite_file, rewrite_source
from swzc.target.hw import load as load_hw
from swzc.verify.bench import Size, SizedBencher
from swzc.verify.harness import gpu_name

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "bench" / "suite" / "kernels"
OWN = Path(__file__).resolve().parent / "kernels"
FAMILY = ("grouped:8", "colmajor", "hilbert:8")

# file -> (the size names its #defines give, the kernel's signature and launches rewritten to take them, or None)
KERNELS = {
    "gemm_naive": (SUITE / "gemm_naive.cu", ("N",), None),
    "gemm_tiled": (SUITE / "gemm_tiled.cu", ("N",), None),
    "gemm_bf16_wmma": (SUITE / "gemm_bf16_wmma.cu", ("M", "N", "K"), "gemm_bf16_wmma"),
    "transpose": (SUITE / "transpose.cu", ("N",), None),
    "gemm_rt": (OWN / "gemm_rt.cu", (), None),
}


def runtime_variant(text: str, names: tuple[str, ...], kernel: str | None) -> str:
    """The program with each size `#define NAME value` turned into a variable `main` sets from argv[1]; with
    `kernel`, that kernel takes the sizes as parameters (its body used the macros) and its launches pass them."""
    for name in names:
        text, count = re.subn(rf"^#define {name} (\d+)\s*$", rf"static int {name} = \1;", text, flags=re.M)
        assert count == 1, f"no #define {name}"
    sets = "".join(f"  if (argc > 1) {name} = atoi(argv[1]);\n" for name in names)
    text, count = re.subn(r"^int main\(\) \{\n", "int main(int argc, char** argv) {\n" + sets, text, flags=re.M)
    assert count == 1 or not names, "no `int main() {`"
    if kernel is not None:
        params = "".join(f", int {name}" for name in names)
        text, count = re.subn(rf"(__global__ void {kernel}\([^)]*)\)", rf"\1{params})", text)
        assert count == 1
        text = re.sub(rf"({kernel}<<<[^;]*?\(([^;]*?))\);", lambda m: m.group(1) + ", " + ", ".join(names) + ");", text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--kernels", default="")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--hw", default="")
    parser.add_argument("--oracle-sizes", choices=("all", "loop", "none"), default="all",
                        help="the oracle at every size swept, at the loop's sizes, or not at all (the loop alone)")
    parser.add_argument("--no-loop", action="store_true", help="skip the acceptance loop (the oracle only)")
    parser.add_argument("--orders", default="", help="the oracle measures these orders only (comma-separated specs)")
    parser.add_argument("--family-at-largest", action="store_true",
                        help="the oracle also measures every order the model ranks, in both division forms, at the largest size")
    args = parser.parse_args()
    out = Path(args.out)
    (out / "src").mkdir(parents=True, exist_ok=True)
    device = gpu_name()
    hw = load_hw(args.hw or ("h100" if "H100" in device else "h200"))
    chosen = [k for k in KERNELS if not args.kernels or k in args.kernels.split(",")]
    records = []
    for name in chosen:
        path, names, kernel = KERNELS[name]
        target = out / "src" / path.name
        target.write_text(runtime_variant(path.read_text(), names, kernel))
        records.append(measure(target, hw, args))
        (out / "sizes.json").write_text(json.dumps({"device": device, "hw": hw.name, "rounds": args.rounds,
                                                    "command": " ".join(sys.argv), "kernels": records}, indent=2))
    text = markdown(records, device, hw.name, " ".join(sys.argv))
    (out / "sizes.md").write_text(text)
    print(text)


def measure(path: Path, hw, args) -> dict:
    src = source.load(str(path))
    ctx = FileContext(src)
    analysis = analyze(ctx)
    ranked = rank_kernels(ctx, analysis, hw, {}, compiler=True)
    index, ranking = next(((i, r) for i, r in ranked.items() if isinstance(r, Ranking) and r.sweep is not None), (None, None))
    record: dict = {"file": path.name}
    if ranking is None:
        record["note"] = "no kernel ranked over sizes: " + "; ".join(str(r) for r in ranked.values())
        return record
    sweep = ranking.sweep
    kernel = analysis.kernels[index]
    record.update(kernel=kernel.name, names=list(sweep.names), chosen=sweep.chosen and sweep.chosen.name,
                  predicted_crossover=sweep.crossover, reason=sweep.reason,
                  predicted={pt.size: {"grid": list(pt.grid), "data_bytes": pt.data_bytes,
                                       "identity": pt.ranking.identity.l2_hit_rate,
                                       **{p.candidate: p.l2_hit_rate for p in pt.ranking.predictions[:8]}} for pt in sweep.points},
                  crossovers={k: v for k, v in sweep.crossovers})
    if not args.no_loop:
        started = time.perf_counter()
        result = rewrite_file(str(path), Options(hw=hw, bench=True, rounds=args.rounds, compile=True))
        record["loop_seconds"] = round(time.perf_counter() - started, 1)
        bench = next((b for b in result.bench if b.kernel == kernel.name), None)
        outcome = next(o for o in result.outcomes if o.name == kernel.name)
        record["loop"] = {"status": outcome.status, "swizzle": outcome.swizzle, "reason": outcome.chosen_by or outcome.reason,
                          "attempts": [{"candidate": a.candidate, "accepted": a.accepted, "speedup": a.speedup, "reason": a.reason,
                                        "seconds": a.seconds} for a in (bench.attempts if bench else ())],
                          "by_size": [{"size": a.size, "candidate": a.candidate, "speedup": a.speedup, "lower": a.lower_bound,
                                       "upper": a.upper_bound, "noise": a.noise, "status": a.status, "baseline_ms": a.baseline_ms}
                                      for a in (bench.by_size if bench else ())]}
    if args.oracle_sizes == "none":
        return record
    sizes = [pt.size for pt in sweep.points] if args.oracle_sizes == "all" else measured_sizes(sweep)
    orders: list[SwizzleSpec] = []
    loop = record.get("loop", {})
    if loop.get("status") == "rewritten" and loop.get("swizzle"):  # the accepted order, measured beside the others
        orders.append(parse_spec(loop["swizzle"]).gated(0))
    if sweep.chosen is not None:
        orders.append(sweep.chosen.ungated)
    orders += [p.formula for p in ranking.predictions[:3] if isinstance(p.formula, SwizzleSpec) and not p.formula.is_identity]
    # the model's orders in both division forms too (swzc.formulas.divide): the best built-in is the best of either
    orders += [o.divided(True) for o in orders if o.divides(kernel.adapter)]
    orders += [parse_spec(f) for f in FAMILY]
    orders = list(dict.fromkeys(orders))
    if args.orders:
        orders = list(dict.fromkeys(parse_spec(o) for o in args.orders.split(",")))
    at = [Size(size, kernel_at(ctx, kernel, sweep.bindings(size))) for size in sizes]

    def rewrite_one(formula, index: int = index) -> bytes:
        return rewrite_source(ctx, analysis, Options(hw=hw, compile=False), RunPlan(only={index: formula})).new

    started = time.perf_counter()
    rows = oracle(ctx, at, rewrite_one, hw, args.rounds, orders)
    record["oracle_seconds"] = round(time.perf_counter() - started, 1)
    record["oracle"] = rows
    if args.family_at_largest:
        family = [p.formula for p in ranking.predictions if isinstance(p.formula, SwizzleSpec) and not p.formula.is_identity]
        family += [o.divided(True) for o in family if o.divides(kernel.adapter)]
        rest = [o for o in dict.fromkeys(family) if o not in orders]
        started = time.perf_counter()
        record["family_at_largest"] = oracle(ctx, at[-1:], rewrite_one, hw, args.rounds, rest)
        record["family_seconds"] = round(time.perf_counter() - started, 1)
    record["verdicts"] = verdicts(record, hw)
    return record


def oracle(ctx, at: list[Size], rewrite_one, hw, rounds: int, orders: list[SwizzleSpec]) -> list[dict]:
    """Each order measured at every one of these sizes against the original (built in one batch)."""
    bencher = SizedBencher(ctx, at, rewrite_one, hw, rounds=rounds, every_size=True)
    try:
        bencher.prebuild(orders)
        for formula in orders:
            bencher.measure(formula, None)
    finally:
        bencher.close()
    return [{"size": a.size, "candidate": a.candidate, "speedup": a.speedup, "lower": a.lower_bound, "upper": a.upper_bound,
             "noise": a.noise, "status": a.status, "baseline_ms": a.baseline_ms, "seconds": round(a.seconds, 1)}
            for a in bencher.by_size]


def measured_crossover(rows: list[dict], candidate: str) -> int | None:
    """The smallest size from which `candidate` is faster beyond the noise at every larger size measured."""
    mine = sorted((r["size"], r["status"] == "accepted") for r in rows if r["candidate"] == candidate)
    start = None
    for size, faster in reversed(mine):
        if not faster:
            break
        start = size
    return start


def verdicts(record: dict, hw) -> dict:
    rows = record["oracle"]
    largest = max(r["size"] for r in rows)
    at_largest = [r for r in rows + record.get("family_at_largest", []) if r["size"] == largest and r["speedup"]]
    best = max(at_largest, key=lambda r: r["speedup"], default=None)
    loop = record.get("loop", {})
    accepted = loop.get("swizzle") if loop.get("status") == "rewritten" else None
    mine = [r for r in loop.get("by_size", []) if r["candidate"] == accepted]
    form = parse_spec(accepted) if accepted else None
    # the sweep's chosen order ungated, in the accepted order's division form where the oracle ran that form
    plain = ""
    if record.get("chosen"):
        chosen = parse_spec(record["chosen"]).gated(0)
        plain = chosen.divided(form is not None and form.integer).name
        plain = plain if plain in {r["candidate"] for r in rows} else chosen.name
    found = measured_crossover(rows, plain) if plain else None
    gain = next((r["speedup"] for r in mine if r["size"] == max(x["size"] for x in mine)), None) if mine else None
    beside = next((r["speedup"] for r in at_largest if r["candidate"] == (form.gated(0).name if form else None)), None)

    # where the accepted order's gate switches it on: the smallest size whose grid has that many tiles
    gate = form.gate if form is not None else 0
    tiles = sorted((int(size), pt["grid"][0] * pt["grid"][1]) for size, pt in record.get("predicted", {}).items())
    gated_from = next((size for size, n in tiles if n >= gate), None) if form is not None else None
    accepted_found = measured_crossover(rows, form.gated(0).name) if form is not None else None

    def ratio(a: int | None, b: int | None) -> float | None:
        return None if not (a and b) else round(max(a, b) / min(a, b), 2)

    def share(speedup: float | None) -> float | None:
        return None if not (speedup and best and best["speedup"] > 1) else round((speedup - 1) / (best["speedup"] - 1), 3)
    return {
        "accepted": accepted,
        "slower_at": [r["size"] for r in mine if r["status"] == "slower"],
        "accepted_speedups": {r["size"]: r["speedup"] for r in mine},
        "best_at_largest": best and {"candidate": best["candidate"], "speedup": best["speedup"], "size": largest},
        # its gain against the best's: as the oracle measured it (the same rounds as the others), and as the loop did
        "share_of_best_gain": share(beside),
        "share_of_best_gain_in_the_loop": share(gain),
        "predicted_crossover": record.get("predicted_crossover"),
        "crossover_of": plain or None,
        "measured_crossover": found,
        "crossover_ratio": ratio(found, record.get("predicted_crossover")),
        # the accepted order: the size its gate switches it on at (its predicted crossover, after calibration), and
        # the smallest size from which the oracle measured it faster at every larger size
        "accepted_gated_from": gated_from,
        "accepted_measured_crossover": accepted_found,
        "accepted_crossover_ratio": ratio(gated_from, accepted_found),
        "l2_bytes": hw.l2_bytes,
    }


def markdown(records: list[dict], device: str, hw: str, command: str) -> str:
    lines = [f"# Kernels sized at run time, measured at several sizes ({device}, model {hw})", "",
             f"Command: `{command}`", ""]
    for r in records:
        lines += [f"## {r['file']}: {r.get('kernel', '')}", ""]
        if "note" in r:
            lines += [r["note"], ""]
            continue
        if "oracle" not in r:  # the loop alone
            lines += [f"Swept: {' = '.join(r['names'])}; predicted: {r['reason']}", "",
                      f"Loop (`swzc rewrite --bench`, {r['loop_seconds']} s): {r['loop']['status']}"
                      f"{' with ' + r['loop']['swizzle'] if r['loop']['swizzle'] else ''}: {r['loop']['reason']}", ""]
            continue
        lines += [f"Swept: {' = '.join(r['names'])}; predicted: {r['reason']}", ""]
        if "loop" in r:
            lines += [f"Loop (`swzc rewrite --bench`, {r['loop_seconds']} s): {r['loop']['status']}"
                      f"{' with ' + r['loop']['swizzle'] if r['loop']['swizzle'] else ''}: {r['loop']['reason']}", ""]
        sizes = sorted({x["size"] for x in r["oracle"]})
        names = list(dict.fromkeys(x["candidate"] for x in r["oracle"]))
        cell = {(x["size"], x["candidate"]): x for x in r["oracle"]}
        lines += ["| size | data / L2 | " + " | ".join(names) + " |", "|---:|---:|" + "---:|" * len(names)]
        for size in sizes:
            data = r["predicted"].get(size, r["predicted"].get(str(size), {})).get("data_bytes")
            ratio = f"{data / r['verdicts']['l2_bytes']:.1f}" if data else "?"
            row = []
            for n in names:
                x = cell.get((size, n))
                row.append("–" if x is None or x["speedup"] is None else f"{x['speedup']:.3f}" + (
                    " +" if x["status"] == "accepted" else " −" if x["status"] == "slower" else ""))
            lines.append(f"| {size} | {ratio} | " + " | ".join(row) + " |")
        if r.get("family_at_largest"):
            ranked = sorted((x for x in r["family_at_largest"] if x["speedup"]), key=lambda x: -x["speedup"])
            lines += ["", f"Every other order the model ranks, at {max(sizes)} ({r['family_seconds']} s): " + ", ".join(
                f"{x['candidate']} {x['speedup']:.3f}" + (" +" if x["status"] == "accepted" else " −" if x["status"] == "slower" else "")
                for x in ranked)]
        v = r["verdicts"]
        lines += ["", "(+ faster beyond the noise, − slower beyond it; speedup over the original, median of the rounds)", "",
                  f"- accepted: {v['accepted']}; measured {v['accepted_speedups']}; slower at: {v['slower_at'] or 'none'}",
                  f"- best at the largest size: {v['best_at_largest']}; share of its gain: {v['share_of_best_gain']} as the oracle "
                  f"measured the accepted order, {v['share_of_best_gain_in_the_loop']} as the loop did",
                  f"- crossover of the sweep's chosen order ({v['crossover_of']}): predicted {v['predicted_crossover']}, "
                  f"measured {v['measured_crossover']} (ratio {v['crossover_ratio']})",
                  f"- the accepted order: gated from {v['accepted_gated_from']}, measured faster from {v['accepted_measured_crossover']} "
                  f"(ratio {v['accepted_crossover_ratio']})",
                  f"- oracle {r['oracle_seconds']} s", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
