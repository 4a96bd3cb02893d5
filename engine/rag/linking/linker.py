"""Relation linking: from a question (and its linked topic) to the relation path it asks
about, behind one protocol, :class:`RelationLinker`, that every method linking a path uses
(``offline``, ``rule-guided``, ``plan``).

Two modes, tried in this order by :class:`LearnedRelationLinker`:

1. **learned** (``--train FILE``): a question whose pattern (its text with the topic mention
   as ``<E>``) was seen in the training split gets the path learned for it
   (:mod:`kgengine.rag.linking.learning`; ``learned_from = "train"``);
2. **ranked** (an unseen pattern, or no training data): the relation paths grounded around the
   topic are ranked against the question (:class:`ZeroShotLinker` over
   :mod:`kgengine.rag.linking.ranking`). With a training split the ranking also weighs what
   it learned — which relations the training patterns' words ask for, and the naive-Bayes
   path predictor (:mod:`kgengine.rag.linking.classifier`) — and is reported as
   ``"nearest-pattern"`` with the nearest known pattern (TF-IDF cosine at least
   ``min_similarity``, :class:`kgengine.rag.linking.patterns.PatternIndex`), else
   ``"zero-shot"``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kgengine.mining.io import MinedRule
from kgengine.rag.graph.steps import RelationPath, Step, format_path
from kgengine.rag.graph.view import GraphView
from kgengine.rag.linking.learning import PathModel
from kgengine.rag.linking.patterns import pattern_of
from kgengine.rag.linking.ranking import PathRanker, RankedPath
from kgengine.rag.linking.vocabulary import Encoder, VocabularyMap, WordAssociations
from kgengine.rag.linking.words import question_words


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


class RelationLinker(Protocol):
    """From a question's text and linked topic to the relation path it asks about."""

    def link(self, text: str, topic: str, mention: str | None) -> LinkedPath:
        """The path (with its alternatives, and how it was chosen); ``mention``: the words
        that name the topic in ``text``."""
        ...

    def link_by_ranking(self, pattern: str, topic: str) -> LinkedPath:
        """The ranking over the paths the graph has around the topic alone (no learned
        pattern): what an answerer tries when the linked path reaches nothing."""
        ...


class ZeroShotLinker:
    """The grounded relation paths around the topic ranked against the question
    (:class:`kgengine.rag.linking.ranking.PathRanker`) on the answerer's graph view.
    ``encoder`` gives sentence embeddings; ``model`` adds what a training split learned (word
    associations and the naive-Bayes path predictor) to the ranking."""

    def __init__(self, view: GraphView, relation_labels: dict[str, str] | None = None,
                 encoder: Encoder | None = None, max_hops: int = 3,
                 entity_labels: dict[str, str] | None = None, model: PathModel | None = None,
                 rules: Iterable[MinedRule] = ()) -> None:
        # the heads of mined rules, both ways: rankable from a topic that lacks the edge
        self.derivable = sorted({Step(r.head_relation, inverse) for r in rules for inverse in (False, True)})
        self.view = view
        associations = classifier = None
        if model is not None:
            associations = WordAssociations.from_patterns(model.paths)
            classifier = model.classifier
        self.ranker = PathRanker(relation_labels, encoder, entity_labels, associations, classifier,
                                 max_hops=max_hops)

    @property
    def encoder(self) -> Encoder | None:
        return self.ranker.encoder

    def relation_words(self, relations: Iterable[str]) -> set[str]:
        """The words that name any of ``relations``, as the ranking reads them."""
        return {w for r in relations for w in self.ranker.cues(r).words}

    def rank(self, pattern: str, topic: str, k: int = 5,
             prior: dict[RelationPath, float] | None = None) -> list[RankedPath]:
        return self.ranker.rank(pattern, topic, self.view, k, self.derivable, prior)

    def link(self, text: str, topic: str, mention: str | None) -> LinkedPath:
        return self.link_pattern(pattern_of(text, mention), topic)

    def link_by_ranking(self, pattern: str, topic: str) -> LinkedPath:
        return self.link_pattern(pattern, topic)

    def link_pattern(self, pattern: str, topic: str, learned_from: str = "zero-shot",
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


class LearnedRelationLinker:
    """A learned pattern first; else the zero-shot ranking with the training split's signals
    (``"nearest-pattern"`` when a known pattern is near, else ``"zero-shot"``)."""

    def __init__(self, zero_shot: ZeroShotLinker, model: PathModel, min_similarity: float = 0.3,
                 relations: Sequence[str] = ()) -> None:
        self.zero_shot, self.model, self.min_similarity = zero_shot, model, min_similarity
        self.relation_words = zero_shot.relation_words(relations)
        encoder = zero_shot.encoder
        # with embeddings, words the training split never used are read as its nearest words
        self.vocabulary = VocabularyMap(model.paths, encoder) if encoder is not None else None

    def link_by_ranking(self, pattern: str, topic: str) -> LinkedPath:
        return self.zero_shot.link_pattern(pattern, topic)

    def link(self, text: str, topic: str, mention: str | None) -> LinkedPath:
        pattern = pattern_of(text, mention)
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
        neighbours = self.model.index.nearest(pattern, 1)
        if neighbours and neighbours[0][1] >= self.min_similarity:
            linked = self.zero_shot.link_pattern(pattern, topic, "nearest-pattern", prior)
            linked.matched_pattern, linked.similarity = neighbours[0]
            return linked
        return self.zero_shot.link_pattern(pattern, topic, prior=prior)
