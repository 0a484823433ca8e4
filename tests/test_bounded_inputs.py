"""Every file swzc is given goes through its one bounded read (swzc.core.inputs.read_regular): a FIFO with no
writer is refused at once instead of waited on, a device such as /dev/zero is refused instead of read
without end, and each says which input it was, with exit code 2."""

from __future__ import annotations

import os
import time

import pytest
from click.testing import CliRunner
from support import NAIVE_GEMM

from swzc.commands.cli import main


@pytest.fixture
def here(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    (tmp_path / "k.cu").write_text(NAIVE_GEMM)
    os.mkfifo(tmp_path / "fifo")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "user-config"))
    return tmp_path


INPUTS = [
    pytest.param(["rewrite", "{p}", "--no-compile"], id="FILE"),
    pytest.param(["rewrite", "k.cu", "--no-compile", "--proposer", "llm", "--llm-replay", "{p}"], id="--llm-replay"),
    pytest.param(["rewrite", "k.cu", "--no-compile", "--hw", "{t}"], id="--hw"),
    pytest.param(["probe", "--from-output", "{p}"], id="probe --from-output"),
    pytest.param(["rewrite", "k.cu", "--no-compile", "--bench", "--launch-spec", "{p}"], id="--launch-spec"),
    pytest.param(["analyze", "k.cu", "-p", "{d}"], id="-p compile_commands.json"),
]


@pytest.mark.parametrize("device", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("args", INPUTS)
def test_a_fifo_or_a_device_is_refused_at_once(here, args, device):
    path = str(here / device) if device == "fifo" else device
    folder = here / "db"
    folder.mkdir()
    os.symlink(path, folder / "compile_commands.json")
    os.symlink(path, here / "model.toml")
    started = time.monotonic()
    result = CliRunner().invoke(main, [a.format(p=path, d=str(folder), t=str(here / "model.toml")) for a in args])
    assert time.monotonic() - started < 30
    if "--launch-spec" in args and "GPU" in result.output:
        pytest.skip("--bench stops first where there is no GPU")
    assert result.exit_code == 2, result.output
    said = ("not a regular file", "no compile_commands.json there")  # -p: a database that is not a file is none
    assert any(phrase in result.output for phrase in said), result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("where", ["project", "user"])
def test_a_config_file_that_is_a_fifo_is_not_waited_on(here, where):
    if where == "project":
        os.rename(here / "fifo", here / "pyproject.toml")
    else:
        (here / "user-config" / "swzc").mkdir(parents=True)
        os.rename(here / "fifo", here / "user-config" / "swzc" / "config.toml")
    started = time.monotonic()
    result = CliRunner().invoke(main, ["rewrite", "k.cu", "--no-compile"])
    assert time.monotonic() - started < 30 and "Traceback" not in result.output
    assert result.exit_code in (0, 1, 2), result.output


def test_a_launch_spec_that_is_a_fifo_is_refused(here):
    """--launch-spec is read only under --bench (a GPU); its reader is the same bounded read."""
    from swzc.core.errors import SwzcError
    from swzc.verify.harness import load_spec
    for path in (str(here / "fifo"), "/dev/zero"):
        with pytest.raises(SwzcError, match="not a regular file"):
            load_spec(path, "gemm")
