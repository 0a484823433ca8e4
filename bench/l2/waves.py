#!/usr/bin/env python3
"""Do blocks drift out of step as waves go by?  Two GEMMs at identity, with 2 to 62 waves of blocks.

    python3 bench/l2/waves.py write                 # here: the variants, into bench/l2/variants/waves/
    OUT=$OUT bash bench/l2/waves.sh                 # on the GPU machine: ncu on each (about 35 s)
    python3 bench/l2/waves.py compare waves.csv     # here: bench/results/waves_h200.md

The bf16 WMMA GEMM (synchronous loads staged behind barriers) with M = 2048, 8192 and 32768, and the
async-copy GEMM (double-buffered `__pipeline_memcpy_async`) with M = 512, 2048 and 8192: only the number
of tile rows changes, so only the number of waves does.  Each is put against three figures for its DRAM
reads: the model as it is, the model with no reuse in step (`IN_STEP` = 0 and no crisp first wave: block
starts spread evenly), and
`one fetch per wave`: every panel the blocks of a wave read fetched once in that wave, none kept from one
wave to the next (blocks in lockstep, waves crisp).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

from fit import Kernel  # noqa: E402
from swzc.target import hw as hwmodels  # noqa: E402
from swzc.model.l2model import EFFECTIVE, SOFTNESS, L2Model, _keys, _tiles_of  # noqa: E402

FOLDER = HERE / "variants" / "waves"
SIZES = {  # kernel: (its file, the line that sets the rows, the row counts)
    "gemm_bf16_wmma": (REPO / "bench" / "suite" / "kernels" / "gemm_bf16_wmma.cu", "#define M 8192", (2048, 8192, 32768)),
    "async_gemm": (HERE / "kernels" / "async_gemm.cu", "#define MD 2048", (512, 2048, 8192)),
}


def write() -> None:
    FOLDER.mkdir(parents=True, exist_ok=True)
    for kernel, (path, line, sizes) in SIZES.items():
        text = path.read_text()
        assert text.count(line) == 1, (path, line)
        for rows in sizes:
            name = line.split()[1]
            (FOLDER / f"{kernel}__M{rows}.cu").write_text(text.replace(line, f"#define {name} {rows}"))
    print(f"{sum(len(s) for _, _, s in SIZES.values())} variants -> {FOLDER}")


def one_fetch_per_wave(model: L2Model, tiles, resident: int, total: int) -> float:
    """DRAM bytes if every wave fetched each footprint its blocks read once, and kept nothing for the next."""
    fetched = 0.0
    for stream in model.reads:
        keys = _keys(tuple(tiles.T), stream.key_offsets)
        per_wave = [len(set(keys[start:start + resident].tolist())) for start in range(0, keys.size, resident)]
        fetched += sum(per_wave) * stream.units.size
    return fetched * model.unit * total / tiles.shape[0]


def predict(kernel: str, path: Path | None = None, resident: int | None = None) -> dict:
    """The three DRAM figures for identity, the model's tile grid and the waves, for `kernel` (in the program
    at `path`, else the bench kernel of that name), with `resident` blocks at once (else as many as its
    resource usage allows); and the grid and each dispatch position's tile."""
    hw = hwmodels.load("h200")
    k = Kernel(kernel, [{"candidate": "identity"}], hw, path)
    fp, (order,) = k.fp, k.maps
    resident = k.resident if resident is None else resident
    total = math.prod(fp.grid)
    scale = total / order.shape[0]
    model = L2Model(fp, hw, resident)
    now = model.predict("identity", order, fp.adapter, fp.divisor)
    spread = L2Model(fp, hw, resident, EFFECTIVE, SOFTNESS, 0.0, 0.0, crisp_first_wave=False).predict(
        "identity", order, fp.adapter, fp.divisor)
    tiles = np.stack(_tiles_of(order, fp.adapter, fp.divisor, fp.grid), axis=1)  # (positions, 3)
    return {"tiles": fp.tiles[:2], "waves": total / resident, "now_mb": now.read_misses * model.unit * scale / 1e6,
            "spread_mb": spread.read_misses * model.unit * scale / 1e6,
            "crisp_mb": one_fetch_per_wave(model, tiles, resident, total) / 1e6, "grid": fp.grid, "dispatched": tiles}


