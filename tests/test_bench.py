"""The acceptance loop's parts that need no GPU: the launch plan, the generated harness (it must
compile), the acceptance rule on synthetic timings, and the report's schema."""

import json
from pathlib import Path

import pytest
from support import ROOT, has_gpu, needs_nvcc

from swzc.verify.accept import judge
from swzc.analysis.kernels import analyze
from swzc.verify.bench import Attempt, KernelBench, report_json, report_markdown
from swzc.core.errors import SwzcError
from swzc.verify.harness import Buffer, Scalar, Timing, build, plan_launch
from swzc.pipeline.driver import RunPlan, Options, load_hw, rewrite_source
from swzc.frontend.source import load, load_bytes
from swzc.formulas.swizzles import parse_spec
from swzc.analysis.context import FileContext


def test_launch_plan_from_the_file():
    src = load(str(ROOT / "examples" / "naive_gemm.cu"))
    (kernel,) = analyze(FileContext(src)).kernels
    plan = plan_launch(FileContext(src), kernel)
    assert (plan.kernel, plan.grid, plan.block) == ("gemm_naive", (256, 256, 1), (16, 16, 1))
    assert plan.params == (Buffer("A", "float", 4096 * 4096, "in"), Buffer("B", "float", 4096 * 4096, "in"),
                           Buffer("C", "float", 4096 * 4096, "out"), Scalar("n", "int", 4096))


def test_launch_plan_asks_for_what_the_file_leaves_open():
    src = load_bytes("t.cu", b"""
__global__ void k(float* x, const int* idx, int n) { x[idx[blockIdx.x]] += 1.0f; }
int main(int argc, char** argv) { k<<<dim3(64, 2), 32>>>(0, 0, 128); }""")
    (kernel,) = analyze(FileContext(src)).kernels
    with pytest.raises(SwzcError, match="size of buffer x"):
        plan_launch(FileContext(src), kernel)
    plan = plan_launch(FileContext(src), kernel, {"args": {"x": {"count": 128}, "idx": {"count": 64, "fill": "range:0:128"}}})
    assert plan.params[1] == Buffer("idx", "int", 64, "in", "range:0:128")


@needs_nvcc
def test_generated_harness_compiles(tmp_path):
    src = load(str(ROOT / "examples" / "decoded_gemm.cu"))
    analysis = analyze(FileContext(src), {"n": 1000})
    plan = plan_launch(FileContext(src), analysis.kernels[0], {"args": {"n": {"value": 1000}}})
    new = rewrite_source(FileContext(src), analysis, Options(hw=load_hw("h200"), compile=False), RunPlan(only={0: parse_spec("grouped:4")})).new
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
    attempt = Attempt("grouped:8", 93.4, True, True, 1.2, 1.15, 0.004, 25.0, 20.8, 87.5, 2.2e9, "1.2x", 3.1, "accepted")
    result = KernelBench("gemm", 11, (attempt,), "grouped:8", "measured 1.200x faster", 55.8, "ncu", "accepted")
    doc = json.loads(report_json([result], {"file": "g.cu", "device": "GPU"}))
    (kernel,) = doc["kernels"]
    assert {"kernel", "line", "chosen", "reason", "attempts", "baseline_l2_hit_rate", "status", "by_size"} <= kernel.keys()
    assert {"candidate", "predicted_l2_hit_rate", "correct", "accepted", "speedup", "lower_bound", "noise",
            "baseline_ms", "ms", "l2_hit_rate", "dram_read_bytes", "reason", "seconds", "status", "size",
            "upper_bound"} == kernel["attempts"][0].keys()
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

    from swzc.commands.cli import main

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
    page = (tmp_path / "report.html").read_text()
    assert page.count("<section>") == 1 and 'src="data:image/png;base64,' in page
    assert "kernel k on h200, 64 × 64 tiles" in page and "Measured: k (line" in page and "1.250x" in page


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
    """A copy has no reuse: the L2 model predicts nothing, yet the loop measures colmajor (in both division forms:
    a tie keeps `/`)."""
    (tmp_path / "k.cu").write_bytes(COPY_PROGRAM)
    (tmp_path / "run.py").write_text('import sys\nsrc = open(sys.argv[1]).read()\n'
                                     'print("ms", 9.0 if "swzc_colmajor" in src else 10.0, "checksum 7")\n')
    from click.testing import CliRunner

    from swzc.commands.cli import main

    result = CliRunner().invoke(main, ["rewrite", str(tmp_path / "k.cu"), "--no-compile", "--json",
                                       "--bench-cmd", "python3 run.py {file}", "--bench-runs", "5"])
    doc = json.loads(result.stdout)
    (bench,) = doc["bench"]
    assert [a["candidate"] for a in bench["attempts"]] == ["colmajor", "colmajor/int"] and bench["chosen"] == "colmajor"
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

    from swzc.commands.cli import main

    result = CliRunner().invoke(main, ["rewrite", str(tmp_path / "k.cu"), "--no-compile", "--json",
                                       "--bench-cmd", "python3 run.py {file}", "--bench-runs", "3"])
    (kernel,) = json.loads(result.stdout)["kernels"]
    assert result.exit_code == 1 and kernel["status"] == "declined" and kernel["reason"]
    assert kernel["reason"] != "not selected"


