"""What the answering layer reads of a graph, as one protocol: :class:`GraphView`.

Two implementations give equal results (tests/test_graph_view.py runs both on both backends):
:class:`kgengine.rag.graph.store.StoreGraphView` through the store's named queries (any
backend, graphs too big for memory) and :class:`kgengine.rag.graph.memory.MemoryGraphView`
over the graph in memory. An answerer is given one view when it is built
(:meth:`kgengine.rag.methods.MethodContext.graph_view`); :class:`HandoverGraphView` is that
choice for a graph that fits in memory but was not read yet: the store answers the first
question (one ``kgengine ask`` never reads the whole graph), the graph in memory every later
one (a batch). No method runs a store query itself.

Algorithms over any view (:func:`follow_path`, :func:`enumerate_paths`, :func:`bind_topic`) live here too."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kgengine.mining.measures import RelationStats
from kgengine.mining.rules import Atom, Rule
from kgengine.model import Triple
from kgengine.rag.graph.steps import RelationPath, Step


class GraphView(Protocol):
    """Everything the answering layer reads of one graph (entity ids as the store has them)."""

    def has_entity(self, entity: str) -> bool:
        """Whether ``entity`` is in a fact of the graph."""
        ...

    def relations(self) -> list[str]:
        """Every relation of the graph, sorted."""
        ...

    def steps(self, entities: Sequence[str]) -> Mapping[Step, int]:
        """The steps (relation, direction) leaving any of ``entities``, with their facts."""
        ...

    def follow(self, entities: Sequence[str], step: Step) -> set[str]:
        """The entities one ``step`` away from ``entities``."""
        ...

    def edges(self, entities: Sequence[str], step: Step) -> list[Triple]:
        """The facts one ``step`` away from ``entities`` (in no particular order)."""
        ...

    def paths_from(self, topic: str, lengths: Sequence[int], frontier_cap: int = 5_000
                   ) -> dict[RelationPath, set[str]]:
        """Every relation path whose length is in ``lengths`` with a non-empty end set from
        ``topic`` (the topic excluded at every hop); a frontier larger than ``frontier_cap``
        is not expanded further."""
        ...

    def rule_groundings(self, rule: Rule, limit: int) -> list[dict[str, str]]:
        """The distinct groundings of ``rule``'s body (constants bound, the head unchecked):
        variable name without '?' -> entity, in the store's ``ORDER BY`` order, the first
        ``limit`` (:func:`kgengine.mining.groundings.groundings`)."""
        ...

    def rule_answers(self, rule: Rule, answer_var: str, limit: int) -> set[str]:
        """The values of ``answer_var`` (without '?') in :meth:`rule_groundings`'s rows."""
        ...

    def rule_reach(self, rule: Rule, topic: str, inverse: bool) -> set[str]:
        """Every value of the head's other argument when the topic binds the head's subject
        (``inverse`` False) or object (True), the topic itself left out; no limit."""
        ...

    def relation_stats(self) -> Mapping[str, RelationStats]:
        """Facts, distinct subjects and distinct objects of every relation."""
        ...


@dataclass
class PathResult:
    answers: dict[str, list[tuple[Triple, ...]]]  # answer -> grounded paths (a few)
    counts: dict[str, int]  # answer -> number of grounded paths reaching it


def follow_path(view: GraphView, topic: str, path: RelationPath, evidence_per_answer: int = 3,
                max_frontier: int = 20_000) -> PathResult:
    """Follow ``path`` from ``topic`` hop by hop (one read per hop for the whole frontier).
    Paths are counted exactly; the first few per entity (facts in sorted order) are kept as
    evidence, so both views keep the same ones."""
    # entity -> (paths reaching it [kept few], number of paths)
    current: dict[str, tuple[list[tuple[Triple, ...]], int]] = {topic: ([()], 1)}
    for step in path:
        if not current or len(current) > max_frontier:
            current = {}
            break
        following: dict[str, tuple[list[tuple[Triple, ...]], int]] = {}
        for fact in sorted(view.edges(list(current), step)):
            source, target = (fact.tail, fact.head) if step.inverse else (fact.head, fact.tail)
            if target == topic or source not in current:
                continue
            paths, count = current[source]
            kept, total = following.get(target, ([], 0))
            for p in paths:
                if len(kept) >= evidence_per_answer:
                    break
                kept.append((*p, fact))
            following[target] = (kept, total + count)
        current = following
    current.pop(topic, None)
    if not path:
        current = {}
    return PathResult({e: v[0] for e, v in current.items()}, {e: v[1] for e, v in current.items()})


