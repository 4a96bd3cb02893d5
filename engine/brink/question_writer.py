"""LLM-written questions (BRINK App. D) through the shared LLM package (:mod:`kgengine.llm`):
any OpenAI-compatible endpoint, temperature 0, every response cached on disk so that a
rebuild sends nothing, 429/5xx/timeouts/connection failures retried with backoff.

What is BRINK's own lives here: the App. D prompt (``prompts/brink_question.txt``), cleaning
a model's reply into one question, and rejecting a question that omits the topic entity or
names an answer. A rejected question is asked for again with the reason appended (a new
prompt, since at temperature 0 the same prompt would give the same answer)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from threading import Lock

from kgengine.brink.questions import mentions
from kgengine.llm import LLMRequest, LLMStats, OpenAICompatibleLLM, default_cache_dir, load_prompt

__all__ = ["LLMQuestionWriter", "QuestionStats", "app_d_prompt", "clean_output", "default_cache_dir",
           "rejection"]


def app_d_prompt(head: str, relation: str, tail: str, topic: str, answer: str) -> str:
    return load_prompt("brink_question").fill(entity_h=head, predicate_T=relation, entity_t=tail,
                                              topic_entity=topic, answer_entity=answer)


def clean_output(text: str) -> str:
    """The question from a model's reply: first non-empty line, without an ``Output:`` /
    ``Question:`` prefix or wrapping quotes (small models add them despite the prompt)."""
    for line in text.strip().splitlines():
        line = line.strip()
        for prefix in ("output:", "question:"):
            if line.lower().startswith(prefix):
                line = line[len(prefix):].strip()
        line = line.strip().strip('"“”').strip()
        if line:
            return line
    return ""


def rejection(question: str, topic: str, answers: Sequence[str]) -> str | None:
    """Why a generated question is unusable, or None. ``answers``: the hard answer first,
    then any other correct answer (naming one of those gives the answer away too)."""
    if not question:
        return "it is empty"
    if not mentions(question, topic):
        return f"it does not mention the Topic Entity {topic}"
    named = next((a for a in answers if mentions(question, a)), None)
    if named is not None:
        return f"it mentions the Answer Entity {named}" if named == answers[0] else (
            f"it mentions {named}, another answer to the question")
    return None


@dataclass
class QuestionStats:
    """The writer's counters: the client's (requests, cache hits, retries) and its own."""

    client: LLMStats
    rejected: int = 0  # outputs rejected (topic missing / answer named)
    fallbacks: int = 0  # questions that fell back to the template after every attempt
    _lock: Lock = field(default_factory=Lock, repr=False)

    @property
    def requests(self) -> int:
        return self.client.requests

    @property
    def cache_hits(self) -> int:
        return self.client.cache_hits

    @property
    def server_retries(self) -> int:
        return self.client.retries

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def as_dict(self) -> dict[str, int]:
        return {"requests": self.requests, "cache_hits": self.cache_hits,
                "server_retries": self.server_retries, "rejected": self.rejected,
                "fallbacks": self.fallbacks}


class LLMQuestionWriter:
    """Settings left as None come from the environment / config file (:class:`kgengine.llm.
    LLMSettings`): e.g. ``OPENAI_API_KEY``, ``KGENGINE_LLM_CACHE``, ``KGENGINE_LLM_TIMEOUT``."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        cache_dir: Path | None = None,
        attempts: int = 3,
        server_retries: int | None = None,
        backoff: float = 1.0,
        timeout: float | None = None,
    ) -> None:
        self.llm = OpenAICompatibleLLM(model=model, base_url=base_url, api_key=api_key,
                                       cache_dir=cache_dir, retries=server_retries, backoff=backoff,
                                       timeout=timeout)
        self.model = model
        self.attempts = attempts
        self.stats = QuestionStats(self.llm.stats)
        self._retry_note = load_prompt("brink_retry_note")

    def complete(self, prompt: str) -> str:
        return self.llm.complete(LLMRequest.of(prompt, temperature=0))

    def question(self, head: str, relation: str, tail: str, topic: str, answer: str,
                 other_answers: Sequence[str] = ()) -> str | None:
        """A checked question, or None when every attempt was rejected."""
        prompt = app_d_prompt(head, relation, tail, topic, answer)
        forbidden = [answer, *(a for a in other_answers if a != answer)]
        for _ in range(self.attempts):
            question = clean_output(self.complete(prompt))
            reason = rejection(question, topic, forbidden)
            if reason is None:
                return question
            self.stats.add("rejected")
            # notes accumulate, so each attempt is a new prompt (and a new cache entry)
            prompt += self._retry_note.fill(reason=reason, previous=question or "(empty)")
        self.stats.add("fallbacks")
        return None
