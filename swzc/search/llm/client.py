"""Transport to an LLM: one question (chat messages) in, one `SwizzleReply` out, over any server that speaks
OpenAI's chat-completions protocol, or from a transcript of an earlier run.

The reply is untrusted.  This module only carries it and checks its shape (the four fields, their lengths,
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
this module makes contains it, and a server that echoes it back has it replaced by "[redacted]".
"""

from __future__ import annotations

import email.utils
import importlib
import json
import math
import os
import re
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit, urlunsplit

import openai
import pydantic
from pydantic import ConfigDict, Field

from swzc.core.errors import ExitCode, SwzcError
from swzc.core.inputs import read_regular

MAX_TRANSCRIPT_BYTES = 20 << 20
MAX_REPLY_BYTES = 1 << 20  # a reply is a JSON object of a few kilobytes; past this it is not one
MAX_SERVER_MESSAGE_CHARS = 300
MAX_REASON_CHARS = 500
MIN_SECRET_CHARS = 8  # shorter "keys" (placeholders such as "unused") are not worth redacting from text
REDACTED = "[redacted]"

JSON_SCHEMA: Literal["json_schema"] = "json_schema"
JSON_OBJECT: Literal["json_object"] = "json_object"
REPLAY: Literal["replay"] = "replay"

_NAME = re.compile(r"[A-Za-z0-9_.:-]+")
# C0 controls other than tab, newline and carriage return, and DEL: text the reply carries may be printed
# on a terminal, where an escape sequence from an untrusted model has no business.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_FENCED = re.compile(r"\A\s*```(?:json|JSON)?[ \t]*\r?\n(.*?)\r?\n?```\s*\Z", re.DOTALL)
_LIMITS = {"name": 40, "expectation": 2000, "lessons": 2000, "body": 4000}


class SwizzleReply(pydantic.BaseModel):
    """The four fields the model answers with.

    The limits are checked by validators, not written into the JSON schema: strict structured-output servers
    each support their own subset of JSON Schema and refuse a schema with a keyword outside it, which would
    cost the strict mode for nothing.  The descriptions, which every server accepts, state the limits.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(description="a short name for the order, at most 40 characters of A-Z a-z 0-9 _ . : -")
    expectation: str = Field(
        description="what you expect this order to do to L2 reuse, and why (at most 2000 characters)"
    )
    lessons: str = Field(
        description="what the earlier attempts taught you, e.g. why the last one lost; may be empty "
        "(at most 2000 characters)"
    )
    body: str = Field(description="the C++ statements of the function body (at most 4000 characters)")

    @pydantic.field_validator("*")
    @classmethod
    def _bounded_text(cls, value: str, info: pydantic.ValidationInfo) -> str:
        limit = _LIMITS[info.field_name or ""]
        if len(value) > limit:
            raise ValueError(f"longer than {limit} characters ({len(value)})")
        if _CONTROL.search(value):
            raise ValueError("contains control characters")
        if info.field_name == "name" and not _NAME.fullmatch(value):
            raise ValueError("must be one or more of A-Z a-z 0-9 _ . : -")
        if info.field_name in ("body", "expectation") and not value.strip():
            raise ValueError("is empty")
        return value



@dataclass(frozen=True)
class Settings:
    """Where and how to ask.  The API key is deliberately not here: settings get printed and recorded."""

    model: str
    base_url: str | None = None  # else OPENAI_BASE_URL, else the SDK's default
    timeout_s: float = 120.0  # per try, its whole reply read; the question as a whole: timeout_s × (retries + 1)
    retries: int = 2  # further tries after a failed one
    max_tokens: int = 2000
    temperature: float | None = None
    backoff_s: float = 1.0  # pause before retrying a server error, doubled each time, taken only from spare time

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise LlmError("the LLM model name is empty")
        if self.base_url is not None and _scheme(self.base_url) not in ("http", "https"):
            shown = _display_url(self.base_url) if isinstance(self.base_url, str) else repr(self.base_url)
            raise LlmError(f"the LLM base URL must start with http:// or https://, not {shown!r}")
        if not _finite(self.timeout_s) or self.timeout_s <= 0:
            raise LlmError(f"the LLM timeout must be a positive number of seconds, not {self.timeout_s!r}")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or not 0 <= self.retries <= 10:
            raise LlmError(f"the LLM retries must be a whole number from 0 to 10, not {self.retries!r}")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise LlmError(f"the LLM token limit must be a positive whole number, not {self.max_tokens!r}")
        if self.temperature is not None and (not _finite(self.temperature) or not 0 <= self.temperature <= 2):
            raise LlmError(f"the LLM temperature must be from 0 to 2, not {self.temperature!r}")
        if not _finite(self.backoff_s) or self.backoff_s < 0:
            raise LlmError(f"the LLM backoff must be a number of seconds, not {self.backoff_s!r}")


def settings_from(model: str, base_url: str | None, timeout_s: float, retries: int) -> Settings:
    """Settings from the CLI's options; an empty base URL means "not given"."""
    return Settings(model=model, base_url=base_url or None, timeout_s=timeout_s, retries=retries)


