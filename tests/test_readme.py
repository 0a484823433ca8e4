"""The README's examples, run: each `$ swzc …` block gives the output it shows, and each configuration
block is one swzc reads."""

import re
import shlex
import shutil
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from support import needs_nvcc

from swzc.commands.cli import main
from swzc.pipeline import config
from swzc.verify.harness import load_spec

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"^```(\w*)\n(.*?)^```$", README, flags=re.S | re.M)


def _sessions() -> list[tuple[str, list[str]]]:
    """Every fenced block that starts with `$ swzc …`: the command and the lines it shows."""
    found = []
    for _, body in BLOCKS:
        lines = body.rstrip("\n").split("\n")
        if lines and lines[0].startswith("$ swzc "):
            found.append((lines[0][2:], lines[1:]))
    return found


SESSIONS = _sessions()


def test_the_readme_shows_commands_with_their_output():
    assert len(SESSIONS) >= 2 and any(command.startswith("swzc rewrite ") for command, _ in SESSIONS)


@needs_nvcc  # the shown summaries end with the compile check
@pytest.mark.parametrize("command, shown", SESSIONS, ids=[c for c, _ in SESSIONS])
def test_each_command_the_readme_shows_prints_what_it_shows(tmp_path, monkeypatch, command, shown):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, shlex.split(command)[1:])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.stdout.rstrip("\n").split("\n") == shown


def test_the_runtime_sized_example_gets_the_order_the_readme_names(tmp_path, monkeypatch):
    said = re.search(r"`swzc suggest examples/decoded_gemm\.cu` gives `([^`]+)`, [^.]*?from\s+the smallest, ([\d,]+), up, "
                     r"so it carries no gate", README)
    assert said is not None
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["suggest", "examples/decoded_gemm.cu"])
    assert f": kernel gemm_decoded: {said.group(1)} predicted L2 hits " in result.stdout
    assert "(at n = 8192, the largest size swept); apply" in result.stdout  # no gate: no size keeps the kernel's order
    analysed = CliRunner().invoke(main, ["analyze", "examples/decoded_gemm.cu"]).stdout
    first = re.search(r"sizes \(n\), predicted, not measured:\n.*\n\s+(\d+)\s", analysed)
    assert first is not None and int(first.group(1)) == int(said.group(2).replace(",", ""))


@pytest.mark.parametrize("body", [b for lang, b in BLOCKS if lang == "toml"])
def test_each_configuration_the_readme_shows_is_read(tmp_path, monkeypatch, body):
    table = tomllib.loads(body)  # valid TOML
    if "kernel" in table:  # a launch spec (--launch-spec): each kernel's table, as the harness reads it
        (tmp_path / "launch.toml").write_text(body)
        assert all(load_spec(str(tmp_path / "launch.toml"), name) == entry for name, entry in table["kernel"].items())
    elif "tool" in table:  # a project's pyproject.toml: read as swzc reads it, every key one a project may set
        (tmp_path / "pyproject.toml").write_text(body)
        assert config.load(tmp_path / "pyproject.toml")
    else:  # the user's file: every key one swzc takes there
        home = tmp_path / "config"
        (home / "swzc").mkdir(parents=True)
        (home / "swzc" / "config.toml").write_text(body)
        (home / "swzc" / "config.toml").chmod(0o600)
        monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
        assert config.load_user()
