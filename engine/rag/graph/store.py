"""The :class:`kgengine.rag.graph.view.GraphView` through the store's named queries (both
backends, any size of graph): ``entity_relations_out``/``_in`` for the steps around
entities, ``answer_step_out``/``_in`` for one step, ``rule_groundings`` (through
:mod:`kgengine.mining.groundings`) for rule bodies, ``mine_relation_stats`` for functionality."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from functools import cached_property

from kgengine.mining.groundings import HeadFilter, groundings
from kgengine.mining.measures import RelationStats
from kgengine.mining.rules import Rule, is_variable
from kgengine.model import Entity, Relation, Triple
from kgengine.rag.graph.steps import RelationPath, Step
from kgengine.rag.graph.view import bind_topic, enumerate_paths
from kgengine.store import KGStore


class StoreGraphView:
    def __init__(self, store: KGStore, graph: str) -> None:
        self.store, self.graph = store, graph

    def has_entity(self, entity: str) -> bool:
        return bool(self.steps([entity]))

    @cached_property
    def _relations(self) -> list[str]:
        return sorted(row["r"] for row in self.store.run("relation_counts", self.graph))

    def relations(self) -> list[str]:
        return list(self._relations)

    def steps(self, entities: Sequence[str]) -> Mapping[Step, int]:
        given = [Entity(e) for e in entities]
        out: Counter[Step] = Counter()
        for inverse, name, var in ((False, "entity_relations_out", "h"), (True, "entity_relations_in", "t")):
            for row in self.store.run(name, self.graph, **{var: given}):
                out[Step(row["r"], inverse)] += int(row["n"])
        return out

    def edges(self, entities: Sequence[str], step: Step) -> list[Triple]:
        name, var = ("answer_step_in", "t") if step.inverse else ("answer_step_out", "h")
        rows = self.store.run(name, self.graph, r=Relation(step.relation),
                              **{var: [Entity(e) for e in entities]})
        return [Triple(row["h"], step.relation, row["t"]) for row in rows]

    def follow(self, entities: Sequence[str], step: Step) -> set[str]:
        return {fact.head if step.inverse else fact.tail for fact in self.edges(entities, step)}

    def paths_from(self, topic: str, lengths: Sequence[int], frontier_cap: int = 5_000
                   ) -> dict[RelationPath, set[str]]:
        return enumerate_paths(self._expand, topic, lengths, frontier_cap)

    def _expand(self, frontier: list[str]) -> dict[Step, set[str]]:
        return {step: self.follow(frontier, step) for step in self.steps(frontier)}

    def rule_groundings(self, rule: Rule, limit: int) -> list[dict[str, str]]:
        return groundings(self.store, self.graph, rule, head=HeadFilter.ANY, limit=limit)

    def rule_answers(self, rule: Rule, answer_var: str, limit: int) -> set[str]:
        rows = self.rule_groundings(rule, limit)
        return {row[answer_var] for row in rows if row.get(answer_var) is not None}

    def rule_reach(self, rule: Rule, topic: str, inverse: bool) -> set[str]:
        head = rule.head
        bound, free = (head.object, head.subject) if inverse else (head.subject, head.object)
        if not (is_variable(bound) and is_variable(free)) or bound == free:
            return set()
        bound_rule, answer_var = bind_topic(rule, Step(rule.head.relation, inverse), topic)
        rows = groundings(self.store, self.graph, bound_rule, head=HeadFilter.ANY)
        return {row[answer_var] for row in rows if row.get(answer_var) is not None} - {topic}

    def relation_stats(self) -> Mapping[str, RelationStats]:
        rows = self.store.run("mine_relation_stats", self.graph)
        return {row["r"]: RelationStats(int(row["facts"]), int(row["subjects"]), int(row["objects"]))
                for row in sorted(rows, key=lambda row: row["r"])}
