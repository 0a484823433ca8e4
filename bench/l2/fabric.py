#!/usr/bin/env python3
"""Sectors sent between the H200's two L2 partitions: predicted by two forms of the L2 model, then measured.

    python3 bench/l2/fabric.py predict [--out bench/results/fabric_predicted_h200.json]
    python3 bench/l2/fabric.py compare CSV [--predicted ...json] [--out bench/results/fabric_h200.md]

A read homed in the far partition looks the near one up first; when the near partition holds no copy, the
request goes on over the fabric between them (ncu: lts__t_sectors_srcunit_ltcfabric), and writes homed far
always do.  The two forms differ only in where a near copy comes from:
- `last-reader`: the block that read the data last left it, whichever side of the chip it ran on (the
  model up to 176e615: NEAR_READERS = 1, IN_STEP 0.7, MERGED 0.4);
- `same-side`: only a reader on the same side did: the k-th earlier reader with probability
  (1/P)(1 - 1/P)^(k-1) (NEAR_READERS = 4, and the constants bench/l2/fit.py chose for this form: IN_STEP
  0.9, MERGED 0.1); and the same form with the other's constants.

`predict` writes both forms' predictions for the variants the GPU run measures (committed before the run);
`compare` reads that run's ncu page (`FABRIC=1 CSV=fabric.csv bash bench/l2/l1_probe.sh VARIANTS`) and
writes the table, with each form's median error.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from swzc.target import hw as hwmodels  # noqa: E402
from swzc.model.l2model import EFFECTIVE, SOFTNESS, L2Model  # noqa: E402

# NEAR_READERS, IN_STEP, MERGED; the third isolates the change of form from the change of constants
FORMS = {"last-reader": (1, 0.7, 0.4), "same-side": (4, 0.9, 0.1), "same-side, last-reader's constants": (4, 0.7, 0.4)}
FIVE = ("identity", "grouped:4", "grouped:16", "hilbert:8", "serpentine:32")
OTHERS = ("naive_gemm", "smem_gemm", "wmma_gemm", "stencil2d", "transpose", "naive_gemm_8192", "attention_decode", "tiled_gemm")
EVERY_ORDER = "gemm_bf16_wmma"


def variants() -> list[tuple[str, str]]:
    manifest = json.loads((HERE / "variants" / "manifest_bf16.json").read_text())
    bf16 = [v["candidate"] for v in manifest["variants"] if v["kernel"] == EVERY_ORDER]
    return [(EVERY_ORDER, c) for c in bf16] + [(k, c) for k in OTHERS for c in FIVE]


def predict(out: Path) -> None:
    from fit import Kernel
    from make_variants import slug

    hw = hwmodels.load("h200")
    wanted = variants()
    rows = []
    for name in dict.fromkeys(k for k, _ in wanted):
        orders = [c for k, c in wanted if k == name]
        kernel = Kernel(name, [{"candidate": c} for c in orders], hw)
        total = math.prod(kernel.fp.grid)
        for candidate, order in zip(orders, kernel.maps):
            scale = total / order.shape[0]
            row = {"kernel": name, "candidate": candidate, "variant": f"{name}__{slug(candidate)}"}
            for form, (readers, in_step, merged) in FORMS.items():
                p = L2Model(kernel.fp, hw, kernel.resident, EFFECTIVE, SOFTNESS, in_step, merged, readers).predict(
                    candidate, order, kernel.fp.adapter, kernel.fp.divisor).scaled(scale)
                row[form] = {"l2_hit_pct": p.l2_hit_rate, "lookups": p.requests, "dram_read_sectors": p.read_misses,
                             "fabric_sectors": p.fabric}
            rows.append(row)
    doc = {"command": "python3 bench/l2/fabric.py predict", "forms": {k: dict(zip(("NEAR_READERS", "IN_STEP", "MERGED"), v))
                                                                     for k, v in FORMS.items()}, "predictions": rows}
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(rows)} variants -> {out}")


def compare(csv_path: Path, predicted_path: Path, out: Path) -> None:
    from compare import ncu_page

    doc = json.loads(predicted_path.read_text())
    got = ncu_page(csv_path, ("lts__", "dram__"))
    lines = ["# Sectors sent between the two L2 partitions: predicted before measuring, then measured on the H200", "",
             f"Predicted with `{doc['command']}` (committed before the run; forms: "
             + "; ".join(f"`{k}` {v}" for k, v in doc["forms"].items()) + ").",
             f"Measured with `FABRIC=1 CSV=fabric.csv bash bench/l2/l1_probe.sh VARIANTS` (`{csv_path.name}`).", "",
             "Fabric: ncu `lts__t_sectors_srcunit_ltcfabric.sum`, in millions of sectors; the ratio is predicted over "
             "measured.", "",
             "| kernel | order | measured fabric | " + " | ".join(f"{form} | ratio" for form in FORMS) + " | measured hit % | "
             + " | ".join(f"{form} hit %" for form in FORMS) + " |",
             "|---|---|---:|" + "---:|---:|" * len(FORMS) + "---:|" + "---:|" * len(FORMS)]
    logs: dict[str, list[float]] = {form: [] for form in FORMS}
    hits: dict[str, list[float]] = {form: [] for form in FORMS}
    for row in doc["predictions"]:
        m = got.get(row["variant"])
        if not m or not m.get("lts__t_sectors_srcunit_ltcfabric.sum"):
            continue
        fabric = m["lts__t_sectors_srcunit_ltcfabric.sum"]
        cells = []
        for form in FORMS:
            ratio = row[form]["fabric_sectors"] / fabric
            logs[form].append(abs(math.log(max(ratio, 1e-9))))
            hits[form].append(abs(row[form]["l2_hit_pct"] - m.get("lts__t_sector_hit_rate.pct", float("nan"))))
            cells += [f"{row[form]['fabric_sectors'] / 1e6:,.1f}", f"{ratio:.2f}"]
        lines.append(f"| {row['kernel']} | {row['candidate']} | {fabric / 1e6:,.1f} | {' | '.join(cells)} | "
                     f"{m.get('lts__t_sector_hit_rate.pct', float('nan')):.1f} | "
                     + " | ".join(f"{row[form]['l2_hit_pct']:.1f}" for form in FORMS) + " |")
    lines += ["", "| form | variants | fabric: median of predicted / measured, as a factor off | hit rate: mean absolute error (pt) |",
              "|---|---:|---:|---:|"]
    for form in FORMS:
        if logs[form]:
            lines.append(f"| {form} | {len(logs[form])} | {math.exp(statistics.median(logs[form])):.2f}x | "
                         f"{statistics.mean(hits[form]):.1f} |")
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-len(FORMS) - 3:]))


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("predict")
    p.add_argument("--out", default="bench/results/fabric_predicted_h200.json")
    c = sub.add_parser("compare")
    c.add_argument("csv")
    c.add_argument("--predicted", default="bench/results/fabric_predicted_h200.json")
    c.add_argument("--out", default="bench/results/fabric_h200.md")
    args = ap.parse_args()
    if args.what == "predict":
        predict(Path(args.out))
    else:
        compare(Path(args.csv), Path(args.predicted), Path(args.out))


if __name__ == "__main__":
    main()
