"""Where an LLM is and how to call it: :class:`LLMSettings`, each setting taken from, first
found wins, the caller's option > the environment > the config file's ``[llm]`` table > the
default; :func:`llm_configured` says whether a model is named at all."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from kgengine.config import setting
from kgengine.llm.cache import default_cache_dir
from kgengine.llm.errors import LLMError
from kgengine.net import is_loopback

CACHE_OFF = ("off", "none", "false", "0")
OPENAI_ENDPOINT = "https://api.openai.com/v1"  # the openai client's default base URL
LOCAL_CONCURRENCY = 1  # a server on this machine (llama.cpp) runs one generation at a time
REMOTE_CONCURRENCY = 4

Number = TypeVar("Number", int, float)


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


def _number(value: Any, source: str, kind: type[Number], minimum: float) -> Number:
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

    @property
    def endpoint(self) -> str:
        """The base URL requests go to (OpenAI's when none is set)."""
        return self.base_url or OPENAI_ENDPOINT

    @property
    def requests_in_flight(self) -> int:
        """How many requests may be in flight at once: the ``concurrency`` setting, else one
        for a server on this machine and a few for a remote one."""
        default = LOCAL_CONCURRENCY if is_loopback_url(self.base_url) else REMOTE_CONCURRENCY
        return self.concurrency or default


def llm_configured() -> bool:
    """Whether the environment or config file names an LLM model."""
    return LLMSettings.resolve().configured
