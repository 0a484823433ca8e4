"""`swzc review`: each format checked by what consumes it.  SARIF against the official 2.1.0 schema, the
patch by `git apply`, rdjson and GitHub suggestions by applying them, GitHub's line ranges against the
changes of a real `git diff`; exit codes, and what is (never) written."""

import email.message
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from swzc import __version__

from swzc.analysis.records import HAZARDS
from swzc.report import emitters
from swzc.verify.bench import Attempt, KernelBench
from swzc.commands.cli import main
from swzc.rewrite.edits import Edit, apply_edits, overlapping
from swzc.report.findings import REFUSAL_RULES, RULES, findings_from, line_hunks, parse_changed_lines, parts, refusals_from
from swzc.pipeline.driver import Options, load_hw, rewrite_file

SCHEMA = Path(__file__).resolve().parent / "schemas" / "sarif-schema-2.1.0.json"  # OASIS's, errata 01
RDJSON_SCHEMA = Path(__file__).resolve().parent / "schemas" / "rdjson-DiagnosticResult.json"  # reviewdog's (rdjson-LICENSE)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not on PATH")

GEMM = b"""\
// A naive GEMM, one thread per element of C.
__global__ void gemm(const float* A, const float* B, float* C, int n) {
  int row = blockIdx.y * 16 + threadIdx.y;
  int col = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}

void launch(const float* A, const float* B, float* C) {
  // one block per 16 x 16 tile of C
  gemm<<<dim3(256, 256), dim3(16, 16)>>>(A, B, C, 4096);
}
"""

# Two kernels: their fixes share one insertion of the swizzle functions.
TWO = b"""\
// Two GEMMs, one reading A and B transposed.
#define N 4096

__global__ void gemm(const float* A, const float* B, float* C, int n) {
  int row = blockIdx.y * 16 + threadIdx.y;
  int col = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}

__global__ void gemm_t(const float* A, const float* B, float* C, int n) {
  int row = blockIdx.y * 16 + threadIdx.y;
  int col = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[k * n + row] * B[col * n + k];
  C[row * n + col] = acc;
}

void launch(const float* A, const float* B, float* C) {
  gemm<<<dim3(N / 16, N / 16), dim3(16, 16)>>>(A, B, C, N);
  gemm_t<<<dim3(N / 16, N / 16), dim3(16, 16)>>>(A, B, C, N);
}
"""

NO_BLOCK_INDEX = b"__global__ void scale(float* x, float a, int n) {\n  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] *= a;\n}\n"

# A kernel two hazard rules refuse (it waits on other blocks; an atomic's return value orders them).
REFUSED = b"""\
__device__ volatile int ready[4096];
__device__ unsigned counter;

__global__ void chained(float* c, float v) {
  while (ready[blockIdx.x] == 0) { }
  unsigned t = atomicAdd(&counter, 1u);
  c[t] = v;
  c[(blockIdx.y * 16 + threadIdx.y) * 4096 + blockIdx.x * 16 + threadIdx.x] = v;
}

void launch(float* c) {
  chained<<<dim3(256, 256), dim3(16, 16)>>>(c, 1.0f);
}
"""

# tree-sitter cannot parse line 3, and the only kernel holds it: bad input.
BAD = b"__global__ void k(float* p) {\n  int x = 1;\n    x @ 2;\n  p[blockIdx.x] = x;\n}\n"

GIT_ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def git(repo: Path, *args: str) -> str:
    run = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=GIT_ENV)
    assert run.returncode == 0, run.stderr
    return run.stdout


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A git work tree as the working directory, with src/gemm.cu and src/two.cu committed."""
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "gemm.cu").write_bytes(GEMM)
    (root / "src" / "two.cu").write_bytes(TWO)
    git(root, "init", "-q", ".")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "base")
    monkeypatch.chdir(root)
    return root


def rewritten(path: Path) -> bytes:
    """What `swzc rewrite -o` writes for the file."""
    out = path.parent / (path.name + ".rewritten")
    result = invoke("rewrite", path, "-o", out, "--no-compile")
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    out.unlink()
    return data


def replace_lines(data: bytes, edits: list[tuple[int, int, str]]) -> bytes:
    """Apply whole-line replacements (first line, last line, text), as GitHub applies suggestions and as
    SARIF and rdjson read a range of lines without columns: the last line's end ('\n' or '\r\n') stays."""
    lines = data.split(b"\n")  # the last item is what follows the last '\n'
    edits = sorted(edits, reverse=True)
    for (_, end, _), (next_start, _, _) in zip(edits[1:], edits):
        assert end < next_start, "overlapping suggestions"
    for start, end, text in edits:
        kept = b"\r" if end < len(lines) and lines[end - 1].endswith(b"\r") else b""
        lines[start - 1 : end] = (text.encode("utf-8", "surrogateescape") + kept).split(b"\n")
    return b"\n".join(lines)


