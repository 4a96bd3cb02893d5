"""The LLM protocol (complete one chat request, synchronously) and its implementation for any
OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp's server, Ollama, LM Studio), on the
``openai`` client, with an on-disk response cache and retries.

Settings come from, in this order: arguments > environment > config file ``[llm]`` table >
defaults (see :class:`LLMSettings`). Retries: 429, 5xx, timeouts and connection failures are
retried with exponential backoff (``backoff * 2**attempt`` seconds); any other 4xx fails at
once (a bad request stays bad). Failures are never cached."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from threading import Lock
from typing import Any, Protocol

import openai
from kgengine.config import setting
from kgengine.errors import KGEngineError
from kgengine.llm.cache import ResponseCache, default_cache_dir

RETRYABLE = (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError)
# (APITimeoutError is an APIConnectionError)
CACHE_NAMESPACE = "chat"
CACHE_OFF = ("off", "none", "false", "0")


class LLMError(KGEngineError):
    """The endpoint refused a request or kept failing, or no LLM is configured."""


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


class LLM(Protocol):
    def complete(self, request: LLMRequest) -> str:
        """The assistant's reply to ``request`` (text, stop sequences excluded)."""
        ...


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to the first stop sequence: servers that ignore ``stop`` behave like the
    ones that honour it."""
    cut = min((i for i in (text.find(s) for s in stop if s) if i != -1), default=len(text))
    return text[:cut]


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


@dataclass(frozen=True)
class LLMSettings:
    """Where an LLM is and how to call it.

    ==========  ==========================================  ===============  ===========
    setting     environment (first set wins)                config ``[llm]``  default
    ==========  ==========================================  ===============  ===========
    model       KGENGINE_LLM_MODEL                          model            none
    base_url    KGENGINE_LLM_BASE_URL, OPENAI_BASE_URL      base_url         OpenAI
    api_key     KGENGINE_LLM_API_KEY, OPENAI_API_KEY        api_key          none
    timeout     KGENGINE_LLM_TIMEOUT (seconds per request)  timeout          120
    retries     KGENGINE_LLM_RETRIES                        retries          5
    cache       KGENGINE_LLM_CACHE (a folder, or "off")     cache            user cache
    ==========  ==========================================  ===============  ===========
    """

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    timeout: float = 120.0
    retries: int = 5
    backoff: float = 1.0
    cache_dir: Path | None = field(default_factory=default_cache_dir)  # None: no cache
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
        return cls(str(chosen_model) if chosen_model else None, str(chosen_url) if chosen_url else None,
                   str(chosen_key) if chosen_key else None, chosen_timeout, chosen_retries,
                   chosen_backoff, chosen_cache, sources)

    @property
    def configured(self) -> bool:
        """Whether a model is named (kgengine then defaults to the LLM methods)."""
        return bool(self.model)


def llm_configured() -> bool:
    """Whether the environment or config file names an LLM model."""
    return LLMSettings.resolve().configured


@dataclass
class LLMStats:
    requests: int = 0  # HTTP calls that returned a completion
    cache_hits: int = 0
    retries: int = 0  # retried 429/5xx/timeout/connection failures
    _lock: Lock = field(default_factory=Lock, repr=False, compare=False)

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def as_dict(self) -> dict[str, int]:
        return {"requests": self.requests, "cache_hits": self.cache_hits, "retries": self.retries}


class OpenAICompatibleLLM:
    """An :class:`LLM` on any OpenAI-compatible ``/v1/chat/completions`` endpoint.

    Thread-safe: the ``openai`` client is, the stats are locked and cache writes are atomic,
    so one instance may serve a thread pool."""

    def __init__(self, settings: LLMSettings | None = None, *, cache: ResponseCache | None = None,
                 **overrides: Any) -> None:
        """``settings`` as resolved, or (without it) ``LLMSettings.resolve(**overrides)``.
        ``cache``: a cache object to use instead of the settings' folder."""
        if settings is not None and overrides:
            raise TypeError("pass either settings or keyword overrides, not both")
        self.settings = settings or LLMSettings.resolve(**overrides)
        if not self.settings.model:
            raise LLMError("no LLM model configured: pass --llm-model, set KGENGINE_LLM_MODEL or "
                           "put model = \"...\" in the [llm] table of the config file")
        key = self.settings.api_key
        if not key:
            if self.settings.base_url is None:
                raise LLMError("the OpenAI API needs a key: set OPENAI_API_KEY (or KGENGINE_LLM_API_KEY, "
                               "or [llm] api_key), or point base_url at an OpenAI-compatible server")
            key = "unused"  # local OpenAI-compatible servers accept any key
        # our own retry loop owns backoff, so the client's is off
        self.client = openai.OpenAI(api_key=key, base_url=self.settings.base_url, max_retries=0,
                                    timeout=self.settings.timeout)
        self.model: str = self.settings.model
        self.cache = cache if cache is not None else (
            ResponseCache(self.settings.cache_dir) if self.settings.cache_dir is not None else None)
        self.stats = LLMStats()

    @property
    def endpoint(self) -> str:
        return self.settings.base_url or "https://api.openai.com/v1"

    def complete(self, request: LLMRequest) -> str:
        key = request.cache_key(self.model)
        if self.cache is not None:
            cached = self.cache.get(CACHE_NAMESPACE, key)
            if isinstance(cached, str):
                self.stats.add("cache_hits")
                return cached
        text = cut_at_stop(self._send(request), request.stop)
        self.stats.add("requests")
        if self.cache is not None:
            self.cache.put(CACHE_NAMESPACE, key, text)
        return text

    def _send(self, request: LLMRequest) -> str:
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
        for attempt in range(retries + 1):
            try:
                response: Any = self.client.chat.completions.create(**arguments)
            except RETRYABLE as exc:
                if attempt == retries:
                    raise LLMError(f"LLM endpoint {self.endpoint} failed {attempt + 1} times: "
                                   f"{_describe(exc)}") from exc
                self.stats.add("retries")
                time.sleep(self.settings.backoff * 2**attempt)
            except openai.APIStatusError as exc:  # 4xx other than 429: retrying will not help
                raise LLMError(f"LLM endpoint {self.endpoint} refused the request: {_describe(exc)}") from exc
            else:
                if not response.choices:
                    return ""
                return response.choices[0].message.content or ""
        raise AssertionError("unreachable")  # the loop returns or raises


def _describe(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    return f"HTTP {status}: {exc}" if status is not None else f"{type(exc).__name__}: {exc}"
