"""Every emitter's output, byte for byte, against a snapshot under tests/snapshots/emitters/.

The outputs of `rewrite` (text, JSON, the patch, the rewritten file, --report's JSON and Markdown) and `analyze`
(text and JSON), `suggest` (text and JSON), `review` (patch, SARIF, rdjson, GitHub), `show`'s summary and `probe`'s
model file for a few small kernels written here: a GEMM the L2 model swizzles, one whose sizes are set at
run time (ranked over a sweep of sizes, its order gated), a file whose kernels are
refused (one by two hazard rules), declined and left untouched, a file with a syntax error beside a clean
kernel, and one whose only kernel holds the error (bad input: the error, as text and as JSON).

The runs are made deterministic: each in a fresh folder of the same relative layout (the files are named
relative to it, which holds a `.git` so that neither a pyproject.toml nor a git work tree above it is read),
without the user's config.toml, the compile check off.  The only thing normalised is swzc's version in the
SARIF driver (a release changes it, not an emitter); no output carries a time or an absolute path.

When an output changes on purpose, regenerate the snapshots and review their diff:

    SWZC_UPDATE_SNAPSHOTS=1 pytest tests/test_emitters_snapshot.py
"""

from __future__ import annotations

import difflib
import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from support import GROUPED_8_BODY
from test_probe import ONE_PARTITION

from swzc import __version__
from swzc.commands.cli import main

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots" / "emitters"
UPDATE = os.environ.get("SWZC_UPDATE_SNAPSHOTS") == "1"

GEMM = """\
// A naive GEMM, one thread per element of C.
__global__ void gemm(const float* A, const float* B, float* C, int n) {
  int row = blockIdx.y * 16 + threadIdx.y;
  int col = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}

void launch(const float* A, const float* B, float* C) {
  gemm<<<dim3(256, 256), dim3(16, 16)>>>(A, B, C, 4096);
}
"""

# Refused by two rules (it waits on other blocks, and an atomic's return value orders them), declined (a 1D
# grid on a GPU with one L2), and untouched (it does not read the block index).
MIXED = """\
__device__ volatile int ready[4096];
__device__ unsigned counter;

__global__ void chained(float* c, float v) {
  while (ready[blockIdx.x] == 0) { }
  unsigned t = atomicAdd(&counter, 1u);
  c[t] = v;
  c[(blockIdx.y * 16 + threadIdx.y) * 4096 + blockIdx.x * 16 + threadIdx.x] = v;
}

__global__ void saxpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void scale(float* x, float a, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] *= a;
}

void launch(float* c, float* y, const float* x) {
  chained<<<dim3(256, 256), dim3(16, 16)>>>(c, 1.0f);
  saxpy<<<4096, 256>>>(y, x, 2.0f, 4096 * 256);
  scale<<<1, 256>>>(y, 0.5f, 1024);
}
"""

# tree-sitter cannot parse line 13; the GEMM is clear of it and is rewritten, the broken kernel refused.
SYNTAX = """\
// A GEMM beside a kernel that does not parse.
__global__ void matmul(const float* A, const float* B, float* C, int n) {
  int row = blockIdx.y * 16 + threadIdx.y;
  int col = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}

__global__ void broken(float* p) {
  int x = 1;
  p[blockIdx.x] = x;
  p[x] = (;
}

void launch(const float* A, const float* B, float* C, float* p) {
  matmul<<<dim3(256, 256), dim3(16, 16)>>>(A, B, C, 4096);
  broken<<<64, 256>>>(p);
}
"""

# A GEMM whose sizes the launching function receives: ranked over a sweep of sizes, gated at its crossover.
RUNTIME = """\
__global__ void gemm_rt(const float* A, const float* B, float* C, int M, int N, int K) {
  int row = blockIdx.y * 8 + threadIdx.y;
  int col = blockIdx.x * 32 + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}

void launch(const float* A, const float* B, float* C, int M, int N, int K) {
  gemm_rt<<<dim3((N + 31) / 32, (M + 7) / 8), dim3(32, 8)>>>(A, B, C, M, N, K);
}
"""

# The only kernel holds the parse error: bad input, nothing to analyse.
BROKEN = "__global__ void k(float* c) {\n  c[blockIdx.x] = (;\n}\n"

