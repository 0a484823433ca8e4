"""`swzc tune`: jobs per kernel, the SQLite store, resuming, local workers that die, and a real Ray cluster that
loses a node.  The measurement is a stand-in program run through --bench-cmd (no GPU needed): it "runs" the
source it is given and logs, for each run, which kernel was swizzled and which device it was handed."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import ROOT, has_gpu

from swzc.commands.cli import main
from swzc.fleet import jobs as planning
from swzc.fleet import job as one_job
from swzc.fleet import store
from swzc.fleet.jobs import Settings
from swzc.verify import harness

GEMM = """__global__ void NAME(const float* a, float* c, int n) {
  int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  float s = 0;
  for (int k = 0; k < n; ++k) s += a[row * n + k] * a[k * n + col];
  c[row * n + col] = s;
}
"""

# The stand-in program: a swizzled source runs in 8 ms, the original in 10; each run appends a line to the log
# named in its environment: the kernels swizzled in the source, the device it was given, its parent's pid.
STAND_IN = """import os, re, sys, time
src = open(sys.argv[1]).read()
swizzled = sorted(set(re.findall(r"__global__ void (\\w+)\\([^{]*\\{\\s*(?:[^{}]*\\n)*?[^{}]*swzc_", src)))
time.sleep(float(os.environ.get("STAND_IN_SLEEP", "0")))
with open(os.environ["STAND_IN_LOG"], "a") as log:
    log.write(f"{','.join(swizzled) or '-'} {os.environ.get('CUDA_VISIBLE_DEVICES', '')}\\n")
