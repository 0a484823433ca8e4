"""One emitter per output format of `swzc review`: pure functions from rewrite results to text.

- `patch`: every file's unified diff, one after the other: `git apply` at the repository root takes it.
- `sarif`: SARIF 2.1.0, one run, a result per rewritten kernel (rule SWZ001) at the kernel's line, with
  the kernel's fix on its own (its lines and the file's swizzle functions).  GitHub code scanning shows
  the results and ignores the fixes; SARIF viewers apply them.  reviewdog reads them too, but posts a
  result as one comment and renders only the suggestion on that comment's lines: for reviewdog, rdjson.
- `rdjson`: reviewdog's DiagnosticResult, a diagnostic per hunk of each file's combined fix, each with
  one suggestion over exactly the diagnostic's lines: reviewdog turns a diagnostic into one pull-request
  comment and renders only suggestions whose lines are the comment's.
- `github`: a JSON list of pull-request review comments, one per hunk, each a ```suggestion of exactly
  the lines it is anchored to; with the lines a pull request changes, a fix that reaches outside them
  becomes one plain comment carrying the fix as a ```diff block (GitHub rejects suggestions there).

With `refusals` (review's default; --no-refusals turns it off), sarif and rdjson also carry a display-only
finding per refused kernel and hazard rule that refused it (SWZ101-SWZ114, swzc.report.findings.refusals_from:
level note, no fix, no suggestion), so a code-scanning tool shows why a kernel was left alone; SARIF then
registers every hazard rule after SWZ001.  Without them both formats carry fixes only.  `github` and `patch`
carry fixes only: a refusal adds nothing there.

Every range is made of whole lines (swzc.report.findings.LineHunk), so columns, counted in bytes by reviewdog
and in characters by SARIF, never come into it.  JSON is written in ASCII (non-ASCII text escaped); a
fix whose lines are not UTF-8 is reported without a suggestion, since JSON cannot carry its bytes.
Every string is written through swzc.core.clean: a message, a kernel's or a file's name shows an invisible or
control character as an escape; only the fix's own lines (the user's source) are carried exactly.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from swzc import __version__

from swzc.core import clean
from swzc.rewrite.edits import apply_edits
from swzc.report.findings import (REFUSAL_RULES, RULES, Finding, Part, Rule, findings_from, fix_of, is_utf8, parts,
                                  refusals_from)
from swzc.rewrite.patch import header_path, patch_from_edits
from swzc.pipeline.driver import RewriteResult

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
FINGERPRINT = "swzcKernel/v1"  # the partialFingerprints key: rule, file and kernel, never the line
TOOL = "swzc"
FORMATS = ("patch", "sarif", "rdjson", "github")


def render(output_format: str, results: Sequence[RewriteResult], changed: Mapping[str, frozenset[int]] | None = None,
           refusals: bool = True) -> str:
    """The review in one of FORMATS: `changed` goes to github, `refusals` to sarif and rdjson."""
    if output_format == "github":
        return github(results, changed)
    if output_format == "patch":
        return patch(results)
    return {"sarif": sarif, "rdjson": rdjson}[output_format](results, refusals)


def patch(results: Sequence[RewriteResult]) -> str:
    """One diff for every file that changes; the empty string when none does."""
    return "".join(r.patch for r in results)


def sarif(results: Sequence[RewriteResult], refusals: bool = True) -> str:
    """A SARIF 2.1.0 log: one run, SWZ001 results with their numbers in `properties` and their fix; with
    `refusals`, the refused kernels' display-only results too, each file's results in line order."""
    rules = (*RULES, *REFUSAL_RULES) if refusals else RULES
    urls = project_urls()
    home = next((urls[label] for label in ("homepage", "repository", "source") if label in urls), None)
    driver = {"name": TOOL, "version": __version__, "semanticVersion": __version__,
              **({"informationUri": home} if home else {}),
              "rules": [_sarif_rule(rule, urls.get("rules")) for rule in rules]}
    found = [_sarif_result(f, rules) for r in results for f in _reported(r, refusals)]
    return _json({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{"tool": {"driver": driver}, "results": found}]})


def _reported(result: RewriteResult, refusals: bool) -> list[Finding]:
    """The file's findings with fixes, and with `refusals` its display-only ones, by line (fixes first on a line)."""
    found = findings_from(result)
    return sorted([*found, *refusals_from(result)], key=lambda f: f.line) if refusals else found


def project_urls() -> dict[str, str]:
    """swzc's own addresses, as its installed metadata gives them (pyproject.toml's [project.urls]): label, in lower
    case -> https URL.  None where swzc runs from a source tree or its metadata names none: SARIF then carries no
    informationUri or helpUri, rather than an address nobody chose."""
    try:
        entries = importlib.metadata.metadata(TOOL).get_all("Project-URL") or []
    except importlib.metadata.PackageNotFoundError:
        return {}
    pairs = (entry.partition(",") for entry in entries)
    found: dict[str, str] = {}
    for label, _, url in pairs:  # the first of a label, whatever its case
        if url.strip().startswith("https://"):
            found.setdefault(label.strip().lower(), url.strip())
    return found


