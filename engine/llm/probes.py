"""What an endpoint says about itself, asked once per client: whether it answers at all
(:meth:`ServerProbe.check`, ``GET /models``), its context length (vLLM's ``max_model_len`` in
``/v1/models``; llama.cpp's ``/props``) and its tokenizer (llama-cpp-python's
``/extras/tokenize/count``; ``llama-server``'s and vLLM's ``/tokenize``). OpenAI itself
reports neither: nothing is asked there."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from threading import Lock
from typing import Any

import httpx2  # the openai client's HTTP library: installed with it (httpx is not)
import openai
from kgengine.llm.errors import LLMError, describe, error_message
from kgengine.llm.settings import LLMSettings

PROBE_TIMEOUT = 5.0  # seconds, for the context-length and tokenizer endpoints


class ServerProbe:
    """Thread-safe: each question is put to the server once, the first time it is needed."""

    def __init__(self, client: openai.OpenAI, settings: LLMSettings, api_key: str) -> None:
        self.client, self.settings, self._key = client, settings, api_key
        self.model: str = settings.model or ""
        self._lock = Lock()
        self._probed_length = False
        self._length: int | None = None
        self._probed_counter = False
        self._counter: Callable[[str], int] | None = None

    def check(self, timeout: float = 10.0) -> None:
        """Fail at once, in one line, when the endpoint does not answer or refuses the key
        (``GET /models``). An endpoint without that route (404) passes: it answered."""
        endpoint = self.settings.endpoint
        try:
            self.client.with_options(timeout=timeout, max_retries=0).models.list()
        except openai.APIConnectionError as exc:
            raise LLMError(f"LLM endpoint {endpoint} does not answer ({describe(exc)}); start it, or "
                           "point --llm-base-url at one that runs") from None
        except openai.AuthenticationError as exc:
            raise LLMError(f"LLM endpoint {endpoint} refused the API key: {error_message(exc)}") from None
        except openai.APIStatusError:
            pass  # it answered

    def context_length(self) -> int | None:
        """The context length the server reports, or None."""
        with self._lock:
            if not self._probed_length:
                self._length = self._probe_context_length()
                self._probed_length = True
        return self._length

    def token_counter(self) -> Callable[[str], int] | None:
        """The server's tokenizer as a counting function, or None when it has none."""
        with self._lock:
            if not self._probed_counter:
                self._counter = self._probe_counter()
                self._probed_counter = True
        return self._counter

    def _root(self) -> str:
        """The server's root URL (llama.cpp and vLLM serve their extras beside ``/v1``)."""
        base = self.settings.endpoint.rstrip("/")
        return base[: -len("/v1")] if base.endswith("/v1") else base

    @cached_property
    def _session(self) -> httpx2.Client:
        """One connection pool for the probes: a server tokenizer counts several times a
        question, and a new connection each time was most of a count's cost."""
        return httpx2.Client(timeout=PROBE_TIMEOUT, headers={"Authorization": f"Bearer {self._key}"})

    def _http(self, method: str, url: str, body: Any = None) -> Any:
        response = self._session.request(method, url, json=body)
        response.raise_for_status()
        return response.json()

    def _probe_context_length(self) -> int | None:
        if self.settings.base_url is None:
            return None  # OpenAI itself reports no context length
        try:
            listed = self._http("GET", self.settings.endpoint.rstrip("/") + "/models").get("data") or []
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
