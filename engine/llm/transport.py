"""One chat completion over the OpenAI-compatible HTTP API, as the server sent it: a plain
request, or a streamed one read event by event (``data: {...}`` lines up to ``data: [DONE]``).

Streaming lets the client end a reply early — past its time limit, at a stop sequence, in a
repetition loop — by closing the connection, which a llama.cpp server notices and stops
generating (a plain request runs to the end, and a retry would wait behind it). What the
reply means (stop sequences cut, loops, token counts) is the client's business, not this
module's."""

from __future__ import annotations

import json
import time
from typing import Any, NamedTuple

import openai
from kgengine.llm.errors import LLMError, one_line
from kgengine.llm.replies import STREAMING_LOOP, find_loop
from kgengine.llm.request import LLMRequest


class RawReply(NamedTuple):
    """A reply as it came: ``finish_reason`` None when the server gave none (a stream closed
    by the client at a stop sequence or a loop says ``"stop"`` / ``"runaway"``); ``usage`` the
    server's token counts, if any; ``chunks`` the streamed pieces (None for a plain request)."""

    text: str
    finish_reason: str | None
    usage: dict[str, Any] | None
    chunks: int | None


class StreamDeadline(Exception):
    """A streamed reply ran past the request's time limit (the stream is closed)."""


class BrokenStream(Exception):
    """The server ended a stream without finishing it (no finish reason, no ``[DONE]``); the
    message is the text received so far."""


class ChatTransport:
    """Sends chat completions to one endpoint through the ``openai`` client (its own retries
    off: :class:`~kgengine.llm.retry.RetryPolicy` decides)."""

    def __init__(self, client: openai.OpenAI, model: str, endpoint: str, timeout: float) -> None:
        self.client, self.model, self.endpoint, self.timeout = client, model, endpoint, timeout

    def send(self, request: LLMRequest, *, stream: bool) -> RawReply:
        arguments: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": request.temperature,
        }
        if request.stop:
            arguments["stop"] = list(request.stop)
        if request.max_tokens is not None:
            arguments["max_tokens"] = request.max_tokens
        return self._stream(arguments, request) if stream else self._plain(arguments)

    def _plain(self, arguments: dict[str, Any]) -> RawReply:
        response: Any = self.client.chat.completions.create(**arguments)
        if not response.choices:
            return RawReply("", None, None, None)
        choice = response.choices[0]
        usage = response.usage.model_dump() if getattr(response, "usage", None) is not None else None
        return RawReply(choice.message.content or "", choice.finish_reason, usage, None)

    def _stream(self, arguments: dict[str, Any], request: LLMRequest) -> RawReply:
        """Read a streamed reply; leaving the ``with`` block closes the connection."""
        deadline = time.monotonic() + self.timeout
        longest_stop = max((len(s) for s in request.stop), default=0)
        text, chunks, finish, usage = "", 0, None, None
        with self.client.chat.completions.with_streaming_response.create(
                **arguments, stream=True, stream_options={"include_usage": True}) as response:
            for line in response.iter_lines():
                if time.monotonic() > deadline:  # lines include the server's keep-alive pings
                    raise StreamDeadline()
                if not line.startswith("data:"):
                    continue
                data = line[len("data:"):].strip()
                if data == "[DONE]":
                    return RawReply(text, finish, usage, chunks)
                try:
                    event = json.loads(data)
                except ValueError:
                    raise LLMError(f"LLM endpoint {self.endpoint} sent a malformed stream event: "
                                   f"{one_line(data)[:200]!r}") from None
                if not isinstance(event, dict):
                    continue
                if event.get("error"):
                    raise LLMError(f"LLM endpoint {self.endpoint} failed while streaming: "
                                   f"{one_line(str(event['error']))}")
                if event.get("usage"):
                    usage = event["usage"]
                for choice in event.get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content")
                    if piece:
                        text += piece
                        chunks += 1
                        tail = text[-(len(piece) + longest_stop):]
                        if request.stop and any(s in tail for s in request.stop):
                            return RawReply(text, "stop", None, chunks)  # closing here stops the server
                        if chunks % 8 == 0 and find_loop(text, *STREAMING_LOOP) is not None:
                            return RawReply(text, "runaway", None, chunks)
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
        if finish is None:
            raise BrokenStream(text)
        return RawReply(text, finish, usage, chunks)  # finished, the server just did not send [DONE]
