"""The LLM capabilities are declared protocols (kgengine.llm.protocol): the real client has
every one, a bare LLM none, and the context budget and an answer's usage follow from what an
LLM declares (no attribute guessing)."""

from __future__ import annotations

from contextlib import AbstractContextManager

import pytest
from kgengine.llm import LLM, LLMRequest, LLMStats, OpenAICompatibleLLM, estimate_tokens
from kgengine.llm.budget import context_length_of, count_tokens_of, fit_count, request_tokens_of, tokens_left
from kgengine.llm.protocol import ContextWindow, TokenCounter, UsageTracking
from kgengine.model import Question
from kgengine.rag.base import Answer, BaseAnswerer, LinkedEntity, Timings


class Bare:
    """An LLM with no capability beyond completing a request."""

    def complete(self, request: LLMRequest) -> str:
        return "Paris"


class Sized(Bare):
    """Knows its context and counts one token per character; tracks usage."""

    def __init__(self) -> None:
        self.stats = LLMStats()

    @property
    def context_length(self) -> int | None:
        return 100

    def count_tokens(self, text: str) -> int:
        return len(text)

    def complete(self, request: LLMRequest) -> str:
        self.stats.add("requests")
        self.stats.add("prompt_tokens", request_tokens_of(self, request))
        return "Paris"

    def track_usage(self) -> AbstractContextManager[LLMStats]:
        return self.stats.track()


class Asking(BaseAnswerer):
    method = "asking"
    entity_linker = None
    needs_topic = False

    def __init__(self, llm: LLM) -> None:
        self.llm = llm

    def get_answer(self, question: Question, topic: LinkedEntity | None, timings: Timings) -> Answer:
        reply = self.llm.complete(LLMRequest.of(question.text))
        return Answer(question.text, None, self.method, raw_output=reply)


def test_the_client_declares_every_capability() -> None:
    llm = OpenAICompatibleLLM(model="m", base_url="http://127.0.0.1:9/v1", cache_dir="off",
                              context_length=512)  # configured: nothing is asked of the server
    assert isinstance(llm, ContextWindow) and isinstance(llm, TokenCounter) and isinstance(llm, UsageTracking)
    assert context_length_of(llm) == 512
    with llm.track_usage() as usage:
        assert isinstance(usage, LLMStats) and usage.requests == 0


def test_an_llm_without_capabilities_gets_estimates_and_no_usage() -> None:
    bare = Bare()
    assert not isinstance(bare, ContextWindow | TokenCounter | UsageTracking)
    text = "(7, aunt, 72)"
    assert count_tokens_of(bare, text) == estimate_tokens(text) and context_length_of(bare) is None
    assert tokens_left(bare, LLMRequest.of("q")) is None
    answer = Asking(bare).answer(Question("capital of France?"))
    assert answer.raw_output == "Paris" and answer.usage == {}


def test_declared_capabilities_are_used() -> None:
    sized = Sized()
    request = LLMRequest.of("abcd", max_tokens=10)
    assert count_tokens_of(sized, "abcdef") == 6
    assert request_tokens_of(sized, request) == 4 + 8 + 32  # text + one message + the request
    assert tokens_left(sized, request) == 100 - 10 - (4 + 8 + 32)
    assert fit_count(sized, ["ab"] * 5, 5) == 2  # "ab\nab" is 5 characters
    answer = Asking(sized).answer(Question("capital?"))
    assert answer.usage == {"requests": 1, "cache_hits": 0, "prompt_tokens": 8 + 8 + 32,
                            "completion_tokens": 0}


@pytest.mark.parametrize("llm", [Bare(), Sized()], ids=["bare", "sized"])
def test_usage_is_counted_per_question(llm: LLM) -> None:
    answerer = Asking(llm)
    first, second = answerer.answer(Question("a")), answerer.answer(Question("b"))
    if isinstance(llm, UsageTracking):
        assert first.usage["requests"] == second.usage["requests"] == 1
    else:
        assert first.usage == second.usage == {}
