#!/usr/bin/env python3
"""`swzc suggest` on 20 real files, as a hook or a developer runs it over a tree: cold (SWZC_NO_CACHE=1, every
figure computed) and warm (the results cache filled by an earlier run on the same files), one file at a time
and with -j 2, a fresh process each run, the modes interleaved run by run.

    python3 bench/hook/suggest_files.py [--runs 5] [--mirrors /work/.mirror] [--swzc PATH] [--out FILE]

The files (bench/hook/files20.txt) are copied from local git copies of their repositories (bare mirrors
`<owner>+<name>/repo` or clones `<owner>/<name>` under --mirrors, as bench/realcode/evaluate.py takes them):
each file's folder and the include folders its line names, into a private temporary folder.  The results
cache lives in a private folder of the run's own (XDG_CACHE_HOME), filled by one untimed run before the
warm ones; the prover is built there by an untimed run first.  Every run's output must be the same, byte for
byte; the script fails otherwise.  Prints a table and writes JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _git(mirror: Path, *args: str) -> subprocess.CompletedProcess:
    where = ["--git-dir", str(mirror)] if mirror.name == "repo" else ["-C", str(mirror)]
    return subprocess.run(["git", *where, *args], capture_output=True, check=False)


def _copy(mirror: Path, folder: str, into: Path) -> None:
    """Every readable file directly in `folder` of the repository's HEAD (headers beside the file, a folder of -I)."""
    listing = _git(mirror, "ls-tree", "-r", "-z", "HEAD", "--", folder).stdout.split(b"\0")
    for entry in filter(None, listing):
        meta, path = entry.split(b"\t", 1)
        mode, kind, sha = meta.split()
        if kind != b"blob" or mode == b"120000":
            continue
        blob = _git(mirror, "cat-file", "blob", sha.decode())
        if blob.returncode == 0:
            target = into / os.fsdecode(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blob.stdout)


def _mirror(root: Path, repo: str) -> Path:
    for candidate in (root / repo.replace("/", "+") / "repo", root / repo):
        if candidate.exists():
            return candidate
    raise SystemExit(f"no local copy of {repo} under {root}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--mirrors", default="/work/.mirror")
    parser.add_argument("--swzc", default=str(Path(sys.executable).with_name("swzc")))
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tree, cache = Path(scratch) / "files", Path(scratch) / "cache"
        files: list[str] = []
        includes: dict[str, None] = {}
        for line in (HERE / "files20.txt").read_text().splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            repo, path, *flags = shlex.split(line)
            mirror, base = _mirror(Path(args.mirrors), repo), tree / repo.replace("/", "+")
            folders = [os.path.dirname(path), *flags[1::2]]
            for folder in folders:
                _copy(mirror, folder, base)
            files.append(str(base / path))
            includes.update(dict.fromkeys(str(base / d) for d in flags[1::2]))
        command = [args.swzc, "suggest", "--hw", "h100", *files, *(w for d in includes for w in ("-I", d))]
        env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
        env.pop("SWZC_NO_CACHE", None)
        cold_env = {**env, "SWZC_NO_CACHE": "1"}
        subprocess.run(command, env=env, capture_output=True, cwd=scratch)  # builds the prover and fills the results cache
        modes = {"cold_j1": (command, cold_env), "warm_j1": (command, env),
                 "cold_j2": ([*command, "-j", "2"], cold_env), "warm_j2": ([*command, "-j", "2"], env)}
        times: dict[str, list[float]] = {m: [] for m in modes}
        outputs: set[bytes] = set()
        for _ in range(args.runs):
            for mode, (cmd, run_env) in modes.items():
                started = time.perf_counter()
                done = subprocess.run(cmd, env=run_env, capture_output=True, cwd=scratch)
                times[mode].append(time.perf_counter() - started)
                outputs.add(done.stdout)
                if done.returncode not in (0, 1):
                    raise SystemExit(f"{mode}: exit {done.returncode}\n{done.stderr.decode(errors='replace')}")
        if len(outputs) != 1:
            raise SystemExit("the runs printed different suggestions")
    doc = {"command": " ".join(["python3", *sys.argv]), "files": len(files), "cpus": len(os.sched_getaffinity(0)),
           "suggestions": outputs.pop().decode().count("\n"),
           "modes": {m: {"median_s": round(statistics.median(t), 2), "runs": [round(x, 2) for x in t]} for m, t in times.items()}}
    for mode, got in doc["modes"].items():
        print(f"{mode:8} {got['median_s']:6.2f} s  {got['runs']}")
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
