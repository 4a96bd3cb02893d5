"""Question sets for ``kgengine eval``: MetaQA by name (``metaqa-2hop``, ``metaqa-2hop:dev``),
a ``kgengine brink build`` output directory, any JSONL in the BRINK schema, and the official
BRINK release's question TSV files.

A record keeps the gold (answers, hard answer) and facts for reports (hops, rule type,
pattern) apart from :attr:`EvalQuestion.question`, the only part an answerer is given."""

from __future__ import annotations

import ast
import csv
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgengine.errors import InputError, KGEngineError
from kgengine.loaders import metaqa
from kgengine.rag.base import Question

BRINK_SPLITS = ("train", "valid", "test")
OFFICIAL_TSV_COLUMNS = ("id", "rule_index", "question", "q_entity", "answer", "a_entity", "rule", "grounding")
_METAQA_NAME = re.compile(r"^metaqa-([1-3])hop(?::(train|dev|test))?$")


@dataclass(frozen=True)
class EvalQuestion:
    id: Any  # str for our sets; the official files' ids as they are
    question: Question  # all an answerer sees
    answers: tuple[str, ...]
    hard_answer: str | None = None  # BRINK only
    hops: int | None = None  # MetaQA
    pattern: str | None = None  # MetaQA qtype / BRINK relation + direction
    rule_type: str | None = None  # BRINK
    rule: str | None = None
    source: str = ""

    def gold(self) -> dict[str, Any]:
        return {"answers": list(self.answers), "hard_answer": self.hard_answer, "hops": self.hops,
                "pattern": self.pattern, "rule_type": self.rule_type, "rule": self.rule}


@dataclass(frozen=True)
class QuestionSet:
    name: str
    kind: str  # "metaqa" or "brink"
    questions: tuple[EvalQuestion, ...]
    train: Path | None = None  # the default --train (MetaQA: dev of the same hops; BRINK build: train split)
    build_dir: Path | None = None  # a BRINK build's folder (for entities.tsv, KGs, rules)
    meta: Mapping[str, Any] = field(default_factory=dict)
    surface: Mapping[str, str] | None = None  # a re-expressed BRINK build: its form -> the new one

    @property
    def is_brink(self) -> bool:
        return self.kind == "brink"


# ---- MetaQA -----------------------------------------------------------------------------------
def metaqa_root() -> Path:
    """``$KGENGINE_DATA/metaqa``, else the shared datasets folder beside the checkout."""
    env = os.environ.get("KGENGINE_DATA")
    candidates = [Path(env) / "metaqa"] if env else []
    here = Path(__file__).resolve()
    candidates += [parent / "shared" / "datasets" / "metaqa" for parent in here.parents[:4]]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise KGEngineError("MetaQA not found: set $KGENGINE_DATA to a folder holding metaqa/ "
                        f"(looked in {', '.join(str(c) for c in candidates)})")


def metaqa_question(q: metaqa.Question, split: str) -> EvalQuestion:
    return EvalQuestion(
        id=f"metaqa-{q.hops}hop-{split}-{q.line}",
        question=Question(text=q.text, topic_entity=q.topic),  # as in the file: [topic] marked
        answers=q.answers, hops=q.hops, pattern=q.qtype, source=f"{q.source}:{q.line}",
    )


def read_metaqa_file(path: Path, split: str | None = None, hops: int | None = None) -> list[EvalQuestion]:
    name = split or path.stem.removeprefix("qa_")
    return [metaqa_question(q, name) for q in metaqa.read_questions(path, hops)]


def load_metaqa(hops: int, split: str = "test", root: Path | None = None) -> QuestionSet:
    base = root or metaqa_root()
    path = metaqa.question_file(base, hops, split)
    train = None
    if split != "dev":
        try:
            train = metaqa.question_file(base, hops, "dev")
        except KGEngineError:
            train = None
    return QuestionSet(f"metaqa-{hops}hop:{split}", "metaqa", tuple(read_metaqa_file(path, split, hops)),
                       train=train, meta={"root": str(base), "hops": hops, "split": split})


