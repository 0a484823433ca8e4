"""A scripted chat-completions server on the loopback interface, so the LLM client's tests drive the real SDK
over real HTTP instead of a mock that could agree with the client's mistakes.

Each request consumes the next action of the script; a request past the end is answered with a 500 that
says so, which makes a test that asks too often fail loudly instead of hanging.  Every request is recorded
(path, headers, parsed body) for assertions.  Nothing sleeps unbounded: a `Hang` or a `Trickle` lasts at most
`MAX_HANG_S` and wakes at once when the server stops, and stopping the server closes every connection and
waits for the threads that served them, so a test leaves none behind.
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_HANG_S = 10.0
MAX_BODY_BYTES = 1 << 20
STOP_WAIT_S = 5.0


@dataclass(frozen=True)
class Reply:
    """A normal answer whose message content is `content`, verbatim."""

    content: str
    prompt_tokens: int = 11
    completion_tokens: int = 7


@dataclass(frozen=True)
class ReplyJson:
    """A normal answer whose content is `fields` serialised as JSON."""

    fields: dict[str, Any]


@dataclass(frozen=True)
class Status:
    """An error answer in the shape OpenAI uses: {"error": {"message": ..., "type": ...}}, with `headers`
    added (Retry-After, say)."""

    code: int
    message: str
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Hang:
    """Accept the request, say nothing for `seconds` (capped at MAX_HANG_S), then close the connection."""

    seconds: float


@dataclass(frozen=True)
class Refuse:
    """An answer with no content and a `refusal`, as strict structured outputs report one."""

    refusal: str


@dataclass(frozen=True)
class Truncated:
    """An answer cut off by the token limit: finish_reason "length"."""

    content: str


@dataclass(frozen=True)
class Filtered:
    """An answer stopped by the server's content filter: finish_reason "content_filter"."""

    content: str


@dataclass(frozen=True)
class RejectSchema:
    """The 400 a server without structured outputs gives for a json_schema response_format."""

    message: str = "response_format json_schema is not supported by this server"


@dataclass(frozen=True)
class Garbage:
    """A 200 whose HTTP body is not JSON at all (a broken proxy, a wrong port)."""

    text: str


@dataclass(frozen=True)
class Delayed:
    """`action`, after `seconds` of silence (capped at MAX_HANG_S): a slow server rather than a hung one."""

    seconds: float
    action: Action


@dataclass(frozen=True)
class Trickle:
    """Headers of a 200 that promise a body of `length` bytes, then one byte of it every `every_s` seconds for
    `for_s` seconds, then silence: all of it within MAX_HANG_S.  `for_s` 0: headers, then nothing."""

    every_s: float
    for_s: float = MAX_HANG_S
    length: int = 100_000


@dataclass(frozen=True)
class Huge:
    """A `status` answer with a body of `size` bytes, made a piece at a time as it is sent, never held whole:
    chunked, or with its Content-Length declared up front."""

    size: int
    declared: bool = False
    status: int = 200


@dataclass(frozen=True)
class Compressed:
    """A normal answer sent gzip-compressed (Content-Encoding: gzip) whatever the request accepts."""

    fields: dict[str, Any]


Action = (Reply | ReplyJson | Status | Hang | Refuse | Truncated | Filtered | RejectSchema | Garbage | Delayed
          | Trickle | Huge | Compressed)


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # the parsed JSON body, None when it was not JSON


def valid_reply(**overrides: Any) -> dict[str, Any]:
    """A reply that satisfies SwizzleReply; tests override single fields to break it."""
    fields: dict[str, Any] = {
        "name": "grouped-8",
        "expectation": "Blocks that share B columns run together, so B stays in L2.",
        "lessons": "",
        "body": "return {bid % 8, bid / 8};",
    }
    fields.update(overrides)
    return fields


