"""What is asked of an LLM and what comes back: :class:`LLMRequest` (one chat completion, its
messages and generation settings) and :class:`Completion` (the reply and what happened to it)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


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