def suggestions_of(comments: list[dict]) -> list[tuple[int, int, str]]:
    out = []
    for c in comments:
        found = re.search(r"(`{3,})suggestion\n(.*)\n\1(?:\n|$)", c["body"], re.DOTALL)
        if found:
            out.append((c.get("start_line", c["line"]), c["line"], found[2]))
    return out


# SARIF


@needs_git
def test_sarif_is_valid_against_the_official_schema_and_its_fix_gives_the_rewrite(repo):
    result = invoke("review", "src/gemm.cu", "src/two.cu", "--format", "sarif", "-o", "out.sarif")
    assert result.exit_code == 1, result.output
    doc = json.loads((repo / "out.sarif").read_text())
    found = sum(r.get("kind", "fail") != "informational" for r in doc["runs"][0]["results"])
    assert f"swzc: wrote out.sarif: {found} finding(s) in 2 file(s)" in result.stderr  # a report in a file says so
    assert "wrote" not in invoke("review", "-q", "src/gemm.cu", "--format", "sarif", "-o", "q.sarif").stderr
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.validators.validator_for(schema)
    validator(schema, format_checker=validator.FORMAT_CHECKER).validate(doc)

    (run,) = doc["runs"]
    assert run["tool"]["driver"]["name"] == "swzc" and run["tool"]["driver"]["version"] == __version__
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["SWZ001", *(h.id for h in HAZARDS)]
    by_kernel = {(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
                  r["properties"]["kernel"]): r for r in run["results"]}
    assert set(by_kernel) == {("src/gemm.cu", "gemm"), ("src/two.cu", "gemm"), ("src/two.cu", "gemm_t")}
    gemm = by_kernel[("src/gemm.cu", "gemm")]
    assert gemm["ruleId"] == "SWZ001"
    assert gemm["locations"][0]["physicalLocation"]["region"]["startLine"] == 2
    assert gemm["properties"]["applicability"] == "unsafe"
    predicted = gemm["properties"]["predicted"]
    assert predicted["chosen"]["l2HitRate"] > predicted["identity"]["l2HitRate"]
    assert predicted["chosen"]["dramBytes"] < predicted["identity"]["dramBytes"]

    (fix,) = gemm["fixes"]
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "src/gemm.cu"
    lines = [(r["deletedRegion"]["startLine"], r["deletedRegion"].get("endLine", r["deletedRegion"]["startLine"]),
              r["insertedContent"]["text"]) for r in change["replacements"]]
    assert all(set(r["deletedRegion"]) <= {"startLine", "endLine"} for r in change["replacements"])  # whole lines
    assert replace_lines(GEMM, lines) == rewritten(repo / "src" / "gemm.cu")


@needs_git
def test_sarif_names_the_projects_addresses_its_metadata_gives_and_none_it_does_not(repo, monkeypatch):
    """informationUri and each rule's helpUri come from the installed package's [project.urls] (Homepage, Rules):
    present there, they are in the log, which stays valid; absent (or not https), the log names no address."""
    def metadata(urls):
        def read(name):
            assert name == "swzc"
            message = email.message.Message()
            for url in urls:
                message["Project-URL"] = url
            return message
        return read

    monkeypatch.setattr(importlib.metadata, "metadata", metadata(["Homepage, https://example.org/swzc",
                                                                  "Rules, https://example.org/swzc/docs/rules.md#readme",
                                                                  "rules, https://example.org/other"]))
    doc = json.loads(invoke("review", "src/gemm.cu", "--format", "sarif").stdout)
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.validators.validator_for(schema)
    validator(schema, format_checker=validator.FORMAT_CHECKER).validate(doc)
    driver = doc["runs"][0]["tool"]["driver"]
    assert driver["informationUri"] == "https://example.org/swzc"
    assert [r["helpUri"] for r in driver["rules"]] == [f"https://example.org/swzc/docs/rules.md#{r['id'].lower()}" for r in driver["rules"]]
    for urls in (["Homepage, http://example.org/swzc", "Rules, javascript:alert(1)"], []):
        monkeypatch.setattr(importlib.metadata, "metadata", metadata(urls))
        driver = json.loads(invoke("review", "src/gemm.cu", "--format", "sarif").stdout)["runs"][0]["tool"]["driver"]
        assert "informationUri" not in driver and not any("helpUri" in r for r in driver["rules"])

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "metadata", missing)
    assert "informationUri" not in json.loads(invoke("review", "src/gemm.cu", "--format", "sarif").stdout)["runs"][0]["tool"]["driver"]