# ---- HIP and AMD ----------------------------------------------------------------------------------------

def test_hip_source_gets_a_hip_launcher_and_harness():
    from swzc.verify.harness import harness_source, in_dialect, launcher

    src = load(str(ROOT / "fixtures" / "hip_gemm" / "input.hip"))
    plan = plan_launch(FileContext(src), analyze(FileContext(src)).kernels[0])
    text = harness_source(plan, 60 << 20, "hip")
    assert "#include <hip/hip_runtime.h>" in text and "hipEventElapsedTime" in text and "hipMalloc" in text
    assert "hipDeviceGetAttribute(&device_l2, hipDeviceAttributeL2CacheSize, device)" in text
    assert "std::max((size_t)62914560ull, 2 * (size_t)device_l2)" in text
    assert "cuda" not in text.replace("swzc", "")
    assert "hipLaunchKernel((const void*)&gemm_naive" in launcher("gemm_naive", "hip")
    assert "&cudaStyleName, grid" in launcher("cudaStyleName", "hip")  # the user's names are not respelled
    assert in_dialect("cudaMemcpy(a, b, n, cudaMemcpyDeviceToHost);", "cuda") == "cudaMemcpy(a, b, n, cudaMemcpyDeviceToHost);"


def test_toolchain_follows_the_dialect_and_the_gpu():
    from swzc.verify.harness import toolchain_for

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
    from swzc.verify.bench import rocprof_counters

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
    from swzc.verify.harness import amd_gpu_name

    assert amd_gpu_name(ROCMINFO) == "AMD Instinct MI300X"
    assert amd_gpu_name(ROCMINFO.split("Agent 2")[0]) == ""


def test_a_missing_profiler_is_said(monkeypatch):
    from swzc.verify import bench

    monkeypatch.setattr(bench.shutil, "which", lambda name: None)
    assert "ncu is not on PATH" in bench.profiler_note("nvcc") and "timed only" in bench.profiler_note("nvcc")
    assert "rocprofv3 is not on PATH" in bench.profiler_note("hipcc")
    assert bench.profile(bench.Build(ROOT, ROOT, ROOT, ROOT, "hipcc", "k"), "b") == (None, None)


def test_text_report_says_when_there_are_no_l2_figures(tmp_path):
    (tmp_path / "k.cu").write_bytes(PROGRAM)
    (tmp_path / "fake_run.py").write_text(FAKE_RUN.replace("SWIZZLED", "8.0").replace("CHECK", "'c0ffee'"))
    from click.testing import CliRunner

    from swzc.commands.cli import main

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

    from swzc.verify import bench

    tool = tmp_path / "bin" / "rocprofv3"
    tool.parent.mkdir()
    tool.write_text(FAKE_ROCPROF)
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    built = bench.Build(tmp_path, tmp_path / "harness", tmp_path / "a.so", tmp_path / "b.so", "hipcc", "gemm_naive")
    hit, dram = bench.profile(built, "b")
    assert hit == pytest.approx(75.0) and dram == pytest.approx(2048.0)  # FETCH_SIZE absent: FetchSize, in KB


# ---- failed checks are failed checks, and nothing is left behind ----------------------------------------

def _fake_harness(folder, script):
    """A Build whose harness is a shell script standing in for the generated program."""
    from swzc.verify.harness import Build

    folder.mkdir(parents=True, exist_ok=True)
    harness = folder / "harness"
    harness.write_text("#!/bin/sh\n" + script)
    harness.chmod(0o755)
    return Build(folder, harness, folder / "a.so", folder / "b.so", "nvcc", "gemm_naive")


def test_a_crashing_harness_is_a_failed_check_with_its_status_and_output(tmp_path):
    from swzc.verify.harness import run_harness

    built = _fake_harness(tmp_path, 'echo "swzc harness: launch: too many resources requested" >&2\nkill -SEGV $$\n')
    result = run_harness(built, rounds=3)
    assert result.failed and not result.correct and result.timing is None
    assert "killed by SIGSEGV" in result.detail and "too many resources requested" in result.detail


def test_a_harness_that_prints_no_verdict_or_exits_nonzero_is_a_failed_check(tmp_path):
    from swzc.verify.harness import run_harness

    garbled = run_harness(_fake_harness(tmp_path / "a", 'echo "hello"\n'), rounds=3)
    assert garbled.failed and "printed no result" in garbled.detail and "hello" in garbled.detail
    failed = run_harness(_fake_harness(tmp_path / "b", 'echo "{\\"correct\\": true}"\nexit 3\n'), rounds=3)
    assert failed.failed and "exited with status 3" in failed.detail
    timing = run_harness(_fake_harness(tmp_path / "c", 'if [ "$3" = check ]; then echo \'{"correct": true}\'; else echo nope; fi\n'), 3)
    assert timing.failed and timing.correct and "timed run" in timing.detail


