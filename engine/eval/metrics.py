"""BRINK's strict metrics exactly as the official evaluator computes them
(boschresearch/brink ``evaluation/evaluate_brink.py``), the permissive substring variant of
BRINK App. I (RoG-style, for comparison only) and MetaQA Hit@1 (KG-RAG paper §4.2.1).

Pure: records in, numbers out; no files. The official semantics, point by point:

- a raw output is ``str()``-ed (JSON null becomes ``"None"``), stripped and split on runs of
  ``[,\\n\\r]`` (with ``split_on_spaces`` also on spaces and tabs); semicolons, ``|`` and
  "and" do not split; empty pieces are dropped;
- every piece and every gold answer is normalised: lowercase; ``<pad>`` becomes a space;
  ASCII punctuation (``string.punctuation``) is deleted without a space; the tokens
  a/an/the are dropped; whitespace collapses; pieces empty after that are dropped;
- gold: answers are ``str()``-ed and normalised, empty ones dropped; the hard answer is
  normalised and need not be among the answers; a repeated id keeps its first position and
  its last record (a Python dict), and the question count is of unique ids;
- predictions: ids match by Python dict lookup (so 1 and "1" differ; 1 and 1.0 do not); a
  gold id without a prediction scores as an empty one; prediction ids not in gold are
  ignored; a repeated prediction id keeps its last record;
- per question: Hits@Any = [P∩A ≠ ∅], Hits@Hard = [hard ∈ P], precision = |P∩A|/|P| (0 if
  P is empty), recall = |P∩A|/|A| (0 if A is empty), F1 = 2|P∩A|/(|P|+|A|) (0 if both are
  empty), each averaged over questions (F1 is not the harmonic mean of the averages); the
  sums run in gold order with plain float addition, so the figures equal the official ones
  to the last digit; HHR = mean Hits@Hard / mean Hits@Any (0 when Hits@Any is 0; it can
  exceed 1, since the hard answer need not be a gold answer)."""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypedDict

from kgengine.answers import DELETE_PUNCTUATION, normalize_answer, split_raw_output
from kgengine.errors import KGEngineError

__all__ = ["normalize_answer", "split_raw_output"]  # re-exported: the metrics' text rules

class MetricsInputError(KGEngineError):
    """A gold or prediction record the official evaluator would refuse; ``index`` is its
    0-based position in the JSON list (callers add the file name)."""

    def __init__(self, index: int | None, reason: str) -> None:
        self.index, self.reason = index, reason
        super().__init__(reason if index is None else f"record {index}: {reason}")


def prediction_answers(raw_output: Any, split_on_spaces: bool = False) -> list[str]:
    """The normalised, de-duplicated predictions (first-seen order) of a ``raw_output``
    value as read from JSON: it is ``str()``-ed first, so null scores as "none"."""
    seen: dict[str, None] = {}
    for piece in split_raw_output(str(raw_output), split_on_spaces):
        normal = normalize_answer(piece)
        if normal:
            seen.setdefault(normal, None)
    return list(seen)


def gold_answer_set(answers: Iterable[Any]) -> frozenset[str]:
    return frozenset(n for n in (normalize_answer(str(a)) for a in answers) if n)


# ---- records --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Gold:
    answers: frozenset[str]  # normalised, non-empty
    hard_answer: str  # normalised (may be "" and may lie outside answers)


