"""Fold a later run over some mutants (e.g. `run.py --survivors-of …`) into a full run's results.

A mutant's later outcome replaces its earlier one; every other mutant keeps its outcome from the full
run, which stays valid only while the code those mutants live in is unchanged: give `--unchanged` the
modules whose files did not change between the two commits, and the merge refuses a later outcome of a
mutant in any other module.  The markdown says which run each part comes from.

    python bench/mutation/merge.py bench/results/mutation.json LATER.json --unchanged tileloop \
        --json bench/results/mutation.json --md bench/results/mutation.md
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run  # noqa: E402  (the driver: its summary and markdown)


def merge(full: dict, later: list[dict], unchanged: set[str]) -> dict:
    by_id = {m["id"]: m for m in full["mutants"]}
    for doc in later:
        for m in doc["mutants"]:
            if m["target"] not in unchanged:
                raise SystemExit(f"{m['id']}: module {m['target']} is not declared unchanged (--unchanged)")
            if m["id"] not in by_id:
                raise SystemExit(f"{m['id']}: not in the full run")
            by_id[m["id"]] = m
    explained = run.load_explained()
    outcomes = [SimpleNamespace(mutant=SimpleNamespace(id=m["id"], target=m["target"]), status=m["status"]) for m in by_id.values()]
    mutants = []
    for m in by_id.values():
        alive = m["status"] in ("survived", "uncovered", "error")
        mutants.append({**m, "equivalent": m["id"] in explained and alive, "explanation": explained.get(m["id"], {}).get("why", "")})
    runs = [f"{full['meta']['command']} at {full['meta']['commit']}"]
    runs += [f"{d['meta']['command']} at {d['meta']['commit']} (replacing those mutants' outcomes)" for d in later]
    meta = {**full["meta"], "covered": "all mutants; " + "; then ".join(runs), "merged_from": runs,
            "wall_s": full["meta"]["wall_s"] + sum(d["meta"]["wall_s"] for d in later)}
    return {"meta": meta, "summary": run.summarise(outcomes, explained),  # type: ignore[arg-type]
            "mutants": sorted(mutants, key=lambda m: (m["path"], m["line"], m["id"]))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("full")
    parser.add_argument("later", nargs="+")
    parser.add_argument("--unchanged", action="append", default=[], help="a module whose code is the same in every run")
    parser.add_argument("--json", required=True)
    parser.add_argument("--md", required=True)
    args = parser.parse_args()
    doc = merge(json.loads(Path(args.full).read_text()), [json.loads(Path(p).read_text()) for p in args.later], set(args.unchanged))
    Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    Path(args.md).write_text(run._markdown(doc))
    for name, c in doc["summary"]["targets"].items():
        print(f"{name:<16} {c['score']:5.1f} %  ({c['killed'] + c['timeout']} of {c['mutants'] - c['equivalent']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
