"""The harness's own checks: how it names syntax errors, places them, classifies strides and blind
rewrites, and refuses a run that modified its sources.  Run with `.venv/bin/pytest bench/realcode`."""

import json
import os
import stat
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import evaluate  # noqa: E402

KERNEL = b"""__global__ void scale(float* out, const float* in, int n) {
  const int i = blockIdx.y * 16 + threadIdx.y;
  const int j = blockIdx.x * 16 + threadIdx.x;
  out[i * n + j] = 2.0f * in[i * n + j];
}
"""


def diagnose(source: bytes) -> tuple[str, int, str]:
    site = evaluate.first_error(source)
    assert site is not None
    category, line = evaluate.categorise(source, site)
    return category, line, evaluate.where(source, line)[0]


def test_a_hidden_missing_newline_after_the_last_include_is_found_where_it_is():
    source = KERNEL + b"\n#include <timers.c>"
    site = evaluate.first_error(source)
    assert site is not None and site.kind.startswith("MISSING") and site.line == 7
    assert diagnose(source)[0] == "no final newline after #include"


def test_if_branches_splitting_a_host_function_header():
    source = KERNEL + b"\n" * 30 + b"""#ifdef PINNED
static void fill(float* __restrict__ p, int n, bool pinned)
#else
static void fill(float* p, int n)
#endif
{
  for (int i = 0; i < n; ++i) p[i] = 0.0f;
}
"""
    category, line, place = diagnose(source)
    assert category == "#if/#else splitting a construct (each branch parses alone)"
    assert line == 36 and place == "in host code far from any kernel"


def test_if_branches_splitting_a_statement_inside_a_kernel():
    source = b"""__global__ void relu(float* x, int n) {
  const int i = blockIdx.x * 64 + threadIdx.x;
  float v = x[i];
#if STRICT
  if (v < 0.0f) {
#else
  if (v < -1.0f) {
#endif
    v = 0.0f;
  }
  x[i] = v;
}
"""
    category, line, place = diagnose(source)
    assert category.startswith("#if/#else splitting") and line == 4 and place == "in a __global__ kernel (body)"


@pytest.mark.parametrize("snippet, category", [
    (b"struct __align__(16) Stats { double t; int n; };\n", "__align__(n)"),
    (b"void CUDART_CB done(void* user) { (void)user; }\n", "CUDART_CB"),
    (b"void rows(int n) { float** r = new float*[n]; delete[] r; }\n", "new T*[n]"),
    (b"template <typename T> bool wide() { return typeid(T) == typeid(double); }\n", "typeid"),
    (b"template <typename T> struct Box { T v; };\ntemplate struct Box<int>;\n", "explicit template instantiation"),
    (b"void f() { auto g = [=] __device__ (float x) { return x; }; }\n", "extended __device__ lambda"),
    (b"void run(float* p) {\n  TIMER_START\n  scale<<<1, 1>>>(p, p, 1);\n}\n", "macro used as a statement without ';'"),
])
def test_constructs_nvcc_accepts_are_named(snippet, category):
    assert diagnose(KERNEL + snippet)[0] == category


def test_an_error_in_the_arguments_of_a_launch_is_at_the_launch_site():
    source = KERNEL + b"""void run(float* p, float* q) {
  scale<<<dim3(4, 4), dim3(16, 16)>>>(p,
#if USE_Q
      q,
#endif
      16);
}
"""
    assert evaluate.where(source, 9)[0] == "at a launch site"


def test_keeping_one_branch_keeps_lines_and_include_guards():
    source = b"#ifndef GUARD\n#define GUARD\n#if A\nint a;\n#else\nlong a;\n#endif\nint b;\n#endif\n"
    first, last = evaluate.keep_branch(source, "first"), evaluate.keep_branch(source, "last")
    assert first.count(b"\n") == last.count(b"\n") == source.count(b"\n")
    assert b"int a;" in first and b"long a;" not in first
    assert b"long a;" in last and b"int a;" not in last
    assert b"int b;" in first and b"int b;" in last


