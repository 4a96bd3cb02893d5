"""The strict BRINK metrics, point by point against the official evaluator's semantics
(issue 13 lists them), with expectations worked out by hand in the comments."""

from __future__ import annotations

import pytest
from kgengine.eval.metrics import (
    Gold,
    MetricsInputError,
    evaluate,
    evaluate_permissive,
    evaluate_records,
    gold_answer_set,
    hit_at_1,
    mean_std,
    missing_predictions,
    normalize_answer,
    permissive_score_question,
    prediction_answers,
    read_gold,
    read_predictions,
    score_question,
    split_raw_output,
)


# ---- splitting ------------------------------------------------------------------------------
def test_split_on_runs_of_commas_newlines_and_carriage_returns() -> None:
    assert split_raw_output("  a, b,,\n\r\nc  ") == ["a", "b", "c"]


def test_semicolons_pipes_and_and_do_not_split() -> None:
    assert split_raw_output("a; b | c and d") == ["a; b | c and d"]


def test_spaces_and_tabs_split_only_when_asked() -> None:
    assert split_raw_output("New York\tParis") == ["New York\tParis"]
    assert split_raw_output("New York\tParis", split_on_spaces=True) == ["New", "York", "Paris"]


def test_empty_and_blank_output_give_no_pieces() -> None:
    assert split_raw_output("") == []
    assert split_raw_output(" ,\n, ") == []


# ---- normalisation ----------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ("Paris", "paris"),
    ("e1;e2", "e1e2"),  # punctuation deleted without a space
    ("/m/0abc", "m0abc"),
    ("The University of Oslo", "university of oslo"),  # article token dropped
    ("an apple a day", "apple day"),
    ("theatre", "theatre"),  # only whole tokens are articles
    ("x<pad>y", "x y"),  # <pad> becomes a space
    ("<PAD>Obama", "obama"),  # lowercased before <pad> is removed
    ("  many   spaces\t here ", "many spaces here"),
    ("Émile–Zola’s", "émile–zola’s"),  # non-ASCII punctuation stays
    ("the", ""),
    ("a.b", "ab"),
])
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


def test_predictions_are_normalised_deduplicated_and_empty_pieces_dropped() -> None:
    # "The Paris" -> "paris" twice, "!!" -> "" dropped, "the" -> "" dropped
    assert prediction_answers("Paris, The Paris, !!, the, London") == ["paris", "london"]


def test_null_raw_output_becomes_none() -> None:
    assert prediction_answers(None) == ["none"]
    assert prediction_answers(12) == ["12"]
    assert prediction_answers(1.5) == ["15"]  # str(1.5) = "1.5", then "." is deleted


# ---- gold -------------------------------------------------------------------------------------
def test_gold_answers_stringified_normalised_and_empty_dropped() -> None:
    assert gold_answer_set(["The Paris", 42, "!!", None]) == frozenset({"paris", "42", "none"})


def test_hard_answer_need_not_be_among_the_answers() -> None:
    gold = read_gold([{"id": "q", "answers": ["a1"], "hard_answer": "The B2"}])
    assert gold["q"] == Gold(frozenset({"a1"}), "b2")
    # predicting only the hard answer: Hits@Hard 1 but Hits@Any 0 -> HHR undefined -> 0
    scores = evaluate(gold, {"q": ["b2"]})
    assert (scores.hits_any, scores.hits_hard, scores.hhr) == (0.0, 1.0, 0.0)


def test_repeated_gold_id_last_record_wins_and_counts_once() -> None:
    records = [{"id": "q1", "answers": ["x"], "hard_answer": "x"},
               {"id": "q2", "answers": ["y"], "hard_answer": "y"},
               {"id": "q1", "answers": ["z"], "hard_answer": "z"}]
    gold = read_gold(records)
    assert list(gold) == ["q1", "q2"]  # first position kept
    assert gold["q1"].answers == frozenset({"z"})
    scores = evaluate_records(records, [{"id": "q1", "raw_output": "z"}])
    assert scores.n == 2 and scores.hits_any == 0.5  # q1 hit (z), q2 missing


# ---- predictions ------------------------------------------------------------------------------
def test_ids_match_with_their_type() -> None:
    gold = [{"id": 1, "answers": ["e1"], "hard_answer": "e1"}]
    assert evaluate_records(gold, [{"id": "1", "raw_output": "e1"}]).hits_any == 0.0
    assert evaluate_records(gold, [{"id": 1, "raw_output": "e1"}]).hits_any == 1.0


