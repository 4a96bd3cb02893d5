"""Question items, balancing (BRINK Algorithm 1), answer-set completion, splits and entity
surface forms (pure: no store, no files).

Every random choice draws from a stream named after what it decides (the triple for the
topic coin, the answer entity for its downsample), so a result does not shift when an
unrelated part of the input changes order or size."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from kgengine.brink.removal import Grounding
from kgengine.errors import InvalidParameterError
from kgengine.model import Triple
from kgengine.surface import Surface

SPLITS = ("train", "valid", "test")
RATIOS = (8, 1, 1)


class QuestionDirection(StrEnum):
    """Which side of the removed triple the question gives."""

    FORWARD = "forward"  # topic = head, asks for the tail: (topic, relation, ?)
    INVERSE = "inverse"  # topic = tail, asks for the head: (?, relation, topic)


class QuestionUnit(StrEnum):
    TRIPLE = "triple"  # one question per removed triple (its groundings are its paths)
    GROUNDING = "grounding"  # one per kept grounding, as the official code counts them


@dataclass(frozen=True)
class QuestionItem:
    triple: Triple  # the removed triple (dataset ids)
    direction: QuestionDirection
    paths: tuple[Grounding, ...]  # groundings that re-derive it; the first is the primary

    @property
    def topic(self) -> str:
        return self.triple.head if self.direction == QuestionDirection.FORWARD else self.triple.tail

    @property
    def answer(self) -> str:
        """The hard answer: the entity whose direct triple was removed."""
        return self.triple.tail if self.direction == QuestionDirection.FORWARD else self.triple.head


def topic_direction(seed: int, triple: Triple, path: tuple[Triple, ...] = ()) -> QuestionDirection:
    """The seeded coin that picks the topic side for one removed triple (and, one question
    per grounding, for one of its paths: the official LLM chose per grounding too)."""
    key = "\t".join(f"{h} {r} {t}" for h, r, t in (triple, *path))
    coin = random.Random(f"{seed}/topic/{key}").random()
    return QuestionDirection.FORWARD if coin < 0.5 else QuestionDirection.INVERSE


def make_items(kept: Sequence[Grounding], unit: QuestionUnit, seed: int) -> list[QuestionItem]:
    """Question items in first-seen order of the kept groundings."""
    if unit == QuestionUnit.GROUNDING:
        return [QuestionItem(g.head, topic_direction(seed, g.head, g.body), (g,)) for g in kept]
    by_head: dict[Triple, list[Grounding]] = {}
    for g in kept:
        by_head.setdefault(g.head, []).append(g)
    return [QuestionItem(t, topic_direction(seed, t), tuple(gs)) for t, gs in by_head.items()]


def balance(items: Sequence[QuestionItem], tau: float, seed: int) -> list[QuestionItem]:
    """Algorithm 1: an answer entity with more than τ·|Q| questions keeps a seeded random
    ⌊τ·|Q|⌋ of them; the others keep all. Order is preserved.

    One deviation: when ⌊τ·|Q|⌋ is 0 (|Q| < 1/τ, tiny KGs) the literal algorithm would drop
    every question of every answer; we keep at least one per answer entity."""
    if not 0 < tau <= 1:
        raise InvalidParameterError(f"tau must be in (0, 1], got {tau}")
    limit = max(1, math.floor(tau * len(items)))
    by_answer: dict[str, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        by_answer[item.answer].append(i)
    keep: set[int] = set()
    for answer, indices in by_answer.items():
        if len(indices) > tau * len(items) and len(indices) > limit:
            keep.update(random.Random(f"{seed}/balance/{answer}").sample(indices, limit))
        else:
            keep.update(indices)
    return [item for i, item in enumerate(items) if i in keep]


class AnswerIndex:
    """(entity, relation) → the entities completing it, both directions, from a KG."""

    def __init__(self, triples: Iterable[Triple], items: Iterable[QuestionItem] | None = None) -> None:
        """With ``items``, only what they ask is indexed (a whole Wikidata5m-sized KG in
        two dicts of sets would not fit the memory a build is allowed)."""
        self._out: dict[tuple[str, str], set[str]] = defaultdict(set)
        self._in: dict[tuple[str, str], set[str]] = defaultdict(set)
        if items is None:
            for h, r, t in triples:
                self._out[(h, r)].add(t)
                self._in[(t, r)].add(h)
            return
        wanted = list(items)
        forward = {(i.topic, i.triple.relation) for i in wanted if i.direction == QuestionDirection.FORWARD}
        inverse = {(i.topic, i.triple.relation) for i in wanted if i.direction != QuestionDirection.FORWARD}
        for h, r, t in triples:
            if (h, r) in forward:
                self._out[(h, r)].add(t)
            if (t, r) in inverse:
                self._in[(t, r)].add(h)

    def answers(self, item: QuestionItem) -> list[str]:
        """Every entity completing (topic, relation) in the asked direction (§3.2 answer set
        completion; the hard answer is always among them). Sorted, so files are stable."""
        key = (item.topic, item.triple.relation)
        found = self._out.get(key) if item.direction == QuestionDirection.FORWARD else self._in.get(key)
        return sorted(found or ())


def split(
    items: Sequence[QuestionItem], seed: int, ratios: tuple[int, int, int] = RATIOS
) -> dict[str, list[QuestionItem]]:
    """Seeded 8:1:1 split. Questions about the same removed triple (several groundings in
    ``grounding`` unit) stay in one split, so no triple leaks from train into test; with
    one question per triple this is a plain seeded shuffle. Sizes follow the official code:
    ⌊0.8n⌋ train, ⌊0.1n⌋ valid, the rest test (cut points moved to a group boundary)."""
    groups: dict[Triple, list[QuestionItem]] = {}
    for item in items:
        groups.setdefault(item.triple, []).append(item)
    keys = sorted(groups)  # independent of input order, then shuffled by the seed
    random.Random(f"{seed}/split").shuffle(keys)
    total, weight = len(items), sum(ratios)
    cuts = [math.floor(total * sum(ratios[: i + 1]) / weight) for i in range(len(ratios) - 1)]
    out: dict[str, list[QuestionItem]] = {name: [] for name in SPLITS}
    placed = 0
    for key in keys:
        # a group goes where its first question falls
        out[SPLITS[sum(placed >= c for c in cuts)]].extend(groups[key])
        placed += len(groups[key])
    return out


def surface_forms(
    entities: Iterable[str],
    mode: Surface,
    private_ids: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Entity id → the string written in the published files and questions; one-to-one,
    so the published KG is isomorphic to the stored one. Text labels that several entities
    share get the id appended (``Paris (Q90)``); tabs and newlines become spaces."""
    ordered = sorted(set(entities))
    if mode == Surface.DATASET:
        return {e: e for e in ordered}
    if mode == Surface.PRIVATE:
        private_ids = private_ids or {}
        missing = [e for e in ordered if e not in private_ids]
        if missing:
            raise ValueError(f"{len(missing)} entities have no private id (e.g. {missing[0]!r}); "
                             "reload the graph")
        return {e: private_ids[e] for e in ordered}
    labels = labels or {}
    text = {e: _clean(labels.get(e) or e) for e in ordered}
    count: dict[str, int] = defaultdict(int)
    for value in text.values():
        count[value] += 1
    return {e: (f"{v} ({e})" if count[v] > 1 else v) for e, v in text.items()}


def _clean(value: str) -> str:
    return " ".join(value.split())


def mentions(text: str, surface: str) -> bool:
    """Whether ``surface`` occurs in ``text`` as a whole token, ignoring case: entity 7 is not
    mentioned by "Who is the aunt of 72?" (a plain substring test would say it is), entity
    "Film" is by "What is the film of X?". (No regex: thousands of distinct patterns would
    thrash ``re``'s cache.)"""
    if not surface:
        return False
    haystack, needle = text.casefold(), surface.casefold()
    start = haystack.find(needle)
    while start != -1:
        end = start + len(needle)
        if not (start and _word_char(haystack[start - 1])) and not (
            end < len(haystack) and _word_char(haystack[end])
        ):
            return True
        start = haystack.find(needle, start + 1)
    return False


def _word_char(char: str) -> bool:
    return char.isalnum() or char == "_"
