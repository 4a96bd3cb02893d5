"""The graph view's contract: the store's view (named queries) and the view of the graph in
memory give the same results on both backends — steps, following, paths, rule groundings
(the store's own rows in the store's order, limit included, with entity ids whose escaping in
IRIs changes their order), rule answers, relation statistics; rule candidates, calibration
scores and a batch's answers are those of the store's view. And an answerer's reported
timings add up every attempt."""

from __future__ import annotations

import random
import time
from pathlib import Path

import kgengine.brink
import pytest
from kgengine.loaders import read_dataset
from kgengine.mining.groundings import HeadFilter, groundings
from kgengine.mining.io import read_rules
from kgengine.mining.rules import parse_rule
from kgengine.model import Question, Triple
from kgengine.rag.graph.memory import GraphAdjacency, MemoryGraphView, body_answers, body_groundings
from kgengine.rag.graph.steps import Step
from kgengine.rag.graph.store import StoreGraphView
from kgengine.rag.graph.view import GraphView, HandoverGraphView, bind_topic, follow_path
from kgengine.rag.linking.entities import GraphEntityLinker
from kgengine.rag.linking.linker import LinkedPath
from kgengine.rag.methods import IN_MEMORY_AFTER, AnswerSettings, build_answerer
from kgengine.rag.offline import OfflineAnswerer
from kgengine.rag.rules import rule_candidates

FAMILY_RULES = Path(kgengine.brink.__file__).parent / "data" / "family_amie3_len3.tsv"
# ids that sort differently raw and escaped ('%' sorts before '-', digits and letters; UTF-8)
IDS = ["a b", "a-b", "a|c", "a~d", "a/b", "a%", "Zed", "zed", "é", "e", "x.y", "x_y", "1", "10", "9"]


def odd_ids_kg(seed: int = 3) -> list[Triple]:
    rng = random.Random(seed)
    triples = {Triple(h, r, t) for h in IDS for t in IDS for r in ("p", "q") if h != t and rng.random() < 0.3}
    triples |= {Triple("a b", "p", t) for t in IDS if t != "a b"}  # a hub
    return sorted(triples)


RULES = ["p(?a,?c) & q(?c,?b) => p(?a,?b)", "q(?b,?a) => p(?a,?b)", "p(?a,?c) & p(?b,?c) => q(?a,?b)",
         "p(?c,?a) & q(?c,?b) => q(?a,?b)", "p(?a,?b) & q(?a,?b) => q(?a,?b)"]


