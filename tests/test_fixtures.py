"""Every fixtures/<case>/: input.* rewritten with case.toml's args must equal expected.* byte for byte.

Regenerate the snapshots after an intended change with SWZC_UPDATE_FIXTURES=1 and review the diff.
"""

import json
import os
import tomllib

import pytest
from click.testing import CliRunner
from support import FIXTURES, needs_nvcc

from swzc.commands.cli import main

CASES = sorted(d for d in FIXTURES.iterdir() if (d / "case.toml").is_file())
UPDATE = os.environ.get("SWZC_UPDATE_FIXTURES") == "1"


def _run(case, tmp_path, monkeypatch, *extra):
    spec = tomllib.loads((case / "case.toml").read_text())
    (src,) = case.glob("input.*")
    monkeypatch.chdir(case)
    out = tmp_path / f"out{src.suffix}"
    before = src.read_bytes()
    result = CliRunner().invoke(main, ["rewrite", src.name, "-o", str(out), "--json", *spec["args"], *extra])
    assert src.read_bytes() == before, "the input file was modified"
    return spec, src, out, result


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_fixture(case, tmp_path, monkeypatch):
    spec, src, out, result = _run(case, tmp_path, monkeypatch, "--no-compile")
    assert result.exit_code == spec["exit"], result.output
    doc = json.loads(result.stdout)
    assert {k["name"]: k["status"] for k in doc["kernels"]} == spec["kernels"]
    for kernel in doc["kernels"]:
        assert kernel["reason"], kernel
        if kernel["status"] == "rewritten":
            assert kernel["proof"].startswith("bijection on")
    expected = case / f"expected{src.suffix}"
    if UPDATE:
        expected.write_bytes(out.read_bytes())
    assert out.read_bytes() == expected.read_bytes()
    assert doc["changed"] == (expected.read_bytes() != src.read_bytes())


@needs_nvcc
@pytest.mark.parametrize("case", [c for c in CASES if (c / "case.toml").read_text().count('"rewritten"')], ids=lambda p: p.name)
def test_fixture_output_compiles(case, tmp_path, monkeypatch):
    _, _, _, result = _run(case, tmp_path, monkeypatch)
    doc = json.loads(result.stdout)
    assert doc["compile"]["status"] == "ok", doc["compile"]


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_rewriting_twice_changes_nothing(case, tmp_path, monkeypatch):
    """swzc's own output is recognised: a second run (e.g. a pre-commit hook) rewrites no kernel again."""
    spec = tomllib.loads((case / "case.toml").read_text())
    (expected,) = case.glob("expected.*")
    monkeypatch.chdir(case)
    out = tmp_path / f"again{expected.suffix}"
    result = CliRunner().invoke(main, ["rewrite", expected.name, "-o", str(out), "--json", "--no-compile", *spec["args"]])
    doc = json.loads(result.stdout)
    assert not doc["changed"] and out.read_bytes() == expected.read_bytes()
    assert all(k["status"] != "rewritten" for k in doc["kernels"])
