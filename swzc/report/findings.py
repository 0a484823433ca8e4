"""Findings: a rewrite result as what a code review reports, one finding per rewritten kernel with its fix.

A review bot shows a fix as suggestions on whole lines, so a fix is also kept as line hunks.  The kernels
of one file share one insertion of the swizzle functions (the library): each fix carries it as a group of
its own, and formats that post every fix at once post it once per file (see `parts`).  The file's
`RewriteResult.new` is then exactly the original with every part applied.

Rules have stable ids.  SWZ001 reports a kernel swzc would swizzle, with its fix.  A kernel a hazard refuses is
a display-only finding (`refusals_from`): no fix, its rule one of the hazard rules SWZ101-SWZ114, registered
once in swzc.analysis.records.HAZARDS and described for review tools here (`REFUSAL_RULES`).  A kernel left
alone for any other reason (declined, unranked, or refused by a limit of the splice, which has no rule) is not
a finding; `swzc analyze` says why.
"""

from __future__ import annotations

import hashlib
import os
import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from swzc.analysis.records import HAZARDS, HazardRule
from swzc.core import clean
from swzc.rewrite.edits import Edit, apply_edits, overlapping
from swzc.core.errors import ExitCode, SwzcError
from swzc.rewrite.patch import header_path
from swzc.pipeline.driver import KernelOutcome, RewriteResult
from swzc.core.processes import run


@dataclass(frozen=True)
class Rule:
    """What a finding reports, as SARIF's reportingDescriptor and rule docs describe it."""

    id: str
    name: str
    summary: str
    description: str
    help: str  # markdown: what it does, why, an example, how safe the fix is
    level: str  # SARIF level of its results: "note", "warning" or "error"

    def __post_init__(self) -> None:
        if self.level not in ("note", "warning", "error"):
            raise ValueError(f"rule {self.id}: level {self.level!r} is not a SARIF level")


BLOCK_SWIZZLE = Rule(
    id="SWZ001",
    name="block-swizzle",
    summary="A kernel's blocks can run in an order that shares more data in L2.",
    description=(
        "The kernel reads its block index in launch order. A block swizzle, a permutation of the block "
        "coordinates proven to be a bijection over the kernel's grid, makes blocks that read the same data "
        "run together, so that data is read from DRAM once and then hit in L2."
    ),
    help="""\
**What it does.** Reports a `__global__` kernel that swzc would give a block swizzle, with the fix: the
kernel reads a swizzled index (`const uint3 swzc_block = swzc_grouped8_2d(blockIdx.x, ...)`) in place of
`blockIdx`, and the swizzle functions are inserted once before the file's first rewritten kernel.

**Why.** Blocks run roughly in launch order. Where neighbouring blocks read the same rows or columns
(a GEMM, a stencil, a transpose), the raster order evicts data from L2 before the blocks that need it
again run. The L2 model of the chosen GPU predicts the hit rate and DRAM traffic of each order.

**Example.**

```cuda
__global__ void gemm(const float* A, const float* B, float* C, int n) {
  int row = blockIdx.y * 16 + threadIdx.y;
  int col = blockIdx.x * 16 + threadIdx.x;
```

becomes

```cuda
__global__ void gemm(const float* A, const float* B, float* C, int n) {
  const uint3 swzc_block = swzc_grouped64_2d(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y);
  int row = swzc_block.y * 16 + threadIdx.y;
  int col = swzc_block.x * 16 + threadIdx.x;
```

**Fix safety.** The swizzle is proven to be a permutation of the grid, so every block still runs once;
a kernel whose blocks depend on their order is refused, not reported. The fix is *safe* when the order
was measured faster on a GPU (`swzc rewrite --bench`), and *unsafe* when only the L2 model predicts the
gain: benchmark it before merging. Apply all of a file's parts: the kernel's lines call the functions
inserted above it.
""",
    level="note",
)

RULES = (BLOCK_SWIZZLE,)


