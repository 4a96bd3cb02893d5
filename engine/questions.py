"""Question sets — one home for question records and their readers (``kgengine ask
--questions``/``--train`` and ``kgengine eval`` read through here):

=====================  ==========================================================  ========
reader                 what                                                        kind
=====================  ==========================================================  ========
``metaqa-name``        ``metaqa-2hop``, ``metaqa-2hop:dev`` (the shared MetaQA)     metaqa
``brink-build``        a ``kgengine brink build`` output directory (+ ``split``)   brink
``brink-jsonl``        a JSONL in the BRINK schema                                 brink
``brink-tsv``          the official BRINK release's question TSV                   brink
``metaqa-file``        a MetaQA ``qa_*.txt`` (hops from its ``N-hop`` folder)       metaqa
=====================  ==========================================================  ========

A set's :class:`QuestionKind` declares what applies to it — the metric (strict BRINK or
Hit@1), whether hard answers exist, whether held-out patterns apply, where its default
training split comes from — so a new kind of set is scored by what it declares, never by a
missing field. A record keeps the gold (answers, hard answer) and facts for reports (hops,
rule type, pattern) apart from :attr:`QuestionRecord.question`, the only part an answerer is
given."""

from __future__ import annotations

import ast
import csv
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from kgengine.errors import InputError, KGEngineError
from kgengine.loaders import metaqa
from kgengine.loaders.base import read_lines
from kgengine.model import Question
from kgengine.registry import Registry, instance_of

BRINK_SPLITS = ("train", "valid", "test")
OFFICIAL_TSV_COLUMNS = ("id", "rule_index", "question", "q_entity", "answer", "a_entity", "rule", "grounding")
_METAQA_NAME = re.compile(r"^metaqa-([1-3])hop(?::(train|dev|test))?$")


class Metric(StrEnum):
    BRINK = "brink"  # the official evaluator's strict Hits@Any / P / R / F1 / Hits@Hard / HHR
    HIT_AT_1 = "hit@1"  # MetaQA (KG-RAG §4.2.1): the top answer is a gold answer


@dataclass(frozen=True)
class QuestionKind:
    """What applies to a kind of question set."""

    name: str
    metric: Metric
    hard_answers: bool  # records carry the removed triple's answer (Hits@Hard, HHR)
    heldout_patterns: bool  # `eval --heldout-share` applies (its training split has patterns)
    ceiling: bool  # the answerable ceiling (gold within the hop count) is reported
    train_split: str  # where the default training split comes from (said in --help and docs)


BRINK = QuestionKind("brink", Metric.BRINK, hard_answers=True, heldout_patterns=False, ceiling=False,
                     train_split="a build directory's questions_train.jsonl")
METAQA = QuestionKind("metaqa", Metric.HIT_AT_1, hard_answers=False, heldout_patterns=True, ceiling=True,
                      train_split="qa_dev.txt of the same hop count")
KINDS: dict[str, QuestionKind] = {k.name: k for k in (BRINK, METAQA)}


@dataclass(frozen=True)
class QuestionRecord:
    id: Any  # str for our sets; the official files' ids as they are
    question: Question  # all an answerer sees
    answers: tuple[str, ...] = ()
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
    kind: QuestionKind
    questions: tuple[QuestionRecord, ...]
    train: Path | None = None  # the default --train (MetaQA: dev of the same hops; BRINK build: train split)
    build_dir: Path | None = None  # a BRINK build's folder (for entities.tsv, KGs, rules)
    meta: Mapping[str, Any] = field(default_factory=dict)
    surface: Mapping[str, str] | None = None  # a re-expressed BRINK build: its form -> the new one


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


def metaqa_question(q: metaqa.MetaQAQuestion, split: str) -> QuestionRecord:
    return QuestionRecord(
        id=f"metaqa-{q.hops}hop-{split}-{q.line}",
        question=Question(text=q.text, topic_entity=q.topic),  # as in the file: [topic] marked
        answers=q.answers, hops=q.hops, pattern=q.qtype, source=f"{q.source}:{q.line}",
    )


