"""Transport to an LLM: one question (chat messages) in, one `SwizzleReply` out, over any server that speaks
OpenAI's chat-completions protocol, or from a transcript of an earlier run.

The reply is untrusted.  These modules only carry it and check its shape (the four fields, their lengths,
their characters); what the body means is for swzc.search.llm.restrict and the prover to judge.

The time bound: `ask()` returns within `timeout_s × (retries + 1)` seconds (plus the moment it takes to close
a connection) however the server misbehaves: silent, slow to send its headers, trickling its body a byte at a
time, sending one without end.  Each try ends within `timeout_s` and within the question's deadline, and every
connect, read and write on the connection waits at most until then, so a body that trickles in is cut off
mid-way (an HTTP read timeout alone restarts at every byte).  A pause between tries comes out of spare time;
a server's Retry-After is waited for only when the wait ends before the deadline, else the question stops and
says so.  Resolving the server's name is outside the bound: no timeout in Python reaches into it.

Retries are counted here, not in the SDK (its max_retries is 0): every try is recorded, a rejected json_schema
request is asked again in json_object mode, a malformed reply is asked again, and one deadline covers them all.
The SDK's own loop gives each try a fresh timeout and sleeps as long as a Retry-After asks, up to two minutes,
whatever time is left.

A reply is read as it arrives and refused once it passes MAX_REPLY_BYTES: a server that sends without end costs
a megabyte, not the process's memory.  Replies are asked for uncompressed (Accept-Encoding: identity) and a
compressed one is refused, as a megabyte of gzip can unpack to a gigabyte.

The API key is read from OPENAI_API_KEY by the SDK client and kept only there: no record, message or file
these modules make contain it, and a server that echoes it back has it replaced by "[redacted]".

This module holds what the proposer and the command line use: the clients (ChatClient, which asks and retries
under one deadline, and ReplayClient) and the transcript.  What a question and its answer are made of, and the
reading of an answer, are in client_exchange; the guarded HTTP transport is in client_transport.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal, Protocol

import openai
import pydantic
from pydantic import ConfigDict, Field

from swzc.core.errors import SwzcError
from swzc.core.inputs import read_regular
from swzc.search.llm.client_exchange import (
    _FILTERED,
    JSON_OBJECT,
    JSON_SCHEMA,
    MAX_REASON_CHARS,
    MAX_SERVER_MESSAGE_CHARS,
    MIN_SECRET_CHARS,
    REDACTED,
    REPLAY,
    Exchange,
    LlmError,
    Settings,
    SwizzleReply,
    _add,
    _checked_messages,
    _clip,
    _display_url,
    _invalid_reply,
    _parsed,
    _read_answer,
    _redact,
    _redact_all,
    _retry_after,
    _seconds,
    _server_message,
    _summary,
    _truncated,
    _Try,
    _unfenced,
    _validated,
    _with_json_note,
    settings_from,
)
from swzc.search.llm.client_transport import (
    _DEADLINE,
    MAX_REPLY_BYTES,
    _GuardedHttpClient,
    _RefusedReply,
    _SlowReply,
)

__all__ = [
    "JSON_OBJECT", "JSON_SCHEMA", "MAX_REASON_CHARS", "MAX_REPLY_BYTES", "MAX_SERVER_MESSAGE_CHARS",
    "MAX_TRANSCRIPT_BYTES", "MIN_SECRET_CHARS", "REDACTED", "REPLAY", "ChatClient", "Client", "Exchange", "LlmError",
    "ReplayClient", "Settings", "SwizzleReply", "load_transcript", "save_transcript", "settings_from",
    "transcript_json",
]

MAX_TRANSCRIPT_BYTES = 20 << 20


class Client(Protocol):
    def ask(self, messages: Sequence[dict]) -> tuple[SwizzleReply, Exchange]:
        """The reply to `messages` and its record; raises LlmError (with `.exchange`) when there is none."""
        ...


class ChatClient:
    """The real client, over the official openai SDK.

    It first asks in json_schema mode: the SDK sends the SwizzleReply schema with "strict": true, so a server
    that supports structured outputs can only answer with the four fields.  Servers word their refusal of
    json_schema in many ways (or not at all), so the message is not parsed: any 400 or 422 to a json_schema
    request earns one json_object request within the same question, which costs no retry.  The client stays
    in json_object mode for the rest of the session once the server has accepted such a request; when it
    rejects that one too, the rejection was about something else, and it is reported at once.
    """

    def __init__(self, settings: Settings, send_key: bool = True) -> None:
        """`send_key` False: the server was named by a file of the project (its [tool.swzc]), not by the
        user, and is not given the user's OPENAI_API_KEY."""
        self.settings = settings
        self._sdk = openai.OpenAI(
            api_key=(os.environ.get("OPENAI_API_KEY") if send_key else None) or "unused",
            base_url=settings.base_url,
            timeout=settings.timeout_s,
            max_retries=0,  # the tries are ask()'s, under one deadline: see the module's docstring
            http_client=_GuardedHttpClient(headers={"Accept-Encoding": "identity"}),
        )
        self.url = _display_url(str(self._sdk.base_url))
        self.mode: str = JSON_SCHEMA

    def __repr__(self) -> str:
        return f"ChatClient(model={self.settings.model!r}, url={self.url!r}, mode={self.mode!r})"

    def close(self) -> None:
        self._sdk.close()

    def ask(self, messages: Sequence[dict]) -> tuple[SwizzleReply, Exchange]:
        asked = _checked_messages(messages)
        settings = self.settings
        start = time.monotonic()
        allowed = settings.timeout_s * (settings.retries + 1)
        deadline = start + allowed
        mode, tries, failures = self.mode, 0, 0
        prompt_tokens: int | None = None
        completion_tokens: int | None = None
        while True:
            sent = asked if mode == JSON_SCHEMA else _with_json_note(asked)
            tries += 1
            attempt = self._try(mode, sent, min(time.monotonic() + settings.timeout_s, deadline))
            reason = attempt.reason
            prompt_tokens = _add(prompt_tokens, attempt.prompt_tokens)
            completion_tokens = _add(completion_tokens, attempt.completion_tokens)
            if mode == JSON_OBJECT and not attempt.rejected:
                self.mode = JSON_OBJECT  # the server takes json_object requests: ask that way from now on
            if attempt.reply is not None:
                exchange = Exchange(sent, attempt.reply_text, attempt.reply.model_dump(), None, mode, tries,
                                    prompt_tokens, completion_tokens, time.monotonic() - start)
                return attempt.reply, exchange
            if attempt.rejected and mode == JSON_SCHEMA and time.monotonic() < deadline:
                mode = JSON_OBJECT
                continue
            failures += 1
            now = time.monotonic()
            if not attempt.retry or failures > settings.retries or now >= deadline:
                break
            if attempt.retry_after is not None:
                # The server said when to come back: sooner would be refused again, and later is past the deadline.
                if now + attempt.retry_after >= deadline:
                    reason += (f"; its {attempt.retry_after_said} asks to wait {_seconds(attempt.retry_after)},"
                               f" more than the {_seconds(deadline - now)} left of the {allowed:g} s allowed")
                    break
                time.sleep(attempt.retry_after)
            elif attempt.server_error:
                # Pause only out of time that quick failures left spare: each remaining try keeps its full timeout.
                spare = deadline - now - settings.timeout_s * (settings.retries + 1 - failures)
                time.sleep(max(0.0, min(settings.backoff_s * 2 ** (failures - 1), spare)))
        message = f"the LLM at {self.url} {reason} ({tries} {'try' if tries == 1 else 'tries'})"
        exchange = Exchange(sent, attempt.reply_text, None, message, mode, tries, prompt_tokens,
                            completion_tokens, time.monotonic() - start)
        raise LlmError(message, exchange)

    def _try(self, mode: str, sent: tuple[dict, ...], deadline: float) -> _Try:
        settings = self.settings
        options: dict[str, Any] = {
            "model": settings.model,
            "messages": list(sent),
            # The current name of the limit; servers that only know max_tokens ignore unknown fields.
            "max_completion_tokens": settings.max_tokens,
            "timeout": max(deadline - time.monotonic(), 0.001),
        }
        if settings.temperature is not None:
            options["temperature"] = settings.temperature
        completions = self._sdk.chat.completions.with_raw_response
        token = _DEADLINE.set(deadline)
        try:
            if mode == JSON_SCHEMA:
                raw = completions.parse(response_format=SwizzleReply, **options)
            else:
                raw = completions.create(response_format={"type": "json_object"}, **options)
        except (_SlowReply, _RefusedReply) as exc:
            return self._unread(exc)
        except openai.APITimeoutError:
            return _Try(None, reason=f"did not answer within the {settings.timeout_s:g} s timeout")
        except openai.APIConnectionError as exc:
            if isinstance(exc.__cause__, (_SlowReply, _RefusedReply)):  # openai before 3 wraps every error
                return self._unread(exc.__cause__)
            cause = self._scrub(str(exc.__cause__ or exc))
            return _Try(None, reason=f"could not be reached ({cause})", server_error=True)
        except openai.APIStatusError as exc:
            return self._status_failure(exc)
        finally:
            _DEADLINE.reset(token)
        answer = _read_answer(raw.http_response.text)
        text = self._scrub(answer.content or "")
        tokens = {"prompt_tokens": answer.prompt_tokens, "completion_tokens": answer.completion_tokens}
        if answer.problem:
            return _Try(None, text, f"sent an answer that is not a chat completion ({answer.problem})", **tokens)
        parsed = None
        if mode == JSON_SCHEMA:
            try:
                parsed = _parsed(raw.parse())
            except openai.LengthFinishReasonError:
                return _Try(None, text, _truncated(settings), **tokens)
            except openai.ContentFilterFinishReasonError:
                return _Try(None, text, _FILTERED, **tokens)
            except pydantic.ValidationError as exc:
                return _Try(None, text, _invalid_reply(exc), **tokens)
            except (ValueError, TypeError, AttributeError, KeyError, openai.OpenAIError) as exc:
                why = self._scrub(_clip(str(exc), MAX_SERVER_MESSAGE_CHARS))
                return _Try(None, text, f"sent an answer that is not a chat completion ({why})", **tokens)
        if answer.finish_reason == "length":
            return _Try(None, text, _truncated(settings), **tokens)
        if answer.finish_reason == "content_filter":
            return _Try(None, text, _FILTERED, **tokens)
        if answer.refusal:
            refusal = self._scrub(_clip(" ".join(answer.refusal.split()), MAX_SERVER_MESSAGE_CHARS))
            return _Try(None, text, f"refused: {refusal}", **tokens)
        if not text.strip():
            return _Try(None, text, "sent an empty reply", **tokens)
        if mode == JSON_OBJECT:
            return _validated(text, _unfenced(text), tokens)
        if text != answer.content:  # the key was scrubbed from the text: read what is recorded instead
            return _validated(text, text, tokens)
        if not isinstance(parsed, SwizzleReply):
            return _Try(None, text, "sent a reply that could not be read as the schema", **tokens)
        return _Try(parsed, text, **tokens)

    def _status_failure(self, exc: openai.APIStatusError) -> _Try:
        status = exc.status_code
        said = self._scrub(_server_message(exc))
        reason = f"answered HTTP {status}: {said}" if said else f"answered HTTP {status}"
        if status in (400, 422):
            return _Try(None, reason=reason, retry=False, rejected=True)
        if status in (408, 409, 429) or status >= 500:
            asked = _retry_after(exc.response.headers)
            if asked is None:
                return _Try(None, reason=reason, server_error=True)
            return _Try(None, reason=reason, server_error=True, retry_after=asked[0],
                        retry_after_said=self._scrub(asked[1]))
        return _Try(None, reason=reason, retry=False)  # 401, 403, 404 …: asking again will not help

    def _unread(self, exc: _SlowReply | _RefusedReply) -> _Try:
        """A reply the guarded transport stopped reading."""
        if isinstance(exc, _SlowReply):
            return _Try(None, reason=f"did not finish its reply within the {self.settings.timeout_s:g} s timeout: "
                                     f"HTTP {exc.status}, then {exc.received} bytes of the body")
        return _Try(None, reason=self._scrub(exc.reason))

    def _scrub(self, text: str) -> str:
        return _redact(text, self._sdk.api_key)


