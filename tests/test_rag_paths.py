"""Relation paths, path learning, nearest patterns and in-memory rule bodies (pure), on
hand-made KGs whose answers are checked by hand."""

from __future__ import annotations

import math

import pytest
from helpers.toy_kg import triples
from kgengine.mining.rules import parse_rule
from kgengine.model import Triple
from kgengine.rag.graph.memory import GraphAdjacency, MemoryGraphView, body_answers
from kgengine.rag.graph.steps import Step, format_path, parse_path
from kgengine.rag.graph.view import follow_path
from kgengine.rag.linking.learning import Example, learn_patterns
from kgengine.rag.linking.patterns import PatternIndex, pattern_of
from kgengine.rag.linking.words import lexical_relation_score, question_words, relation_words

# a tiny movie KB: two films by one director, actors, a language
MOVIES = [*triples("""
Heat | directed_by | Mann
Collateral | directed_by | Mann
Alien | directed_by | Scott
Heat | starred_actors | Pacino
Heat | starred_actors | De Niro
Collateral | starred_actors | Cruise
Alien | starred_actors | Weaver
Heat | in_language | English
Collateral | in_language | English
Alien | in_language | English
"""),
]



def reach(adjacency: GraphAdjacency, topic: str, path) -> set[str]:
    """The entities at the end of ``path`` from ``topic``, as the answerer follows it."""
    return set(follow_path(MemoryGraphView(adjacency, str), topic, path).answers)

@pytest.fixture
def movies() -> GraphAdjacency:
    return GraphAdjacency(MOVIES)


def test_paths_format_and_parse() -> None:
    path = (Step("directed_by"), Step("starred_actors", True))
    assert format_path(path) == ["directed_by", "^starred_actors"]
    assert parse_path(["directed_by", "^starred_actors"]) == path


def test_reach_never_revisits_or_answers_the_topic(movies: GraphAdjacency) -> None:
    # films that share a director with Heat: Collateral only, not Heat itself
    assert reach(movies, "Heat", parse_path(["directed_by", "^directed_by"])) == {"Collateral"}
    # co-stars of Pacino: De Niro (Pacino excluded)
    assert reach(movies, "Pacino", parse_path(["^starred_actors", "starred_actors"])) == {"De Niro"}
    # a middle hop never goes back through the topic: Mann -> Heat -> English -> films in
    # English excluding... the topic is Mann, so Heat, Collateral and Alien all count
    assert reach(movies, "Mann", parse_path(["^directed_by", "in_language", "^in_language"])) == {
        "Heat", "Collateral", "Alien"}
    # from Heat: language, then its films (Heat excluded), then their directors
    assert reach(movies, "Heat", parse_path(["in_language", "^in_language", "directed_by"])) == {
        "Mann", "Scott"}


def test_paths_from_lists_every_path_of_the_lengths(movies: GraphAdjacency) -> None:
    one = MemoryGraphView(movies, str).paths_from("Alien", [1])
    assert {tuple(format_path(p)): ends for p, ends in one.items()} == {
        ("directed_by",): {"Scott"}, ("starred_actors",): {"Weaver"}, ("in_language",): {"English"}}
    two = MemoryGraphView(movies, str).paths_from("Alien", [2])
    assert two[parse_path(["in_language", "^in_language"])] == {"Heat", "Collateral"}
    assert all(len(p) == 2 for p in two)
    # a frontier above the cap is not expanded: the two other English films stop the walk
    capped = MemoryGraphView(movies, str).paths_from("Alien", [3], frontier_cap=1)
    assert not any(p[:2] == parse_path(["in_language", "^in_language"]) for p in capped)
    assert parse_path(["directed_by", "^directed_by"]) not in capped  # Scott made only Alien
    assert MemoryGraphView(movies, str).paths_from("Alien", [3], frontier_cap=2)[
        parse_path(["in_language", "^in_language", "directed_by"])] == {"Mann"}


def test_learn_patterns_finds_the_path_reaching_the_gold(movies: GraphAdjacency) -> None:
    examples = [
        Example("who starred in films directed by <e>", "Mann", frozenset({"Pacino", "De Niro", "Cruise"})),
        Example("who starred in films directed by <e>", "Scott", frozenset({"Weaver"})),
        Example("who directed <e>", "Heat", frozenset({"Mann"})),
        Example("who directed <e>", "Alien", frozenset({"Scott"})),
    ]
    learned = learn_patterns(MemoryGraphView(movies, str), examples, max_hops=2)
    assert format_path(learned["who starred in films directed by <e>"].path) == [
        "^directed_by", "starred_actors"]
    assert learned["who starred in films directed by <e>"].score == pytest.approx(1.0)
    assert format_path(learned["who directed <e>"].path) == ["directed_by"]
    assert learned["who directed <e>"].examples == 2


def test_learning_prefers_the_precise_path_and_the_hop_count(movies: GraphAdjacency) -> None:
    # "films in the same language as Heat": ^in_language after in_language reaches exactly
    # the gold; the MetaQA hop count (2) rules out one-step paths
    examples = [Example("films like <e>", "Heat", frozenset({"Collateral", "Alien"}), hops=2)]
    learned = learn_patterns(MemoryGraphView(movies, str), examples)
    assert format_path(learned["films like <e>"].path) == ["in_language", "^in_language"]
    # partial overlap scores F1: one of two gold reached with one extra answer = 0.5
    partial = [Example("q <e>", "Heat", frozenset({"Collateral", "Nowhere"}), hops=2)]
    best = learn_patterns(MemoryGraphView(movies, str), partial)["q <e>"]
    assert best.score == pytest.approx(2 * 1 / (1 + 2))  # directed_by/^directed_by: {Collateral}


