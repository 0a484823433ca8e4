"""compare_results.py on two small hand-made results: the same result compares identical, and a changed status,
order, adapter, hash, exit code, a lost kernel or other settings make it exit 1; a reworded reason fails
only with --reasons.  Run with `.venv/bin/pytest bench/realcode`."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_results as compare  # noqa: E402  (bench/l2 has a compare module of its own)

KERNEL = {"name": "scale", "line": 1, "analyze_status": "ok", "status": "rewritten", "why": "ranked by the L2 model",
          "reason_sha256": "a" * 64, "swizzle": "grouped:8", "adapter": "2d", "rewrite_adapter": "2d", "blind": False,
          "ranked": True, "launches": 1, "grid_known": True, "grid_stride_only": False, "stride_patterns": [], "z_only": False}
RESULT = {
    "meta": {"swzc_commit": "926fdc7", "date": "2026-12-05", "compile_check": False, "timeout": 120.0,
             "repos": [{"name": "o/r", "commit": "c" * 40, "files": 2}]},
    "records": [
        {"file": "o/r:a.cu", "analyze": {"exit": 0, "seconds": 0.5}, "rewrite": {"exit": 0, "seconds": 0.6}, "seconds": 1.1,
         "timed_out": False, "crash": "", "syntax_error": None, "error": False, "compile": None, "changed": True,
         "output": True, "output_sha256": "1" * 64, "patch_sha256": "2" * 64,
         "kernels": [KERNEL, dict(KERNEL, name="relu", line=9, status="declined", analyze_status="declined",
                                  swizzle=None, why="no candidate gains 5 points", reason_sha256="b" * 64)]},
        {"file": "o/r:bad.cu", "analyze": {"exit": 2, "seconds": 0.3}, "rewrite": {"exit": 2, "seconds": 0.3}, "seconds": 0.6,
         "timed_out": False, "crash": "", "error": False, "compile": None, "changed": False, "output": False,
         "output_sha256": None, "patch_sha256": None, "kernels": [],
         "syntax_error": {"reported": [3, 5], "category": "typeid", "line": 3, "col": 5}},
    ],
}


def write(tmp_path: Path, before: dict, after: dict) -> list[str]:
    a, b = tmp_path / "before.json", tmp_path / "after.json"
    a.write_text(json.dumps(before))
    b.write_text(json.dumps(after))
    return [str(a), str(b)]


def run(tmp_path: Path, before: dict, after: dict, *flags: str) -> int:
    return compare.main([*write(tmp_path, before, after), *flags])


def changed(edit) -> dict:
    doc = copy.deepcopy(RESULT)
    edit(doc)
    return doc


def test_the_same_result_compares_identical(tmp_path, capsys):
    after = changed(lambda d: d["records"][0].update(seconds=9.9, analyze={"exit": 0, "seconds": 7.0}))  # times are not compared
    code = run(tmp_path, RESULT, after)
    assert code == 0
    assert "No difference" in capsys.readouterr().out


@pytest.mark.parametrize("edit, field, before, after", [
    (lambda d: d["records"][0]["kernels"][0].update(status="declined"), "status", "rewritten", "declined"),
    (lambda d: d["records"][0]["kernels"][0].update(analyze_status="refused"), "analyze_status", "ok", "refused"),
    (lambda d: d["records"][0]["kernels"][0].update(swizzle="serpentine:8"), "swizzle", "grouped:8", "serpentine:8"),
    (lambda d: d["records"][0]["kernels"][0].update(adapter="linear"), "adapter", "2d", "linear"),
    (lambda d: d["records"][0].update(output_sha256="3" * 64), "output sha256", "1" * 12, "3" * 12),
    (lambda d: d["records"][0].update(patch_sha256=None), "patch sha256", "2" * 12, "–"),
    (lambda d: d["records"][0]["rewrite"].update(exit=3), "rewrite exit", "0", "3"),
    (lambda d: d["records"][1]["analyze"].update(exit=1), "analyze exit", "2", "1"),
    (lambda d: d["records"][1].update(syntax_error=None), "syntax error", "3:5 (typeid)", "–"),
    (lambda d: d["records"][0]["kernels"].pop(1), "kernel", "present", "absent"),
    (lambda d: d["records"].pop(1), "file", "present", "absent"),
    (lambda d: d["meta"].update(compile_check=True), "compile_check", "False", "True"),
    (lambda d: d["meta"]["repos"][0].update(commit="d" * 40), "o/r commit", "c" * 40, "d" * 40),
])
def test_a_difference_is_shown_and_fails(tmp_path, capsys, edit, field, before, after):
    code = run(tmp_path, RESULT, changed(edit))
    out = capsys.readouterr().out
    assert code == 1
    assert any(f"| {field} | {before} | {after} |" in line for line in out.splitlines()), out


def test_a_reworded_reason_is_counted_and_fails_only_with_the_flag(tmp_path, capsys):
    after = changed(lambda d: d["records"][0]["kernels"][1].update(reason_sha256="c" * 64))
    assert run(tmp_path, RESULT, after) == 0
    assert "1 reason differences" in capsys.readouterr().out
    assert run(tmp_path, RESULT, after, "--reasons") == 1
    out = capsys.readouterr().out
    assert "| o/r:a.cu:relu@9 | reason_sha256 | bbbbbbbbbbbb | cccccccccccc |" in out


def test_kernels_of_the_same_name_and_line_are_told_apart(tmp_path, capsys):
    twice = changed(lambda d: d["records"][0]["kernels"].append(dict(KERNEL, swizzle="hilbert:2")))
    after = changed(lambda d: d["records"][0]["kernels"].append(dict(KERNEL, swizzle="morton:2")))
    assert run(tmp_path, twice, after) == 1
    assert "| o/r:a.cu:scale@1#2 | swizzle | hilbert:2 | morton:2 |" in capsys.readouterr().out


def test_what_is_not_a_result_is_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(RESULT))
    with pytest.raises(SystemExit) as exit_:
        compare.main([str(bad), str(good)])
    assert exit_.value.code == 2


def test_the_script_exits_1_on_a_difference_and_0_on_none(tmp_path):
    script = Path(compare.__file__)
    same = subprocess.run([sys.executable, str(script), *write(tmp_path, RESULT, RESULT)], capture_output=True, text=True)
    assert same.returncode == 0, same.stdout + same.stderr
    after = changed(lambda d: d["records"][0]["kernels"][0].update(swizzle=None, status="declined"))
    differ = subprocess.run([sys.executable, str(script), *write(tmp_path, RESULT, after)], capture_output=True, text=True)
    assert differ.returncode == 1 and "| o/r:a.cu:scale@1 | status | rewritten | declined |" in differ.stdout


def test_full_results_show_a_changed_reason_as_its_text(tmp_path, capsys):
    full = changed(lambda d: [k.update(reason="1D grid at /tmp/w1/src/x") for k in d["records"][0]["kernels"]])
    after = changed(lambda d: [k.update(reason="1D grid at /tmp/w2/src/x") for k in d["records"][0]["kernels"]])
    assert run(tmp_path, full, after, "--reasons") == 0, "the path alone is not a difference: the hashes agree"
    after["records"][0]["kernels"][1].update(reason="reworded", reason_sha256="c" * 64)
    assert run(tmp_path, full, after, "--reasons") == 1
    assert "| o/r:a.cu:relu@9 | reason | 1D grid at /tmp/w1/src/x | reworded |" in capsys.readouterr().out
