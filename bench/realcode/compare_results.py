#!/usr/bin/env python3
"""Compare two results of evaluate.py, file by file and kernel by kernel: did swzc do the same thing?

    python3 bench/realcode/compare_results.py BEFORE.json AFTER.json [--reasons]

For every file: the exit codes of analyze and rewrite, a timeout, a crash, a whole-file syntax error,
whether it changed, its compile status, and the SHA-256 of the rewritten output and of the patch.  For
every kernel (by file, name and line): its status in analyze and in rewrite, the order chosen (swizzle),
the adapter analyze and rewrite report, whether it was ranked by the L2 model and whether it was blind.
Kernels and files present in one result only are differences too, and so are results taken with other
settings (corpus commits, compile check, timeout).

Reasons (the hash of each kernel's reason, with the scratch folder's path taken out, and its category) may
be reworded without any change of behaviour: they are counted, and listed and failed on with --reasons
only; when both results are the full ones from the work folder, a changed reason is shown as its text.
Times are never compared.

Prints a table of differences (file:kernel, field, before, after).  Exit status: 0 when nothing that is
compared differs, 1 when something does, 2 when a result cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

# what the run was: results taken with other settings are not comparable kernel by kernel
SETTINGS = ("compile_check", "timeout")
# per file: (field shown, how it is read from the record)
FILE_FIELDS = (
    ("analyze exit", lambda r: r["analyze"]["exit"]),
    ("rewrite exit", lambda r: r["rewrite"]["exit"]),
    ("timed out", lambda r: r["timed_out"]),
    ("crash", lambda r: bool(r["crash"])),
    ("syntax error", lambda r: _syntax(r["syntax_error"])),
    ("error", lambda r: bool(r["error"])),
    ("changed", lambda r: r["changed"]),
    ("compile", lambda r: (r["compile"] or {}).get("status")),
    ("output written", lambda r: bool(r["output"])),
    ("output sha256", lambda r: r.get("output_sha256", "not recorded")),
    ("patch sha256", lambda r: r.get("patch_sha256", "not recorded")),
)
KERNEL_FIELDS = ("analyze_status", "status", "swizzle", "adapter", "rewrite_adapter", "ranked", "blind")
REASON_FIELDS = ("reason_sha256", "why")


def _syntax(site: dict | None) -> str | None:
    """A syntax rejection by where swzc and the harness put it (not by its message)."""
    if not site:
        return None
    return f"{':'.join(map(str, site.get('reported') or [])) or '?'} ({site.get('category', 'not located')})"


def load(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        _unreadable(f"cannot read {path}: {exc}")
    if not isinstance(doc, dict) or not isinstance(doc.get("records"), list) or "meta" not in doc:
        _unreadable(f"{path} is not a result of evaluate.py (no meta and records)")
    return doc


def _unreadable(message: str) -> None:
    print(f"compare_results.py: {message}", file=sys.stderr)
    raise SystemExit(2)


def kernels(record: dict) -> dict[str, dict]:
    """A file's kernels by name@line; a second kernel of the same name and line gets #2, and so on."""
    out: dict[str, dict] = {}
    for k in record["kernels"]:
        key = f"{k['name']}@{k['line']}"
        n = 1
        while (key if n == 1 else f"{key}#{n}") in out:
            n += 1
        out[key if n == 1 else f"{key}#{n}"] = k
    return out


Row = tuple[str, str, object, object]  # (file or file:kernel, field, before, after)


def _settings(before: dict, after: dict) -> Iterator[Row]:
    a, b = before["meta"], after["meta"]
    for field in SETTINGS:
        if a.get(field) != b.get(field):
            yield "(settings)", field, a.get(field), b.get(field)
    repos_a = {r["name"]: r["commit"] for r in a.get("repos", [])}
    repos_b = {r["name"]: r["commit"] for r in b.get("repos", [])}
    for name in sorted(set(repos_a) | set(repos_b)):
        if repos_a.get(name) != repos_b.get(name):
            yield "(settings)", f"{name} commit", repos_a.get(name, "absent"), repos_b.get(name, "absent")


