"""A naive-Bayes path predictor learned from the training patterns (:class:`PathClassifier`):
composes the parts of known wordings into paths no single pattern had."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping

from kgengine.rag.graph.steps import RelationPath, Step, format_path, parse_step
from kgengine.rag.linking.patterns import features


def slot_features(pattern: str) -> Counter[str]:
    """:func:`features` plus each word tagged with its side of ``<e>`` and whether it is
    within three words of it: the words next to the topic name the first hop ("whose writers
    also wrote <e>"), those far from it the answer ("who are the directors of ...")."""
    out = features(pattern)
    words = re.findall(r"<e>|[a-z0-9]+", pattern.lower())
    if "<e>" in words:
        anchor = words.index("<e>")
        for i, w in enumerate(words):
            if i != anchor:
                side = "L" if i < anchor else "R"
                near = "n" if abs(i - anchor) <= 3 else "f"
                out[f"p:{side}{near}:{w}"] += 1
    return out


class PathClassifier:
    """Multinomial naive Bayes over pattern features (:func:`slot_features`) for each *slot* of
    a relation path — its length, first step, last step and (three hops) middle step —
    trained on the learned patterns, one vote each. An unseen wording that mixes known parts
    ("the movies that share *actors* with <e> were in which *languages*") gets the path whose
    slots its words predict, even when no known pattern has that combination; a whole-pattern
    nearest neighbour would copy the path of the most similar wording instead (writers, say).

    A path's score is the sum of its slots' log posteriors; candidates are the learned paths
    and the combinations of each slot's three likeliest steps."""

    SLOTS = ("length", "first", "middle", "last")

    def __init__(self, learned: Mapping[str, RelationPath], alpha: float = 0.1) -> None:
        self.alpha = alpha
        self.paths = sorted(set(learned.values()), key=lambda p: (len(p), format_path(p)))
        self._counts: dict[str, dict[str, Counter[str]]] = {s: defaultdict(Counter) for s in self.SLOTS}
        self._priors: dict[str, Counter[str]] = {s: Counter() for s in self.SLOTS}
        self._vocabulary: set[str] = set()
        for pattern, path in learned.items():
            if not path:
                continue
            counts = slot_features(pattern)
            self._vocabulary.update(counts)
            for slot, label in self._labels(path).items():
                self._priors[slot][label] += 1
                self._counts[slot][label].update(counts)
        self._totals = {slot: {label: sum(c.values()) for label, c in self._counts[slot].items()}
                        for slot in self.SLOTS}

    @staticmethod
    def _labels(path: RelationPath) -> dict[str, str]:
        labels = {"length": str(len(path)), "first": str(path[0]), "last": str(path[-1])}
        if len(path) == 3:
            labels["middle"] = str(path[1])
        return labels

    def posteriors(self, pattern: str, slot: str) -> dict[str, float]:
        """label -> log posterior (normalised) of one slot."""
        counts = slot_features(pattern)
        known = {f: n for f, n in counts.items() if f in self._vocabulary}
        size = len(self._vocabulary) or 1
        scores: dict[str, float] = {}
        total_prior = sum(self._priors[slot].values())
        for label, prior in self._priors[slot].items():
            label_counts, label_total = self._counts[slot][label], self._totals[slot][label]
            denominator = math.log(label_total + self.alpha * size)
            scores[label] = math.log(prior / total_prior) + sum(
                n * (math.log(label_counts.get(f, 0) + self.alpha) - denominator) for f, n in known.items())
        if not scores:
            return {}
        top = max(scores.values())
        norm = top + math.log(sum(math.exp(v - top) for v in scores.values()))
        return {label: v - norm for label, v in scores.items()}

    def slot_probabilities(self, pattern: str) -> Callable[[RelationPath], dict[str, float]]:
        """``path -> {slot: posterior probability of the path's label}`` for ``pattern``."""
        post = {slot: self.posteriors(pattern, slot) for slot in self.SLOTS}

        def probabilities(path: RelationPath) -> dict[str, float]:
            if not path:
                return {}
            return {slot: math.exp(post[slot][label]) if label in post[slot] else 0.0
                    for slot, label in self._labels(path).items()}

        return probabilities

    def rank(self, pattern: str, k: int = 5) -> list[tuple[RelationPath, float]]:
        """The ``k`` likeliest paths with their scores (sums of log posteriors), best first."""
        if not self.paths:
            return []
        post = {slot: self.posteriors(pattern, slot) for slot in self.SLOTS}

        def top(slot: str, n: int = 3) -> list[Step]:
            return [parse_step(label) for label, _ in sorted(post[slot].items(), key=lambda kv: -kv[1])[:n]]

        candidates: set[RelationPath] = set(self.paths)
        for length in (int(label) for label in post["length"]):
            if length == 1:
                candidates.update((s,) for s in top("first"))
            elif length == 2:
                candidates.update((a, b) for a in top("first") for b in top("last"))
            else:
                candidates.update((a, m, b) for a in top("first") for m in top("middle") for b in top("last"))
        floor = math.log(1e-9)

        def score(path: RelationPath) -> float:
            return sum(post[slot].get(label, floor) for slot, label in self._labels(path).items())

        ranked = sorted(candidates, key=lambda p: (-score(p), len(p), format_path(p)))
        return [(p, score(p)) for p in ranked[:k]]