# ---- BRINK ------------------------------------------------------------------------------------
def _need(record: Mapping[str, Any], key: str, path: Path, number: int, line: str) -> Any:
    if key not in record:
        raise InputError(str(path), number, line, f"missing {key!r}")
    return record[key]


def brink_record(record: Mapping[str, Any], path: Path, number: int, line: str) -> EvalQuestion:
    answers = _need(record, "answers", path, number, line)
    if not isinstance(answers, list):
        raise InputError(str(path), number, line, "'answers' must be a list")
    text = _need(record, "question", path, number, line)
    topic = record.get("topic_entity")
    relation, direction = record.get("relation"), record.get("direction")
    return EvalQuestion(
        id=_need(record, "id", path, number, line),
        question=Question(text=str(text), topic_entity=None if topic is None else str(topic)),
        answers=tuple(str(a) for a in answers),
        hard_answer=None if record.get("hard_answer") is None else str(record["hard_answer"]),
        pattern=f"{relation}/{direction}" if relation else None,
        rule_type=record.get("rule_type"), rule=record.get("rule"), source=f"{path}:{number}",
    )


def read_brink_jsonl(path: Path) -> list[EvalQuestion]:
    """BRINK-schema JSONL: id, question, topic_entity, answers, hard_answer (others kept only
    for reports: rule_type, rule, relation, direction)."""
    out = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(str(path), number, line.rstrip("\n"), f"not valid JSON ({exc.msg})") from exc
            if not isinstance(record, dict):
                raise InputError(str(path), number, line.rstrip("\n"), "expected a JSON object")
            out.append(brink_record(record, path, number, line.rstrip("\n")))
    return out


def load_brink_build(directory: Path, split: str = "test") -> QuestionSet:
    path = directory / f"questions_{split}.jsonl"
    if not path.is_file():
        raise KGEngineError(f"{directory}: no questions_{split}.jsonl (not a `kgengine brink build` output?)")
    train = directory / "questions_train.jsonl"
    return QuestionSet(f"{directory.name}:{split}", "brink", tuple(read_brink_jsonl(path)),
                       train=train if train.is_file() and split != "train" else None, build_dir=directory,
                       meta={"split": split})


def _list_cell(value: str, path: Path, number: int, column: str) -> list[str]:
    """A list-valued cell of the official TSV (``['a', 'b']``); a bare value is a one-item list."""
    value = (value or "").strip()
    if not value:
        return []
    if value.startswith("["):
        try:
            parsed = ast.literal_eval(value)
        except (ValueError, SyntaxError) as exc:
            raise InputError(str(path), number, value, f"column {column!r} is not a Python list") from exc
        if not isinstance(parsed, list):
            raise InputError(str(path), number, value, f"column {column!r} is not a list")
        return [str(v) for v in parsed]
    return [value]


def grounding_head(grounding: str) -> tuple[str, str, str] | None:
    """The head atom ``h r t`` of an official grounding string ``body | body => h r t``."""
    if "=>" not in grounding:
        return None
    tokens = grounding.split("=>")[-1].split()
    return (tokens[0], tokens[1], tokens[2]) if len(tokens) == 3 else None


def official_row(row: Mapping[str, str], path: Path, number: int) -> EvalQuestion:
    topics = _list_cell(row["q_entity"], path, number, "q_entity")
    answers = _list_cell(row["answer"], path, number, "answer") or _list_cell(row["a_entity"], path, number,
                                                                               "a_entity")
    rules = _list_cell(row["rule"], path, number, "rule")
    groundings = _list_cell(row["grounding"], path, number, "grounding")
    topic = topics[0] if topics else None
    # the hard answer is the removed (head) triple's other end; the answer columns hold the
    # completed answer set, not the hard answer alone
    hard = None
    head = grounding_head(groundings[0]) if groundings else None
    if head is not None and topic in (head[0], head[2]):
        hard = head[2] if topic == head[0] else head[0]
    elif answers:
        hard = answers[0]
    return EvalQuestion(
        id=row["id"], question=Question(text=row["question"], topic_entity=topic), answers=tuple(answers),
        hard_answer=hard, pattern=head[1] if head else None, rule=rules[0] if rules else None,
        source=f"{path}:{number}",
    )


