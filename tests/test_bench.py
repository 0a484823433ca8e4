"""The acceptance loop's parts that need no GPU: the launch plan, the generated harness (it must
compile), the acceptance rule on synthetic timings, and the report's schema."""

import json

import pytest
from support import ROOT, needs_nvcc

from swzc.accept import judge
from swzc.analysis import analyze
from swzc.bench import Attempt, KernelBench, report_json, report_markdown
from swzc.errors import SwzcError
from swzc.harness import Buffer, Scalar, Timing, build, plan_launch
from swzc.pipeline import Options, load_hw, rewrite_source
from swzc.source import load, load_bytes
from swzc.swizzles import parse_spec


def test_launch_plan_from_the_file():
    src = load(str(ROOT / "examples" / "naive_gemm.cu"))
    (kernel,) = analyze(src).kernels
    plan = plan_launch(src, kernel)
    assert (plan.kernel, plan.grid, plan.block) == ("gemm_naive", (256, 256, 1), (16, 16, 1))
    assert plan.params == (Buffer("A", "float", 4096 * 4096, "in"), Buffer("B", "float", 4096 * 4096, "in"),
                           Buffer("C", "float", 4096 * 4096, "out"), Scalar("n", "int", 4096))


def test_launch_plan_asks_for_what_the_file_leaves_open():
    src = load_bytes("t.cu", b"""
__global__ void k(float* x, const int* idx, int n) { x[idx[blockIdx.x]] += 1.0f; }
int main(int argc, char** argv) { k<<<dim3(64, 2), 32>>>(0, 0, 128); }""")
    (kernel,) = analyze(src).kernels
    with pytest.raises(SwzcError, match="size of buffer x"):
        plan_launch(src, kernel)
    plan = plan_launch(src, kernel, {"args": {"x": {"count": 128}, "idx": {"count": 64, "fill": "range:0:128"}}})
    assert plan.params[1] == Buffer("idx", "int", 64, "in", "range:0:128")


@needs_nvcc
def test_generated_harness_compiles(tmp_path):
    src = load(str(ROOT / "examples" / "decoded_gemm.cu"))
    analysis = analyze(src, {"n": 1000})
    plan = plan_launch(src, analysis.kernels[0], {"args": {"n": {"value": 1000}}})
    new = rewrite_source(src, analysis, Options(hw=load_hw("h200"), only={0: parse_spec("grouped:4")}, compile=False)).new
    built = build(src.path, src.data, new, plan, "sm_90", 60 << 20, str(ROOT / "examples"), tmp_path)
    assert built.harness.exists() and built.a.exists() and built.b.exists()


def timing(a, b, a2=None):
    return Timing(tuple(a), tuple(b), tuple(a2 if a2 is not None else a))


def test_accepts_a_clear_win():
    v = judge(timing([10.0, 10.1, 9.9] * 10, [8.0, 8.1, 7.9] * 10, [10.05, 10.0, 9.95] * 10), True)
    assert v.accepted and v.speedup == pytest.approx(1.25, rel=0.02) and v.lower > v.threshold


def test_declines_a_gain_inside_the_noise():
    """3 % faster, but A/A varies by 2 %: the bar is 1 + 3 x 2 % = 1.06."""
    a = [10.0, 10.4, 9.8, 10.2] * 8
    a2 = [10.2, 10.0, 10.0, 10.0] * 8
    v = judge(timing(a, [x / 1.03 for x in a], a2), True)
    assert not v.accepted and v.threshold > 1.05 and "noise" in v.reason


def test_declines_a_gain_below_one_percent():
    a = [10.0] * 30
    v = judge(timing(a, [x / 1.005 for x in a]), True)
    assert not v.accepted and v.threshold == pytest.approx(1.01)


def test_declines_wrong_outputs_however_fast():
    v = judge(timing([10.0] * 30, [5.0] * 30), False)
    assert not v.accepted and "differ" in v.reason


def test_declines_a_slowdown():
    v = judge(timing([10.0] * 30, [12.0] * 30), True)
    assert not v.accepted and v.speedup < 1


def test_report_schema():
    attempt = Attempt("grouped:8", 93.4, True, True, 1.2, 1.15, 0.004, 25.0, 20.8, 87.5, 2.2e9, "1.2x", 3.1)
    result = KernelBench("gemm", 11, (attempt,), "grouped:8", "measured 1.200x faster", 55.8)
    doc = json.loads(report_json([result], {"file": "g.cu", "device": "GPU"}))
    (kernel,) = doc["kernels"]
    assert {"kernel", "line", "chosen", "reason", "attempts", "baseline_l2_hit_rate"} <= kernel.keys()
    assert {"candidate", "predicted_l2_hit_rate", "correct", "accepted", "speedup", "lower_bound", "noise",
            "baseline_ms", "ms", "l2_hit_rate", "dram_read_bytes", "reason", "seconds"} == kernel["attempts"][0].keys()
    assert "| grouped:8 | 93.4 | yes | 1.200 |" in report_markdown([result], {"file": "g.cu", "device": "GPU"})


