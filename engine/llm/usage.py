"""What a client sent and got back, counted: :class:`LLMStats`, per client and, with
:meth:`LLMStats.track`, per thread for a block (one question's requests and tokens)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from threading import Lock

COUNTERS = ("requests", "cache_hits", "retries", "timeouts", "prompt_tokens", "completion_tokens",
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
        for scope in self._scopes():
            scope.add(name, n)

    def as_dict(self) -> dict[str, int]:
        """The request counters (requests, cache hits, retries)."""
        return {"requests": self.requests, "cache_hits": self.cache_hits, "retries": self.retries}

    def totals(self) -> dict[str, int]:
        """Every counter, tokens included."""
        return {name: getattr(self, name) for name in COUNTERS}

    @contextmanager
    def track(self) -> Iterator[LLMStats]:
        """A fresh :class:`LLMStats` counting what this thread does while the block runs: a
        question's requests and tokens, also when questions are answered in parallel."""
        scope = LLMStats()
        scopes = self._scopes()
        self._local.scopes = (*scopes, scope)
        try:
            yield scope
        finally:
            self._local.scopes = scopes

    def _scopes(self) -> tuple[LLMStats, ...]:
        # a thread that never tracked has no scopes attribute on its threading.local yet
        scopes: tuple[LLMStats, ...] = getattr(self._local, "scopes", ())
        return scopes
