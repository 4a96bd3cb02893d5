"""Relation linking: from a question (and its linked topic) to the relation path it asks about.

Two modes, tried in this order:

1. **learned** (``--train FILE``, repeatable): a training split with gold answers (a BRINK
   ``questions_train.jsonl`` or a MetaQA ``qa_*.txt``) is read; each question's pattern (its
   text with the topic mention as ``<E>``) learns the relation path that best reaches its gold
   answers in the answered KG (:func:`kgengine.rag.paths.learn_patterns`). A question whose
   pattern was seen gets that path (``learned_from = "train"``). An unseen pattern that is
   near a known one (TF-IDF cosine over word and character n-grams at least
   ``min_similarity``, :class:`kgengine.rag.paths.PatternIndex`) gets the path that its words
   predict slot by slot — length, first, middle and last step — by naive Bayes trained on the
   known patterns (:class:`kgengine.rag.paths.PathClassifier`), so "films that share *actors*
   with <e> were in which *languages*" composes the parts of two known wordings
   (``"nearest-pattern"``; the nearest known pattern is reported with it);
2. **zero-shot** (no training data, or nothing near): question words against the relations'
   names and labels — lexical (equal words, or a common prefix of four or more characters),
   plus cosine similarity of sentence embeddings with the real model when one is given —
   for a KG and questions never seen. The best relation is the first hop; further relations
   the question names (lexical score >= 0.5) follow, nearest to the topic mention first, up
   to ``max_hops``; each hop's direction is the one with edges from where the path stands
   (forwards when both have).

Learning reads only the training file (text, topic, answers) and the answered graph; the
learned model is cached on disk per graph, load stamp, training file and settings."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgengine.fsutil import write_text_atomically
from kgengine.model import Entity, Relation
from kgengine.questions import read_training
from kgengine.rag.paths import (
    Example,
    GraphAdjacency,
    PathClassifier,
    PatternIndex,
    PatternPath,
    RelationPath,
    Step,
    body_answers,
    format_path,
    learn_patterns,
    lexical_relation_score,
    parse_path,
    pattern_of,
    question_words,
    relation_words,
)
from kgengine.rag.rules import RuleSet, default_cache_dir
from kgengine.store import KGStore

MODEL_VERSION = 1


@dataclass
class LinkedPath:
    path: RelationPath
    learned_from: str  # "train", "nearest-pattern" or "zero-shot"
    pattern: str
    matched_pattern: str | None = None
    similarity: float | None = None
    score: float | None = None  # learned: the pattern's mean F1 on its training questions
    # learned: the pattern's next-best paths (path, mean F1), tried when the path finds nothing
    alternatives: list[tuple[RelationPath, float]] = field(default_factory=list)

    def describe(self) -> str:
        path = " / ".join(format_path(self.path)) or "(none)"
        if self.learned_from == "train":
            return f"relation path {path}: learned for pattern {self.pattern!r} (train F1 {self.score:.2f})"
        if self.learned_from == "nearest-pattern":
            return (f"relation path {path}: predicted from the known patterns for the unseen "
                    f"{self.pattern!r} (nearest: {self.matched_pattern!r}, similarity "
                    f"{self.similarity:.2f})")
        return f"relation path {path}: zero-shot, question words against relation names"


@dataclass
class PathModel:
    """Patterns learned from training questions, and the index of their texts."""

    patterns: dict[str, PatternPath]
    sources: list[str]
    questions: int = 0
    skipped: int = 0  # training questions whose topic or answers are not in the graph
    index: PatternIndex = field(init=False)
    classifier: PathClassifier = field(init=False)

    def __post_init__(self) -> None:
        self.index = PatternIndex(self.patterns)
        self.classifier = PathClassifier({p: v.path for p, v in self.patterns.items()})

    def to_json(self) -> dict[str, Any]:
        return {"version": MODEL_VERSION, "sources": self.sources, "questions": self.questions,
                "skipped": self.skipped,
                "patterns": {p: {"path": format_path(v.path), "score": v.score, "examples": v.examples,
                                 "alternatives": [[format_path(a), s] for a, s in v.alternatives]}
                             for p, v in self.patterns.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PathModel:
        patterns = {p: PatternPath(parse_path(v["path"]), v["score"], v["examples"],
                                   [(parse_path(a), s) for a, s in v["alternatives"]])
                    for p, v in data["patterns"].items()}
        return cls(patterns, data["sources"], data["questions"], data["skipped"])

    def lookup(self, pattern: str, k: int = 5, min_similarity: float = 0.3) -> LinkedPath | None:
        known = self.patterns.get(pattern)
        if known is not None:
            return LinkedPath(known.path, "train", pattern, pattern, 1.0, known.score, known.alternatives)
        neighbours = self.index.nearest(pattern, k)
        if not neighbours or neighbours[0][1] < min_similarity:
            return None
        # the path the unseen wording's parts predict, slot by slot; the next likeliest are
        # the alternatives, tried in turn when the best finds nothing from this topic
        ranked = self.classifier.rank(pattern, k=6)
        best, best_score = ranked[0]
        matched, similarity = neighbours[0]
        alternatives = [(p, math.exp(v - best_score)) for p, v in ranked[1:]]
        return LinkedPath(best, "nearest-pattern", pattern, matched, similarity,
                          math.exp(best_score), alternatives)


def learn_model(
    store: KGStore,
    graph: str,
    train_paths: Sequence[Path],
    adjacency: GraphAdjacency,
    resolve: Callable[[str], str | None],
    rules: RuleSet | None = None,
    min_rule_confidence: float = 0.5,
    max_hops: int = 3,
    cache_dir: Path | None = None,
    progress: Callable[[int], None] | None = None,
) -> PathModel:
    """Learn (or read from the cache) the pattern -> path model of ``train_paths`` on ``graph``.
    ``resolve`` maps a surface form of the file (id, private id or label) to an entity id."""
    path = _model_cache(store, graph, train_paths, rules, min_rule_confidence, max_hops, cache_dir)
    if path.is_file():
        try:
            return PathModel.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            path.unlink(missing_ok=True)  # a stale or broken cache: learn again
    examples: list[Example] = []
    questions = skipped = 0
    for train_path in train_paths:
        for q in read_training(train_path):
            questions += 1
            written = q.question.topic_entity or ""
            topic = resolve(written)
            answers = frozenset(a for a in (resolve(x) for x in q.answers) if a is not None)
            if topic is None or not answers:
                skipped += 1
                continue
            examples.append(Example(pattern_of(q.question.text, written), topic, answers, q.hops))
    rule_reach = None
    if rules is not None and rules.rules:
        by_step: dict[Step, list] = {}

        def rule_reach(topic: str, step: Step) -> set[str]:
            chosen = by_step.get(step)
            if chosen is None:
                chosen = by_step[step] = [r.rule for r in rules.for_step(step)
                                          if r.pca_confidence >= min_rule_confidence]
            found: set[str] = set()
            for rule in chosen:
                found |= body_answers(adjacency, rule, topic, step.inverse)
            return found

    learned = learn_patterns(adjacency, examples, max_hops=max_hops, rule_reach=rule_reach,
                             progress=progress)
    model = PathModel(learned, [str(p) for p in train_paths], questions, skipped)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, json.dumps(model.to_json()))
    return model


def _model_cache(store: KGStore, graph: str, train_paths: Sequence[Path], rules: RuleSet | None,
                 min_rule_confidence: float, max_hops: int, cache_dir: Path | None) -> Path:
    info = store.graph_info(graph)
    parts = [str(MODEL_VERSION), store.location, graph, info.loaded_at if info else "", str(max_hops),
             str(min_rule_confidence), rules.origin.split(" cached at ")[0] if rules else "no rules"]
    for p in train_paths:
        stat = p.stat()
        parts += [str(p.resolve()), str(stat.st_size), str(stat.st_mtime_ns)]
    digest = hashlib.sha256("\t".join(parts).encode()).hexdigest()[:16]
    return (cache_dir or default_cache_dir()) / "paths" / f"{graph}-{digest}.json"


# ---- zero-shot ---------------------------------------------------------------------------
Encoder = Callable[[Sequence[str]], Any]  # texts -> array of L2-normalised rows


class ZeroShotLinker:
    """Question words against relation names and labels (and embeddings, when given)."""

    def __init__(self, store: KGStore, graph: str, relations: Sequence[str],
                 relation_labels: dict[str, str] | None = None, encoder: Encoder | None = None,
                 max_hops: int = 3, min_lexical: float = 0.5) -> None:
        self.store, self.graph = store, graph
        self.relations = sorted(relations)
        self.labels = relation_labels or {}
        self.words = {r: relation_words(r, self.labels.get(r)) for r in self.relations}
        self.encoder, self.max_hops, self.min_lexical = encoder, max_hops, min_lexical
        self._relation_vectors = None
        if encoder is not None:
            self._relation_vectors = encoder([" ".join(self.words[r]) or r for r in self.relations])

    def scores(self, pattern: str) -> dict[str, tuple[float, float]]:
        """relation -> (lexical, embedding) similarity to the question pattern."""
        words = question_words(pattern)
        lexical = {r: lexical_relation_score(words, self.words[r]) for r in self.relations}
        semantic = dict.fromkeys(self.relations, 0.0)
        if self.encoder is not None and self._relation_vectors is not None:
            query = self.encoder([pattern.replace("<e>", "").replace("<E>", "")])[0]
            for r, value in zip(self.relations, self._relation_vectors @ query, strict=True):
                semantic[r] = float(value)
        return {r: (lexical[r], semantic[r]) for r in self.relations}

    def link(self, pattern: str, topic: str) -> LinkedPath:
        scores = self.scores(pattern)
        ranked = sorted(self.relations, key=lambda r: (-max(scores[r]), -scores[r][0], r))
        if not ranked:
            return LinkedPath((), "zero-shot", pattern)
        chosen = [ranked[0]] + [r for r in ranked[1:] if scores[r][0] >= self.min_lexical]
        chosen = chosen[: self.max_hops]
        words = question_words(pattern)
        anchor = pattern.find("<e>")

        def distance(relation: str) -> int:
            positions = [m.start() for w in words for m in re.finditer(re.escape(w), pattern)
                         if any(_close(w, x) for x in self.words[relation])]
            return min((abs(p - anchor) for p in positions), default=10_000)

        ordered = sorted(chosen, key=lambda r: (distance(r), ranked.index(r))) if len(chosen) > 1 else chosen
        path: list[Step] = []
        frontier = [topic]
        for relation in ordered:
            step, frontier = self._direction(relation, frontier, topic)
            path.append(step)
        return LinkedPath(tuple(path), "zero-shot", pattern, score=max(scores[ordered[0]]))

    def _direction(self, relation: str, frontier: list[str], topic: str) -> tuple[Step, list[str]]:
        """Forwards when the frontier has outgoing edges of the relation, else backwards."""
        for inverse in (False, True):
            name, var, other = ("answer_step_in", "t", "h") if inverse else ("answer_step_out", "h", "t")
            entities = [Entity(e) for e in frontier]
            rows = self.store.run(name, self.graph, r=Relation(relation), **{var: entities})
            reached = sorted({row[other] for row in rows} - {topic})
            if reached:
                return Step(relation, inverse), reached
        return Step(relation, False), []


def _close(a: str, b: str) -> bool:
    from kgengine.rag.paths import word_similarity

    return word_similarity(a, b) > 0


class RelationLinker:
    """Learned model first (exact pattern, then nearest), zero-shot otherwise."""

    def __init__(self, zero_shot: ZeroShotLinker, model: PathModel | None = None,
                 min_similarity: float = 0.3) -> None:
        self.zero_shot, self.model, self.min_similarity = zero_shot, model, min_similarity

    def link(self, text: str, topic: str, mention: str | None) -> LinkedPath:
        pattern = pattern_of(text, mention)
        if self.model is not None:
            found = self.model.lookup(pattern, min_similarity=self.min_similarity)
            if found is not None:
                return found
        return self.zero_shot.link(pattern, topic)


def split_train_paths(values: Sequence[str | Path]) -> list[Path]:
    """``--train`` values; each may list several files separated by commas."""
    out: list[Path] = []
    for value in values:
        out += [Path(v) for v in str(value).split(",") if v.strip()]
    return out