class ReplayClient:
    """Answers from a transcript instead of a server: the n-th question gets the n-th recorded exchange, so a
    run can be repeated exactly, a recorded failure included (it is raised again as an LlmError).

    It also reads replies written by hand, {"about": "...", "replies": [{name, expectation, lessons, body}]},
    so that a benchmark can put fixed candidates through the same loop an LLM's would go through.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._recorded = _replayable(self.path)
        self._next = 0

    def __repr__(self) -> str:
        return f"ReplayClient(path={str(self.path)!r}, answered={self._next}, recorded={len(self._recorded)})"

    def ask(self, messages: Sequence[dict]) -> tuple[SwizzleReply, Exchange]:
        asked = _checked_messages(messages)
        start = time.perf_counter()
        if self._next >= len(self._recorded):
            count = len(self._recorded)
            raise LlmError(f"the transcript {self.path} has only {count} repl{'y' if count == 1 else 'ies'}")
        recorded = self._recorded[self._next]
        self._next += 1
        if recorded.reply is None:
            message = f"the transcript {self.path} records no reply to question {self._next}: {recorded.error}"
            exchange = Exchange(asked, recorded.reply_text, None, message, REPLAY, 0, None, None,
                                time.perf_counter() - start)
            raise LlmError(message, exchange)
        reply = SwizzleReply.model_validate(recorded.reply)  # checked by load_transcript, re-made here
        exchange = Exchange(asked, recorded.reply_text, reply.model_dump(), None, REPLAY, 0, None, None,
                            time.perf_counter() - start)
        return reply, exchange


class _MessageRecord(pydantic.BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    role: str
    content: str


class _ExchangeRecord(pydantic.BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    messages: list[_MessageRecord]
    reply_text: str
    reply: SwizzleReply | None
    error: str | None
    mode: Literal["json_schema", "json_object", "replay"]
    tries: int = Field(ge=0)
    prompt_tokens: int | None = Field(ge=0)
    completion_tokens: int | None = Field(ge=0)
    seconds: float = Field(ge=0)
    verdict: str = ""

    @pydantic.model_validator(mode="after")
    def _reply_or_error(self) -> _ExchangeRecord:
        if (self.reply is None) == (self.error is None):
            raise ValueError("an exchange has either a reply or an error")
        return self


class _TranscriptRecord(pydantic.BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    version: Literal[1]
    exchanges: list[_ExchangeRecord]


class _RepliesRecord(pydantic.BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    about: str = ""
    replies: list[SwizzleReply]


def transcript_json(exchanges: Sequence[Exchange]) -> str:
    """The transcript as the text save_transcript writes and load_transcript reads, for a caller that writes
    its outputs together.  The key is redacted again here, in case a caller put it into a verdict."""
    key = os.environ.get("OPENAI_API_KEY")
    document = {"version": 1, "exchanges": [_redact_all(asdict(e), key) for e in exchanges]}
    return json.dumps(document, indent=1, allow_nan=False) + "\n"


def save_transcript(path: str | Path, exchanges: Sequence[Exchange]) -> None:
    """Write the exchanges as JSON, atomically: a reader sees the old file or the new one, never half of one.
    The file is private to the user (0600), as the prompts quote the user's source."""
    path = Path(path)
    data = transcript_json(exchanges)
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, path)
        except BaseException:
            os.unlink(temp)
            raise
    except OSError as exc:
        raise LlmError(f"cannot write the transcript {path}: {exc.strerror or exc}") from None