def _record(index: int, record: Any, keys: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(record, Mapping):
        raise MetricsInputError(index, f"expected a JSON object, got {type(record).__name__}")
    for key in keys:
        if key not in record:
            raise MetricsInputError(index, f"missing {key!r}")
    if not isinstance(record["id"], Hashable):
        raise MetricsInputError(index, f"'id' must be a string or a number, got {record['id']!r}")
    return record


def read_gold(records: Any) -> dict[Any, Gold]:
    """Gold records (a JSON list of {id, answers, hard_answer, ...}) by id, in the order
    the official evaluator iterates them."""
    if not isinstance(records, list):
        raise MetricsInputError(None, "the gold file must hold a JSON list")
    gold: dict[Any, Gold] = {}
    for index, raw in enumerate(records):
        record = _record(index, raw, ("id", "answers", "hard_answer"))
        if not isinstance(record["answers"], list):
            raise MetricsInputError(index, f"'answers' must be a list for id={record['id']!r}")
        gold[record["id"]] = Gold(gold_answer_set(record["answers"]),
                                  normalize_answer(str(record["hard_answer"])))
    return gold


def read_predictions(records: Any, split_on_spaces: bool = False) -> dict[Any, list[str]]:
    """Prediction records (a JSON list of {id, raw_output, ...}) by id."""
    if not isinstance(records, list):
        raise MetricsInputError(None, "the prediction file must hold a JSON list")
    predictions: dict[Any, list[str]] = {}
    for index, raw in enumerate(records):
        record = _record(index, raw, ("id", "raw_output"))
        predictions[record["id"]] = prediction_answers(record["raw_output"], split_on_spaces)
    return predictions


# ---- scores ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class QuestionScore:
    hits_any: float
    precision: float
    recall: float
    f1: float
    hits_hard: float


# One question's figures in an evaluation: the strict scores, the permissive ones and, for a
# Hit@1 set (MetaQA), Hit@1; ``hits_hard`` is None for a Hit@1 set, ``hit@1`` for a BRINK one.
QuestionFigures = TypedDict("QuestionFigures", {
    "hits_any": float, "precision": float, "recall": float, "f1": float, "hits_hard": float | None,
    "hit@1": float | None, "permissive_hits_any": float, "permissive_f1": float})


def score_question(predicted: Iterable[str], answers: frozenset[str], hard_answer: str) -> QuestionScore:
    """One question's strict scores from normalised predictions and gold."""
    pred = set(predicted)
    overlap = len(pred & answers)
    return QuestionScore(
        hits_any=1.0 if overlap else 0.0,
        precision=overlap / len(pred) if pred else 0.0,
        recall=overlap / len(answers) if answers else 0.0,
        f1=2.0 * overlap / (len(pred) + len(answers)) if pred or answers else 0.0,
        hits_hard=1.0 if hard_answer in pred else 0.0,
    )


@dataclass(frozen=True)
class Scores:
    hits_any: float
    precision: float
    recall: float
    f1: float
    hits_hard: float
    hhr: float
    n: int

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


METRIC_KEYS = ("hits_any", "precision", "recall", "f1", "hits_hard", "hhr", "n")


def hard_hits_rate(hits_hard: float, hits_any: float) -> float:
    return hits_hard / hits_any if hits_any > 0 else 0.0


def aggregate(scores: Sequence[QuestionScore]) -> Scores:
    """Means over questions (plain left-to-right sums, as the official evaluator adds)."""
    if not scores:
        raise MetricsInputError(None, "no gold questions to score")
    totals = {"hits_any": 0.0, "precision": 0.0, "recall": 0.0, "f1": 0.0, "hits_hard": 0.0}
    for score in scores:
        for key in totals:
            totals[key] += getattr(score, key)
    n = len(scores)
    means = {key: total / n for key, total in totals.items()}
    return Scores(**means, hhr=hard_hits_rate(means["hits_hard"], means["hits_any"]), n=n)


def evaluate(gold: Mapping[Any, Gold], predictions: Mapping[Any, Sequence[str]]) -> Scores:
    """Strict BRINK scores of parsed predictions against parsed gold."""
    return aggregate([score_question(predictions.get(qid, ()), g.answers, g.hard_answer)
                      for qid, g in gold.items()])


def evaluate_records(gold_records: Any, prediction_records: Any, split_on_spaces: bool = False) -> Scores:
    """Strict BRINK scores of the two official JSON lists (already parsed)."""
    return evaluate(read_gold(gold_records), read_predictions(prediction_records, split_on_spaces))


def missing_predictions(gold: Mapping[Any, Gold], predictions: Mapping[Any, Sequence[str]]) -> int:
    return sum(1 for qid in gold if qid not in predictions)


# ---- permissive (BRINK App. I; NOT the strict metric) --------------------------------------
_ARTICLE_WORDS = re.compile(r"\b(a|an|the)\b")


def permissive_normalize(text: str) -> str:
    """RoG's normaliser: lowercase, delete ASCII punctuation, articles become spaces,
    collapse whitespace."""
    text = text.lower().translate(DELETE_PUNCTUATION)
    return " ".join(_ARTICLE_WORDS.sub(" ", text).split())


def permissive_score_question(raw_output: Any, answers: Iterable[Any], hard_answer: Any,
                              split_on_spaces: bool = False) -> QuestionScore:
    """The permissive, substring-based scores prior work reports (BRINK App. I, after RoG):
    a gold answer counts as found when its normalised text occurs anywhere in the normalised
    output, so "not Barack Obama" finds "Barack Obama". Precision divides the gold answers
    found by the number of output pieces, recall by the number of gold answers."""
    text = str(raw_output)
    pieces = split_raw_output(text, split_on_spaces)
    whole = permissive_normalize(" ".join(pieces))
    gold = [g for g in dict.fromkeys(permissive_normalize(str(a)) for a in answers) if g]
    found = sum(1 for g in gold if g in whole)
    precision = found / len(pieces) if pieces else 0.0
    recall = found / len(gold) if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    hard = permissive_normalize(str(hard_answer))
    return QuestionScore(hits_any=1.0 if found else 0.0, precision=precision, recall=recall, f1=f1,
                         hits_hard=1.0 if hard and pieces and hard in whole else 0.0)


def evaluate_permissive(gold_records: Sequence[Mapping[str, Any]],
                        prediction_records: Sequence[Mapping[str, Any]],
                        split_on_spaces: bool = False) -> Scores:
    """Permissive (substring) scores over the official JSON lists, with the same id
    handling as the strict ones. Labelled ``permissive`` wherever it is reported."""
    read_gold(gold_records)  # the same validation as the strict path
    read_predictions(prediction_records, split_on_spaces)
    gold = {r["id"]: r for r in gold_records}
    raw = {r["id"]: r["raw_output"] for r in prediction_records}
    return aggregate([permissive_score_question(raw.get(qid, ""), g["answers"], g["hard_answer"],
                                                split_on_spaces) for qid, g in gold.items()])


# ---- MetaQA Hit@1 (KG-RAG §4.2.1) -----------------------------------------------------------
def hit_at_1(top_answer: str | None, gold_answers: Iterable[str]) -> float:
    """1 when the top answer, lowercased and stripped, equals one gold answer lowercased
    and stripped ("Pitt is the actor in question" does not match "Brad Pitt")."""
    if top_answer is None:
        return 0.0
    top = top_answer.lower().strip()
    return 1.0 if any(top == g.lower().strip() for g in gold_answers) else 0.0


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and population standard deviation (ddof 0) of per-seed figures."""
    if not values:
        return 0.0, 0.0
    centre = mean(values)
    return centre, (sum((v - centre) ** 2 for v in values) / len(values)) ** 0.5