def test_differing_outputs_are_an_incorrect_result_not_a_failure(tmp_path):
    from swzc.verify.harness import run_harness

    built = _fake_harness(tmp_path, 'echo \'{"seed": 2, "match": false, "buffer": "C", "byte": 8, "element": 2}\'\n'
                                    'echo \'{"correct": false}\'\n')
    result = run_harness(built, rounds=3)
    assert not result.correct and not result.failed and "buffer C" in result.detail and "byte 8" in result.detail


def test_a_hung_harness_is_killed_with_what_it_started(tmp_path):
    import time
    from pathlib import Path

    from swzc.verify.harness import run_harness

    pid_file = tmp_path / "child.pid"
    built = _fake_harness(tmp_path / "h", f"sleep 60 &\necho $! > {pid_file}\nwait\n")
    started = time.perf_counter()
    result = run_harness(built, rounds=3, timeout=1)
    assert result.failed and "timed out after 1 s" in result.detail and time.perf_counter() - started < 20
    stat = Path(f"/proc/{pid_file.read_text().strip()}/stat")
    for _ in range(50):  # the grandchild was killed with its group: gone, or a zombie waiting to be reaped
        if not stat.exists() or stat.read_text().split(")")[-1].split()[0] in ("Z", "X"):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the harness's child outlived the timeout")


def _loop_with(monkeypatch, tmp_path, script, candidates=(("grouped:8", 90.0),), raises=None):
    """bench_kernel on the README example, with a stand-in harness; returns the result and the build folders."""
    from swzc.verify import bench

    folders = []

    class FakeBuilder:  # the compiles replaced: the harness is the script, the libraries never built
        def __init__(self, name, kernel, arch, include_dir, folder, *args, **kw):
            self.folder = Path(folder)
            folders.append(self.folder)

        def variant(self, tag, data):
            return [], self.folder / f"{tag}.so"

        def harness(self, tag, plan, flush):
            return [], _fake_harness(self.folder, script).harness

        def compile(self, jobs):
            if raises is not None:
                raise raises
            return [out for _, out in jobs]

    monkeypatch.setattr(bench, "Builder", FakeBuilder)
    src = load(str(ROOT / "examples" / "naive_gemm.cu"))
    analysis = analyze(FileContext(src))
    formulas = [(parse_spec(name), rate) for name, rate in candidates]
    result = bench.bench_kernel(FileContext(src), analysis, 0, lambda spec: src.data, formulas, load_hw("h200"), rounds=3)
    return result, folders


def _prebuilt_loop(monkeypatch, failing=()):
    """A Bencher on the README example whose compiles are recorded batch by batch (`failing`: the tags whose
    build fails); its harness is a script that passes the check and times every library alike."""
    from swzc.verify import bench

    batches = []
    timings = '{"a": [10.0, 10.0, 10.0], "b": [10.0, 10.0, 10.0], "a2": [10.0, 10.0, 10.0]}'
    script = f'if [ "$3" = check ]; then echo \'{{"correct": true}}\'; else echo \'{timings}\'; fi\n'

    class FakeBuilder:
        def __init__(self, name, kernel, arch, include_dir, folder, *args, **kw):
            self.folder = Path(folder)

        def variant(self, tag, data):
            return [tag], self.folder / f"{tag}.so"

        def harness(self, tag, plan, flush):
            return ["harness"], _fake_harness(self.folder, script).harness

        def compile_each(self, jobs):
            batches.append([command[0] for command, _ in jobs])
            return [SwzcError(f"{command[0]} did not build") if command[0] in failing else out for command, out in jobs]

        def compile(self, jobs):
            for got in self.compile_each(jobs):
                if isinstance(got, SwzcError):
                    raise got
            return [out for _, out in jobs]

    monkeypatch.setattr(bench, "Builder", FakeBuilder)
    monkeypatch.setattr(bench, "profile", lambda built, variant: (None, None))
    src = load(str(ROOT / "examples" / "naive_gemm.cu"))
    return bench.Bencher(FileContext(src), analyze(FileContext(src)), 0, lambda spec: src.data, load_hw("h200"), rounds=3), batches


def test_the_planned_candidates_are_built_in_one_batch_before_the_first_is_measured(monkeypatch):
    bencher, batches = _prebuilt_loop(monkeypatch)
    planned = [parse_spec(s) for s in ("grouped:8", "serpentine:16", "hilbert:8")]
    bencher.prebuild(planned)
    assert batches == [["b1", "b2", "b3", "a", "harness"]]  # the candidates, the original and the harness at once
    for formula in planned:
        assert bencher.measure(formula, None).correct
    bencher.measure(parse_spec("colmajor"), None)  # one that was not planned is built when it comes
    assert batches == [["b1", "b2", "b3", "a", "harness"], ["b4"]]
    bencher.close()


