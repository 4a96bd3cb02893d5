"""Question files in, one JSON object per answer out (``kgengine ask --questions FILE``).

A file is either BRINK-schema JSONL — of each record only ``id``, ``question`` and
``topic_entity`` are read; ``answers``, ``hard_answer``, ``relation``, ``rule``, ``paths`` and
every other field never reach the answerer — or a MetaQA ``qa_*.txt`` (``question with
[topic]<TAB>answers``: the answers column is not read; the id is the 1-based line number, as a
string, and the topic is linked from the brackets)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kgengine.errors import InputError, KGEngineError
from kgengine.progress import progress_bar
from kgengine.rag.base import Answerer, Question


def read_questions(path: Path) -> list[tuple[Any, Question]]:
    """(id, Question) pairs of a BRINK-schema JSONL or a MetaQA qa_*.txt file."""
    if not path.is_file():
        raise KGEngineError(f"questions file {path} does not exist")
    text = path.read_text(encoding="utf-8")
    first = next((line for line in text.splitlines() if line.strip()), "")
    if path.suffix.lower() in (".jsonl", ".json") or first.lstrip().startswith("{"):
        return list(_jsonl(path, text))
    return list(_metaqa(path, text))


def _jsonl(path: Path, text: str) -> Iterator[tuple[Any, Question]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(str(path), number, line, f"invalid JSON ({exc.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get("question"), str):
            raise InputError(str(path), number, line, "expected an object with a 'question' string")
        topic = record.get("topic_entity")
        # only these three fields are read: the answerer never sees the rest of the record
        yield record.get("id", number), Question(record["question"], None if topic is None else str(topic))


def _metaqa(path: Path, text: str) -> Iterator[tuple[Any, Question]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        question = line.split("\t", 1)[0]
        if "[" not in question or "]" not in question:
            raise InputError(str(path), number, line,
                             "expected a MetaQA line 'question with [topic]<TAB>answers' or JSONL")
        yield str(number), Question(question)


def answer_all(answerer: Answerer, items: Iterable[tuple[Any, Question]], *, total: int | None = None,
               progress: bool = True, description: str = "answering") -> Iterator[dict[str, Any]]:
    """Answer each question; yields ``{"id", **Answer.to_json()}`` in input order. A question
    that cannot be answered (its topic is not in the graph, say) gives a record with an
    ``error`` message and no answers instead of stopping the batch."""
    with progress_bar(description, total=total, enabled=progress) as bar:
        for qid, question in items:
            try:
                record = {"id": qid, **answerer.answer(question).to_json()}
            except KGEngineError as exc:
                record = {"id": qid, "question": question.text, "topic_entity": question.topic_entity,
                          "method": answerer.method, "answers": [], "relation_path": None,
                          "learned_from": None, "reasoning": [], "raw_output": "", "timings": {},
                          "error": str(exc)}
            bar.advance()
            yield record
