"""Words: of a question (:func:`question_words`, stopwords left out) and of a relation's name
and label (:func:`relation_words`: ``_``, CamelCase and ``/a/b/c`` split), and how alike two
words are (:func:`word_similarity`: equal, one word family, or a long common prefix)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from kgengine.rag.linking.patterns import PLACEHOLDER

_STOPWORD_TEXT = (
    "a an the of is are was were be been who whom whose what which when where why how did do "
    "does in on at to for by with as and or that this these those it its has have had from "
    "<e> e me my your their his her they them there than then also any some all"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split(" "))
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


def relation_words(name: str, label: str | None = None) -> list[str]:
    """Words of a relation name (``/film/film/directed_by``, ``hasGenre``, ``P57``) and label."""
    text = _CAMEL.sub(" ", name) + " " + (label or "")
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS]


def question_words(pattern: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", pattern.lower().replace(PLACEHOLDER.lower(), " "))
            if w not in STOPWORDS]


# word families the common-prefix rule misses (irregular verbs, "acted" ~ "actors") -> one
# stem, so "wrote" meets "written_by"
_WORD_FAMILIES = {form: stem for stem, forms in {
    "writ": "write wrote written writes writer writers screenwriter screenwriters",
    "sing": "sang sung sings", "win": "won wins winning",
    "make": "made makes", "give": "gave given gives", "take": "took taken takes",
    "speak": "spoke spoken speaks", "begin": "began begun begins", "born": "bore borne birth",
    "lead": "led leads", "teach": "taught", "buy": "bought", "think": "thought", "drive": "drove driven",
    "grow": "grew grown", "know": "knew known", "draw": "drew drawn", "fly": "flew flown",
    "choose": "chose chosen", "build": "built", "sell": "sold", "tell": "told",
    "act": "acted acts actor actors",
}.items() for form in (stem, *forms.split())}


def word_similarity(a: str, b: str) -> float:
    """1 for equal words (or of one word family: "wrote" ~ "written"), else the share
    of the shorter word in a common prefix of at least four characters ("directed" ~
    "director", "starred" ~ "starring"), else 0."""
    if a == b or (a in _WORD_FAMILIES and _WORD_FAMILIES[a] == _WORD_FAMILIES.get(b)):
        return 1.0
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    return common / max(len(a), len(b)) if common >= 4 else 0.0


def lexical_relation_score(question: Sequence[str], relation: Sequence[str]) -> float:
    """Mean over the relation's words of their best match among the question's words."""
    if not relation or not question:
        return 0.0
    return sum(max(word_similarity(r, q) for q in question) for r in relation) / len(relation)

