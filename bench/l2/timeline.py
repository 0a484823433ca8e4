#!/usr/bin/env python3
"""When does each block start and end?  Every kernel of bench/l2 that shares data, at identity, with each
block's start and end read from the GPU's global timer.

    python3 bench/l2/timeline.py write                 # here: the variants, into bench/l2/variants/timeline/
    OUT=$OUT bash bench/l2/timeline.sh                 # on the GPU machine: runs each once (about 30 s)
    python3 bench/l2/timeline.py compare DIR           # here: bench/results/timeline_h200.md from DIR/*.bin

bench/results/waves_h200.md found that at identity some kernels' blocks read shared panels in step, wave
after wave (the bf16 GEMM: one fetch per panel per wave), and others' do not (the shared-memory GEMM: no
reuse in step after its first wave), and that neither the number of waves nor DRAM bandwidth decides which
(pace_h200.md, rows_h200.md).  This looks at time itself: a wave whose blocks start together is in step, a
wave whose starts are spread over a block's lifetime is not.

Each variant is the kernel with three additions, none of which changes what it reads or writes:
thread 0 of each block stores the global timer and its SM's number when the block starts; lane 0 of each
warp raises the block's end time to the timer when the warp finishes (atomicMax, so the measured launch,
which runs after the warm-up, is what stays); and main writes the three arrays to $SWZC_TIMELINE before it
prints its line.
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

from make_variants import kernel_source  # noqa: E402

FOLDER = HERE / "variants" / "timeline"
KERNELS = ("gemm_bf16_wmma", "tiled_gemm", "naive_gemm", "attention_decode", "wmma_gemm", "async_gemm",
           "smem_gemm", "naive_gemm_8192")
SLOTS = 1 << 19  # more than any of these grids has blocks

DEVICE_SIDE = f"""
#define SWZC_SLOTS {SLOTS}
__device__ unsigned long long swzc_start[SWZC_SLOTS];
__device__ unsigned long long swzc_end[SWZC_SLOTS];
__device__ unsigned int swzc_sm[SWZC_SLOTS];
__device__ __forceinline__ unsigned long long swzc_now() {{
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}}
__device__ __forceinline__ unsigned int swzc_block() {{
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}}
__device__ __forceinline__ unsigned int swzc_thread() {{
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}}
"""
AT_START = """  if (swzc_thread() == 0) {  /* timeline */
    unsigned int sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    swzc_start[swzc_block()] = swzc_now();
    swzc_sm[swzc_block()] = sm;
  }
"""
AT_END = "  if (swzc_thread() % 32 == 0) atomicMax(&swzc_end[swzc_block()], swzc_now());  /* timeline */\n"
DUMP = """  {  /* timeline: the measured launch's blocks, to $SWZC_TIMELINE */
    static unsigned long long hs[SWZC_SLOTS], he[SWZC_SLOTS];
    static unsigned int hm[SWZC_SLOTS];
    CHECK(cudaMemcpyFromSymbol(hs, swzc_start, sizeof hs));
    CHECK(cudaMemcpyFromSymbol(he, swzc_end, sizeof he));
    CHECK(cudaMemcpyFromSymbol(hm, swzc_sm, sizeof hm));
    const char* where = getenv("SWZC_TIMELINE");
    FILE* f = where ? fopen(where, "wb") : NULL;
    unsigned int n = SWZC_SLOTS;
    while (n > 0 && hs[n - 1] == 0) --n;  /* the grid's blocks: every one of them stored a start */
    if (f) {
      fwrite(&n, sizeof n, 1, f);
      fwrite(hs, sizeof hs[0], n, f);
      fwrite(he, sizeof he[0], n, f);
      fwrite(hm, sizeof hm[0], n, f);
      fclose(f);
    }
  }
