"""Calibration in --bench: the instrumented copy of the original, the timeline read back, what the model takes from
the measurements, and the loop ranking with them."""

import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from support import ROOT, STAGED_TILES, has_gpu, needs_nvcc

from swzc.analysis.context import FileContext
from swzc.analysis.kernels import analyze
from swzc.frontend.source import load_bytes
from swzc.model.calibration import CRISP_SPREAD, calibrate, later_wave_spread, most_at_once
from swzc.model.l2model import L2Model
from swzc.model.rank import Ranking, identity_order, rank, survey
from swzc.pipeline.driver import Options, load_hw
from swzc.verify.calibrate import LRC_DELIVERED, LRC_MERGED, Observed, instrumented

STAGED = STAGED_TILES

# not staged, and leaves early: every block's threads past n return before the end of the body
NAIVE = b"""\
__global__ void naive(const float* A, const float* B, float* C, int n) {
  const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  if (row >= n || col >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}
void run(const float* A, const float* B, float* C) { naive<<<dim3(256, 256), dim3(16, 16)>>>(A, B, C, 4096); }
"""


def surveyed(data, hw="h200"):
    ctx = FileContext(load_bytes("k.cu", data))
    kernel = analyze(ctx).kernels[0]
    fp, _, resident = survey(ctx, kernel, load_hw(hw), compiler=False)
    return ctx, kernel, fp, resident


# ---- what the model takes from the measurements ---------------------------------------------------------