def test_the_rules_page_holds_every_rule_under_the_heading_its_help_uri_names():
    """docs/rules.md: a `## SWZnnn` heading (anchor swznnn) per rule SARIF registers, with its help text."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "rules.md").read_text()
    for rule in (*RULES, *REFUSAL_RULES):
        assert f"\n## {rule.id}\n\n`{rule.name}` ({rule.level}): {rule.summary}\n\n{rule.help.rstrip()}\n" in page, rule.id


def test_a_broken_sarif_document_fails_the_schema():
    """The schema check can fail: a region starting at line 0 is not SARIF."""
    schema = json.loads(SCHEMA.read_text())
    doc = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "swzc"}}, "results": [
        {"message": {"text": "m"}, "locations": [{"physicalLocation": {"artifactLocation": {"uri": "k.cu"},
                                                                       "region": {"startLine": 0}}}]}]}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validators.validator_for(schema)(schema).validate(doc)


@needs_git
def test_sarif_fingerprints_survive_line_shifts(repo):
    before = json.loads(invoke("review", "src/gemm.cu", "--format", "sarif").stdout)
    (repo / "src" / "gemm.cu").write_bytes(b"// moved down\n\n" + GEMM)
    after = json.loads(invoke("review", "src/gemm.cu", "--format", "sarif").stdout)
    (old,), (new,) = before["runs"][0]["results"], after["runs"][0]["results"]
    assert new["locations"][0]["physicalLocation"]["region"]["startLine"] == 4
    assert old["partialFingerprints"] == new["partialFingerprints"]
    two = json.loads(invoke("review", "src/two.cu", "--format", "sarif").stdout)["runs"][0]["results"]
    assert len({json.dumps(r["partialFingerprints"]) for r in two} | {json.dumps(old["partialFingerprints"])}) == 3


def _validate_sarif(doc: dict) -> None:
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.validators.validator_for(schema)
    validator(schema, format_checker=validator.FORMAT_CHECKER).validate(doc)


def test_a_refused_kernel_is_a_display_only_finding_per_rule_in_sarif_and_rdjson(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("refused.cu").write_bytes(REFUSED)
    Path("gemm.cu").write_bytes(GEMM)
    alone = invoke("review", "refused.cu", "--format", "sarif")
    assert alone.exit_code == 0, alone.output  # a refusal is not a finding to act on
    doc = json.loads(alone.stdout)
    _validate_sarif(doc)
    (run,) = doc["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules[1:]] == [h.id for h in HAZARDS] and [r["name"] for r in rules[1:]] == [h.name for h in HAZARDS]
    assert all(r["defaultConfiguration"]["level"] == "note" and r["help"]["markdown"] for r in rules[1:])
    assert [r["ruleId"] for r in run["results"]] == ["SWZ101", "SWZ102"]
    for r in run["results"]:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"] and r["level"] == "note" and "fixes" not in r
        assert r["properties"] == {"kernel": "chained", "hw": "h200", "applicability": "display-only"}
        assert r["locations"][0]["physicalLocation"]["region"] == {"startLine": 4}
        assert "SWZ101 wait, SWZ102 ticket" in r["message"]["text"] and "waits on memory" in r["message"]["text"]
    assert len({r["partialFingerprints"]["swzcKernel/v1"] for r in run["results"]}) == 2

    both = invoke("review", "gemm.cu", "refused.cu", "--format", "rdjson")
    assert both.exit_code == 1, both.output
    _validate_rdjson(json.loads(both.stdout))
    diagnostics = json.loads(both.stdout)["diagnostics"]
    refusals = [d for d in diagnostics if d["code"]["value"] != "SWZ001"]
    assert [(d["code"]["value"], d["location"]) for d in refusals] == [
        (rule, {"path": "refused.cu", "range": {"start": {"line": 4}, "end": {"line": 4}}}) for rule in ("SWZ101", "SWZ102")]
    assert all("suggestions" not in d for d in refusals)
    fixes = [d for d in diagnostics if d["code"]["value"] == "SWZ001"]
    assert replace_lines(GEMM, _rdjson_edits({"diagnostics": fixes})) == rewritten(tmp_path / "gemm.cu")


def test_refusals_are_left_out_of_github_patch_and_with_no_refusals(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("refused.cu").write_bytes(REFUSED)
    Path("gemm.cu").write_bytes(GEMM)
    for fmt in ("github", "patch"):
        assert invoke("review", "gemm.cu", "refused.cu", "--format", fmt).stdout == invoke("review", "gemm.cu", "--format", fmt).stdout
    assert json.loads(invoke("review", "refused.cu", "--format", "github").stdout) == []
    sarif = json.loads(invoke("review", "gemm.cu", "refused.cu", "--format", "sarif", "--no-refusals").stdout)
    _validate_sarif(sarif)
    assert [r["id"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]] == ["SWZ001"]
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["SWZ001"]
    rdjson = json.loads(invoke("review", "refused.cu", "--format", "rdjson", "--no-refusals").stdout)
    assert rdjson["diagnostics"] == []


def test_refusal_findings_come_from_the_hazard_registry(tmp_path):
    assert [(r.id, r.name, r.level) for r in REFUSAL_RULES] == [(h.id, h.name, "note") for h in HAZARDS]
    assert all(h.summary in r.summary and h.summary in r.help for r, h in zip(REFUSAL_RULES, HAZARDS))
    path = tmp_path / "refused.cu"
    path.write_bytes(REFUSED)
    result = rewrite_file(str(path), Options(hw=load_hw("h200"), compile=False))
    assert findings_from(result) == []
    found = refusals_from(result)
    assert [(f.rule.id, f.kernel, f.line, f.fix, f.applicability) for f in found] == [
        ("SWZ101", "chained", 4, None, "display-only"), ("SWZ102", "chained", 4, None, "display-only")]


# patch


@needs_git
def test_the_patch_applies_with_git_and_gives_what_rewrite_writes(repo):
    expected = {name: rewritten(repo / "src" / name) for name in ("gemm.cu", "two.cu")}
    result = invoke("review", "src/gemm.cu", "src/two.cu", "--format", "patch", "-o", "all.patch")
    assert result.exit_code == 1, result.output
    git(repo, "apply", "--check", "all.patch")
    git(repo, "apply", "all.patch")
    for name, data in expected.items():
        assert (repo / "src" / name).read_bytes() == data


# rdjson


def _validate_rdjson(doc: dict) -> None:
    schema = json.loads(RDJSON_SCHEMA.read_text())
    jsonschema.Draft4Validator(schema).validate(doc)


def test_a_broken_rdjson_document_fails_reviewdog_s_schema():
    """The schema check can fail: a severity reviewdog does not know, a line that is not a number."""
    good = {"source": {"name": "swzc"}, "diagnostics": [{"message": "m", "location": {"path": "k.cu", "range": {
        "start": {"line": 2}}}, "severity": "WARNING"}]}
    _validate_rdjson(good)
    for broken in ({**good, "severity": "FATAL"}, {"diagnostics": [{**good["diagnostics"][0], "severity": "LOUD"}]},
                   {"diagnostics": [{"message": "m", "location": {"path": "k.cu", "range": {"start": {"line": "two"}}}}]}):
        with pytest.raises(jsonschema.ValidationError):
            _validate_rdjson(broken)


def _rdjson_edits(doc: dict) -> list[tuple[int, int, str]]:
    edits = []
    for d in doc["diagnostics"]:
        (s,) = d["suggestions"]  # one per diagnostic: reviewdog renders only suggestions on the comment's lines
        assert s["range"] == d["location"]["range"]
        assert set(s["range"]["start"]) == {"line"} and set(s["range"]["end"]) == {"line"}  # whole lines
        edits.append((s["range"]["start"]["line"], s["range"]["end"]["line"], s["text"]))
    return edits


@needs_git
@pytest.mark.parametrize("name", ["gemm.cu", "two.cu"])
def test_rdjson_suggestions_applied_give_the_rewrite(repo, name):
    result = invoke("review", f"src/{name}", "--format", "rdjson")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    _validate_rdjson(doc)
    assert doc["source"]["name"] == "swzc"
    assert {d["location"]["path"] for d in doc["diagnostics"]} == {f"src/{name}"}
    assert {d["code"]["value"] for d in doc["diagnostics"]} == {"SWZ001"}
    data = (repo / "src" / name).read_bytes()
    assert replace_lines(data, _rdjson_edits(doc)) == rewritten(repo / "src" / name)


@pytest.mark.parametrize("case, swizzle", [("multi_kernel", "grouped:8"), ("helper_function", "grouped:16"),
                                           ("one_line_kernel", "grouped:4")])
def test_every_format_adds_up_to_the_rewrite_with_shared_helpers_and_one_line_kernels(case, swizzle, monkeypatch):
    """Kernels that share a helper carry its edits each, and a one-line kernel shares its line with the
    swizzle functions: each file's parts still give the rewrite exactly, and each fix alone re-parses."""
    from swzc.pipeline.driver import parse_swizzle
    from swzc.frontend.source import load_bytes

    monkeypatch.chdir(FIXTURES / case)
    (src,) = Path(".").glob("input.*")
    result = rewrite_file(str(src), Options(hw=load_hw("h200"), swizzle=parse_swizzle(swizzle), compile=False))
    assert replace_lines(result.old, _rdjson_edits(json.loads(emitters.rdjson([result])))) == result.new
    assert replace_lines(result.old, suggestions_of(json.loads(emitters.github([result])))) == result.new
    for finding in findings_from(result):
        alone = apply_edits(result.old, [*finding.fix.edits, finding.fix.library])
        assert replace_lines(result.old, [(h.start, h.end, h.new) for h in finding.fix.hunks]) == alone
        assert not load_bytes(str(src), alone).errors
        assert alone.count(b"swzc: block swizzles;") == 1