"""


def _body(text: str, kernel: str) -> tuple[int, int]:
    """Offsets of the opening and closing braces of __global__ KERNEL's body."""
    head = re.search(r"__global__\s+void\s+" + re.escape(kernel) + r"\s*\(", text)
    assert head, kernel
    depth, i = 0, head.end() - 1
    while True:  # past the parameter list
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
        if depth == 0:
            break
    opening = text.index("{", i)
    depth = 0
    for j in range(opening, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return opening, j
    raise AssertionError(f"{kernel}: unbalanced body")


def instrumented(text: str, kernel: str) -> str:
    opening, closing = _body(text, kernel)
    # Every thread reaches the end: the naive GEMMs' one `return` guards rows and columns past n, and
    # their grids have none.
    assert "return" not in text[opening:closing] or kernel.startswith("naive_gemm"), kernel
    text = text[:opening + 1] + "\n" + AT_START + text[opening + 1:closing] + AT_END + text[closing:]
    printed = f'  printf("kernel {kernel} ms'
    assert text.count(printed) == 1, kernel
    text = text.replace(printed, DUMP + printed)
    head = re.search(r"__global__\s+void\s+" + re.escape(kernel), text).start()
    return text[:head] + DEVICE_SIDE + "\n" + text[head:]


def write() -> None:
    FOLDER.mkdir(parents=True, exist_ok=True)
    for kernel in KERNELS:
        _, text = kernel_source(kernel)
        (FOLDER / f"{kernel}.cu").write_text(instrumented(text, kernel))
    print(f"{len(KERNELS)} variants -> {FOLDER}")


# Where each kernel's identity stands between `no reuse in step` (0) and `one fetch per wave` (1), from its
# measured DRAM reads: bench/results/waves_h200.md (the WMMA GEMM's is not comparable there, see that page).
SHARE = {"gemm_bf16_wmma": 1.00, "tiled_gemm": 0.68, "naive_gemm": 0.53, "attention_decode": 0.33,
         "async_gemm": 0.07, "smem_gemm": 0.06, "naive_gemm_8192": 0.00}


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    for rank, i in enumerate(order):
        ranks[i] = float(rank)
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    return cov / math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))


def timeline(path: Path, blocks: int) -> dict:
    """The measured launch's `blocks` blocks in `path`, times from the first start."""
    import numpy as np

    raw = path.read_bytes()
    (n,) = np.frombuffer(raw, np.uint32, 1, 0)
    assert n == blocks, (path, n, blocks)
    start = np.frombuffer(raw, np.uint64, n, 4).astype(np.int64)
    end = np.frombuffer(raw, np.uint64, n, 4 + 8 * n).astype(np.int64)
    sm = np.frombuffer(raw, np.uint32, n, 4 + 16 * n).astype(np.int64)
    assert (start > 0).all() and (end > start).all(), path
    t0 = start.min()
    return {"start": start - t0, "end": end - t0, "sm": sm}


def summary(t: dict, resident: int, row: int) -> dict:
    """What the timeline says about waves: each band of `resident` consecutive blocks (the model's wave, in
    dispatch order at identity), how spread its starts are in lifetimes."""
    import numpy as np

    start, end, sm = t["start"], t["end"], t["sm"]
    life = end - start
    lifetime = float(np.median(life))
    events = np.concatenate([np.stack([start, np.ones_like(start)], 1), np.stack([end, -np.ones_like(end)], 1)])
    events = events[np.lexsort((events[:, 1], events[:, 0]))]  # an end before a start at the same instant
    running = int(np.cumsum(events[:, 1]).max())
    per_sm = max(int(np.cumsum(ev[np.lexsort((ev[:, 1], ev[:, 0]))][:, 1]).max())
                 for s in np.unique(sm)
                 for ev in [np.concatenate([np.stack([start[sm == s], np.ones((sm == s).sum(), np.int64)], 1),
                                            np.stack([end[sm == s], -np.ones((sm == s).sum(), np.int64)], 1)])])
    bands = [start[i:i + resident] for i in range(0, start.size - resident + 1, resident)]
    spread = [float(np.percentile(b, 90) - np.percentile(b, 10)) / lifetime for b in bands]
    later = spread[1:]
    # Blocks `row` apart in dispatch order (the next tile row's block of the same column): how far apart they
    # start, against how far apart even spreading would put them (row / resident lifetimes).
    lag = float(np.median(np.abs(start[row:] - start[:-row]))) / lifetime / (row / resident)
    return {"blocks": int(start.size), "sms": int(np.unique(sm).size), "resident_measured": running,
            "per_sm_measured": per_sm, "lifetime_us": lifetime / 1e3,
            "lifetime_spread": float(np.percentile(life, 90) - np.percentile(life, 10)) / lifetime,
            "first_wave_spread": spread[0] if spread else float("nan"),
            "later_wave_spread": float(np.median(later)) if later else float("nan"), "bands": len(bands),
            "row_lag": lag,
            "launch_ms": float(end.max()) / 1e6,
            "order_kept": spearman(start.tolist(), list(range(start.size))) if start.size <= 20000 else
            float(np.corrcoef(np.argsort(np.argsort(start)), np.arange(start.size))[0, 1])}


