#!/usr/bin/env python3
"""Do blocks stay in step when each SM runs only one (or two) of them?  Five GEMMs at identity, with shared
memory reserved at launch so that fewer blocks fit on an SM.

    python3 bench/l2/slots.py write                 # here: the variants, into bench/l2/variants/slots/
    OUT=$OUT bash bench/l2/slots.sh                 # on the GPU machine: each run once timed, once under ncu
    python3 bench/l2/slots.py compare DIR           # here: bench/results/slots_h200.md

bench/results/timeline_h200.md found that the blocks sharing an SM finish one after another in the order
they started there (the async-copy GEMM's four slots: 0.63, 0.75, 0.98 and 1.20 lifetimes), that later
blocks start as those end, and that the one kernel whose slots end together (the bf16 GEMM) is the one whose
later waves start together and whose DRAM reads are one fetch per panel per wave.  If the stagger between
an SM's blocks is what spreads the waves, an SM that runs one block has none, and its waves stay crisp.

Each variant is the timeline variant of the kernel (bench/l2/timeline.py) with dynamic shared memory
reserved at both launches: as much as leaves room for PER_SM blocks and not one more (the kernel never
touches it; `cudaFuncGetAttributes` gives its static shared memory, `cudaFuncSetAttribute` allows the size).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

from make_variants import find_swzc, kernel_source, slug  # noqa: E402
from timeline import instrumented, reordered, summary, timeline  # noqa: E402
from waves import predict as predict_dram  # noqa: E402

FOLDER = HERE / "variants" / "slots"
# kernel: the blocks per SM to run it at (its own count is in bench/results/timeline_h200.md)
RUNS = {"async_gemm": (1, 2), "tiled_gemm": (1, 2), "smem_gemm": (1,), "naive_gemm": (1, 2), "gemm_bf16_wmma": (1,)}
# Other orders at one block per SM, measured in a second run (slots_predicted_h200.md, part 2).
ORDERS = {kernel: ("grouped:2", "grouped:4", "grouped:8", "grouped:16", "hilbert:8", "morton:8")
          for kernel in ("tiled_gemm", "gemm_bf16_wmma")}
SM_SHARED = 228 * 1024  # shared memory per SM on the H200 (Hopper: 228 KB, of which 227 KB for one block)
BLOCK_MAX = 227 * 1024
RESERVED = 1024  # what the system takes per block


def padded(text: str, kernel: str, per_sm: int) -> str:
    """`text` with both launches of `kernel` given the dynamic shared memory that leaves room for `per_sm`."""
    launch = re.compile(re.escape(kernel) + r"<<<([^,>]+),\s*([^,>]+)>>>")
    assert len(launch.findall(text)) == 2, kernel
    text = launch.sub(lambda m: f"{kernel}<<<{m.group(1)}, {m.group(2)}, slots_pad>>>", text)
    first = text.index(f"{kernel}<<<")
    line = text.rindex("\n", 0, first) + 1
    setup = (f"  size_t slots_pad;\n"
             f"  {{  /* slots: reserve shared memory so that {per_sm} block(s) fit on an SM, and no more */\n"
             f"    cudaFuncAttributes attr;\n"
             f"    CHECK(cudaFuncGetAttributes(&attr, {kernel}));\n"
             f"    const size_t each = {min(BLOCK_MAX, SM_SHARED // per_sm - RESERVED)};\n"
             f"    slots_pad = each - attr.sharedSizeBytes;\n"
             f"    CHECK(cudaFuncSetAttribute({kernel}, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)slots_pad));\n"
             f"  }}\n")
    return text[:line] + setup + text[line:]


def write(swzc: str | None) -> None:
    """RUNS at identity, and ORDERS at one block per SM (rewritten by swzc, then instrumented and padded)."""
    FOLDER.mkdir(parents=True, exist_ok=True)
    for kernel, counts in RUNS.items():
        _, text = kernel_source(kernel)
        for per_sm in counts:
            (FOLDER / f"{kernel}__S{per_sm}.cu").write_text(padded(instrumented(text, kernel), kernel, per_sm))
    swzc = find_swzc(swzc)
    for kernel, orders in ORDERS.items():
        for order in orders:
            out = FOLDER / f"{kernel}__S1__{slug(order)}.cu"
            out.write_text(padded(instrumented(reordered(swzc, kernel, order, out), kernel), kernel, 1))
    print(f"{sum(map(len, RUNS.values())) + sum(map(len, ORDERS.values()))} variants -> {FOLDER}")


def predict(out: Path) -> None:
    """The model's L2 hit rate and DRAM bytes for every variant, as it ranks now (waves drift after the
    first) and with every wave starting at once, written before the variants are measured."""
    from fit import Kernel
    from swzc.target import hw as hwmodels
    from swzc.model.l2model import L2Model

    hw = hwmodels.load("h200")
    rows = []
    for kernel, counts in RUNS.items():
        orders = [("identity", n) for n in counts] + [(o, 1) for o in ORDERS.get(kernel, ())]
        k = Kernel(kernel, [{"candidate": o} for o, _ in orders], hw)
        scale = math.prod(k.fp.grid) / k.maps[0].shape[0]
        for (order, per_sm), mapping in zip(orders, k.maps):
            row = {"kernel": kernel, "order": order, "per_sm": per_sm,
                   "variant": f"{kernel}__S{per_sm}" + ("" if order == "identity" else f"__{slug(order)}")}
            for form, crisp in (("now", False), ("crisp_waves", True)):
                p = L2Model(k.fp, hw, per_sm * hw.compute_units, crisp_waves=crisp).predict(
                    order, mapping, k.fp.adapter, k.fp.divisor).scaled(scale)
                row[form] = {"l2_hit_pct": p.l2_hit_rate, "dram_mb": round(p.dram_bytes / 1e6, 1),
                             "merged_share": round(p.merged / p.reads, 3)}
            rows.append(row)
    out.write_text(json.dumps({"command": "python3 bench/l2/slots.py predict", "predictions": rows}, indent=1) + "\n")
    for r in rows:
        print(r["variant"], r["now"], r["crisp_waves"])


FINDINGS = [
    "## What it shows (H200, 2026-12-04)", "",
    "Against what was written down before each run (slots_predicted_h200.md).  The tables above are the "
    "second run's, which measured the first run's eight variants again with the coalescer's counters "
    "(slots_h200_run1.csv holds the first); the first two points quote the first run.", "",
    "- **One block per SM: crisp waves on four of five.**  Later waves' spread 0.00-0.04 on the async-copy, "
    "register-blocked, shared-memory and bf16 GEMMs, as expected.  The naive GEMM fails (0.78): its one slot "
    "per SM ends at 1.03 in the first wave like the others, but its blocks' lifetimes vary (no barriers, "
    "every thread walks its own row) and over 496 waves the starts spread anyway.",
    "- **Where the waves are crisp the DRAM reads are the model's one fetch per wave to 0.1 %**: the "
    "register-blocked GEMM 2,181 MB against 2,183 at one per SM and 1,156 against 1,156 at two; the bf16 "
    "GEMM 4,365 against 4,366.  The model as it is says 3,519, 2,538 and 7,037.",
    "- **Two per SM: staggered on one of three.**  The async-copy GEMM's two slots end at 0.92 and 1.08 "
    "and its later waves spread 0.49 (share in step 0.11), as expected.  The register-blocked GEMM's end "
    "together (1.02, 1.03) and its waves stay crisp (0.00, share 1.00): not expected.  The naive GEMM's "
    "end together (1.04, 1.04) and its waves spread to 0.30 over 248 waves, at the bar (0.35 in the second "
    "run).",
    "- **Second run, the register-blocked and bf16 GEMMs at one block per SM at seven orders, against "
    "predictions written first.**  DRAM: the crisp form is within 9 % of the measured reads at all seven "
    "orders of the register-blocked GEMM (identity 2,152 MB against 2,181; the form the model ranks with now: "
    "3,519) and at the bf16 GEMM's identity and grouped:2 (4,303 and 4,299 against 4,365 and 4,428; now "
    "7,037 at identity).  It fails on the bf16 GEMM's grouped:4 and wider orders, 10-59 % low, as both "
    "forms are: the bf16 GEMM reads more from DRAM on those orders than the model fetches at its own "
    "residency too.  Merging: the coalescer merges 0.33-0.38 of the bf16 GEMM's read sectors at every order "
    "and 0.20-0.32 of the register-blocked GEMM's at identity and the grouped orders, but 0.12 and 0.14 at "
    "morton:8 and hilbert:8: held on 12 of 14, against the model's 0.07-0.09.",
    "- **So the crisp form gets the DRAM and not the hit rate.**  Its hit rates are 10-13 points high where "
    "the merging it leaves out is large (identity and grouped:2 of both, every order of the bf16 GEMM), and "
    "on the seven orders of each its error is larger than the form the model ranks with (above).  With the "
    "merged share the coalescer shows, it would fit: at identity, a merged share of 0.37 brings it to "
    "46.8-47.5 % against 49-50 measured (`MERGED` 0.5 in that form, against 0.1 fitted for drifting waves; "
    "computed after this run, not a prediction).  A third constant is one more than the protocol allows, so "
    "the ranking keeps the form it has and `crisp_waves` stays a form of the model the benchmarks use.  Both "
    "forms pick the measured best order of the register-blocked GEMM (grouped:16); on the bf16 GEMM the crisp "
    "form picks it (grouped:16) and the other grouped:8, 1.6 points below it.",
    "- So a slot stagger spreads the waves, but whether two blocks on one SM stagger is the kernel's: the "
    "register-blocked and bf16 GEMMs do not at two, the shared-memory and async-copy GEMMs do.  At one "
    "block per SM there is no stagger to have, and the waves stay crisp unless the blocks' own lifetimes "
    "vary enough to spread them over many waves.",
]


def write_mb(kernel: str) -> float:
    """The DRAM bytes (MB) the model counts for `kernel`'s writes: every written unit once."""
    from fit import Kernel
    from swzc.target import hw as hwmodels
    from swzc.model.l2model import L2Model

    k = Kernel(kernel, [{"candidate": "identity"}], hwmodels.load("h200"))
    model = L2Model(k.fp, k.hw)
    return sum(int(s.units.size) for s in model.writes) * math.prod(k.fp.grid) * model.unit / 1e6


