"""Relation linking: from a question (and its linked topic) to the relation path it asks about.

Two modes, tried in this order:

1. **learned** (``--train FILE``, repeatable): a training split with gold answers (a BRINK
   ``questions_train.jsonl`` or a MetaQA ``qa_*.txt``) is read; each question's pattern (its
   text with the topic mention as ``<E>``) learns the relation path that best reaches its gold
   answers in the answered KG (:func:`kgengine.rag.paths.learn_patterns`). A question whose
   pattern was seen gets that path (``learned_from = "train"``);
2. **ranked** (an unseen pattern, or no training data): the relation paths grounded around the
   topic are ranked against the question (:mod:`kgengine.rag.zero_shot`: the question's words
   against relation names and labels, sentence embeddings, the direction its word order
   asks, the answer type). With a training split the ranking also weighs what it learned —
   which relations the training patterns' words ask for, and the naive-Bayes path predictor
   (:class:`kgengine.rag.paths.PathClassifier`) that composes the parts of known wordings
   ("films that share *actors* with <e> were in which *languages*") — and is reported as
   ``"nearest-pattern"`` with the nearest known pattern (TF-IDF cosine at least
   ``min_similarity``, :class:`kgengine.rag.paths.PatternIndex`), else ``"zero-shot"``.

Learning reads only the training file (text, topic, answers) and the answered graph; the
learned model is cached on disk per graph, load stamp, training file and settings."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgengine.fsutil import write_text_atomically
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
    parse_path,
    pattern_of,
    question_words,
)
from kgengine.rag.rules import RuleSet, default_cache_dir
from kgengine.rag.zero_shot import (
    AdjacencySteps,
    Encoder,
    PathRanker,
    RankedPath,
    StepSource,
    StoreSteps,
    VocabularyMap,
    WordAssociations,
)
from kgengine.store import KGStore, short_digest

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
    note: str | None = None  # not learned: how the ranking chose the path

    def describe(self) -> str:
        path = " / ".join(format_path(self.path)) or "(none)"
        if self.learned_from == "train":
            read = f"; {self.note} ({self.matched_pattern!r})" if self.note else ""
            return (f"relation path {path}: learned for pattern {self.pattern!r} (train F1 "
                    f"{self.score:.2f}){read}")
        if self.learned_from == "nearest-pattern":
            return (f"relation path {path}: unseen pattern {self.pattern!r} (nearest known: "
                    f"{self.matched_pattern!r}, similarity {self.similarity:.2f}), {self.note}")
        return f"relation path {path}: zero-shot, {self.note}"


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
        self.classifier = PathClassifier(self.paths)

    @property
    def paths(self) -> dict[str, RelationPath]:
        """pattern -> its learned path."""
        return {p: v.path for p, v in self.patterns.items()}

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


def learn_model(
    store: KGStore,
    graph: str,
    train_paths: Sequence[Path],
    adjacency: Callable[[], GraphAdjacency],
    resolve: Callable[[str], str | None],
    rules: RuleSet | None = None,
    min_rule_confidence: float = 0.5,
    max_hops: int = 3,
    cache_dir: Path | None = None,
    progress: Callable[[int], None] | None = None,
) -> PathModel:
    """Learn (or read from the cache) the pattern -> path model of ``train_paths`` on ``graph``.
    ``adjacency`` gives the graph in memory (called only when learning: a cached model needs
    none); ``resolve`` maps a surface form of the file (id, private id or label) to an entity id."""
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
    graph_in_memory = adjacency()
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
                found |= body_answers(graph_in_memory, rule, topic, step.inverse)
            return found

    learned = learn_patterns(graph_in_memory, examples, max_hops=max_hops, rule_reach=rule_reach,
                             progress=progress)
    model = PathModel(learned, [str(p) for p in train_paths], questions, skipped)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, json.dumps(model.to_json()))
    return model


def training_stamp(store: KGStore, graph: str, train_paths: Sequence[Path]) -> list[str]:
    """What a model learned on ``train_paths`` over ``graph`` depends on: the store, the graph's
    load stamp and each training file (path, size, modification time), for cache keys."""
    info = store.graph_info(graph)
    parts = [store.location, graph, info.loaded_at if info else ""]
    for p in train_paths:
        stat = p.stat()
        parts += [str(p.resolve()), str(stat.st_size), str(stat.st_mtime_ns)]
    return parts


def _model_cache(store: KGStore, graph: str, train_paths: Sequence[Path], rules: RuleSet | None,
                 min_rule_confidence: float, max_hops: int, cache_dir: Path | None) -> Path:
    # the rules by content: "mined on first use" and "mined earlier" are the same rules
    digest = short_digest(str(MODEL_VERSION), *training_stamp(store, graph, train_paths), str(max_hops),
                          str(min_rule_confidence), rules.fingerprint if rules else "no rules")
    return (cache_dir or default_cache_dir()) / "paths" / f"{graph}-{digest}.json"


# ---- zero-shot, and the linker ---------------------------------------------------------------
class ZeroShotLinker:
    """The grounded relation paths around the topic ranked against the question
    (:class:`kgengine.rag.zero_shot.PathRanker`), over the in-memory ``adjacency`` when one
    was built, else through the store's queries. ``encoder`` gives sentence embeddings;
    ``model`` adds what a training split learned (word associations and the naive-Bayes path
    predictor) to the ranking."""

    def __init__(self, store: KGStore, graph: str, relation_labels: dict[str, str] | None = None,
                 encoder: Encoder | None = None, max_hops: int = 3,
                 entity_labels: dict[str, str] | None = None, adjacency: GraphAdjacency | None = None,
                 model: PathModel | None = None, rules: RuleSet | None = None) -> None:
        # the heads of mined rules, both ways: rankable from a topic that lacks the edge
        self.derivable = sorted({Step(r.head_relation, inverse) for r in (rules.rules if rules else ())
                                 for inverse in (False, True)})
        self.source: StepSource = (AdjacencySteps(adjacency) if adjacency is not None
                                   else StoreSteps(store, graph))
        associations = classifier = None
        if model is not None:
            associations = WordAssociations.from_patterns(model.paths)
            classifier = model.classifier
        self.ranker = PathRanker(relation_labels, encoder, entity_labels, associations, classifier,
                                 max_hops=max_hops)

    def rank(self, pattern: str, topic: str, k: int = 5,
             prior: dict[RelationPath, float] | None = None) -> list[RankedPath]:
        return self.ranker.rank(pattern, topic, self.source, k, self.derivable, prior)

    def link(self, pattern: str, topic: str, learned_from: str = "zero-shot",
             prior: dict[RelationPath, float] | None = None) -> LinkedPath:
        ranked = self.rank(pattern, topic, prior=prior)
        if not ranked:
            return LinkedPath((), learned_from, pattern, note="no relation leaves the topic entity")
        best = ranked[0]
        note = (f"ranked over the grounded paths around the topic: {best.describe()}; "
                f"direction {best.direction}")
        if len(ranked) > 1:
            note += f"; next: {ranked[1].describe()}"
        return LinkedPath(best.path, learned_from, pattern, score=best.score,
                          alternatives=[(r.path, r.score) for r in ranked[1:4]], note=note)


class RelationLinker:
    """A learned pattern first; else the zero-shot ranking, with the training split's signals
    when there is one (``"nearest-pattern"`` when a known pattern is near, else ``"zero-shot"``)."""

    def __init__(self, zero_shot: ZeroShotLinker, model: PathModel | None = None,
                 min_similarity: float = 0.3, relations: Sequence[str] = ()) -> None:
        self.zero_shot, self.model, self.min_similarity = zero_shot, model, min_similarity
        # the words that name a relation, as the ranking reads them
        self.relation_words = {w for r in relations for w in zero_shot.ranker.cues(r).words}
        encoder = zero_shot.ranker.encoder
        # with embeddings, words the training split never used are read as its nearest words
        self.vocabulary = (VocabularyMap(model.paths, encoder)
                           if model is not None and encoder is not None else None)

    def link(self, text: str, topic: str, mention: str | None) -> LinkedPath:
        pattern = pattern_of(text, mention)
        if self.model is None:
            return self.zero_shot.link(pattern, topic)
        known = self.model.patterns.get(pattern)
        if known is not None:
            return LinkedPath(known.path, "train", pattern, pattern, 1.0, known.score, known.alternatives)
        if self.vocabulary is not None:
            rewritten, swaps = self.vocabulary.rewrite(pattern)
            known = self.model.patterns.get(rewritten)
            read_as = "words unseen in training read as " + ", ".join(f"{a!r} ~ {b!r}" for a, b in swaps)
            if known is not None:
                return LinkedPath(known.path, "train", pattern, rewritten, 1.0, known.score,
                                  known.alternatives, note=read_as)
            # words training never used: lean on the training questions it reads most like
            # as much as the question is worded in unseen words ("what is the main language
            # in <e>": half, and "language" names in_language)
            unseen = self.vocabulary.unseen(pattern, self.relation_words)
            content = question_words(pattern)
            prior = (self.vocabulary.similar_paths(pattern, min(1.0, len(unseen) / len(content)))
                     if unseen and content else None)
            if swaps or prior:
                linked = self.link_unseen(rewritten, topic, prior)
                similar = "unseen words: the paths of the most similar training questions weigh in"
                notes = ([read_as] if swaps else []) + ([similar] if prior else [])
                linked.pattern, linked.note = pattern, "; ".join([*notes, linked.note or ""])
                return linked
        return self.link_unseen(pattern, topic)

    def link_unseen(self, pattern: str, topic: str,
                    prior: dict[RelationPath, float] | None = None) -> LinkedPath:
        assert self.model is not None
        neighbours = self.model.index.nearest(pattern, 1)
        if neighbours and neighbours[0][1] >= self.min_similarity:
            linked = self.zero_shot.link(pattern, topic, "nearest-pattern", prior)
            linked.matched_pattern, linked.similarity = neighbours[0]
            return linked
        return self.zero_shot.link(pattern, topic, prior=prior)


def split_train_paths(values: Sequence[str | Path]) -> list[Path]:
    """``--train`` values; each may list several files separated by commas."""
    out: list[Path] = []
    for value in values:
        out += [Path(v) for v in str(value).split(",") if v.strip()]
    return out
