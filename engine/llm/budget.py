"""The context budget for any :class:`~kgengine.llm.protocol.LLM`: how many tokens a request
takes, how many are left for more prompt text, how many lines fit. An LLM with the
capabilities (:class:`~kgengine.llm.protocol.ContextWindow`,
:class:`~kgengine.llm.protocol.TokenCounter`) answers for itself; without them the context
length is unknown and tokens are estimated (:func:`kgengine.llm.replies.estimate_tokens`)."""

from __future__ import annotations

from collections.abc import Sequence

from kgengine.llm.protocol import LLM, ContextWindow, TokenCounter
from kgengine.llm.replies import estimate_tokens
from kgengine.llm.request import LLMRequest

# Chat templates wrap every message in role markers and may add a default system message
# (SmolLM2's adds ~20 tokens): request_tokens_of adds this allowance to the messages' text.
MESSAGE_OVERHEAD = 8
REQUEST_OVERHEAD = 32


def context_length_of(llm: LLM) -> int | None:
    """``llm``'s context window in tokens, or None when it does not know (any :class:`LLM`)."""
    return llm.context_length if isinstance(llm, ContextWindow) else None


def count_tokens_of(llm: LLM, text: str) -> int:
    """``text``'s tokens as ``llm`` counts them, or the conservative estimate when it cannot."""
    return llm.count_tokens(text) if isinstance(llm, TokenCounter) else estimate_tokens(text)


def request_tokens_of(llm: LLM, request: LLMRequest) -> int:
    """The prompt tokens ``request`` takes with ``llm``: its messages' text plus an allowance
    for the chat template (``MESSAGE_OVERHEAD`` per message, ``REQUEST_OVERHEAD`` per
    request), so the count is at least what the server will see. Add ``max_tokens`` for the
    budget."""
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
