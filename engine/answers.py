"""How an answer text is cut into answers and normalised — the official BRINK evaluator's
rules (see :mod:`kgengine.eval.metrics` for the point-by-point list), shared by the LLM
answerers (mapping a reply back to entities) and the metrics (scoring it)."""

from __future__ import annotations

import re
import string

ARTICLES = frozenset({"a", "an", "the"})
# ASCII punctuation only: "–", "’" and "。" stay
DELETE_PUNCTUATION = str.maketrans("", "", string.punctuation)
_SPLIT = re.compile(r"[,\n\r]+")
_SPLIT_SPACES = re.compile(r"[,\n\r\t ]+")


def normalize_answer(text: str) -> str:
    """Lowercase, ``<pad>`` → space, delete ASCII punctuation, drop a/an/the, collapse
    whitespace (in that order: "<PAD>" is lowercased first, "e1;e2" becomes "e1e2")."""
    text = text.lower().replace("<pad>", " ").translate(DELETE_PUNCTUATION)
    return " ".join(token for token in text.split() if token not in ARTICLES)


def split_raw_output(raw_output: str, split_on_spaces: bool = False) -> list[str]:
    """The candidate answer strings of a raw output, in order, empty pieces dropped."""
    raw_output = raw_output.strip()
    if not raw_output:
        return []
    pattern = _SPLIT_SPACES if split_on_spaces else _SPLIT
    return [piece.strip() for piece in pattern.split(raw_output) if piece.strip()]
