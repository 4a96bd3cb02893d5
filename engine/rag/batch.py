"""Question files in, one JSON object per answer out (``kgengine ask --questions FILE``).

The file is read by :func:`kgengine.questions.read_question_file` — of a BRINK-schema JSONL
record only ``id``, ``question`` and ``topic_entity`` are read (``answers``, ``hard_answer``,
``relation``, ``rule``, ``paths`` and every other field never reach the answerer); of a
MetaQA ``qa_*.txt`` line the question (the answers column is not read; the id is the 1-based
line number, as a string; the topic is the [bracketed] mention)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kgengine.model import Question
from kgengine.progress import progress_bar
from kgengine.questions import read_question_file
from kgengine.rag.base import Answerer, answer_or_error


def read_questions(path: Path, allow_empty: bool = False) -> list[tuple[Any, Question]]:
    """(id, Question) pairs of a question file: all an answerer may see of each record."""
    return [(r.id, r.question) for r in read_question_file(path, allow_empty=allow_empty)]


def answer_all(answerer: Answerer, items: Iterable[tuple[Any, Question]], *, total: int | None = None,
               progress: bool = True, description: str = "answering") -> Iterator[dict[str, Any]]:
    """Answer each question; yields ``{"id", **Answer.to_json()}`` in input order. A question
    that cannot be answered (its topic is not in the graph, say) gives its error record (an
    ``error`` message, no answers) instead of stopping the batch."""
    with progress_bar(description, total=total, enabled=progress) as bar:
        for qid, question in items:
            record = {"id": qid, **answer_or_error(answerer, question).to_json()}
            bar.advance()
            yield record