@dataclass(frozen=True)
class Exchange:
    """One question and its answer, as the transcript and the report record it."""

    messages: tuple[dict, ...]  # the chat messages sent (role, content) on the last try
    reply_text: str  # the raw text the model returned ('' if none)
    reply: dict | None  # the SwizzleReply as a dict; None when there was no valid reply
    error: str | None  # why the last try failed; None on success
    mode: str  # "json_schema", "json_object" or "replay"
    tries: int  # requests sent
    prompt_tokens: int | None  # summed over the tries, when the server said
    completion_tokens: int | None
    seconds: float
    verdict: str = ""  # what swzc did with the reply; filled in by the caller


class LlmError(SwzcError):
    """The LLM gave no usable reply.  `exchange`, when there is one, records what was asked and answered."""

    def __init__(self, message: str, exchange: Exchange | None = None) -> None:
        super().__init__(message, ExitCode.BAD_INPUT)
        self.exchange = exchange


class Client(Protocol):
    def ask(self, messages: Sequence[dict]) -> tuple[SwizzleReply, Exchange]:
        """The reply to `messages` and its record; raises LlmError (with `.exchange`) when there is none."""
        ...


@dataclass(frozen=True)
class _Try:
    """What one request came to.  `retry`: another try may do better; `rejected`: the server refused the
    request itself (400 or 422), which in json_schema mode means: try json_object instead."""

    reply: SwizzleReply | None
    reply_text: str = ""
    reason: str = ""
    retry: bool = True
    rejected: bool = False
    server_error: bool = False  # worth a pause before the next try
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    retry_after: float | None = None  # seconds the server asked to be left alone, when it said
    retry_after_said: str = ""  # the header that said so, as sent


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


def _http_modules() -> tuple[ModuleType, ModuleType]:
    """The HTTP library the SDK is built on and its connection layer: httpx2 and httpcore2 from openai 3 on,
    httpx and httpcore before."""
    for http_name, core_name in (("httpx2", "httpcore2"), ("httpx", "httpcore")):
        try:
            http, core = importlib.import_module(http_name), importlib.import_module(core_name)
        except ImportError:
            continue
        if issubclass(openai.DefaultHttpxClient, http.Client):
            return http, core
    raise ImportError("the openai SDK is built on neither httpx2 nor httpx")


_http, _httpcore = _http_modules()

# When the current try must end (time.monotonic()); None outside a try.  A context variable, not an attribute
# of the client, so that each thread asking through its own ChatClient sees its own.
_DEADLINE: ContextVar[float | None] = ContextVar("swzc_llm_deadline", default=None)


def _time_left(timeout: float | None, expired: type[Exception]) -> float | None:
    """`timeout` cut to the time left before the try's deadline; `expired` once none is left."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("the try's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _SlowReply(Exception):
    """The reply's body was still coming at the deadline."""

    def __init__(self, status: int, received: int) -> None:
        super().__init__(f"HTTP {status}: {received} bytes of the body came before the deadline")
        self.status, self.received = status, received