@pytest.mark.parametrize("line, pattern, axes", [
    ("  for (int b = blockIdx.z; b < batch; b += gridDim.z) {", "block stride, t += gridDim (persistent) over z", {"z"}),
    ("  for (int t = blockIdx.x; t < n; t += (int)gridDim.x) {", "block stride, t += gridDim (persistent) over x", {"x"}),
    ("  for (int i = first; i < n; i += blockDim.x * gridDim.x) {", "grid stride, i += gridDim * size over x", {"x"}),
    ("  total += x[i];", "no loop step: an accumulation through a value derived from gridDim (a false grid-stride)", set()),
])
def test_stride_patterns(line, pattern, axes):
    assert evaluate.stride_pattern([line], 1) == (pattern, axes)


def test_a_stride_kept_in_locals_is_followed_to_its_definition():
    lines = ["  const int blocks = gridDim.y;", "  const int step = 2 * blockDim.y * blocks;", "  int r = threadIdx.y;",
             "  while (r < rows) {", "    out[r] = 0;", "    r += step;", "  }"]
    assert evaluate.stride_pattern(lines, 6) == ("grid stride, i += gridDim * size over y", {"y"})


def test_blind_rewrites_are_recognised_by_the_missing_ranking_as_well_as_by_the_wording():
    ranked = {"status": "rewritten", "chosen_by": "predicted 400 MB from DRAM", "candidates": [{"name": "grouped:8"}]}
    assert not evaluate.is_blind(ranked)
    assert evaluate.is_blind(dict(ranked, chosen_by="not ranked (no launch fixes the grid); chosen by the default rule"))
    assert evaluate.is_blind(dict(ranked, chosen_by="picked without a model", candidates=[]))
    assert not evaluate.is_blind(dict(ranked, status="declined", candidates=[]))


def test_a_rewrite_whose_order_moves_more_dram_bytes_is_counted():
    cands = [{"name": "identity", "predicted_dram_bytes": 100.0}, {"name": "grouped:8", "predicted_dram_bytes": 90.0},
             {"name": "hilbert:8", "predicted_dram_bytes": 120.0}]
    kernel = {"status": "rewritten", "swizzle": "grouped:8", "candidates": cands}
    assert not evaluate.raises_dram(kernel)
    assert evaluate.raises_dram(dict(kernel, swizzle="hilbert:8"))
    assert evaluate.raises_dram(dict(kernel, swizzle="hilbert:8@4096"))  # a gated order: its ungated figures
    assert not evaluate.raises_dram(dict(kernel, swizzle="hilbert:8", status="declined"))
    assert not evaluate.raises_dram(dict(kernel, swizzle="morton:8"))  # no figures for it: not counted


def test_globs():
    assert evaluate.matches("Samples/0_Intro/a/b.cu", ["Samples/**/*.cu"])
    assert evaluate.matches("Samples/b.cu", ["Samples/**/*.cu"])
    assert not evaluate.matches("Samples/a/b.cuh", ["Samples/**/*.cu"])
    assert not evaluate.matches("dev/x.cu", ["*.cu"])


