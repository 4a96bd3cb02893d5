"""Rules run on the graph in memory (learning, calibration, a batch of questions) give what
the store gives: the groundings are the store's own rows in the store's order, limit
included, on both backends (with entity ids whose escaping in IRIs changes their order);
rule candidates, calibration scores and a batch's answers are those of the store path."""

from __future__ import annotations

import random
from pathlib import Path

import kgengine.brink
import pytest
from kgengine.loaders import read_dataset
from kgengine.mining.groundings import HeadFilter, groundings
from kgengine.mining.io import read_rules
from kgengine.mining.rules import parse_rule
from kgengine.model import Triple
from kgengine.rag.base import Question
from kgengine.rag.methods import AnswerSettings, build_answerer
from kgengine.rag.offline import IN_MEMORY_AFTER
from kgengine.rag.paths import GraphAdjacency, Step, body_answers, body_groundings
from kgengine.rag.rules import bind_topic, groundings_in_memory, rule_answers_in_memory, rule_candidates

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


def test_in_memory_groundings_are_the_stores_rows_in_its_order(loaded) -> None:
    store, graph, adjacency = loaded
    checked = 0
    for text in RULES:
        rule = parse_rule(text)
        for topic in IDS:
            for inverse in (False, True):
                bound, answer = bind_topic(rule, Step(rule.head.relation, inverse), topic)
                for limit in (1_000, 4):
                    expected = groundings(store, graph, bound, head=HeadFilter.ANY, limit=limit)
                    assert groundings_in_memory(adjacency, bound, store.order_key, limit) == expected, \
                        (text, topic, inverse, limit)
                    assert rule_answers_in_memory(adjacency, bound, answer, store.order_key, limit) == {
                        row[answer] for row in expected}
                    checked += bool(expected)
    assert checked > 100  # most of them have groundings: the comparison is not of empty lists


def test_rule_candidates_are_the_same_from_memory_as_from_the_store(oxigraph_store) -> None:
    facts = list(read_dataset("family", splits=["facts"]).triples)
    oxigraph_store.load("family", facts, dataset="family")
    adjacency = GraphAdjacency(facts)
    rules = read_rules(FAMILY_RULES)
    topics = sorted({t.head for t in facts})[::15]
    compared = 0
    for relation in sorted({r.head_relation for r in rules}):
        for inverse in (False, True):
            step = Step(relation, inverse)
            for_step = [r for r in rules if r.head_relation == relation]
            for topic in topics:
                args = (oxigraph_store, "family", topic, step, for_step)
                from_store = rule_candidates(*args, limit_per_rule=5)
                from_memory = rule_candidates(*args, limit_per_rule=5, graph_in_memory=adjacency)
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
    one_by_one.graph_loader = None  # every question's rules through the store
    assert batch.graph_in_memory is None and batch.graph_loader is not None
    people = sorted({t.head for t in facts})[:2 * IN_MEMORY_AFTER]
    questions = [Question(f"Who is the {relation} of {person}?", person)
                 for person in people for relation in ("brother", "aunt")]
    for question in questions:
        got, expected = batch.answer(question).to_json(), one_by_one.answer(question).to_json()
        got.pop("timings"), expected.pop("timings")
        assert got == expected
    assert batch.graph_in_memory is not None and one_by_one.graph_in_memory is None
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
    store_scores = {(t, s): answerer.candidate_scores(t, s) for t in topics for s in steps}
    answerer.graph_in_memory = GraphAdjacency(facts)
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
