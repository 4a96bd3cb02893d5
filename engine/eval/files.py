"""Reading and writing the official BRINK evaluator's files (gold.json: a JSON list of
{id, question, answers, hard_answer}; pred.json: a JSON list of {id, raw_output}) and
the per-question results.jsonl of a run."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from kgengine.errors import InputError, KGEngineError
from kgengine.eval.metrics import (
    MetricsInputError,
    Scores,
    evaluate_permissive,
    evaluate_records,
    missing_predictions,
    read_gold,
    read_predictions,
)
from kgengine.loaders.base import read_lines


def read_json(path: Path) -> Any:
    try:
        text = "\n".join(line for _, line in read_lines(path))  # undecodable: one line naming it
    except OSError as exc:
        raise KGEngineError(f"{path}: cannot read ({exc.strerror})") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(str(path), exc.lineno, text.splitlines()[exc.lineno - 1] if text else "",
                         f"not valid JSON ({exc.msg})") from exc


def score_files(gold_path: Path, pred_path: Path, split_on_spaces: bool = False,
                permissive: bool = False) -> tuple[Scores, int]:
    """Strict (or, asked for, permissive) scores of a gold/pred pair and the number of gold
    ids without a prediction; errors name the file and the record."""
    gold, pred = read_json(gold_path), read_json(pred_path)
    try:
        parsed_gold = read_gold(gold)
    except MetricsInputError as exc:
        raise KGEngineError(f"{gold_path}: {exc}") from exc
    try:
        parsed_pred = read_predictions(pred, split_on_spaces)
    except MetricsInputError as exc:
        raise KGEngineError(f"{pred_path}: {exc}") from exc
    if not parsed_gold:
        raise KGEngineError(f"{gold_path}: no gold questions to score")
    missing = missing_predictions(parsed_gold, parsed_pred)
    if permissive:
        return evaluate_permissive(gold, pred, split_on_spaces), missing
    return evaluate_records(gold, pred, split_on_spaces), missing


def write_official(out_dir: Path, records: Iterable[Mapping[str, Any]],
                   prefix: str = "") -> tuple[Path, Path]:
    """gold.json and pred.json (``PREFIXgold.json`` …) from result records."""
    gold, pred = [], []
    for r in records:
        gold.append({"id": r["id"], "question": r["question"], "answers": r["gold"]["answers"],
                     "hard_answer": r["gold"]["hard_answer"]})
        pred.append({"id": r["id"], "raw_output": r["raw_output"]})
    gold_path, pred_path = out_dir / f"{prefix}gold.json", out_dir / f"{prefix}pred.json"
    gold_path.write_text(json.dumps(gold, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    pred_path.write_text(json.dumps(pred, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return gold_path, pred_path


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) per non-blank line; a torn last line (an interrupted write)
    is skipped, any other bad line is an error."""
    lines = path.read_text(encoding="utf-8").split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):  # no newline after it: the write was cut off
                return
            raise InputError(str(path), number, line, f"not valid JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise InputError(str(path), number, line, "expected a JSON object")
        yield number, record