def test_the_later_waves_spread_is_zero_when_each_wave_starts_at_once_and_near_one_when_starts_follow_ends():
    resident, waves, life = 8, 5, 100
    crisp = np.repeat(np.arange(waves) * life, resident)  # each wave starts when the last one ends
    assert later_wave_spread(crisp, crisp + life, resident) == 0.0
    staggered = np.arange(resident * waves) * life // resident  # a block starts each eighth of a lifetime
    assert later_wave_spread(staggered, staggered + life, resident) == pytest.approx(0.7, abs=0.01)
    assert later_wave_spread(crisp[:resident], crisp[:resident] + life, resident) is None  # one wave: nothing later
    # the first wave starts at once on every kernel measured: it is not counted
    first_then_staggered = np.concatenate([np.zeros(resident, np.int64), life + np.arange(resident) * life // resident])
    assert later_wave_spread(first_then_staggered, first_then_staggered + life, resident) == pytest.approx(0.7, abs=0.01)
    assert later_wave_spread(crisp, crisp, resident) is None  # no lifetime measured


def test_crisp_waves_and_the_measured_merged_share_set_the_model_of_a_staged_kernel():
    ctx, kernel, fp, resident = surveyed(STAGED)
    hw = load_hw("h200")
    assert fp.staged and hw.l2_request_coalescer
    order = identity_order(fp)
    got = calibrate(fp, hw, resident, order, 0.02, 0.25)
    assert got.crisp_waves and got.merged is not None and got.changes_model and not got.notes
    p = L2Model(fp, hw, resident, **got.model_args()).predict("identity", order, fp.adapter, fp.divisor)
    assert p.merged / p.reads == pytest.approx(0.25, abs=0.002)  # the model now merges the share measured
    assert calibrate(fp, hw, resident, order, 0.02, 0.05).merged < got.merged
    # spread waves: the usual form, with the measured share
    spread = calibrate(fp, hw, resident, order, CRISP_SPREAD + 0.4, 0.25)
    assert not spread.crisp_waves and spread.merged is not None
    # crisp waves without the share: that form would get the hit rates wrong, so the model keeps its own
    blind = calibrate(fp, hw, resident, order, 0.0, None)
    assert not blind.crisp_waves and blind.merged is None and not blind.changes_model
    assert "without the coalescer's measured share" in blind.notes[0]


def test_the_most_blocks_at_once_counts_overlapping_lives_and_not_one_that_starts_as_another_ends():
    assert most_at_once(np.array([0, 0, 5, 10]), np.array([10, 6, 12, 20])) == 3
    assert most_at_once(np.array([0, 10, 20]), np.array([10, 20, 30])) == 1


def test_a_count_from_the_compiler_or_a_whole_grid_at_once_is_not_replaced():
    ctx, kernel, fp, resident = surveyed(STAGED)
    hw = load_hw("h200")
    order = identity_order(fp)
    kept = calibrate(fp, hw, resident, order, 0.6, None, running=resident // 2, compiled=True)
    assert kept.resident is None and kept.running == resident // 2 and "keeps the compiler's" in kept.notes[0]
    whole = 256 * 256
    assert calibrate(fp, hw, whole * 2, order, None, None, running=whole).resident is None  # one wave: no SM's limit


def test_a_measured_count_of_blocks_at_once_replaces_the_model_s_where_they_differ():
    ctx, kernel, fp, resident = surveyed(STAGED)
    hw = load_hw("h200")
    order = identity_order(fp)
    assert calibrate(fp, hw, resident, order, 0.6, None, running=resident + 1).resident is None  # within 5 %
    half = calibrate(fp, hw, resident, order, 0.6, None, running=resident // 2)
    assert half.resident == resident // 2 and half.running == resident // 2 and half.changes_model
    assert f"{resident // 2:,} blocks ran at once (the model had {resident:,})" in half.text()
    plain, measured = rank(ctx, kernel, hw), rank(ctx, kernel, hw, calibration=half)
    assert plain.identity.l2_hit_rate != measured.identity.l2_hit_rate
    by_hand = L2Model(fp, hw, resident // 2).predict("identity", order, fp.adapter, fp.divisor)
    assert measured.identity.l2_hit_rate == pytest.approx(by_hand.l2_hit_rate, abs=0.01)


def test_a_kernel_that_does_not_stage_its_reads_takes_crisp_waves_alone():
    ctx, kernel, fp, resident = surveyed(NAIVE)
    got = calibrate(fp, load_hw("h200"), resident, identity_order(fp), 0.0, 0.3)
    assert got.crisp_waves and got.merged is None and got.merged_share is None
    assert "does not stage its reads" in got.notes[0]
    assert not calibrate(fp, load_hw("mi300x"), resident, identity_order(fp), 0.6, None).changes_model


def test_the_ranking_runs_the_model_with_the_calibration_and_keeps_calibrations_apart():
    ctx, kernel, fp, resident = surveyed(STAGED)
    hw = load_hw("h200")
    plain = rank(ctx, kernel, hw)
    measured = calibrate(fp, hw, resident, identity_order(fp), 0.0, 0.35)
    again = rank(ctx, kernel, hw, calibration=measured)
    assert isinstance(plain, Ranking) and isinstance(again, Ranking)
    assert plain.calibration is None and again.calibration == measured
    rates = {p.candidate: p.l2_hit_rate for p in plain.predictions}
    assert any(abs(p.l2_hit_rate - rates[p.candidate]) > 0.5 for p in again.predictions)
    assert rank(ctx, kernel, hw) == plain  # the cached plain ranking is not the calibrated one


# ---- the instrumented copy ------------------------------------------------------------------------------

def test_the_instrumented_copy_stamps_at_the_top_of_the_kernel_and_changes_nothing_else():
    ctx = FileContext(load_bytes("k.cu", NAIVE))
    kernel = analyze(ctx).kernels[0]
    text = instrumented(NAIVE, kernel).decode()
    head, _, rest = text.partition(NAIVE.decode()[:40])
    assert "swzc_timeline_arm" in head and "swzc_timeline_save" in head and "__global__" not in head
    assert text.count("swzc_tl_stamp swzc_tl_here;") == 1
    assert text.replace("  swzc_tl_stamp swzc_tl_here;\n", "").endswith(NAIVE.decode())
    stamped = text.index("swzc_tl_stamp swzc_tl_here;")
    assert text.index("const int row") > stamped > text.index("__global__ void naive")


def test_the_prelude_goes_after_a_byte_order_mark():
    data = b"\xef\xbb\xbf" + NAIVE
    kernel = analyze(FileContext(load_bytes("k.cu", data))).kernels[0]
    text = instrumented(data, kernel)
    assert text.startswith(b"\xef\xbb\xbf/* swzc calibration") and text.count(b"\xef\xbb\xbf") == 1


@needs_nvcc
@pytest.mark.parametrize("data", [NAIVE, STAGED, b"\xef\xbb\xbf" + NAIVE], ids=["returns early", "staged", "BOM"])
def test_the_instrumented_copy_builds_as_the_loop_builds_a_variant(tmp_path, data):
    from swzc.verify.harness import Builder

    ctx = FileContext(load_bytes("k.cu", data))
    kernel = analyze(ctx).kernels[0]
    builder = Builder("k.cu", kernel.name, "sm_90", str(tmp_path), tmp_path)
    (lib,) = builder.compile([builder.variant("t", instrumented(data, kernel))])
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout
    assert "swzc_timeline_arm" in symbols and "swzc_timeline_save" in symbols and "swzc_launch" in symbols


# ---- the loop's run of it -------------------------------------------------------------------------------

def _timeline_bytes(start, end, sm):
    n = len(start)
    return struct.pack("<Q", n) + np.asarray(start, "<u8").tobytes() + np.asarray(end, "<u8").tobytes() + \
        np.asarray(sm, "<u4").tobytes()


def _loop(monkeypatch, tmp_path, timeline: bytes | None, counters, data=STAGED, stamped=256 * 256):
    """A Bencher whose compiles are stand-ins and whose harness is a script: in timeline mode, asked to stamp
    `stamped` blocks, it writes `timeline` (nothing, and fails, where None or asked for another count); ncu's
    counters of the original are `counters`."""
    from swzc.verify import bench

    (tmp_path / "timeline.src").write_bytes(timeline or b"")
    script = (f'if [ "$3" = timeline ]; then [ "$5" = {stamped} ] || exit 4; ' +
              (f'cp {tmp_path / "timeline.src"} "$4"; exit 0; fi\n' if timeline is not None else 'exit 3; fi\n') + 'exit 0\n')
    built = []

    class FakeBuilder:
        def __init__(self, name, kernel, arch, include_dir, folder, *args, **kw):
            self.folder = Path(folder)

        def variant(self, tag, data):
            return [tag, data], self.folder / f"{tag}.so"

        def harness(self, tag, plan, flush):
            path = self.folder / "harness"
            path.write_text("#!/bin/sh\n" + script)
            path.chmod(0o755)
            return ["harness", b""], path

        def compile_each(self, jobs):
            built.append([(command[0], command[1]) for command, _ in jobs])
            return [out for _, out in jobs]

    asked = []
    monkeypatch.setattr(bench, "Builder", FakeBuilder)
    monkeypatch.setattr(bench, "ncu_counters", lambda b, variant, metrics: asked.append((b.a, b.b, variant, list(metrics))) or counters)
    monkeypatch.setattr(bench, "gpu_vendor", lambda: "nvidia")
    src = load_bytes(str(tmp_path / "k.cu"), data)
    ctx = FileContext(src)
    loop = bench.Bencher(ctx, analyze(ctx), 0, lambda formula: data, load_hw("h200"), rounds=3)
    loop.profiler = "none (ncu is not on PATH): timed only"  # as on a machine without ncu
    return loop, built, asked


def test_the_loop_builds_the_instrumented_copy_with_the_candidates_and_reads_its_timeline(monkeypatch, tmp_path):
    from swzc.formulas.swizzles import parse_spec

    blocks, resident = 256 * 256, 1024
    start = np.repeat(np.arange(blocks // resident) * 1000 + 1, resident)
    counters = {"lts__t_sector_hit_rate.pct": 61.5, "dram__bytes_read.sum": 2.5e8, LRC_MERGED: 30.0, LRC_DELIVERED: 100.0}
    loop, built, asked = _loop(monkeypatch, tmp_path, _timeline_bytes(start, start + 900, np.zeros(blocks)), counters)
    try:
        seen = loop.calibrate([parse_spec("grouped:8")], True)
    finally:
        loop.close()
    (batch,) = built  # one batch: the candidate, the original, the harness and the instrumented copy
    assert [tag for tag, _ in batch] == ["b1", "a", "harness", "t"]
    assert b"swzc_tl_stamp swzc_tl_here;" in batch[3][1] and b"swzc_tl_" not in batch[1][1]
    assert seen == Observed(0.0, 0.3, 61.5, 2.5e8, (), resident)
    (profiled,) = asked  # ncu ran once, on the original (a and b both the original's library)
    assert profiled[0] == profiled[1] and profiled[0].name == "a.so" and profiled[2] == "a"
    assert LRC_MERGED in profiled[3] and "lts__t_sector_hit_rate.pct" in profiled[3]
    assert loop.baseline_hit == 61.5 and loop.baseline_dram == 2.5e8


def test_blocks_that_left_before_the_stamp_are_left_out_and_a_large_grid_stamps_its_first_blocks(monkeypatch, tmp_path):
    from swzc.verify import calibrate as calibrating

    blocks, resident = 256 * 256, 1024
    start = np.repeat(np.arange(blocks // resident) * 1000 + 1, resident)
    end = start + 900
    start[::200] = 0  # 0.5 % of the blocks: no start stamped, an end from their other warps
    loop, _, _ = _loop(monkeypatch, tmp_path, _timeline_bytes(start, end, np.zeros(blocks)), None)
    try:
        seen = loop.calibrate([], False)
    finally:
        loop.close()
    assert seen.spread == 0.0 and resident - 6 <= seen.running <= resident  # as if they were not there
    monkeypatch.setattr(calibrating, "MAX_STAMPED", 4 * resident)  # the harness is asked for the first 4,096
    (tmp_path / "big").mkdir()
    clean = np.repeat(np.arange(4) * 1000 + 1, resident)
    loop, _, _ = _loop(monkeypatch, tmp_path / "big", _timeline_bytes(clean, clean + 900, np.zeros(4 * resident)), None,
                       stamped=4 * resident)
    try:
        seen = loop.calibrate([], False)
    finally:
        loop.close()
    assert seen.spread == 0.0 and seen.running == resident


@pytest.mark.parametrize("timeline, counters, said", [
    (None, None, ["the instrumented run failed", "ncu is not on PATH"]),
    (b"\x01\x00", {}, ["does not cover the grid", "gave no lrc__ counters"]),
    (_timeline_bytes(np.zeros(65536), np.zeros(65536), np.zeros(65536)), {"x": 1.0}, ["0% of the blocks were stamped"]),
], ids=["nothing", "a short timeline", "no stamps"])
def test_what_the_run_could_not_measure_is_said_and_the_model_keeps_its_defaults(monkeypatch, tmp_path, timeline, counters,
                                                                                  said):
    loop, _, _ = _loop(monkeypatch, tmp_path, timeline, counters)
    try:
        seen = loop.calibrate([], True)
    finally:
        loop.close()
    assert seen.spread is None and seen.merged_share is None
    assert all(any(s in note for note in seen.notes) for s in said), seen.notes


def test_a_timeline_larger_than_the_grid_is_not_read(monkeypatch, tmp_path):
    big = _timeline_bytes(np.ones(70000), np.ones(70000) * 2, np.zeros(70000))
    loop, _, _ = _loop(monkeypatch, tmp_path, big, None, NAIVE)
    try:
        seen = loop.calibrate([], False)
    finally:
        loop.close()
    assert seen.spread is None and "no timeline" in seen.notes[0] and "more than the limit" in seen.notes[0]


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="no CUDA GPU here")
def test_the_loop_measures_the_original_s_waves_and_merged_share_on_the_gpu():
    """The real thing: the instrumented copy built, run through the generated harness and read back, and ncu's
    coalescer counters of the original (where ncu is present), before the one candidate is measured."""
    import shutil

    from swzc.pipeline.driver import rewrite_file

    suite = ROOT / "bench" / "suite"
    options = Options(hw=load_hw("h200"), compile=False, bench=True, rounds=5, max_iterations=1,
                      launch_spec=str(suite / "launch_specs.toml"))
    result = rewrite_file(str(suite / "kernels" / "gemm_bf16_wmma.cu"), options)
    (bench,) = result.bench
    got = bench.calibration
    # bands of as many blocks as ran at once: a spread within a lifetime, whatever the model's own count
    assert got is not None and got.running and got.spread is not None and 0.0 <= got.spread < 1.0, got
    if shutil.which("ncu"):  # the kernel stages its tiles through shared memory: the coalescer's share applies
        assert got.merged_share is not None and 0.0 <= got.merged_share < 1.0 and got.merged is not None, got
        assert bench.baseline_l2_hit_rate is not None and bench.baseline_dram_read_bytes is not None