def test_a_prebuild_whose_original_does_not_build_fails_each_candidate_with_its_error(monkeypatch):
    bencher, batches = _prebuilt_loop(monkeypatch, failing=("harness",))
    bencher.prebuild([parse_spec("grouped:8"), parse_spec("hilbert:8")])
    attempts = [bencher.measure(parse_spec(s), None) for s in ("grouped:8", "hilbert:8")]
    assert all(a.status == "check failed" and "harness did not build" in a.reason for a in attempts)
    assert len(batches) == 1
    bencher.close()


def test_the_loop_reports_a_crashed_check_as_a_failed_check(monkeypatch, tmp_path):
    result, folders = _loop_with(monkeypatch, tmp_path, 'echo "an illegal memory access was encountered" >&2\nexit 3\n')
    (attempt,) = result.attempts
    assert attempt.status == "check failed" and not attempt.correct and "exited with status 3" in attempt.reason
    assert result.status == "check failed" and result.chosen is None
    assert result.reason.startswith("the check failed (grouped:8: the harness exited with status 3")
    assert "an illegal memory access was encountered" in result.reason and "not faster" not in result.reason
    assert folders and not any(f.exists() for f in folders)


def test_the_loop_says_measured_not_faster_when_it_measured(monkeypatch, tmp_path):
    timings = '{"a": [10.0, 10.0, 10.0], "b": [10.0, 10.1, 10.0], "a2": [10.0, 10.0, 10.0]}'
    script = f'if [ "$3" = check ]; then echo \'{{"correct": true}}\'; else echo \'{timings}\'; fi\n'
    result, folders = _loop_with(monkeypatch, tmp_path, script)
    assert result.status == "not faster" and result.reason.startswith("measured, not faster: grouped:8 1.000x")
    assert result.attempts[0].status == "not faster" and result.attempts[0].correct
    assert not any(f.exists() for f in folders)


def test_the_loop_reports_differing_outputs_as_a_failed_check(monkeypatch, tmp_path):
    script = 'echo \'{"seed": 1, "match": false, "buffer": "C", "byte": 4, "element": 1}\'\necho \'{"correct": false}\'\n'
    result, _ = _loop_with(monkeypatch, tmp_path, script)
    assert result.attempts[0].status == "outputs differ"
    assert result.reason.startswith("the check failed (grouped:8: outputs differ from the original: buffer C")


def test_a_build_failure_is_a_failed_check(monkeypatch, tmp_path):
    error = SwzcError("benchmark build failed (exited with status 1): nvcc ...\nerror: identifier \"x\" is undefined")
    result, folders = _loop_with(monkeypatch, tmp_path, "", raises=error)
    assert result.status == "check failed" and "identifier" in result.reason
    assert not any(f.exists() for f in folders)


