"""What one question to an LLM and its answer are made of, for swzc.search.llm.client: data and the pure work on
it, no connection.

The settings a question is asked under (Settings: the time and tries it may take), the four fields the model
answers with and their limits (SwizzleReply), the record of an exchange (Exchange) and the error that carries
one (LlmError).  Then the parts of a try: the messages as sent (copied, and with the note json_object mode
needs), what one try came to (_Try), and the reading of a server's answer, its refusal and its Retry-After.
Last, the hygiene all text that leaves the client gets: clipped, and the API key redacted.  The names with a
leading underscore are for the client's modules only.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import openai
import pydantic
from pydantic import ConfigDict, Field

from swzc.core.errors import ExitCode, SwzcError

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