print(f"ms {8.0 if 'swzc_' in src else 10.0:.3f} checksum c0ffee")
"""


def _project(folder: Path, files: dict[str, list[str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, kernels in files.items():
        body = "".join(GEMM.replace("NAME", k) for k in kernels)
        launches = "".join(f"  {k}<<<dim3(256, 256), dim3(16, 16)>>>(0, 0, 4096);\n" for k in kernels)
        (folder / name).write_text(f"#include <cstdio>\n{body}int main() {{\n{launches}  printf(\"done\\n\");\n}}\n")
    (folder / "stand_in.py").write_text(STAND_IN)
    return folder


def _args(folder: Path, db: Path, *more: str) -> list[str]:
    return ["tune", str(folder), "--store", str(db), "--bench-cmd", "python3 stand_in.py {file}", "--bench-runs", "2",
            "--no-compile", "--max-iterations", "2", *more]


def _runs(log: Path) -> list[tuple[str, str]]:
    return [tuple(line.split(" ", 1)) for line in log.read_text().splitlines()] if log.exists() else []  # type: ignore[misc]


def _rows(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT key, kernel, status, chosen, tries FROM results ORDER BY kernel").fetchall()


@pytest.fixture()
def logged(tmp_path, monkeypatch):
    log = tmp_path / "runs.log"
    monkeypatch.setenv("STAND_IN_LOG", str(log))
    monkeypatch.setenv("SWZC_NO_GPU", "1")
    return log


def test_each_kernel_is_a_job_on_one_worker_and_a_rerun_measures_nothing(tmp_path, logged):
    folder = _project(tmp_path / "proj", {"a.cu": ["ka", "kb"], "b.cu": ["kc"]})
    db = tmp_path / "tune.sqlite"
    first = CliRunner().invoke(main, [*_args(folder, db, "--gpus", "0,1"), "--json"])
    assert first.exit_code == 0, first.output
    doc = json.loads(first.stdout)
    assert doc["summary"] == {"jobs": 3, "stored_before": 0, "measured": 3, "retried": 0, "failed": 0, "not_tuned": 0}
    assert [(j["kernel"], j["status"]) for j in doc["jobs"]] == [("ka", "rewritten"), ("kb", "rewritten"), ("kc", "rewritten")]
    assert all(j["speedup"] == pytest.approx(1.25) and j["tries"] == 1 for j in doc["jobs"])
    rows = _rows(db)
    assert [r[1] for r in rows] == ["ka", "kb", "kc"] and len({r[0] for r in rows}) == 3
    runs = _runs(logged)
    swizzled = {kernels: {device for k, device in runs if k == kernels} for kernels, _ in runs if kernels != "-"}
    assert set(swizzled) == {"ka", "kb", "kc"}  # each job swizzles its own kernel alone ...
    assert all(len(devices) == 1 for devices in swizzled.values())  # ... and is measured on one device
    assert {d for ds in swizzled.values() for d in ds} == {"0", "1"}  # the two workers both worked
    again = CliRunner().invoke(main, _args(folder, db, "--gpus", "0,1"))
    assert again.exit_code == 0 and _runs(logged) == runs  # nothing measured again
    assert "3 already stored (not measured again), 0 measured now" in again.stderr
    assert again.stdout.count(": serpentine:") + again.stdout.count(": grouped:") + again.stdout.count(": hilbert:") == 3


def test_paths_are_read_from_the_folder_tune_was_started_in(tmp_path, logged, monkeypatch):
    folder = _project(tmp_path / "proj", {"a.cu": ["ka"]})
    (tmp_path / "spec.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, _args(Path("proj"), Path("tune.sqlite"), "--launch-spec", "spec.toml", "-I", "inc"))
    assert result.exit_code == 0, result.output
    with sqlite3.connect(tmp_path / "tune.sqlite") as con:
        (file, settings), = con.execute("SELECT file, settings FROM results").fetchall()
    settings = json.loads(settings)
    assert file == str(folder / "a.cu") and settings["launch_spec"] == str(tmp_path / "spec.toml")
    assert settings["include_dirs"] == [str(tmp_path / "inc")]


def test_a_relative_database_and_model_file_are_read_from_where_tune_started(tmp_path, logged, monkeypatch):
    folder = _project(tmp_path / "proj", {"a.cu": ["ka"]})
    (folder / "build").mkdir()
    (folder / "build" / "compile_commands.json").write_text(json.dumps([
        {"directory": str(folder), "file": "a.cu", "command": "nvcc -DTILE=16 -c a.cu"}]))
    (tmp_path / "mine.toml").write_text((ROOT / "hwmodels" / "h100.toml").read_text())
    monkeypatch.chdir(folder)
    result = CliRunner().invoke(main, [*_args(Path("build/compile_commands.json"), tmp_path / "s.sqlite", "--hw", "../mine.toml"),
                                       "--json"])
    assert result.exit_code == 0, result.output
    (job,) = json.loads(result.stdout)["jobs"]
    assert job["status"] == "rewritten", job["reason"]


def test_a_database_names_only_the_project_s_own_cuda_files(tmp_path, logged):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "secret.cu").write_text(GEMM.replace("NAME", "secret"))
    (victim / "notes.txt").write_text("API_KEY=hunter2\n")
    repo = _project(tmp_path / "repo", {"a.cu": ["ka"]})
    (repo / ".git").mkdir()
    (repo / "readme.txt").write_text("__global__ void k( API_KEY=hunter2 {\n")  # would be quoted by a syntax error
    (repo / "linked.cu").symlink_to(victim / "secret.cu")
    (repo / "build").mkdir()
    database = repo / "build" / "compile_commands.json"
    database.write_text(json.dumps([{"directory": str(victim), "file": "."}, {"directory": str(victim), "file": "notes.txt"},
                                    {"directory": str(victim), "file": "secret.cu"}, {"directory": str(repo), "file": "linked.cu"}, {"directory": str(repo), "file": "readme.txt"},
                                    {"directory": str(repo / "build"), "file": "../a.cu"}]))
    plan = planning.plan([str(database)], Settings(), [])
    assert [Path(j.file).name for j in plan.jobs] == ["a.cu"] and not plan.failed
    result = CliRunner().invoke(main, _args(database, tmp_path / "s.sqlite"))
    assert result.exit_code == 0 and "hunter2" not in result.output and "secret" not in result.output


def test_a_job_that_could_not_run_is_shown_as_an_error_and_run_again_next_time(tmp_path, logged):
    folder = _project(tmp_path / "proj", {"a.cu": ["ka"]})
    good = (folder / "stand_in.py").read_text()
    (folder / "stand_in.py").write_text(good.replace("checksum c0ffee", "no check value"))
    db = tmp_path / "s.sqlite"
    first = CliRunner().invoke(main, _args(folder, db))
    assert first.exit_code == 2 and "swzc: error: " in first.stderr and "printed no check value" in first.stderr
    assert [r[2] for r in _rows(db)] == ["error"]
    (folder / "stand_in.py").write_text(good)  # the program mended: the next run measures the job again
    again = CliRunner().invoke(main, _args(folder, db))
    assert again.exit_code == 0 and "0 already stored (not measured again), 1 measured now" in again.stderr
    assert [r[2] for r in _rows(db)] == ["rewritten"]


def test_a_fault_of_swzc_s_own_in_a_job_is_one_line_and_not_retried(tmp_path, logged):
    folder = _project(tmp_path / "proj", {"a.cu": ["ka"]})
    os.mkfifo(folder / "pipe")  # the program's folder cannot be copied
    result = CliRunner().invoke(main, _args(folder, tmp_path / "s.sqlite", "--retries", "2"))
    assert result.exit_code == 1 and "not finished: the worker exited with status 3" in result.stderr
    assert "internal error: " in result.stderr and "Traceback" not in result.output and "retry" not in result.stderr


def test_a_file_name_that_is_not_utf_8_is_stored(tmp_path, logged):
    folder = _project(tmp_path / "proj", {"a.cu": ["ka"]})
    os.rename(folder / "a.cu", os.path.join(os.fsencode(folder), b"x\xff.cu"))
    result = CliRunner().invoke(main, _args(folder, tmp_path / "s.sqlite"))
    assert result.exit_code == 0, result.output
    with sqlite3.connect(tmp_path / "s.sqlite") as con:
        (file,), = con.execute("SELECT file FROM results").fetchall()
    assert file.endswith("x\ufffd.cu")


def test_a_changed_file_is_tuned_again_and_the_report_reads_the_store(tmp_path, logged):
    folder = _project(tmp_path / "proj", {"a.cu": ["ka"], "b.cu": ["kc"]})
    db = tmp_path / "tune.sqlite"
    assert CliRunner().invoke(main, _args(folder, db)).exit_code == 0
    with (folder / "b.cu").open("a") as f:
        f.write("// changed\n")
    report = CliRunner().invoke(main, ["tune", str(folder), "--store", str(db), "--report"])
    assert report.exit_code == 1 and "a.cu:2 ka: " in report.stdout and "b.cu:2 kc: not tuned yet" in report.stdout
    before = len(_runs(logged))
    assert CliRunner().invoke(main, _args(folder, db)).exit_code == 0
    assert {k for k, _ in _runs(logged)[before:]} <= {"kc", "-"}  # only the changed file's kernel is measured
    patch = CliRunner().invoke(main, ["tune", str(folder), "--store", str(db), "--report", "--format", "patch"])
    assert patch.exit_code == 0 and patch.stdout.count("+++ b/") == 2
    chosen = {kernel: order for _, kernel, _, order, _ in _rows(db)}
    assert f"{chosen['ka'].split(':')[0]}" in patch.stdout


def _worker_killer(folder: Path) -> None:
    """The stand-in, made to kill the worker process running it the first time it runs for kernel kb."""
    script = (folder / "stand_in.py").read_text()
    (folder / "stand_in.py").write_text(script + """
