"""[tool.swzc] in a project's pyproject.toml, the user's own config.toml, and the options every command shares
(-q, -v, --help)."""

import json
import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from llm_server import ReplyJson, serve, valid_reply
from support import NAIVE_GEMM

from swzc.pipeline import config
from swzc.core.errors import SwzcError
from swzc.commands.cli import main

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


@pytest.mark.parametrize("key", ["bench = true", 'bench-cmd = "./run"', 'bench-sizes = "1024,4096"', 'output = "x.cu"',
                                 'llm_replay = "t.json"'])
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
    configure(project, 'hw = "h1000"\n')  # a model no one has: the file that set it is named
    result = rewrite()
    assert result.exit_code == 2 and "pyproject.toml: [tool.swzc] hw: unknown hardware model 'h1000' (models: " in result.output


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
    """Every --long option of every command (those loaded on first use included)."""
    names = set()
    ctx = click.Context(main)
    for command in (main.get_command(ctx, name) for name in main.list_commands(ctx)):
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
    for args in (["-qq", "rewrite", "g.cu", "--no-compile"], ["rewrite", "-qq", "g.cu", "--no-compile"],
                 ["-q", "rewrite", "-q", "g.cu", "--no-compile"]):
        silent = CliRunner().invoke(main, args)
        assert silent.exit_code == 0 and silent.output == ""
    assert CliRunner().invoke(main, ["-qq", "rewrite", "missing.cu"]).output.startswith("swzc: error:")
    # once: each kernel's outcome, without the notes and the dry-run reminder
    quiet = CliRunner().invoke(main, ["rewrite", "-q", "g.cu", "--no-compile"]).output
    assert "rewritten with" in quiet and "dry run" not in quiet and "note:" not in quiet
    assert "proof:" not in quiet and "chosen:" not in quiet and len(quiet.splitlines()) == 2  # the file, its kernel
    assert "proof:" in CliRunner().invoke(main, ["rewrite", "g.cu", "--no-compile"]).output
    assert CliRunner().invoke(main, ["rewrite", "-q", "g.cu", "--no-compile", "--swizzle", "identity"]).output == ""  # nothing found
    assert "dry run" in CliRunner().invoke(main, ["rewrite", "g.cu", "--no-compile"]).output


@pytest.mark.parametrize("command", ["rewrite", "analyze", "probe", "suggest", "review", "show"])
def test_every_command_has_examples_and_the_exit_codes_in_its_help(command):
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0 and "Examples:" in result.output and "Exit codes:" in result.output
    # each its own: only rewrite and analyze rewrite anything
    assert ("0  rewritten" in result.output) == (command == "rewrite")
    assert ("0  some kernel would be rewritten" in result.output) == (command == "analyze")


# ---- the readers themselves, without the command line ------------------------------------------------------


