"""bench/l2/timeline.py: the instrumented kernel, the dump read back, and what is computed from the times."""

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

from support import ROOT, needs_nvcc

sys.path.insert(0, str(ROOT / "bench" / "l2"))
spec = importlib.util.spec_from_file_location("timeline", ROOT / "bench" / "l2" / "timeline.py")
timeline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(timeline)

PROGRAM = """\
#include <cstdio>
#include <cstdlib>
#define CHECK(x) do { if ((x) != cudaSuccess) exit(2); } while (0)
__global__ void scale(float* x) {
  for (int i = 0; i < 4; ++i) { x[blockIdx.x * 4 + i] *= 2.0f; }
}
int main() {
  float* x;
  CHECK(cudaMalloc(&x, 64 * sizeof(float)));
  scale<<<16, 32>>>(x);
  CHECK(cudaDeviceSynchronize());
  printf("kernel scale ms %.4f\\n", 0.0f);
  return 0;
}
"""

RESIDENT, LIFETIME, BLOCKS = 8, 1000, 64


def blocks(starts):
    start = np.asarray(starts, dtype=np.int64)
    return {"start": start, "end": start + LIFETIME, "sm": np.arange(start.size) % 4}


def row_major(rows, cols):
    """Tiles (row, col) in dispatch order, row after row."""
    return np.array([(r, c, 0) for r in range(rows) for c in range(cols)])


def test_instrumenting_adds_start_end_and_dump_and_keeps_the_kernel():
    text = timeline.instrumented(PROGRAM, "scale")
    body = text[text.index("__global__ void scale"):text.index("int main")]
    assert body.index("tl_start[tl_block()] = tl_now()") < body.index("x[blockIdx.x * 4 + i] *= 2.0f")
    assert body.index("x[blockIdx.x * 4 + i] *= 2.0f") < body.index("atomicMax(&tl_end[tl_block()]")
    assert text.index("SWZC_TIMELINE") < text.index('printf("kernel scale ms')
    assert text.index("__device__ unsigned long long tl_start") < text.index("__global__ void scale")


def test_a_kernel_that_returns_early_is_not_instrumented():
    with pytest.raises(AssertionError):
        timeline.instrumented(PROGRAM.replace("  for (int i", "  if (blockIdx.x == 3) return;\n  for (int i"), "scale")


@needs_nvcc
def test_the_instrumented_program_compiles(tmp_path):
    src = tmp_path / "scale.cu"
    src.write_text(timeline.instrumented(PROGRAM, "scale"))
    run = subprocess.run(["nvcc", "-arch=sm_90", "-c", str(src), "-o", str(tmp_path / "scale.o")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_the_dump_is_read_back_from_its_first_start(tmp_path):
    n = 5
    start = np.array([105, 100, 130, 110, 120], dtype=np.uint64)
    path = tmp_path / "k.bin"
    path.write_bytes(np.uint32(n).tobytes() + start.tobytes() + (start + 50).tobytes()
                     + np.arange(n, dtype=np.uint32).tobytes())
    t = timeline.timeline(path, n)
    assert t["start"].tolist() == [5, 0, 30, 10, 20]
    assert t["end"].tolist() == [55, 50, 80, 60, 70]
    assert t["sm"].tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(AssertionError):
        timeline.timeline(path, n + 1)


def test_crisp_waves_have_no_spread_and_staggered_ones_most_of_a_lifetime():
    b = np.arange(BLOCKS)
    crisp = timeline.summary(blocks((b // RESIDENT) * LIFETIME), RESIDENT, row_major(8, 8))
    assert crisp["first_wave_spread"] == 0 and crisp["later_wave_spread"] == 0
    assert crisp["resident_measured"] == RESIDENT and crisp["per_sm_measured"] == 2
    staggered = (b // RESIDENT) * LIFETIME + (b % RESIDENT) * LIFETIME // RESIDENT
    spread = timeline.summary(blocks(staggered), RESIDENT, row_major(8, 8))
    assert spread["later_wave_spread"] == pytest.approx(0.7, abs=0.01)  # 10th to 90th percentile of 0..7/8
    assert spread["resident_measured"] == RESIDENT


def test_pairs_that_share_a_panel_in_step_inside_spread_waves():
    # 16 columns, resident 32: blocks of one column are 16 apart.  Staggered starts put them half a
    # lifetime apart (lag 1); starting each tile row's blocks with the row before them puts them together.
    b = np.arange(128)
    tiles = row_major(8, 16)
    staggered = (b * LIFETIME) // 32
    lag = timeline.summary(blocks(staggered), 32, tiles)
    assert lag["col_pairs_gap"] == 16 and lag["col_pairs_lag"] == pytest.approx(1.0)
    assert np.isnan(lag["row_pairs_gap"])  # a tile row's blocks are 1 apart: too close to count
    together = (b % 16) * LIFETIME // 16 + (b // 64) * LIFETIME  # rows 0-3 in step, then rows 4-7
    assert timeline.summary(blocks(together), 32, tiles)["col_pairs_lag"] == 0


def test_spearman_by_hand():
    assert timeline.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert timeline.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert timeline.spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)


def test_the_first_wave_is_kept_apart_from_the_later_ones():
    b = np.arange(2 * RESIDENT)  # a first wave that starts at once, then one staggered over a lifetime
    start = np.where(b < RESIDENT, 0, LIFETIME + (b % RESIDENT) * LIFETIME // RESIDENT)
    s = timeline.summary(blocks(start), RESIDENT, row_major(2, RESIDENT))
    assert s["first_wave_spread"] == 0 and s["later_wave_spread"] == pytest.approx(0.7, abs=0.01)


def test_pairs_as_far_apart_as_a_wave_are_not_counted():
    b = np.arange(128)
    s = timeline.summary(blocks((b * LIFETIME) // 16), 16, row_major(8, 16))  # a column's blocks: 16 apart
    assert np.isnan(s["col_pairs_gap"]) and np.isnan(s["col_pairs_lag"])


def test_the_first_wave_s_lifetimes_are_told_by_slot_on_an_sm():
    # 4 SMs, 2 blocks each: positions 0-3 start first on their SM and live 800, positions 4-7 live 1,200.
    start = np.zeros(RESIDENT, dtype=np.int64)
    start[4:] = 1  # the second block on each SM started just after the first
    life = np.where(np.arange(RESIDENT) < 4, 800, 1200)
    t = {"start": start, "end": start + life, "sm": np.arange(RESIDENT) % 4}
    slots = timeline.summary(t, RESIDENT, row_major(1, RESIDENT))["first_wave_slot_lifetimes"]
    assert slots == pytest.approx([0.8, 1.2])  # of the median lifetime, 1,000
    t["start"] = 1 - start  # now the blocks at positions 4-7 started first
    assert timeline.summary(t, RESIDENT, row_major(1, RESIDENT))["first_wave_slot_lifetimes"] == pytest.approx([1.2, 0.8], abs=0.01)