# github


@needs_git
def test_github_without_a_base_suggests_every_hunk(repo):
    result = invoke("review", "src/two.cu", "--format", "github")
    assert result.exit_code == 1, result.output
    comments = json.loads(result.stdout)
    for c in comments:
        assert c["side"] == "RIGHT" and c["path"] == "src/two.cu"
        if "start_line" in c:  # several lines; GitHub refuses a start_line equal to line
            assert c["start_line"] < c["line"] and c["start_side"] == "RIGHT"
    assert replace_lines(TWO, suggestions_of(comments)) == rewritten(repo / "src" / "two.cu")


def _commit(repo: Path, data: bytes, message: str) -> None:
    (repo / "src" / "gemm.cu").write_bytes(data)
    git(repo, "commit", "-q", "-am", message)


def _changed_by_git(repo: Path, base: str) -> set[int]:
    diff = git(repo, "diff", "-U0", base, "--", "src/gemm.cu")
    changed = set()
    for start, count in re.findall(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", diff, re.MULTILINE):
        changed |= set(range(int(start), int(start) + int(count or 1)))
    return changed


@needs_git
def test_github_suggests_a_fix_whose_lines_the_pull_request_changes(repo):
    base = git(repo, "rev-parse", "HEAD").strip()
    head = GEMM.replace(b"// A naive GEMM", b"// A naive SGEMM").replace(b"row = blockIdx.y * 16", b"row = blockIdx.y*16")
    head = head.replace(b"col = blockIdx.x * 16", b"col = blockIdx.x*16")
    _commit(repo, head, "touch the kernel")
    changed = _changed_by_git(repo, base)
    assert changed == {1, 3, 4}
    result = invoke("review", "src/gemm.cu", "--format", "github", "--diff-base", base)
    assert result.exit_code == 1, result.output
    comments = json.loads(result.stdout)
    assert len(comments) == 2 and all("```suggestion" in c["body"] for c in comments)
    for c in comments:
        assert set(range(c.get("start_line", c["line"]), c["line"] + 1)) <= changed
    assert replace_lines(head, suggestions_of(comments)) == rewritten(repo / "src" / "gemm.cu")


@needs_git
def test_github_gives_a_diff_where_the_fix_lies_outside_the_changes(repo, tmp_path):
    base = git(repo, "rev-parse", "HEAD").strip()
    head = GEMM.replace(b"// one block per 16 x 16 tile of C", b"// one block per tile of C")
    _commit(repo, head, "touch a comment")
    assert _changed_by_git(repo, base) == {11}
    result = invoke("review", "src/gemm.cu", "--format", "github", "--diff-base", base)
    assert result.exit_code == 1, result.output
    (comment,) = json.loads(result.stdout)
    assert comment["line"] == 11 and "start_line" not in comment  # the kernel's line is not changed: the first changed one
    assert "```suggestion" not in comment["body"]
    expected = rewritten(repo / "src" / "gemm.cu")
    diff = re.search(r"```diff\n(.*)\n```", comment["body"], re.DOTALL)[1] + "\n"
    (tmp_path / "fix.patch").write_text(diff)
    git(repo, "apply", "--check", str(tmp_path / "fix.patch"))
    git(repo, "apply", str(tmp_path / "fix.patch"))
    assert (repo / "src" / "gemm.cu").read_bytes() == expected


@needs_git
def test_github_does_not_suggest_a_hunk_the_pull_request_changes_only_in_part(repo):
    base = git(repo, "rev-parse", "HEAD").strip()
    head = GEMM.replace(b"// A naive GEMM", b"// A naive SGEMM").replace(b"col = blockIdx.x * 16", b"col = blockIdx.x*16")
    _commit(repo, head, "touch line 4 of the kernel's hunk, not line 3")
    assert _changed_by_git(repo, base) == {1, 4}
    (comment,) = json.loads(invoke("review", "src/gemm.cu", "--format", "github", "--diff-base", base).stdout)
    assert comment["line"] == 1 and "```suggestion" not in comment["body"] and "```diff" in comment["body"]


@needs_git
def test_github_comments_at_the_kernel_line_when_only_that_line_changes(repo):
    base = git(repo, "rev-parse", "HEAD").strip()
    _commit(repo, GEMM.replace(b"int n) {", b"int n) {  // n x n"), "touch the kernel's line")
    (comment,) = json.loads(invoke("review", "src/gemm.cu", "--format", "github", "--diff-base", base).stdout)
    assert comment["line"] == 2 and "```diff" in comment["body"]


@needs_git
def test_github_leaves_a_file_level_note_on_an_unchanged_file(repo):
    base = git(repo, "rev-parse", "HEAD").strip()
    result = invoke("review", "src/gemm.cu", "--format", "github", "--diff-base", base)
    assert result.exit_code == 1, result.output
    (comment,) = json.loads(result.stdout)
    assert comment["subject_type"] == "file" and "line" not in comment and "```diff" in comment["body"]


@needs_git
def test_diff_base_is_checked(repo):
    assert invoke("review", "src/gemm.cu", "--format", "sarif", "--diff-base", "HEAD").exit_code == 2
    for ref in ("--output=x", "no-such-ref"):
        result = invoke("review", "src/gemm.cu", "--format", "github", "--diff-base", ref)
        assert result.exit_code == 2, result.output
        assert result.stdout == ""
    assert not (repo / "x").exists()


def test_changed_lines_of_a_zero_context_diff():
    diff = "diff --git a/k.cu b/k.cu\n--- a/k.cu\n+++ b/k.cu\n@@ -1 +1 @@\n-a\n+b\n@@ -5,0 +6,2 @@\n+c\n+d\n@@ -9,2 +10,0 @@\n-e\n-f\n"
    assert parse_changed_lines(diff) == {1, 6, 7}


# exit codes and outputs


def test_exit_codes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("gemm.cu").write_bytes(GEMM)
    Path("plain.cu").write_bytes(NO_BLOCK_INDEX)
    quiet = invoke("review", "plain.cu", "--format", "sarif")
    assert quiet.exit_code == 0, quiet.output
    assert json.loads(quiet.stdout)["runs"][0]["results"] == []
    assert invoke("review", "plain.cu", "--format", "patch").stdout == ""
    assert invoke("review", "plain.cu", "gemm.cu", "--format", "rdjson").exit_code == 1
    assert invoke("review", "missing.cu", "--format", "rdjson").exit_code == 2
    assert invoke("review", "gemm.cu", "--format", "yaml").exit_code == 2
    assert invoke("review", "gemm.cu", "--format", "sarif", "--hw", "nope").exit_code == 2
    assert "Exit codes:" in invoke("review", "--help").stdout


def test_a_bad_file_among_good_ones_is_named_and_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("gemm.cu").write_bytes(GEMM)
    Path("bad.cu").write_bytes(BAD)
    Path("two.cu").write_bytes(TWO)
    result = invoke("review", "gemm.cu", "bad.cu", "missing.cu", "two.cu", "--format", "sarif", "-o", "out.sarif")
    assert result.exit_code == 2
    assert "bad.cu:3:5" in result.stderr and "missing.cu" in result.stderr
    assert "2 of 4 file(s) failed" in result.stderr
    assert not Path("out.sarif").exists()
    on_stdout = invoke("review", "gemm.cu", "bad.cu", "--format", "patch")
    assert on_stdout.exit_code == 2 and on_stdout.stdout == ""


@pytest.mark.parametrize("fmt", ["sarif", "patch"])
def test_jobs_give_the_same_review_errors_and_exit_code(tmp_path, monkeypatch, fmt):
    monkeypatch.chdir(tmp_path)
    Path("gemm.cu").write_bytes(GEMM)
    Path("two.cu").write_bytes(TWO)
    Path("plain.cu").write_bytes(NO_BLOCK_INDEX)
    one = invoke("review", "gemm.cu", "plain.cu", "two.cu", "--format", fmt)
    many = invoke("review", "-j", "3", "gemm.cu", "plain.cu", "two.cu", "--format", fmt)
    assert (many.exit_code, many.stdout) == (one.exit_code, one.stdout) and one.exit_code == 1
    # a file that fails on a worker keeps its message and its exit code
    Path("bad.cu").write_bytes(BAD)
    failed = invoke("review", "-j", "2", "gemm.cu", "bad.cu", "missing.cu", "--format", fmt)
    assert failed.exit_code == 2 and "bad.cu:3:5" in failed.stderr and "missing.cu" in failed.stderr
    assert "2 of 3 file(s) failed" in failed.stderr and failed.stdout == ""


def test_the_output_is_never_an_input(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("gemm.cu").write_bytes(GEMM)
    Path("other.cu").write_bytes(TWO)
    os.link("other.cu", "alias.cu")
    for target in ("gemm.cu", "other.cu", "alias.cu", "./gemm.cu"):
        result = invoke("review", "gemm.cu", "other.cu", "--format", "patch", "-o", target)
        assert result.exit_code == 2, result.output
    assert Path("gemm.cu").read_bytes() == GEMM and Path("other.cu").read_bytes() == TWO
    assert invoke("review", "gemm.cu", "--format", "patch", "-o", "out.patch").exit_code == 1
    assert Path("out.patch").read_text().startswith("--- a/gemm.cu")


def test_grid_options_go_to_the_file_with_that_kernel(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("gemm.cu").write_bytes(GEMM)
    Path("open.cu").write_bytes(GEMM.replace(b"gemm", b"mm").replace(b"dim3(256, 256)", b"grid"))
    Path("plain.cu").write_bytes(NO_BLOCK_INDEX)
    without = json.loads(invoke("review", "gemm.cu", "open.cu", "--format", "sarif").stdout)
    assert {r["properties"]["kernel"] for r in without["runs"][0]["results"]} == {"gemm"}
    given = invoke("review", "gemm.cu", "open.cu", "plain.cu", "--format", "sarif", "--grid", "mm=256,256")
    assert given.exit_code == 1, given.output
    assert {r["properties"]["kernel"] for r in json.loads(given.stdout)["runs"][0]["results"]} == {"gemm", "mm"}
    assert invoke("review", "gemm.cu", "--format", "sarif", "--grid", "nowhere=4,4").exit_code == 2


# findings


def test_a_measured_choice_is_a_safe_fix_with_its_numbers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("gemm.cu").write_bytes(GEMM)
    result = rewrite_file("gemm.cu", Options(hw=load_hw("h200"), compile=False))
    (outcome,) = result.outcomes
    attempt = Attempt(outcome.swizzle, 98.5, True, True, 1.8, 1.7, 0.01, 9.0, 5.0, 97.0, 4e8, "faster", 1.0)
    bench = KernelBench("gemm", outcome.line, (attempt,), outcome.swizzle, "accepted")
    (finding,) = findings_from(replace(result, benchmarked=True, bench=(bench,)))
    assert finding.fix.applicability == "safe" and finding.measured.speedup == 1.8
    assert "1.80x as fast" in finding.message
    (predicted,) = findings_from(result)
    assert predicted.fix.applicability == "unsafe" and predicted.measured is None


def test_a_fix_on_lines_that_are_not_utf8_is_reported_without_suggestions(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("gemm.cu").write_bytes(GEMM.replace(b"A naive GEMM", b"A na\xefve GEMM (\xa9 someone)"))  # Latin-1
    result = invoke("review", "gemm.cu", "--format", "sarif")
    assert result.exit_code == 1, result.output
    (found,) = json.loads(result.stdout)["runs"][0]["results"]
    assert "fixes" not in found and "not UTF-8" in found["message"]["text"]
    diagnostics = json.loads(invoke("review", "gemm.cu", "--format", "rdjson").stdout)["diagnostics"]
    assert [("suggestions" in d) for d in diagnostics] == [False, True]  # the library lands on line 1
    assert b"na\xefve" in invoke("review", "gemm.cu", "--format", "patch").stdout_bytes


def test_parts_of_two_kernels_share_one_library(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("two.cu").write_bytes(TWO)
    result = rewrite_file("two.cu", Options(hw=load_hw("h200"), compile=False))
    found = findings_from(result)
    assert [f.kernel for f in found] == ["gemm", "gemm_t"]
    assert found[0].fix.library == found[1].fix.library
    pieces = parts(result, found)
    assert sum(p.library for p in pieces) == 1
    assert [[f.kernel for f in p.findings] for p in pieces] == [["gemm"], ["gemm_t"]]  # the library's lines touch gemm's


# line hunks


def _apply_hunks(old: bytes, edits: list[Edit]) -> bytes:
    return replace_lines(old, [(h.start, h.end, h.new) for h in line_hunks(old, edits)])


@pytest.mark.parametrize("old, edits, spans", [
    (b"a\nb\nc\n", [Edit(2, 2, b"X\n")], [(2, 2)]),  # an insertion before a line replaces that line
    (b"a\nb\nc\n", [Edit(6, 6, b"X\n")], [(3, 3)]),  # one at the end, after the last line end
    (b"a\nb\nc", [Edit(5, 5, b"\nX")], [(3, 3)]),  # a last line without a line end
    (b"a\nb\nc\nd\n", [Edit(0, 1, b"A"), Edit(4, 5, b"C")], [(1, 1), (3, 3)]),
    (b"a\nb\nc\nd\n", [Edit(0, 1, b"A"), Edit(2, 3, b"B")], [(1, 2)]),  # adjacent lines share a hunk
    (b"a\nb\nc\n", [Edit(2, 4, b"")], [(2, 3)]),  # removing a line end takes in the next line
    (b"a\nb\nc\n", [Edit(4, 6, b"")], [(2, 3)]),  # or, for the last line, the previous one
    (b"a\nb\nc\nd\n", [Edit(2, 3, b"B"), Edit(6, 8, b"")], [(2, 4)]),  # which may join the hunk before
    (b"a\r\nb\r\nc\r\n", [Edit(3, 4, b"B")], [(2, 2)]),
])
def test_line_hunks(old, edits, spans):
    assert [(h.start, h.end) for h in line_hunks(old, edits)] == spans
    assert _apply_hunks(old, edits) == apply_edits(old, edits)


@given(st.lists(st.sampled_from(["x", "yy", "", "\r"]), min_size=1, max_size=8).map("\n".join).map(str.encode),
       st.booleans(),
       st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3), st.sampled_from([b"", b"Q", b"q\n", b"\n"])), max_size=4))
def test_line_hunks_give_the_edited_file(text, newline_at_end, raw):
    old = text + (b"\n" if newline_at_end else b"")
    edits: list[Edit] = []
    for at, length, inserted in raw:
        start = min(at, len(old))
        edit = Edit(start, min(start + length, len(old)), inserted)
        if overlapping([*edits, edit]) is None:
            edits.append(edit)
    edited = apply_edits(old, edits)
    last_end = b"\r\n" if old.endswith(b"\r\n") else b"\n" if old.endswith(b"\n") else b""
    if not edits or not old or not edited.endswith(last_end):
        return  # an empty file, or its last line end changed: whole lines cannot say that (line_hunks refuses)
    assert _apply_hunks(old, edits) == edited


def test_fixes_that_do_not_add_up_to_the_rewrite_are_an_internal_error(tmp_path):
    from swzc.core.errors import SwzcError
    from swzc.report.findings import shared_library

    path = tmp_path / "gemm.cu"
    path.write_bytes(GEMM)
    result = rewrite_file(str(path), Options(hw=load_hw("h200"), compile=False))
    assert shared_library(result) == result.library
    broken = replace(result, library=Edit(result.library.start, result.library.end, b"// not the library\n"))
    with pytest.raises(SwzcError, match="do not add up to its rewrite"):
        findings_from(broken)


def test_folders_with_no_source_file_are_an_empty_review(tmp_path, monkeypatch):
    """As suggest says nothing to fix: a folder with no .cu, .cuh or .hip file gives an empty report (a note on
    stderr, exit 0), in every format."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    runner = CliRunner()
    for fmt in ("sarif", "rdjson", "github", "patch"):
        result = runner.invoke(main, ["review", "empty", "--format", fmt, "-o", f"out.{fmt}"])
        assert result.exit_code == 0 and "no .cu, .cuh or .hip file under empty" in result.stderr, result.output
    assert json.loads((tmp_path / "out.sarif").read_text())["runs"][0]["results"] == []
    assert json.loads((tmp_path / "out.rdjson").read_text())["diagnostics"] == []
    assert (tmp_path / "out.patch").read_text() == ""