def _fake_swzc(tmp_path: Path, body: str) -> str:
    script = tmp_path / "swzc"
    script.write_text('#!/bin/sh\n[ "$1" = --version ] && echo "swzc, version 0" && exit 0\n' + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_a_traceback_is_a_crash_and_a_run_past_the_limit_a_timeout(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.cu").write_bytes(KERNEL)
    (corpus / "b.cu").write_bytes(KERNEL)
    swzc = _fake_swzc(tmp_path, 'case "$2" in *a.cu) echo "Traceback (most recent call last):" >&2; exit 1;; '
                                '*b.cu) sleep 20;; esac\n')
    out = tmp_path / "result"
    code = evaluate.main(["--local", str(corpus), "--swzc", swzc, "--no-compile", "--timeout", "2",
                          "--work", str(tmp_path / "work"), "--out", str(out)])
    doc = json.loads(Path(f"{out}.json").read_text())
    assert code == 1
    assert [c["file"] for c in doc["crashes"]] == ["corpus:a.cu"]
    assert doc["timeouts"] == ["corpus:b.cu"]


def test_a_run_that_modifies_a_source_fails(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.cu").write_bytes(KERNEL)
    swzc = _fake_swzc(tmp_path, 'echo "// touched" >> "$2"; echo "{}"\n')
    out = tmp_path / "result"
    code = evaluate.main(["--local", str(corpus), "--swzc", swzc, "--no-compile",
                          "--work", str(tmp_path / "work"), "--out", str(out)])
    doc = json.loads(Path(f"{out}.json").read_text())
    assert code == 1 and not doc["meta"]["sources_unchanged"]
    assert (corpus / "a.cu").read_bytes() == KERNEL, "the harness works on copies"
    assert os.path.isdir(tmp_path / "work" / "src")


def test_published_results_quote_nothing_of_the_files(tmp_path):
    """Reasons and messages quote source text; the committed .json and .md keep names, lines and categories."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "k.cu").write_bytes(KERNEL)
    (corpus / "bad.cu").write_bytes(b"void f() { float** q_secret_rows = new float*[4]; }\n")
    kernel = {"name": "scale", "line": 1, "status": "rewritten", "reason": "quoted: q_secret_expr(i / 8)",
              "swizzle": "grouped:8", "adapter": "2d", "chosen_by": "not ranked (q_secret_expr(i / 8))", "candidates": [],
              "model": "no read the model can follow (q_secret_expr(i / 8))", "hazards": [], "launches": []}
    doc = json.dumps({"changed": True, "kernels": [kernel], "compile": None})
    swzc = _fake_swzc(tmp_path, 'case "$2" in *bad.cu) echo "swzc: error: $2:1:12: syntax error: cannot parse '
                                "'q_secret_rows'\" >&2; exit 2;; esac\n"
                                f"echo '{doc}'\n")
    out = tmp_path / "result"
    evaluate.main(["--local", str(corpus), "--swzc", swzc, "--no-compile", "--work", str(tmp_path / "work"),
                   "--out", str(out)])
    published = Path(f"{out}.json").read_text() + Path(f"{out}.md").read_text()
    assert "q_secret" not in published
    assert "scale" in published and "new T*[n]" in published and "not ranked: no read the model can follow" in published
    assert "q_secret" in (tmp_path / "work" / "realcode_full.json").read_text()


def test_outputs_are_hashed_and_reasons_published_as_hashes(tmp_path):
    """The file -o wrote and the patch --patch wrote are recorded by SHA-256, and each kernel's reason by
    the SHA-256 of its text, so that two runs compare byte for byte without quoting the files."""
    import hashlib

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "k.cu").write_bytes(KERNEL)
    kernel = {"name": "scale", "line": 1, "status": "rewritten", "reason": "q_secret_reason", "swizzle": "grouped:8",
              "adapter": "2d", "chosen_by": "predicted", "candidates": [{"name": "grouped:8"}], "hazards": [], "launches": []}
    doc = json.dumps({"changed": True, "kernels": [kernel], "compile": None})
    swzc = _fake_swzc(tmp_path, 'while [ $# -gt 0 ]; do case "$1" in -o) printf rewritten > "$2";; '
                                '--patch) printf patch > "$2";; esac; shift; done\n'
                                f"echo '{doc}'\n")
    out = tmp_path / "result"
    evaluate.main(["--local", str(corpus), "--swzc", swzc, "--no-compile", "--work", str(tmp_path / "work"),
                   "--out", str(out)])
    record = json.loads(Path(f"{out}.json").read_text())["records"][0]
    assert record["output_sha256"] == hashlib.sha256(b"rewritten").hexdigest()
    assert record["patch_sha256"] == hashlib.sha256(b"patch").hexdigest()
    k = record["kernels"][0]
    assert (k["analyze_status"], k["status"], k["swizzle"], k["adapter"], k["rewrite_adapter"]) == (
        "rewritten", "rewritten", "grouped:8", "2d", "2d")
    assert k["reason_sha256"] == hashlib.sha256(b"q_secret_reason").hexdigest()
    assert "q_secret" not in Path(f"{out}.json").read_text()
