"""A real OpenAI-compatible chat-completions server on a free loopback port, for every test of
an LLM code path (no LLM is reachable from the tests).

A test scripts the replies: ``script(request) -> Reply | str | (status, content)``, called
once per HTTP request with its number (from 1) and body. The server records every request
(messages, model, temperature, stop, max_tokens), honours ``stop`` and ``max_tokens`` the way
real servers do (the reply ends before the first stop sequence; at most max_tokens tokens,
finish reason ``length``), can answer any status (5xx, 4xx) and can wait before replying (to
run past a client's timeout).

It streams like llama.cpp's server when asked to (``"stream": true``): one server-sent event
per token, optionally slowly (``Reply.token_delay``), and it stops generating when the client
closes the connection (``generations`` records how many tokens went out). Options, per server:

- ``honour_stop=False``: a server that ignores ``stop`` (the client must cut);
- ``serial=True``: one generation at a time, the others wait (llama.cpp's single slot);
- ``tokenizer=True``: llama-cpp-python's ``/extras/tokenize/count``; ``n_ctx=N``: llama.cpp's
  ``/props`` context length, and, for a prompt of N tokens or more, HTTP 400 with
  llama-cpp-python's message (a plain request) or a stream that ends empty (a streamed one:
  llama-cpp-python refuses only once the stream has started);
- ``usage=False``: no ``usage`` in replies (llama-cpp-python's streams carry none).

Tokens here are :func:`fake_tokens`: a word or a punctuation mark with its leading spaces.

Use the ``llm_server`` fixture (registered in conftest's ``pytest_plugins``)::

    def test_x(llm_server):
        server = llm_server(replies("first reply", Reply(status=503), "third"))
        ...server.base_url..., server.requests[0].stop
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass(frozen=True)
class FakeRequest:
    number: int  # 1 for the first request the server received
    path: str
    body: dict[str, Any]

    @property
    def model(self) -> str:
        return self.body["model"]

    @property
    def messages(self) -> list[dict[str, str]]:
        return self.body["messages"]

    @property
    def prompt(self) -> str:
        """The last message's content."""
        return self.body["messages"][-1]["content"]

    @property
    def temperature(self) -> float | None:
        return self.body.get("temperature")

    @property
    def stop(self) -> list[str]:
        stop = self.body.get("stop")
        return [stop] if isinstance(stop, str) else list(stop or [])

    @property
    def max_tokens(self) -> int | None:
        return self.body.get("max_tokens")

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))


@dataclass(frozen=True)
class Reply:
    content: str = ""
    status: int = 200
    delay: float = 0.0  # seconds to wait before answering
    token_delay: float = 0.0  # seconds between streamed tokens
    hang_up: bool = False  # a stream ends after the tokens, with no finish reason or [DONE]


@dataclass
class Generation:
    """One reply the server generated: tokens due, tokens sent, whether the client left."""

    number: int
    due: int
    sent: int = 0
    cancelled: bool = False
    finished: bool = False


ScriptResult = Reply | str | tuple[int, str]
Script = Callable[[FakeRequest], ScriptResult]

_TOKEN = re.compile(r"\s*\w+|\s*[^\w\s]|\s+$")


def fake_tokens(text: str) -> list[str]:
    """The fake server's tokens: each word or punctuation mark with its leading whitespace."""
    return _TOKEN.findall(text)


def replies(*items: ScriptResult) -> Script:
    """A script answering the requests in order; one past the end gets HTTP 400 (which the
    client does not retry), so an unexpected request fails the test loudly."""
    queue = list(items)

    def script(request: FakeRequest) -> ScriptResult:
        if request.number > len(queue):
            return Reply(f"unscripted request {request.number}: {request.prompt[:200]}", status=400)
        return queue[request.number - 1]

    return script


def _as_reply(result: ScriptResult) -> Reply:
    if isinstance(result, Reply):
        return result
    if isinstance(result, str):
        return Reply(result)
    status, content = result
    return Reply(content, status)


def _cut_at_stop(text: str, stop: list[str]) -> str:
    cut = min((i for i in (text.find(s) for s in stop if s) if i != -1), default=len(text))
    return text[:cut]


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a handler still sleeping (timeout tests) does not block close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that timed out closed its socket before the late reply: expected here
        pass