def _refusal_rule(hazard: HazardRule) -> Rule:
    """A hazard rule as review tools describe it: display-only, level note, no fix."""
    why = ("The kernel reads its block index where the rewrite cannot reach (or cannot see) the read, so a swizzle "
           "would permute some of its reads and not others." if hazard.reads_block_index else
           "Its blocks may depend on the order in which they run, or the swizzle cannot be spliced in safely: "
           "reordering them could change what it computes.")
    return Rule(
        id=hazard.id,
        name=hazard.name,
        summary=f"A kernel is left in launch order: {hazard.summary}.",
        description=f"swzc gives no block swizzle to a kernel with this hazard ({hazard.summary}). {why} The kernel "
                    "is reported for information only: there is nothing to fix.",
        help=f"""\
**What it does.** Reports a `__global__` kernel that swzc leaves in launch order because of this hazard:
{hazard.summary}. The message gives the hazard's line and reason.

**Why.** A block swizzle is spliced in only where reordering the blocks is known to keep what the kernel
computes.
{why}

**What to do.** Nothing is required. `swzc analyze FILE` lists each hazard of the kernel; where the code
can do without it, rewriting that part lets swzc consider the kernel again.

**Fix safety.** Display only: swzc suggests no change to a kernel it refuses.
""",
        level="note",
    )


# The hazard rules as review findings, in the registry's order (SWZ101 first).
REFUSAL_RULES = tuple(_refusal_rule(hazard) for hazard in HAZARDS)


def refusal_rule(rule_id: str) -> Rule | None:
    """The review rule of a hazard rule id ("SWZ101"), or None for an id the registry does not hold."""
    return next((rule for rule in REFUSAL_RULES if rule.id == rule_id), None)


@dataclass(frozen=True)
class LineHunk:
    """Lines `start`..`end` (1-based, inclusive) of the original, without the last one's line end, and the
    text that takes their place.  Whole lines are what a GitHub suggestion replaces and what a SARIF or
    rdjson range without columns covers, whatever the columns count (bytes or characters)."""

    start: int
    end: int
    old: str
    new: str
    edits: tuple[Edit, ...]  # the byte edits it carries

    @property
    def text_is_utf8(self) -> bool:
        """False when a line it touches is not UTF-8: the JSON formats cannot carry it byte for byte."""
        return is_utf8(self.old) and is_utf8(self.new)


_ESCAPED = re.compile("[\udc80-\udcff]")  # bytes that are not UTF-8, as surrogateescape decodes them


def is_utf8(text: str) -> bool:
    """Whether text decoded with surrogateescape came from valid UTF-8."""
    return _ESCAPED.search(text) is None