@pytest.fixture(params=["oxigraph", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def loaded(request, oxigraph_store):
    triples = odd_ids_kg()
    if request.param == "oxigraph":
        store, graph = oxigraph_store, "odd"
    else:
        store = request.getfixturevalue("neo4j_store")
        graph = request.getfixturevalue("neo4j_server").graph("odd-ids")
    store.load(graph, triples, dataset="odd", replace=True)
    return store, graph, GraphAdjacency(triples)


def views(store, graph: str, adjacency: GraphAdjacency) -> tuple[StoreGraphView, MemoryGraphView]:
    return StoreGraphView(store, graph), MemoryGraphView(adjacency, store.order_key)


def test_in_memory_groundings_are_the_stores_rows_in_its_order(loaded) -> None:
    store, graph, adjacency = loaded
    from_store, in_memory = views(store, graph, adjacency)
    checked = 0
    for text in RULES:
        rule = parse_rule(text)
        for topic in IDS:
            for inverse in (False, True):
                bound, answer = bind_topic(rule, Step(rule.head.relation, inverse), topic)
                for limit in (1_000, 4):
                    expected = groundings(store, graph, bound, head=HeadFilter.ANY, limit=limit)
                    assert from_store.rule_groundings(bound, limit) == expected
                    assert in_memory.rule_groundings(bound, limit) == expected, (text, topic, inverse, limit)
                    answers = {row[answer] for row in expected}
                    assert in_memory.rule_answers(bound, answer, limit) == answers
                    assert from_store.rule_answers(bound, answer, limit) == answers
                    checked += bool(expected)
                reached = from_store.rule_reach(rule, topic, inverse)
                assert in_memory.rule_reach(rule, topic, inverse) == reached
    assert checked > 100  # most of them have groundings: the comparison is not of empty lists


def test_both_views_read_the_graph_alike(loaded) -> None:
    """Steps with their counts, one step, facts, paths from a topic, path following with its
    evidence (in order), relation statistics: equal from the store and from memory."""
    store, graph, adjacency = loaded
    from_store, in_memory = views(store, graph, adjacency)
    assert in_memory.relations() == from_store.relations() == ["p", "q"]
    assert in_memory.relation_stats() == from_store.relation_stats()
    stats = from_store.relation_stats()["p"]
    facts_p = [t for t in odd_ids_kg() if t.relation == "p"]
    assert (stats.facts, stats.subjects, stats.objects) == (
        len(facts_p), len({t.head for t in facts_p}), len({t.tail for t in facts_p}))
    compared = 0
    for entities in ([e] for e in IDS):
        assert dict(in_memory.steps(entities)) == dict(from_store.steps(entities)), entities
        assert in_memory.has_entity(entities[0]) == from_store.has_entity(entities[0]) is True
        for step in (Step("p"), Step("p", True), Step("q"), Step("q", True)):
            assert in_memory.follow(entities, step) == from_store.follow(entities, step)
            assert sorted(in_memory.edges(entities, step)) == sorted(from_store.edges(entities, step))
        paths = from_store.paths_from(entities[0], [1, 2])
        assert in_memory.paths_from(entities[0], [1, 2]) == paths
        for path in list(paths)[:6]:
            expected = follow_path(from_store, entities[0], path)
            assert follow_path(in_memory, entities[0], path) == expected
            compared += sum(expected.counts.values())
    assert compared > 500
    assert not in_memory.has_entity("nobody") and not from_store.has_entity("nobody")


def test_rule_candidates_are_the_same_from_memory_as_from_the_store(oxigraph_store) -> None:
    facts = list(read_dataset("family", splits=["facts"]).triples)
    oxigraph_store.load("family", facts, dataset="family")
    store_view, memory_view = views(oxigraph_store, "family", GraphAdjacency(facts))
    rules = read_rules(FAMILY_RULES)
    topics = sorted({t.head for t in facts})[::15]
    compared = 0
    for relation in sorted({r.head_relation for r in rules}):
        for inverse in (False, True):
            step = Step(relation, inverse)
            for_step = [r for r in rules if r.head_relation == relation]
            for topic in topics:
                from_store = rule_candidates(store_view, topic, step, for_step, limit_per_rule=5)
                from_memory = rule_candidates(memory_view, topic, step, for_step, limit_per_rule=5)
                assert from_memory == from_store
                compared += len(from_store)
    assert compared > 500


def test_a_batch_moves_the_rules_to_the_graph_in_memory_with_the_same_answers(oxigraph_store, tmp_path
                                                                             ) -> None:
    facts = list(read_dataset("family", splits=["facts"]).triples)
    oxigraph_store.load("family", facts, dataset="family")
    settings = AnswerSettings(rules_path=FAMILY_RULES, cache_dir=tmp_path)
    batch = build_answerer(oxigraph_store, "family", "offline", settings)
    one_by_one = build_answerer(oxigraph_store, "family", "offline", settings)
    assert isinstance(batch, OfflineAnswerer) and isinstance(one_by_one, OfflineAnswerer)
    one_by_one.view = StoreGraphView(oxigraph_store, "family")  # every question through the store
    assert isinstance(batch.view, HandoverGraphView) and not batch.view.in_memory
    people = sorted({t.head for t in facts})[:2 * IN_MEMORY_AFTER]
    questions = [Question(f"Who is the {relation} of {person}?", person)
                 for person in people for relation in ("brother", "aunt")]
    for question in questions:
        got, expected = batch.answer(question).to_json(), one_by_one.answer(question).to_json()
        got.pop("timings"), expected.pop("timings")
        assert got == expected
    assert batch.view.in_memory
    assert sum(len(batch.answer(q).answers) for q in questions) > len(questions)  # not empty answers


@pytest.mark.parametrize("rule_guided", [False, True])
def test_calibrations_scores_from_memory_are_the_answerers_candidates(oxigraph_store, tmp_path,
                                                                      rule_guided: bool) -> None:
    facts = list(read_dataset("family", splits=["facts"]).triples)
    oxigraph_store.load("family", facts, dataset="family")
    answerer = build_answerer(oxigraph_store, "family", "rule-guided" if rule_guided else "offline",
                              AnswerSettings(rules_path=FAMILY_RULES, cache_dir=tmp_path))
    steps = [Step(r, inverse) for r in sorted({t.relation for t in facts}) for inverse in (False, True)]
    topics = sorted({t.head for t in facts})[::20]
    assert isinstance(answerer, OfflineAnswerer)
    answerer.view = StoreGraphView(oxigraph_store, "family")
    store_scores = {(t, s): answerer.candidate_scores(t, s) for t in topics for s in steps}
    answerer.view = MemoryGraphView(GraphAdjacency(facts), oxigraph_store.order_key)
    for (topic, step), expected in store_scores.items():
        assert answerer.candidate_scores(topic, step) == expected, (topic, step)
    assert sum(not direct for scores in store_scores.values() for direct, _ in scores.values()) > 100


def test_body_answers_of_path_bodies_are_those_of_their_groundings() -> None:
    """The set-union walk of path-shaped bodies against the rows of the general join."""
    adjacency = GraphAdjacency(odd_ids_kg())
    bodies = ["p(?a,?x) & q(?x,?b)", "p(?x,?a) & q(?b,?x)", "p(?a,?b) & q(?a,?b)", "p(?a,?b) & p(?b,?a)",
              "q(?a,?x) & p(?x,?y) & q(?y,?b)", "p(?a,?x) & q(?x,?b) & q(?a,?b)",
              "p(?a,?x) & p(?x,?a) & q(?a,?b)", "q(?b,?a)"]
    compared = 0
    for body in bodies:
        for head in ("p(?a,?b)", "q(?b,?a)"):
            rule = parse_rule(f"{body} => {head}")
            for topic in IDS:
                for inverse in (False, True):
                    bound, free = (rule.head.object, rule.head.subject) if inverse else (
                        rule.head.subject, rule.head.object)
                    columns, rows = body_groundings(adjacency, rule.body, {bound: topic})
                    expected = {row[columns.index(free)] for row in rows} - {topic} if rows else set()
                    got = body_answers(adjacency, rule, topic, inverse)
                    assert got == expected, (str(rule), topic, inverse)
                    compared += len(expected)
    assert compared > 500


class SlowView:
    """A graph view whose every read of one step takes ``delay`` seconds more."""

    def __init__(self, view: GraphView, delay: float) -> None:
        self.view, self.delay = view, delay

    def __getattr__(self, name: str):
        return getattr(self.view, name)

    def edges(self, entities, step):
        time.sleep(self.delay)
        return self.view.edges(entities, step)


class NextBestLinker:
    """A relation linker whose path and first alternative reach nothing from ``a``."""

    def link(self, text: str, topic: str, mention: str | None) -> LinkedPath:
        return LinkedPath((Step("q"),), "train", text, text, 1.0, 1.0,
                          [((Step("q", True),), 0.5), ((Step("p"),), 0.4)])

    def link_by_ranking(self, pattern: str, topic: str) -> LinkedPath:
        return LinkedPath((Step("p"),), "zero-shot", pattern)


def test_the_reported_direct_time_adds_up_every_path_tried(oxigraph_store) -> None:
    """A path that reaches nothing makes the answerer try the next-best paths; the answer's
    ``direct_ms`` counts every attempt (it used to keep only the last one's time)."""
    facts = [Triple("a", "p", "b"), Triple("b", "q", "c"), Triple("d", "q", "c")]
    oxigraph_store.load("tiny", facts, dataset="tiny")
    view = SlowView(StoreGraphView(oxigraph_store, "tiny"), delay=0.05)
    answerer = OfflineAnswerer(view, GraphEntityLinker(oxigraph_store, "tiny"), NextBestLinker())
    answer = answerer.answer(Question("what is the r of a", "a"))
    assert [a.id for a in answer.answers] == ["b"]
    assert sum(line.startswith("nothing found; trying the next-best path") for line in answer.reasoning) == 2
    assert answer.timings["direct_ms"] >= 3 * 50 * 0.95  # three paths of one hop each