class FakeLLMServer:
    def __init__(self, script: Script, *, honour_stop: bool = True, serial: bool = False,
                 tokenizer: bool = False, n_ctx: int | None = None, usage: bool = True) -> None:
        self.script = script
        self.honour_stop, self.tokenizer, self.n_ctx, self.usage = honour_stop, tokenizer, n_ctx, usage
        self.n_ctx_props = True  # False: n_ctx enforced, /props silent (the stock llama_cpp.server)
        self.requests: list[FakeRequest] = []
        self.generations: list[Generation] = []
        self.events: list[tuple[str, int]] = []  # ("start"/"end", request number), in order
        self.lock = threading.Lock()
        self.slot = threading.Lock() if serial else None
        self.in_flight = 0
        self.max_in_flight = 0
        self.extras_calls = 0  # tokenizer / props / models requests
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep pytest output clean
                pass

            def send_json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                with owner.lock:
                    owner.extras_calls += 1
                if self.path == "/v1/models":
                    self.send_json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
                elif self.path == "/props" and owner.n_ctx is not None and owner.n_ctx_props:
                    self.send_json(200, {"default_generation_settings": {"n_ctx": owner.n_ctx}})
                else:
                    self.send_json(404, {"detail": "Not Found"})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/extras/tokenize/count":
                    with owner.lock:
                        owner.extras_calls += 1
                    if owner.tokenizer:
                        self.send_json(200, {"count": len(fake_tokens(body["input"]))})
                    else:
                        self.send_json(404, {"detail": "Not Found"})
                    return
                if self.path != "/v1/chat/completions":
                    with owner.lock:
                        owner.extras_calls += 1
                    self.send_json(404, {"detail": "Not Found"})
                    return
                with owner.lock:
                    request = FakeRequest(len(owner.requests) + 1, self.path, body)
                    owner.requests.append(request)
                    owner.in_flight += 1
                    owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
                try:
                    self.chat(request)
                finally:
                    with owner.lock:
                        owner.in_flight -= 1

            def chat(self, request: FakeRequest) -> None:
                reply = _as_reply(owner.script(request))
                if reply.delay:
                    time.sleep(reply.delay)
                prompt_tokens = sum(len(fake_tokens(m["content"])) for m in request.messages)
                if reply.status != 200:
                    error = {"message": reply.content, "type": "server_error"}
                    self.send_json(reply.status, {"error": error})
                    return
                if owner.n_ctx is not None and prompt_tokens >= owner.n_ctx and request.stream:
                    # llama-cpp-python: the stream starts, then the refusal ends it, empty
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    return
                if owner.n_ctx is not None and prompt_tokens >= owner.n_ctx:
                    message = (f"This model's maximum context length is {owner.n_ctx} tokens, however you "
                               f"requested {prompt_tokens} tokens ({prompt_tokens} in the messages, 0 in the "
                               "completion). Please reduce the length of the messages or completion.")
                    self.send_json(400, {"error": {"message": message, "type": "invalid_request_error",
                                                   "code": "context_length_exceeded"}})
                    return
                text = _cut_at_stop(reply.content, request.stop) if owner.honour_stop else reply.content
                tokens = fake_tokens(text)
                finish = "stop"
                if request.max_tokens is not None and len(tokens) > request.max_tokens:
                    tokens, finish = tokens[:request.max_tokens], "length"
                usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(tokens),
                         "total_tokens": prompt_tokens + len(tokens)}
                with owner.slot or nullcontext():
                    with owner.lock:
                        owner.events.append(("start", request.number))
                        generation = Generation(request.number, len(tokens))
                        owner.generations.append(generation)
                    try:
                        if request.stream:
                            self.stream(request, tokens, finish, usage, reply, generation)
                        else:
                            time.sleep(reply.token_delay * len(tokens))
                            payload: dict[str, Any] = {
                                "id": f"chatcmpl-{request.number}", "object": "chat.completion",
                                "created": 0, "model": request.model,
                                "choices": [{"index": 0, "finish_reason": finish, "message": {
                                    "role": "assistant", "content": "".join(tokens)}}]}
                            if owner.usage:
                                payload["usage"] = usage
                            self.send_json(200, payload)
                            generation.sent, generation.finished = len(tokens), True
                    finally:
                        with owner.lock:
                            owner.events.append(("end", request.number))

            def stream(self, request: FakeRequest, tokens: list[str], finish: str, usage: dict[str, int],
                       reply: Reply, generation: Generation) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()

                def event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
                    chunk = {"id": f"chatcmpl-{request.number}", "object": "chat.completion.chunk",
                             "created": 0, "model": request.model, "choices": choices, **extra}
                    return f"data: {json.dumps(chunk)}\n\n".encode()

                try:
                    self.wfile.write(event([{"index": 0, "delta": {"role": "assistant"},
                                             "finish_reason": None}]))
                    for token in tokens:
                        if reply.token_delay:
                            time.sleep(reply.token_delay)
                        self.wfile.write(event([{"index": 0, "delta": {"content": token},
                                                 "finish_reason": None}]))
                        self.wfile.flush()
                        generation.sent += 1
                    if reply.hang_up:
                        return
                    self.wfile.write(event([{"index": 0, "delta": {}, "finish_reason": finish}]))
                    wants_usage = (request.body.get("stream_options") or {}).get("include_usage")
                    if owner.usage and wants_usage:
                        self.wfile.write(event([], usage=usage))
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                    generation.finished = True
                except (BrokenPipeError, ConnectionResetError):
                    generation.cancelled = True  # the client closed the stream: stop generating

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def prompts(self) -> list[str]:
        return [r.prompt for r in self.requests]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


StartServer = Callable[..., FakeLLMServer]  # the llm_server fixture's type


@pytest.fixture
def llm_server() -> Iterator[StartServer]:
    """``llm_server(script, **options)`` starts a server (closed at the end of the test);
    options as :class:`FakeLLMServer`'s."""
    servers: list[FakeLLMServer] = []

    def start(script: Script, **options: Any) -> FakeLLMServer:
        servers.append(FakeLLMServer(script, **options))
        return servers[-1]

    yield start
    for server in servers:
        server.close()
