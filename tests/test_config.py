"""[tool.swzc] in a project's pyproject.toml, and the options every command shares (-q, -v, --help)."""

import json

import pytest
from click.testing import CliRunner
from llm_server import ReplyJson, serve, valid_reply
from support import NAIVE_GEMM

from swzc.cli import main

GEMM = NAIVE_GEMM.replace("#define TILE 16\n", '#include "sizes.h"\n')  # its tile size from a header
assert GEMM != NAIVE_GEMM


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()  # the search for pyproject.toml stops at the work tree's root
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "sizes.h").write_text("#define TILE 16\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "g.cu").write_text(GEMM)
    monkeypatch.chdir(tmp_path / "src")
    return tmp_path


def configure(project, text):
    (project / "pyproject.toml").write_text("[tool.swzc]\n" + text)


def rewrite(*args):
    return CliRunner().invoke(main, [*args[:-1], "rewrite", "g.cu", "--no-compile", "--json"] if args and args[-1] == "-" else
                              ["rewrite", "g.cu", "--no-compile", "--json", *args])


def test_the_project_s_settings_are_defaults_and_the_command_line_overrides_them(project):
    configure(project, 'hw = "mi300x"\ninclude-dir = ["include"]\n')
    result = rewrite()
    doc = json.loads(result.stdout)
    assert result.exit_code in (0, 1), result.output
    assert doc["hw"] == "mi300x" and doc["kernels"][0]["candidates"]  # ranked: TILE was found through the setting
    assert json.loads(rewrite("--hw", "h200").stdout)["hw"] == "h200"


def test_without_the_setting_the_header_is_not_found(project):
    doc = json.loads(rewrite().stdout)
    assert doc["hw"] == "h200" and doc["kernels"][0]["status"] == "unranked" and not doc["kernels"][0]["candidates"]


@pytest.mark.parametrize("key", ["bench = true", 'bench-cmd = "./run"', 'output = "x.cu"', 'llm_replay = "t.json"'])
def test_a_project_cannot_ask_to_run_code_or_where_output_goes(project, key):
    configure(project, key + "\n")
    result = rewrite()
    assert result.exit_code == 2 and "only the command line may ask for it" in result.output


def test_an_unknown_key_or_a_bad_file_is_bad_input(project):
    configure(project, "colour = 3\n")
    assert rewrite().exit_code == 2 and "colour: unknown" in rewrite().output
    configure(project, "hw = \n")
    result = rewrite()
    assert result.exit_code == 2 and "pyproject.toml: [tool.swzc]" in result.output and "Traceback" not in result.output


def test_a_server_named_by_the_project_does_not_get_the_user_s_key(project, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-user-secret-0123456789")
    body = "const unsigned c = grid.x - 1u - block.x;\nreturn make_uint3(c, block.y, 0u);"
    with serve([ReplyJson(valid_reply(body=body)), ReplyJson(valid_reply(body=body))]) as server:
        configure(project, f'include-dir = ["include"]\nproposer = "llm"\nmodel = "m"\nbase-url = "{server.base_url}"\n'
                           "max-iterations = 1\n")
        from_file = rewrite()
        from_user = rewrite("--base-url", server.base_url)
    assert from_file.exit_code in (0, 1) and from_user.exit_code in (0, 1), (from_file.output, from_user.output)
    first, second = server.requests
    assert first.headers["authorization"] == "Bearer unused"
    assert second.headers["authorization"] == "Bearer sk-user-secret-0123456789"


def test_quiet_prints_nothing_but_errors_and_verbose_prints_every_candidate(project):
    configure(project, 'include-dir = ["include"]\n')
    quiet = CliRunner().invoke(main, ["-q", "rewrite", "g.cu", "--no-compile"])
    assert quiet.exit_code == 0 and quiet.output == ""
    assert CliRunner().invoke(main, ["-q", "rewrite", "missing.cu"]).output.startswith("swzc: error:")


@pytest.mark.parametrize("command", ["rewrite", "analyze", "probe", "suggest", "review", "show"])
def test_every_command_has_examples_and_the_exit_codes_in_its_help(command):
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0 and "Examples:" in result.output and "Exit codes:" in result.output