def load_transcript(path: str | Path) -> list[Exchange]:
    """The exchanges save_transcript wrote.  The file is input like any other: anything wrong with it is an
    LlmError naming the file and the fault, never a traceback."""
    path = Path(path)
    return _parse_transcript(path, _read_bounded(path))


def _replayable(path: Path) -> list[Exchange]:
    """A transcript's exchanges, or hand-written replies made into exchanges."""
    data = _read_bounded(path)
    try:
        top = json.loads(data)
    except (ValueError, RecursionError):
        top = None  # _parse_transcript says what is wrong with it
    if not (isinstance(top, dict) and "replies" in top and "version" not in top):
        return _parse_transcript(path, data)
    try:
        replies = _RepliesRecord.model_validate(top).replies
    except pydantic.ValidationError as exc:
        raise LlmError(f"the replies in {path} are not all well formed: {_summary(exc)}") from None
    return [Exchange((), r.model_dump_json(), r.model_dump(), None, REPLAY, 0, None, None, 0.0) for r in replies]


def _read_bounded(path: Path) -> bytes:
    """The transcript's bytes, through swzc's one bounded read: a regular file (never a FIFO or a device) of at
    most MAX_TRANSCRIPT_BYTES."""
    try:
        return read_regular(str(path), MAX_TRANSCRIPT_BYTES)
    except SwzcError as exc:
        raise LlmError(f"cannot read the transcript: {exc.message}") from None


def _parse_transcript(path: Path, data: bytes) -> list[Exchange]:
    try:
        record = _TranscriptRecord.model_validate_json(data)
    except pydantic.ValidationError as exc:
        invalid = [e for e in exc.errors(include_url=False) if e["type"] == "json_invalid"]
        if invalid:
            raise LlmError(f"the transcript {path} is not JSON: {invalid[0]['msg']}") from None
        raise LlmError(f"the transcript {path} is not a swzc transcript: {_summary(exc)}") from None
    return [
        Exchange(
            messages=tuple(m.model_dump() for m in r.messages),
            reply_text=r.reply_text,
            reply=r.reply.model_dump() if r.reply is not None else None,
            error=r.error,
            mode=r.mode,
            tries=r.tries,
            prompt_tokens=r.prompt_tokens,
            completion_tokens=r.completion_tokens,
            seconds=r.seconds,
            verdict=r.verdict,
        )
        for r in record.exchanges
    ]
