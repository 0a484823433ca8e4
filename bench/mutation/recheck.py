"""Run a results file's survivors again against whole test files, named per module.

The driver (run.py) runs each mutant with the tests its coverage pass says reach the mutated line.  A
module-level mutant (a table of rules, a constant) runs before any test, so that selection can miss the tests
that depend on it.  This re-check applies each survivor in a private copy of the repository (run.py's) and runs
the named test files in full, with -x; a failing test kills it.  Outcomes replace the earlier ones through
merge.py.

    .venv/bin/python bench/mutation/recheck.py RESULTS.json --at COMMIT --json LATER.json --md LATER.md
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run  # noqa: E402  (the driver: targets, mutants, private copies, results)

# The test files that exercise each module, run whole.
_RESTRICT = ("tests/test_mutation_kills_restrict.py", "tests/test_llm_restrict.py", "tests/test_one_text.py",
             "tests/test_llm_proposer.py", "tests/test_custom_formulas.py")
TESTS = {
    **{name: _RESTRICT for name in ("restrict", "restrict_text", "restrict_tree", "restrict_words", "restrict_numbers",
                                    "restrict_violation")},
    "prove": ("tests/test_prover_edges.py", "tests/test_prover_cache.py", "tests/test_sandbox.py", "tests/test_one_text.py",
              "tests/test_prove.py", "tests/test_deep_input.py"),
    "sandbox": ("tests/test_sandbox.py", "tests/test_prover_cache.py"),
    "config": ("tests/test_config.py", "tests/test_bounded_inputs.py", "tests/test_cli.py"),
    "processes": ("tests/test_compiler_arguments.py", "tests/test_processes.py", "tests/test_compile_check.py"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results")
    parser.add_argument("--at", help="mutate and test this commit (as run.py --at)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", required=True)
    parser.add_argument("--md", required=True)
    args = parser.parse_args()
    earlier = json.loads(Path(args.results).read_text())
    explained = run.load_explained()
    wanted = {m["id"] for m in earlier["mutants"]
              if m["status"] in ("survived", "uncovered", "error") and m["id"] not in explained and m["target"] in TESTS}
    targets = {t.name: t for t in run.TARGETS if t.name in TESTS}
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="swzc-recheck-") as base:
        sandboxes = [run.Sandbox(Path(base), i, at=args.at) for i in range(max(1, min(2, args.workers)))]
        mutants = [m for t in targets.values() for m in run.mutants_of(t, sandboxes[0].repo) if m.id in wanted]

        free: queue.Queue[run.Sandbox] = queue.Queue()
        for sandbox in sandboxes:
            free.put(sandbox)

        def one(job: tuple[int, run.Mutant]) -> run.Outcome:
            sandbox = free.get()  # a copy no other mutant is applied to
            try:
                return _one(job, sandbox)
            finally:
                free.put(sandbox)

        def _one(job: tuple[int, run.Mutant], sandbox: run.Sandbox) -> run.Outcome:
            index, mutant = job
            files = [f for f in TESTS[mutant.target] if (sandbox.repo / f).exists()]
            path = sandbox.repo / mutant.path
            original = path.read_bytes()
            scratch = Path(base) / f"m{index}"
            try:
                path.write_bytes(original[: mutant.start] + mutant.replacement + original[mutant.end:])
                scratch.mkdir()
                env = sandbox.env(scratch)
                status, code, tail, seconds = sandbox.pytest([*files, "-x", *run._deselect_args()], env, args.timeout)
            finally:
                path.write_bytes(original)
            if status == "timeout":
                outcome = run.Outcome(mutant, "timeout", seconds=seconds, detail="past the limit")
            elif code in (1, 2):
                found = run._FAILED.search(tail)
                outcome = run.Outcome(mutant, "killed", 0, found.group(1) if found else f"pytest exit {code}", seconds)
            else:
                outcome = run.Outcome(mutant, "survived", seconds=seconds)
            print(f"[{index + 1}/{len(mutants)}] {outcome.status:<9} {mutant.path}:{mutant.line} {mutant.description[:70]}", flush=True)
            return outcome

        with ThreadPoolExecutor(len(sandboxes)) as pool:
            outcomes = list(pool.map(one, enumerate(mutants)))
    meta = {**earlier["meta"], "command": " ".join(["bench/mutation/recheck.py", *sys.argv[1:]]), "wall_s": time.time() - start,
            "commit": args.at or earlier["meta"]["commit"],
            "covered": f"the unexplained survivors of {args.results}, each against whole test files"}
    run.write_results(outcomes, explained, meta, Path(args.json), Path(args.md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