if "kb" in (swizzled or []) and not os.path.exists(os.environ["STAND_IN_LOG"] + ".killed"):
    open(os.environ["STAND_IN_LOG"] + ".killed", "w").close()
    pid = os.getppid()
    while pid > 1:
        cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
        if b"swzc.fleet.job" in cmdline:
            os.kill(pid, 9)
            break
        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
""")


def test_a_job_whose_worker_dies_is_run_again_and_stored_once(tmp_path, logged):
    folder = _project(tmp_path / "proj", {"a.cu": ["ka", "kb"]})
    _worker_killer(folder)
    db = tmp_path / "tune.sqlite"
    result = CliRunner().invoke(main, _args(folder, db, "--gpus", "0,1"))
    assert result.exit_code == 0, result.output
    assert "kb: retry: GPU" in result.stderr and "1 tried again after their worker failed" in result.stderr
    assert [(r[1], r[2], r[4]) for r in _rows(db)] == [("ka", "rewritten", 1), ("kb", "rewritten", 2)]


def test_a_job_that_keeps_killing_its_worker_is_given_up_with_exit_1(tmp_path, logged):
    folder = _project(tmp_path / "proj", {"a.cu": ["ka", "kb"]})
    _worker_killer(folder)
    (folder / "stand_in.py").write_text((folder / "stand_in.py").read_text().replace(
        'not os.path.exists(os.environ["STAND_IN_LOG"] + ".killed")', "True"))
    db = tmp_path / "tune.sqlite"
    result = CliRunner().invoke(main, _args(folder, db, "--retries", "1"))
    assert result.exit_code == 1
    assert "kb: not finished: the worker was killed by SIGKILL" in result.stderr
    assert [r[1] for r in _rows(db)] == ["ka"]  # what finished is kept


def _swzc(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "swzc.commands.main", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)


def _wait_for(test, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not test():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _stored(db: Path) -> int:
    try:
        return len(_rows(db))
    except sqlite3.Error:
        return 0


def test_killed_halfway_a_rerun_finishes_without_measuring_what_was_stored(tmp_path, logged):
    folder = _project(tmp_path / "proj", {"a.cu": ["ka", "kb"], "b.cu": ["kc"]})
    slow = tmp_path / "slow"  # while it exists, kc's job is slow: over a minute
    slow.touch()
    (folder / "stand_in.py").write_text(STAND_IN.replace("time.sleep(", f"time.sleep(5 if 'void kc' in src and os.path.exists({str(slow)!r}) else 0*"))
    db = tmp_path / "tune.sqlite"
    run = _swzc(*_args(folder, db, "--gpus", "0"), cwd=tmp_path)
    _wait_for(lambda: _stored(db) == 2, 120, "ka and kb stored")
    _wait_for(lambda: _workers(), 30, "kc's worker started")
    time.sleep(1.0)
    run.send_signal(signal.SIGKILL)  # no clean-up at all: its worker must notice and stop, with what it started
    run.wait()
    killed = time.monotonic()
    _wait_for(lambda: not _workers(), 30, "the orphaned worker to end")
    assert time.monotonic() - killed < 10  # not the minute its job would have taken
    assert [r[1] for r in _rows(db)] == ["ka", "kb"]
    slow.unlink()
    before = len(_runs(logged))
    rerun = _swzc(*_args(folder, db, "--gpus", "0"), cwd=tmp_path)
    out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    assert "2 already stored (not measured again), 1 measured now" in err
    assert {k for k, _ in _runs(logged)[before:]} == {"kc", "-"}  # the stored kernels were not measured again
    rows = _rows(db)
    assert [r[1] for r in rows] == ["ka", "kb", "kc"] and len({r[0] for r in rows}) == 3


def _workers() -> list[str]:
    """The pids of this test's job workers (their environment names its log)."""
    return [p for p in os.listdir("/proc") if p.isdigit() and _is_worker(p)]