def compare(before: dict, after: dict) -> tuple[list[Row], list[Row], int, int]:
    """(differences, reason differences, files compared, kernels compared)."""
    diffs: list[Row] = list(_settings(before, after))
    reasons: list[Row] = []
    files_a = {r["file"]: r for r in before["records"]}
    files_b = {r["file"]: r for r in after["records"]}
    n_files = n_kernels = 0
    for name in sorted(set(files_a) | set(files_b)):
        ra, rb = files_a.get(name), files_b.get(name)
        if ra is None or rb is None:
            diffs.append((name, "file", "present" if ra else "absent", "present" if rb else "absent"))
            continue
        n_files += 1
        for field, read in FILE_FIELDS:
            va, vb = read(ra), read(rb)
            if va != vb:
                diffs.append((name, field, va, vb))
        ka, kb = kernels(ra), kernels(rb)
        for key in sorted(set(ka) | set(kb)):
            where = f"{name}:{key}"
            a, b = ka.get(key), kb.get(key)
            if a is None or b is None:
                diffs.append((where, "kernel", "present" if a else "absent", "present" if b else "absent"))
                continue
            n_kernels += 1
            for field in KERNEL_FIELDS:
                if a.get(field) != b.get(field):
                    diffs.append((where, field, a.get(field), b.get(field)))
            for field in REASON_FIELDS:
                if field in a and field in b and a[field] != b[field]:
                    if field == "reason_sha256" and "reason" in a and "reason" in b:  # full results: show the text
                        reasons.append((where, "reason", a["reason"], b["reason"]))
                    else:
                        reasons.append((where, field, a[field], b[field]))
    return diffs, reasons, n_files, n_kernels


def _shown(value: object, width: int = 40) -> str:
    text = "–" if value is None else str(value)
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
        return text[:12]  # a SHA-256: its start tells two apart
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= width else text[:width - 1] + "…"


def table(rows: list[Row], limit: int) -> list[str]:
    out = ["| file:kernel | field | before | after |", "|---|---|---|---|"]
    out += [f"| {w} | {f} | {_shown(a)} | {_shown(b)} |" for w, f, a, b in rows[:limit]]
    if len(rows) > limit:
        out.append(f"| … and {len(rows) - limit} more | | | |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before", type=Path, help="evaluate.py's OUT.json (or the work folder's realcode_full.json) before")
    ap.add_argument("after", type=Path, help="the same after")
    ap.add_argument("--reasons", action="store_true",
                    help="list the kernels whose reason differs, and fail on them as well")
    ap.add_argument("--limit", type=int, default=100, metavar="N", help="rows shown per table (default 100)")
    args = ap.parse_args(argv)
    before, after = load(args.before), load(args.after)
    diffs, reasons, n_files, n_kernels = compare(before, after)
    a, b = before["meta"], after["meta"]
    print(f"before: {args.before} (swzc {a.get('swzc_commit', '?')}, {a.get('date', '?')})")
    print(f"after:  {args.after} (swzc {b.get('swzc_commit', '?')}, {b.get('date', '?')})")
    print(f"{n_files} files and {n_kernels} kernels in both compared.")
    if diffs:
        print(f"\n{len(diffs)} differences:\n")
        print("\n".join(table(diffs, args.limit)))
    else:
        print("No difference in statuses, chosen orders, adapters, exit codes or output hashes.")
    if reasons and args.reasons:
        print(f"\n{len(reasons)} reason differences:\n")
        print("\n".join(table(reasons, args.limit)))
    elif reasons:
        print(f"{len(reasons)} reason differences (kernels whose reason is worded otherwise; --reasons lists them "
              "and fails on them).")
    else:
        print("Reasons: the same.")
    return 1 if diffs or (reasons and args.reasons) else 0


if __name__ == "__main__":
    sys.exit(main())
