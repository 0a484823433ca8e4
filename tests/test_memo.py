"""The results cache (swzc.core.memo): the L2 model's figures kept across runs in the user's private cache folder,
read back only under the key of everything they depend on, and the same output whether cold, warm or off."""

import json
import os
import stat
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from support import SIZED, STAGED_TILES

from swzc.analysis.context import FileContext
from swzc.analysis.kernels import analyze
from swzc.commands.cli import main
from swzc.core import cache
from swzc.core.memo import Memo
from swzc.frontend import source
from swzc.frontend.build_context import CompileContext
from swzc.model import l2model, rank as ranking
from swzc.model.calibration import Calibration
from swzc.pipeline.driver import load_hw


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    """The cache on, in a folder of this test's own."""
    monkeypatch.delenv("SWZC_NO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "swzc"


def _memo_entries(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.startswith("memo-")) if folder.is_dir() else []


def _ranked(tmp_path: Path, text: bytes, memo: Memo, hw: str = "h200"):
    path = tmp_path / "k.cu"
    path.write_bytes(text)
    ctx = FileContext(source.load(str(path)), CompileContext(memo=memo))
    kernel = analyze(ctx, {}).kernels[0]
    return ranking.rank(ctx, kernel, load_hw(hw))


def _figures(r):
    return [(p.candidate, p.l2_hit_rate, p.dram_bytes, p.requests, p.read_misses, p.reads, p.merged, p.fabric)
            for p in r.predictions]


def test_figures_are_kept_and_the_next_run_reads_them_back_without_running_the_model(cache_home, tmp_path, monkeypatch):
    first = _ranked(tmp_path, STAGED_TILES, Memo(enabled=True))
    entries = _memo_entries(cache_home)
    assert len(entries) == 2  # the entry and its stamp
    assert all(stat.S_IMODE((cache_home / e).stat().st_mode) == 0o600 for e in entries)
    monkeypatch.setattr(l2model.L2Model, "predict", lambda *a, **k: pytest.fail("the model ran despite a cached entry"))
    monkeypatch.setattr(ranking, "dispatch_maps", lambda *a, **k: pytest.fail("block orders listed despite a cached entry"))
    memo = Memo(enabled=True)
    again = _ranked(tmp_path, STAGED_TILES, memo)
    assert (memo.hits, memo.misses) == (1, 0)
    assert _figures(again) == _figures(first)
    assert (again.chosen, again.reason) == (first.chosen, first.reason)


def test_off_it_neither_reads_nor_writes(cache_home, tmp_path):
    memo = Memo(enabled=False)
    _ranked(tmp_path, STAGED_TILES, memo)
    assert _memo_entries(cache_home) == [] and (memo.hits, memo.misses) == (0, 0)


def test_every_input_of_the_figures_is_in_the_key(tmp_path):
    """The footprint's shape, the GPU, the orders, the blocks at once, the measured inputs, the grid and the
    adapter each change the key."""
    path = tmp_path / "k.cu"
    path.write_bytes(STAGED_TILES)
    ctx = FileContext(source.load(str(path)))
    kernel = analyze(ctx, {}).kernels[0]
    fp, _, resident = ranking.survey(ctx, kernel, load_hw("h200"))
    hw = load_hw("h200")
    specs = ranking.candidates(fp.adapter, fp.tiles, hw)
    base = ranking._figures_key(fp, fp.adapter, 0, hw, specs, resident, None)
    first = fp.accesses[0]
    moved = replace(first, sectors=first.sectors + 1)
    variants = [
        ranking._figures_key(fp, "1d", 0, hw, specs, resident, None),
        ranking._figures_key(fp, fp.adapter, 8, hw, specs, resident, None),
        ranking._figures_key(fp, fp.adapter, 0, load_hw("h100"), specs, resident, None),
        ranking._figures_key(fp, fp.adapter, 0, replace(hw, l2_bytes=hw.l2_bytes // 2), specs, resident, None),
        ranking._figures_key(fp, fp.adapter, 0, hw, specs[:-1], resident, None),
        ranking._figures_key(fp, fp.adapter, 0, hw, [*specs[1:], specs[0]], resident, None),
        ranking._figures_key(fp, fp.adapter, 0, hw, specs, resident + 1, None),
        ranking._figures_key(fp, fp.adapter, 0, hw, specs, resident, Calibration(None, None, crisp_waves=True, merged=None)),
        ranking._figures_key(fp, fp.adapter, 0, hw, specs, resident, Calibration(None, None, crisp_waves=False, merged=0.2)),
        ranking._figures_key(replace(fp, grid=(fp.grid[0] + 1, *fp.grid[1:])), fp.adapter, 0, hw, specs, resident, None),
        ranking._figures_key(replace(fp, accesses=(moved, *fp.accesses[1:])), fp.adapter, 0, hw, specs, resident, None),
        ranking._figures_key(replace(fp, staged=not fp.staged), fp.adapter, 0, hw, specs, resident, None),
        ranking._figures_key(replace(fp, block=(8, 8, 1)), fp.adapter, 0, hw, specs, resident, None),
    ]
    assert base and len({base, *variants}) == len(variants) + 1


def test_the_code_that_computed_them_is_in_the_key(monkeypatch):
    """Another numpy (or another swzc: every file of the package is hashed) finds nothing of the old entries."""
    before = Memo(enabled=True)._name("k")
    monkeypatch.setattr(np, "__version__", "0.0.0")
    assert Memo(enabled=True)._name("k") != before


@pytest.mark.parametrize("stored", [
    "not a document", [1, 2], {"layout": 1, "predictions": [], "window": 1, "same": False},  # a list of another length
    {"layout": 99, "predictions": [], "window": 1, "same": False}, {"layout": 1},
])
def test_an_entry_that_fails_its_check_is_computed_again(cache_home, tmp_path, monkeypatch, stored):
    first = _ranked(tmp_path, STAGED_TILES, Memo(enabled=True))
    monkeypatch.setattr(Memo, "get", lambda self, key: stored)
    again = _ranked(tmp_path, STAGED_TILES, Memo(enabled=True))
    assert _figures(again) == _figures(first)


def test_a_value_out_of_range_is_refused():
    specs = ranking.candidates("2d", (8, 8, 1), load_hw("h200"))[:1]
    good = [59.5, 1e9, 10, 5, 10, 0, 0]
    text = lambda row: {"layout": ranking.FIGURES_LAYOUT, "predictions": [row], "window": 64, "same": False}
    assert ranking._figures_read(text(good), specs) is not None
    for bad in ([float("nan"), *good[1:]], [*good[:2], 1.5, *good[3:]], [*good[:2], "10", *good[3:]], good[:-1], [*good, 0],
                [*good[:2], -1, *good[3:]], [True, *good[1:]]):
        assert ranking._figures_read(text(bad), specs) is None
    assert ranking._figures_read({**text(good), "window": -64}, specs) is None


def _suggest(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


def test_suggest_prints_the_same_cold_warm_and_off(cache_home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sized.cu").write_bytes(SIZED)
    (tmp_path / "tiles.cu").write_bytes(STAGED_TILES)
    files = ["sized.cu", "tiles.cu"]
    cold = _suggest("suggest", "--json", *files)
    stored = _memo_entries(cache_home)
    assert cold.exit_code == 1 and len(stored) > 2  # a sweep's sizes each have their figures
    warm = _suggest("suggest", "--json", *files)
    assert _memo_entries(cache_home) == stored
    off = _suggest("--no-cache", "suggest", "--json", *files)
    by_env = _suggest("suggest", "--json", *files, env={"SWZC_NO_CACHE": "1"})
    assert cold.stdout == warm.stdout == off.stdout == by_env.stdout
    assert json.loads(cold.stdout)["files"][0]["kernels"][0]["suggestion"]["swept"]


def test_no_cache_writes_nothing(cache_home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiles.cu").write_bytes(STAGED_TILES)
    assert _suggest("--no-cache", "suggest", "tiles.cu").exit_code == 1
    assert _suggest("suggest", "tiles.cu", env={"SWZC_NO_CACHE": "1"}).exit_code == 1
    assert _memo_entries(cache_home) == []
    assert _suggest("suggest", "tiles.cu", env={"SWZC_NO_CACHE": "0"}).exit_code == 1  # "0" leaves it on
    assert _memo_entries(cache_home)


def test_the_memo_keeps_plain_data_and_reads_back_only_what_it_wrote(cache_home):
    memo = Memo(enabled=True)
    memo.put("k", {"a": [1, 2.5]})
    assert Memo(enabled=True).get("k") == {"a": [1, 2.5]}
    memo.put("nan", [float("nan")])  # not kept (JSON has no NaN), and no error
    memo.put("object", object())
    assert Memo(enabled=True).get("nan") is None and Memo(enabled=True).get("object") is None
    entry = cache_home / memo._name("k")
    entry.write_bytes(b"\xff not json")  # damaged, its stamp no longer matching
    assert Memo(enabled=True).get("k") is None
    (cache_home / f"{entry.name}.sha256").write_bytes(cache._stamp(entry.name, entry.read_bytes()))
    assert Memo(enabled=True).get("k") is None  # stamped, but not a document
