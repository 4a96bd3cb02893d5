"""What a training split's wording teaches the zero-shot ranking: which relations its words
ask for (:class:`WordAssociations`) and, by sentence embeddings, how a question worded
otherwise reads (:class:`VocabularyMap`)."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgengine.rag.graph.steps import RelationPath
from kgengine.rag.linking.words import STOPWORDS, question_words, word_similarity

Encoder = Callable[[Sequence[str]], Any]  # texts -> array of L2-normalised rows

# learned word -> relation lifts: shrunk by SHRINK pseudo-patterns at the base rate, and
# weighted below a relation's own name (held-out wordings reuse the words of known ones:
# "who is listed as <screenwriter|director> of")
SHRINK, LEARNED_WEIGHT = 3.0, 0.7
# a question with words training never used: the paths of the training questions it reads like
SIMILAR_WEIGHT, SIMILAR_SPREAD = 0.8, 0.05


@dataclass
class WordAssociations:
    """For each question word, how much more often than their base rate the training patterns
    that use it ask for each relation (lift, 0..1): "direct" -> ``directed_by``."""

    lift: dict[str, dict[str, float]] = field(default_factory=dict)

    @classmethod
    def from_patterns(cls, patterns: Mapping[str, RelationPath], min_patterns: int = 2) -> WordAssociations:
        word_count: Counter[str] = Counter()
        pair_count: dict[str, Counter[str]] = defaultdict(Counter)
        relation_count: Counter[str] = Counter()
        for pattern, path in patterns.items():
            relations = {s.relation for s in path}
            relation_count.update(relations)
            for word in set(question_words(pattern)):
                word_count[word] += 1
                pair_count[word].update(relations)
        total = len(patterns) or 1
        lift: dict[str, dict[str, float]] = {}
        for word, n in word_count.items():
            if n < min_patterns:
                continue
            for relation, together in pair_count[word].items():
                base = relation_count[relation] / total
                # shrunk towards the base rate: a word of few patterns says little
                share = (together + SHRINK * base) / (n + SHRINK)
                value = LEARNED_WEIGHT * (share - base) / (1 - base) if base < 1 else 0.0
                if value > 0:
                    lift.setdefault(word, {})[relation] = value
        return cls(lift)

    def get(self, word: str, relation: str) -> float:
        return self.lift.get(word, {}).get(relation, 0.0)


class VocabularyMap:
    """What a training split's wording says about a question worded otherwise, by sentence
    embeddings. Words it never used -> the training word they embed closest to, when close
    enough (cosine >= ``min_cosine``) and clearly closest (ahead of the runner-up by
    ``margin``): "penned" -> "wrote", "kinds" -> "types"; loose single-word neighbours
    ("filmmakers" ~ "films") stay unmapped. And for a question with such words, the learned
    paths of the training questions it reads most like (:meth:`similar_paths`): "who helmed
    the picture <e>" reads like "who directed the movie <e>" although no word maps."""

    def __init__(self, patterns: Mapping[str, RelationPath], encoder: Encoder, min_cosine: float = 0.6,
                 margin: float = 0.05) -> None:
        self.patterns = dict(patterns)
        self.vocabulary = sorted({w for p in patterns for w in _WORDS.findall(p) if w not in STOPWORDS})
        self._known = set(self.vocabulary)
        self.encoder, self.min_cosine, self.margin = encoder, min_cosine, margin
        self._vectors: Any = None
        self._pattern_vectors: Any = None
        self._mapped: dict[str, str | None] = {}

    def _new(self, word: str) -> bool:
        """A content word the training split never used."""
        return word not in self._known and word not in STOPWORDS and not word.isdigit() and word != "e"

    def unseen(self, pattern: str, relation_words: Iterable[str] = ()) -> list[str]:
        """The question's words that neither the training split nor a relation name knows
        ("helmed"; not "direct", which names directed_by although training never wrote it)."""
        named = set(relation_words)
        return [w for w in _WORDS.findall(pattern)
                if self._new(w) and not any(word_similarity(w, r) > 0 for r in named)]

    def similar_paths(self, pattern: str, weight: float = 1.0) -> dict[RelationPath, float]:
        """path -> ``weight * SIMILAR_WEIGHT``, decaying by how much less like the question its
        most similar training pattern reads than the most similar of all."""
        texts = list(self.patterns)
        if not texts:
            return {}
        if self._pattern_vectors is None:
            self._pattern_vectors = self.encoder([t.replace("<e>", "it") for t in texts])
        scores = self._pattern_vectors @ self.encoder([pattern.replace("<e>", "it")])[0]
        best: dict[RelationPath, float] = {}
        for text, score in zip(texts, scores, strict=True):
            path = self.patterns[text]
            best[path] = max(best.get(path, -1.0), float(score))
        top = max(best.values())
        return {path: weight * SIMILAR_WEIGHT * math.exp((score - top) / SIMILAR_SPREAD)
                for path, score in best.items()}

    def nearest(self, word: str) -> str | None:
        if word not in self._mapped:
            if self._vectors is None:
                self._vectors = self.encoder(self.vocabulary)
            scores = self._vectors @ self.encoder([word])[0]
            order = scores.argsort()[::-1]
            best = float(scores[order[0]])
            runner_up = float(scores[order[1]]) if len(order) > 1 else -1.0
            self._mapped[word] = (self.vocabulary[order[0]]
                                  if best >= self.min_cosine and best - runner_up >= self.margin else None)
        return self._mapped[word]

    def rewrite(self, pattern: str) -> tuple[str, list[tuple[str, str]]]:
        """The pattern with its unseen words mapped, and the (word, mapped to) pairs."""
        if not self.vocabulary:
            return pattern, []
        swaps: list[tuple[str, str]] = []

        def swap(match: re.Match[str]) -> str:
            word = match.group(0)
            if not self._new(word):
                return word
            found = self.nearest(word)
            if found is None:
                return word
            swaps.append((word, found))
            return found

        return _WORDS.sub(swap, pattern), swaps


_WORDS = re.compile(r"(?<![<\w])[a-z0-9][a-z0-9'-]*(?![\w>])")
