"""What an LLM is to kgengine, as declared protocols: :class:`LLM` (complete one chat request,
synchronously) is all a feature needs; the capabilities beside it are optional, and code that
can use one checks for it with ``isinstance`` (the protocols are runtime-checkable):

- :class:`ContextWindow` — knows its context length in tokens (None: unknown);
- :class:`TokenCounter` — counts a text's tokens as the model does;
- :class:`UsageTracking` — counts the requests and tokens of a block of work in this thread
  (a question's usage, also when questions are answered in parallel).

:class:`~kgengine.llm.client.OpenAICompatibleLLM` has all three; :mod:`kgengine.llm.budget`
answers with estimates for an LLM without them."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from kgengine.llm.request import LLMRequest
from kgengine.llm.usage import LLMStats


class LLM(Protocol):
    def complete(self, request: LLMRequest) -> str:
        """The assistant's reply to ``request`` (text, stop sequences excluded). Raises
        :class:`~kgengine.llm.errors.LLMError` (:class:`~kgengine.llm.errors.EmptyReplyError`
        for an empty reply)."""
        ...


@runtime_checkable
class ContextWindow(Protocol):
    @property
    def context_length(self) -> int | None:
        """The context window in tokens, prompt and reply together; None when unknown."""
        ...


@runtime_checkable
class TokenCounter(Protocol):
    def count_tokens(self, text: str) -> int:
        """``text``'s tokens as the model counts them (never fewer)."""
        ...


@runtime_checkable
class UsageTracking(Protocol):
    def track_usage(self) -> AbstractContextManager[LLMStats]:
        """Fresh counters of what this thread sends while the ``with`` block runs."""
        ...
