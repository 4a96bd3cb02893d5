"""When a failed request is asked again: 429, 5xx, timeouts and connection failures are
transient and retried with exponential backoff (``backoff * 2**attempt`` seconds); any other
4xx fails at once (a bad request stays bad). A stream the server broke off is retried too
(:class:`~kgengine.llm.transport.BrokenStream`, handled by the client)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx2  # the openai client's HTTP library: installed with it (httpx is not)
import openai
from kgengine.llm.transport import StreamDeadline

# (APITimeoutError is an APIConnectionError)
TRANSIENT = (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError,
             httpx2.TransportError, StreamDeadline)


def timed_out(exc: BaseException) -> bool:
    """Whether a transient failure was the request's time limit running out."""
    return isinstance(exc, StreamDeadline | openai.APITimeoutError | httpx2.TimeoutException)


@dataclass(frozen=True)
class RetryPolicy:
    retries: int  # asked again at most this many times
    backoff: float  # seconds before the first retry, doubled each time

    @property
    def attempts(self) -> range:
        return range(self.retries + 1)

    def last(self, attempt: int) -> bool:
        return attempt == self.retries

    def wait(self, attempt: int) -> None:
        """Sleep before the retry that follows ``attempt`` (0 for the first request)."""
        time.sleep(self.backoff * 2**attempt)