def test_an_interrupt_leaves_no_build_folder(monkeypatch, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        _loop_with(monkeypatch, tmp_path, "", raises=KeyboardInterrupt())
    from swzc.verify import bench

    seen = []

    def terminated(built, rounds):  # SIGTERM, as the command line turns it into an exception
        seen.append(built.folder)
        raise SystemExit(143)

    monkeypatch.setattr(bench, "run_harness", terminated)
    with pytest.raises(SystemExit):
        _loop_with(monkeypatch, tmp_path, "exit 0\n")
    assert seen and not seen[0].exists()


FAILING_RUN = """import sys, time
src = open(sys.argv[1]).read()
if "swzc_block" in src:
    MODE
print("ms 10.0 checksum c0ffee")
"""


@pytest.mark.parametrize("mode,expect", [("print('cuda error: boom'); sys.exit(4)", "exited with status 4"),
                                         ("print('no numbers here'); sys.exit(0)", "printed no check value"),
                                         ("time.sleep(30)", "timed out after 1 s")])
def test_bench_cmd_failure_of_the_rewritten_program_is_a_failed_check(tmp_path, monkeypatch, mode, expect):
    import tempfile

    from click.testing import CliRunner

    from swzc.verify import program
    from swzc.commands.cli import main

    monkeypatch.setattr(program, "TIMEOUT_S", 1)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    (tmp_path / "k.cu").write_bytes(PROGRAM)
    (tmp_path / "run.py").write_text(FAILING_RUN.replace("MODE", mode))
    result = CliRunner().invoke(main, ["rewrite", str(tmp_path / "k.cu"), "--no-compile", "--json", "--swizzle", "grouped:8",
                                       "--bench-cmd", "python3 run.py {file}", "--bench-runs", "2"])
    assert result.stdout.startswith("{"), (result.output, result.exception)
    doc = json.loads(result.stdout)
    (attempt,) = doc["bench"][0]["attempts"]
    assert attempt["status"] == "check failed" and expect in attempt["reason"]
    (kernel,) = doc["kernels"]
    assert kernel["status"] == "declined" and kernel["reason"].startswith("the check failed (grouped:8: the rewritten program")
    assert expect in kernel["reason"] and list(scratch.iterdir()) == []


# A GEMM the model ranks, so that the loop has several candidates to try.
GEMM_PROGRAM = b"""#include <cstdio>
__global__ void gemm(const float* A, const float* B, float* C, int n) {
  const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}
int main() { gemm<<<dim3(256, 256), dim3(16, 16)>>>(0, 0, 0, 4096); printf("done\\n"); }
"""

SILENT_RUN = """import sys
open(sys.argv[2], "a").write("ran\\n")
print(OUTPUT)
"""


@pytest.mark.parametrize("observed", [True, False])
@pytest.mark.parametrize("output, flag, code", [("'ms 10.0'", "--check-regex", 2), ("'checksum c0ffee'", "--time-regex", 2)])
def test_an_original_program_that_prints_no_check_value_or_time_ends_the_loop_at_its_first_run(tmp_path, monkeypatch,
                                                                                             output, flag, code, observed):
    import tempfile

    from click.testing import CliRunner

    from swzc.commands.cli import main
    from swzc.pipeline import driver
    from swzc.verify.observe import ObservedRun

    if not observed:  # no launch interposer here: the loop's first run of the original is the first run
        monkeypatch.setattr(driver, "observe_launches", lambda *a, **k: ObservedRun("", {}, "no interposer"))

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    (tmp_path / "k.cu").write_bytes(GEMM_PROGRAM)
    (tmp_path / "run.py").write_text(SILENT_RUN.replace("OUTPUT", output))
    log = tmp_path / "runs.log"
    result = CliRunner().invoke(main, ["rewrite", str(tmp_path / "k.cu"), "--no-compile", "-o", str(tmp_path / "out.cu"),
                                       "--bench-cmd", f"python3 run.py {{file}} {log}", "--bench-runs", "3"])
    # the first candidate's first run is the original's: it says what is missing, names the flag, and nothing
    # else runs (no candidate is tried after it, no other kernel); nothing is written
    assert result.exit_code == code, result.output
    assert "on the original program printed no" in result.stderr and flag in result.stderr
    assert log.read_text() == "ran\n" and not (tmp_path / "out.cu").exists()


# ---- the types ML kernels are made of, templates and aliases ------------------------------------------

KERNELS = ROOT / "tests" / "harness_kernels"
KERNEL_SPEC = str(KERNELS / "launch_spec.toml")


def _plan(file: str, kernel: str):
    from swzc.verify.harness import load_spec

    src = load(str(KERNELS / file))
    found = next(k for k in analyze(FileContext(src)).kernels if k.name == kernel)
    return plan_launch(FileContext(src), found, load_spec(KERNEL_SPEC, kernel))


@pytest.mark.parametrize("file,kernel,launched,types", [
    ("gemm_bf16_wmma.cu", "gemm_bf16", "gemm_bf16", {"A": "__nv_bfloat16", "B": "__nv_bfloat16", "C": "float"}),
    ("fma_half2.cu", "fma_half2", "fma_half2", {"a": "half2", "b": "half2", "out": "half2", "c": "half2"}),
    ("requant_fp8.cu", "requant", "requant", {"in": "__nv_fp8_e4m3", "scale": "float", "out": "__nv_fp8_e5m2", "bias": "float"}),
    ("templates.cu", "transpose", "transpose<float, 32>", {"in": "float", "out": "float", "n": "int"}),
    ("templates.cu", "scaled", "scaled<double>", {"in": "double", "out": "double", "alpha": "double", "n": "int"}),
    ("blend_bf16.hip", "blend", "blend<hip_bfloat16, 16>", {"a": "hip_bfloat16", "b": "hip_bfloat16", "w": "hip_bfloat16"}),
    ("blend_bf16.hip", "widen", "widen", {"a": "__hip_bfloat16", "q": "__hip_fp8_e4m3", "out": "float"}),
])
def test_the_harness_fills_ml_types_and_instantiates_templates(file, kernel, launched, types):
    plan = _plan(file, kernel)
    assert plan.kernel == launched
    assert {p.name: p.ctype for p in plan.params if p.name in types} == types


def test_buffer_sizes_follow_the_element_type():
    gemm = _plan("gemm_bf16_wmma.cu", "gemm_bf16")
    assert [(p.name, p.count, p.role) for p in gemm.params] == [("A", 1024 * 512, "in"), ("B", 512 * 1024, "in"), ("C", 1024 * 1024, "out")]
    scaled = _plan("templates.cu", "scaled")  # T deduced as double: the footprint counts 8-byte elements
    assert scaled.params[0] == Buffer("in", "double", 4096 * 4096, "in")


def test_generated_harness_stores_each_type_by_its_kind():
    from swzc.verify.harness import harness_source

    half2 = harness_source(_plan("fma_half2.cu", "fma_half2"), 60 << 20)
    assert '{"a", swzc::F16, 8388608ull, swzc::IN, swzc::UNIFORM' in half2  # two components per half2
    assert "swzc::store(swzc::F16, 0.5, s_c + 0); swzc::store(swzc::F16, -0.25, s_c + 2);" in half2
    fp8 = harness_source(_plan("requant_fp8.cu", "requant"), 60 << 20)
    assert '{"in", swzc::E4M3, 16777216ull, swzc::IN' in fp8 and '{"out", swzc::E5M2, 16777216ull, swzc::OUT' in fp8
    assert "swzc::store(swzc::F32, 0.125, s_bias + 0);" in fp8
    assert '#include "harness_host.h"' in fp8 and "swzc::check(buffers, gpu, 0.0, stdout)" in fp8


ALIASED = b"""#include <cuda_bf16.h>
typedef __nv_bfloat16 bf16_t;
using real = float;
#define DATA_TYPE double
__global__ void k(const bf16_t* a, real* b, DATA_TYPE* c, DATA_TYPE s, int n) {
  const int i = (blockIdx.y * 16 + threadIdx.y) * n + blockIdx.x * 16 + threadIdx.x;
  c[i] = b[i] * s + (double)a[i];
}
int main() { k<<<dim3(4, 4), dim3(16, 16)>>>(0, 0, 0, 2.0, 64); }
"""


def test_parameter_types_behind_aliases_and_macros():
    src = load_bytes("aliased.cu", ALIASED)
    (kernel,) = analyze(FileContext(src)).kernels
    spec = {"args": {name: {"count": 4096} for name in ("a", "b", "c")}}
    plan = plan_launch(FileContext(src), kernel, spec)
    assert [(p.name, p.ctype) for p in plan.params] == [("a", "__nv_bfloat16"), ("b", "float"), ("c", "double"),
                                                        ("s", "double"), ("n", "int")]


TEMPLATES = b"""typedef float real;
enum class Layout { Row, Col };
enum Order { RowMajor = 0, ColMajor = 1 };
template <Order O, int W>
__global__ void ordered(float* x) { x[blockIdx.y * W + blockIdx.x] += O; }
template <typename T, int BS = 256>
__global__ void dflt(T* x, int n) { x[blockIdx.y * n + blockIdx.x] *= 2; }
template <typename T, bool FLAG, Layout L>
__global__ void flags(T* x, T alpha) { x[blockIdx.y * 64 + blockIdx.x] *= FLAG ? alpha : 1; }
template <typename T>
__global__ void deduced(const T* in, T* out, T alpha) { out[blockIdx.y * 64 + blockIdx.x] = alpha * in[blockIdx.x]; }
template <typename T>
__global__ void hidden(T* x) { x[blockIdx.y * 64 + blockIdx.x] += 1; }
int main() {
  real* p = 0;
  const float* q = p;
  dflt<float><<<dim3(64, 64), 32>>>(p, 64);
  flags<double, true, Layout::Col><<<dim3(64, 64), 32>>>((double*)p, 0.5);
  deduced<<<dim3(64, 64), 32>>>(q, p + 8, 1.5f);
  hidden<<<dim3(64, 64), 32>>>(thrust::raw_pointer_cast(v.data()));
  ordered<ColMajor, 2 * 32><<<dim3(64, 64), 32>>>(p);
}
"""


def _template_plan(kernel: str, spec: dict | None = None):
    src = load_bytes("templates.cu", TEMPLATES)
    found = next(k for k in analyze(FileContext(src)).kernels if k.name == kernel)
    sized = {"args": {"x": {"count": 4096}, "in": {"count": 4096}, "out": {"count": 4096}}, **(spec or {})}
    return plan_launch(FileContext(src), found, sized)


def test_template_arguments_from_the_launch_defaults_and_deduction():
    assert _template_plan("dflt").kernel == "dflt<float>"  # BS keeps its default
    flagged = _template_plan("flags")
    assert flagged.kernel == "flags<double, true, Layout::Col>" and flagged.params[1] == Scalar("alpha", "double", 0.5)
    deduced = _template_plan("deduced")  # from `const float* q` (through the alias `real`) and `p + 8`
    assert deduced.kernel == "deduced<float>" and [p.ctype for p in deduced.params] == ["float", "float", "float"]
    assert _template_plan("ordered").kernel == "ordered<ColMajor, 64>"  # an enumerator keeps its name, an int its value


def test_a_template_nothing_fixes_is_refused_with_the_spec_key_that_fixes_it():
    with pytest.raises(SwzcError) as refused:
        _template_plan("hidden")
    message = refused.value.message
    assert "parameter x has type 'T'" in message and "[kernel.hidden] template = \"<T>\"" in message
    assert _template_plan("hidden", {"template": "<int>"}).kernel == "hidden<int>"


@needs_nvcc
def test_hip_harness_builds_with_nvcc_through_the_compat_header(tmp_path):
    """A HIP source on an NVIDIA GPU, with hip_bfloat16 buffers and scalar and a template instantiated at the
    launch: the variants, the HIP launcher and the HIP harness all compile with nvcc."""
    src = load(str(KERNELS / "blend_bf16.hip"))
    analysis = analyze(FileContext(src))
    index = next(i for i, k in enumerate(analysis.kernels) if k.name == "blend")
    plan = _plan("blend_bf16.hip", "blend")
    new = rewrite_source(FileContext(src), analysis, Options(hw=load_hw("h200"), compile=False), RunPlan(only={index: parse_spec("grouped:4")})).new
    built = build(src.path, src.data, new, plan, "sm_90", 60 << 20, str(KERNELS), tmp_path, dialect="hip")
    assert built.harness.exists() and built.a.exists() and built.b.exists() and built.kernel == "blend"
    assert "hipLaunchKernel((const void*)&blend<hip_bfloat16, 16>" in (tmp_path / "blend_bf16.b.cu").read_text()


# ---- on a GPU: the ML kernels checked bit for bit and timed ---------------------------------------------



def _built_on_gpu(file: str, kernel: str, swizzle: str, tmp_path, damage=None):
    src = load(str(KERNELS / file))
    analysis = analyze(FileContext(src))
    index = next(i for i, k in enumerate(analysis.kernels) if k.name == kernel)
    hw = load_hw("h200")
    new = rewrite_source(FileContext(src), analysis, Options(hw=hw, compile=False), RunPlan(only={index: parse_spec(swizzle)})).new
    assert new != src.data
    if damage is not None:
        new = damage(new)
    return build(src.path, src.data, new, _plan(file, kernel), hw.nvcc_arch, hw.flush_bytes, str(KERNELS), tmp_path,
                 dialect=src.dialect)


@pytest.mark.parametrize("file,kernel,swizzle", [
    ("gemm_bf16_wmma.cu", "gemm_bf16", "grouped:4"),
    ("fma_half2.cu", "fma_half2", "grouped:8"),
    ("requant_fp8.cu", "requant", "colmajor"),
    ("templates.cu", "transpose", "grouped:8"),
    ("templates.cu", "scaled", "hilbert:8"),
    ("blend_bf16.hip", "blend", "grouped:8"),
    ("blend_bf16.hip", "widen", "colmajor"),
])
@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="no CUDA GPU here")
def test_ml_kernels_match_bit_for_bit_and_are_timed_on_the_gpu(file, kernel, swizzle, tmp_path):
    from swzc.verify.harness import run_harness

    result = run_harness(_built_on_gpu(file, kernel, swizzle, tmp_path), rounds=5)
    assert result.correct and not result.failed and result.timing is not None, result.detail
    assert len(result.timing.b) == 5 and min(result.timing.a + result.timing.b) > 0


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="no CUDA GPU here")
def test_planted_wrong_bf16_swizzle_is_caught_on_the_gpu(tmp_path):
    """Rows and columns of the tensor-core tiles swapped: the bf16 GEMM writes the wrong tiles."""
    from swzc.verify.harness import run_harness

    def swap(new: bytes) -> bytes:
        wrong = new.replace(b"tile_row = swzc_block.y", b"tile_row = swzc_block.x", 1)
        assert wrong != new
        return wrong

    result = run_harness(_built_on_gpu("gemm_bf16_wmma.cu", "gemm_bf16", "grouped:4", tmp_path, swap), rounds=3)
    assert not result.correct and not result.failed and "buffer C" in result.detail


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="no CUDA GPU here")
def test_the_loop_runs_a_bf16_tensor_core_kernel():
    from swzc.pipeline.driver import rewrite_file

    options = Options(hw=load_hw("h200"), swizzle=parse_spec("grouped:4"), compile=False, bench=True, rounds=10,
                      launch_spec=KERNEL_SPEC)
    result = rewrite_file(str(KERNELS / "gemm_bf16_wmma.cu"), options)
    (bench,) = result.bench
    (attempt,) = bench.attempts
    assert attempt.correct and attempt.status in ("accepted", "not faster") and attempt.speedup is not None
    assert bench.status in ("accepted", "not faster")