def read_official_tsv(path: Path) -> list[EvalQuestion]:
    """The official BRINK release's question TSV (header ``id rule_index question q_entity
    answer a_entity rule grounding``; list-valued cells as Python list strings)."""
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh, delimiter="\t")
        missing = [c for c in OFFICIAL_TSV_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(str(path), 1, "\t".join(reader.fieldnames or []),
                             f"missing column(s) {', '.join(missing)}")
        return [official_row(row, path, number) for number, row in enumerate(reader, 2)]


# ---- resolution -------------------------------------------------------------------------------
def load_question_set(spec: str, split: str | None = None) -> QuestionSet:
    """``metaqa-Nhop[:split]``, a BRINK build directory, a ``.jsonl`` file (BRINK schema), a
    ``.tsv`` file (official BRINK release) or a MetaQA ``qa_*.txt`` file."""
    match = _METAQA_NAME.match(spec)
    if match:
        return load_metaqa(int(match.group(1)), split or match.group(2) or "test")
    path = Path(spec)
    if path.is_dir():
        return load_brink_build(path, split or "test")
    if not path.is_file():
        raise KGEngineError(f"--questions {spec!r}: not a MetaQA name (metaqa-1hop, metaqa-2hop:dev, ...), "
                            "a BRINK build directory or a question file")
    if path.suffix == ".jsonl":
        return QuestionSet(path.stem, "brink", tuple(read_brink_jsonl(path)))
    if path.suffix == ".tsv":
        return QuestionSet(path.stem, "brink", tuple(read_official_tsv(path)))
    if path.suffix == ".txt":
        questions = read_metaqa_file(path)
        dev = path.with_name("qa_dev.txt")  # a test file learns from the dev file beside it
        return QuestionSet(path.stem, "metaqa", tuple(questions),
                           train=dev if dev.is_file() and dev != path else None,
                           meta={"hops": questions[0].hops if questions else None})
    raise KGEngineError(f"--questions {spec!r}: unknown file type (expected .jsonl, .tsv or qa_*.txt)")


# ---- MetaQA answerable ceiling --------------------------------------------------------------
def adjacency(triples: Iterable[tuple[str, str, str]]) -> dict[str, set[str]]:
    """Undirected entity adjacency (MetaQA questions walk relations both ways)."""
    out: dict[str, set[str]] = {}
    for h, _, t in triples:
        out.setdefault(h, set()).add(t)
        out.setdefault(t, set()).add(h)
    return out


def within_hops(graph: Mapping[str, set[str]], start: str, hops: int) -> set[str]:
    """Entities reachable from ``start`` in 1..hops steps."""
    seen, frontier, reached = {start}, {start}, set()
    for _ in range(hops):
        frontier = {n for e in frontier for n in graph.get(e, ())} - seen
        seen |= frontier
        reached |= frontier
    # undirected: the start is back after two steps (start -> n -> start)
    return reached | ({start} if hops >= 2 and graph.get(start) else set())


def answerable(questions: Sequence[EvalQuestion], graph: Mapping[str, set[str]]) -> list[bool]:
    """Per question: some gold answer is within its hop count of the topic entity in the KB."""
    cache: dict[tuple[str, int], set[str]] = {}
    out = []
    for q in questions:
        topic, hops = q.question.topic_entity, q.hops or 1
        if topic is None:
            out.append(False)
            continue
        key = (topic, hops)
        if key not in cache:
            cache[key] = within_hops(graph, topic, hops)
        out.append(any(a in cache[key] for a in q.answers))
    return out
