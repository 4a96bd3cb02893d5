"""The graph in memory: ``entity -> step -> neighbours`` (:class:`GraphAdjacency`) and the
:class:`MemoryGraphView` over it — the same answers as the store's named queries
(:class:`kgengine.rag.graph.store.StoreGraphView`), in the order the store's ``ORDER BY``
gives them where order matters (``KGStore.order_key``), without one query per question.
Learning, calibration and a batch's later questions read the graph here.

Following a path never revisits the topic at a middle hop and never answers the topic itself
(MetaQA's gold answers exclude it: "co-directors of X" are not X)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from functools import lru_cache

from kgengine.mining.groundings import grounding_variables
from kgengine.mining.measures import RelationStats
from kgengine.mining.rules import Atom, Rule, is_variable
from kgengine.model import Triple
from kgengine.rag.graph.steps import RelationPath, Step
from kgengine.rag.graph.view import enumerate_paths

_NONE: frozenset[str] = frozenset()  # (neighbours' empty answer: never to be changed)


class GraphAdjacency:
    """The KG as ``entity -> step -> neighbours`` for both directions, built once in memory
    (MetaQA's 130k triples take about 1 s and 60 MB)."""

    def __init__(self, triples: Iterable[Triple]) -> None:
        self._next: dict[str, dict[Step, set[str]]] = defaultdict(dict)
        self.relations: set[str] = set()
        for head, relation, tail in triples:
            self._next[head].setdefault(Step(relation, False), set()).add(tail)
            self._next[tail].setdefault(Step(relation, True), set()).add(head)
            self.relations.add(relation)

    def __contains__(self, entity: str) -> bool:
        return entity in self._next

    def steps(self, entity: str) -> Mapping[Step, set[str]]:
        return self._next.get(entity, {})

    def neighbours(self, entity: str, step: Step) -> AbstractSet[str]:
        steps = self._next.get(entity)
        return steps.get(step, _NONE) if steps is not None else _NONE

    def step_from(self, entities: Iterable[str], step: Step) -> set[str]:
        """Every neighbour over ``step`` of any of ``entities``."""
        reached: set[str] = set()
        for entity in entities:
            steps = self._next.get(entity)
            if steps is not None:
                reached |= steps.get(step, _NONE)
        return reached

    def by_entity(self) -> Mapping[str, Mapping[Step, set[str]]]:
        return self._next



# ---- rule bodies joined in memory --------------------------------------------------------
def body_answers(adjacency: GraphAdjacency, rule: Rule, topic: str, inverse: bool) -> set[str]:
    """The other head argument of ``rule`` for every grounding of its body with the topic
    bound to the head's subject (``inverse`` False) or object (True)."""
    bound_var, free_var = (rule.head.object, rule.head.subject) if inverse else (
        rule.head.subject, rule.head.object)
    if not (is_variable(bound_var) and is_variable(free_var)) or bound_var == free_var:
        return set()
    hops = _chain(tuple(rule.body), bound_var, free_var)
    if hops is not None:  # a path of variables: its ends by set unions, no rows
        frontier: set[str] = {topic}
        for steps in hops:
            if len(steps) == 1:
                frontier = adjacency.step_from(frontier, steps[0])
            else:
                frontier = {e for v in frontier for e in set.intersection(
                    *(set(adjacency.neighbours(v, s)) for s in steps))}
        return frontier - {topic}
    columns, rows = body_groundings(adjacency, rule.body, {bound_var: topic})
    if free_var not in columns:
        return set()
    at = columns.index(free_var)
    return {row[at] for row in rows} - {topic}


@lru_cache(maxsize=8192)
def _chain(atoms: tuple[Atom, ...], start: str, end: str) -> tuple[tuple[Step, ...], ...] | None:
    """The body as hops start -> v1 -> ... -> end when it is a path of distinct variables
    (each hop one or more atoms between the same two variables), else None."""
    hops: list[tuple[Step, ...]] = []
    current, seen, remaining = start, {start}, list(atoms)
    while remaining:
        touching = [a for a in remaining if current in (a.subject, a.object)]
        if not touching or not all(is_variable(t) for a in touching for t in a.terms):
            return None
        following = {a.object if a.subject == current else a.subject for a in touching}
        if len(following) != 1 or following & seen:
            return None
        hops.append(tuple(Step(a.relation, a.subject != current) for a in touching))
        remaining = [a for a in remaining if a not in touching]
        current = following.pop()
        seen.add(current)
    return tuple(hops) if current == end and hops else None


def body_groundings(adjacency: GraphAdjacency, atoms: Sequence[Atom], binding: Mapping[str, str]
                    ) -> tuple[list[str], list[tuple[str, ...]]]:
    """Every substitution extending ``binding`` that makes each atom a fact (as the
    ``rule_groundings`` query, which also lets two atoms match the same fact), each once, as
    (variables, rows of their values); no rows when an atom is not connected to anything
    bound (not a rule the miner writes). The atoms are joined in an order where each has a
    bound argument when reached, all partial rows a level at a time, as tuples (bodies are
    short, and calibration runs thousands of them)."""
    columns = list(binding)
    rows: list[tuple[str, ...]] = [tuple(binding.values())]
    pending = list(atoms)
    while pending and rows:
        index = next((i for i, a in enumerate(pending)
                      if not (is_variable(a.subject) and a.subject not in columns)
                      or not (is_variable(a.object) and a.object not in columns)), None)
        if index is None:
            return columns, []
        atom = pending.pop(index)
        forward, backward = Step(atom.relation), Step(atom.relation, True)
        subject, obj = _slot(atom.subject, columns), _slot(atom.object, columns)
        neighbours = adjacency.neighbours
        if subject is not None and obj is not None:
            rows = [row for row in rows if _at(obj, row) in neighbours(_at(subject, row), forward)]
        elif subject is not None:
            columns.append(atom.object)
            rows = [(*row, tail) for row in rows for tail in neighbours(_at(subject, row), forward)]
        else:
            assert obj is not None
            columns.append(atom.subject)
            rows = [(*row, head) for row in rows for head in neighbours(_at(obj, row), backward)]
    return columns, rows if not pending else []


def _slot(term: str, columns: list[str]) -> int | str | None:
    """Where a term's value is: a column index, the constant itself, or None (unbound)."""
    if not is_variable(term):
        return term
    return columns.index(term) if term in columns else None


def _at(slot: int | str, row: tuple[str, ...]) -> str:
    return row[slot] if isinstance(slot, int) else slot


def _rows_in_memory(adjacency: GraphAdjacency, rule: Rule) -> tuple[list[str], list[tuple[str, ...]]]:
    """The body's groundings with their columns in ``grounding_variables`` order (the
    store query's). The join's rows are distinct over its variables, which are the rule's:
    no DISTINCT pass is needed."""
    columns = grounding_variables(rule)
    found, joined = body_groundings(adjacency, rule.body, {})
    if not joined:
        return columns, []
    at = [found.index(v) for v in columns]
    return columns, joined if at == list(range(len(found))) else [tuple(map(row.__getitem__, at))
                                                                  for row in joined]


def _store_order(rows: list[tuple[str, ...]], order_key: Callable[[str], str]) -> list[tuple[str, ...]]:
    if len(rows) > 1:
        keys = {value: order_key(value) for value in {v for row in rows for v in row}}
        rows = sorted(rows, key=lambda row: tuple(map(keys.__getitem__, row)))
    return rows


class MemoryGraphView:
    """:class:`kgengine.rag.graph.view.GraphView` over a :class:`GraphAdjacency`; rows come
    in the order ``order_key`` (the store's ``ORDER BY``) gives."""

    def __init__(self, adjacency: GraphAdjacency, order_key: Callable[[str], str]) -> None:
        self.adjacency, self.order_key = adjacency, order_key

    def has_entity(self, entity: str) -> bool:
        return entity in self.adjacency

    def relations(self) -> list[str]:
        return sorted(self.adjacency.relations)

    def steps(self, entities: Sequence[str]) -> Mapping[Step, int]:
        out: Counter[Step] = Counter()
        for entity in entities:
            for step, neighbours in self.adjacency.steps(entity).items():
                out[step] += len(neighbours)
        return out

    def follow(self, entities: Sequence[str], step: Step) -> set[str]:
        return self.adjacency.step_from(entities, step)

    def edges(self, entities: Sequence[str], step: Step) -> list[Triple]:
        out = []
        for entity in dict.fromkeys(entities):
            for other in self.adjacency.neighbours(entity, step):
                out.append(Triple(other, step.relation, entity) if step.inverse
                           else Triple(entity, step.relation, other))
        return out

    def paths_from(self, topic: str, lengths: Sequence[int], frontier_cap: int = 5_000
                   ) -> dict[RelationPath, set[str]]:
        return enumerate_paths(self._expand, topic, lengths, frontier_cap)

    def _expand(self, frontier: list[str]) -> dict[Step, set[str]]:
        by_step: dict[Step, set[str]] = defaultdict(set)
        for entity in frontier:
            for step, neighbours in self.adjacency.steps(entity).items():
                by_step[step].update(neighbours)
        return by_step

    def rule_groundings(self, rule: Rule, limit: int) -> list[dict[str, str]]:
        columns, rows = _rows_in_memory(self.adjacency, rule)
        names = [v.lstrip("?") for v in columns]
        return [dict(zip(names, row, strict=True)) for row in _store_order(rows, self.order_key)[:limit]]

    def rule_answers(self, rule: Rule, answer_var: str, limit: int) -> set[str]:
        # sorted only when the limit cuts: calibration needs the answers, not the rows
        columns, rows = _rows_in_memory(self.adjacency, rule)
        if len(rows) > limit:
            rows = _store_order(rows, self.order_key)[:limit]
        at = columns.index(f"?{answer_var}") if rows else 0
        return {row[at] for row in rows}

    def rule_reach(self, rule: Rule, topic: str, inverse: bool) -> set[str]:
        return body_answers(self.adjacency, rule, topic, inverse)

    def relation_stats(self) -> dict[str, RelationStats]:
        facts: Counter[str] = Counter()
        subjects: Counter[str] = Counter()
        objects: Counter[str] = Counter()
        for steps in self.adjacency.by_entity().values():
            for step, neighbours in steps.items():
                if step.inverse:
                    objects[step.relation] += 1
                else:
                    subjects[step.relation] += 1
                    facts[step.relation] += len(neighbours)
        return {r: RelationStats(facts[r], subjects[r], objects[r]) for r in sorted(facts)}