class _RefusedReply(Exception):
    """A reply not read to its end: too large, or compressed.  Neither this nor _SlowReply is an HTTP error:
    openai 3 lets them through, earlier versions wrap them in an APIConnectionError."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _DeadlineStream(_httpcore.NetworkStream):
    """A connection whose every read and write waits at most until the try's deadline."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _time_left(timeout, _httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _time_left(timeout, _httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> _DeadlineStream:
        left = _time_left(timeout, _httpcore.ConnectTimeout)
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, left))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(_httpcore.NetworkBackend):
    """Connections that keep the try's deadline (_DeadlineStream), opened within it."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> _DeadlineStream:
        left = _time_left(timeout, _httpcore.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_tcp(host, port, left, local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> _DeadlineStream:
        left = _time_left(timeout, _httpcore.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_unix_socket(path, left, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class _CappedBody(_http.SyncByteStream):
    """A reply's body as it arrives, refused once it passes MAX_REPLY_BYTES or outlasts the try's deadline."""

    def __init__(self, stream: Any, status: int) -> None:
        self._stream, self._status = stream, status

    def __iter__(self) -> Iterator[bytes]:
        received = 0
        try:
            for chunk in self._stream:
                received += len(chunk)
                if received > MAX_REPLY_BYTES:
                    raise _RefusedReply(_too_large())
                _time_left(None, _http.ReadTimeout)  # also where the reads cannot keep it (_GuardedTransport)
                yield chunk
        except _http.TimeoutException:
            raise _SlowReply(self._status, received) from None

    def close(self) -> None:
        self._stream.close()


class _GuardedTransport(_http.BaseTransport):
    """The SDK's transport, its connections keeping the try's deadline and its replies capped (_CappedBody)."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        # httpx offers no public way to give its connection pool a network backend; the pool keeps it here.
        # Should that change, _CappedBody's own check still ends the reply, one read's timeout late at most.
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is not None:
            pool._network_backend = _DeadlineBackend(backend)

    def handle_request(self, request: Any) -> Any:
        response = self._transport.handle_request(request)
        try:
            _check_head(response.headers)
        except _RefusedReply:
            response.close()
            raise
        return _http.Response(response.status_code, headers=response.headers, extensions=response.extensions,
                              stream=_CappedBody(response.stream, response.status_code))

    def close(self) -> None:
        self._transport.close()


class _GuardedHttpClient(openai.DefaultHttpxClient):
    """The SDK's own HTTP client (its defaults, proxies from the environment) with every transport guarded."""

    def _init_transport(self, *args: Any, **kwargs: Any) -> Any:
        return _GuardedTransport(super()._init_transport(*args, **kwargs))

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> Any:
        return _GuardedTransport(super()._init_proxy_transport(*args, **kwargs))


def _check_head(headers: Any) -> None:
    """Refuse a reply by its headers: one that says it is too large, or is compressed (asked for identity)."""
    length = headers.get("content-length", "")
    if length.strip().isdigit() and int(length) > MAX_REPLY_BYTES:
        raise _RefusedReply(_too_large(f"{int(length):,} bytes"))
    encoding = headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise _RefusedReply(f"sent a compressed reply (Content-Encoding: {_clip(encoding, 40)}), though asked "
                            "for none")


def _too_large(said: str = "") -> str:
    how = f"refused unread: its Content-Length says {said}" if said else "refused once past it"
    return f"sent a reply larger than {MAX_REPLY_BYTES >> 20} MiB ({how})"


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


def _checked_messages(messages: Sequence[dict]) -> tuple[dict, ...]:
    """Copies of the messages, so that what is recorded is what was sent even if the caller reuses its list."""
    checked = []
    for m in messages:
        if not (isinstance(m, Mapping) and set(m) == {"role", "content"}
                and isinstance(m["role"], str) and isinstance(m["content"], str)):
            raise TypeError("each message must be a {'role': str, 'content': str} mapping")
        checked.append({"role": m["role"], "content": m["content"]})
    if not checked:
        raise ValueError("no messages to send")
    return tuple(checked)


def _json_note() -> str:
    fields = "; ".join(f'"{name}": {field.description}' for name, field in SwizzleReply.model_fields.items())
    return ("Reply with one JSON object and nothing else: no prose, no code fences. "
            f"Its keys are exactly these four, each a string: {fields}.")


def _with_json_note(messages: tuple[dict, ...]) -> tuple[dict, ...]:
    """The messages for json_object mode, where the server does not see the schema: the first system message
    says what the object holds (one system message, as some chat templates allow no more)."""
    note = _json_note()
    if messages[0]["role"] == "system":
        first = {"role": "system", "content": f"{messages[0]['content']}\n\n{note}"}
        return (first, *messages[1:])
    return ({"role": "system", "content": note}, *messages)


def _validated(text: str, candidate: str, tokens: dict[str, int | None]) -> _Try:
    try:
        return _Try(SwizzleReply.model_validate_json(candidate), text, **tokens)
    except pydantic.ValidationError as exc:
        return _Try(None, text, _invalid_reply(exc), **tokens)


def _unfenced(text: str) -> str:
    match = _FENCED.match(text)
    return match.group(1) if match else text


def _invalid_reply(exc: pydantic.ValidationError) -> str:
    invalid = [e for e in exc.errors(include_url=False) if e["type"] == "json_invalid"]
    if invalid:
        return f"sent a reply that is not JSON ({_clip(invalid[0]['msg'], MAX_SERVER_MESSAGE_CHARS)})"
    return f"sent a reply that does not fit the schema ({_summary(exc)})"


