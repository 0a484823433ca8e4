"""The LLM proposer end to end: `swzc rewrite --proposer llm|both` against a real chat-completions server on
the loopback interface (tests/llm_server.py), so the official SDK, the safe subset, the prover, the L2
model and the splice all run for real.  Only the replies are scripted."""

import json
import time

import pytest
from click.testing import CliRunner
from llm_server import Hang, ReplyJson, Status, serve, valid_reply
from support import GROUPED_8_BODY, NAIVE_GEMM, needs_nvcc

from swzc.formulas import prove as prove_module
from swzc.commands.cli import main
from swzc.search.llm.client import load_transcript

KEY = "sk-test-5f1d0c9e-not-a-real-key"

GEMM = NAIVE_GEMM

GROUPED = GROUPED_8_BODY

NO_CLAMP = GROUPED.replace("8u", "3u").replace("min(grid.y - first_row, G)", "G")

UNSAFE = {
    "asm": 'unsigned sm;\nasm volatile("mov.u32 %0, %%smid;" : "=r"(sm));\nreturn make_uint3(sm % grid.x, block.y, 0u);',
    "include": "#include <cstdlib>\nreturn block;",
    "unbounded loop": "unsigned x = block.x;\nwhile (x < grid.x) { x += 1u; }\nreturn make_uint3(x % grid.x, block.y, 0u);",
    "pointer": "*(unsigned*)0 = 1u;\nreturn block;",
    "printf": 'printf("%u", block.x);\nreturn block;',
}