FILES = {"src/gemm.cu": GEMM, "src/mixed.cu": MIXED, "src/syntax.cu": SYNTAX, "src/broken.cu": BROKEN, "src/runtime.cu": RUNTIME,
         "src/two.cu": GEMM + RUNTIME,  # two suggestions in one file: one command applies both
         "probe.txt": ONE_PARTITION,
         "replies.json": json.dumps({"about": "one proven order", "replies": [
             {"name": "g8", "expectation": "a grouped order", "lessons": "", "body": GROUPED_8_BODY}]})}
ALL = ("src/gemm.cu", "src/mixed.cu", "src/syntax.cu", "src/runtime.cu")

# (snapshot, command line, exit code, stream): the stream whose bytes are the snapshot
CASES = [
    ("rewrite-gemm.txt", ["rewrite", "src/gemm.cu", "--no-compile"], 0, "stdout"),
    ("rewrite-mixed.txt", ["rewrite", "src/mixed.cu", "--no-compile"], 1, "stdout"),
    ("rewrite-syntax.txt", ["rewrite", "src/syntax.cu", "--no-compile"], 0, "stdout"),
    ("rewrite-gemm.json", ["rewrite", "src/gemm.cu", "--no-compile", "--json"], 0, "stdout"),
    ("rewrite-mixed.json", ["rewrite", "src/mixed.cu", "--no-compile", "--json"], 1, "stdout"),
    ("rewrite-syntax.json", ["rewrite", "src/syntax.cu", "--no-compile", "--json"], 0, "stdout"),
    ("rewrite-runtime.txt", ["-v", "rewrite", "src/runtime.cu", "--no-compile"], 0, "stdout"),
    ("rewrite-runtime.json", ["rewrite", "src/runtime.cu", "--no-compile", "--json"], 0, "stdout"),
    ("analyze-runtime.txt", ["analyze", "src/runtime.cu", "--no-compile"], 0, "stdout"),
    ("analyze-runtime.json", ["analyze", "src/runtime.cu", "--no-compile", "--json"], 0, "stdout"),
    ("rewrite-broken.txt", ["rewrite", "src/broken.cu", "--no-compile"], 2, "stderr"),
    ("rewrite-broken.json", ["rewrite", "src/broken.cu", "--no-compile", "--json"], 2, "stdout"),
    ("analyze-gemm.txt", ["analyze", "src/gemm.cu", "--no-compile"], 0, "stdout"),
    ("analyze-mixed.txt", ["analyze", "src/mixed.cu", "--no-compile"], 1, "stdout"),
    ("analyze-syntax.txt", ["analyze", "src/syntax.cu", "--no-compile"], 0, "stdout"),
    ("analyze-gemm.json", ["analyze", "src/gemm.cu", "--no-compile", "--json"], 0, "stdout"),
    ("analyze-mixed.json", ["analyze", "src/mixed.cu", "--no-compile", "--json"], 1, "stdout"),
    ("analyze-syntax.json", ["analyze", "src/syntax.cu", "--no-compile", "--json"], 0, "stdout"),
    ("analyze-broken.json", ["analyze", "src/broken.cu", "--no-compile", "--json"], 2, "stdout"),
    ("suggest.txt", ["suggest", "-v", *ALL, "src/broken.cu"], 2, "stdout"),
    ("suggest.json", ["suggest", "--json", *ALL, "src/broken.cu"], 2, "stdout"),
    ("suggest-two.txt", ["suggest", "src/two.cu"], 1, "stdout"),
    ("review.patch", ["review", "--format", "patch", *ALL], 1, "stdout"),
    ("review.sarif", ["review", "--format", "sarif", *ALL], 1, "stdout"),
    ("review-no-refusals.sarif", ["review", "--format", "sarif", "--no-refusals", *ALL], 1, "stdout"),
    ("review.rdjson", ["review", "--format", "rdjson", *ALL], 1, "stdout"),
    ("review-no-refusals.rdjson", ["review", "--format", "rdjson", "--no-refusals", *ALL], 1, "stdout"),
    ("review.github.json", ["review", "--format", "github", *ALL], 1, "stdout"),
    ("review-refusals-only.sarif", ["review", "--format", "sarif", "src/mixed.cu"], 0, "stdout"),
    ("rewrite-gemm.patch", ["rewrite", "src/gemm.cu", "--no-compile", "--patch", "-"], 0, "stdout"),
    ("rewrite-gemm.cu", ["rewrite", "src/gemm.cu", "--no-compile", "-o", "-"], 0, "stdout"),
    ("probe.toml", ["probe", "--from-output", "probe.txt"], 0, "stdout"),
    ("show-gemm.txt", ["show", "src/gemm.cu", "-o", "order.png", "--html", "order.html"], 0, "stdout"),
]