def compare(folder: Path, out: Path) -> None:
    from fit import Kernel
    from swzc import hw as hwmodels

    hw = hwmodels.load("h200")
    rows = []
    for kernel in KERNELS:
        path = folder / f"{kernel}.bin"
        if not path.is_file():
            continue
        k = Kernel(kernel, [{"candidate": "identity"}], hw)
        row = k.fp.grid[0] if k.fp.grid[1] > 1 else k.fp.tiles[1]  # blocks per tile row, in dispatch order
        rows.append((kernel, k.resident, summary(timeline(path, math.prod(k.fp.grid)), k.resident, row)))
    lines = ["# When blocks start and end (identity order, NVIDIA H200)", "",
             "Measured with `python3 bench/l2/timeline.py write` (here), `OUT=$OUT bash bench/l2/timeline.sh` "
             "(on the H200); summarised with `python3 bench/l2/timeline.py compare DIR`.  What was expected before "
             "the run: bench/results/timeline_predicted_h200.md.", "",
             "A wave here is a band of as many consecutive blocks as the model holds resident; its spread is the "
             "10th to 90th percentile of its blocks' start times, in median block lifetimes (0: the band starts at "
             "once; about 0.8: its starts are spread evenly over a lifetime).  The row lag is the median gap between the "
             "starts of blocks a tile row apart in dispatch order, over the gap even spreading would give (0: in "
             "step; 1: spread).", "",
             "| kernel | blocks | resident (model) | resident (measured) | per SM (measured) | median lifetime µs | "
             "lifetime spread | first wave's spread | later waves' spread (median) | dispatch order kept | "
             "share in step (waves_h200.md) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for kernel, resident, s in rows:
        share = SHARE.get(kernel)
        lines.append(f"| {kernel} | {s['blocks']:,} | {resident:,} | {s['resident_measured']:,} | {s['per_sm_measured']} | "
                     f"{s['lifetime_us']:,.1f} | {s['lifetime_spread']:.2f} | {s['first_wave_spread']:.2f} | "
                     f"{s['later_wave_spread']:.2f} | {s['row_lag']:.2f} | {s['order_kept']:.3f} | "
                     f"{'' if share is None else f'{share:.2f}'} |")
    ranked = [(SHARE[k], s["later_wave_spread"]) for k, _, s in rows if k in SHARE]
    if len(ranked) >= 3:
        rho = spearman([a for a, _ in ranked], [b for _, b in ranked])
        lines += ["", f"Spearman's rank correlation between the share in step and the later waves' spread, over "
                      f"{len(ranked)} kernels: {rho:+.2f}."]
    out.write_text("\n".join(lines) + "\n")
    (out.with_suffix(".json")).write_text(json.dumps(
        [{"kernel": k, "resident_model": r, **s} for k, r, s in rows], indent=1) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("write")
    c = sub.add_parser("compare")
    c.add_argument("folder", type=Path)
    c.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "timeline_h200.md")
    args = parser.parse_args()
    if args.what == "write":
        write()
    else:
        compare(args.folder, args.out)


if __name__ == "__main__":
    main()
