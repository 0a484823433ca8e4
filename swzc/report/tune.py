"""What `swzc tune` reports: each job's line (its kernel, the card model, what the loop chose and measured, or why
it was left alone, or that it is not tuned yet), a summary of the run, and the same as one JSON document.

The entries are plain records (swzc.fleet.results.Found.as_dict): this module reads no store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from swzc.core import clean
from swzc.verify.harness import ANY_CARD


def line(entry: Mapping[str, Any]) -> str:
    """One job: `file:line kernel [on CARD]: what was chosen, or why not`."""
    where = f"{entry['file']}:{entry['line']} {entry['kernel']}" + ("" if entry["card"] == ANY_CARD else f" on {entry['card']}")
    status = entry["status"]
    if status == "not tuned":
        return clean.text(f"{where}: not tuned yet")
    measured = f"measured on {entry['measured_on']}" + (f" ({entry['host']})" if entry.get("host") else "")
    if status == "rewritten":
        gain = ""
        if entry.get("speedup") is not None:
            gain = f" {entry['speedup']:.3f}x" + (f" at size {entry['size']}" if entry.get("size") else "")
        return clean.text(f"{where}: {entry['chosen']}{gain}, {measured}")
    reason = " ".join(str(entry.get("reason") or "").split())
    return clean.text(f"{where}: {status}: {reason[:300]}" + ("…" if len(reason) > 300 else "") + f" ({measured})")


def summary(counts: Mapping[str, int], store: str) -> str:
    """The run in one line: how many jobs, found stored, measured now, not finished."""
    if "measured" in counts:
        parts = [f"{counts['jobs']} job(s)", f"{counts['stored_before']} already stored (not measured again)",
                 f"{counts['measured']} measured now"]
    else:
        parts = [f"{counts['jobs']} kernel job(s)", f"{counts['stored_before']} with a stored result"]
    if counts.get("retried"):
        parts.append(f"{counts['retried']} tried again after their worker failed")
    if counts.get("failed"):
        parts.append(f"{counts['failed']} not finished (run again to finish them)")
    if counts.get("not_tuned"):
        parts.append(f"{counts['not_tuned']} not tuned yet")
    return clean.text(f"swzc tune: {', '.join(parts)}; store: {store}")


def render_json(entries: Sequence[Mapping[str, Any]], counts: Mapping[str, int], store: str,
                failed: Sequence[Mapping[str, str]] = ()) -> str:
    return clean.dumps({"store": store, "summary": dict(counts), "jobs": list(entries), "failed": list(failed)}, indent=1)
