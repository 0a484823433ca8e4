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


def test_declines_a_speedup_too_good_to_be_true():
    v = judge(timing([10.0] * 30, [0.5] * 30), True)
    assert not v.accepted and "suspect" in v.reason


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


# ---- HIP and AMD ----------------------------------------------------------------------------------------

def test_hip_source_gets_a_hip_launcher_and_harness():
    from swzc.harness import harness_source, in_dialect, launcher

    src = load(str(ROOT / "fixtures" / "hip_gemm" / "input.hip"))
    plan = plan_launch(src, analyze(src).kernels[0])
    text = harness_source(plan, 60 << 20, "hip")
    assert "#include <hip/hip_runtime.h>" in text and "hipEventElapsedTime" in text and "hipMalloc" in text
    assert "hipDeviceGetAttribute(&device_l2, hipDeviceAttributeL2CacheSize, device)" in text
    assert "std::max((size_t)62914560ull, 2 * (size_t)device_l2)" in text
    assert "cuda" not in text.replace("swzc", "")
    assert "hipLaunchKernel((const void*)&gemm_naive" in launcher("gemm_naive", "hip")
    assert "&cudaStyleName, grid" in launcher("cudaStyleName", "hip")  # the user's names are not respelled
    assert in_dialect("cudaMemcpy(a, b, n, cudaMemcpyDeviceToHost);", "cuda") == "cudaMemcpy(a, b, n, cudaMemcpyDeviceToHost);"


@needs_nvcc
def test_hip_harness_builds_with_nvcc_through_the_compat_header(tmp_path):
    """A HIP source on an NVIDIA GPU: the variants, the HIP launcher and the HIP harness all compile."""
    src = load(str(ROOT / "fixtures" / "hip_gemm" / "input.hip"))
    analysis = analyze(src)
    plan = plan_launch(src, analysis.kernels[0])
    new = rewrite_source(src, analysis, Options(hw=load_hw("h200"), only={0: parse_spec("grouped:8")}, compile=False)).new
    built = build(src.path, src.data, new, plan, "sm_90", 60 << 20, str(ROOT / "fixtures" / "hip_gemm"), tmp_path,
                  dialect="hip", toolchain="nvcc")
    assert built.harness.exists() and built.a.exists() and built.b.exists() and built.kernel == "gemm_naive"
    assert "hipLaunchKernel" in (tmp_path / "input.b.cu").read_text()


def test_toolchain_follows_the_dialect_and_the_gpu():
    from swzc.harness import toolchain_for

    assert toolchain_for("hip", "amd") == "hipcc"
    assert toolchain_for("hip", "nvidia") == toolchain_for("cuda", "nvidia") == toolchain_for("cuda", None) == "nvcc"
    with pytest.raises(SwzcError, match="NVIDIA GPU only"):
        toolchain_for("cuda", "amd")


ROCPROF_CSV = (
    '"Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id","Thread_Id","Grid_Size","Kernel_Id",'
    '"Kernel_Name","Workgroup_Size","LDS_Block_Size","Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count",'
    '"Counter_Name","Counter_Value","Start_Timestamp","End_Timestamp"\n'
    '1,1,"Agent 2",1,77,77,65536,3,"__amd_rocclr_copyBuffer",256,0,0,8,0,16,"TCC_HIT_sum",999.0,100,200\n'
    '2,2,"Agent 2",1,77,77,1048576,9,"void gemm_naive<float>(float const*, float*, int)",256,0,0,32,0,24,"TCC_HIT_sum",10.0,300,400\n'
    '2,2,"Agent 2",1,77,77,1048576,9,"void gemm_naive<float>(float const*, float*, int)",256,0,0,32,0,24,"TCC_MISS_sum",90.0,300,400\n'
    '3,3,"Agent 2",1,77,77,1048576,9,"void gemm_naive<float>(float const*, float*, int)",256,0,0,32,0,24,"TCC_HIT_sum",750.0,500,600\n'
    '3,3,"Agent 2",1,77,77,1048576,9,"void gemm_naive<float>(float const*, float*, int)",256,0,0,32,0,24,"TCC_MISS_sum",250.0,500,600\n'
    '4,4,"Agent 2",1,77,77,65536,4,"gemm_naive_helper(float*)",256,0,0,8,0,16,"TCC_HIT_sum",5.0,700,800\n'
)