def _sarif_rule(rule: Rule, documentation: str | None = None) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.description},
        **({"helpUri": f"{documentation.partition('#')[0]}#{rule.id.lower()}"} if documentation else {}),
        "help": {"text": rule.help.replace("**", ""), "markdown": rule.help},
        "defaultConfiguration": {"level": rule.level},
        "properties": {"tags": ["performance", "cuda", "hip"]},
    }


def _sarif_result(f: Finding, rules: Sequence[Rule]) -> dict[str, Any]:
    artifact = {"uri": _uri(f.uri)}
    result: dict[str, Any] = {
        "ruleId": f.rule.id,
        "ruleIndex": rules.index(f.rule),
        "level": f.rule.level,
        "message": {"text": f.message},
        "locations": [{"physicalLocation": {"artifactLocation": artifact, "region": {"startLine": f.line}},
                       "logicalLocations": [{"name": f.kernel, "kind": "function"}]}],
        "partialFingerprints": {FINGERPRINT: f.fingerprint},
        "properties": _numbers(f) if f.fix is not None else {"kernel": f.kernel, "hw": f.hw, "applicability": f.applicability},
    }
    if f.fix is None:  # display-only: nothing to apply
        return result
    if all(h.text_is_utf8 for h in f.fix.hunks):
        # whole lines: without columns a region ends where endLine's text does, before its line end
        replacements = [{"deletedRegion": {"startLine": h.start, "endLine": h.end},
                         "insertedContent": {"text": clean.Verbatim(h.new)}}
                        for h in f.fix.hunks]
        result["fixes"] = [{"description": {"text": f.fix.title},
                            "artifactChanges": [{"artifactLocation": artifact, "replacements": replacements}]}]
    else:
        result["message"]["text"] += _NOT_UTF8
    return result


_NOT_UTF8 = " Its fix is left out: the lines it changes are not UTF-8 (swzc review --format patch gives it)."


def _numbers(f: Finding) -> dict[str, Any]:
    numbers: dict[str, Any] = {"kernel": f.kernel, "swizzle": f.swizzle, "hw": f.hw,
                               "applicability": f.applicability, "fixLines": list(f.span)}
    if f.identity is not None and f.chosen is not None:
        numbers["predicted"] = {which: {"candidate": p.candidate, "l2HitRate": p.l2_hit_rate, "dramBytes": round(p.dram_bytes)}
                                for which, p in (("identity", f.identity), ("chosen", f.chosen))}
    if f.measured is not None:
        m = f.measured
        numbers["measured"] = {"speedup": m.speedup, "baselineMs": m.baseline_ms, "ms": m.ms, "l2HitRate": m.l2_hit_rate,
                               "dramReadBytes": m.dram_read_bytes}
    return numbers


def _uri(path: str) -> str:
    """A relative URI reference for a '/'-separated path (spaces, '#', '%' and non-ASCII escaped)."""
    return quote(path.encode("utf-8", "surrogateescape"), safe="/")


def rdjson(results: Sequence[RewriteResult], refusals: bool = True) -> str:
    """reviewdog's rdjson: a diagnostic per hunk of each file's combined fix; all suggestions applied
    together give each file's rewrite.  With `refusals`, a diagnostic without suggestions per refused
    kernel and rule too, each file's diagnostics in line order."""
    diagnostics = []
    for result in results:
        pieces = parts(result, findings_from(result))
        found: list[dict[str, Any]] = []
        for number, part in enumerate(pieces, 1):
            lines = {"start": {"line": part.hunk.start}, "end": {"line": part.hunk.end}}  # whole lines: no columns
            diagnostic = _diagnostic(result, _part_text(part, number, pieces), lines, _rule_of(part))
            if part.hunk.text_is_utf8:
                diagnostic["suggestions"] = [{"range": lines, "text": clean.Verbatim(part.hunk.new)}]
            else:
                diagnostic["message"] += _NOT_UTF8
            found.append(diagnostic)
        if refusals:
            found += [_diagnostic(result, f.message, {"start": {"line": f.line}, "end": {"line": f.line}}, f.rule)
                      for f in refusals_from(result)]
            found.sort(key=lambda d: d["location"]["range"]["start"]["line"])
        diagnostics += found
    return _json({"source": {"name": TOOL}, "severity": "INFO", "diagnostics": diagnostics})


def _diagnostic(result: RewriteResult, message: str, lines: dict[str, Any], rule: Rule) -> dict[str, Any]:
    return {"message": message, "location": {"path": _path(result), "range": lines}, "severity": "INFO",
            "source": {"name": TOOL}, "code": {"value": rule.id}}


