"""MetaQA (Zhang et al. 2018): the movie KB and the vanilla question files.

KB: ``kb.txt`` (or, here, ``kb_reconstructed.txt``), lines ``subject|relation|object``.
Entity names are the ids (they contain spaces and non-ASCII characters); each entity's
label is its name. A line must split into exactly three non-empty parts on ``|``.

Questions (pure functions, used by eval): ``N-hop/qa_{split}.txt`` (or the official
``N-hop/vanilla/qa_{split}.txt``) with lines ``question with [topic entity]<TAB>a1|a2|...``
and, when present, the aligned ``N-hop/qa_{split}_qtype.txt``."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kgengine.errors import InputError, KGEngineError
from kgengine.loaders.base import (
    Dataset,
    DelimitedTriples,
    SelfLabels,
    check_options,
    choose_splits,
    data_path,
    read_lines,
)

NAME = "metaqa"
KB_FILES = ("kb.txt", "kb_reconstructed.txt")  # the original first
HOPS = (1, 2, 3)
_TOPIC = re.compile(r"\[([^\[\]]+)\]")
_HOP_DIR = re.compile(r"^([1-9])-hop$")


def kb_file(path: Path) -> Path:
    if path.is_file():
        return path
    for name in KB_FILES:
        if (path / name).is_file():
            return path / name
    raise KGEngineError(f"no {' or '.join(KB_FILES)} in {path}")


def read_metaqa(path: Path | None, splits: Sequence[str] | None, **options: str) -> Dataset:
    check_options(NAME, options, ())
    chosen = choose_splits(splits, ("kb",))
    kb = kb_file(data_path(NAME, path))
    triples = DelimitedTriples((kb,), separator="|")
    return Dataset(name=NAME, triples=triples, labels=SelfLabels(triples), source=str(kb), splits=chosen)


@dataclass(frozen=True)
class MetaQAQuestion:
    """One MetaQA question. ``text`` is the original (with the ``[topic]`` brackets)."""

    text: str
    topic: str | None  # None: a free-text question (no [brackets]; read with require_topic=False)
    answers: tuple[str, ...]
    hops: int
    qtype: str | None
    source: str
    line: int

    @property
    def plain_text(self) -> str:
        """The question with the brackets around the topic entity removed."""
        return _TOPIC.sub(r"\1", self.text)


def parse_question(line: str, *, hops: int, qtype: str | None = None, source: str = "",
                   number: int = 0, require_topic: bool = True) -> MetaQAQuestion:
    """Parse ``question with [topic]<TAB>a1|a2`` (answers split on ``|`` only); without
    ``require_topic`` a question with no ``[topic]`` is read as free text (topic None)."""
    fields = line.split("\t")
    if len(fields) != 2:
        raise InputError(source, number, line, f"expected 'question<TAB>answers', got {len(fields)} fields")
    text, answer_field = fields
    topics = _TOPIC.findall(text)
    if len(topics) > 1 or (require_topic and not topics):
        raise InputError(source, number, line, f"expected one [topic entity], found {len(topics)}")
    answers = tuple(answer_field.split("|"))
    if not all(answers):
        raise InputError(source, number, line, "empty answer")
    return MetaQAQuestion(text=text, topic=topics[0] if topics else None, answers=answers, hops=hops,
                          qtype=qtype, source=source, line=number)


def hops_of(path: Path) -> int:
    """The hop count from the ``N-hop`` folder the file sits in (or its parent)."""
    for part in (path.parent.name, path.parent.parent.name):
        match = _HOP_DIR.match(part)
        if match:
            return int(match.group(1))
    raise KGEngineError(f"{path}: cannot tell the hop count (expected it under an 'N-hop' folder)")


def read_questions(path: Path, hops: int | None = None, qtype_path: Path | None = None,
                   require_topic: bool = True) -> Iterator[MetaQAQuestion]:
    """Stream the questions of one QA file; the qtype file (default: ``<stem>_qtype.txt``
    next to it, used when present) must have one line per question. Without
    ``require_topic``, questions without ``[brackets]`` are read as free text."""
    hop_count = hops if hops is not None else hops_of(path)
    if qtype_path is None:
        guess = path.with_name(path.stem + "_qtype.txt")
        if not guess.is_file() and path.parent.name == "vanilla":
            guess = path.parent.parent / guess.name
        qtype_path = guess if guess.is_file() else None
    qtypes = read_lines(qtype_path) if qtype_path else None
    for number, line in read_lines(path):
        qtype = None
        if qtypes is not None:
            item = next(qtypes, None)
            if item is None:
                raise InputError(str(qtype_path), number, "", f"qtype file is shorter than {path}")
            qtype = item[1]
        yield parse_question(line, hops=hop_count, qtype=qtype, source=str(path), number=number,
                             require_topic=require_topic)
    if qtypes is not None and (extra := next(qtypes, None)) is not None:
        raise InputError(str(qtype_path), extra[0], extra[1], f"qtype file is longer than {path}")


def question_file(root: Path, hops: int, split: str) -> Path:
    folder = root / f"{hops}-hop"
    for candidate in (folder / f"qa_{split}.txt", folder / "vanilla" / f"qa_{split}.txt"):
        if candidate.is_file():
            return candidate
    raise KGEngineError(f"no {hops}-hop {split} questions under {root} "
                        f"({hops}-hop/qa_{split}.txt or {hops}-hop/vanilla/qa_{split}.txt)")


def load_questions(root: Path, split: str, hops: Sequence[int] = HOPS) -> list[MetaQAQuestion]:
    """Every question of ``split`` (dev/test/train) for the given hop counts, in file order."""
    return [q for n in hops for q in read_questions(question_file(root, n, split), n)]
