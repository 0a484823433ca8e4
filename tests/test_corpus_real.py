"""The realistic corpus (tests/corpus_real/): files in the styles found in public CUDA code — a file that ends
in a directive with no newline, host code tree-sitter cannot parse, #if-split constructs, sizes and element
types in a local header, runtime sizes, persistent and grid-stride loops, bf16/fp8/half/template kernels,
cooperative loads and cast reads, statement macros, unsafe helpers and divisors, a write-only kernel, HIP.
Each case's `swzc rewrite` (with case.toml's args) must give its exit code, its kernel statuses, and the
output snapshot `expected.*` byte for byte; what each case exercises is in tests/corpus_real/README.md.

Regenerate the snapshots after an intended change with SWZC_UPDATE_FIXTURES=1 and review the diff."""

import json
import os
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import needs_nvcc

from swzc.commands.cli import main

ROOT = Path(__file__).parent / "corpus_real"
CASES = sorted(d for d in ROOT.iterdir() if (d / "case.toml").is_file())
UPDATE = os.environ.get("SWZC_UPDATE_FIXTURES") == "1"


def _rewrite(case, tmp_path, monkeypatch, *extra):
    spec = tomllib.loads((case / "case.toml").read_text())
    (src,) = [p for p in case.glob("input.*") if p.suffix in (".cu", ".hip")]
    monkeypatch.chdir(case)
    out = tmp_path / f"out{src.suffix}"
    before = src.read_bytes()
    result = CliRunner().invoke(main, ["rewrite", src.name, "-o", str(out), "--json", *spec["args"], *extra])
    assert src.read_bytes() == before, "the input file was modified"
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    return spec, src, out, result


def test_the_corpus_is_there():
    assert len(CASES) >= 15


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_corpus_case(case, tmp_path, monkeypatch):
    spec, src, out, result = _rewrite(case, tmp_path, monkeypatch, "--no-compile")
    assert result.exit_code == spec["exit"], result.output
    doc = json.loads(result.stdout)
    assert {k["name"]: k["status"] for k in doc["kernels"]} == spec["kernels"], [(k["name"], k["status"], k["reason"]) for k in doc["kernels"]]
    for kernel in doc["kernels"]:
        assert kernel["reason"], kernel
        if kernel["status"] == "rewritten":
            assert kernel["proof"].startswith("bijection on"), kernel
            assert kernel["chosen_by"] or "--swizzle" in spec["args"], kernel  # chosen by the model or the user, never blind
    expected = case / f"expected{src.suffix}"
    if UPDATE:
        expected.write_bytes(out.read_bytes())
    assert out.read_bytes() == expected.read_bytes()


@needs_nvcc
@pytest.mark.parametrize("case", [c for c in CASES if '"rewritten"' in (c / "case.toml").read_text()], ids=lambda p: p.name)
def test_corpus_output_compiles(case, tmp_path, monkeypatch):
    spec, _, _, result = _rewrite(case, tmp_path, monkeypatch)
    assert result.exit_code == spec["exit"], result.output
    assert json.loads(result.stdout)["compile"]["status"] == "ok", result.stdout