def compare(folder: Path, out: Path) -> None:
    from compare import ncu_page

    measured = ncu_page(folder / "slots.csv", ("lts__", "dram__", "gpu__", "lrc__"))
    lines = ["# One or two blocks per SM: do waves stay in step? (identity order, NVIDIA H200)", "",
             "Measured with `python3 bench/l2/slots.py write` (here), `OUT=$OUT bash bench/l2/slots.sh` (on the "
             "H200); compared with `python3 bench/l2/slots.py compare DIR`.  What was expected before the run: "
             "bench/results/slots_predicted_h200.md.  Each kernel's own count is its row in "
             "bench/results/timeline_h200.md and waves_h200.md.", "",
             "| kernel | blocks per SM | running at once (measured) | first wave's lifetimes by slot | later waves' "
             "spread | column pairs: gap, lag | DRAM read MB | one fetch per wave | no reuse in step | share in step | "
             "model now | L2 hit % | ms |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for kernel, counts in RUNS.items():
        for per_sm in counts:
            variant = f"{kernel}__S{per_sm}"
            path = folder / f"{variant}.bin"
            if not path.is_file() or variant not in measured:
                continue
            resident = per_sm * 132
            f = predict_dram(kernel, resident=resident)
            s = summary(timeline(path, math.prod(f["grid"])), resident, f["dispatched"])
            m = measured[variant]
            mb = m["dram__bytes_read.sum"] / 1e6
            # where a wave holds no more than one tile row, crisp and spread waves fetch the same: no share
            apart = f["spread_mb"] - f["crisp_mb"]
            share = f"{(f['spread_mb'] - mb) / apart:.2f}" if apart > 0.1 * f["spread_mb"] else "n/a"
            lag = "none" if math.isnan(s["col_pairs_gap"]) else f"{s['col_pairs_gap']:,.0f}, {s['col_pairs_lag']:.2f}"
            lines.append(f"| {kernel} | {per_sm} | {s['resident_measured']:,} | "
                         f"{' '.join(f'{x:.2f}' for x in s['first_wave_slot_lifetimes'])} | {s['later_wave_spread']:.2f} | "
                         f"{lag} | {mb:,.0f} | {f['crisp_mb']:,.0f} | {f['spread_mb']:,.0f} | {share} | "
                         f"{f['now_mb']:,.0f} | {m['lts__t_sector_hit_rate.pct']:.1f} | "
                         f"{m['gpu__time_duration.sum'] / 1e6:.2f} |")
    lines += ["", "## Both forms of the model against the measurements", "",
              "Predicted before the second run (slots_predicted_h200.json): `now` is the model as it ranks "
              "(waves drift after the first), `crisp` is `crisp_waves=True`.  Merged: the share of read sectors "
              "the L2 request coalescer merged (`lrc__request_sectors_op_read_coalescing_achieved_type_hardware` "
              "over `lrc__xbar2gpc_sectors_op_read`), and the model's merged reads over its reads.", "",
              "The predictions file holds DRAM reads and writes; the table takes off the writes (each block's "
              "own output tile, written once: 67 MB for the register-blocked GEMM, 268 MB for the bf16 GEMM), "
              "to put reads against reads.", "",
              "| variant | L2 hit % | now | crisp | DRAM read MB | now | crisp | merged | now | crisp |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    predicted = json.loads((REPO / "bench" / "results" / "slots_predicted_h200.json").read_text())["predictions"]
    for p in predicted:
        m = measured.get(p["variant"])
        if m is None:
            continue
        written = write_mb(p["kernel"])
        now_read, crisp_read = p["now"]["dram_mb"] - written, p["crisp_waves"]["dram_mb"] - written
        merged = (m["lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum"]
                  / m["lrc__xbar2gpc_sectors_op_read.sum"])
        now, crisp = p["now"], p["crisp_waves"]
        lines.append(f"| {p['variant']} | {m['lts__t_sector_hit_rate.pct']:.1f} | {now['l2_hit_pct']:.1f} | "
                     f"{crisp['l2_hit_pct']:.1f} | {m['dram__bytes_read.sum'] / 1e6:,.0f} | {now_read:,.0f} | "
                     f"{crisp_read:,.0f} | {merged:.2f} | {now['merged_share']:.2f} | {crisp['merged_share']:.2f} |")
    errors: dict[tuple[str, str], list[float]] = {}
    for p in predicted:
        m = measured.get(p["variant"])
        if m is not None and p["kernel"] in ORDERS and p["per_sm"] == 1:
            for form in ("now", "crisp_waves"):
                errors.setdefault((p["kernel"], form), []).append(p[form]["l2_hit_pct"] - m["lts__t_sector_hit_rate.pct"])
    lines += ["", "Mean absolute error of the hit rate at one block per SM, the seven orders of each: " + "; ".join(
        f"{kernel} {form} {sum(map(abs, e)) / len(e):.1f} points" for (kernel, form), e in errors.items()) + "."]
    out.write_text("\n".join([*lines, "", *FINDINGS]) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    w = sub.add_parser("write")
    w.add_argument("--swzc", help="the swzc that rewrites the ORDERS (default: as make_variants.py finds it)")
    pr = sub.add_parser("predict")
    pr.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "slots_predicted_h200.json")
    c = sub.add_parser("compare")
    c.add_argument("folder", type=Path)
    c.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "slots_h200.md")
    args = parser.parse_args()
    if args.what == "write":
        write(args.swzc)
    elif args.what == "predict":
        predict(args.out)
    else:
        compare(args.folder, args.out)


if __name__ == "__main__":
    main()
