#!/usr/bin/env python3
"""The choices of `swzc tune` (OUT/tune.json) beside those of the per-file loop (OUT/loop.json), kernel by
kernel, as bench/fleet/tune_vs_loop.sh left them: prints a Markdown table and writes OUT/compare.json.

    python3 bench/fleet/compare.py [OUT]        (default: $OUT, else ./fleet_out)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "fleet_out"))
    tune = json.loads((out / "tune.json").read_text())
    tuned = {(Path(j["file"]).name, j["kernel"]): j for j in tune["jobs"]}
    looped: dict[tuple[str, str], dict] = {}
    for doc in json.loads((out / "loop.json").read_text()):
        for kernel in doc.get("kernels", []):
            looped[(Path(doc["file"]).name, kernel["name"])] = kernel
    rows = []
    for key in sorted(set(tuned) | set(looped)):
        t, loop = tuned.get(key, {}), looped.get(key, {})
        t_choice = t.get("chosen") if t.get("status") == "rewritten" else None
        l_choice = loop.get("swizzle") if loop.get("status") == "rewritten" else None
        rows.append({"file": key[0], "kernel": key[1], "tune_status": t.get("status", "no job"), "tune": t_choice,
                     "tune_speedup": t.get("speedup"), "loop_status": loop.get("status", "not in the loop's output"),
                     "loop": l_choice, "same": t_choice == l_choice})
    (out / "compare.json").write_text(json.dumps({"summary": tune["summary"], "rows": rows}, indent=1) + "\n")
    print("| file | kernel | tune | tune's speedup | per-file loop | same choice |")
    print("|---|---|---|---:|---|---|")
    for r in rows:
        speed = f"{r['tune_speedup']:.3f}x" if r["tune_speedup"] else ""
        print(f"| {r['file']} | {r['kernel']} | {r['tune'] or r['tune_status']} | {speed} | {r['loop'] or r['loop_status']} | "
              f"{'yes' if r['same'] else 'no'} |")
    same = sum(r["same"] for r in rows)
    print(f"\n{same} of {len(rows)} kernels: the same choice")
    return 0 if same == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
