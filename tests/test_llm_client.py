"""The LLM client against a real HTTP server (tests/llm_server.py) through the real openai SDK: what the
requests carry, how each kind of bad answer is retried and reported, the fallback to json_object, the time
bound against servers that trickle or never finish, the cap on a reply's size, Retry-After, transcripts and
replay, and that the API key ends up nowhere but the Authorization header."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from email.utils import formatdate
from pathlib import Path

import pytest

from llm_server import (
    Compressed,
    Delayed,
    Filtered,
    Garbage,
    Hang,
    Huge,
    LlmServer,
    RejectSchema,
    Refuse,
    Reply,
    ReplyJson,
    Status,
    Trickle,
    Truncated,
    serve,
    valid_reply,
)
import swzc.search.llm.client_transport as transport_module
from swzc.core.errors import ExitCode
from swzc.search.llm.client import (
    MAX_REPLY_BYTES,
    MAX_TRANSCRIPT_BYTES,
    ChatClient,
    Exchange,
    LlmError,
    ReplayClient,
    Settings,
    SwizzleReply,
    load_transcript,
    save_transcript,
    settings_from,
    transcript_json,
)

MESSAGES = (
    {"role": "system", "content": "You write block swizzles."},
    {"role": "user", "content": "Propose one order for a 64 x 32 tile grid."},
)
KEY = "sk-swzc-test-key-7f3a9c01d2e4b5"
SLACK_S = 0.4  # what a question may take past its bound: closing a connection, a busy test machine


@pytest.fixture(autouse=True)
def hermetic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No real key, no real server, no proxy between the client and the loopback server."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for name in ("OPENAI_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                 "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def no_threads_left() -> Iterator[None]:
    """A test's servers, and the threads that served each connection, are gone when it ends."""
    before = set(threading.enumerate())
    yield
    left = [t.name for t in threading.enumerate() if t not in before]
    assert not left, f"threads left running: {left}"


@contextmanager
def client_for(server: LlmServer, **overrides: object) -> Iterator[ChatClient]:
    fields: dict = {"model": "test-model", "base_url": server.base_url, "timeout_s": 5.0, "retries": 2,
                    "backoff_s": 0.0}
    fields.update(overrides)
    client = ChatClient(Settings(**fields))
    try:
        yield client
    finally:
        client.close()


def ask_failing(server: LlmServer, **overrides: object) -> LlmError:
    with client_for(server, **overrides) as client, pytest.raises(LlmError) as caught:
        client.ask(MESSAGES)
    return caught.value


def test_a_valid_reply_parses_and_the_request_asks_for_the_strict_schema() -> None:
    with serve([ReplyJson(valid_reply())]) as server, client_for(server) as client:
        reply, exchange = client.ask(MESSAGES)
    assert reply == SwizzleReply(**valid_reply())
    assert exchange.reply == valid_reply()
    assert json.loads(exchange.reply_text) == valid_reply()
    assert (exchange.mode, exchange.tries, exchange.error) == ("json_schema", 1, None)
    assert (exchange.prompt_tokens, exchange.completion_tokens) == (11, 7)
    assert exchange.messages == MESSAGES
    assert 0 < exchange.seconds < 5
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["model"] == "test-model"
    assert request.body["messages"] == list(MESSAGES)
    assert request.body["max_completion_tokens"] == 2000
    assert "temperature" not in request.body
    response_format = request.body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["strict"] is True
    schema = response_format["json_schema"]["schema"]
    assert set(schema["properties"]) == {"name", "expectation", "lessons", "body"}
    assert set(schema["required"]) == {"name", "expectation", "lessons", "body"}
    assert schema["additionalProperties"] is False


def test_temperature_is_sent_only_when_set() -> None:
    with serve([ReplyJson(valid_reply())]) as server, client_for(server, temperature=0.2) as client:
        client.ask(MESSAGES)
    assert server.requests[0].body["temperature"] == 0.2