def test_an_interrupt_kills_the_child_and_what_it_started(tmp_path):
    """SIGINT arrives as KeyboardInterrupt while swzc waits for a command: the whole group goes with it."""
    import signal
    import time
    from pathlib import Path

    from swzc.core import processes

    pid_file = tmp_path / "child.pid"

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(KeyboardInterrupt):
            processes.run(f"sleep 60 & echo $! > {pid_file}; wait", 120, shell=True)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    stat = Path(f"/proc/{pid_file.read_text().strip()}/stat")
    for _ in range(50):
        if not stat.exists() or stat.read_text().split(")")[-1].split()[0] in ("Z", "X"):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the command's child outlived the interrupt")


# A stand-in for a program run at a size: the rewritten program loses at the small size and wins at the large.
SIZED_RUN = """import sys
src, size = open(sys.argv[1]).read(), int(sys.argv[2])
swizzled = "swzc_block" in src
ms = (SMALL if size < 4096 else 8.0) if swizzled else 10.0
print(f"kernel k ms {ms:.3f} checksum c0ffee{size}")
"""


@pytest.mark.parametrize("small_ms, accepted", [(10.0, True), (12.0, False)])
def test_bench_cmd_runs_at_each_size_and_refuses_a_loss_at_any(tmp_path, small_ms, accepted):
    from click.testing import CliRunner

    from swzc.commands.cli import main

    (tmp_path / "k.cu").write_bytes(PROGRAM)
    (tmp_path / "fake_run.py").write_text(SIZED_RUN.replace("SMALL", repr(small_ms)))
    result = CliRunner().invoke(main, ["rewrite", str(tmp_path / "k.cu"), "-o", str(tmp_path / "out.cu"), "--no-compile",
                                       "--json", "--swizzle", "grouped:8", "--bench-cmd", "python3 fake_run.py {file} {size}",
                                       "--bench-sizes", "4096,1024,8192", "--bench-runs", "4"])
    doc = json.loads(result.stdout)
    (bench,) = doc["bench"]
    assert [(a["size"], a["status"]) for a in bench["by_size"]] == [
        (1024, "not faster" if accepted else "slower"), (4096, "accepted"), (8192, "accepted")]
    assert (bench["chosen"] == "grouped:8") == accepted and result.exit_code == (0 if accepted else 1)
    if not accepted:
        assert "slower than the original beyond the noise at 1024" in bench["attempts"][0]["reason"]


