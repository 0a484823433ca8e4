"""How a request to an LLM travels, for swzc.search.llm.client: the SDK's own HTTP client with every transport
guarded, so that no connect, read or write waits past the try's deadline, a reply is refused once it passes
MAX_REPLY_BYTES (or says it will), and a compressed reply is refused unread.

The deadline is set around each try by the client (_DEADLINE) and read here at every wait.  A reply stopped
here raises _SlowReply or _RefusedReply, which the client turns into the reason a try failed.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from types import ModuleType
from typing import Any

import openai

from swzc.search.llm.client_exchange import _clip

MAX_REPLY_BYTES = 1 << 20  # a reply is a JSON object of a few kilobytes; past this it is not one


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
