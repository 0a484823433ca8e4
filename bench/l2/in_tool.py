#!/usr/bin/env python3
"""The loop's own calibration (swzc --bench, swzc.verify.calibrate) run on bench/l2's kernels, then the model with
what it measured against every order ncu measured on the same card.

    python3 bench/l2/in_tool.py run --out DIR [KERNEL ...]      # on the GPU machine: DIR/in_tool_CARD.json
    python3 bench/l2/in_tool.py compare DIR/in_tool_CARD.json   # here: bench/results/calibration_in_tool_CARD.md

`run` takes each kernel through what `swzc rewrite --bench` does before its first candidate: the original, the
harness and the instrumented copy built in one batch, one launch of the copy read back, ncu on the original, and
swzc.model.calibration.calibrate on what they gave (no candidate is built or timed).  `compare` ranks each kernel's
measured orders with the model as it ranks offline and with those inputs, and reports the hit-rate error over the
orders other than identity (the run the inputs come from), on the card the orders were measured on: the H200's
(bench/results/l2_ncu_h200*.json) or the H100's (bench/results/l2_ncu_h100_shapes.json).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from calibrated import errors, pick_gap  # noqa: E402
from fit import DEFAULT_RESULTS, Kernel, mae, measurements  # noqa: E402
from make_variants import KERNELS, kernel_source  # noqa: E402

from swzc.analysis.context import FileContext  # noqa: E402
from swzc.analysis.kernels import analyze  # noqa: E402
from swzc.frontend.source import load_bytes  # noqa: E402
from swzc.model.calibration import calibrate  # noqa: E402
from swzc.model.l2model import L2Model  # noqa: E402
from swzc.model.rank import identity_order, survey  # noqa: E402
from swzc.target import hw as hwmodels  # noqa: E402
from swzc.verify.bench import Bencher  # noqa: E402
from swzc.verify.harness import gpu_name  # noqa: E402

RESULTS = {"h200": DEFAULT_RESULTS.split(","), "h100": ["bench/results/l2_ncu_h100_shapes.json"]}


def card_of(name: str) -> str:
    return "h200" if "H200" in name else "h100"


def run(kernels: list[str], out: Path) -> None:
    card = gpu_name()
    hw = hwmodels.load(card_of(card))
    found = []
    with tempfile.TemporaryDirectory(prefix="in-tool-") as folder:
        for name in kernels:
            started = time.perf_counter()
            _, text = kernel_source(name)
            path = Path(folder) / f"{name}.cu"
            path.write_text(text)
            ctx = FileContext(load_bytes(str(path), text.encode()))
            analysis = analyze(ctx)
            index = next(i for i, k in enumerate(analysis.kernels) if k.name == name)
            kernel = analysis.kernels[index]
            fp, running, resident = survey(ctx, kernel, hw, compiler=True)
            loop = Bencher(ctx, analysis, index, lambda formula: ctx.src.data, hw, rounds=3)
            try:
                seen = loop.calibrate([], hw.l2_request_coalescer and fp.staged)
            finally:
                loop.close()
            got = calibrate(fp, hw, resident, identity_order(fp), seen.spread, seen.merged_share, seen.notes, seen.running,
                            running.compiled)
            found.append({"kernel": name, **got.to_json(), "model_resident": resident, "hit_rate": seen.hit_rate,
                          "dram_bytes": seen.dram_bytes, "seconds": round(time.perf_counter() - started, 1)})
            print(name, got.text(), f"{found[-1]['seconds']} s", flush=True)
            out.mkdir(parents=True, exist_ok=True)  # after each kernel: a run cut short keeps what it measured
            target = out / f"in_tool_{card_of(card)}.json"
            target.write_text(json.dumps({"card": card, "command": "python3 bench/l2/in_tool.py run --out DIR " +
                                          " ".join(kernels), "kernels": found}, indent=1) + "\n")


def compare(path: Path, out: Path | None) -> None:
    doc = json.loads(path.read_text())
    short = card_of(doc["card"])
    hw = hwmodels.load(short)
    rows = measurements(RESULTS[short])
    out = out or Path(f"bench/results/calibration_in_tool_{short}.md")
    lines = [f"# The loop's calibration on bench/l2's kernels ({doc['card']})", "",
             f"Measured with `{doc['command']}` on the GPU machine (file `{path.name}`, copied into bench/results/), "
             f"compared with `python3 bench/l2/in_tool.py compare bench/results/{path.name}`.  Each kernel: what the "
             "original's instrumented run and its ncu run measured, what the model took from them, and the L2 hit-rate "
             "error (mean absolute, points) over the orders ncu measured on this card, identity left out, as the model "
             "ranks offline and with those inputs; and how far the model's top pick's measured hit rate is from the best "
             "measured.", "",
             "| kernel | later waves' spread | blocks at once (model's) | merged share | model ran with | MAE offline | "
             "MAE calibrated | pick's gap offline | calibrated | seconds |",
             "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    worst = []
    for r in doc["kernels"]:
        mine = [m for m in rows if m["kernel"] == r["kernel"]]
        offline = calibrated = gap_offline = gap_calibrated = "–"
        used = ", ".join(filter(None, [f"{r['resident']:,} at once" if r["resident"] else "",
                                       "crisp waves" if r["crisp_waves"] else "",
                                       f"merged {r['merged']:.3f}" if r["merged"] is not None else ""])) or "its defaults"
        if mine and any(m["candidate"] == "identity" for m in mine):
            k = Kernel(r["kernel"], mine, hw)
            got = calibrate(k.fp, hw, k.resident, identity_order(k.fp), r["spread"], r["merged_share"], r["notes"],
                            r["running"], k.residency.compiled)
            plain = L2Model(k.fp, hw, k.resident)
            given = L2Model(k.fp, hw, got.resident or k.resident, **got.model_args())
            a, b = mae(errors(k, plain)), mae(errors(k, given))
            worst.append((b, r["kernel"]))
            offline, calibrated = f"{a:.1f}", f"{b:.1f}"
            gap_offline, gap_calibrated = f"{pick_gap(k, plain):.1f}", f"{pick_gap(k, given):.1f}"
        spread = "–" if r["spread"] is None else f"{r['spread']:.2f}"
        share = "–" if r["merged_share"] is None else f"{100 * r['merged_share']:.1f} %"
        at_once = "–" if r["running"] is None else f"{r['running']:,} ({r['model_resident']:,})"
        lines.append(f"| {r['kernel']} | {spread} | {at_once} | {share} | {used} | {offline} | {calibrated} | "
                     f"{gap_offline} | {gap_calibrated} | {r['seconds']} |")
    if worst:
        top = max(worst)
        lines += ["", f"Largest calibrated error over the {len(worst)} kernels with orders measured on this card: "
                      f"{top[0]:.1f} points ({top[1]})."]
    notes = [(r["kernel"], n) for r in doc["kernels"] for n in r["notes"]]
    if notes:
        lines += ["", "What was not measured:", ""] + [f"- {k}: {n}" for k, n in notes]
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("kernels", nargs="*")
    c = sub.add_parser("compare")
    c.add_argument("json", type=Path)
    c.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.what == "run":
        run(args.kernels or KERNELS, args.out)
    else:
        compare(args.json, args.out)


if __name__ == "__main__":
    main()
