#!/usr/bin/env python3
"""What ranking over sizes costs: one runtime-sized kernel ranked over its sweep, in process, and `swzc suggest`
on a set of files, a fresh process as a hook runs it.

    taskset -c 0 python3 bench/sizes/sweep_speed.py [--files LIST] [--swzc PATH] [--runs 5] [--out FILE]

The kernels are bench/sizes/kernels/gemm_rt.cu and the suite's programs turned runtime-sized
(bench/sizes/run_sizes.py does the same), ranked with `--hw h100`; each is ranked `--runs` times on a fresh
FileContext (the prover's compiled binary cached, as after a first run) and the median kept.  `--files` names
a text file listing source files (one per line, optionally followed by -I folders); `swzc suggest` runs on all
of them at once, `--runs` times, and the median is kept.  Writes JSON to `--out`.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run_sizes import KERNELS, runtime_variant  # noqa: E402

from swzc.analysis.context import FileContext  # noqa: E402
from swzc.analysis.kernels import analyze  # noqa: E402
from swzc.frontend import source  # noqa: E402
from swzc.model.rank import Ranking  # noqa: E402
from swzc.pipeline.driver import rank_kernels  # noqa: E402
from swzc.target.hw import load as load_hw  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", default="")
    parser.add_argument("--swzc", default=str(Path(sys.executable).with_name("swzc")))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    hw = load_hw("h100")
    doc: dict = {"command": " ".join(sys.argv), "kernels": {}, "suggest": None}
    with tempfile.TemporaryDirectory() as folder:
        for name, (path, names, kernel) in KERNELS.items():
            target = Path(folder) / path.name
            target.write_text(runtime_variant(path.read_text(), names, kernel))
            times, sizes = [], 0
            for _ in range(args.runs + 1):  # the first fills the prover's cache
                src = source.load(str(target))
                started = time.perf_counter()
                ctx = FileContext(src)
                ranked = rank_kernels(ctx, analyze(ctx), hw, {})
                times.append(time.perf_counter() - started)
                sizes = max((len(r.sweep.points) for r in ranked.values() if isinstance(r, Ranking) and r.sweep), default=0)
            doc["kernels"][name] = {"median_s": round(statistics.median(times[1:]), 3), "sizes_ranked": sizes,
                                    "runs": [round(t, 3) for t in times[1:]]}
            print(f"{name:16} {doc['kernels'][name]['median_s']:6.2f} s  ({sizes} sizes)")
    if args.files:
        files: list[str] = []
        pairs: dict[tuple[str, str], None] = {}  # each (-I, folder) once
        for line in Path(args.files).read_text().splitlines():
            parts = shlex.split(line)
            if parts:
                files.append(parts[0])
                pairs.update(dict.fromkeys(zip(parts[1::2], parts[2::2])))
        command = [args.swzc, "suggest", "--hw", "h100", *files, *(x for pair in pairs for x in pair)]
        times = []
        for _ in range(args.runs + 1):
            started = time.perf_counter()
            subprocess.run(command, capture_output=True)
            times.append(time.perf_counter() - started)
        doc["suggest"] = {"files": len(files), "median_s": round(statistics.median(times[1:]), 2),
                          "runs": [round(t, 2) for t in times[1:]]}
        print(f"suggest on {len(files)} files: {doc['suggest']['median_s']:.2f} s")
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
