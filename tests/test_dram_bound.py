"""bench/l2/bound.py: the solve at the original order, the least-bytes pick, and one kernel's forms on its
recorded measurements."""

import importlib.util
import json
import sys

import pytest

from support import ROOT

sys.path.insert(0, str(ROOT / "bench" / "l2"))
spec = importlib.util.spec_from_file_location("bound", ROOT / "bench" / "l2" / "bound.py")
bound = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bound)


@pytest.mark.parametrize("at, target, expected", [
    (lambda x: 100.0 - 50.0 * x, 70.0, 0.6),  # falling: 100 - 50 x = 70 at 0.6
    (lambda x: 10.0 + 20.0 * x, 24.0, 0.7),   # rising
    (lambda x: 100.0 - 50.0 * x, 10.0, 1.0),  # never reached: the end nearest it
    (lambda x: 100.0 - 50.0 * x, 500.0, 0.0),
])
def test_the_solve_finds_where_the_bytes_cross_the_measured_ones(at, target, expected):
    assert bound.solve_to(at, target, 0.0, 1.0, steps=20) == pytest.approx(expected, abs=1e-4)


def test_the_least_bytes_pick_is_scored_by_what_it_measured():
    assert bound.least_over([3.0, 1.0, 2.0], [100.0, 130.0, 120.0]) == pytest.approx(0.3)
    assert bound.least_over([3.0, 2.0, 1.0], [100.0, 130.0, 100.0]) == 0.0


def test_a_kernel_s_forms_on_its_recorded_measurements():
    timeline = json.loads((ROOT / bound.TIMELINE).read_text())
    report = bound.kernel_report(("gemm_bf16_wmma", "h200", timeline))
    # its waves are crisp: the in-step forms do not apply, and calibrated is what the bound keeps
    assert report["crisp"] and set(report["forms"]) == {"as calibrated", "bound"}
    assert report["forms"]["bound"]["within_15"] == report["forms"]["as calibrated"]["within_15"] >= 20
    scored = bound.Scored("smem_gemm", "h200", timeline)
    assert not scored.crisp and scored.merged is not None
    solved = scored.solve("in_step")["in_step"]
    at_identity = scored.predict(scored.model(in_step=solved), scored.identity)[0].dram_bytes
    assert at_identity == pytest.approx(scored.measured[scored.identity], rel=0.02)
