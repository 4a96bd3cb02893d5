"""The KG-RAG interfaces: a question goes through an entity linker, a retriever, a selector
and an answerer; each is a small protocol with swappable parts (neo4j-graphrag style).

An answerer sees a question's text and topic entity only (:class:`Question` has no other
field on purpose): gold answers, the removed triple, the rule and the paths of a BRINK
record never reach it."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kgengine.errors import KGEngineError, ServiceError
from kgengine.model import Question, Triple

if TYPE_CHECKING:
    from kgengine.llm.protocol import UsageTracking

USAGE_KEYS = ("requests", "cache_hits", "prompt_tokens", "completion_tokens")
# the one default of each setting every method shares (kgengine.rag.methods.AnswerSettings)
DEFAULT_HOPS = 3  # most hops of a relation path; k-hop retrieval depth
DEFAULT_TOP_K = 20  # triples put in front of an LLM


@dataclass(frozen=True)
class Evidence:
    """Why an answer was given: a grounded KG path from the topic entity to the answer,
    and the mined rule (with its confidence) that turned the path into the answer, if any."""

    path: tuple[Triple, ...]
    rule: str | None = None
    confidence: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"path": [list(t) for t in self.path], "rule": self.rule, "confidence": self.confidence}


@dataclass
class ScoredAnswer:
    id: str  # entity id in the answered graph
    score: float
    label: str | None = None
    evidence: list[Evidence] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "score": self.score,
                "evidence": [e.to_json() for e in self.evidence]}


@dataclass
class Answer:
    """An answerer's result. ``answers`` are in rank order; ``raw_output`` is the text a
    strict evaluator scores (an LLM's reply, or the answers' surface forms joined by ', ')."""

    question: str
    topic_entity: str | None
    method: str
    answers: list[ScoredAnswer] = field(default_factory=list)
    relation_path: list[str] | None = None  # e.g. ["directed_by", "^starred_actors"] (^ = inverse)
    learned_from: str | None = None  # "train" / "nearest-pattern" / "zero-shot" / None
    reasoning: list[str] = field(default_factory=list)  # reasoning chain, one step a line
    raw_output: str = ""
    timings: dict[str, float] = field(default_factory=dict)  # milliseconds, "total_ms" always
    error: str | None = None  # a failed question: why (then no answers)
    service_failed: bool = False  # the error is a service's (LLM endpoint), not the question's
    usage: dict[str, int] = field(default_factory=dict)  # LLM requests and tokens of this question

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "question": self.question, "topic_entity": self.topic_entity, "method": self.method,
            "answers": [a.to_json() for a in self.answers], "relation_path": self.relation_path,
            "learned_from": self.learned_from, "reasoning": self.reasoning,
            "raw_output": self.raw_output, "timings": self.timings,
        }
        if self.error is not None:
            out["error"] = self.error
            out["service_failed"] = self.service_failed
        if self.usage:
            out["usage"] = self.usage
        return out


@dataclass(frozen=True)
class LinkedEntity:
    """A question's topic entity in the graph."""

    id: str
    mention: str | None  # the string of the question that names it (None: not in the text)
    how: str  # "topic entity (id)", "[bracket] (label)", "text match (label)", "given", ...


class EntityLinker(Protocol):
    def link_mention(self, question: Question) -> LinkedEntity:
        """The topic entity (and how the question names it); raises KGEngineError with close
        matches."""
        ...


class Retriever(Protocol):
    def search(self, question: Question, entity: str) -> list[Triple]:
        """Candidate triples for the question around ``entity``."""
        ...


class Selector(Protocol):
    def select(self, question: Question, triples: Sequence[Triple], k: int) -> list[Triple]:
        """The ``k`` triples most relevant to the question, best first."""
        ...


class Answerer(Protocol):
    method: str

    def answer(self, question: Question) -> Answer: ...


def failed_answer(question: Question, method: str, error: str) -> Answer:
    """The one record of a question that could not be answered."""
    return Answer(question=question.text, topic_entity=question.topic_entity, method=method, error=error)


def answer_or_error(answerer: Answerer, question: Question) -> Answer:
    """``answerer.answer(question)``, or the error record when the user can fix the cause
    (a topic not in the graph, an endpoint that fails): a batch goes on; a bug still raises."""
    started = time.perf_counter()
    try:
        return answerer.answer(question)
    except KGEngineError as exc:
        failed = failed_answer(question, answerer.method, str(exc))
        failed.service_failed = isinstance(exc, ServiceError)
        failed.timings["total_ms"] = (time.perf_counter() - started) * 1000.0
        return failed


class Timings:
    """Per-step wall time of one question, in milliseconds (one unit everywhere)."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - started) * 1000.0


def _usage_tracking(llm: object) -> UsageTracking | None:
    """``llm`` when it tracks usage, else None. kgengine.llm (and with it the openai client, a
    second to import) is imported only for an answerer that has an LLM."""
    if llm is None:
        return None
    from kgengine.llm.protocol import UsageTracking

    return llm if isinstance(llm, UsageTracking) else None


class BaseAnswerer(ABC):
    """The answering pipeline every method shares (a template, as neo4j-graphrag's
    ``Retriever.search`` over ``get_search_results``): link the topic entity -> the method's
    :meth:`get_answer` -> an :class:`Answer` with its timings in ms (``link_entity_ms``, the
    method's own steps, ``total_ms``).

    The topic is linked the same way for every method: a given ``topic_entity`` is resolved
    as an id, private id or label of the graph; without one, the [bracketed] mention or the
    longest entity name in the text. Without a linker (a Python user's bare answerer) a given
    topic is taken as an id as it is."""

    method: str
    entity_linker: EntityLinker | None  # set by the subclass (no class default: dataclass subclasses)
    needs_topic: bool = True  # False: a method that can answer without a topic entity
    error_class: type[KGEngineError] = KGEngineError  # what a missing topic raises

    def answer(self, question: Question) -> Answer:
        timings = Timings()
        started = time.perf_counter()
        # an LLM that tracks usage per thread (kgengine.llm.UsageTracking) gives the question's usage
        tracking = _usage_tracking(getattr(self, "llm", None))  # only LLM methods have an llm
        with tracking.track_usage() if tracking is not None else nullcontext() as usage:
            with timings.step("link_entity_ms"):
                topic = self.link_topic(question)
            answer = self.get_answer(question, topic, timings)
        answer.timings = {**timings.ms, **answer.timings,
                          "total_ms": (time.perf_counter() - started) * 1000.0}
        if usage is not None:
            counted = usage.totals()
            answer.usage = {key: counted[key] for key in USAGE_KEYS}
        return answer

    def link_topic(self, question: Question) -> LinkedEntity | None:
        linker = getattr(self, "entity_linker", None)
        if linker is not None and (question.topic_entity or self.needs_topic):
            return linker.link_mention(question)
        if question.topic_entity:
            return LinkedEntity(question.topic_entity, None, "given")
        if self.needs_topic:
            raise self.error_class(f"method {self.method} needs the question's topic entity (give it, or "
                                "an entity linker)")
        return None

    @abstractmethod
    def get_answer(self, question: Question, topic: LinkedEntity | None, timings: Timings) -> Answer:
        """The method itself: ``topic`` is linked (None only when ``needs_topic`` is false);
        record step times with ``timings.step(NAME_ms)``."""