@pytest.mark.parametrize("args, said", [
    (["--bench-cmd", "./prog {size}"], "give the sizes to run it at with --bench-sizes"),
    (["--bench-cmd", "./prog", "--bench-sizes", "1024"], "--bench-sizes needs {size} in --bench-cmd"),
    (["--bench-cmd", "./prog {size}", "--bench-sizes", "1024,x"], "expected up to 16 positive integers"),
    (["--bench-cmd", "./prog {size}", "--bench-sizes", "0,8"], "expected up to 16 positive integers"),
    (["--bench-sizes", "1024"], "--bench-sizes goes with --bench-cmd"),
])
def test_bench_sizes_are_checked_before_anything_runs(tmp_path, args, said):
    from click.testing import CliRunner

    from swzc.commands.cli import main

    (tmp_path / "k.cu").write_bytes(PROGRAM)
    result = CliRunner().invoke(main, ["rewrite", str(tmp_path / "k.cu"), "--no-compile", *args])
    assert result.exit_code == 2 and said in result.stderr


def test_bench_cmd_stops_at_the_first_size_whose_check_fails(tmp_path):
    from click.testing import CliRunner

    from swzc.commands.cli import main

    (tmp_path / "k.cu").write_bytes(PROGRAM)
    (tmp_path / "fake_run.py").write_text(SIZED_RUN.replace("SMALL", "8.0").replace(
        'checksum c0ffee{size}', "checksum {'bad' if swizzled and size == 1024 else 'c0ffee'}{size}"))
    result = CliRunner().invoke(main, ["rewrite", str(tmp_path / "k.cu"), "--no-compile", "--json", "--swizzle", "grouped:8",
                                       "--bench-cmd", "python3 fake_run.py {file} {size}", "--bench-sizes", "1024,4096,8192",
                                       "--bench-runs", "3"])
    (bench,) = json.loads(result.stdout)["bench"]
    assert [(a["size"], a["status"]) for a in bench["by_size"]] == [(1024, "outputs differ")]  # 4096 and 8192 never ran
    assert result.exit_code == 1 and "at 1024" in bench["attempts"][0]["reason"]


