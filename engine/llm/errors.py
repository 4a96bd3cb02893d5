"""What goes wrong talking to an LLM, as kgengine's errors, and the endpoint's failures
translated into them: one line each, saying which endpoint and why (the ``openai`` client's
exceptions never reach a user)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kgengine.errors import ServiceError

if TYPE_CHECKING:
    import openai
    from kgengine.llm.request import Completion

# how servers word an over-long prompt (OpenAI, vLLM, llama.cpp, Ollama)
TOO_LONG = re.compile(r"context (length|window|size)|maximum context|too long|exceeds? (the )?(context|max)",
                      re.IGNORECASE)


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


def refusal(exc: openai.APIStatusError, model: str, endpoint: str) -> LLMError:
    """A 4xx answer (other than 429) as the error to raise: retrying will not help."""
    message = error_message(exc)
    if exc.status_code in (400, 413) and TOO_LONG.search(message):
        return PromptTooLongError(
            f"the prompt does not fit {model}'s context at {endpoint}: {message} (shorten the "
            f"prompt or max_tokens, or serve the model with a larger context)")
    return LLMError(f"LLM endpoint {endpoint} refused the request: HTTP {exc.status_code}: {message}")


def error_message(exc: openai.APIStatusError) -> str:
    """The server's own message in an error answer (OpenAI's ``error.message``, FastAPI's
    ``detail``), else the exception's text; on one line."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return one_line(str(inner["message"]))
        if isinstance(inner, str):
            return one_line(inner)
        if body.get("detail"):
            return one_line(str(body["detail"]))
    return one_line(str(exc))


def describe(exc: Exception) -> str:
    """A failure in a few words: its HTTP status when it has one, else its kind."""
    status = getattr(exc, "status_code", None)  # only the openai client's status errors carry one
    return f"HTTP {status}: {one_line(str(exc))}" if status is not None else (
        f"{type(exc).__name__}: {one_line(str(exc))}")


def times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def one_line(text: str) -> str:
    return " ".join(text.split())