@pytest.fixture
def gemm(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    (tmp_path / "g.cu").write_text(GEMM)
    return tmp_path


@pytest.fixture
def compiled(monkeypatch):
    """Every host program the prover compiles, as text."""
    programs = []
    original = prove_module._compile_prover

    def recording(program, compiler, key):
        programs.append(program)
        return original(program, compiler, key)

    monkeypatch.setattr(prove_module, "_compile_prover", recording)
    monkeypatch.setattr(prove_module.build_prover, "__wrapped__", prove_module.build_prover.__wrapped__)
    prove_module.build_prover.cache_clear()
    return programs


def rewrite(server_url, *args):
    return CliRunner().invoke(main, ["rewrite", "g.cu", "--proposer", "llm", "--model", "test-model", "--base-url", server_url,
                                     "--llm-timeout", "5", "--llm-retries", "0", *args])


def user_prompt(request):
    return next(m["content"] for m in request.body["messages"] if m["role"] == "user")


def test_a_body_that_is_not_a_permutation_is_rejected_and_the_next_request_carries_the_counterexample(gemm):
    with serve([ReplyJson(valid_reply(name="no-clamp", body=NO_CLAMP)), ReplyJson(valid_reply(body=GROUPED))]) as server:
        result = rewrite(server.base_url, "--max-iterations", "2", "--no-compile", "-o", "out.cu", "--json")
    assert result.exit_code == 0, result.output
    first, second = server.requests
    assert first.body["response_format"]["type"] == "json_schema" and first.body["response_format"]["json_schema"]["strict"] is True
    assert "Earlier attempts" in user_prompt(first) and "none yet" in user_prompt(first)
    assert "8 blocks per compute unit run at once (1,056 on the GPU; bound by threads; default:" in user_prompt(first)
    assert "not a permutation: grid 256x256x1: block (" in user_prompt(second) and "const unsigned G = 3u;" in user_prompt(second)
    doc = json.loads(result.stdout)
    (kernel,) = doc["kernels"]
    assert kernel["status"] == "rewritten" and kernel["swizzle"].startswith("custom:grouped-8#")
    assert kernel["chosen_by"].startswith("the LLM's custom:grouped-8#")
    history = doc["searches"][0]["history"]
    assert [(t["proposer"], t["status"]) for t in history] == [("llm", "rejected"), ("llm", "predicted")]
    patched = (gemm / "out.cu").read_text()
    assert "swzc_custom_" in patched and "const unsigned swzc_v_G = 8u;" in patched and "blockIdx.y" in patched


@pytest.mark.parametrize("what", sorted(UNSAFE))
def test_an_unsafe_body_never_reaches_a_compiler(gemm, compiled, what):
    with serve([ReplyJson(valid_reply(name="unsafe", body=UNSAFE[what]))]) as server:
        result = rewrite(server.base_url, "--max-iterations", "1", "--no-compile", "--json")
    assert result.exit_code == 1, result.output  # declined: nothing proven beat identity
    (tried,) = json.loads(result.stdout)["searches"][0]["history"]
    assert tried["status"] == "rejected" and tried["detail"].startswith("outside the safe subset: line ")
    assert not any(UNSAFE[what].splitlines()[0] in program for program in compiled)
    assert "no LLM candidate beats identity" in json.loads(result.stdout)["kernels"][0]["reason"]


def test_server_errors_end_the_run_with_exit_2_and_no_output_file(gemm):
    with serve([Status(500, "overloaded")] * 3) as server:
        result = rewrite(server.base_url, "--llm-retries", "2", "-o", "out.cu", "--no-compile")
    assert result.exit_code == 2 and len(server.requests) == 3
    assert "500" in result.output and server.base_url.split("/v1")[0] in result.output and "Traceback" not in result.output
    assert not (gemm / "out.cu").exists() and KEY not in result.output


def test_a_hung_server_ends_within_the_timeout(gemm):
    with serve([Hang(8.0)]) as server:
        start = time.monotonic()
        result = rewrite(server.base_url, "--llm-timeout", "0.5", "-o", "out.cu", "--no-compile")
        elapsed = time.monotonic() - start
    assert result.exit_code == 2 and elapsed < 6, (elapsed, result.output)
    assert not (gemm / "out.cu").exists()


def test_under_both_a_failed_llm_leaves_the_built_in_choice(gemm):
    with serve([Status(500, "overloaded")]) as server:
        result = CliRunner().invoke(main, ["rewrite", "g.cu", "--proposer", "both", "--model", "m", "--base-url", server.base_url,
                                           "--llm-retries", "0", "--no-compile", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    kernel = doc["kernels"][0]
    assert kernel["status"] == "rewritten" and not kernel["swizzle"].startswith("custom:")
    # and it says so: in the JSON (a field of its own, and a note), on stderr, and as a note in the summary
    assert "500" in doc["llm_failure"]
    assert any(n.startswith("the LLM was not used: a request failed (") and "500" in n for n in doc["notes"])
    for quiet in ([], ["-q"]):
        with serve([Status(500, "overloaded")]) as server:
            text = CliRunner().invoke(main, ["rewrite", "g.cu", "--proposer", "both", "--model", "m", "--base-url",
                                             server.base_url, "--llm-retries", "0", "--no-compile", *quiet])
        assert text.stderr.startswith("swzc: note: the LLM was not used: a request failed (")
        assert ("  note: the LLM was not used" in text.stdout) == (not quiet)
    # the file to stdout: the summary, note included, goes to stderr, and the note is not said twice there
    with serve([Status(500, "overloaded")]) as server:
        piped = CliRunner().invoke(main, ["rewrite", "g.cu", "--proposer", "both", "--model", "m", "--base-url",
                                          server.base_url, "--llm-retries", "0", "--no-compile", "-o", "-"])
    assert piped.stderr.count("the LLM was not used") == 1 and "__global__" in piped.stdout


def test_under_llm_a_pick_the_family_beats_says_so(gemm):
    # grouped:8 from the LLM is chosen under --proposer llm, and the family's best is predicted higher
    with serve([ReplyJson(valid_reply(body=GROUPED))]) as server:
        result = rewrite(server.base_url, "--max-iterations", "1", "--no-compile", "--json")
    kernel = json.loads(result.stdout)["kernels"][0]
    assert kernel["status"] == "rewritten" and kernel["swizzle"].startswith("custom:grouped-8#")
    assert "the built-in family's best, serpentine:64, is predicted higher, at 98.2 %" in kernel["chosen_by"]


def test_under_both_the_llm_must_beat_the_family_s_best(gemm):
    # the LLM's order equals grouped:8, which the family ranks below its best: the built-in choice stays
    with serve([ReplyJson(valid_reply(body=GROUPED))]) as server:
        result = CliRunner().invoke(main, ["rewrite", "g.cu", "--proposer", "both", "--model", "m", "--base-url", server.base_url,
                                           "--max-iterations", "1", "--no-compile", "--json"])
    doc = json.loads(result.stdout)
    assert result.exit_code == 0 and not doc["kernels"][0]["swizzle"].startswith("custom:")
    assert "grouped:" in user_prompt(server.requests[0]) and "L2 hits" in user_prompt(server.requests[0])


def test_a_transcript_replays_without_a_server_to_the_same_patch(gemm):
    with serve([ReplyJson(valid_reply(name="no-clamp", body=NO_CLAMP)), ReplyJson(valid_reply(body=GROUPED))]) as server:
        live = rewrite(server.base_url, "--max-iterations", "2", "--no-compile", "--patch", "live.patch",
                       "--llm-transcript", "t.json", "--report", "run")
    assert live.exit_code == 0, live.output
    replay = CliRunner().invoke(main, ["rewrite", "g.cu", "--proposer", "llm", "--llm-replay", "t.json", "--max-iterations", "2",
                                       "--no-compile", "--patch", "replayed.patch"])
    assert replay.exit_code == 0, replay.output
    assert (gemm / "live.patch").read_text() == (gemm / "replayed.patch").read_text() != ""
    exchanges = load_transcript(gemm / "t.json")
    assert [e.reply["name"] for e in exchanges] == ["no-clamp", "grouped-8"]
    report = json.loads((gemm / "run.json").read_text())
    recorded = report["llm"][0]["exchanges"]
    assert recorded[0]["verdict"].startswith("custom:no-clamp#") and "rejected: not a permutation" in recorded[0]["verdict"]
    assert recorded[1]["verdict"].startswith("custom:grouped-8#") and recorded[1]["prompt_tokens"] == 11
    assert all(e["seconds"] >= 0 for e in recorded) and recorded[0]["messages"][0]["role"] == "system"
    for path in ("t.json", "run.json", "run.md", "live.patch"):
        assert KEY not in (gemm / path).read_text()
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # the key is used, and only there


def test_the_llm_needs_a_model_or_a_transcript(gemm):
    result = CliRunner().invoke(main, ["rewrite", "g.cu", "--proposer", "llm"])
    assert result.exit_code == 2 and "--proposer llm needs --model" in result.output
    result = CliRunner().invoke(main, ["rewrite", "g.cu", "--model", "m"])
    assert result.exit_code == 2 and "go with --proposer llm or both" in result.output
    result = CliRunner().invoke(main, ["rewrite", "g.cu", "--proposer", "both", "--model", "m", "--swizzle", "grouped:8"])
    assert result.exit_code == 2 and "--swizzle forces the orders; it does not go with --proposer both" in result.output


@needs_nvcc
def test_a_valid_body_lands_in_a_patch_that_compiles(gemm):
    with serve([ReplyJson(valid_reply(body=GROUPED))]) as server:
        result = rewrite(server.base_url, "--max-iterations", "1", "-o", "out.cu", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["compile"]["status"] == "ok" and doc["kernels"][0]["swizzle"].startswith("custom:grouped-8#")


@needs_nvcc
def test_a_macro_named_like_a_local_of_the_body_does_not_reach_it(gemm):
    (gemm / "g.cu").write_text("#define G 3\n#define per_group 7\n#define first_row +\n" + GEMM)
    with serve([ReplyJson(valid_reply(body=GROUPED))]) as server:
        result = rewrite(server.base_url, "--max-iterations", "1", "-o", "out.cu", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["compile"]["status"] == "ok"


def test_without_a_gpu_a_body_that_gains_less_than_the_margin_is_declined(gemm):
    mirror = "return make_uint3(grid.x - 1u - block.x, block.y, 0u);"  # a permutation, but no more sharing
    with serve([ReplyJson(valid_reply(name="mirror", body=mirror))]) as server:
        result = rewrite(server.base_url, "--max-iterations", "1", "--no-compile", "--json")
    (kernel,) = json.loads(result.stdout)["kernels"]
    assert result.exit_code == 1 and kernel["status"] == "declined"
    assert kernel["reason"].startswith("no LLM candidate beats identity (62.0 %) by 5 points in the L2 model: best custom:mirror#")


def test_a_kernel_sized_at_run_time_is_not_asked_of_the_llm_and_says_so(gemm):
    """Its grid is set at run time: a body of the LLM's could be proven on no grid it runs at, and ranked at one size
    only.  Not asked: under llm the kernel is declined saying why; under both the built-in family's gated order
    is written, and the summary says why the LLM was not asked.  The server is never called."""
    from support import SIZED

    (gemm / "g.cu").write_bytes(SIZED)
    with serve([ReplyJson(valid_reply(body=GROUPED))]) as server:
        alone = json.loads(rewrite(server.base_url, "--no-compile", "--json", "-o", "a.cu").stdout)
        both = CliRunner().invoke(main, ["rewrite", "g.cu", "--proposer", "both", "--model", "m", "--base-url", server.base_url,
                                         "--llm-retries", "0", "--no-compile", "-o", "b.cu"])
        assert not server.requests
    kernel = alone["kernels"][0]
    assert kernel["status"] == "declined" and "the LLM was not asked: the kernel's grid is set at run time" in kernel["reason"]
    assert both.exit_code == 0 and "rewritten with serpentine:" in both.stdout and "@" in both.stdout
    assert "the LLM was not asked" in both.stdout