def _is_worker(pid: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return b"swzc.fleet.job" in cmdline and os.environ["STAND_IN_LOG"].encode() in environ


def test_a_key_is_stored_once_and_replaced_only_when_asked(tmp_path):
    folder = _project(tmp_path / "proj", {"a.cu": ["ka"]})
    job = planning.plan([str(folder)], Settings(), []).jobs[0]
    with store.opened(str(tmp_path / "s.sqlite")) as kept:
        assert kept.put(job, {"key": job.key, "status": "rewritten", "chosen": "grouped:8"}, 1)
        assert not kept.put(job, {"key": job.key, "status": "declined", "chosen": None}, 2)  # a late second result
        assert kept.stored([job.key])[job.key]["chosen"] == "grouped:8"
        assert kept.put(job, {"key": job.key, "status": "declined", "chosen": None}, 1, replace=True)  # --retune
        assert [r["status"] for r in kept.rows()] == ["declined"]


def test_the_store_refuses_what_is_not_a_store(tmp_path):
    folder = _project(tmp_path / "proj", {"a.cu": ["ka"]})
    not_db = tmp_path / "notes.txt"
    not_db.write_text("hello")
    link = tmp_path / "link.sqlite"
    link.symlink_to(tmp_path / "target.sqlite")
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as con:
        con.execute("CREATE TABLE t (x)")
    doctored = tmp_path / "doctored.sqlite"
    with store.opened(str(doctored)):
        pass
    with sqlite3.connect(doctored) as con:
        con.execute("CREATE TRIGGER t AFTER INSERT ON results BEGIN DELETE FROM results; END")
    sneaky = tmp_path / "sneaky.sqlite"  # a trigger named like SQLite's own index
    with store.opened(str(sneaky)):
        pass
    with sqlite3.connect(sneaky) as con:
        con.execute("PRAGMA writable_schema = ON")
        con.execute("INSERT INTO sqlite_master VALUES ('trigger', 'sqlite_autoindex_x', 'results', 0, "
                    "'CREATE TRIGGER sqlite_autoindex_x AFTER INSERT ON results BEGIN UPDATE results SET status = ''x''; END')")
    reshaped = tmp_path / "reshaped.sqlite"  # marked as a store, with a table of another shape
    with sqlite3.connect(reshaped) as con:
        con.execute("CREATE TABLE results (key TEXT PRIMARY KEY, result TEXT)")
        con.execute(f"PRAGMA application_id = {store.APPLICATION_ID}")
        con.execute(f"PRAGMA user_version = {store.LAYOUT}")
    linked = tmp_path / "linked.sqlite"  # a link to a store
    linked.symlink_to(doctored)
    for path, said in ((not_db, "not a swzc tune store"), (link, "symbolic link"), (foreign, "not a swzc tune store"),
                       (doctored, "another layout"), (reshaped, "another layout"), (sneaky, "another layout"),
                       (tmp_path, "writes only regular files"),
                       (linked, "not a regular file"), (folder / "a.cu", "is the input file")):
        result = CliRunner().invoke(main, ["tune", str(folder), "--store", str(path), "--report"])
        assert result.exit_code == 2 and said in result.stderr, (path, result.output)
    assert not (tmp_path / "target.sqlite").exists()  # a link is not followed to create its target
    made = tmp_path / "new.sqlite"
    with store.opened(str(made)):
        pass
    assert made.stat().st_mode & 0o777 == 0o600


def test_a_key_holds_what_decides_the_result(tmp_path):
    folder = _project(tmp_path / "proj", {"a.cu": ["ka"]})
    base = planning.plan([str(folder)], Settings(), ["H100"]).jobs[0]
    assert base.key == planning.plan([str(folder / "a.cu")], Settings(max_bytes=1 << 22), ["H100"]).jobs[0].key
    others = [planning.plan([str(folder)], Settings(rounds=10), ["H100"]).jobs[0], base.on("H200"),
              planning.plan([str(folder)], Settings(defines=("X=1",)), ["H100"]).jobs[0]]
    (folder / "a.cu").write_text((folder / "a.cu").read_text() + "\n")
    others.append(planning.plan([str(folder)], Settings(), ["H100"]).jobs[0])
    assert len({base.key, *(o.key for o in others)}) == 5


def test_each_card_s_jobs_are_ranked_with_the_model_it_is_named_after_unless_hw_is_given(tmp_path):
    from swzc.target import hw

    assert [hw.named_in(c) for c in ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "AMD Instinct MI300X", "NVIDIA GH100x", "TEST")] == [
        "h100", "h200", "mi300x", None, None]
    folder = _project(tmp_path / "proj", {"a.cu": ["ka"]})
    plan = planning.plan([str(folder)], Settings(hw="h200"), [])
    by_card = plan.on(["NVIDIA H100 80GB HBM3", "TEST"], hw_by_card=True)
    assert [(j.card, j.settings.hw) for j in by_card.jobs] == [("NVIDIA H100 80GB HBM3", "h100"), ("TEST", "h200")]
    assert [j.settings.hw for j in plan.on(["NVIDIA H100 80GB HBM3"]).jobs] == ["h200"]  # --hw given: kept
    assert by_card.jobs[0].key != plan.on(["NVIDIA H100 80GB HBM3"]).jobs[0].key


