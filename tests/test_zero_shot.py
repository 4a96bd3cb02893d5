"""Zero-shot relation paths (kgengine.rag.linking.ranking): with no training split, on KGs whose
relation names are opaque codes, readable names, CamelCase or Freebase-style paths, a
question in any of several hand-written phrasings (tests/helpers/zero_shot_kgs.py), asking
for either side of a relation, gets exactly the answers of its direct triples — on both
backends, with and without sentence embeddings. Then the parts one by one: a relation
named verbatim wins a one-hop path over codes that share its word, the direction read from
the question's word order, the answer type keeping years out of "who" questions, the
training split's word associations, and the reasoning saying how the path was chosen."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers.toy_kg import triples
from helpers.zero_shot_kgs import CODES, FREEBASE, ZERO_SHOT_KGS, ZeroShotKG
from kgengine.model import Question
from kgengine.oxigraph.store import OxigraphStore
from kgengine.rag.graph.memory import GraphAdjacency, MemoryGraphView
from kgengine.rag.graph.steps import parse_path
from kgengine.rag.graph.store import StoreGraphView
from kgengine.rag.linking.cues import QuestionCues, RelationCues, answer_type, expected_direction
from kgengine.rag.linking.learning import PathModel, PatternPath
from kgengine.rag.linking.linker import LearnedRelationLinker, ZeroShotLinker
from kgengine.rag.linking.ranking import PathRanker
from kgengine.rag.linking.vocabulary import VocabularyMap, WordAssociations
from kgengine.rag.methods import AnswerSettings, build_answerer


@pytest.fixture(params=["oxigraph", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def zero_shot_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[tuple[Any, dict[str, str]]]:
    """A store holding every zero-shot KG; KG name -> its graph there."""
    if request.param == "oxigraph":
        store = OxigraphStore(str(tmp_path_factory.mktemp("zero-shot") / "store"))
        for kg in ZERO_SHOT_KGS:
            store.load(kg.name, kg.triples, dataset="tsv")
        yield store, {kg.name: kg.name for kg in ZERO_SHOT_KGS}
        store.close()
        return
    server, store = request.getfixturevalue("neo4j_server"), request.getfixturevalue("neo4j_store")
    graphs = {kg.name: server.graph(f"zero-shot-{kg.name}") for kg in ZERO_SHOT_KGS}
    for kg in ZERO_SHOT_KGS:
        store.load(graphs[kg.name], kg.triples, dataset="tsv", replace=True)
    yield store, graphs


def _wrong(store: Any, graph: str, kg: ZeroShotKG, tmp_path: Path, embeddings: bool) -> list[str]:
    answerer = build_answerer(store, graph, "offline", AnswerSettings(cache_dir=tmp_path / "cache"),
                              options={"zero_shot_embeddings": embeddings})
    wrong = []
    for text, topic, relation, gold in kg.questions():
        answer = answerer.answer(Question(text, topic_entity=topic))
        assert answer.learned_from == "zero-shot"
        if {a.id for a in answer.answers} != gold or answer.relation_path != [relation]:
            wrong.append(f"{text!r}: {answer.relation_path} -> {sorted(a.id for a in answer.answers)}")
    return wrong


@pytest.mark.parametrize("kg", ZERO_SHOT_KGS, ids=lambda kg: kg.name)
def test_every_phrasing_gets_all_answers_of_the_direct_triple(kg: ZeroShotKG, zero_shot_store,
                                                              tmp_path) -> None:
    store, graphs = zero_shot_store
    assert len(kg.questions()) >= 20
    assert _wrong(store, graphs[kg.name], kg, tmp_path, embeddings=False) == []


@pytest.mark.slow  # loads the real sentence-transformers model
@pytest.mark.parametrize("kg", ZERO_SHOT_KGS, ids=lambda kg: kg.name)
def test_every_phrasing_with_the_real_embedding_model(kg: ZeroShotKG, tmp_path) -> None:
    store = OxigraphStore(str(tmp_path / "store"))
    try:
        store.load(kg.name, kg.triples, dataset="tsv")
        assert _wrong(store, kg.name, kg, tmp_path, embeddings=True) == []
    finally:
        store.close()


def _ranker(kg_triples, **kwargs: Any) -> tuple[PathRanker, MemoryGraphView]:
    return PathRanker(**kwargs), MemoryGraphView(GraphAdjacency(kg_triples), str)


def test_a_code_named_verbatim_wins_one_hop_over_codes_that_share_its_word() -> None:
    ranker, source = _ranker(CODES.triples)
    best = ranker.rank("what does <e> causes_12?", "Gene1", source)[0]
    assert best.path == parse_path(["causes_12"])
    assert dict(best.parts)["named verbatim"] > 0
    # the other code of the same word is not chained on
    assert ranker.rank("what does <e> causes_7?", "Gene1", source)[0].path == parse_path(["causes_7"])


@pytest.mark.parametrize(("pattern", "relation", "inverse"), [
    # noun-of (h is the aunt of t)
    ("who is the aunt of <e>?", "aunt", True), ("<e>'s aunt is who?", "aunt", True),
    ("whose aunt is <e>?", "aunt", False), ("<e> is the aunt of whom?", "aunt", False),
    # attribute (t is the genre of h)
    ("what is the genre of <e>?", "has_genre", False), ("what genre is <e>?", "has_genre", False),
    ("which films have <e> as their genre?", "has_genre", True),
    # verbs, passive and active
    ("which films were directed by <e>?", "directed_by", True), ("who directed <e>?", "directed_by", False),
    ("what did <e> direct?", "directed_by", True), ("<e> was directed by whom?", "directed_by", False),
    ("who is the director of <e>?", "directed_by", False),
    ("what is located in <e>?", "located_in", True), ("where is <e> located?", "located_in", False),
    ("what does <e> affect?", "affects", False), ("what affects <e>?", "affects", True),
    ("what is affected by <e>?", "affects", False),
    # an opaque code: the question's word order
    ("what does <e> rel_17?", "rel_17", False), ("what rel_17 <e>?", "rel_17", True),
])
def test_direction_from_the_question_word_order(pattern: str, relation: str, inverse: bool) -> None:
    question, cues = QuestionCues.of(pattern), RelationCues.of(relation, None)
    positions = {i for i, w in question.words if any(w[:4] == r[:4] for r in cues.words)}
    assert expected_direction(question, cues, positions) is inverse


def test_both_directions_ranked_and_said_when_the_question_gives_no_cue() -> None:
    kg = triples("a | knows_5 | b\nb | knows_5 | c")
    ranker, source = _ranker(kg)
    ranked = ranker.rank("tell me about <e>", "b", source)
    assert {r.path for r in ranked[:2]} == {parse_path(["knows_5"]), parse_path(["^knows_5"])}
    assert "uncertain" in ranked[0].direction


@pytest.mark.parametrize(("tokens", "kind", "noun"), [
    ("who wrote <e>", "person", None), ("when was <e> released", "temporal", None),
    ("what year was <e> released", "temporal", "year"),
    ("what was the release year of <e>", "temporal", "year"),
    ("which films did <e> direct", None, "films"), ("which person directed <e>", "person", "person"),
    ("how many films did <e> make", "number", None), ("tell me about <e>", None, None),
])
def test_answer_type_from_the_question(tokens: str, kind: str | None, noun: str | None) -> None:
    found = answer_type(QuestionCues.of(tokens).tokens)
    assert (found.kind, found.noun) == (kind, noun)


def test_answer_type_keeps_years_out_of_a_who_question() -> None:
    """Both relations share the word "award": "who" picks the person, "what year" the year."""
    kg = triples("""
    Oscar1994 | award_winner | Tom Hanks
    Oscar1994 | award_year | 1994
    Oscar1995 | award_winner | Tom Hanks
    Oscar1995 | award_year | 1995
    """)
    ranker, source = _ranker(kg)
    assert ranker.rank("which person got the award <e>?", "Oscar1994", source)[0].path == \
        parse_path(["award_winner"])
    assert ranker.rank("in what year was the award <e> given?", "Oscar1994", source)[0].path == \
        parse_path(["award_year"])


def test_words_of_a_training_split_point_at_the_relation_they_ask_for() -> None:
    """No relation name says "about"; the training patterns that use it ask for has_tags."""
    patterns = {"what is <e> about": parse_path(["has_tags"]),
                "what topics is <e> about": parse_path(["has_tags"]),
                "who directed <e>": parse_path(["directed_by"]), "who wrote <e>": parse_path(["written_by"])}
    associations = WordAssociations.from_patterns(patterns)
    assert associations.get("about", "has_tags") > associations.get("about", "directed_by") == 0.0
    kg = triples("Heat | has_tags | heist\nHeat | directed_by | Michael Mann\nHeist | has_tags | heist")
    ranker, source = _ranker(kg, associations=associations)
    assert ranker.rank("which films are about <e>", "heist", source)[0].path == parse_path(["^has_tags"])


def test_paths_are_grounded_and_hop_count_follows_the_named_relations() -> None:
    ranker, source = _ranker(FREEBASE.triples)
    two = ranker.rank("what is the nationality of the director of <e>?", "Alien", source)[0]
    assert two.path == parse_path(["/film/film/directed_by", "/people/person/nationality"])
    one = ranker.rank("who directed <e>?", "Heat", source)[0]
    assert one.path == parse_path(["/film/film/directed_by"])
    assert ranker.rank("who directed <e>?", "Nowhere", source) == []  # nothing leaves it


def test_the_reasoning_says_how_the_path_was_ranked(oxigraph_store) -> None:
    oxigraph_store.load("codes", CODES.triples, dataset="tsv")
    linker = ZeroShotLinker(StoreGraphView(oxigraph_store, "codes"))
    linked = linker.link_pattern("what treats_4 <e>?", "Disease1")
    assert linked.path == parse_path(["^treats_4"])
    described = linked.describe()
    assert "grounded paths" in described and "named verbatim" in described
    assert "direction only one direction exists from the topic" in described
    assert linked.alternatives  # the next-ranked paths, tried when the best finds nothing


def _encoder(table: dict[str, list[float]]):
    """Texts -> unit rows from ``table`` (unknown texts: a vector far from all)."""

    def encode(texts):
        rows = np.array([table.get(t, [0.0, 0.0, 0.0, 1.0]) for t in texts], dtype=float)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    return encode


def test_training_unseen_words_are_read_as_their_clearly_nearest_training_word() -> None:
    table = {"wrote": [1.0, 0.0, 0.0, 0.0], "directed": [0.0, 1.0, 0.0, 0.0], "films": [0.0, 0.0, 1.0, 0.0],
             "penned": [0.9, 0.1, 0.0, 0.0],  # clearly "wrote"
             "made": [0.6, 0.6, 0.0, 0.0]}  # as near "wrote" as "directed": left alone
    known = {"who wrote <e>": parse_path(["written_by"]), "who directed <e>": parse_path(["directed_by"]),
             "which films did <e> direct": parse_path(["^directed_by"])}
    vocabulary = VocabularyMap(known, _encoder(table))
    assert vocabulary.rewrite("who penned <e>") == ("who wrote <e>", [("penned", "wrote")])
    assert vocabulary.rewrite("who made <e>") == ("who made <e>", [])
    assert vocabulary.rewrite("who wrote <e>") == ("who wrote <e>", [])  # known words stay


def test_a_reworded_question_finds_its_learned_pattern(oxigraph_store) -> None:
    kg = triples("Heat | written_by | Michael Mann\nHeat | directed_by | Michael Mann")
    oxigraph_store.load("films", kg, dataset="tsv")
    model = PathModel({"who wrote <e>": PatternPath(parse_path(["written_by"]), 1.0, 3)}, ["train.txt"])
    table = {"wrote": [1.0, 0.0, 0.0, 0.0], "penned": [0.95, 0.05, 0.0, 0.0]}
    zero_shot = ZeroShotLinker(StoreGraphView(oxigraph_store, "films"), encoder=_encoder(table), model=model)
    linked = LearnedRelationLinker(zero_shot, model).link("who penned Heat", "Heat", "Heat")
    assert (linked.path, linked.learned_from) == (parse_path(["written_by"]), "train")
    assert "'penned' ~ 'wrote'" in linked.describe()


def test_a_learned_path_that_finds_nothing_falls_back_to_the_ranking_and_says_so(oxigraph_store) -> None:
    from kgengine.rag.linking.entities import GraphEntityLinker
    from kgengine.rag.offline import OfflineAnswerer

    oxigraph_store.load("codes", CODES.triples, dataset="tsv")
    # learned: a path the topic has no edge for
    model = PathModel({"what causes_12 <e>?": PatternPath(parse_path(["treats_4"]), 1.0, 3)}, ["train"])
    view = StoreGraphView(oxigraph_store, "codes")
    linker = LearnedRelationLinker(ZeroShotLinker(view, model=model), model)
    answerer = OfflineAnswerer(view, GraphEntityLinker(oxigraph_store, "codes"), linker)
    answer = answerer.answer(Question("What causes_12 Disease1?", "Disease1"))
    assert answer.relation_path == ["^causes_12"] and [a.id for a in answer.answers] == ["Gene1"]
    assert answer.learned_from == "zero-shot"  # not "train": the header says what found the answers
    assert answer.reasoning[0] == "topic entity Disease1: given as the topic, matched by id"
    assert any(line.startswith("nothing found; zero-shot") for line in answer.reasoning)
    assert "followed ^causes_12 from Disease1: 1 direct answer" in answer.reasoning
