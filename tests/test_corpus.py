"""Kernels in the style of classic GPU benchmark suites: `rewrite --swizzle grouped:8` never crashes, and
every rewritten file still compiles with nvcc."""

import json

import pytest
from click.testing import CliRunner
from support import CORPUS, needs_nvcc

from swzc.commands.cli import main

FILES = sorted(CORPUS.glob("*.cu"))


def _rewrite(path, tmp_path, *extra):
    out = tmp_path / path.name
    result = CliRunner().invoke(main, ["rewrite", str(path), "-o", str(out), "--swizzle", "grouped:8", "--json", *extra])
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout), out


def test_corpus_is_there():
    assert len(FILES) >= 10


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_corpus_rewrites(path, tmp_path):
    doc, out = _rewrite(path, tmp_path, "--no-compile")
    assert out.read_bytes() != path.read_bytes() or not doc["changed"]
    assert all(k["status"] in ("rewritten", "refused", "declined", "untouched") for k in doc["kernels"])


@needs_nvcc
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_corpus_output_compiles(path, tmp_path):
    doc, _ = _rewrite(path, tmp_path)
    if doc["changed"]:
        assert doc["compile"]["status"] == "ok", doc["compile"]


def test_corpus_refusals():
    """The kernels a safe tool must not reorder are refused, with the reason."""
    expected = {
        "sdk_style_threadfence_reduction.cu": {"reduceSinglePass": "atomic ticket"},
        "parboil_style_stencil_macro.cu": {"stencil7": "macro GLOBAL_", "copy_boundary": "macro GLOBAL_"},
    }
    for name, kernels in expected.items():
        result = CliRunner().invoke(main, ["rewrite", str(CORPUS / name), "--no-compile", "--json"])
        got = {k["name"]: k for k in json.loads(result.stdout)["kernels"]}
        for kernel, reason in kernels.items():
            assert got[kernel]["status"] == "refused" and reason in got[kernel]["reason"], got[kernel]


def test_corpus_grid_stride_loops_are_not_refused():
    """Element-wise grid-stride loops are 1D kernels: declined on a GPU with one L2 (no tiles to group), not refused."""
    result = CliRunner().invoke(main, ["rewrite", str(CORPUS / "shoc_style_histogram_gridstride.cu"), "--no-compile", "--json"])
    got = {k["name"]: k for k in json.loads(result.stdout)["kernels"]}
    for kernel in ("histogram_shared", "normalize_bins"):
        assert got[kernel]["status"] == "declined" and "no tiles to regroup" in got[kernel]["reason"], got[kernel]