def bind_topic(rule: Rule, step: Step, topic: str) -> tuple[Rule, str]:
    """The rule with the topic in place of the head variable ``step`` binds (the subject, or
    the object for an inverse step), and the name of the variable that holds the answer
    (without ``?``)."""
    bound, free = (rule.head.object, rule.head.subject) if step.inverse else (
        rule.head.subject, rule.head.object)
    mapping = {bound: topic}

    def sub(atom: Atom) -> Atom:
        return Atom(atom.relation, mapping.get(atom.subject, atom.subject),
                    mapping.get(atom.object, atom.object))

    # Rule(...) directly, not Rule.of: canonical renaming would rename the answer variable
    return Rule(tuple(sub(a) for a in rule.body), sub(rule.head)), free.lstrip("?")


Expand = Callable[[list[str]], Mapping[Step, set[str]]]  # a frontier -> step -> entities reached


def enumerate_paths(expand: Expand, topic: str, lengths: Sequence[int], frontier_cap: int = 5_000
                    ) -> dict[RelationPath, set[str]]:
    """:meth:`GraphView.paths_from`, given how a view reads the steps from a frontier (a
    frontier larger than ``frontier_cap`` is not expanded: a path through a hub such as the
    genre Drama reaches most of the KG and could never be precise)."""
    longest = max(lengths)
    out: dict[RelationPath, set[str]] = {}

    def walk(prefix: RelationPath, frontier: set[str]) -> None:
        if len(prefix) in lengths:
            out[prefix] = frontier
        if len(prefix) == longest or len(frontier) > frontier_cap:
            return
        by_step = expand(sorted(frontier))
        for step in sorted(by_step):
            reached = set(by_step[step]) - {topic}
            if reached:
                walk((*prefix, step), reached)

    walk((), {topic})
    return out


class HandoverGraphView:
    """The store's view for the first ``after`` questions, then the graph in memory, read once
    by ``load`` (both give the same results: only the speed changes). :meth:`question` is
    called as each question starts; :meth:`load_now` reads the graph at once (calibration)."""

    def __init__(self, store_view: GraphView, load: Callable[[], GraphView], after: int = 1) -> None:
        self._current: GraphView = store_view
        self._load: Callable[[], GraphView] | None = load
        self._after, self._questions = after, 0
        self._lock = threading.Lock()

    @property
    def in_memory(self) -> bool:
        return self._load is None

    def question(self) -> None:
        with self._lock:
            self._questions += 1
            if self._questions > self._after and self._load is not None:
                self._current, self._load = self._load(), None

    def load_now(self) -> None:
        with self._lock:
            if self._load is not None:
                self._current, self._load = self._load(), None

    def has_entity(self, entity: str) -> bool:
        return self._current.has_entity(entity)

    def relations(self) -> list[str]:
        return self._current.relations()

    def steps(self, entities: Sequence[str]) -> Mapping[Step, int]:
        return self._current.steps(entities)

    def follow(self, entities: Sequence[str], step: Step) -> set[str]:
        return self._current.follow(entities, step)

    def edges(self, entities: Sequence[str], step: Step) -> list[Triple]:
        return self._current.edges(entities, step)

    def paths_from(self, topic: str, lengths: Sequence[int], frontier_cap: int = 5_000
                   ) -> dict[RelationPath, set[str]]:
        return self._current.paths_from(topic, lengths, frontier_cap)

    def rule_groundings(self, rule: Rule, limit: int) -> list[dict[str, str]]:
        return self._current.rule_groundings(rule, limit)

    def rule_answers(self, rule: Rule, answer_var: str, limit: int) -> set[str]:
        return self._current.rule_answers(rule, answer_var, limit)

    def rule_reach(self, rule: Rule, topic: str, inverse: bool) -> set[str]:
        return self._current.rule_reach(rule, topic, inverse)

    def relation_stats(self) -> Mapping[str, RelationStats]:
        return self._current.relation_stats()


def question_started(view: GraphView) -> None:
    """Tell ``view`` a question starts (a :class:`HandoverGraphView` counts them)."""
    if isinstance(view, HandoverGraphView):
        view.question()
