"""What the zero-shot ranking reads in a question and in a relation's name: the question's
tokens, content words, topic position and answer type (:class:`QuestionCues`: "who", "what
year", "which films"); a relation's words, English reading and the kind of its ends
(:class:`RelationCues`, from :mod:`kgengine.wording`); and the direction a question asks a
relation in, from its word order (:func:`expected_direction`: "the aunt of <e>" asks for the
subject of ``aunt``, "whose aunt is <e>" for its object)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kgengine.rag.linking.words import STOPWORDS, question_words, relation_words
from kgengine.wording import KINSHIP, Reading, humanize, is_person, phrase_for, word_set

_TOKEN = re.compile(r"<e>|[a-z0-9]+(?:'s)?")
TEMPORAL_WORDS = word_set("year years date dates decade when time")
SHARE_WORDS = word_set("share shares shared sharing same also common other others too co")
NUMBER_WORDS = word_set("rating ratings score votes number amount count population height")
_SKIP_AFTER_WH = word_set("is are was were the a an kind sort type types of do does did")


@dataclass(frozen=True)
class AnswerType:
    kind: str | None = None  # "person", "temporal", "number" or None
    noun: str | None = None  # "films" in "which films ..."
    position: int | None = None  # the noun's token: it names the answer, not a step (unless lexically)


def answer_type(tokens: Sequence[str]) -> AnswerType:
    """What the question asks for, from its first question word and the noun after a
    "what"/"which" ("which films" -> "films"; "what release year" -> temporal, "year")."""
    for i, token in enumerate(tokens):
        if token in ("who", "whom", "whose"):
            return AnswerType("person")
        if token == "when":
            return AnswerType("temporal")
        if token == "how" and i + 1 < len(tokens) and tokens[i + 1] in ("many", "much"):
            return AnswerType("number")
        if token in ("what", "which"):
            rest = list(tokens[i + 1:i + 6])
            j = next((n for n, w in enumerate(rest) if w not in _SKIP_AFTER_WH), None)
            if j is None or rest[j] == "<e>" or rest[j] in STOPWORDS:
                return AnswerType()
            noun, position = rest[j], i + 1 + j
            if j + 1 < len(rest) and rest[j + 1] in TEMPORAL_WORDS | NUMBER_WORDS:  # "release year"
                noun, position = rest[j + 1], position + 1
            if noun in TEMPORAL_WORDS:
                return AnswerType("temporal", noun, position)
            if noun in NUMBER_WORDS:
                return AnswerType("number", noun, position)
            return AnswerType("person" if is_person(noun) else None, noun, position)
    return AnswerType()


@dataclass
class QuestionCues:
    """The question's tokens, content words (with positions), topic position, answer type."""

    pattern: str
    tokens: list[str]
    words: list[tuple[int, str]]
    anchor: int | None
    answer: AnswerType

    @classmethod
    def of(cls, pattern: str) -> QuestionCues:
        tokens = _TOKEN.findall(pattern.lower())
        content = set(question_words(pattern)) | SHARE_WORDS  # "also" is a stopword elsewhere
        words = [(i, t.removesuffix("'s")) for i, t in enumerate(tokens)
                 if t != "<e>" and t.removesuffix("'s") in content]
        anchor = tokens.index("<e>") if "<e>" in tokens else None
        return cls(pattern, tokens, words, anchor, answer_type(tokens))


