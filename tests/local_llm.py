"""The packaged local model, served once per test session for every real-model test.

``local_llm`` (session scope) starts ``kgengine llm serve`` as a real subprocess on a free
loopback port (1 thread, a 2048-token context: CI has 2 cores) and yields a
:class:`RunningLLM` (``base_url``, ``model``, ``context_length``, ``client_options()``); it
skips, saying which install is missing, without the ``local-llm`` extra. Load it with
``pytest_plugins = ["local_llm"]`` in a test module (conftest.py does not list it), and mark
the tests ``llm_local``::

    pytest_plugins = ["local_llm"]
    pytestmark = pytest.mark.llm_local

    def test_x(local_llm, tmp_path):
        llm = OpenAICompatibleLLM(**local_llm.client_options(), cache_dir=tmp_path / "cache")
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kgengine.llm.local import INSTALL, packaged_models, server_missing

CONTEXT = 2048  # tokens: enough for a KG-RAG prompt, small enough for 2 cores
START_LIMIT = 180.0  # seconds for `kgengine llm serve` to say ready (a hang guard; ~2 s here)


def skip_reason() -> str | None:
    """Why the real-model tests cannot run here, or None."""
    missing = server_missing()
    if missing is not None:
        return missing
    if not packaged_models():
        return f"no packaged model installed: {INSTALL}"
    return None


def serve_command(*options: str) -> list[str]:
    """``kgengine llm serve`` with ``options``, run by this interpreter."""
    return [sys.executable, "-m", "kgengine.cli", "llm", "serve", *options]


@dataclass
class RunningLLM:
    base_url: str
    model: str
    context_length: int
    process: subprocess.Popen[str]
    output: list[str]  # what `kgengine llm serve` printed (stdout and stderr lines)

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1].split("/")[0])

    def client_options(self) -> dict[str, Any]:
        """For OpenAICompatibleLLM / LLMSettings.resolve: this server, no retries' backoff
        to wait for, one request at a time. The context length is left to the client to read
        from the server (/props)."""
        return {"model": self.model, "base_url": self.base_url, "api_key": "local", "backoff": 0.1,
                "concurrency": 1}


def start_serve(*options: str,
                limit: float = START_LIMIT) -> tuple[subprocess.Popen[str], list[str], str | None]:
    """Start ``kgengine llm serve`` and wait until it prints ``ready: URL`` or exits:
    (process, output lines so far, the base URL or None)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(serve_command(*options), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, text=True, env=env)
    output: list[str] = []
    ready = threading.Event()
    url: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line.rstrip("\n"))
            if line.startswith("ready: "):
                url.append(line.split()[1])
                ready.set()
        ready.set()  # the process ended

    threading.Thread(target=read, daemon=True).start()
    ready.wait(limit)
    return process, output, (url[0] if url else None)


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()  # `kgengine llm serve` stops its server on SIGTERM
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def local_llm() -> Iterator[RunningLLM]:
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    started = time.monotonic()
    process, output, url = start_serve("--port", "0", "--threads", "1", "--ctx", str(CONTEXT))
    if url is None:
        stop(process)
        pytest.fail(f"kgengine llm serve did not get ready in {time.monotonic() - started:.0f} s: "
                    + " | ".join(output[-5:]))
    model = next(line.split()[3] for line in output if line.startswith("ready: "))
    try:
        yield RunningLLM(url, model, CONTEXT, process, output)
    finally:
        stop(process)
