"""Relation paths: a sequence of steps from the topic entity, each a relation followed
forwards (``directed_by``: topic -> object) or backwards (``^starred_actors``: topic <- subject).
Pure: the one home of ``Step`` and its text form (``^`` marks the inverse)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

INVERSE_MARK = "^"


class Step(NamedTuple):
    relation: str
    inverse: bool = False  # True: follow the relation from its object to its subject

    def __str__(self) -> str:
        return (INVERSE_MARK if self.inverse else "") + self.relation


RelationPath = tuple[Step, ...]


def format_path(path: Sequence[Step]) -> list[str]:
    """``[directed_by, ^starred_actors]`` (``^`` = inverse)."""
    return [str(step) for step in path]


def parse_step(text: str) -> Step:
    text = text.strip()
    if text.startswith(INVERSE_MARK):
        return Step(text[1:], True)
    return Step(text, False)


def parse_path(items: Iterable[str]) -> RelationPath:
    return tuple(parse_step(item) for item in items)