def test_a_job_measures_only_the_bytes_it_was_planned_on(tmp_path):
    folder = _project(tmp_path / "proj", {"a.cu": ["ka"]})
    job = planning.plan([str(folder)], Settings(bench_cmd="python3 stand_in.py {file}"), []).jobs[0]
    (folder / "a.cu").write_text((folder / "a.cu").read_text().replace("4096", "2048"))
    result = one_job.run(job)
    assert result["status"] == "error" and "not the file the run was planned on" in result["reason"]
    assert result["key"] == job.key and result["attempts"] == []


def test_a_compilation_database_gives_its_files_and_flags(tmp_path):
    folder = _project(tmp_path / "proj", {"a.cu": ["ka"], "b.cu": ["kb"], "c.cu": ["kc"]})
    database = tmp_path / "compile_commands.json"
    database.write_text(json.dumps([{"directory": str(folder), "file": "a.cu", "command": "nvcc -DTILE=16 -c a.cu"},
                                    {"directory": str(folder), "file": "b.cu", "arguments": ["nvcc", "-I", "inc", "-c", "b.cu"]},
                                    {"directory": str(folder), "file": "main.cpp", "command": "c++ -c main.cpp"}]))
    plan = planning.plan([str(database)], Settings(), [])
    assert [(Path(j.file).name, j.kernel, j.build) for j in plan.jobs] == [
        ("a.cu", "ka", ("-DTILE=16",)), ("b.cu", "kb", (f"-I{folder / 'inc'}",))]


