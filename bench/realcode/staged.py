#!/usr/bin/env python3
"""Which kernels of the public corpus stage their reads through shared memory behind a barrier.

    python3 bench/realcode/staged.py [--mirrors /work/.mirror] [--out bench/results/realcode_staged.md]

The files are bench/realcode/corpus.toml's, read straight from each repository's local git copy (as
evaluate.py finds it) and never written anywhere.  For every kernel swzc's analysis finds, it asks
swzc.model.footprint.stages_reads, the test the L2 model's request-coalescing term depends on, and writes the
count and the staged kernels.  Nothing is compiled or run.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from swzc.frontend import source
from swzc.analysis.kernels import analyze
from swzc.model.footprint import stages_reads
from swzc.analysis.context import FileContext

from evaluate import extract, load_corpus  # noqa: E402  (bench/realcode is the script's folder)

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", default=str(HERE / "corpus.toml"))
    parser.add_argument("--mirrors", default="/work/.mirror")
    parser.add_argument("--out", default="bench/results/realcode_staged.md")
    args = parser.parse_args()
    start = time.perf_counter()
    log: list[str] = []
    rows, kernels, files_read = [], 0, 0
    with tempfile.TemporaryDirectory() as scratch:
        files, repos = extract(load_corpus(Path(args.corpus)), Path(args.mirrors), Path(scratch), log)
        for f in files:
            src = source.load_bytes(f.name, f.local.read_bytes())
            ctx = FileContext(src)
            files_read += 1
            for kernel in analyze(ctx).kernels:
                kernels += 1
                if stages_reads(src, kernel):
                    rows.append((f.repo, f.path, kernel.name, kernel.line))
    lines = ["# Kernels of the public corpus that stage their reads", "",
             f"`python3 bench/realcode/staged.py` ({time.perf_counter() - start:.1f} s): {files_read} files of "
             f"{', '.join(r['name'] + ' @ ' + r['commit'][:12] for r in repos)}.", "",
             f"{len(rows)} of {kernels} kernels stage their reads: a loop copies global data into shared memory "
             "and waits at a block barrier (swzc.model.footprint.stages_reads). The L2 model's request-coalescing term "
             "applies to these only.", "", "| repository | file | kernel | line |", "|---|---|---|---:|"]
    lines += [f"| {repo} | {path} | {name} | {line} |" for repo, path, name, line in rows]
    lines += ["", *(f"- {entry}" for entry in log)]
    Path(args.out).write_text("\n".join(lines).rstrip() + "\n")
    print(f"{len(rows)} of {kernels} kernels staged ({files_read} files); wrote {args.out}")


if __name__ == "__main__":
    main()