def _pyproject(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "pyproject.toml"
    path.write_text(text)
    return path


def test_the_user_s_file_is_under_xdg_config_home_else_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config.user_file() == tmp_path / "xdg" / "swzc" / "config.toml"
    for unset in ("", "relative/xdg"):  # not an absolute path: ignored, as the XDG specification says
        monkeypatch.setenv("XDG_CONFIG_HOME", unset)
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        assert config.user_file() == tmp_path / "home" / ".config" / "swzc" / "config.toml"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", "relative-home")
    assert config.user_file() is None
    assert config.load_user() == {}


def test_the_user_s_file_is_read_only_when_it_is_a_private_regular_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    path = tmp_path / "swzc" / "config.toml"
    assert config.load_user() == {}  # no file: no settings
    path.mkdir(parents=True)
    with pytest.raises(SwzcError, match="must be a regular file"):
        config.load_user()
    path.rmdir()
    path.write_text('proposer = "llm"\nmodel = "m"\ncompile_flag = ["-ccbin=/opt/gcc/bin"]\ninclude-dir = "inc"\n')
    for mode in (0o600, 0o644, 0o400):
        path.chmod(mode)
        assert config.load_user() == {"proposer": "llm", "model": "m", "compile-flag": ["-ccbin=/opt/gcc/bin"],
                                      "include-dir": str(tmp_path / "swzc" / "inc")}
    for mode in (0o620, 0o602, 0o666):
        path.chmod(mode)
        with pytest.raises(SwzcError, match="writable by no one else"):
            config.load_user()
    path.chmod(0o600)
    if os.geteuid() == 0:
        os.chown(path, 65534, -1)
        with pytest.raises(SwzcError, match="the user's own"):
            config.load_user()
        os.chown(path, 0, -1)
    path.write_text("bench = true\n")
    with pytest.raises(SwzcError) as caught:
        config.load_user()
    assert caught.value.message.startswith(f"{path}: bench: only the command line may ask for it (keys: ")


def test_find_stops_at_the_work_tree_and_passes_files_without_the_table(tmp_path):
    outer = _pyproject(tmp_path, '[tool.swzc]\nhw = "h100"\n')
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    inner = repo / "a" / "b"
    inner.mkdir(parents=True)
    assert config.find(inner) is None  # the file above the work tree's root is someone else's
    found = _pyproject(repo, '[tool.swzc]\nhw = "mi300x"\n')
    _pyproject(repo / "a", '[project]\nname = "swzc-user"\n[tool.other]\nx = 1\n')  # names swzc, has no table
    assert config.find(inner) == found and config.find(repo) == found
    assert config.find(tmp_path) == outer


def test_find_reads_the_table_however_spelled_and_files_up_to_the_size_limit(tmp_path):
    (tmp_path / ".git").mkdir()
    padding = "# " + "x" * 76 + "\n"
    path = _pyproject(tmp_path, padding * 40 + '[tool]\nswzc = {hw = "h100"}\n')  # 3 KB: read
    assert config.find(tmp_path) == path and config.load(path) == {"hw": "h100"}
    path.write_text(padding * (config.MAX_BYTES // len(padding)) + '[tool.swzc]\nhw = "h100"\n')  # past 1 MiB: not read
    assert path.stat().st_size <= 2 * config.MAX_BYTES and config.find(tmp_path) is None


def test_a_file_that_is_not_toml_or_not_utf_8_is_bad_input(tmp_path):
    (tmp_path / ".git").mkdir()
    path = tmp_path / "pyproject.toml"
    path.write_bytes(b'[tool.swzc]\nhw = "\xff"\n')
    with pytest.raises(SwzcError, match="pyproject.toml: 'utf-8' codec"):
        config.find(tmp_path)
    path.write_bytes(b"[tool.swzc]\nhw = \n")
    with pytest.raises(SwzcError, match="pyproject.toml: Invalid value"):
        config.load(path)


@pytest.mark.parametrize("text", ['tool = 3\nswzc = 1\n', '[tool]\nswzc = 3\n', '[tool]\nswzc = ["hw"]\n'])
def test_a_tool_swzc_that_is_not_a_table_is_bad_input(tmp_path, text):
    path = _pyproject(tmp_path, text)
    with pytest.raises(SwzcError, match=r"\[tool.swzc\] must be a table"):
        config.load(path)


def test_a_project_s_keys_are_spelled_with_either_dash_and_its_paths_are_its_own(tmp_path):
    path = _pyproject(tmp_path / "p", '[tool.swzc]\ninclude_dir = ["inc", "/abs"]\nbuild-path = "build"\n'
                                      'launch_spec = "l.json"\ncompile-flag = "-O3"\ndefine = ["N=4"]\n')
    assert config.load(path) == {"include-dir": [str(tmp_path / "p" / "inc"), "/abs"], "build-path": str(tmp_path / "p" / "build"),
                                 "launch-spec": str(tmp_path / "p" / "l.json"), "compile-flag": "-O3", "define": ["N=4"]}
    assert config.load(_pyproject(tmp_path / "q", "[other]\nx = 1\n")) == {}


@pytest.mark.parametrize("key, why", [("bench_cmd", "only the command line may ask for it"),
                                      ("proposer", "a project may set only facts about its code"),
                                      ("colour", "unknown")])
def test_a_refused_key_names_the_file_the_table_and_the_reason(tmp_path, monkeypatch, key, why):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    path = _pyproject(tmp_path, f'[tool.swzc]\n{key} = "x"\n')
    with pytest.raises(SwzcError) as caught:
        config.load(path)
    message = caught.value.message
    assert message.startswith(f"{path}: [tool.swzc] {key}: {why}"), message
    assert message.endswith(" (keys: block, build-path, compile-flag, define, grid, hw, include-dir, launch-spec, set)")
    assert (str(tmp_path / "xdg" / "swzc" / "config.toml") in message) == (key == "proposer")


@pytest.mark.parametrize("value", ["1", "[1]", '["-O3", 2]', '[["-O3"]]', "true"])
def test_a_compile_flag_that_is_not_text_is_refused_without_a_traceback(tmp_path, value):
    path = _pyproject(tmp_path, f"[tool.swzc]\ncompile-flag = {value}\n")
    with pytest.raises(SwzcError, match="a project may give only flags|expected a string, a number"):
        config.load(path)


def test_settings_become_the_defaults_of_the_options_that_have_those_names():
    rewrite_command, analyze = main.commands["rewrite"], main.commands["analyze"]
    settings = {"hw": "mi300x", "define": "N=4", "include-dir": ["/a", "/b"], "compile-flag": ["-O3"], "no-such": 1}
    found = config.default_map([rewrite_command, analyze], settings)
    assert found["rewrite"]["hw_name"] == "mi300x" and found["rewrite"]["defines"] == ["N=4"]  # a multiple option gets a list
    assert found["rewrite"]["include_dirs"] == ["/a", "/b"] and found["rewrite"]["compile_flags"] == ["-O3"]
    assert not any("no-such" in m or "no_such" in m for m in found.values())
    assert config.default_map([rewrite_command], {}) == {}
    assert set(config.default_map([rewrite_command, main.commands["probe"]], {"include-dir": ["/a"]})) == {"rewrite"}


@pytest.mark.parametrize("text", [
    '[tool.swzc]\ninclude-dir = [["a"]]\n', "[tool.swzc]\ngrid = {a = 1}\n", "tool = 5  # swzc\n", "[tool]\nswzc = 5\n",
    "[tool.swzc]\ninclude-dir = " + "[" * 5000 + "]" * 5000 + "\n", "x = " + "{a = " * 3000 + "1" + "}" * 3000 + "  # swzc\n",
])
def test_a_malformed_table_is_a_clear_error_never_an_internal_one(project, text):
    (project / "pyproject.toml").write_text(text)
    result = rewrite()
    assert result.exit_code in (0, 1, 2) and "internal error" not in result.output and "Traceback" not in result.output
    assert result.exit_code == 2 or "swzc = 5" in text or "tool = 5" in text, result.output


def test_a_malformed_user_file_is_a_clear_error(project):
    _user_config(project, "include-dir = " + "[" * 5000 + "]" * 5000 + "\n")
    result = rewrite()
    assert result.exit_code == 2 and "nested too deeply" in result.output


def test_a_project_file_past_one_mebibyte_is_not_read(tmp_path):
    """The limit is 1 MiB, as the README says: a file of 1.5 MiB with a [tool.swzc] table is not read."""
    (tmp_path / ".git").mkdir()
    path = tmp_path / "pyproject.toml"
    path.write_text("# padding\n" * (1536 * 1024 // 10) + '[tool.swzc]\nhw = "h100"\n')
    assert config.find(tmp_path) is None
    path.write_text("# padding\n" * (900 * 1024 // 10) + '[tool.swzc]\nhw = "h100"\n')
    assert config.find(tmp_path) == path


def test_a_list_that_holds_anything_but_strings_and_numbers_is_bad_input(tmp_path):
    (tmp_path / ".git").mkdir()
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool.swzc]\ndefine = ["A=1", {x = 1}]\n')
    with pytest.raises(SwzcError, match="define: expected a string, a number, true/false or a list of strings"):
        config.load(path)


def test_a_broken_pyproject_that_does_not_mention_swzc_is_not_read(tmp_path):
    """Another tool's pyproject.toml, even one that is not valid TOML, is none of swzc's business."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text("[tool.other\nbroken = \n")
    assert config.find(tmp_path) is None


def test_a_key_swzc_does_not_know_is_said_to_be_unknown(tmp_path):
    (tmp_path / ".git").mkdir()
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.swzc]\nfrobnicate = 1\n")
    with pytest.raises(SwzcError, match=r"\[tool.swzc\] frobnicate: unknown \(keys: block, build-path, "):
        config.load(path)


def test_the_project_s_file_is_found_from_the_files_folder_wherever_swzc_runs(project, tmp_path_factory, monkeypatch):
    configure(project, 'hw = "mi300x"\ninclude-dir = ["include"]\n')
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    monkeypatch.chdir(elsewhere)  # no pyproject.toml here or above: the file's own project configures it
    gemm = str(project / "src" / "g.cu")
    for args in (["rewrite", gemm, "--no-compile", "--json"], ["rewrite", "--no-compile", "--json", "--", gemm],
                 ["-v", "rewrite", "--hw=mi300x", "-o", str(elsewhere / "out.cu"), gemm, "--no-compile", "--json"]):
        result = CliRunner().invoke(main, args)
        doc = json.loads(result.stdout)
        assert doc["hw"] == "mi300x" and doc["kernels"][0]["candidates"], (args, result.output)
    (elsewhere / "pyproject.toml").write_text('[tool.swzc]\nhw = "h100"\n')  # the working directory's own is not FILE's
    assert json.loads(CliRunner().invoke(main, ["rewrite", gemm, "--no-compile", "--json"]).stdout)["hw"] == "mi300x"


def test_each_file_is_configured_by_its_own_project_and_files_configured_apart_are_refused(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    for sub in ("a", "b", "c", "a/x"):
        (repo / sub).mkdir(exist_ok=True)
    inner = _pyproject(repo / "a", '[tool.swzc]\nhw = "h100"\n')
    top = _pyproject(repo, '[tool.swzc]\nhw = "mi300x"\n')
    monkeypatch.chdir(repo / "b")
    assert config.find_for([str(repo / "a" / "x" / "k.cu")]) == inner
    assert config.find_for([str(repo / "a" / "k.cu"), str(repo / "a" / "x"), str(repo / "a")]) == inner
    assert config.find_for(["k.cu", "../c/k.cu", str(repo / "a" / "gone" / "k.cu")[:0] or "../c"]) == top
    assert config.find_for([]) == config.find_for(["-"]) == top  # none named: the working directory's
    with pytest.raises(SwzcError, match=r"configured apart .*a/pyproject.toml, .*repo/pyproject.toml.*: run swzc once"):
        config.find_for([str(repo / "a" / "k.cu"), "k.cu"])


def test_a_search_never_leaves_the_work_trees_and_outside_them_takes_only_a_private_file(tmp_path, monkeypatch):
    for name in ("r1", "r2"):
        (tmp_path / name / ".git").mkdir(parents=True)
    shared = _pyproject(tmp_path, '[tool.swzc]\nhw = "h100"\n')  # above both work trees: someone else's
    assert config.find_for([str(tmp_path / "r1" / "a.cu"), str(tmp_path / "r2" / "b.cu")]) is None
    loose = tmp_path / "loose"
    loose.mkdir()
    os.chmod(shared, 0o664)  # outside any work tree and writable by the group: refused, not read
    with pytest.raises(SwzcError, match=r"outside any git work tree must be the user's own and writable by no one else"):
        config.find_for([str(loose / "k.cu")])
    os.chmod(shared, 0o644)
    assert config.find_for([str(loose / "k.cu")]) == shared
    (loose / "loop").symlink_to(loose / "loop")  # a link to itself: no traceback
    assert config.find_for([str(loose / "loop" / "k.cu")]) == shared
    planted = tmp_path / ".git"  # a .git someone else left in a shared folder makes no work tree
    planted.write_text("")
    os.chown(planted, 65534, 65534) if os.geteuid() == 0 else None
    if os.geteuid() == 0:
        os.chmod(shared, 0o666)
        with pytest.raises(SwzcError, match="outside any git work tree"):
            config.find_for([str(loose / "k.cu")])
        os.chmod(shared, 0o644)
    planted.unlink()
    mine = tmp_path / "mine.toml"
    shared.rename(mine)
    shared.symlink_to(mine)  # a link to the user's own file: the link is what the folder's owner controls
    with pytest.raises(SwzcError, match="outside any git work tree"):
        config.find_for([str(loose / "k.cu")])


def test_the_files_are_read_from_the_command_line_without_running_any_option_s_callback(project, monkeypatch):
    ran = []
    import swzc.commands.cli as cli

    monkeypatch.setattr(cli.config, "find_for", lambda paths: ran.append(list(paths)))
    CliRunner().invoke(main, ["-q", "rewrite", "--set", "N=4", "-o", "out.cu", "g.cu", "--no-compile"])
    CliRunner().invoke(main, ["rewrite", "a.cu", "--bogus", "-o", "b.cu"])  # click refuses it later: nothing named here
    CliRunner().invoke(main, ["probe", "--help"])
    assert ran == [["g.cu"], [], []]


def test_suggest_and_review_read_each_file_with_its_own_projects_settings(tmp_path, monkeypatch):
    """A repository of two projects, each with its own [tool.swzc] (a pre-commit hook is given files of both):
    suggest and review read each FILE as its project says, where the command line leaves an option open."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    _pyproject(repo / "a", '[tool.swzc]\nhw = "h100"\ninclude-dir = ["inc"]\n')
    _pyproject(repo / "b", '[tool.swzc]\nhw = "mi300x"\n')
    (repo / "a" / "inc").mkdir()
    (repo / "a" / "inc" / "sizes.h").write_text("#define TILE 16\n")
    (repo / "a" / "g.cu").write_text(GEMM)  # its tile from a header only a's include folder holds
    (repo / "b" / "g.cu").write_text(NAIVE_GEMM)
    monkeypatch.chdir(repo)
    for named in (["a/g.cu", "b/g.cu"], ["."]):
        result = CliRunner().invoke(main, ["suggest", "--json", *named])
        assert result.exit_code == 1, result.output
        files = {f["file"].removeprefix("./"): f for f in json.loads(result.stdout)["files"]}
        assert (files["a/g.cu"]["hw"], files["b/g.cu"]["hw"]) == ("h100", "mi300x")
        suggested = files["a/g.cu"]["kernels"][0]["suggestion"]
        assert suggested and "--hw" not in suggested["apply"] and "-I" not in suggested["apply"]  # rewrite reads a's too
    typed = json.loads(CliRunner().invoke(main, ["suggest", "--json", "--hw", "a100", "a/g.cu", "b/g.cu"]).stdout)
    assert [f["hw"] for f in typed["files"]] == ["a100", "a100"] and typed["hw"] == "a100"
    review = CliRunner().invoke(main, ["review", "--format", "sarif", "a/g.cu", "b/g.cu"])
    assert review.exit_code == 1, review.output
    # a's kernel, read for its h100; b's is declined on the mi300x its project names (99 % of its reads hit already)
    assert [(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], r["properties"]["hw"])
            for r in json.loads(review.stdout)["runs"][0]["results"]] == [("a/g.cu", "h100")]
    # a command on one FILE reads that file's project, as before; one given files of both still refuses them
    assert json.loads(CliRunner().invoke(main, ["analyze", "b/g.cu", "--no-compile", "--json"]).stdout)["hw"] == "mi300x"
    assert "configured apart" in CliRunner().invoke(main, ["tune", "a/g.cu", "b/g.cu"]).stderr


@pytest.mark.parametrize("args", [["rewrite", "g.cu", "-o", "o.cu", "--json"], ["suggest", "--json", "g.cu"],
                                  ["--json", "analyze", "g.cu"]])
def test_a_bad_project_file_under_json_is_a_json_document_too(tmp_path, monkeypatch, args):
    (tmp_path / ".git").mkdir()
    _pyproject(tmp_path, '[tool.swzc]\nbogus = 1\n')
    (tmp_path / "g.cu").write_text(NAIVE_GEMM)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, args)
    doc = json.loads(result.stdout)
    assert result.exit_code == 2 and doc["exit_code"] == 2 and "bogus: unknown" in doc["error"]
    assert "bogus: unknown" in result.stderr


@pytest.mark.parametrize("setting", ['proposer = "llm"', 'compile-flag = ["-Xcompiler=-fplugin=x.so"]', 'jobs = 64'])
def test_a_sub_projects_file_read_for_its_own_files_may_still_set_only_facts(tmp_path, monkeypatch, setting):
    """suggest and review read each FILE's own project file: a sub-project's is held to what any project file may set."""
    (tmp_path / ".git").mkdir()
    _pyproject(tmp_path / "a", '[tool.swzc]\nhw = "h100"\n')
    _pyproject(tmp_path / "b", f"[tool.swzc]\n{setting}\n")
    for sub in ("a", "b"):
        (tmp_path / sub / "g.cu").write_text(NAIVE_GEMM)
    monkeypatch.chdir(tmp_path)
    for command in (["suggest"], ["review", "--format", "sarif"]):
        result = CliRunner().invoke(main, [*command, "a/g.cu", "b/g.cu"])
        assert result.exit_code == 2 and "b/pyproject.toml: [tool.swzc]" in result.stderr and not result.stdout