@pytest.fixture
def work(tmp_path, monkeypatch):
    """The kernels in a folder of their own, as the working folder: nothing above it is read."""
    root = tmp_path / "work"
    (root / ".git").mkdir(parents=True)  # the top of a work tree: no pyproject.toml above is looked for
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(root)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-user-config"))
    return root


def normalised(name: str, text: str) -> str:
    """The output with what a release changes, not an emitter, replaced: swzc's version in SARIF."""
    if name.endswith(".sarif"):
        text = text.replace(f'"version": "{__version__}"', '"version": "<version>"')
        text = text.replace(f'"semanticVersion": "{__version__}"', '"semanticVersion": "<version>"')
    return text


def check_snapshot(name: str, actual: str, folder: Path = SNAPSHOTS, update: bool = UPDATE) -> None:
    """Compare with the snapshot, or (SWZC_UPDATE_SNAPSHOTS=1) write it; a difference fails as a unified diff."""
    path = folder / name
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(actual.encode("utf-8", "surrogateescape"))
        return
    if not path.is_file():
        pytest.fail(f"no snapshot {path}: run SWZC_UPDATE_SNAPSHOTS=1 pytest {Path(__file__).name} and review it")
    expected = path.read_bytes().decode("utf-8", "surrogateescape")
    if actual != expected:
        diff = difflib.unified_diff(expected.splitlines(keepends=True), actual.splitlines(keepends=True),
                                    f"snapshot/{name}", f"output/{name}")
        pytest.fail(f"{name} differs from its snapshot (SWZC_UPDATE_SNAPSHOTS=1 regenerates it):\n" + "".join(diff),
                    pytrace=False)


@pytest.mark.parametrize("name, args, code, stream", CASES, ids=[case[0] for case in CASES])
def test_emitter_output_matches_its_snapshot(work, name, args, code, stream):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == code, (result.output, result.exception)
    output = result.stdout_bytes if stream == "stdout" else result.stderr_bytes
    check_snapshot(name, normalised(name, output.decode("utf-8", "surrogateescape")))


def test_every_snapshot_is_checked():
    """A snapshot no case writes is a leftover: a renamed case would otherwise leave it unchecked."""
    if UPDATE:
        return
    assert sorted(p.name for p in SNAPSHOTS.iterdir()) == sorted([*(case[0] for case in CASES), *REPORTS])


def test_a_changed_output_fails_with_a_diff(tmp_path):
    """The check itself: one character changed gives a failure that shows the line, as a diff."""
    (tmp_path / "x.txt").write_text("kernel gemm (line 2): rewritten\n  proof: ok\n")
    check_snapshot("x.txt", "kernel gemm (line 2): rewritten\n  proof: ok\n", tmp_path, update=False)
    with pytest.raises(pytest.fail.Exception) as failed:
        check_snapshot("x.txt", "kernel gemm (line 2): rewritten\n  proof: OK\n", tmp_path, update=False)
    assert "-  proof: ok\n+  proof: OK" in str(failed.value)


REPORTS = ("report.json", "report.md")


@pytest.mark.parametrize("name", REPORTS)
def test_a_report_matches_its_snapshot(work, name):
    """--report's JSON and Markdown, from an LLM's recorded reply (no server, no GPU): only the date and how long
    an exchange took are the run's own."""
    result = CliRunner().invoke(main, ["rewrite", "src/gemm.cu", "--no-compile", "--proposer", "llm", "--llm-replay",
                                       "replies.json", "--max-iterations", "1", "--report", "report", "-o", "out.cu"])
    assert result.exit_code == 0, (result.output, result.exception)
    text = (work / name).read_text(encoding="utf-8")
    text = re.sub(r'"seconds": [0-9.e+-]+', '"seconds": <seconds>', re.sub(r"\d{4}-\d{2}-\d{2}", "<date>", text))
    check_snapshot(name, re.sub(r"\b\d+\.\d s\b", "<seconds> s", text))