# ---- relations ------------------------------------------------------------------------------
@dataclass
class RelationCues:
    name: str
    words: list[str]
    verbatim: list[str]  # forms that, written in the question, name this relation alone
    reading: Reading
    phrase_text: str
    person: bool
    subject_type: str
    by_verb: bool  # "directed_by": the active voice ("who directed <e>") reverses the order
    opaque: bool  # a code ("causes_12"): no English reading, the question's word order decides

    @classmethod
    def of(cls, name: str, label: str | None) -> RelationCues:
        phrase = phrase_for(name, label)
        forms = {name.lower(), humanize(name)}
        if label:
            forms |= {label.lower(), humanize(label)}
        tail = name.rstrip("/").rsplit("/", 1)[-1]
        if tail != name:
            forms.add(humanize(tail))
        # "directed_by", "/film/film/directed_by": an "r by" verb whatever the reading says
        reading = Reading.VERB if phrase.text.split()[-1:] == ["by"] else phrase.reading
        by_verb = reading == Reading.VERB and phrase.text.split()[-1:] == ["by"]
        # a Freebase-style path names its relation in the last segment; the first ones are
        # the subject's type ("/film/film/genre": "film" is what has the genre, not a cue)
        words = relation_words(tail if tail != name else name, label)
        opaque = any(w.isdigit() for w in words) and not label
        return cls(name, words, sorted(f for f in forms if f), reading, phrase.text, phrase.person,
                   phrase.subject_type, by_verb, opaque)

    def end(self, inverse: bool) -> tuple[bool | None, list[str]]:
        """(are the step's end entities people, their noun's words) under the reading."""
        if self.reading == Reading.NOUN_OF:
            kin = self.phrase_text in KINSHIP
            return (self.person, self.phrase_text.split()) if inverse else (True if kin else None, [])
        if self.reading == Reading.ATTRIBUTE:
            if not inverse:
                return self.person, self.phrase_text.split()
            return (is_person(self.subject_type) if self.subject_type else None), self.subject_type.split()
        return (self.person if not inverse and self.by_verb else None), []


def form_written(question: QuestionCues, form: str, taken: frozenset[int]) -> bool:
    """Whether ``form`` (a relation's name or label) is written in the question, on words no
    earlier step took."""
    words = _TOKEN.findall(form.lower())
    tokens, n = question.tokens, len(words)
    return n > 0 and any(tokens[i:i + n] == words and not taken & set(range(i, i + n))
                         for i in range(len(tokens) - n + 1))


_BETWEEN_NOUN_AND_TOPIC = word_set("is are was were of does do did has have 's")


def expected_direction(question: QuestionCues, cues: RelationCues, used: Iterable[int]) -> bool | None:
    """Whether the question asks for the relation's subject (True: follow it backwards from
    the topic) or its object (False), from the word order around the words naming it; None
    without a cue (no named word, or no topic position)."""
    positions = sorted(used)
    if not positions or question.anchor is None:
        return None
    tokens, anchor = question.tokens, question.anchor
    cue, last = positions[0], positions[-1]
    topic_first = anchor < cue
    whose = "whose" in tokens[max(0, cue - 2):cue]
    after_cue = tokens[last + 1] if last + 1 < len(tokens) else ""
    possessive = tokens[anchor + 1:anchor + 2] == ["s"]  # "<e>'s" tokenises as <e>, s
    of_topic = not topic_first and "of" in tokens[last + 1:anchor]
    passive = after_cue == "by" and tokens[last].endswith("ed")
    if cues.reading == Reading.NOUN_OF and not cues.opaque:  # h is the r of t
        # "whose aunt is <e>", "<e> is the aunt of whom": <e> is the subject (forwards);
        # "the aunt of <e>", "<e>'s aunt": the answer is (backwards)
        return not (whose or (topic_first and not possessive))
    if cues.reading == Reading.ATTRIBUTE and not cues.opaque:  # t is the r of h
        if whose or (topic_first and any(t in ("as", "with") for t in tokens[anchor:cue])):
            forward = False  # "whose genre is <e>", "which films have <e> as genre"
        elif topic_first or possessive or of_topic:
            forward = True  # "<e>'s genre", "the genre of <e>", "what does <e> affect"
        else:  # "what genre is <e>" (a copula between), "what affects <e>" (a verb: <e> its object)
            forward = any(t in _BETWEEN_NOUN_AND_TOPIC for t in tokens[last + 1:anchor])
        if passive:  # "what is affected by <e>"
            forward = not forward
        return not forward
    # a verb (h r t) or an opaque code, read in the question's order: the active voice of an
    # "r by" relation ("who directed <e>") reverses it; "the r of <e>" reads as <e>'s r
    if whose or (topic_first and "as" in tokens[anchor:cue]):
        return True  # "whose r is <e>", "what has <e> as its r"
    forward = topic_first or of_topic
    if cues.by_verb and after_cue != "by" and not of_topic:
        forward = not forward
    elif cues.by_verb and of_topic:  # "the director of <e>": <e> directed_by ?
        forward = True
    return not forward