def _summary(exc: pydantic.ValidationError, shown: int = 3) -> str:
    errors = exc.errors(include_url=False)
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'the whole'}: {e['msg']}" for e in errors[:shown]]
    if len(errors) > shown:
        parts.append(f"and {len(errors) - shown} more")
    return _clip("; ".join(parts), MAX_REASON_CHARS)


_FILTERED = "stopped the reply with its content filter"


def _truncated(settings: Settings) -> str:
    return f"cut the reply off at the token limit ({settings.max_tokens} tokens)"


@dataclass(frozen=True)
class _Answer:
    """What a 200 answer says, read from its JSON by hand: the SDK builds its objects without checking them,
    and a reply the SDK rejects must still be recorded."""

    problem: str = ""  # why it is not a chat completion; '' when it is one
    content: str | None = None
    refusal: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def _read_answer(text: str) -> _Answer:
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        return _Answer("the body is not JSON")
    if not isinstance(body, dict):
        return _Answer("the body is not a JSON object")
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    tokens = {"prompt_tokens": _count(usage.get("prompt_tokens")),
              "completion_tokens": _count(usage.get("completion_tokens"))}
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        return _Answer("no choices", **tokens)
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        return _Answer("no message", **tokens)
    content, refusal, finish = message.get("content"), message.get("refusal"), choice.get("finish_reason")
    if not all(v is None or isinstance(v, str) for v in (content, refusal, finish)):
        return _Answer("content, refusal or finish_reason is not text", **tokens)
    return _Answer("", content, refusal, finish, **tokens)


def _parsed(completion: Any) -> object:
    try:
        return completion.choices[0].message.parsed
    except (AttributeError, IndexError, TypeError):
        return None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _add(total: int | None, more: int | None) -> int | None:
    if more is None:
        return total
    return more if total is None else total + more


def _server_message(exc: openai.APIStatusError) -> str:
    """The server's own words: OpenAI's {"error": {"message": ...}} where given, else the body's text."""
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        said = body["message"]
    elif isinstance(body, str):
        said = body
    else:
        try:
            said = exc.response.text
        except Exception:  # a streamed body that cannot be read again: the status alone must do
            said = ""
    return _clip(" ".join(said.split()), MAX_SERVER_MESSAGE_CHARS)


def _retry_after(headers: Any) -> tuple[float, str] | None:
    """The wait a server asks for before the next try, in seconds, and the header that asks: retry-after-ms
    (milliseconds, the SDK's convention) before Retry-After (seconds, or an HTTP date)."""
    for name, shown, scale in (("retry-after-ms", "retry-after-ms", 0.001), ("retry-after", "Retry-After", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        said = f"{shown}: {_clip(value.strip(), 60)}"
        try:
            seconds = float(value) * scale
        except ValueError:
            if name == "retry-after-ms":
                continue
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError, IndexError, OverflowError):
                return None
            if when.tzinfo is None:
                when = when.replace(tzinfo=timezone.utc)  # an HTTP date is in GMT
            seconds = (when - datetime.now(timezone.utc)).total_seconds()
        if math.isnan(seconds):
            continue
        return max(seconds, 0.0), said
    return None


def _seconds(value: float) -> str:
    if math.isinf(value):
        return "forever"
    return (f"{value:.1f}".removesuffix(".0") if value < 1e6 else f"{value:.3g}") + " s"


def _display_url(url: str) -> str:
    """The URL without user, password, query or fragment, where credentials sometimes hide."""
    try:
        parts = urlsplit(url)
        netloc = parts.hostname or ""
        if ":" in netloc:
            netloc = f"[{netloc}]"
        if parts.port is not None:
            netloc += f":{parts.port}"
    except ValueError:
        return "(an unreadable URL)"
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")).rstrip("/")


def _scheme(url: object) -> str:
    try:
        return urlsplit(url).scheme if isinstance(url, str) else ""
    except ValueError:
        return ""


def _redact(text: str, key: str | None) -> str:
    if key and len(key) >= MIN_SECRET_CHARS:
        return text.replace(key, REDACTED)
    return text


def _redact_all(value: Any, key: str | None) -> Any:
    if isinstance(value, str):
        return _redact(value, key)
    if isinstance(value, dict):
        return {k: _redact_all(v, key) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact_all(v, key) for v in value]
    return value


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
