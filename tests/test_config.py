"""[tool.swzc] in a project's pyproject.toml, the user's own config.toml, and the options every command shares
(-q, -v, --help)."""

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from llm_server import ReplyJson, serve, valid_reply
from support import NAIVE_GEMM

from swzc import config
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
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "user-config"))  # the user's own file, where a test writes one
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
    assert result.exit_code == 2 and "pyproject.toml: Invalid value (at line 2" in result.output and "Traceback" not in result.output


def test_a_project_cannot_choose_the_llm_and_the_user_s_own_file_can(project, monkeypatch):
    """A checkout's [tool.swzc] naming a proposer, a server or a model is refused before anything is asked;
    the same keys in the user's own file are the user's choice, and the user's key goes with them."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-user-secret-0123456789")
    body = "const unsigned c = grid.x - 1u - block.x;\nreturn make_uint3(c, block.y, 0u);"
    with serve([ReplyJson(valid_reply(body=body))]) as server:
        llm = f'proposer = "llm"\nmodel = "m"\nbase-url = "{server.base_url}"\nmax-iterations = 1\n'
        configure(project, 'include-dir = ["include"]\n' + llm)
        from_project = rewrite()
        assert from_project.exit_code == 2 and "a project may set only facts about its code" in from_project.output
        assert not server.requests
        configure(project, 'include-dir = ["include"]\n')
        _user_config(project, llm)
        from_user = rewrite()
    assert from_user.exit_code in (0, 1), from_user.output
    (request,) = server.requests
    assert request.headers["authorization"] == "Bearer sk-user-secret-0123456789"
    assert any(tried["proposer"] == "llm" for tried in json.loads(from_user.stdout)["searches"][0]["history"])


def _user_config(project, text: str, mode: int = 0o600) -> Path:
    path = project / "user-config" / "swzc" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def _long_options() -> set[str]:
    """Every --long option of every command."""
    names = set()
    for command in main.commands.values():
        for param in command.params:
            names |= {opt[2:] for opt in getattr(param, "opts", ()) + getattr(param, "secondary_opts", ()) if opt.startswith("--")}
    return names


def test_the_project_s_keys_are_facts_about_its_code():
    assert config.PROJECT_KEYS == {"hw", "set", "include-dir", "define", "build-path", "grid", "block", "launch-spec",
                                   "compile-flag"}
    assert config.PROJECT_KEYS <= config.USER_KEYS and not config.USER_KEYS & config.COMMAND_LINE_ONLY


def test_every_other_option_is_refused_from_a_project(project):
    """The whole allow-list, from the commands themselves: every option not a fact is refused, exit 2, and
    nothing runs (the refusal comes before the command)."""
    refused = sorted(_long_options() - config.PROJECT_KEYS)
    assert {"proposer", "model", "base-url", "compile-flag"} - config.PROJECT_KEYS <= set(refused) | {"compile-flag"}
    for name in refused:
        for spelled in {name, name.replace("-", "_")}:
            configure(project, f'{spelled} = "x"\n')
            result = rewrite()
            assert result.exit_code == 2 and f"{spelled}:" in result.output and "Traceback" not in result.output, name
            assert "only the command line" in result.output or "facts about its code" in result.output or "unknown" in result.output


def test_every_option_of_the_user_s_file_is_a_real_option():
    assert config.USER_KEYS <= _long_options() and config.COMMAND_LINE_ONLY <= _long_options()


ALLOWED_FLAGS = ["-Iinclude", "-I/opt/lib/include", "-DN=4096", "-DFAST", "-DSIZE=(1+2)*3", "-UDEBUG", "-std=c++17",
                 "--std=c++20", "-std=gnu++17", "-O3", "-lineinfo", "-w", "--use_fast_math", "--expt-relaxed-constexpr",
                 "--extended-lambda", "--expt-extended-lambda", "-rdc=true", "--relocatable-device-code=false",
                 "-arch=sm_90", "--gpu-architecture=compute_90a", "-gencode=arch=compute_90,code=sm_90",
                 "--offload-arch=gfx942", "-Wno-deprecated-gpu-targets"]
REFUSED_FLAGS = ["-ccbin=/tmp/evil", "-ccbin", "--compiler-bindir=/tmp/evil", "-Xcompiler=-fplugin=/tmp/p.so", "-Xcompiler",
                 "-fplugin=/tmp/p.so", "@flags.rsp", "--options-file=f", "-optf", "-include", "-include=evil.h", "-B/tmp/evil",
                 "-Xlinker", "--linker-options=-rpath", "-Xptxas", "-Xnvlink", "-o", "-I$(touch x)", "-I-", "-D X",
                 '-DX="a"', "-DX=$(id)", "-DX=`id`", "-D'X=1'", "-I/x -ccbin /y", "-I\nx", "--dryrun", "-run",
                 "--run-args", "-Xarchive", "--keep-dir=/tmp", "-save-temps", "-MF/tmp/x", "-E", "-time=/tmp/t"]


def test_the_whole_compile_flag_allow_list(project):
    for pattern in config.PROJECT_COMPILE_FLAGS:  # each form has an example here, so each is tested
        assert any(pattern.fullmatch(flag) for flag in ALLOWED_FLAGS), pattern.pattern
    for flag in ALLOWED_FLAGS:
        configure(project, f"compile-flag = [{json.dumps(flag)}]\n")
        assert rewrite().exit_code in (0, 1), flag
    for flag in REFUSED_FLAGS:
        configure(project, f"compile-flag = [{json.dumps(flag)}]\n")
        result = rewrite()
        assert result.exit_code == 2 and "a project may give only flags" in result.output, flag


def test_the_user_s_file_must_be_the_user_s_own(project):
    path = _user_config(project, 'hw = "mi300x"\n')
    assert json.loads(rewrite().stdout)["hw"] == "mi300x"
    path.chmod(0o620)
    result = rewrite()
    assert result.exit_code == 2 and "writable by no one else" in result.output
    path.chmod(0o600)
    if os.geteuid() == 0:
        os.chown(path, 65534, -1)
        assert rewrite().exit_code == 2
        os.chown(path, 0, -1)
    _user_config(project, "bench = true\n")
    assert "only the command line may ask for it" in rewrite().output


@pytest.mark.parametrize("spelled", ["[tool.swzc]\n", "[ tool.swzc ]\n", "[tool]\nswzc = {hw = \"mi300x\"}\n"])
def test_the_project_s_table_is_read_however_toml_spells_it(project, spelled):
    (project / "pyproject.toml").write_text(spelled + ('hw = "mi300x"\n' if "{" not in spelled else ""))
    assert json.loads(rewrite().stdout)["hw"] == "mi300x"


def test_quiet_prints_nothing_but_errors_and_verbose_prints_every_candidate(project):
    configure(project, 'include-dir = ["include"]\n')
    quiet = CliRunner().invoke(main, ["-q", "rewrite", "g.cu", "--no-compile"])
    assert quiet.exit_code == 0 and quiet.output == ""
    assert CliRunner().invoke(main, ["-q", "rewrite", "missing.cu"]).output.startswith("swzc: error:")


@pytest.mark.parametrize("command", ["rewrite", "analyze", "probe", "suggest", "review", "show"])
def test_every_command_has_examples_and_the_exit_codes_in_its_help(command):
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0 and "Examples:" in result.output and "Exit codes:" in result.output
