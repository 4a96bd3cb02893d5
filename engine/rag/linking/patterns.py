"""Question patterns: a question's text with its topic mention replaced by ``<E>``
(:func:`pattern_of`), and the nearest known pattern of an unseen one (:class:`PatternIndex`:
TF-IDF cosine over word unigrams, word bigrams and character trigrams, so an unseen wording
finds the known pattern that shares its rarest words)."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable

PLACEHOLDER = "<E>"
_SPACE = re.compile(r"\s+")
_BRACKET = re.compile(r"\[([^\[\]]+)\]")


def normalise(text: str) -> str:
    return _SPACE.sub(" ", text.strip().lower())


def find_mention(text: str, mention: str) -> int:
    """Start of ``mention`` in ``text`` as a whole token (case-blind), or -1."""
    haystack, needle = text.casefold(), mention.casefold()
    start = haystack.find(needle)
    while start != -1:
        end = start + len(needle)
        before = haystack[start - 1] if start else " "
        after = haystack[end] if end < len(haystack) else " "
        if not _word(before) and not _word(after):
            return start
        start = haystack.find(needle, start + 1)
    return -1


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def pattern_of(text: str, mention: str | None) -> str:
    """The question with its topic mention replaced by ``<E>``, lower-cased, spaces collapsed:
    a ``[bracketed]`` mention (MetaQA) or the mention's first whole-token occurrence."""
    bracket = _BRACKET.search(text)
    if bracket is not None and (mention is None or bracket.group(1).casefold() == mention.casefold()):
        return normalise(text[:bracket.start()] + PLACEHOLDER + text[bracket.end():])
    if mention:
        start = find_mention(text, mention)
        if start != -1:
            return normalise(text[:start] + PLACEHOLDER + text[start + len(mention):])
    return normalise(text)


def features(pattern: str) -> Counter[str]:
    """Word unigrams and bigrams and character trigrams of a pattern (``<E>`` kept as a word,
    so its position counts)."""
    words = re.findall(r"<e>|[a-z0-9]+", pattern.lower())
    out: Counter[str] = Counter()
    out.update(f"w:{w}" for w in words)
    out.update(f"b:{a} {b}" for a, b in zip(words, words[1:], strict=False))
    for w in words:
        if w == "<e>":
            continue
        padded = f"#{w}#"
        out.update(f"c:{padded[i:i + 3]}" for i in range(len(padded) - 2))
    return out


class PatternIndex:
    """TF-IDF cosine similarity between a pattern and the known ones."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = list(dict.fromkeys(patterns))
        counts = [features(p) for p in self.patterns]
        document_frequency: Counter[str] = Counter()
        for c in counts:
            document_frequency.update(c.keys())
        n = len(self.patterns)
        self._idf = {f: math.log((1 + n) / (1 + df)) + 1.0 for f, df in document_frequency.items()}
        self._postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for i, c in enumerate(counts):
            vector = self._vector(c)
            for f, w in vector.items():
                self._postings[f].append((i, w))

    def _vector(self, counts: Counter[str]) -> dict[str, float]:
        weights = {f: (1 + math.log(n)) * self._idf.get(f, 0.0) for f, n in counts.items()}
        norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
        return {f: w / norm for f, w in weights.items() if w}

    def nearest(self, pattern: str, k: int = 5) -> list[tuple[str, float]]:
        scores: dict[int, float] = defaultdict(float)
        for f, w in self._vector(features(pattern)).items():
            for i, v in self._postings.get(f, ()):
                scores[i] += w * v
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], self.patterns[kv[0]]))[:k]
        return [(self.patterns[i], s) for i, s in ranked]