def test_the_loop_builds_the_original_and_the_harness_once_for_every_candidate(monkeypatch, tmp_path):
    from swzc.verify import bench

    built = []

    class CountingBuilder:
        def __init__(self, name, kernel, arch, include_dir, folder, *args, **kw):
            self.folder = Path(folder)

        def variant(self, tag, data):
            return [f"variant {tag}"], self.folder / f"{tag}.so"

        def harness(self, tag, plan, flush):
            timings = '{"a": [10.0, 10.0, 10.0], "b": [9.0, 9.0, 9.0], "a2": [10.0, 10.0, 10.0]}'
            script = f'if [ "$3" = check ]; then echo \'{{"correct": true}}\'; else echo \'{timings}\'; fi\n'
            return ["harness"], _fake_harness(self.folder, script).harness

        def compile(self, jobs):
            built.append([command[0] for command, _ in jobs])
            return [out for _, out in jobs]

    monkeypatch.setattr(bench, "Builder", CountingBuilder)
    src = load(str(ROOT / "examples" / "naive_gemm.cu"))
    formulas = [(parse_spec(name), None) for name in ("grouped:8", "grouped:16", "colmajor")]
    result = bench.bench_kernel(FileContext(src), analyze(FileContext(src)), 0, lambda spec: src.data, formulas,
                                load_hw("h200"), rounds=3)
    assert built == [["variant b1", "variant a", "harness"], ["variant b2"], ["variant b3"]]
    assert [a.status for a in result.attempts] == ["accepted"] * 3