def read_metaqa_file(path: Path, split: str | None = None, hops: int | None = None) -> list[QuestionRecord]:
    name = split or path.stem.removeprefix("qa_")
    # free-text questions (the brackets removed) are scored; learning skips them
    return [metaqa_question(q, name) for q in metaqa.read_questions(path, hops, require_topic=False)]


def load_metaqa(hops: int, split: str = "test", root: Path | None = None) -> QuestionSet:
    base = root or metaqa_root()
    path = metaqa.question_file(base, hops, split)
    train = None
    if split != "dev":
        try:
            train = metaqa.question_file(base, hops, "dev")
        except KGEngineError:
            train = None
    return QuestionSet(f"metaqa-{hops}hop:{split}", METAQA, tuple(read_metaqa_file(path, split, hops)),
                       train=train, meta={"root": str(base), "hops": hops, "split": split})


def _metaqa_hops(path: Path) -> int | None:
    try:
        return metaqa.hops_of(path)
    except KGEngineError:
        return None


def read_metaqa_lines(path: Path, *, gold: bool) -> Iterator[QuestionRecord]:
    """A MetaQA ``qa_*.txt`` for answering (``gold=False``: the answers column may be absent
    and is never read) or learning (``gold=True``: ``question with [topic]<TAB>a1|a2``); ids
    are 1-based line numbers, as strings; hops from the ``N-hop`` folder when there is one."""
    hops = _metaqa_hops(path)
    for number, line in read_lines(path):
        if not line.strip():
            continue
        if not gold:
            text = line.split("\t", 1)[0]
            if "[" not in text or "]" not in text:
                raise InputError(str(path), number, line,
                                 "expected a MetaQA line 'question with [topic]<TAB>answers' or JSONL")
            yield QuestionRecord(str(number), Question(text), hops=hops, source=f"{path}:{number}")
            continue
        # scoring may read free-text questions (MetaQA with the brackets removed); learning
        # skips them (read_training: no topic to learn a pattern from)
        q = metaqa.parse_question(line, hops=hops or 0, source=str(path), number=number, require_topic=False)
        yield QuestionRecord(str(number), Question(q.text, q.topic), q.answers, hops=hops,
                             source=f"{path}:{number}")


# ---- BRINK ------------------------------------------------------------------------------------
def _need(record: Mapping[str, Any], key: str, path: Path, number: int, line: str) -> Any:
    if key not in record:
        raise InputError(str(path), number, line, f"missing {key!r}")
    return record[key]


def brink_record(record: Mapping[str, Any], path: Path, number: int, line: str, *,
                 gold: bool = True, require_id: bool = True) -> QuestionRecord:
    """One BRINK-schema object. ``gold``: ``answers`` are required (scoring, learning); else
    only ``question`` is. Without ``require_id`` the id defaults to the line number."""
    text = _need(record, "question", path, number, line)
    if not isinstance(text, str):
        raise InputError(str(path), number, line, "'question' must be a string")
    if not text.strip():
        raise InputError(str(path), number, line, "empty question")
    topic = record.get("topic_entity")
    question = Question(text=text, topic_entity=None if topic is None else str(topic))
    if not gold:
        # only these fields are read: the answerer never sees the rest of the record
        return QuestionRecord(record.get("id", number), question, source=f"{path}:{number}")
    qid = _need(record, "id", path, number, line) if require_id else record.get("id", number)
    answers = _need(record, "answers", path, number, line)
    if not isinstance(answers, list):
        raise InputError(str(path), number, line, "'answers' must be a list")
    relation, direction = record.get("relation"), record.get("direction")
    return QuestionRecord(
        id=qid, question=question,
        answers=tuple(str(a) for a in answers),
        hard_answer=None if record.get("hard_answer") is None else str(record["hard_answer"]),
        pattern=f"{relation}/{direction}" if relation else None,
        rule_type=record.get("rule_type"), rule=record.get("rule"), source=f"{path}:{number}",
    )


