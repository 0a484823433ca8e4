"""On a GPU: the rewritten examples give bit-identical outputs (a swizzle only permutes blocks).

Skipped where there is no CUDA GPU (CI); run on the H200 through the device tool.
"""

import re
import shutil
import subprocess

import pytest
from click.testing import CliRunner
from support import ROOT, has_gpu

from swzc.commands.cli import main
from swzc.analysis.context import FileContext




pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="no CUDA GPU here")]

CASES = [
    ("naive_gemm.cu", "grouped:8", []),
    ("naive_gemm.cu", "colmajor", []),
    ("decoded_gemm.cu", "grouped:8", []),
    ("decoded_gemm.cu", "xcd:8+grouped:4", ["1000"]),
]


def _build_and_run(source, tmp_path, name, args):
    binary = tmp_path / name
    subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-o", str(binary), str(source)], check=True)
    run = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return re.search(r"output hash ([0-9a-f]+)", run.stdout).group(1)


@pytest.mark.parametrize("example,swizzle,args", CASES)
def test_rewritten_example_matches_bit_for_bit(example, swizzle, args, tmp_path):
    source = ROOT / "examples" / example
    patched = tmp_path / f"patched_{example}"
    result = CliRunner().invoke(main, ["rewrite", str(source), "-o", str(patched), "--swizzle", swizzle, "--no-compile",
                                       "--no-bench"])
    assert result.exit_code == 0, result.output
    assert patched.read_bytes() != source.read_bytes()
    original = _build_and_run(source, tmp_path, "original", args)
    rewritten = _build_and_run(patched, tmp_path, "rewritten", args)
    assert original == rewritten


def test_planted_wrong_swizzle_is_caught(tmp_path):
    """A rewrite that maps blocks to the wrong tiles (rows and columns swapped) must fail the output check."""
    from swzc.analysis.kernels import analyze
    from swzc.verify.harness import build, plan_launch, run_harness
    from swzc.pipeline.driver import RunPlan, Options, load_hw, rewrite_source
    from swzc.frontend.source import load
    from swzc.formulas.swizzles import parse_spec

    src = load(str(ROOT / "examples" / "naive_gemm.cu"))
    analysis = analyze(FileContext(src))
    good = rewrite_source(FileContext(src), analysis, Options(hw=load_hw("h200"), compile=False), RunPlan(only={0: parse_spec("grouped:8")})).new
    wrong = good.replace(b"swzc_block.y * TILE + threadIdx.y", b"swzc_block.x * TILE + threadIdx.y", 1)
    assert wrong != good
    plan = plan_launch(FileContext(src), analysis.kernels[0])
    built = build(src.path, src.data, wrong, plan, "sm_90", 60 << 20, str(ROOT / "examples"), tmp_path)
    result = run_harness(built, rounds=5)
    assert not result.correct and "buffer" in result.detail


def test_planted_slower_swizzle_is_declined():
    """Every reorder of the 2D stencil measured slower on the H200: the loop must keep identity."""
    from swzc.pipeline.driver import Options, load_hw, rewrite_file
    from swzc.formulas.swizzles import parse_spec

    options = Options(hw=load_hw("h200"), swizzle=parse_spec("hilbert:8"), compile=False, bench=True, rounds=15)
    result = rewrite_file(str(ROOT / "bench" / "l2" / "kernels" / "stencil2d.cu"), options)
    (bench,) = result.bench
    (attempt,) = bench.attempts
    assert attempt.correct and not attempt.accepted and bench.chosen is None
    assert not result.changed and result.outcomes[0].status == "declined"


def test_hip_source_runs_through_the_loop():
    """A HIP source on the NVIDIA GPU: HIP launcher and harness through the compatibility header, checked,
    timed and profiled like a CUDA one."""
    from swzc.pipeline.driver import Options, load_hw, rewrite_file
    from swzc.formulas.swizzles import parse_spec

    options = Options(hw=load_hw("h200"), swizzle=parse_spec("grouped:8"), compile=False, bench=True, rounds=10)
    result = rewrite_file(str(ROOT / "fixtures" / "hip_gemm" / "input.hip"), options)
    (bench,) = result.bench
    (attempt,) = bench.attempts
    assert attempt.correct and attempt.speedup is not None and attempt.noise is not None
    assert result.changed == attempt.accepted
    if shutil.which("ncu"):
        assert bench.profiler == "ncu" and attempt.l2_hit_rate is not None and bench.baseline_l2_hit_rate is not None