def test_rule_reach_lets_a_step_learn_its_relation_without_its_triple() -> None:
    # husband(a, b) is missing but wife(b, a) says it; d and e have their husband triples
    kg = GraphAdjacency([Triple("b", "wife", "a"), Triple("d", "husband", "c"), Triple("c", "wife", "d"),
                    Triple("e", "husband", "f")])
    rule = parse_rule("wife(?b,?a) => husband(?a,?b)")

    def rule_reach(topic: str, step: Step) -> set[str]:
        if step.relation != "husband":
            return set()
        return body_answers(kg, rule, topic, step.inverse)

    pattern = "who is the husband of <e>"
    examples = [Example(pattern, "a", frozenset({"b"}), hops=1),
                Example(pattern, "d", frozenset({"c"}), hops=1),
                Example(pattern, "e", frozenset({"f"}), hops=1)]
    # without rules: husband reaches 2 of 3 (not a's), so does ^wife (not e's): the tie goes
    # to the path text, ^wife
    without = learn_patterns(MemoryGraphView(kg, str), examples)[pattern]
    assert format_path(without.path) == ["^wife"] and without.score == pytest.approx(2 / 3)
    # with the rule, husband also answers a: 3 of 3
    learned = learn_patterns(MemoryGraphView(kg, str), examples, rule_reach=rule_reach)[pattern]
    assert format_path(learned.path) == ["husband"] and learned.score == pytest.approx(1.0)


def test_body_answers_binds_either_head_argument() -> None:
    kg = GraphAdjacency([Triple("x", "parent", "p"), Triple("p", "sibling", "u"), Triple("y", "parent", "p")])
    rule = parse_rule("parent(?a,?e) & sibling(?e,?b) => uncle(?a,?b)")
    assert body_answers(kg, rule, "x", inverse=False) == {"u"}
    assert body_answers(kg, rule, "u", inverse=True) == {"x", "y"}
    assert body_answers(kg, rule, "nobody", inverse=False) == set()
    # the topic is never its own answer
    loop = GraphAdjacency([Triple("a", "r", "b"), Triple("b", "r", "a")])
    assert body_answers(loop, parse_rule("r(?a,?e) & r(?e,?b) => s(?a,?b)"), "a", False) == set()


def test_pattern_of_brackets_and_mentions() -> None:
    assert pattern_of("what movies did [Tom Hanks] act in", None) == "what movies did <e> act in"
    assert pattern_of("Whose father is e0903?", "e0903") == "whose father is <e>?"
    # whole tokens only: 7 is not the 7 in 72
    assert pattern_of("Who is the aunt of 72 and 7?", "7") == "who is the aunt of 72 and <e>?"
    assert pattern_of("no mention here", "zzz") == "no mention here"


def test_pattern_index_finds_the_wording_with_the_rare_words() -> None:
    index = PatternIndex(["what movies did <e> direct", "what movies did <e> write",
                          "what movies did <e> act in", "who directed <e>"])
    (best, similarity), *_ = index.nearest("which films did <e> direct")
    assert best == "what movies did <e> direct" and 0 < similarity < 1
    assert index.nearest("what movies did <e> write")[0] == ("what movies did <e> write", pytest.approx(1.0))
    assert index.nearest("zzzz qqqq") == []


def test_lexical_relation_score() -> None:
    assert relation_words("/film/film/directed_by") == ["film", "film", "directed"]
    assert relation_words("hasCapitalCity") == ["capital", "city"]
    words = question_words("who directed the film <e>")
    assert words == ["directed", "film"]
    assert lexical_relation_score(words, relation_words("directed_by")) == 1.0
    assert lexical_relation_score(question_words("who is the director of <e>"),
                                  relation_words("directed_by")) == pytest.approx(6 / 8)
    assert lexical_relation_score(words, relation_words("in_language")) == 0.0


def test_path_classifier_composes_the_slots_of_known_patterns() -> None:
    from kgengine.rag.linking.classifier import PathClassifier

    learned = {
        "the films that share actors with <e> were in which genres":
            parse_path(["starred_actors", "^starred_actors", "has_genre"]),
        "the films that share writers with <e> were in which languages":
            parse_path(["written_by", "^written_by", "in_language"]),
        "the films that share writers with <e> were in which genres":
            parse_path(["written_by", "^written_by", "has_genre"]),
        "who directed <e>": parse_path(["directed_by"]),
    }
    classifier = PathClassifier(learned)
    # actors (first slots, next to <e>) from one pattern, languages (last slot) from another:
    # no known pattern has this path
    (best, score), *rest = classifier.rank("the films that share actors with <e> were in which languages")
    assert format_path(best) == ["starred_actors", "^starred_actors", "in_language"]
    assert best not in learned.values() and all(s <= score for _, s in rest)
    assert format_path(classifier.rank("which person directed <e>")[0][0]) == ["directed_by"]
    posteriors = classifier.posteriors("who directed <e>", "length")
    assert max(posteriors, key=posteriors.get) == "1"
    assert sum(math.exp(v) for v in posteriors.values()) == pytest.approx(1.0)
    assert PathClassifier({}).rank("anything") == []