def line_hunks(old: bytes, edits: Iterable[Edit]) -> tuple[LineHunk, ...]:
    """The edits as whole-line hunks against `old`: edits on the same or adjacent lines share a hunk.

    An insertion at the start of a line replaces that line with the inserted text and the line; one at the
    end of a file that ends with a line end is anchored to the last line.  A hunk whose edits would change
    its last line end takes in the next line (the previous one at the end of the file), so that the line
    end after each hunk stays as it is: a range of whole lines leaves it in place."""
    ordered = _distinct(edits)
    if not ordered:
        return ()
    if not old:
        raise ValueError("an edit of an empty file has no line to anchor to")
    ends = [m.start() for m in re.finditer(b"\n", old)]
    starts = [0, *(e + 1 for e in ends)]
    count = len(starts) if not old.endswith(b"\n") else len(starts) - 1  # lines in `old`

    def line_of(offset: int) -> int:
        return min(bisect_right(starts, offset) - 1, count - 1)  # 0-based; past the last line end: the last line

    def render(first: int, last: int, members: list[Edit]) -> tuple[bytes, bytes, bytes]:
        """The lines' bytes, the same with the edits applied, and their last line end."""
        begin, end = starts[first], ends[last] + 1 if last < len(ends) else len(old)
        before = old[begin:end]
        after = apply_edits(before, [Edit(e.start - begin, e.end - begin, e.text) for e in members])
        return before, after, b"\r\n" if before.endswith(b"\r\n") else b"\n" if before.endswith(b"\n") else b""

    groups: list[tuple[int, int, list[Edit]]] = []  # (first line, last line, edits), 0-based
    for e in ordered:
        first, last = line_of(e.start), line_of(e.end - 1) if e.end > e.start else line_of(e.start)
        if groups and first <= groups[-1][1] + 1:
            groups[-1] = (groups[-1][0], max(groups[-1][1], last), [*groups[-1][2], e])
        else:
            groups.append((first, last, [e]))
    k = 0
    while k < len(groups):
        first, last, members = groups[k]
        _, after, eol = render(first, last, members)
        if after.endswith(eol):
            k += 1
            continue
        if last + 1 < count:
            groups[k] = (first, last + 1, members)
        elif first > 0:
            groups[k] = (first - 1, last, members)
        else:
            raise ValueError("an edit changes the file's last line end")
        while k + 1 < len(groups) and groups[k + 1][0] <= groups[k][1] + 1:  # it now touches the next group
            groups[k] = (groups[k][0], max(groups[k][1], groups[k + 1][1]), [*groups[k][2], *groups.pop(k + 1)[2]])
        while k > 0 and groups[k - 1][1] + 1 >= groups[k][0]:  # or the previous one
            merged = groups.pop(k)
            k -= 1
            groups[k] = (groups[k][0], max(groups[k][1], merged[1]), [*groups[k][2], *merged[2]])
    hunks = []
    for first, last, members in groups:
        before, after, eol = render(first, last, members)
        hunks.append(LineHunk(first + 1, last + 1, _text(before[: len(before) - len(eol)]),
                              _text(after[: len(after) - len(eol)]), tuple(members)))
    return tuple(hunks)


def _distinct(edits: Iterable[Edit]) -> list[Edit]:
    """Sorted, each edit once (kernels that share a helper carry its edits each), none overlapping."""
    ordered = sorted(set(edits))
    clash = overlapping(ordered)
    if clash is not None:
        raise SwzcError(f"internal: fixes with overlapping edits {clash[0]} and {clash[1]}", ExitCode.CHECK_FAILED)
    return ordered


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class Prediction:
    """The L2 model's numbers for one block order."""

    candidate: str
    l2_hit_rate: float  # percent
    dram_bytes: float


@dataclass(frozen=True)
class Measurement:
    """The chosen order against launch order on a GPU (swzc rewrite --bench)."""

    speedup: float
    baseline_ms: float | None
    ms: float | None
    l2_hit_rate: float | None  # percent, where a profiler ran
    dram_read_bytes: float | None


APPLICABILITY = ("safe", "unsafe")
DISPLAY_ONLY = "display-only"  # a finding without a fix: what a refused kernel is


@dataclass(frozen=True)
class Fix:
    """A kernel's change: its own edits, and the file's library as a separate group (the same Edit in every
    fix of a file: with any subset of the file's fixes it is inserted once).  `hunks` are both as whole
    lines, the fix on its own."""

    title: str
    applicability: str  # "safe": measured faster on a GPU; "unsafe": predicted by the L2 model only
    edits: tuple[Edit, ...]
    library: Edit
    hunks: tuple[LineHunk, ...]

    def __post_init__(self) -> None:
        if self.applicability not in APPLICABILITY:
            raise ValueError(f"applicability {self.applicability!r}: expected one of {', '.join(APPLICABILITY)}")