def test_a_server_error_is_retried() -> None:
    with serve([Status(500, "boom"), ReplyJson(valid_reply())]) as server, client_for(server) as client:
        reply, exchange = client.ask(MESSAGES)
    assert reply.name == "grouped-8"
    assert exchange.tries == 2 and len(server.requests) == 2
    assert (exchange.prompt_tokens, exchange.completion_tokens) == (11, 7)


def test_server_errors_end_after_the_retries_with_the_status_and_the_url() -> None:
    with serve([Status(500, "boom")] * 6) as server:
        error = ask_failing(server, retries=2)
    assert len(server.requests) == 3
    assert "HTTP 500" in error.message and "boom" in error.message and server.base_url in error.message
    assert "(3 tries)" in error.message
    assert error.code == ExitCode.BAD_INPUT
    assert error.exchange is not None
    assert (error.exchange.tries, error.exchange.reply, error.exchange.error) == (3, None, error.message)


@pytest.mark.parametrize("status", [429, 503])
def test_rate_limits_and_unavailability_are_retried(status: int) -> None:
    with serve([Status(status, "later"), ReplyJson(valid_reply())]) as server, client_for(server) as client:
        _, exchange = client.ask(MESSAGES)
    assert exchange.tries == 2


def test_retries_after_a_server_error_pause_for_the_backoff() -> None:
    with serve([Status(503, "loading"), ReplyJson(valid_reply())]) as server:
        with client_for(server, backoff_s=0.3) as client:
            started = time.perf_counter()
            client.ask(MESSAGES)
    assert time.perf_counter() - started >= 0.3


def test_a_hung_server_ends_within_the_time_bound() -> None:
    with serve([Hang(3.0)] * 3) as server:
        started = time.perf_counter()
        error = ask_failing(server, timeout_s=0.5, retries=1, backoff_s=5.0)
        elapsed = time.perf_counter() - started
    assert 0.9 < elapsed < 5.0  # two tries of 0.5 s; a pause would have had no spare time to come from
    assert len(server.requests) == 2
    assert "did not answer within the 0.5 s timeout (2 tries)" in error.message
    assert server.base_url in error.message


def test_a_slow_rejection_leaves_the_fallback_only_the_time_left() -> None:
    with serve([Delayed(0.7, RejectSchema()), Hang(3.0)]) as server:
        started = time.perf_counter()
        error = ask_failing(server, timeout_s=1.0, retries=0)
        elapsed = time.perf_counter() - started
    assert elapsed < 1.4  # the json_object try had 0.3 s, not a full second
    assert error.exchange is not None and error.exchange.tries == 2


def test_a_pause_after_a_server_error_never_takes_a_try_s_time() -> None:
    with serve([Status(500, "boom")] * 3) as server:
        started = time.perf_counter()
        ask_failing(server, timeout_s=0.5, retries=2, backoff_s=5.0)
        elapsed = time.perf_counter() - started
    assert len(server.requests) == 3
    assert elapsed < 2.0  # within 3 × 0.5 s: the pauses were cut to the time the quick failures left


def timed_failure(server: LlmServer, **overrides: object) -> tuple[LlmError, float]:
    started = time.monotonic()
    error = ask_failing(server, **overrides)
    return error, time.monotonic() - started


SLOW_BODIES = {
    "a byte every 0.2 s without end": Trickle(every_s=0.2),
    # An HTTP read timeout restarts at every byte: the silence after 0.7 s must be cut at 1 s, not at 1.7 s.
    "a byte every 0.1 s, then silence": Trickle(every_s=0.1, for_s=0.7),
    "headers, then nothing": Trickle(every_s=0.2, for_s=0),
}


@pytest.mark.parametrize("case", SLOW_BODIES)
def test_a_slow_body_is_cut_off_at_the_timeout(case: str) -> None:
    with serve([SLOW_BODIES[case]] * 2) as server:
        error, elapsed = timed_failure(server, timeout_s=1.0, retries=0)
    assert 0.95 <= elapsed < 1.0 + SLACK_S
    assert len(server.requests) == 1
    assert "did not finish its reply within the 1 s timeout: HTTP 200, then " in error.message
    assert "bytes of the body (1 try)" in error.message and server.base_url in error.message


