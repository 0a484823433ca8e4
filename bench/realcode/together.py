#!/usr/bin/env python3
"""Each repository of the public corpus read in one `swzc suggest` run, as a hook or a developer runs it over a
tree, by two builds of swzc: what changes when the files of a run are read together (a header's kernels with the
launches of the files that include it).

    python3 bench/realcode/together.py --swzc NEW --baseline OLD [--mirrors /work/.mirror] [--work DIR]
                                       [--out bench/results/realcode_together]

The corpus is bench/realcode/corpus.toml, copied out as bench/realcode/evaluate.py copies it.  Per repository, both
builds run `suggest --json --exit-zero -j 2` with the repository's -I and -D over all its corpus files at once
(the baseline first, then the new one).  Counted per repository and in all: kernels by status, internal errors
and tracebacks (there must be none), and every kernel whose status or suggestion differs between the two, with
what each build said (its status, or the order it suggested: no reason's words, which quote the files).  Writes
OUT.json and OUT.md, which name files and kernels and give counts only.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evaluate import extract, load_corpus  # noqa: E402  (the corpus and its copy, as evaluate.py makes them)

HERE = Path(__file__).resolve().parent


def suggest(swzc: str, root: Path, files: list[str], flags: tuple[str, ...], timeout: float) -> tuple[dict, float, str]:
    """One `suggest --json` run over `files` (relative to `root`): its document, wall time and stderr."""
    start = time.perf_counter()
    done = subprocess.run([swzc, "suggest", "--json", "--exit-zero", "-j", "2", *flags, "--", *files], cwd=root,
                          capture_output=True, timeout=timeout, check=False)
    wall = time.perf_counter() - start
    try:
        doc = json.loads(done.stdout)
    except json.JSONDecodeError:
        doc = {"files": [], "unreadable": done.stdout[-2000:].decode("utf-8", "replace")}
    return doc, wall, done.stderr.decode("utf-8", "replace")


def kernels(doc: dict) -> dict[tuple[str, str, int], dict]:
    return {(f["file"], k["name"], k["line"]): k for f in doc.get("files", []) for k in f.get("kernels", [])}


def said(kernel: dict | None) -> str:
    """A kernel's answer, without the reason's words (which quote the file): its status, or the order suggested
    and the launch it was read with where that is another file's."""
    if kernel is None:
        return "absent"
    if kernel.get("suggestion"):
        s = kernel["suggestion"]
        swept = s.get("swept") or ""
        launch = swept.rpartition("its launch at ")[2] if "its launch at " in swept else ""
        return f"suggested {s['swizzle']}" + (f" (read with its launch at {launch})" if launch else "")
    return kernel["status"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--swzc", required=True)
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--mirrors", default="/work/.mirror")
    parser.add_argument("--work")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--out", default="bench/results/realcode_together")
    parser.add_argument("--names", default="baseline,new", help="what the two builds are, for the report (e.g. two commits)")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="swzc-together-"))
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="swzc-together-cache-")  # no figures from an earlier run
    log: list[str] = []
    files, repos = extract(load_corpus(HERE / "corpus.toml"), Path(args.mirrors), work, log)
    by_repo: dict[str, list] = collections.defaultdict(list)
    for f in files:
        by_repo[f.repo].append(f)
    rows, changes, errors = [], [], []
    totals = {"baseline": collections.Counter(), "new": collections.Counter()}
    for repo in repos:
        group = by_repo[repo["name"]]
        root, flags = group[0].root, group[0].flags
        names = [f.path for f in group]
        runs = {}
        for which, swzc in (("baseline", args.baseline), ("new", args.swzc)):
            doc, wall, stderr = suggest(swzc, root, names, flags, args.timeout)
            runs[which] = (kernels(doc), wall)
            statuses = collections.Counter(k["status"] for k in runs[which][0].values())
            totals[which].update(statuses)
            bad = [line for line in stderr.splitlines() if "internal error" in line or "Traceback" in line]
            bad += [f["error"] for f in doc.get("files", []) if "internal error" in (f.get("error") or "")]
            errors += [{"repo": repo["name"], "build": which, "message": m[:300]} for m in bad]
            rows.append({"repo": repo["name"], "build": which, "files": len(names), "kernels": sum(statuses.values()),
                         "statuses": dict(statuses), "wall_s": round(wall, 1)})
        before, after = runs["baseline"][0], runs["new"][0]
        for key in sorted(set(before) | set(after)):
            if said(before.get(key)) != said(after.get(key)):
                changes.append({"repo": repo["name"], "file": key[0], "kernel": key[1], "line": key[2],
                                "baseline": said(before.get(key)), "new": said(after.get(key))})
    summary = {"command": " ".join(["python3 bench/realcode/together.py", "--swzc", args.swzc, "--baseline", args.baseline,
                                    "--names", args.names]),
               "repos": repos, "runs": rows, "totals": {k: dict(v) for k, v in totals.items()}, "changes": changes,
               "errors": errors, "log": log}
    Path(args.out + ".json").write_text(json.dumps(summary, indent=1) + "\n")
    lines = ["# The corpus, each repository in one `swzc suggest` run: baseline against new", "",
             f"Command: `{summary['command']}` (baseline: {args.names.split(',')[0]}; new: {args.names.split(',')[-1]}); a "
             "results cache of the run's own, empty at its start: each build's figures computed afresh.", "",
             "| repository | files | kernels | baseline: suggested / declined / unranked | new: suggested / declined / unranked | wall s (baseline / new) |",
             "|---|---:|---:|---|---|---|"]
    for base, new in zip(rows[::2], rows[1::2]):
        b, n = base["statuses"], new["statuses"]
        lines.append(f"| {base['repo']} | {base['files']} | {base['kernels']} | {b.get('suggested', 0)} / {b.get('declined', 0)} / "
                     f"{b.get('unranked', 0)} | {n.get('suggested', 0)} / {n.get('declined', 0)} / {n.get('unranked', 0)} | "
                     f"{base['wall_s']} / {new['wall_s']} |")
    tb, tn = totals["baseline"], totals["new"]
    lines += ["", f"In all: suggested {tb['suggested']} → {tn['suggested']}, declined {tb['declined']} → {tn['declined']}, "
              f"unranked {tb['unranked']} → {tn['unranked']}; internal errors or tracebacks: {len(errors)}.", "",
              f"## The {len(changes)} kernels whose answer changed", "", "| repository | file:line | kernel | baseline | new |",
              "|---|---|---|---|---|"]
    lines += [f"| {c['repo']} | {c['file']}:{c['line']} | {c['kernel']} | {c['baseline'].replace('|', '/')} | "
              f"{c['new'].replace('|', '/')} |" for c in changes]
    if log:
        lines += ["", "Log:", *[f"- {entry}" for entry in log]]
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