@dataclass(frozen=True)
class Finding:
    """A kernel swzc would swizzle: where it is, why (the model's or the GPU's numbers), and its fix; or, without
    a fix, a kernel a hazard rule refuses, and why."""

    rule: Rule
    path: str  # the file as it was given
    uri: str  # the file relative to the root of its git work tree, '/'-separated, as the patch names it
    kernel: str
    occurrence: int  # how many kernels of this name come before it in the file (overloads share a name)
    line: int  # the kernel's line
    span: tuple[int, int]  # the first and last line its fix changes, the library included
    message: str
    swizzle: str | None  # None: a display-only finding
    hw: str
    identity: Prediction | None  # the model's numbers for launch order, where it ranked the kernel
    chosen: Prediction | None  # and for the chosen order
    measured: Measurement | None
    fix: Fix | None  # None: display-only, a refused kernel (its rule one of REFUSAL_RULES)

    @property
    def applicability(self) -> str:
        """"safe" or "unsafe" (the fix's), or "display-only" where there is no fix."""
        return self.fix.applicability if self.fix is not None else DISPLAY_ONLY

    @property
    def fingerprint(self) -> str:
        """Stable across runs and line shifts: the rule, the file and which kernel, not where it is."""
        key = "\0".join((self.rule.id, self.uri, self.kernel, str(self.occurrence)))
        return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def fix_of(finding: Finding) -> Fix:
    """A finding's fix, where only findings with fixes may come (findings_from's, never refusals_from's)."""
    if finding.fix is None:
        raise ValueError(f"finding {finding.rule.id} of kernel {finding.kernel} is display-only: it has no fix")
    return finding.fix


def findings_from(result: RewriteResult) -> list[Finding]:
    """One SWZ001 finding per rewritten kernel of the result, in the file's order."""
    library = shared_library(result)
    if library is None:
        return []
    uri = header_path(result.path)[0]
    found = []
    for fix in sorted(result.fixes, key=lambda f: f.kernel_index):
        outcome = result.outcomes[fix.kernel_index]  # outcomes are in the file's order of kernels, as indices are
        occurrence = sum(1 for o in result.outcomes[: fix.kernel_index] if o.name == fix.kernel)
        table = {name: Prediction(name, hit, dram) for name, hit, dram in outcome.candidates}
        measured = _measured(result, outcome)
        safe = result.benchmarked and measured is not None
        hunks = line_hunks(result.old, (*fix.edits, library))
        assert outcome.swizzle is not None
        identity, chosen = table.get("identity"), table.get(outcome.swizzle)
        found.append(Finding(
            rule=BLOCK_SWIZZLE, path=result.path, uri=uri, kernel=fix.kernel, occurrence=occurrence, line=fix.line,
            span=(hunks[0].start, hunks[-1].end),
            message=_message(outcome, result.hw, identity, chosen, measured),
            swizzle=outcome.swizzle, hw=result.hw, identity=identity, chosen=chosen, measured=measured,
            fix=Fix(f"Swizzle the blocks of {fix.kernel} with {outcome.swizzle}", "safe" if safe else "unsafe",
                    tuple(sorted(set(fix.edits))), library, hunks),
        ))
    return found


def refusals_from(result: RewriteResult) -> list[Finding]:
    """A display-only finding per refused kernel and hazard rule that refused it, in the file's order: the
    kernel's line, the rule, and the reason (every hazard's) as the message."""
    uri = header_path(result.path)[0]
    found = []
    for index, outcome in enumerate(result.outcomes):
        if outcome.status != "refused":
            continue
        rules = [rule for rule in map(refusal_rule, outcome.rules) if rule is not None]
        occurrence = sum(1 for o in result.outcomes[:index] if o.name == outcome.name)
        named = ", ".join(f"{rule.id} {rule.name}" for rule in rules)
        message = (f"Kernel `{outcome.name}` is left in launch order ({named}): {clean.one_line(outcome.reason).rstrip('.')}. "
                   "Display only: swzc suggests no change.")
        found += [Finding(rule=rule, path=result.path, uri=uri, kernel=outcome.name, occurrence=occurrence,
                          line=outcome.line, span=(outcome.line, outcome.line), message=message, swizzle=None,
                          hw=result.hw, identity=None, chosen=None, measured=None, fix=None) for rule in rules]
    return found


def shared_library(result: RewriteResult) -> Edit | None:
    """The one insertion of swizzle functions that the file's rewrite holds (None when nothing was
    rewritten), checked to give `new` exactly with the kernels' own edits."""
    if result.library is None:
        return None
    kernel_edits = _distinct(e for fix in result.fixes for e in fix.edits)
    if apply_edits(result.old, [*kernel_edits, result.library]) != result.new:
        raise SwzcError(f"internal: the fixes of {result.path} do not add up to its rewrite", ExitCode.CHECK_FAILED)
    return result.library


