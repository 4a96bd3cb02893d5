"""A real OpenAI-compatible chat-completions server on a free loopback port, for every test of
an LLM code path (no LLM is reachable from the tests).

A test scripts the replies: ``script(request) -> Reply | str | (status, content)``, called
once per HTTP request with its number (from 1) and body. The server records every request
(messages, model, temperature, stop, max_tokens), honours ``stop`` the way real servers do
(the reply ends before the first stop sequence), can answer any status (5xx, 4xx) and can
wait before replying (to run past a client's timeout).

Use the ``llm_server`` fixture (registered in conftest's ``pytest_plugins``)::

    def test_x(llm_server):
        server = llm_server(replies("first reply", Reply(status=503), "third"))
        ...server.base_url..., server.requests[0].stop
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
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


@dataclass(frozen=True)
class Reply:
    content: str = ""
    status: int = 200
    delay: float = 0.0  # seconds to wait before answering


ScriptResult = Reply | str | tuple[int, str]
Script = Callable[[FakeRequest], ScriptResult]


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
    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[FakeRequest] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep pytest output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with owner.lock:
                    request = FakeRequest(len(owner.requests) + 1, self.path, body)
                    owner.requests.append(request)
                reply = _as_reply(owner.script(request))
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status == 200:
                    payload: dict[str, Any] = {
                        "id": f"chatcmpl-{request.number}", "object": "chat.completion", "created": 0,
                        "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop", "message": {
                            "role": "assistant", "content": _cut_at_stop(reply.content, request.stop)}}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                else:
                    payload = {"error": {"message": reply.content, "type": "server_error"}}
                data = json.dumps(payload).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

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


@pytest.fixture
def llm_server() -> Iterator[Callable[[Script], FakeLLMServer]]:
    """``llm_server(script)`` starts a server (closed at the end of the test)."""
    servers: list[FakeLLMServer] = []

    def start(script: Script) -> FakeLLMServer:
        servers.append(FakeLLMServer(script))
        return servers[-1]

    yield start
    for server in servers:
        server.close()