def test_the_body_keeps_the_deadline_even_where_the_connection_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should httpx stop taking the network backend that bounds every read, the body's own check still holds,
    at most one read late."""
    monkeypatch.setattr(transport_module, "_DeadlineBackend", lambda backend: backend)
    with serve([Trickle(every_s=0.2)]) as server:
        error, elapsed = timed_failure(server, timeout_s=1.0, retries=0)
    assert 0.95 <= elapsed < 1.2 + SLACK_S
    assert "did not finish its reply within the 1 s timeout" in error.message


def test_every_try_of_a_trickled_reply_keeps_the_question_s_bound() -> None:
    with serve([Trickle(every_s=0.1)] * 4) as server:
        error, elapsed = timed_failure(server, timeout_s=0.5, retries=2, backoff_s=5.0)
    assert 1.45 <= elapsed < 0.5 * 3 + SLACK_S  # timeout_s × (retries + 1), the bound the docstring states
    assert len(server.requests) == 3 and "(3 tries)" in error.message


@pytest.mark.parametrize("status", [200, 500])
@pytest.mark.parametrize("declared", [False, True], ids=["chunked", "content-length"])
def test_a_huge_reply_is_refused_at_the_cap_and_never_held(declared: bool, status: int) -> None:
    with serve([Huge(300 << 20, declared, status)] * 2) as server:
        tracemalloc.start()
        try:
            error, elapsed = timed_failure(server, retries=1)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert elapsed < 2.0
    assert peak < 50 << 20, f"{peak >> 20} MB held"
    how = "refused unread: its Content-Length says 314,572,800 bytes" if declared else "refused once past it"
    assert f"sent a reply larger than {MAX_REPLY_BYTES >> 20} MiB ({how}) (2 tries)" in error.message


def test_a_reply_just_under_the_cap_is_read() -> None:
    padded = json.dumps(valid_reply())
    padded += " " * (MAX_REPLY_BYTES - len(json.dumps({"choices": [{"message": {"content": padded}}]})) - 400)
    with serve([Reply(padded)]) as server, client_for(server) as client:
        reply, _ = client.ask(MESSAGES)
    assert reply.name == "grouped-8"


def test_a_reply_is_asked_for_uncompressed_and_a_compressed_one_refused() -> None:
    with serve([Compressed(valid_reply())] * 2) as server:
        error = ask_failing(server, retries=0)
    assert server.requests[0].headers["accept-encoding"] == "identity"
    assert "sent a compressed reply (Content-Encoding: gzip), though asked for none (1 try)" in error.message


RETRY_AFTER = {
    "seconds": (("Retry-After", "1"),),
    "milliseconds": (("retry-after-ms", "400"),),
    "milliseconds first": (("retry-after-ms", "400"), ("Retry-After", "30")),
}


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize("case", RETRY_AFTER)
def test_a_retry_after_that_fits_is_waited_for(case: str, status: int) -> None:
    headers = RETRY_AFTER[case]
    wait = 1.0 if case == "seconds" else 0.4
    with serve([Status(status, "later", headers), ReplyJson(valid_reply())]) as server:
        with client_for(server, timeout_s=2.0, retries=1, backoff_s=0.0) as client:
            started = time.monotonic()
            _, exchange = client.ask(MESSAGES)
            elapsed = time.monotonic() - started
    assert exchange.tries == 2
    assert wait <= elapsed < wait + SLACK_S


def test_a_retry_after_date_is_waited_for() -> None:
    when = formatdate(time.time() + 2, usegmt=True)  # whole seconds: a wait of 1 to 2 s
    with serve([Status(503, "warming up", (("Retry-After", when),)), ReplyJson(valid_reply())]) as server:
        with client_for(server, timeout_s=3.0, retries=1) as client:
            started = time.monotonic()
            _, exchange = client.ask(MESSAGES)
            elapsed = time.monotonic() - started
    assert exchange.tries == 2
    assert 0.9 <= elapsed < 2.0 + SLACK_S


@pytest.mark.parametrize(("header", "value", "asked"), [
    ("Retry-After", "30", "30 s"),
    ("Retry-After", "an hour from now", "3"),  # an HTTP date made when the test runs: 3599.x or 3600 s, by the clock
    ("retry-after-ms", "1e999", "forever"),
], ids=["seconds", "an HTTP date", "without end"])
def test_a_retry_after_past_the_deadline_stops_the_question_and_says_so(header: str, value: str,
                                                                         asked: str) -> None:
    if value == "an hour from now":  # made now, not when the tests were collected, which may be long before
        value = formatdate(time.time() + 3600, usegmt=True)
    with serve([Status(429, "slow down", ((header, value),))] * 3) as server:
        error, elapsed = timed_failure(server, timeout_s=1.0, retries=2, backoff_s=0.0)
    assert elapsed < SLACK_S and len(server.requests) == 1
    assert f"HTTP 429: slow down; its {header}: {value} asks to wait {asked}" in error.message
    assert "left of the 3 s allowed (1 try)" in error.message


@pytest.mark.parametrize("value", ["soon", "-5", "nan"])
def test_a_retry_after_that_says_nothing_usable_is_ignored(value: str) -> None:
    with serve([Status(503, "later", (("Retry-After", value),)), ReplyJson(valid_reply())]) as server:
        with client_for(server, timeout_s=1.0, retries=1) as client:
            started = time.monotonic()
            _, exchange = client.ask(MESSAGES)
    assert exchange.tries == 2 and time.monotonic() - started < SLACK_S


def test_an_unreachable_server_is_retried_then_reported() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    client = ChatClient(Settings("test-model", f"http://127.0.0.1:{port}/v1", timeout_s=2.0, retries=1,
                                 backoff_s=0.0))
    with pytest.raises(LlmError) as caught:
        client.ask(MESSAGES)
    assert "could not be reached" in caught.value.message and "(2 tries)" in caught.value.message


BAD_REPLIES = {
    "malformed JSON": (Reply('{"name": "x", "body": '), "not JSON"),
    "truncated": (Truncated(json.dumps(valid_reply())[:30]), "cut the reply off at the token limit"),
    "refusal": (Refuse("I can't help with that."), "refused: I can't help with that."),
    "missing body": (ReplyJson({k: v for k, v in valid_reply().items() if k != "body"}), "body: Field required"),
    "extra field": (ReplyJson(valid_reply(comment="hi")), "comment: Extra inputs are not permitted"),
    "bad name": (ReplyJson(valid_reply(name="grouped 8!")), "name: Value error, must be one or more of"),
    "long body": (ReplyJson(valid_reply(body="x;" * 2001)), "body: Value error, longer than 4000"),
    "escape sequence": (ReplyJson(valid_reply(expectation="\x1b[2J clear")), "control characters"),
    "empty body": (ReplyJson(valid_reply(body="  ")), "body: Value error, is empty"),
    "wrong type": (ReplyJson(valid_reply(lessons=3)), "lessons: Input should be a valid string"),
    "empty content": (Reply(""), "sent an empty reply"),
    "filtered": (Filtered('{"name": "'), "stopped the reply with its content filter"),
    "not a JSON body": (Garbage("not json"), "not a chat completion"),
    "no choices": (Garbage('{"id": "x", "choices": []}'), "not a chat completion (no choices)"),
    "an empty choice": (Garbage('{"choices": [{}]}'), "not a chat completion (no message)"),
    "choices not a list": (Garbage('{"choices": "x"}'), "not a chat completion (no choices)"),
    "a JSON list body": (Garbage("[1, 2]"), "not a chat completion (the body is not a JSON object)"),
    "content not text": (Garbage('{"choices": [{"message": {"content": 5}}]}'), "is not text"),
}


@pytest.mark.parametrize("mode", ["json_schema", "json_object"])
@pytest.mark.parametrize("case", BAD_REPLIES)
def test_a_bad_reply_is_retried_then_reported_with_its_reason(case: str, mode: str) -> None:
    action, reason = BAD_REPLIES[case]
    rejection = [RejectSchema()] if mode == "json_object" else []
    with serve(rejection + [action] * 4) as server:
        error = ask_failing(server, retries=2)
    assert len(server.requests) == 3 + len(rejection)
    assert reason in error.message and f"({len(server.requests)} tries)" in error.message
    assert error.exchange is not None and error.exchange.reply is None and error.exchange.mode == mode


def test_a_bad_reply_followed_by_a_good_one_succeeds_and_the_text_is_recorded() -> None:
    with serve([Truncated('{"name": "gro'), ReplyJson(valid_reply())]) as server:
        with client_for(server) as client:
            _, exchange = client.ask(MESSAGES)
    assert exchange.tries == 2 and exchange.reply == valid_reply()


def test_a_failed_reply_keeps_its_raw_text() -> None:
    with serve([Reply('{"name": 1}')] * 2) as server:
        error = ask_failing(server, retries=1)
    assert error.exchange is not None and error.exchange.reply_text == '{"name": 1}'
    assert error.exchange.prompt_tokens == 22  # both tries counted


def test_a_server_without_json_schema_gets_json_object_for_the_rest_of_the_session() -> None:
    script = [RejectSchema(), ReplyJson(valid_reply()), ReplyJson(valid_reply(name="second"))]
    with serve(script) as server, client_for(server, retries=0) as client:
        reply, exchange = client.ask(MESSAGES)
        second, _ = client.ask(MESSAGES)
    assert reply.name == "grouped-8" and second.name == "second"
    assert (exchange.mode, exchange.tries) == ("json_object", 2)
    assert client.mode == "json_object"
    first, fallback, later = (r.body for r in server.requests)
    assert first["response_format"]["type"] == "json_schema"
    assert fallback["response_format"] == {"type": "json_object"}
    assert later["response_format"] == {"type": "json_object"}
    system = fallback["messages"][0]
    assert system["role"] == "system" and system["content"].startswith(MESSAGES[0]["content"])
    assert all(f'"{name}"' in system["content"] for name in ("name", "expectation", "lessons", "body"))
    assert [m["role"] for m in fallback["messages"]] == ["system", "user"]
    assert exchange.messages == tuple(fallback["messages"])


@pytest.mark.parametrize("fence", ["```json\n{}\n```", "```\n{}\n```", "  ```json\n{}```\n"])
def test_a_fenced_reply_is_accepted_in_json_object_mode(fence: str) -> None:
    content = fence.replace("{}", json.dumps(valid_reply(), indent=2))
    with serve([RejectSchema(), Reply(content)]) as server, client_for(server) as client:
        reply, exchange = client.ask(MESSAGES)
    assert reply.body == valid_reply()["body"] and exchange.reply_text == content


def test_json_object_mode_still_checks_the_shape() -> None:
    with serve([RejectSchema()] + [ReplyJson(valid_reply(extra="x"))] * 3) as server:
        error = ask_failing(server, retries=1)
    assert "extra: Extra inputs are not permitted" in error.message
    assert len(server.requests) == 3  # the rejected json_schema request costs no retry


def test_a_request_rejected_in_both_modes_is_reported_at_once() -> None:
    script = [RejectSchema(), Status(400, "prompt is longer than the context")] + [ReplyJson(valid_reply())] * 2
    with serve(script) as server, client_for(server) as client:
        with pytest.raises(LlmError) as caught:
            client.ask(MESSAGES)
    assert len(server.requests) == 2
    assert "HTTP 400: prompt is longer than the context" in caught.value.message
    assert client.mode == "json_schema"  # the server never accepted json_object: nothing learned


@pytest.mark.parametrize("status", [401, 403, 404])
def test_a_client_error_is_reported_at_once(status: int) -> None:
    with serve([Status(status, "Invalid API key or model")] * 3) as server:
        error = ask_failing(server)
    assert len(server.requests) == 1
    assert f"HTTP {status}: Invalid API key or model (1 try)" in error.message


def test_a_long_server_message_is_cut() -> None:
    with serve([Status(401, "x" * 5000)]) as server:
        error = ask_failing(server)
    assert len(error.message) < 500


def test_the_api_key_is_used_but_recorded_nowhere(tmp_path: Path) -> None:
    script = [
        Status(500, f"bad key {KEY}"),  # a server that echoes the key back
        ReplyJson(valid_reply(expectation=f"echo {KEY}")),
        Status(401, f"Incorrect API key provided: {KEY}."),
        *[Status(200, "", (("Content-Encoding", f"x-{KEY}"),))] * 3,  # and where a refusal quotes a header
    ]
    with serve(script) as server, client_for(server) as client:
        reply, good = client.ask(MESSAGES)
        with pytest.raises(LlmError) as caught:
            client.ask(MESSAGES)
        with pytest.raises(LlmError) as refused:
            client.ask(MESSAGES)
        shown = repr(client)
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in server.requests)
    bad = caught.value.exchange
    assert bad is not None
    assert KEY not in caught.value.message and "[redacted]" in caught.value.message
    assert KEY not in refused.value.message and "Content-Encoding: x-[redacted]" in refused.value.message
    assert KEY not in reply.expectation and KEY not in shown and KEY not in repr(client.settings)
    assert KEY not in repr(good) + repr(bad)
    path = tmp_path / "transcript.json"
    save_transcript(path, [good, bad, replace(good, verdict=f"kept {KEY}")])
    assert KEY not in path.read_text()


def test_a_transcript_round_trips(tmp_path: Path) -> None:
    with serve([ReplyJson(valid_reply()), Status(500, "boom")]) as server:
        with client_for(server, retries=0) as client:
            _, good = client.ask(MESSAGES)
            with pytest.raises(LlmError) as caught:
                client.ask(MESSAGES)
    assert caught.value.exchange is not None
    exchanges = [replace(good, verdict="grouped-8: faster: 1.12x"), caught.value.exchange]
    path = tmp_path / "transcript.json"
    save_transcript(path, exchanges)
    assert json.loads(path.read_text())["version"] == 1
    assert load_transcript(path) == exchanges
    assert path.read_text() == transcript_json(exchanges)
    assert [p.name for p in tmp_path.iterdir()] == ["transcript.json"]  # no temporary file left behind


def _exchange(**reply: str) -> Exchange:
    fields = valid_reply(**reply)
    return Exchange(MESSAGES, json.dumps(fields), fields, None, "json_schema", 1, 10, 5, 0.25)


def test_replay_answers_in_order_and_then_says_how_many_it_had(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    save_transcript(path, [_exchange(name="first"), _exchange(name="second")])
    replay = ReplayClient(path)
    first, exchange = replay.ask(MESSAGES)
    second, _ = replay.ask(MESSAGES)
    assert (first.name, second.name) == ("first", "second")
    assert (exchange.mode, exchange.tries, exchange.messages) == ("replay", 0, MESSAGES)
    with pytest.raises(LlmError, match=r"has only 2 replies"):
        replay.ask(MESSAGES)


def test_replay_reads_replies_written_by_hand(tmp_path: Path) -> None:
    path = tmp_path / "replies.json"
    path.write_text(json.dumps({"about": "two fixed candidates",
                                "replies": [valid_reply(name="one"), valid_reply(name="two")]}))
    replay = ReplayClient(path)
    assert [replay.ask(MESSAGES)[0].name for _ in range(2)] == ["one", "two"]
    with pytest.raises(LlmError, match=r"has only 2 replies"):
        replay.ask(MESSAGES)
    path.write_text(json.dumps({"replies": [valid_reply(name="not a name")]}))
    with pytest.raises(LlmError, match=r"the replies in .* are not all well formed: replies.0.name"):
        ReplayClient(path)


def test_replay_repeats_a_recorded_failure(tmp_path: Path) -> None:
    failed = Exchange(MESSAGES, "", None, "the LLM at http://x/v1 answered HTTP 500 (1 try)", "json_schema", 1,
                      None, None, 0.1)
    path = tmp_path / "t.json"
    save_transcript(path, [failed])
    with pytest.raises(LlmError, match=r"records no reply to question 1: the LLM at http://x/v1") as caught:
        ReplayClient(path).ask(MESSAGES)
    assert caught.value.exchange is not None and caught.value.exchange.mode == "replay"


def _document(**changes: object) -> str:
    record = {"messages": [{"role": "user", "content": "hi"}], "reply_text": "", "reply": valid_reply(),
              "error": None, "mode": "json_schema", "tries": 1, "prompt_tokens": None,
              "completion_tokens": None, "seconds": 0.5, "verdict": ""}
    record.update(changes)
    return json.dumps({"version": 1, "exchanges": [record]})


CORRUPT = {
    "not JSON": ("{not json", "is not JSON"),
    "not UTF-8": (b'{"version": 1, "exchanges": ["\xff"]}', "is not JSON"),
    "deeply nested": ("[" * 100_000, "is not JSON"),
    "a list": ("[]", "is not a swzc transcript"),
    "another version": ('{"version": 2, "exchanges": []}', "version: Input should be 1"),
    "a missing field": (_document().replace('"tries": 1, ', ""), "exchanges.0.tries: Field required"),
    "a bad reply": (_document(reply=valid_reply(name="a b")), "exchanges.0.reply.name"),
    "reply and error": (_document(error="both"), "either a reply or an error"),
    "an unknown mode": (_document(mode="psychic"), "exchanges.0.mode"),
    "negative seconds": (_document(seconds=-1), "exchanges.0.seconds"),
}


@pytest.mark.parametrize("read", [load_transcript, ReplayClient])
@pytest.mark.parametrize("case", CORRUPT)
def test_a_corrupt_transcript_is_an_error_not_a_traceback(case: str, read: object, tmp_path: Path) -> None:
    content, reason = CORRUPT[case]
    path = tmp_path / "t.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(LlmError) as caught:
        read(path)  # type: ignore[operator]
    assert reason in caught.value.message and str(path) in caught.value.message
    assert caught.value.code == ExitCode.BAD_INPUT


def test_a_missing_or_huge_transcript_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(LlmError, match="cannot read the transcript"):
        ReplayClient(tmp_path / "absent.json")
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate(MAX_TRANSCRIPT_BYTES + 1)
    with pytest.raises(LlmError, match="more than the limit of 20,971,520"):
        load_transcript(huge)


def test_a_transcript_that_is_a_fifo_or_a_device_is_refused_without_waiting(tmp_path: Path) -> None:
    """The one bounded read: a FIFO with no writer is not waited on, /dev/zero is not read without end."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a FIFO"), (Path("/dev/zero"), "a character device")):
        with pytest.raises(LlmError, match=f"is {kind}, not a regular file"):
            ReplayClient(path)