def compare(csv_path: Path, out: Path) -> None:
    from compare import ncu_page

    measured = ncu_page(csv_path, ("lts__", "dram__", "gpu__"))
    lines = ["# Blocks in step or not, against the number of waves (identity order, NVIDIA H200)", "",
             f"Measured with `OUT=$OUT bash bench/l2/waves.sh` (`{csv_path.name}`); predicted with "
             "`python3 bench/l2/waves.py compare`.", "",
             "| kernel | tile rows × columns | waves | measured DRAM read MB | one fetch per wave | model now | "
             "no reuse in step | measured L2 hit % | ms |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for variant in sorted(measured, key=lambda v: (v.split("__")[0], int(v.split("__M")[1]))):
        kernel = variant.split("__")[0]
        p = predict(kernel, FOLDER / f"{variant}.cu")
        m = measured[variant]
        rows, cols = p["tiles"]
        lines.append(f"| {kernel} | {rows} × {cols} | {p['waves']:.1f} | {m['dram__bytes_read.sum'] / 1e6:,.0f} | "
                     f"{p['crisp_mb']:,.0f} | {p['now_mb']:,.0f} | {p['spread_mb']:,.0f} | "
                     f"{m['lts__t_sector_hit_rate.pct']:.1f} | {m['gpu__time_duration.sum'] / 1e6:.2f} |")
    lines += ["", "## Where each kernel of bench/l2 that shares data between blocks stands, at identity", "",
              "The share of the way from `no reuse in step` (0) to `one fetch per wave` (1) that its measured DRAM "
              "reads go (bench/l2's results files).", "",
              "| kernel | waves | measured DRAM read MB | one fetch per wave | no reuse in step | share | "
              "DRAM read GB/s | L2 GB/s |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    from fit import DEFAULT_RESULTS, measurements

    rows = {(r["kernel"], r["candidate"]): r for r in measurements(DEFAULT_RESULTS.split(","))}
    for kernel in ("gemm_bf16_wmma", "tiled_gemm", "naive_gemm", "attention_decode", "wmma_gemm", "async_gemm",
                   "smem_gemm", "naive_gemm_8192"):
        p = predict(kernel)
        row = rows[(kernel, "identity")]
        m = row["dram_read_bytes"] / 1e6
        share = (p["spread_mb"] - m) / (p["spread_mb"] - p["crisp_mb"])
        seconds = row["ncu_time_ns"] / 1e9  # ncu's kernel time; its L2 figure is every sector L2 served
        lines.append(f"| {kernel} | {p['waves']:.1f} | {m:,.0f} | {p['crisp_mb']:,.0f} | {p['spread_mb']:,.0f} | {share:.2f} | "
                     f"{row['dram_read_bytes'] / seconds / 1e9:,.0f} | {row['lts_sectors'] * 32 / seconds / 1e9:,.0f} |")
    lines += ["", "The WMMA GEMM's DRAM reads are 2–4 times what the model fetches on every order (its L2 fetches "
              "more than a sector per miss), so its share is not comparable.", "",
              "The kernels at least half in step draw little DRAM bandwidth at identity (210–400 GB/s), and those at "
              "a third or less draw more (550–1,000 GB/s, of about 4,800). That is consistent with blocks that queue for DRAM "
              "falling out of step, but it is no predictor: the bandwidth is itself the outcome (in step, a kernel "
              "reads less), and predicting it needs the kernel's time, which the model does not have."]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def command_line(write: Callable[[], None], compare: Callable[[Path, Path], None], out: str) -> None:
    """`write` (the variants, here) or `compare CSV [--out OUT]` (the GPU run's ncu page against the model):
    the command line of this script and of the others that measure variants with waves.sh."""
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("write")
    c = sub.add_parser("compare")
    c.add_argument("csv")
    c.add_argument("--out", default=out)
    args = ap.parse_args()
    if args.what == "write":
        write()
    else:
        compare(Path(args.csv), Path(args.out))


def main() -> None:
    command_line(write, compare, "bench/results/waves_h200.md")


if __name__ == "__main__":
    main()
