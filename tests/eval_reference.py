"""An independent implementation of the official BRINK evaluator's semantics, written from
issue 13's point-by-point description (not from kgengine.eval.metrics), to check ours
against to the last digit."""

from __future__ import annotations

import re
import string


def _norm(s: str) -> str:
    s = s.lower().replace("<pad>", " ")
    s = s.translate({ord(c): None for c in string.punctuation})
    words = [w for w in s.split() if w not in ("a", "an", "the")]
    return re.sub(r"\s+", " ", " ".join(words)).strip()


def independent_scores(gold: list[dict], pred: list[dict]) -> dict[str, float | int]:
    gold_by_id: dict = {}
    for g in gold:  # a dict: repeated ids keep their first place and their last record
        gold_by_id[g["id"]] = ({_norm(str(a)) for a in g["answers"]} - {""}, _norm(str(g["hard_answer"])))
    pred_by_id = {}
    for p in pred:
        pieces = [x.strip() for x in re.split(r"[,\n\r]+", str(p["raw_output"]).strip()) if x.strip()]
        pred_by_id[p["id"]] = {_norm(x) for x in pieces} - {""}
    sums = [0.0] * 5
    for qid, (answers, hard) in gold_by_id.items():
        predicted = pred_by_id.get(qid, set())
        both = len(predicted & answers)
        row = [float(both > 0), both / len(predicted) if predicted else 0.0,
               both / len(answers) if answers else 0.0,
               2.0 * both / (len(predicted) + len(answers)) if predicted or answers else 0.0,
               float(hard in predicted)]
        for i in range(5):
            sums[i] += row[i]
    n = len(gold_by_id)
    hits_any, precision, recall, f1, hits_hard = (x / n for x in sums)
    return {"hits_any": hits_any, "precision": precision, "recall": recall, "f1": f1,
            "hits_hard": hits_hard, "hhr": hits_hard / hits_any if hits_any > 0 else 0.0, "n": n}
