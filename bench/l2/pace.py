#!/usr/bin/env python3
"""Do blocks fall out of step because they queue for DRAM?  Three GEMMs at identity, slowed down by a fixed
amount of arithmetic per k-step, so that only the DRAM bandwidth they ask for changes.

    python3 bench/l2/pace.py write                       # here: the variants, into bench/l2/variants/pace/
    SET=pace OUT=$OUT bash bench/l2/waves.sh             # on the GPU machine: ncu on each
    python3 bench/l2/pace.py compare pace.csv            # here: bench/results/pace_h200.md

At identity, the kernels that stay in step draw 210-400 GB/s of DRAM and those that drift 550-1,000
(bench/results/waves_h200.md).  Each variant adds PACE dependent fused multiply-adds per thread to every
k-step, after the step's arithmetic and before its closing barrier, on a register that is stored only if it
equals -1 (it never does: outputs and checksums stay those of the kernel).  The access order, the footprint
and so the model's prediction do not change; the time per k-step does.  Written down before the run
(bench/results/pace_predicted_h200.md): if queueing for DRAM is what makes blocks drift, the in-step share of
the two drifting kernels rises as their bandwidth falls, toward 1 below about 400 GB/s; if it is not, their
DRAM reads stay where they are.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from waves import command_line, predict  # noqa: E402

FOLDER = HERE / "variants" / "pace"
PACES = (0, 256, 1024, 4096)
KERNELS = {  # kernel: (its file, the end of its k-loop body, where the pacing register is declared, the store)
    "smem_gemm": (HERE / "kernels" / "smem_gemm.cu",
                  "    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];\n    __syncthreads();\n",
                  "  float acc = 0.0f;\n", "  C[row * n + col] = acc;\n"),
    "async_gemm": (HERE / "kernels" / "async_gemm.cu",
                   "        for (int j = 0; j < 4; ++j) acc[i][j] += As[s][ty + 16 * i][k] * Bs[s][k][tx + 16 * j];\n    __syncthreads();\n",
                   "  float acc[4][4] = {};\n", "  for (int i = 0; i < 4; ++i)\n    for (int j = 0; j < 4; ++j) C["),
    "tiled_gemm": (HERE / "kernels" / "tiled_gemm.cu",
                   "        for (int j = 0; j < 4; ++j) acc[i][j] += As[ty + 16 * i][k] * Bs[k][tx + 16 * j];\n    __syncthreads();\n",
                   "  float acc[4][4] = {};\n", "  for (int i = 0; i < 4; ++i)\n    for (int j = 0; j < 4; ++j) C["),
}


def paced(text: str, step_end: str, declared: str, store: str, pace: int) -> str:
    for anchor in (step_end, declared, store):
        assert text.count(anchor) == 1, anchor
    barrier = "    __syncthreads();\n"
    spin = (f"#pragma unroll 1\n    for (int p = 0; p < {pace}; ++p) pace = fmaf(pace, 0.999f, 1e-7f);  // pacing only\n")
    text = text.replace(step_end, step_end[: -len(barrier)] + spin + barrier)
    text = text.replace(declared, declared + "  float pace = threadIdx.x * 1e-7f;\n")
    return text.replace(store, "  if (pace == -1.0f) C[0] = pace;  // never: keeps the pacing\n" + store)


def write() -> None:
    FOLDER.mkdir(parents=True, exist_ok=True)
    for kernel, (path, step_end, declared, store) in KERNELS.items():
        for pace in PACES:
            (FOLDER / f"{kernel}__P{pace}.cu").write_text(paced(path.read_text(), step_end, declared, store, pace))
    print(f"{len(KERNELS) * len(PACES)} variants -> {FOLDER}")


def compare(csv_path: Path, out: Path) -> None:
    from compare import ncu_page

    measured = ncu_page(csv_path, ("lts__", "dram__", "gpu__"))
    lines = ["# Blocks in step or not, against the DRAM bandwidth they draw (identity order, NVIDIA H200)", "",
             f"Measured with `SET=pace OUT=$OUT bash bench/l2/waves.sh` (`{csv_path.name}`); compared with "
             "`python3 bench/l2/pace.py compare`.  The prediction written before the run: "
             "bench/results/pace_predicted_h200.md.", "",
             "| kernel | FMAs added per k-step | ms | DRAM read MB | DRAM read GB/s | one fetch per wave | model | "
             "no reuse in step | share in step | L2 hit % |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for variant in sorted(measured, key=lambda v: (v.split("__")[0], int(v.split("__P")[1]))):
        kernel, pace = variant.split("__P")
        p = predict(kernel, FOLDER / f"{variant}.cu")
        m = measured[variant]
        mb = m["dram__bytes_read.sum"] / 1e6
        seconds = m["gpu__time_duration.sum"] / 1e9
        share = (p["spread_mb"] - mb) / (p["spread_mb"] - p["crisp_mb"])
        lines.append(f"| {kernel} | {pace} | {seconds * 1e3:.2f} | {mb:,.0f} | {mb / 1e3 / seconds:,.0f} | "
                     f"{p['crisp_mb']:,.0f} | {p['now_mb']:,.0f} | {p['spread_mb']:,.0f} | {share:.2f} | "
                     f"{m['lts__t_sector_hit_rate.pct']:.1f} |")
    lines += ["", "## What it shows (H200, 2026-12-03)", "",
              "- The hypothesis written down before the run fails for two of the three kernels.  The shared-memory "
              "GEMM stays out of step (0.05) from 551 GB/s down to 7 GB/s, 80 times slower; the register-blocked "
              "GEMM stays where it was (0.70-0.73) down to 9 GB/s.  How hard a kernel pulls on DRAM is not what "
              "decides whether its blocks stay in step.",
              "- The async-copy GEMM does move: 0.07, 0.20, 0.38, 0.67 as its bandwidth falls from 975 to 12 GB/s, "
              "but only at 12 GB/s, 80 times less DRAM traffic per second, is it more than half in step.",
              "- The measured DRAM reads of the other two hardly move with the pace (0.6 % and 7 %), as the model, "
              "which has no time in it, says; its level is another matter (7,016 and 1,853 MB predicted; 6,621 and 1,424 when "
              "the prediction was written down, before the model took the first wave as starting at once).",
              "- The shared-memory GEMM's paced variants print another checksum than the kernel (08c37d0d… against "
              "3abf748d…), the same at every pace: nvcc splits each k-step's last multiply-add across the paced loop and "
              "then no longer fuses it (its PTX has mul.f32 and add.f32 where the kernel's has fma.rn.f32), which "
              "rounds differently.  The reads are the same.  The other two print the kernel's checksum."]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    command_line(write, compare, "bench/results/pace_h200.md")


if __name__ == "__main__":
    main()