def test_an_answer_that_is_an_article_vanishes() -> None:
    # "a" normalises to "" and is dropped from both sides: nothing can match it
    gold = [{"id": 1, "answers": ["a"], "hard_answer": "a"}]
    s = evaluate_records(gold, [{"id": 1, "raw_output": "a"}])
    assert (s.hits_any, s.f1, s.hits_hard) == (0.0, 0.0, 0.0)  # A = P = {}, hard "" not in P



def test_missing_prediction_is_empty_and_unknown_ids_ignored() -> None:
    gold = [{"id": "q1", "answers": ["e1"], "hard_answer": "e1"},
            {"id": "q2", "answers": ["e2"], "hard_answer": "e2"}]
    preds = [{"id": "q1", "raw_output": "e1"}, {"id": "zz", "raw_output": "e2"}]
    scores = evaluate_records(gold, preds)
    # q1 all 1; q2 empty: all 0 -> means 0.5; n counts gold ids only
    assert (scores.hits_any, scores.precision, scores.recall, scores.f1, scores.hits_hard, scores.n) == \
        (0.5, 0.5, 0.5, 0.5, 0.5, 2)
    assert missing_predictions(read_gold(gold), read_predictions(preds)) == 1


def test_repeated_prediction_id_last_wins() -> None:
    preds = read_predictions([{"id": "q", "raw_output": "a"}, {"id": "q", "raw_output": "b"}])
    assert preds == {"q": ["b"]}


@pytest.mark.parametrize(("records", "message"), [
    ({"id": "q"}, "JSON list"),
    ([["q"]], "JSON object"),
    ([{"answers": [], "hard_answer": ""}], "missing 'id'"),
    ([{"id": "q", "hard_answer": ""}], "missing 'answers'"),
    ([{"id": "q", "answers": []}], "missing 'hard_answer'"),
    ([{"id": "q", "answers": "a", "hard_answer": "a"}], "must be a list"),
    ([{"id": ["q"], "answers": [], "hard_answer": ""}], "'id' must be"),
])
def test_bad_gold_is_refused(records: object, message: str) -> None:
    with pytest.raises(MetricsInputError, match=message):
        read_gold(records)


def test_bad_predictions_and_empty_gold_are_refused() -> None:
    with pytest.raises(MetricsInputError, match="record 1: missing 'raw_output'"):
        read_predictions([{"id": "a", "raw_output": ""}, {"id": "b"}])
    with pytest.raises(MetricsInputError, match="no gold"):
        evaluate_records([], [])


# ---- per-question scores ----------------------------------------------------------------------
def test_per_question_scores_by_hand() -> None:
    # P = {a, b, c}, A = {a, d}: overlap 1 -> precision 1/3, recall 1/2, F1 = 2/(3+2) = 0.4
    s = score_question(["a", "b", "c"], frozenset({"a", "d"}), "d")
    assert (s.hits_any, s.precision, s.recall, s.f1, s.hits_hard) == (1.0, 1 / 3, 0.5, 0.4, 0.0)


def test_empty_prediction_and_empty_gold_score_zero() -> None:
    assert score_question([], frozenset({"a"}), "a") == score_question([], frozenset(), "")
    s = score_question([], frozenset(), "")
    assert (s.hits_any, s.precision, s.recall, s.f1, s.hits_hard) == (0.0, 0.0, 0.0, 0.0, 0.0)
    # A empty but P not: recall 0 (A empty), F1 = 0/(1+0) = 0
    assert score_question(["x"], frozenset(), "").recall == 0.0


def test_f1_is_averaged_per_question_not_harmonic_mean_of_averages() -> None:
    gold = [{"id": 1, "answers": ["e1"], "hard_answer": "e1"},
            {"id": 2, "answers": ["e2", "e3", "e4"], "hard_answer": "e2"}]
    preds = [{"id": 1, "raw_output": "e1, x, y, z"}, {"id": 2, "raw_output": "e2"}]
    s = evaluate_records(gold, preds)
    # q1: P 1/4, R 1, F1 2/5; q2: P 1, R 1/3, F1 2/4 -> F1 mean 0.45
    assert s.precision == (0.25 + 1.0) / 2 and s.recall == (1.0 + 1 / 3) / 2
    assert s.f1 == (0.4 + 0.5) / 2
    assert s.f1 != pytest.approx(2 * s.precision * s.recall / (s.precision + s.recall))


def test_hhr_can_exceed_one() -> None:
    gold = [{"id": 1, "answers": ["e1"], "hard_answer": "h1"},
            {"id": 2, "answers": ["e2"], "hard_answer": "h2"}]
    s = evaluate_records(gold, [{"id": 1, "raw_output": "e1, h1"}, {"id": 2, "raw_output": "h2"}])
    # Hits@Any 1/2 (only q1 hits a gold answer), Hits@Hard 2/2 -> HHR 2
    assert (s.hits_any, s.hits_hard, s.hhr) == (0.5, 1.0, 2.0)