@pytest.mark.parametrize("visible, expect", [
    (None, ["GPU-aaa", "GPU-bbb", "GPU-ccc"]),
    ("2,0", ["GPU-ccc", "GPU-aaa"]),
    ("GPU-bbb", ["GPU-bbb"]),
    ("1,7,0", ["GPU-bbb"]),  # the runtime stops at an entry that names no GPU
    ("", []),
])
def test_the_visible_gpus_are_read_as_the_runtime_reads_them(monkeypatch, visible, expect):
    listed = [("0", "GPU-aaa", "NVIDIA H100"), ("1", "GPU-bbb", "NVIDIA H100"), ("2", "GPU-ccc", "NVIDIA H200")]
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert [ident for ident, _ in harness._visible(listed, "CUDA_VISIBLE_DEVICES")] == expect


def test_a_mig_instance_is_visible_under_its_gpu_s_model(monkeypatch):
    listed = [("0", "GPU-aaa", "NVIDIA A100-SXM4-40GB")]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-1234")
    instances = lambda: {"MIG-1234-5678": "NVIDIA A100-SXM4-40GB"}  # noqa: E731
    assert harness._visible(listed, "CUDA_VISIBLE_DEVICES", instances) == [("MIG-1234", "NVIDIA A100-SXM4-40GB")]
    assert harness._visible(listed, "CUDA_VISIBLE_DEVICES") == []


def test_options_that_do_not_go_together_are_refused(tmp_path):
    folder = _project(tmp_path / "proj", {"a.cu": ["ka"]})
    for args, said in ((["--format", "sarif"], "go with --report"), (["--report", "--retune"], "measures nothing"),
                       (["--cards", "H100"], "--cards goes with --ray"), (["--gpus", "0,0", "--bench-cmd", "x"], "distinct GPU numbers")):
        result = CliRunner().invoke(main, ["tune", str(folder), "--store", str(tmp_path / "s.sqlite"), *args])
        assert result.exit_code == 2 and said in result.stderr, (args, result.output)