PROGRAM = b"""#include <cstdio>
__global__ void k(float* c, int n) { c[(blockIdx.y * 16 + threadIdx.y) * n + blockIdx.x * 16 + threadIdx.x] = 1.0f; }
int main() { k<<<dim3(64, 64), dim3(16, 16)>>>(0, 1024); printf("done\\n"); }
"""

# A stand-in for the user's program: "runs" the source next to it and reports a time and a checksum
# that depend on whether the source was rewritten.
FAKE_RUN = """import sys
src = open(sys.argv[1]).read()
swizzled = "swzc_block" in src
print(f"kernel k ms {SWIZZLED if swizzled else 10.0:.3f} checksum {CHECK if swizzled else 'c0ffee'}")
"""


def _program_case(tmp_path, swizzled_ms, check):
    (tmp_path / "k.cu").write_bytes(PROGRAM)
    (tmp_path / "fake_run.py").write_text(FAKE_RUN.replace("SWIZZLED", repr(swizzled_ms)).replace("CHECK", repr(check)))
    from click.testing import CliRunner

    from swzc.cli import main

    out = tmp_path / "out.cu"
    result = CliRunner().invoke(main, ["rewrite", str(tmp_path / "k.cu"), "-o", str(out), "--no-compile", "--json",
                                       "--swizzle", "grouped:8", "--bench-cmd", "python3 fake_run.py {file}",
                                       "--bench-runs", "6", "--report", str(tmp_path / "report")])
    return result, json.loads(result.stdout)


def test_bench_cmd_accepts_a_measured_win(tmp_path):
    result, doc = _program_case(tmp_path, 8.0, "c0ffee")
    assert result.exit_code == 0 and doc["benchmarked"] and doc["changed"]
    (bench,) = doc["bench"]
    assert bench["chosen"] == "grouped:8" and bench["attempts"][0]["speedup"] == pytest.approx(1.25)
    assert (tmp_path / "report.json").exists() and "grouped:8" in (tmp_path / "report.md").read_text()


def test_bench_cmd_declines_a_wrong_check_value(tmp_path):
    result, doc = _program_case(tmp_path, 5.0, "bad")
    assert result.exit_code == 1 and not doc["changed"]
    (attempt,) = doc["bench"][0]["attempts"]
    assert not attempt["correct"] and "differs" in attempt["reason"]


def test_bench_cmd_declines_a_slowdown(tmp_path):
    result, doc = _program_case(tmp_path, 12.0, "c0ffee")
    assert result.exit_code == 1 and doc["kernels"][0]["status"] == "declined"
    assert doc["bench"][0]["attempts"][0]["speedup"] < 1


COPY_PROGRAM = b"""#include <cstdio>
#define N 4096
__global__ void copy2d(const float* a, float* c) {
  const int i = (blockIdx.y * 16 + threadIdx.y) * N + blockIdx.x * 16 + threadIdx.x;
  c[i] = a[i];
}
int main() { copy2d<<<dim3(N / 16, N / 16), dim3(16, 16)>>>(0, 0); printf("done\\n"); }
"""


def test_loop_measures_the_transposed_raster_when_the_model_sees_no_gain(tmp_path):
    """A copy has no reuse: the L2 model predicts nothing, yet the loop measures colmajor once."""
    (tmp_path / "k.cu").write_bytes(COPY_PROGRAM)
    (tmp_path / "run.py").write_text('import sys\nsrc = open(sys.argv[1]).read()\n'
                                     'print("ms", 9.0 if "swzc_colmajor" in src else 10.0, "checksum 7")\n')
    from click.testing import CliRunner

    from swzc.cli import main

    result = CliRunner().invoke(main, ["rewrite", str(tmp_path / "k.cu"), "--no-compile", "--json",
                                       "--bench-cmd", "python3 run.py {file}", "--bench-runs", "5"])
    doc = json.loads(result.stdout)
    (bench,) = doc["bench"]
    assert [a["candidate"] for a in bench["attempts"]] == ["colmajor"] and bench["chosen"] == "colmajor"
    (kernel,) = doc["kernels"]
    assert kernel["status"] == "rewritten" and "measured anyway" in kernel["chosen_by"]
    assert "colmajor" in [c["name"] for c in kernel["candidates"]]  # the model's table survives the benchmarked rewrite


LINEAR_PROGRAM = b"""__global__ void scale(float* x) { x[blockIdx.x * 256 + threadIdx.x] *= 2.0f; }
int main() { scale<<<4096, 256>>>(0); }
"""


def test_loop_declines_a_1d_grid_with_the_pass_s_reason(tmp_path):
    (tmp_path / "k.cu").write_bytes(LINEAR_PROGRAM)
    (tmp_path / "run.py").write_text('print("ms 1.0 checksum 7")\n')
    from click.testing import CliRunner

    from swzc.cli import main

    result = CliRunner().invoke(main, ["rewrite", str(tmp_path / "k.cu"), "--no-compile", "--json",
                                       "--bench-cmd", "python3 run.py {file}", "--bench-runs", "3"])
    (kernel,) = json.loads(result.stdout)["kernels"]
    assert result.exit_code == 1 and kernel["status"] == "declined" and kernel["reason"]
    assert kernel["reason"] != "not selected"