def test_official_example_pair() -> None:
    gold = [{"id": "q1", "answers": ["Paris", "London"], "hard_answer": "Paris"},
            {"id": "q2", "answers": ["Marriage"], "hard_answer": "Marriage"},
            {"id": "q3", "answers": ["University of Oslo"], "hard_answer": "University of Oslo"}]
    preds = [{"id": "q1", "raw_output": "Paris, London"}, {"id": "q2", "raw_output": "Marriage"},
             {"id": "q3", "raw_output": "The University of Oslo"}]
    s = evaluate_records(gold, preds).as_dict()
    assert s == {"hits_any": 1.0, "precision": 1.0, "recall": 1.0, "f1": 1.0, "hits_hard": 1.0,
                 "hhr": 1.0, "n": 3}


def test_split_on_spaces_changes_multiword_scores() -> None:
    gold = [{"id": 1, "answers": ["New York"], "hard_answer": "New York"}]
    preds = [{"id": 1, "raw_output": "New York"}]
    assert evaluate_records(gold, preds).hits_any == 1.0
    assert evaluate_records(gold, preds, split_on_spaces=True).hits_any == 0.0


# ---- permissive (App. I) ----------------------------------------------------------------------
def test_permissive_counts_substrings_the_strict_metric_refuses() -> None:
    gold = [{"id": 1, "answers": ["Barack Obama"], "hard_answer": "Barack Obama"}]
    preds = [{"id": 1, "raw_output": "not Barack Obama"}]
    assert evaluate_records(gold, preds).hits_any == 0.0
    permissive = evaluate_permissive(gold, preds)
    assert (permissive.hits_any, permissive.hits_hard) == (1.0, 1.0)


def test_permissive_precision_recall_by_hand() -> None:
    # pieces: "e12 and e7", "e9" (2); gold found as substrings: e12, e7 (e30 not) -> 2 of 3
    s = permissive_score_question("e12 and e7, e9", ["e12", "e7", "e30"], "e30")
    assert (s.hits_any, s.precision, s.recall, s.hits_hard) == (1.0, 1.0, 2 / 3, 0.0)
    assert s.f1 == pytest.approx(2 * 1.0 * (2 / 3) / (1.0 + 2 / 3))


# ---- MetaQA Hit@1 and seeds -------------------------------------------------------------------
def test_hit_at_1_lowercases_and_strips_only() -> None:
    assert hit_at_1("  brad PITT ", ["Brad Pitt"]) == 1.0
    assert hit_at_1("Pitt is the actor in question", ["Brad Pitt"]) == 0.0
    assert hit_at_1("Brad Pitt.", ["Brad Pitt"]) == 0.0  # no punctuation removal
    assert hit_at_1(None, ["x"]) == 0.0
    assert hit_at_1("b", ["a", "B "]) == 1.0


def test_mean_std_is_population_std() -> None:
    centre, spread = mean_std([0.9, 1.0])
    assert centre == pytest.approx(0.95) and spread == pytest.approx(0.05)
    assert mean_std([]) == (0.0, 0.0)


# ---- adversarial agreement with an independent implementation ------------------------------
def test_random_adversarial_pairs_agree_with_the_independent_implementation() -> None:
    import random

    from eval_reference import independent_scores

    pieces = ["e1", "E1", "the e1", "e1.", "a", "An", "<pad>e2", "e2<PAD>", "é3", "é3’", "x;y", "xy",
              "/m/0ab", "m0ab", "New York", "new  york", "and", "|", "", " ", "e4\te5", "Ωmega", "the the"]
    seps = [", ", ",", "\n", "\r\n", ",,\n", "; ", " | ", " and "]
    rng = random.Random(13)
    for trial in range(300):
        ids = [rng.choice([f"q{i}", i, str(i)]) for i in range(rng.randint(1, 12))]  # repeats and types
        gold = [{"id": qid, "answers": [rng.choice(pieces + [None, 7]) for _ in range(rng.randint(0, 4))],
                 "hard_answer": rng.choice(pieces + [None])} for qid in ids]
        pred = []
        for qid in rng.sample(ids, rng.randint(0, len(ids))) + ["unknown"]:
            raw = rng.choice(seps).join(rng.choice(pieces) for _ in range(rng.randint(0, 5)))
            pred.append({"id": qid, "raw_output": rng.choice([raw, raw, None, 3])})
        assert evaluate_records(gold, pred).as_dict() == independent_scores(gold, pred), trial