def _completion(content: str | None, *, refusal: str | None = None, finish_reason: str = "stop",
                prompt_tokens: int = 11, completion_tokens: int = 7) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class _Server(ThreadingHTTPServer):
    """A thread per connection, as ThreadingHTTPServer has, each kept with its connection (once the server has
    stopped accepting, the list is complete) so that stopping can close them all and wait for every thread."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.serving: list[tuple[socket.socket, threading.Thread]] = []

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self.process_request_thread, args=(request, client_address), daemon=True)
        self.serving.append((request, thread))  # before it starts: stop() never misses a thread
        thread.start()


class LlmServer:
    """The server and its script; use `serve(actions)` to run one for the length of a `with` block."""

    def __init__(self, actions: Sequence[Action]) -> None:
        self._actions = list(actions)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.requests: list[Request] = []
        self._httpd = _Server(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01},
                                        name="llm-test-server", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()  # wakes every Hang and Trickle
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(STOP_WAIT_S)
        for connection, _ in self._httpd.serving:  # wakes a thread waiting to read a request or write a reply
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # closed already
        until = time.monotonic() + STOP_WAIT_S
        for _, thread in self._httpd.serving:
            thread.join(max(0.0, until - time.monotonic()))

    def _next_action(self, request: Request) -> Action | None:
        with self._lock:
            self.requests.append(request)
            return self._actions.pop(0) if self._actions else None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms wait between

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY_BYTES)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                headers = {name.lower(): value for name, value in self.headers.items()}
                action = server._next_action(Request(self.path, headers, body))
                if self.path != "/v1/chat/completions":
                    self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                elif action is None:
                    self._send_json(500, {"error": {"message": "the test server's script is exhausted",
                                                    "type": "server_error"}})
                else:
                    self._perform(action)

            def _perform(self, action: Action) -> None:
                match action:
                    case Reply(content, prompt_tokens, completion_tokens):
                        self._send_json(200, _completion(content, prompt_tokens=prompt_tokens,
                                                         completion_tokens=completion_tokens))
                    case ReplyJson(fields):
                        self._send_json(200, _completion(json.dumps(fields)))
                    case Status(code, message, headers):
                        self._send_json(code, {"error": {"message": message, "type": "test_error"}}, headers)
                    case Hang(seconds):
                        server._stopping.wait(min(seconds, MAX_HANG_S))
                        self.close_connection = True
                    case Refuse(refusal):
                        self._send_json(200, _completion(None, refusal=refusal))
                    case Truncated(content):
                        self._send_json(200, _completion(content, finish_reason="length"))
                    case Filtered(content):
                        self._send_json(200, _completion(content, finish_reason="content_filter"))
                    case RejectSchema(message):
                        self._send_json(400, {"error": {"message": message, "type": "invalid_request_error",
                                                        "param": "response_format"}})
                    case Garbage(text):
                        self._send(200, text.encode(), "application/json")
                    case Delayed(seconds, inner):
                        if not server._stopping.wait(min(seconds, MAX_HANG_S)):
                            self._perform(inner)
                    case Trickle(every_s, for_s, length):
                        self._trickle(every_s, min(for_s, MAX_HANG_S), length)
                    case Huge(size, declared, status):
                        self._huge(size, declared, status)
                    case Compressed(fields):
                        data = gzip.compress(json.dumps(_completion(json.dumps(fields))).encode())
                        self._send(200, data, "application/json", (("Content-Encoding", "gzip"),))

            def _trickle(self, every_s: float, for_s: float, length: int) -> None:
                self.close_connection = True
                started = time.monotonic()
                try:
                    self._head(200, "application/json", (("Content-Length", str(length)),))
                    sent = 0
                    while sent < length and time.monotonic() - started + every_s <= for_s:
                        if server._stopping.wait(every_s):
                            return
                        self.wfile.write(b" ")
                        sent += 1
                    server._stopping.wait(max(0.0, MAX_HANG_S - (time.monotonic() - started)))
                except OSError:  # the client gave up waiting: as intended
                    pass

            def _huge(self, size: int, declared: bool, status: int) -> None:
                self.close_connection = True
                piece = b"x" * (64 << 10)
                framing = ("Content-Length", str(size)) if declared else ("Transfer-Encoding", "chunked")
                try:
                    self._head(status, "application/json", (framing,))
                    left = size
                    while left > 0 and not server._stopping.is_set():
                        part = piece[: min(left, len(piece))]
                        self.wfile.write(part if declared else b"%x\r\n%s\r\n" % (len(part), part))
                        left -= len(part)
                    if not declared:
                        self.wfile.write(b"0\r\n\r\n")
                except OSError:  # the client stopped reading: as intended
                    pass

            def _send_json(self, code: int, payload: Any, headers: tuple[tuple[str, str], ...] = ()) -> None:
                self._send(code, json.dumps(payload).encode(), "application/json", headers)

            def _send(self, code: int, data: bytes, content_type: str,
                      headers: tuple[tuple[str, str], ...] = ()) -> None:
                try:
                    self._head(code, content_type, (("Content-Length", str(len(data))), *headers))
                    self.wfile.write(data)
                except OSError:  # the client gave up waiting: as intended
                    self.close_connection = True

            def _head(self, code: int, content_type: str, headers: tuple[tuple[str, str], ...]) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()

        return Handler


@contextmanager
def serve(actions: Sequence[Action]) -> Iterator[LlmServer]:
    """A started server for the `with` block; it is stopped on the way out, even when the test fails."""
    server = LlmServer(actions)
    server.start()
    try:
        yield server
    finally:
        server.stop()
