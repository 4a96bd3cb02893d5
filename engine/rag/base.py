"""The KG-RAG interfaces: a question goes through an entity linker, a retriever, a selector
and an answerer; each is a small protocol with swappable parts (neo4j-graphrag style).

An answerer sees a question's text and topic entity only (:class:`Question` has no other
field on purpose): gold answers, the removed triple, the rule and the paths of a BRINK
record never reach it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kgengine.model import Triple


@dataclass(frozen=True)
class Question:
    """What an answerer may see of a question record: its text and topic entity."""

    text: str
    topic_entity: str | None = None  # the entity id in the answered graph, when known


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
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question, "topic_entity": self.topic_entity, "method": self.method,
            "answers": [a.to_json() for a in self.answers], "relation_path": self.relation_path,
            "learned_from": self.learned_from, "reasoning": self.reasoning,
            "raw_output": self.raw_output, "timings": self.timings,
        }


class EntityLinker(Protocol):
    def link(self, question: Question) -> str:
        """The topic entity's id in the graph; raises KGEngineError with close matches."""
        ...


class Retriever(Protocol):
    def search(self, question: Question, entity: str) -> list[Triple]:
        """Candidate triples for the question around ``entity``."""
        ...


class Selector(Protocol):
    def select(self, question: str, triples: Sequence[Triple], k: int) -> list[Triple]:
        """The ``k`` triples most relevant to the question, best first."""
        ...


class Answerer(Protocol):
    method: str

    def answer(self, question: Question) -> Answer: ...