def test_a_report_makes_no_store_and_an_address_nothing_answers_on_is_said_at_once(tmp_path):
    folder = _project(tmp_path / "proj", {"a.cu": ["ka"]})
    report = CliRunner().invoke(main, ["tune", str(folder), "--store", str(tmp_path / "s.sqlite"), "--report"])
    assert report.exit_code == 1 and "a.cu:2 ka: not tuned yet" in report.stdout and not (tmp_path / "s.sqlite").exists()
    pytest.importorskip("ray")
    started = time.monotonic()
    result = CliRunner().invoke(main, ["tune", str(folder), "--store", str(tmp_path / "s.sqlite"), "--ray", "127.0.0.1:1"])
    assert result.exit_code == 2 and "--ray 127.0.0.1:1: nothing answers there" in result.stderr
    assert time.monotonic() - started < 30


def test_without_a_gpu_or_a_command_nothing_is_measured(tmp_path, monkeypatch):
    monkeypatch.setenv("SWZC_NO_GPU", "1")
    folder = _project(tmp_path / "proj", {"a.cu": ["ka"]})
    result = CliRunner().invoke(main, ["tune", str(folder), "--store", str(tmp_path / "s.sqlite")])
    assert result.exit_code == 2 and "tune needs a GPU here" in result.stderr
    assert not (tmp_path / "s.sqlite").exists()


def test_a_ray_cluster_that_loses_a_node_finishes_every_job_once(tmp_path, logged):
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    folder = _project(tmp_path / "proj", {"a.cu": ["ka", "kb"], "b.cu": ["kc", "kd"]})
    db = tmp_path / "tune.sqlite"
    loopback = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}  # every Ray process on 127.0.0.1 alone
    os.environ.update(loopback)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        nodes = [cluster.add_node(num_cpus=1, num_gpus=1, resources={"accelerator_type:TEST": 1}) for _ in range(2)]
        cluster.wait_for_nodes()
        env = {**os.environ, "STAND_IN_SLEEP": "0.5", **loopback}
        run = _swzc(*_args(folder, db, "--ray", cluster.address), env=env, cwd=tmp_path)
        _wait_for(lambda: len({k for k, _ in _runs(logged)} - {"-"}) >= 2, 180, "both nodes measuring")
        cluster.remove_node(nodes[0])
        out, err = run.communicate(timeout=300)
        nowhere = subprocess.run([sys.executable, "-m", "swzc.commands.main", *_args(folder, tmp_path / "n.sqlite", "--ray",
                                  cluster.address, "--cards", "NOPE")], capture_output=True, text=True, env=env, cwd=tmp_path,
                                 timeout=120)
    finally:
        cluster.shutdown()
        for name in loopback:
            os.environ.pop(name, None)
    assert run.returncode == 0, err
    assert "1 tried again after their worker failed" in err or "2 tried again" in err
    assert nowhere.returncode == 1 and "no node of the cluster has a NOPE" in nowhere.stderr  # not a wait for ever
    rows = _rows(db)
    assert sorted(r[1] for r in rows) == ["ka", "kb", "kc", "kd"] and len({r[0] for r in rows}) == 4
    assert all(r[2] == "rewritten" for r in rows) and max(r[4] for r in rows) >= 2
    with sqlite3.connect(db) as con:
        cards = {c for (c,) in con.execute("SELECT card FROM results")}
    assert cards == {"TEST"}


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="no CUDA GPU here")
def test_on_the_gpu_a_tuned_kernel_is_stored_with_its_card_and_not_measured_again(tmp_path, monkeypatch):
    monkeypatch.delenv("SWZC_NO_GPU", raising=False)
    db = tmp_path / "tune.sqlite"
    args = ["tune", str(ROOT / "examples" / "naive_gemm.cu"), "--store", str(db), "--max-iterations", "2", "--rounds", "5", "--json"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    (job,) = json.loads(first.stdout)["jobs"]
    assert job["card"] == harness.gpu_name() == job["measured_on"] and job["status"] in ("rewritten", "declined")
    assert job["attempts"] and all(a["candidate"] for a in job["attempts"])
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0 and json.loads(again.stdout)["summary"]["measured"] == 0
    assert json.loads(again.stdout)["jobs"] == json.loads(first.stdout)["jobs"]