def _measured(result: RewriteResult, outcome: KernelOutcome) -> Measurement | None:
    for bench in result.bench:
        if bench.kernel == outcome.name and bench.line == outcome.line and bench.chosen == outcome.swizzle:
            for a in bench.attempts:
                if a.candidate == bench.chosen and a.accepted and a.speedup is not None:
                    return Measurement(a.speedup, a.baseline_ms, a.ms, a.l2_hit_rate, a.dram_read_bytes)
    return None


def _message(outcome: KernelOutcome, hw: str, identity: Prediction | None, chosen: Prediction | None,
             measured: Measurement | None) -> str:
    head = f"Kernel `{outcome.name}` can run its blocks in the order {outcome.swizzle} instead of launch order"
    if measured is not None:
        times = (f" ({measured.baseline_ms:.3f} ms -> {measured.ms:.3f} ms)"
                 if measured.baseline_ms is not None and measured.ms is not None else "")
        return f"{head}: it ran {measured.speedup:.2f}x as fast on a GPU{times}."
    if identity is not None and chosen is not None:
        return (f"{head}: the L2 model of {hw} predicts {chosen.l2_hit_rate:.1f} % L2 hits instead of "
                f"{identity.l2_hit_rate:.1f} %, and {chosen.dram_bytes / 1e6:,.0f} MB read from DRAM instead of "
                f"{identity.dram_bytes / 1e6:,.0f} MB. Not measured on a GPU.")
    return f"{head} ({outcome.chosen_by or outcome.reason}). Not measured on a GPU."


@dataclass(frozen=True)
class Part:
    """One hunk of a file's combined fix (every finding's edits and the library once), and whose it is."""

    hunk: LineHunk
    findings: tuple[Finding, ...]  # the kernels with edits in it
    library: bool  # it holds the file's library


def parts(result: RewriteResult, findings: Sequence[Finding]) -> tuple[Part, ...]:
    """The file's combined fix as whole-line hunks: applied together they give `result.new`.  A hunk may
    hold edits of several kernels, or of a kernel and the library, when their lines touch."""
    if not findings:
        return ()
    library = fix_of(findings[0]).library
    hunks = line_hunks(result.old, (library, *(e for f in findings for e in fix_of(f).edits)))
    return tuple(Part(h, tuple(f for f in findings if any(e in h.edits for e in fix_of(f).edits)), library in h.edits)
                 for h in hunks)


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


def parse_changed_lines(diff: str) -> frozenset[int]:
    """The lines (1-based, of the new side) that a one-file `git diff -U0` adds or changes."""
    changed: set[int] = set()
    for match in _HUNK.finditer(diff):
        start, length = int(match[1]), int(match[2]) if match[2] is not None else 1
        changed.update(range(start, start + length))
    return frozenset(changed)


GIT_TIMEOUT_S = 60


def changed_lines(path: str, ref: str) -> frozenset[int]:
    """The lines of `path` that `git diff REF` adds or changes: committed and uncommitted changes to a
    tracked file since REF.  git runs in the file's folder with a list of arguments, no shell, no external
    diff driver or textconv filter; REF cannot be taken for an option."""
    if not ref or ref.startswith("-") or any(c in ref for c in "\0\n\r"):
        raise SwzcError(f"--diff-base {ref!r}: not a git revision")
    folder = os.path.dirname(os.path.abspath(path))
    command = ["git", "-C", folder, "diff", "--no-color", "--no-ext-diff", "--no-textconv",
               "--no-renames", "-U0", ref, "--", os.path.basename(path)]
    try:
        finished = run(command, GIT_TIMEOUT_S)
    except FileNotFoundError:
        raise SwzcError("--diff-base needs git, and git is not on PATH") from None
    if not finished.ok:
        raise SwzcError(f"{path}: git diff {ref} {finished.status()}: {finished.head(1)}")
    return parse_changed_lines(finished.stdout)