def read_brink_jsonl(path: Path, *, gold: bool = True, require_id: bool = True) -> list[QuestionRecord]:
    """BRINK-schema JSONL: id, question, topic_entity, answers, hard_answer (others kept only
    for reports: rule_type, rule, relation, direction)."""
    out = []
    for number, line in read_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(str(path), number, line, f"not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise InputError(str(path), number, line, "expected a JSON object")
        out.append(brink_record(record, path, number, line, gold=gold, require_id=require_id))
    return out


def load_brink_build(directory: Path, split: str = "test") -> QuestionSet:
    path = directory / f"questions_{split}.jsonl"
    if not path.is_file():
        raise KGEngineError(f"{directory}: no questions_{split}.jsonl (not a `kgengine brink build` output?)")
    train = directory / "questions_train.jsonl"
    return QuestionSet(f"{directory.name}:{split}", BRINK, tuple(read_brink_jsonl(path)),
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


def official_row(row: Mapping[str, str], path: Path, number: int) -> QuestionRecord:
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
    return QuestionRecord(
        id=row["id"], question=Question(text=row["question"], topic_entity=topic), answers=tuple(answers),
        hard_answer=hard, pattern=head[1] if head else None, rule=rules[0] if rules else None,
        source=f"{path}:{number}",
    )


def read_official_tsv(path: Path) -> list[QuestionRecord]:
    """The official BRINK release's question TSV (header ``id rule_index question q_entity
    answer a_entity rule grounding``; list-valued cells as Python list strings)."""
    lines = [line for _, line in read_lines(path)]  # decoded with one-line errors
    reader = csv.DictReader(lines, delimiter="\t")
    missing = [c for c in OFFICIAL_TSV_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(str(path), 1, "\t".join(reader.fieldnames or []),
                         f"missing column(s) {', '.join(missing)}")
    return [official_row(row, path, number) for number, row in enumerate(reader, 2)]


# ---- the reader registry --------------------------------------------------------------------------
@dataclass(frozen=True)
class QuestionReader:
    """One format of question set: ``matches(spec)`` says whether a ``--questions`` value is
    this format; ``read(spec, split)`` returns the set."""

    description: str
    matches: Callable[[str], bool]
    read: Callable[[str, str | None], QuestionSet]
    records: Callable[[Path, bool], list[QuestionRecord]] | None = None  # a single file, gold optional


def _metaqa_file_set(spec: str, split: str | None) -> QuestionSet:
    path = Path(spec)
    questions = read_metaqa_file(path)
    dev = path.with_name("qa_dev.txt")  # a test file learns from the dev file beside it
    train = dev if dev.is_file() and dev != path else None
    return QuestionSet(path.stem, METAQA, tuple(questions), train=train,
                       meta={"hops": questions[0].hops if questions else None})


def _metaqa_named(spec: str, split: str | None) -> QuestionSet:
    match = _METAQA_NAME.match(spec)
    assert match is not None
    return load_metaqa(int(match.group(1)), split or match.group(2) or "test")


def _suffix(*suffixes: str) -> Callable[[str], bool]:
    return lambda spec: Path(spec).suffix.lower() in suffixes and Path(spec).is_file()


METAQA_NAME_READER = QuestionReader(
    "metaqa-1hop|metaqa-2hop|metaqa-3hop[:split] (the shared MetaQA)",
    lambda spec: _METAQA_NAME.match(spec) is not None,
    lambda spec, split: _metaqa_named(spec, split))
BRINK_BUILD_READER = QuestionReader(
    "a `kgengine brink build` directory", lambda spec: Path(spec).is_dir(),
    lambda spec, split: load_brink_build(Path(spec), split or "test"))
BRINK_JSONL_READER = QuestionReader(
    "a BRINK-schema .jsonl", _suffix(".jsonl", ".json"),
    lambda spec, split: QuestionSet(Path(spec).stem, BRINK, tuple(read_brink_jsonl(Path(spec)))),
    lambda path, gold: read_brink_jsonl(path, gold=gold, require_id=False))
BRINK_TSV_READER = QuestionReader(
    "an official BRINK .tsv", _suffix(".tsv"),
    lambda spec, split: QuestionSet(Path(spec).stem, BRINK, tuple(read_official_tsv(Path(spec)))),
    lambda path, gold: read_official_tsv(path))
METAQA_FILE_READER = QuestionReader(
    "a MetaQA qa_*.txt", _suffix(".txt"), _metaqa_file_set,
    lambda path, gold: list(read_metaqa_lines(path, gold=gold)))

# every reader, tried in this order by load_question_set: the built-ins, then a package's
# (entry points `kgengine.question_sets`: name = "module:READER"), then one added at run time
QUESTION_READERS: Registry[QuestionReader] = Registry("question-set reader", "kgengine.question_sets", {
    "metaqa-name": "kgengine.questions:METAQA_NAME_READER",
    "brink-build": "kgengine.questions:BRINK_BUILD_READER",
    "brink-jsonl": "kgengine.questions:BRINK_JSONL_READER",
    "brink-tsv": "kgengine.questions:BRINK_TSV_READER",
    "metaqa-file": "kgengine.questions:METAQA_FILE_READER",
}, accepts=instance_of(QuestionReader), expected="a kgengine QuestionReader")


def readers_help() -> str:
    return ", ".join(reader.description for _, reader in QUESTION_READERS.items())


def check_unique_ids(records: Sequence[QuestionRecord]) -> None:
    """Two records with one id would be scored as one (the official evaluator keeps the last):
    an error naming both."""
    seen: dict[str, QuestionRecord] = {}
    for record in records:
        key = json.dumps(record.id, ensure_ascii=False)
        if key in seen:
            first = seen[key]
            file, _, line = record.source.rpartition(":")
            raise InputError(file or "questions", int(line) if line.isdigit() else 0, record.question.text,
                             f"question id {record.id!r} is used twice (also at {first.source})")
        seen[key] = record


def load_question_set(spec: str, split: str | None = None) -> QuestionSet:
    """The question set ``spec`` names, read by the first reader that recognises it."""
    for _, reader in QUESTION_READERS.items():
        if reader.matches(spec):
            qset = reader.read(spec, split)
            check_unique_ids(qset.questions)
            return qset
    path = Path(spec)
    if not path.exists():
        raise KGEngineError(f"--questions {spec!r}: not a MetaQA name (metaqa-1hop, metaqa-2hop:dev, ...), "
                            "a BRINK build directory or a question file")
    raise KGEngineError(f"--questions {spec!r}: unknown file type (expected {readers_help()})")


def read_question_file(path: Path, *, gold: bool = False, what: str = "questions",
                       allow_empty: bool = False) -> list[QuestionRecord]:
    """The records of one question file, for ``ask --questions`` (``gold=False``: only id,
    question and topic entity are read) or a training split (``gold=True``). Its format
    from the suffix, else from the first line (``{`` : JSONL). An empty file is an error
    unless ``allow_empty``."""
    if not path.is_file():
        raise KGEngineError(f"{what} file {path} does not exist")
    readers = [r for _, r in QUESTION_READERS.items() if r.records is not None and r.matches(str(path))]
    if not readers:  # no known suffix: JSONL when the first line is an object, else MetaQA
        first = next((line for _, line in read_lines(path) if line.strip()), "")
        readers = [BRINK_JSONL_READER if first.lstrip().startswith("{") else METAQA_FILE_READER]
    assert readers[0].records is not None
    records = readers[0].records(path, gold)
    check_unique_ids(records)
    if not records and not allow_empty:
        raise KGEngineError(f"{what} file {path} holds no questions")
    return records


def read_training(path: Path) -> list[QuestionRecord]:
    """A training split: every record has a topic entity (as written: id, private id or
    label) and gold answers. Bad lines raise :class:`InputError` with the file and line."""
    records = read_question_file(path, gold=True, what="training")
    for r in records:
        if r.question.topic_entity is None:
            raise InputError(str(path), int(r.source.rsplit(":", 1)[1]), r.question.text,
                             "a training question needs its topic_entity")
    return records
