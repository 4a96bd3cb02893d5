"""BRINK questions: topic coin, Algorithm 1, answer completion, splits, surface forms,
templates (pure)."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kgengine.brink.questions import (
    SPLITS,
    AnswerIndex,
    QuestionDirection,
    QuestionItem,
    QuestionUnit,
    balance,
    make_items,
    mentions,
    split,
    surface_forms,
    topic_direction,
)
from kgengine.brink.removal import Grounding
from kgengine.model import Triple
from kgengine.surface import Surface
from kgengine.wording import Reading, phrase_for, template_question

T = Triple


def item(h: str, r: str, t: str, direction: QuestionDirection = QuestionDirection.INVERSE,
         rule: int = 0) -> QuestionItem:
    triple = T(h, r, t)
    return QuestionItem(triple, direction, (Grounding(rule, (T(t, "x", h),), triple),))


def test_topic_coin_is_seeded_per_triple_and_fair() -> None:
    triples = [T(str(i), "r", str(i + 1)) for i in range(2000)]
    directions = [topic_direction(0, t) for t in triples]
    assert directions == [topic_direction(0, t) for t in reversed(triples)][::-1]
    assert 900 < Counter(directions)[QuestionDirection.FORWARD] < 1100
    assert directions != [topic_direction(1, t) for t in triples]


def test_items_per_triple_or_per_grounding() -> None:
    a = Grounding(0, (T("x", "p", "e"),), T("x", "h", "y"))
    b = Grounding(1, (T("x", "q", "e"),), T("x", "h", "y"))
    c = Grounding(1, (T("u", "q", "e"),), T("u", "h", "v"))
    per_triple = make_items([a, b, c], QuestionUnit.TRIPLE, 0)
    assert [(i.triple, i.paths) for i in per_triple] == [(a.head, (a, b)), (c.head, (c,))]
    per_grounding = make_items([a, b, c], QuestionUnit.GROUNDING, 0)
    assert [i.paths for i in per_grounding] == [(a,), (b,), (c,)]
    assert per_grounding == make_items([a, b, c], QuestionUnit.GROUNDING, 0)
    for i in per_triple:
        assert {i.topic, i.answer} == {i.triple.head, i.triple.tail}
        assert i.answer == (i.triple.tail if i.direction == QuestionDirection.FORWARD else i.triple.head)


def test_balance_is_algorithm_1() -> None:
    # 400 questions, τ = 0.05: limit ⌊20⌋; answer "hub" has 100 -> keeps 20, others keep all
    items = [item("hub", "r", f"t{i}") for i in range(100)]
    items += [item(f"a{i // 3}", "r", f"u{i}") for i in range(300)]
    kept = balance(items, 0.05, seed=3)
    counts = Counter(i.answer for i in kept)
    assert counts["hub"] == math.floor(0.05 * 400)
    assert all(counts[f"a{k}"] == 3 for k in range(100))
    assert kept == [i for i in items if i in set(kept)]  # order kept
    assert kept == balance(items, 0.05, seed=3)
    assert kept != balance(items, 0.05, seed=4)
    assert balance(items, 1.0, seed=0) == items


def test_balance_keeps_one_per_answer_when_tau_q_is_below_one() -> None:
    items = [item("a", "r", "x"), item("a", "r", "y"), item("b", "r", "z")]
    kept = balance(items, 0.01, seed=0)  # literal Algorithm 1 would keep nothing
    assert Counter(i.answer for i in kept) == {"a": 1, "b": 1}
    with pytest.raises(ValueError):
        balance(items, 0.0, seed=0)


def test_answer_completion_follows_the_asked_direction() -> None:
    kg = [T("7", "aunt", "72"), T("7", "aunt", "73"), T("8", "aunt", "72"), T("7", "sister", "9")]
    index = AnswerIndex(kg)
    # "Who is the aunt of 72?" (topic = tail): every h with aunt(h, 72)
    assert index.answers(item("7", "aunt", "72", QuestionDirection.INVERSE)) == ["7", "8"]
    # "Whose aunt is 7?" (topic = head): every t with aunt(7, t)
    assert index.answers(item("7", "aunt", "72", QuestionDirection.FORWARD)) == ["72", "73"]


def test_answer_index_for_some_items_answers_them_as_the_whole_index_does() -> None:
    rng = random.Random(4)
    kg = [T(str(rng.randrange(30)), rng.choice("pqr"), str(rng.randrange(30))) for _ in range(400)]
    asked = [item(t.head, t.relation, t.tail, d) for t in kg[::13] for d in QuestionDirection]
    whole, lean = AnswerIndex(kg), AnswerIndex(kg, asked)
    assert all(lean.answers(i) == whole.answers(i) for i in asked)
    assert sum(map(len, lean._out.values())) < sum(map(len, whole._out.values()))


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 400), st.integers(0, 5), st.booleans())
def test_splits_are_disjoint_complete_8_1_1_and_seeded(n: int, seed: int, grouped: bool) -> None:
    items = [item(f"h{i // 3 if grouped else i}", "r", "t", rule=i) for i in range(n)]
    parts = split(items, seed)
    assert list(parts) == list(SPLITS)
    ids = [id(i) for p in parts.values() for i in p]
    assert len(ids) == len(set(ids)) == n  # disjoint and complete
    assert parts == split(list(reversed(items)), seed) or grouped  # input order does not matter
    assert parts == split(items, seed)
    triples = [{i.triple for i in parts[s]} for s in SPLITS]
    assert not (triples[0] & triples[1] or triples[0] & triples[2] or triples[1] & triples[2])
    if not grouped:
        assert len(parts["train"]) == math.floor(0.8 * n)
        assert len(parts["valid"]) == math.floor(0.9 * n) - math.floor(0.8 * n)


def test_split_depends_on_the_seed() -> None:
    items = [item(f"h{i}", "r", "t") for i in range(100)]
    assert split(items, 0)["test"] != split(items, 1)["test"]


def test_surface_forms() -> None:
    entities = ["b", "a", "c"]
    assert surface_forms(entities, Surface.DATASET) == {"a": "a", "b": "b", "c": "c"}
    private = surface_forms(entities, Surface.PRIVATE, private_ids={"a": "e1", "b": "e0", "c": "e2"})
    assert private == {"a": "e1", "b": "e0", "c": "e2"}
    with pytest.raises(ValueError):
        surface_forms(entities, Surface.PRIVATE, private_ids={"a": "e1"})
    text = surface_forms(entities, Surface.TEXT, labels={"a": "Paris", "b": "Paris", "c": "Tab\there"})
    assert text == {"a": "Paris (a)", "b": "Paris (b)", "c": "Tab here"}
    assert len(set(text.values())) == 3


def test_mentions_is_token_aware_and_case_blind() -> None:
    assert mentions("Who is the aunt of 72?", "72")
    assert not mentions("Who is the aunt of 72?", "7")
    assert mentions("What is the film of X?", "Film")
    assert not mentions("Whose aunt is e0123?", "e012")
    assert mentions("Who founded Paris (Q90)?", "Paris (Q90)")


@pytest.mark.parametrize(("relation", "forward", "inverse"), [
    ("aunt", "Whose aunt is X?", "Who is the aunt of X?"),
    ("wife_of", "Whose wife is X?", "Who is the wife of X?"),
    ("/people/person/nationality", "What is the nationality of X?", "Who has X as their nationality?"),
    ("/location/location/contains", "What does X contain?", "What contains X?"),
    ("/film/actor/film./film/performance/film", "What is the film in a performance of X?",
     "Who has X as their film in a performance?"),
    ("/music/genre/artists", "Who are the artists of X?", "Which genre has X among its artists?"),
    ("P27", "What is the country of citizenship of X?", "What has X as its country of citizenship?"),
    ("P31", "What is X an instance of?", "What is an instance of X?"),
    ("P131", "What is X located in?", "What is located in X?"),
    ("P22", "Who is the father of X?", "Whose father is X?"),
    ("directed_by", "Who is X directed by?", "What is directed by X?"),
    ("has_genre", "What is the genre of X?", "What has X as its genre?"),
])
def test_templates(relation: str, forward: str, inverse: str) -> None:
    assert template_question(relation, QuestionDirection.FORWARD, "X") == forward
    assert template_question(relation, QuestionDirection.INVERSE, "X") == inverse


def test_relation_label_overrides_the_name() -> None:
    assert template_question("P999", QuestionDirection.FORWARD, "X", label="sister city") == \
        "What is the sister city of X?"
    assert phrase_for("P999").reading == Reading.ATTRIBUTE  # generic wording without a label


relation_names = st.one_of(
    st.sampled_from(["aunt", "son", "wife_of", "/people/person/profession", "P31", "P131",
                     "/location/location/contains", "located_in", "hasGenre", "works_for"]),
    st.from_regex(r"[a-z][a-z_]{0,12}", fullmatch=True),
    st.from_regex(r"(/[a-z_]{1,8}){3}(\./([a-z_]{1,8}/){2}[a-z_]{1,8})?", fullmatch=True),
)
surfaces = st.from_regex(r"e[0-9]{4}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(relation_names, st.sampled_from(list(QuestionDirection)), surfaces, surfaces)
def test_template_names_the_topic_and_never_the_answer(relation: str, direction: QuestionDirection,
                                                        topic: str, answer: str) -> None:
    question = template_question(relation, direction, topic)
    assert mentions(question, topic)
    assert question.endswith("?")
    if topic != answer:
        assert not mentions(question, answer)