def test_rocprof_counters_of_the_kernel_s_last_dispatch():
    from swzc.bench import rocprof_counters

    assert rocprof_counters(ROCPROF_CSV, "gemm_naive") == {"TCC_HIT_sum": 750.0, "TCC_MISS_sum": 250.0}
    assert rocprof_counters(ROCPROF_CSV, "other") == {}
    assert rocprof_counters("", "gemm_naive") == {}


ROCMINFO = """ROCk module is loaded
=====================
HSA Agents
==========
*******
Agent 1
*******
  Name:                    AMD EPYC 9654 96-Core Processor
  Marketing Name:          AMD EPYC 9654 96-Core Processor
  Device Type:             CPU
*******
Agent 2
*******
  Name:                    gfx942
  Marketing Name:          AMD Instinct MI300X
  Device Type:             GPU
  ISA Info:
    ISA 1
      Name:                    amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-
"""


def test_amd_gpu_name_from_rocminfo():
    from swzc.harness import amd_gpu_name

    assert amd_gpu_name(ROCMINFO) == "AMD Instinct MI300X"
    assert amd_gpu_name(ROCMINFO.split("Agent 2")[0]) == ""


def test_a_missing_profiler_is_said(monkeypatch):
    from swzc import bench

    monkeypatch.setattr(bench.shutil, "which", lambda name: None)
    assert "ncu is not on PATH" in bench.profiler_note("nvcc") and "timed only" in bench.profiler_note("nvcc")
    assert "rocprofv3 is not on PATH" in bench.profiler_note("hipcc")
    assert bench.profile(bench.Build(ROOT, ROOT, ROOT, ROOT, "hipcc", "k"), "b") == (None, None)


def test_text_report_says_when_there_are_no_l2_figures(tmp_path):
    (tmp_path / "k.cu").write_bytes(PROGRAM)
    (tmp_path / "fake_run.py").write_text(FAKE_RUN.replace("SWIZZLED", "8.0").replace("CHECK", "'c0ffee'"))
    from click.testing import CliRunner

    from swzc.cli import main

    result = CliRunner().invoke(main, ["rewrite", str(tmp_path / "k.cu"), "--no-compile", "--swizzle", "grouped:8",
                                       "--bench-cmd", "python3 fake_run.py {file}", "--bench-runs", "4"])
    assert "grouped:8 accepted" in result.output
    assert "profiler: none (the user's own program is timed)" in result.output


FAKE_ROCPROF = r"""#!/usr/bin/env python3
# Stands in for rocprofv3 where there is no AMD GPU: writes a counter_collection.csv where rocprofv3 would,
# for the counters asked, with a runtime copy kernel before the profiled kernel.
import sys, pathlib
args = sys.argv[1:]
names = args[args.index("--pmc") + 1:args.index("-d")]
out = pathlib.Path(args[args.index("-d") + 1]) / "host" / "4242"
out.mkdir(parents=True)
values = {"TCC_HIT_sum": 300.0, "TCC_MISS_sum": 100.0, "FetchSize": 2.0}
head = '"Dispatch_Id","Kernel_Name","Counter_Name","Counter_Value"\n'
rows = [f'1,"__amd_rocclr_copyBuffer","{n}",1.0\n' for n in names]
rows += [f'2,"gemm_naive(float const*, float*, int)","{n}",{values[n]}\n' for n in names if n in values]
(out / "swzc_counter_collection.csv").write_text(head + "".join(rows))
"""


def test_rocprof_profile_reads_what_rocprofv3_writes(tmp_path, monkeypatch):
    import os

    from swzc import bench

    tool = tmp_path / "bin" / "rocprofv3"
    tool.parent.mkdir()
    tool.write_text(FAKE_ROCPROF)
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    built = bench.Build(tmp_path, tmp_path / "harness", tmp_path / "a.so", tmp_path / "b.so", "hipcc", "gemm_naive")
    hit, dram = bench.profile(built, "b")
    assert hit == pytest.approx(75.0) and dram == pytest.approx(2048.0)  # FETCH_SIZE absent: FetchSize, in KB