def test_a_transcript_that_cannot_be_written_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(LlmError, match="cannot write the transcript"):
        save_transcript(tmp_path / "no" / "such" / "t.json", [_exchange()])


@pytest.mark.parametrize(
    "fields",
    [
        {"model": " "},
        {"timeout_s": 0},
        {"timeout_s": float("nan")},
        {"retries": -1},
        {"retries": 11},
        {"retries": True},
        {"max_tokens": 0},
        {"temperature": 3.0},
        {"base_url": "ftp://example.com"},
        {"base_url": "http://[::1"},
        {"backoff_s": -1.0},
    ],
)
def test_bad_settings_are_an_error(fields: dict) -> None:
    with pytest.raises(LlmError):
        Settings(**{"model": "m", **fields})


def test_settings_from_treats_an_empty_url_as_absent() -> None:
    settings = settings_from("m", "", 30.0, 3)
    assert (settings.model, settings.base_url, settings.timeout_s, settings.retries) == ("m", None, 30.0, 3)


@pytest.mark.parametrize("messages", [[], [{"role": "user"}], [{"role": "user", "content": 1}],
                                      [{"role": "user", "content": "x", "name": "n"}]])
def test_malformed_messages_are_a_programming_error(messages: list) -> None:
    client = ChatClient(Settings("m", "http://127.0.0.1:9/v1"))
    with pytest.raises((TypeError, ValueError)):
        client.ask(messages)
