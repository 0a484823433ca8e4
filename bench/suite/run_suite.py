#!/usr/bin/env python3
"""The suite on the GPU: per kernel the baseline, swzc (the acceptance loop's result), expert (grouped:8)
and oracle (every built-in candidate measured, the fastest correct one taken).

    python3 bench/suite/run_suite.py --out DIR [--kernels a,b] [--rounds 20] [--max-iterations 4]
    python3 bench/suite/run_suite.py --out DIR --merge RUN1/h200.json RUN2/h200.json   # runs of kernel subsets

Runs where swzc, nvcc and a CUDA GPU are (and ncu, for the L2 hit rates).  Every variant is built as in
`swzc rewrite --bench` (swzc.verify.harness) and judged by the same rule (swzc.verify.accept).  The oracle's variants
are built in parallel first, then timed one at a time; the swzc arm runs the real loop
(swzc.pipeline.driver.rewrite_benchmarked).  Writes DIR/h200.json (the schema in bench/suite/README.md),
DIR/h200.md and DIR/attempts.json, and prints the table.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from swzc.passes import block_swizzle

from swzc.frontend import source
from swzc.verify.accept import judge
from swzc.analysis.kernels import analyze
from swzc.verify.bench import profile
from swzc.core.errors import SwzcError
from swzc.model.footprint import tile_grid
from swzc.verify.harness import build, gpu_name, load_spec, plan_launch, run_harness
from swzc.target.hw import load as load_hw
from swzc.pipeline.driver import Options, RunPlan, rewrite_benchmarked, rewrite_source
from swzc.model.rank import candidates
from swzc.formulas.swizzles import parse_spec
from swzc.analysis.context import FileContext

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "bench" / "suite" / "kernels"
EXPERT = "grouped:8"
SPECS = str(ROOT / "bench" / "suite" / "launch_specs.toml")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--kernels", default="")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--max-iterations", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--merge", nargs="+", default=[], help="join the h200.json (and attempts.json) of runs on subsets")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.merge:
        print(merge(out, [Path(p) for p in args.merge]))
        return
    hw = load_hw("h200")
    files = sorted(KERNELS.glob("*.cu"))
    if args.kernels:
        files = [f for f in files if f.stem in args.kernels.split(",")]
    records, attempts_log = [], []
    for path in files:
        src = source.load(str(path))
        ctx = FileContext(src)
        analysis = analyze(ctx)
        for index, kernel in enumerate(analysis.kernels):
            started = time.perf_counter()
            record = {"name": kernel.name, "file": path.name}
            refused = block_swizzle.refusal(analysis, index)
            launch = next((la for la in kernel.launches if la.grid is not None), None)
            if refused is not None or launch is None:
                record.update(note=refused.reason if refused else "no launch with a known grid")
                records.append(record)
                continue
            # a tile loop's swizzle permutes the tiles it walks, not the blocks: its candidates fit the tile space
            space = (launch.tiles, 1, 1) if kernel.tile_loop is not None and launch.tiles else launch.grid
            tiles = tile_grid(space, kernel.adapter, launch.divisor)
            names = [s.name for s in candidates(kernel.adapter, tiles, hw) if s.name != "identity"]
            try:
                plan = plan_launch(ctx, kernel, load_spec(SPECS, kernel.name))
            except SwzcError as exc:
                record.update(note=f"not benchmarked: {exc.message}")
                records.append(record)
                continue

            def variant(name: str, index: int = index) -> bytes:
                options = Options(hw=hw, compile=False)
                return rewrite_source(ctx, analysis, options, RunPlan(only={index: parse_spec(name)})).new

            sources = {n: variant(n) for n in names}
            names = [n for n in names if sources[n] != src.data]  # a swizzle that is the identity on this grid
            if not names:  # nothing to try: time the original against itself for the baseline
                names, sources = ["identity"], {"identity": src.data}
            folder = out / "build" / f"{path.stem}.{kernel.name}"

            def make(name: str) -> tuple[str, object]:
                try:
                    return name, build(f"{path.stem}_{name.replace(':', '_').replace('+', '-')}.cu", src.data, sources[name], plan,
                                       hw.arch, hw.flush_bytes, str(KERNELS), folder / name.replace(":", "_").replace("+", "-"))
                except SwzcError as exc:
                    return name, exc

            with ThreadPoolExecutor(args.jobs) as pool:
                builds = dict(pool.map(make, names))
            measured = {}
            for name in names:
                built = builds[name]
                if isinstance(built, SwzcError):
                    attempts_log.append({"kernel": kernel.name, "candidate": name, "error": built.message[:500]})
                    continue
                try:
                    result = run_harness(built, args.rounds)
                except SwzcError as exc:
                    attempts_log.append({"kernel": kernel.name, "candidate": name, "error": exc.message[:500]})
                    continue
                if result.failed:  # the check crashed or timed out: not a verdict on the candidate's outputs
                    attempts_log.append({"kernel": kernel.name, "candidate": name, "error": f"the check failed: {result.detail[:500]}"})
                    continue
                verdict = judge(result.timing, True) if result.correct and result.timing else None
                measured[name] = (result, verdict, built)
                attempts_log.append({"kernel": kernel.name, "candidate": name, "correct": result.correct,
                                     "detail": result.detail, "speedup": verdict.speedup if verdict else None,
                                     "lower": verdict.lower if verdict else None, "noise": verdict.noise if verdict else None,
                                     "baseline_ms": verdict.baseline_ms if verdict else None,
                                     "ms": verdict.candidate_ms if verdict else None})
            ok = {n: v for n, (r, v, _) in measured.items() if r.correct and v is not None and n != "identity"}
            if "identity" in measured and measured["identity"][1] is not None:
                baseline_only = measured["identity"][1].baseline_ms
            else:
                baseline_only = None
            baseline_ms = statistics.median(v.baseline_ms for v in ok.values()) if ok else baseline_only
            best = max(ok, key=lambda n: ok[n].speedup) if ok else None
            oracle_ms = baseline_ms / ok[best].speedup if best and ok[best].speedup > 1 else baseline_ms
            expert_ms = baseline_ms / ok[EXPERT].speedup if EXPERT in ok else None
            oracle_name = best if best and ok[best].speedup > 1 else "identity"
            # the swzc arm: the real acceptance loop on this kernel alone
            loop_started = time.perf_counter()
            loop_options = Options(hw=hw, compile=False, bench=True, max_iterations=args.max_iterations, rounds=args.rounds,
                                   launch_spec=SPECS)
            final = rewrite_benchmarked(ctx, analysis, loop_options, kernels={index})
            mine = next((b for b in final.bench if b.kernel == kernel.name), None)
            loop_seconds = time.perf_counter() - loop_started
            chosen = mine.chosen if mine else None
            attempt = next((a for a in mine.attempts if a.candidate == chosen), None) if mine else None
            swzc_ms = baseline_ms / attempt.speedup if attempt and attempt.speedup else baseline_ms
            base_hit = chosen_hit = None
            if chosen and chosen in measured:
                base_hit, _ = profile(measured[chosen][2], "a")
                chosen_hit, _ = profile(measured[chosen][2], "b")
            elif measured:
                base_hit, _ = profile(next(iter(measured.values()))[2], "a")
                chosen_hit = base_hit
            correct = all(r.correct for r, _, _ in measured.values())
            record.update(
                baseline_ms=baseline_ms, swzc_ms=swzc_ms, swzc_swizzle=chosen or "identity", oracle_ms=oracle_ms,
                oracle_swizzle=oracle_name, expert_ms=expert_ms, baseline_l2_hit=base_hit, swzc_l2_hit=chosen_hit,
                correct=correct, accepted=chosen is not None, loop_seconds=round(loop_seconds, 1),
                swzc_reason=mine.reason if mine else final.outcomes[index].reason, candidates_measured=len(ok),
                seconds=round(time.perf_counter() - started, 1),
            )
            records.append(record)
            print(json.dumps(record), flush=True)
            save(out, records, attempts_log)  # after every kernel: a run cut short keeps what it measured
    print(table(save(out, records, attempts_log)))


def save(out: Path, records: list, attempts_log: list) -> dict:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    command = "python3 -P bench/suite/run_suite.py " + shlex.join(sys.argv[1:])
    doc = {"device": gpu_name(), "date": time.strftime("%Y-%m-%d"), "commit": commit or "unknown", "command": command,
           "kernels": records}
    (out / "h200.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "attempts.json").write_text(json.dumps(attempts_log, indent=1) + "\n")
    (out / "h200.md").write_text(table(doc))
    return doc


def merge(out: Path, runs: list[Path]) -> str:
    """One document from runs on kernel subsets (same commit and device), kernels in run order."""
    docs = [json.loads(p.read_text()) for p in runs]
    if len({(d["commit"], d["device"]) for d in docs}) != 1:
        raise SystemExit("--merge: the runs differ in commit or device")
    attempts = [a for p in runs if (p.parent / "attempts.json").exists() for a in json.loads((p.parent / "attempts.json").read_text())]
    commands = [d.get("command", "") for d in docs] + ["python3 bench/suite/run_suite.py --out DIR --merge RUN.../h200.json"]
    doc = {**docs[0], "command": " ; ".join(c for c in commands if c), "kernels": [k for d in docs for k in d["kernels"]]}
    (out / "h200.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "h200_attempts.json").write_text(json.dumps(attempts, indent=1) + "\n")
    (out / "h200.md").write_text(table(doc))
    return table(doc)


def table(doc: dict) -> str:
    def ms(v: float | None) -> str:
        return f"{v:.3f}" if isinstance(v, (int, float)) else "–"

    def pct(v: float | None) -> str:
        return f"{v:.1f}" if isinstance(v, (int, float)) else "–"

    lines = [f"# The suite on the {doc['device']} ({doc['date']}, commit {doc['commit']})", "",
             f"Command: `{doc.get('command', '')}`", "",
             "| kernel | baseline ms | swzc | swzc ms | expert (grouped:8) ms | oracle | oracle ms | L2 hit base → swzc | correct | accepted |",
             "|---|---:|---|---:|---:|---|---:|---|---|---|"]
    for k in doc["kernels"]:
        if k.get("baseline_ms") is None:
            lines.append(f"| {k['name']} | – | – | – | – | – | – | – | – | {k.get('note') or k.get('swzc_reason', '')} |")
            continue
        lines.append(f"| {k['name']} | {ms(k['baseline_ms'])} | {k['swzc_swizzle']} | {ms(k['swzc_ms'])} | {ms(k['expert_ms'])} | "
                     f"{k['oracle_swizzle']} | {ms(k['oracle_ms'])} | {pct(k['baseline_l2_hit'])} → {pct(k['swzc_l2_hit'])} | "
                     f"{'yes' if k['correct'] else 'NO'} | {'yes' if k['accepted'] else 'no'} |")
    lines += ["", "## Against the targets", "",
              "| kernel | oracle gain | swzc gain | share of the oracle's gain | loop seconds | why swzc chose what it did |",
              "|---|---:|---:|---:|---:|---|"]
    for k in doc["kernels"]:
        if k.get("baseline_ms") is None:
            continue
        oracle, mine = k["baseline_ms"] / k["oracle_ms"] - 1, k["baseline_ms"] / k["swzc_ms"] - 1
        share = f"{mine / oracle:.0%}" if oracle > 0.03 else "–"
        lines.append(f"| {k['name']} | {oracle:+.1%} | {mine:+.1%} | {share} | {k['loop_seconds']:.1f} | "
                     f"{k['swzc_reason'].replace('|', '/')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
