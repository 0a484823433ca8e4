"""--bench-cmd: the launches one run of the program made replace what the file leaves open, so the model
ranks each kernel with its real grid and arguments (the run itself is faked here; tests/test_observe.py
covers the interposer)."""

from swzc.pipeline import driver as pipeline
from swzc.analysis.kernels import analyze
from swzc.verify.observe import ObservedLaunch, ObservedRun
from swzc.verify.program import ProgramBench
from swzc.model.rank import Ranking
from swzc.frontend.source import load_bytes
from swzc.analysis.context import FileContext

RUNTIME = b"""\
#include <cstdlib>
__global__ void gemm(const float* A, const float* B, float* C, int n) {
  const int row = blockIdx.y * 16 + threadIdx.y;
  const int col = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}
int main(int argc, char** argv) {
  const int n = atoi(argv[1]);
  float *A = 0, *B = 0, *C = 0;
  gemm<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(A, B, C, n);
  return 0;
}
"""


def test_observed_launches_make_a_runtime_kernel_rankable(monkeypatch):
    src = load_bytes("prog.cu", RUNTIME)
    analysis = analyze(FileContext(src))
    swept = pipeline.rank_kernels(FileContext(src), analysis, pipeline.load_hw("h200"), {})[0]
    assert isinstance(swept, Ranking) and swept.sweep is not None  # from the file: predicted over a sweep of n
    seen = ObservedRun("cupti", {"gemm": (ObservedLaunch((256, 256, 1), (16, 16, 1), 0, 3, (), (("n", 4096),)),)})
    monkeypatch.setattr(pipeline, "observe_launches", lambda *args, **kw: seen)
    observed, notes = pipeline.with_observed_launches(FileContext(src), analysis, ProgramBench("./prog 4096"))
    (launch,) = observed.kernels[0].launches
    assert launch.grid == (256, 256, 1) and dict(launch.bindings)["n"] == 4096
    assert "grid 256x256x1" in notes[0]
    ranking = pipeline.rank_kernels(FileContext(src), observed, pipeline.load_hw("h200"), {})[0]
    assert isinstance(ranking, Ranking) and ranking.chosen is not None and ranking.sweep is None


def test_nothing_observed_keeps_the_file_and_says_why(monkeypatch):
    src = load_bytes("prog.cu", RUNTIME)
    analysis = analyze(FileContext(src))
    monkeypatch.setattr(pipeline, "observe_launches", lambda *args, **kw: ObservedRun("", {}, "no ncu or CUPTI here"))
    same, notes = pipeline.with_observed_launches(FileContext(src), analysis, ProgramBench("./prog 4096"))
    assert same is analysis and "no ncu or CUPTI here" in notes[0]
