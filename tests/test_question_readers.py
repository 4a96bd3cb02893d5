"""The question-set reader contract, run for every registered reader that reads files: a small
set written in its format is read back with each record's text, topic entity, gold and hard
answer (where the format has one), its kind declaring the metric; ids are unique; only the
text and topic entity reach an answerer (``QuestionRecord.question``). A new reader is tested
by registering it and adding its writer here."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.kinds import KindCases
from kgengine.model import Question
from kgengine.questions import (
    QUESTION_READERS,
    Metric,
    load_question_set,
    read_question_file,
    read_training,
)

# (text, topic, answers, hard answer) of the set every writer writes
SET = [
    ("who directed [Heat]", "Heat", ["Michael_Mann"], "Michael_Mann"),
    ("what did [Michael_Mann] direct", "Michael_Mann", ["Heat", "Collateral"], "Collateral"),
]


def brink_jsonl(folder: Path) -> Path:
    path = folder / "set.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"q{i}",
                    "question": t,
                    "topic_entity": e,
                    "answers": a,
                    "hard_answer": h,
                    "relation": "directed_by",
                }
            )
            + "\n"
            for i, (t, e, a, h) in enumerate(SET)
        ),
        encoding="utf-8",
    )
    return path


def brink_tsv(folder: Path) -> Path:
    path = folder / "set.tsv"
    rows = ["id\trule_index\tquestion\tq_entity\tanswer\ta_entity\trule\tgrounding"]
    for i, (t, e, a, h) in enumerate(SET):
        head = f"{e} directed_by {h}" if i == 0 else f"{h} directed_by {e}"
        rows.append(f"q{i}\t0\t{t}\t['{e}']\t{a!r}\t{a!r}\t['r']\t['x y z => {head}']")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def metaqa_file(folder: Path) -> Path:
    (folder / "1-hop").mkdir()
    path = folder / "1-hop" / "qa_test.txt"
    path.write_text("".join(f"{t}\t{'|'.join(a)}\n" for t, _, a, _ in SET), encoding="utf-8")
    return path


def brink_build(folder: Path) -> Path:
    build = folder / "build"
    build.mkdir()
    brink_jsonl(build).rename(build / "questions_test.jsonl")
    return build


WRITERS: dict[str, Callable[[Path], Path]] = {
    "brink-jsonl": brink_jsonl,
    "brink-tsv": brink_tsv,
    "metaqa-file": metaqa_file,
    "brink-build": brink_build,
}


def metaqa_named(folder: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The shared-MetaQA name, resolved under $KGENGINE_DATA (a MetaQA root written here)."""
    (folder / "metaqa").mkdir()
    metaqa_file(folder / "metaqa")
    monkeypatch.setenv("KGENGINE_DATA", str(folder))
    return "metaqa-1hop"


def _writing(writer: Callable[[Path], Path]) -> Callable[[Path, pytest.MonkeyPatch], Path | str]:
    return lambda folder, monkeypatch: writer(folder)


# the case of every registered reader: the spec of SET written in its format
READER_CASES = KindCases[Callable[[Path, pytest.MonkeyPatch], Path | str]](
    QUESTION_READERS, {**{name: _writing(writer) for name, writer in WRITERS.items()},
                       "metaqa-name": metaqa_named}, "tests/test_question_readers.py")


def test_every_file_reader_has_a_writer_here() -> None:
    assert set(WRITERS) == set(QUESTION_READERS) - {"metaqa-name"}  # the shared MetaQA: test_eval_units


@pytest.mark.parametrize("name", READER_CASES.registry.names())
class TestQuestionReaderContract:
    def test_a_reader_round_trips_its_format(self, name: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
        spec = READER_CASES.case(name)(tmp_path, monkeypatch)
        reader = QUESTION_READERS.get(name)
        assert reader.matches(str(spec))
        qset = load_question_set(str(spec))
        records = list(qset.questions)
        assert [(r.question.text, r.answers) for r in records] == [(t, tuple(a)) for t, _, a, _ in SET]
        assert len({json.dumps(r.id) for r in records}) == len(records)
        assert all(r.source for r in records)
        if qset.kind.hard_answers:
            assert qset.kind.metric == Metric.BRINK
            assert [r.question.topic_entity for r in records] == [e for _, e, _, _ in SET]
            assert [r.hard_answer for r in records] == [h for *_, h in SET]
        else:
            assert qset.kind.metric == Metric.HIT_AT_1 and all(r.hard_answer is None for r in records)
            # the topic entities from the brackets
            assert [r.question.topic_entity for r in records] == [e for _, e, _, _ in SET]
        if reader.records is not None:  # one file for ask --questions: only what an answerer sees
            asked = read_question_file(spec)
            assert all(isinstance(r.question, Question) for r in asked)
            assert [r.question.text for r in asked] == [t for t, *_ in SET]
            assert [sorted(r.answers) for r in read_training(spec)] == [sorted(a) for _, _, a, _ in SET]