def github(results: Sequence[RewriteResult], changed: Mapping[str, frozenset[int]] | None = None) -> str:
    """Review comments for GitHub's create-review API, as a JSON list.

    A line comment is {"path", "line", "side": "RIGHT", "body"}, with "start_line" and "start_side" when it
    spans several lines; a file-level note is {"path", "subject_type": "file", "body"}.  `changed` maps a
    result's path to the lines the pull request adds or changes (swzc.report.findings.changed_lines); without it
    every line counts as changed.  A kernel's fix becomes suggestions when every hunk it needs (its own and
    the file's swizzle functions, and the hunks it shares with other kernels) lies on changed lines;
    otherwise one plain comment carries its fix as a diff, at the kernel's line if that line is changed,
    else at the file's first changed line, else as a file-level note."""
    comments: list[dict[str, Any]] = []
    for result in results:
        found = findings_from(result)
        pieces = parts(result, found)
        lines = None if changed is None else changed.get(result.path, frozenset())
        suggested = _suggestible(found, pieces, lines)
        shown = [p for p in pieces if any(f in suggested for f in p.findings) or (p.library and suggested)]
        for number, part in enumerate(shown, 1):
            body = clean.join(f"{_badge(_rule_of(part))} {_part_text(part, number, shown)}\n\n",
                              clean.Verbatim(clean.fenced("suggestion", part.hunk.new)), "\n")
            comments.append(_anchored(_path(result), part.hunk.start, part.hunk.end, body))
        for f in found:
            if f not in suggested:
                comments.append(_plain(result, f, lines, len(found)))
    return _json(comments)


def _suggestible(found: Sequence[Finding], pieces: Sequence[Part], lines: frozenset[int] | None) -> set[Finding]:
    """The findings whose fixes can all be suggestions: each hunk they need is UTF-8 and on changed lines,
    and no hunk they need also holds a kernel that cannot be (its suggestion would apply that one too)."""
    needs = {f: [p for p in pieces if f in p.findings or p.library] for f in found}

    def fits(part: Part) -> bool:
        return part.hunk.text_is_utf8 and (lines is None or all(n in lines for n in range(part.hunk.start, part.hunk.end + 1)))

    able = {f for f in found if all(fits(p) for p in needs[f])}
    while True:
        held = {f for f in able if all(g in able for p in needs[f] for g in p.findings)}
        if held == able:
            return able
        able = held


def _plain(result: RewriteResult, f: Finding, lines: frozenset[int] | None, count: int) -> dict[str, Any]:
    """One comment with the kernel's whole fix as a diff, where GitHub takes a comment."""
    path = _path(result)
    anchor = f.line if lines is None or f.line in lines else min(lines) if lines else None
    where = "" if anchor == f.line else f"Kernel `{f.kernel}` is at line {f.line}. "
    fix = fix_of(f)
    edits = [*fix.edits, fix.library]
    diff = patch_from_edits(result.path, result.old, edits, apply_edits(result.old, edits))
    if not is_utf8(diff):
        body = f"{_badge(f.rule)} {f.message}\n\n{where}{_NOT_UTF8.strip()}\n"
    else:
        shared = (" The swizzle functions at its top are shared by this file's other kernels: insert them once."
                  if count > 1 else "")
        body = clean.join(f"{_badge(f.rule)} {f.message}\n\n{where}Its fix changes lines {f.span[0]}-{f.span[1]}, and some "
                          "of them are not lines this pull request changes, so GitHub cannot take it as suggestions. Here "
                          f"it is as a patch for `git apply` at the repository root.{shared}\n\n",
                          clean.Verbatim(clean.fenced("diff", diff.rstrip("\n"))), "\n")
    if anchor is None:
        return {"path": path, "subject_type": "file", "body": body}
    return _anchored(path, anchor, anchor, body)


def _anchored(path: str, start: int, end: int, body: str) -> dict[str, Any]:
    comment: dict[str, Any] = {"path": path}
    if start < end:  # GitHub wants start_line before line, and neither for a one-line comment
        comment.update(start_line=start, start_side="RIGHT")
    comment.update(line=end, side="RIGHT", body=body)
    return comment


def _part_text(part: Part, number: int, pieces: Sequence[Part]) -> str:
    """What a hunk of a file's combined fix is, and that its siblings go with it."""
    said = [f.message for f in part.findings]
    if part.library:
        users = sorted({f.kernel for p in pieces for f in p.findings})
        said.append(f"This inserts the swizzle functions that kernel(s) {', '.join(f'`{k}`' for k in users)} call, once.")
    library = next((p.hunk.start for p in pieces if p.library), None)
    calls = "" if part.library or library is None else f"; the functions it calls are inserted at line {library}"
    said.append(f"Part {number} of {len(pieces)} of this file's block swizzles: apply them together{calls}.")
    return " ".join(said)


def _rule_of(part: Part) -> Rule:
    return part.findings[0].rule if part.findings else RULES[0]


def _badge(rule: Rule) -> str:
    return f"**swzc {rule.id} ({rule.name})**"


def _path(result: RewriteResult) -> str:
    """A file as every format names it: relative to its git work tree's root, as the patch header does."""
    return header_path(result.path)[0]


def _json(doc: Any) -> str:
    return clean.dumps(doc) + "\n"
