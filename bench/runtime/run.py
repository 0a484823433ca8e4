#!/usr/bin/env python3
"""A program with runtime sizes through `--bench-cmd`, on the GPU: does swzc, which can rank the kernel only
from one observed run, reach the gain of the best built-in order measured the same way?

    python3 -P bench/runtime/run.py --out DIR [--n 6144] [--runs 5]

1. swzc: `rewrite_file` with the user's program (`./gemm_runtime N`, built by nvcc), the default choice: one
   run under the launch interposer gives the grid and `n`, the L2 model ranks, the loop measures its
   candidates (program runs interleaved original, rewritten, original) and keeps a measured win.
2. The built-ins: every order of the family (swzc.passes.block_swizzle.family) forced with `--swizzle` and
   measured by the same program and rule; orders the loop measured are not measured twice.
Writes DIR/runtime.json and DIR/runtime.md; prints the table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

from swzc.verify.harness import gpu_name
from swzc.passes.block_swizzle import family
from swzc.pipeline.driver import Options, analyze_file, load_hw, rewrite_file
from swzc.verify.program import ProgramBench

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "gemm_runtime.cu"


def measure(options: Options) -> tuple[object, dict]:
    started = time.perf_counter()
    result = rewrite_file(str(SOURCE), options)
    bench = next((b for b in result.bench if b.kernel == "gemm_tiled"), None)
    attempts = [asdict(a) for a in bench.attempts] if bench else []
    return result, {"chosen": bench.chosen if bench else None, "reason": bench.reason if bench else result.outcomes[0].reason,
                    "attempts": attempts, "notes": list(result.notes), "seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--n", type=int, default=6144)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-iterations", type=int, default=4)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    hw = load_hw("h200")
    program = ProgramBench(f"./gemm_runtime {args.n}", "nvcc -O3 -arch=sm_90 -o gemm_runtime {file}", args.runs)
    base = Options(hw=hw, compile=False, bench=True, program=program, max_iterations=args.max_iterations)
    _, swzc = measure(base)
    measured = {a["candidate"]: a for a in swzc["attempts"]}
    _, analysis = analyze_file(str(SOURCE))
    kernel = next(k for k in analysis.kernels if k.name == "gemm_tiled")
    builtins = {}
    for spec in family(kernel, hw):
        if spec.name in measured:
            builtins[spec.name] = measured[spec.name]
            continue
        _, forced = measure(Options(hw=hw, compile=False, bench=True, program=program, swizzle=spec))
        builtins[spec.name] = forced["attempts"][0] if forced["attempts"] else {"candidate": spec.name, "reason": forced["reason"]}
    gains = {name: (a.get("speedup") or 1.0) - 1.0 for name, a in builtins.items() if a.get("correct")}
    best = max(gains, key=gains.get) if gains else None
    chosen = swzc["chosen"]
    mine = (measured[chosen]["speedup"] - 1.0) if chosen else 0.0
    commit = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    doc = {"device": gpu_name(), "date": time.strftime("%Y-%m-%d"), "commit": commit or "unknown",
           "command": f"python3 -P bench/runtime/run.py --out DIR --n {args.n} --runs {args.runs} --max-iterations {args.max_iterations}",
           "n": args.n, "swzc": swzc, "builtins": builtins, "best_builtin": best,
           "best_builtin_gain": gains.get(best) if best else None, "swzc_gain": mine,
           "share_of_best": (mine / gains[best]) if best and gains[best] > 0 else None}
    (out / "runtime.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "runtime.md").write_text(table(doc))
    print(table(doc))


def table(doc: dict) -> str:
    lines = [f"# A program with runtime sizes through --bench-cmd, on the {doc['device']} ({doc['date']}, commit {doc['commit']})", "",
             f"Command: `{doc['command']}`", "",
             f"swzc: {doc['swzc']['chosen'] or 'declined'} — {doc['swzc']['reason']}", ""]
    lines += [f"- {note}" for note in doc["swzc"]["notes"]]
    lines += ["", "| order | speedup | lower bound | A/A noise | correct | measured by |", "|---|---:|---:|---:|---|---|"]
    loop = {a["candidate"] for a in doc["swzc"]["attempts"]}
    for name, a in doc["builtins"].items():
        def f(v: float | None, fmt: str) -> str:
            return format(v, fmt) if isinstance(v, (int, float)) else "–"
        lines.append(f"| {name} | {f(a.get('speedup'), '.3f')} | {f(a.get('lower_bound'), '.3f')} | {f(a.get('noise'), '.2%')} | "
                     f"{'yes' if a.get('correct') else 'no'} | {'the loop' if name in loop else '--swizzle'} |")
    share, best = doc["share_of_best"], doc["best_builtin_gain"]
    lines += ["", f"Best built-in: {doc['best_builtin'] or 'none measured'}" + (f" ({best:+.1%})" if best is not None else "")
              + f"; swzc: {doc['swzc_gain']:+.1%}" + (f", {share:.0%} of the best built-in's gain." if share is not None else ".")]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
