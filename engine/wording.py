"""How a relation reads in English, from its name or label: for BRINK's deterministic question
templates (``kgengine brink build``) and for zero-shot relation linking (which side of a
relation a question asks for, what kind of thing an answer is).

A triple ``r(h, t)`` reads one of three ways, and the wording follows it:

- *noun-of* (Family, BRINK's ``aunt_of`` names): h is the r of t —
  "Who is the aunt of 72?" (topic t) / "Whose aunt is 7?" (topic h);
- *attribute* (Freebase paths, Wikidata noun labels, ``has_genre``): t is the r of h —
  "What is the nationality of X?" (topic h) / "Who has X as their nationality?" (topic t);
- *verb* (labels ending in a preposition: ``located in``, ``directed_by``): h r t —
  "What is X located in?" (topic h) / "What is located in X?" (topic t).

The question names the topic and no other entity; the build drops the rare item whose
answer's name is still in it (a text label among the relation's words or inside the topic's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


def word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


class Reading(StrEnum):
    NOUN_OF = "noun-of"
    ATTRIBUTE = "attribute"
    VERB = "verb"


# Family (Neural-LP/DRUM) and other kinship vocabularies: r(h,t) means "h is the r of t"
KINSHIP = word_set(
    "aunt uncle brother sister son daughter father mother husband wife nephew niece cousin "
    "grandfather grandmother grandson granddaughter grandparent grandchild parent child "
    "sibling spouse"
)
# words that make the answer a person ("Who ...")
PERSON_WORDS = KINSHIP | word_set(
    "person people actor actress nominee winner director producer writer author composer "
    "artist musician singer player athlete coach spouse partner student graduate member "
    "founder leader politician president employee celebrity friend lyricist editor "
    "cinematographer performer character"
)
PREPOSITIONS = word_set("of in at by to for with on from as into about")

# Common Wikidata properties (Wikidata5m's relations are property ids), worded for
# questions: where the official label reads badly in a template it is shortened or
# replaced by an equivalent ("P131": "located in" for "located in the administrative
# territorial entity"). Any other id falls back to a generic wording unless
# --relation-labels supplies a label.
WIKIDATA_LABELS: dict[str, str] = {
    "P17": "country", "P19": "place of birth", "P20": "place of death", "P21": "sex or gender",
    "P22": "father", "P25": "mother", "P26": "spouse", "P27": "country of citizenship",
    "P30": "continent", "P31": "instance of", "P35": "head of state", "P36": "capital",
    "P37": "official language", "P39": "position held", "P40": "child", "P47": "neighbour of",
    "P50": "author", "P54": "sports team", "P57": "director", "P58": "screenwriter",
    "P69": "educated at", "P86": "composer", "P101": "field of work", "P102": "political party",
    "P103": "native language", "P106": "occupation", "P108": "employer", "P118": "league",
    "P127": "owned by", "P131": "located in", "P136": "genre", "P140": "religion",
    "P150": "contains", "P155": "preceded by", "P156": "followed by",
    "P159": "headquarters location", "P161": "cast member", "P162": "producer",
    "P166": "award received", "P172": "ethnic group", "P175": "performer",
    "P176": "manufacturer", "P178": "developer", "P206": "located next to",
    "P264": "record label", "P272": "production company", "P276": "location",
    "P279": "subclass of", "P361": "part of", "P364": "original language",
    "P407": "language", "P413": "position played", "P421": "time zone",
    "P449": "original broadcaster", "P463": "member of", "P495": "country of origin",
    "P527": "has part", "P530": "diplomatic relation", "P551": "residence", "P641": "sport",
    "P710": "participant", "P740": "location of formation", "P749": "parent organization",
    "P793": "significant event", "P800": "notable work", "P937": "work location",
    "P1303": "instrument", "P1344": "participant in", "P1376": "capital of",
    "P1412": "language spoken", "P3373": "sibling",
}
# "X <verb> by Y" relations whose answers are people: "Who is Titanic directed by?"
CREATOR_VERBS = word_set("directed written produced composed starred edited founded created "
                       "painted designed performed narrated illustrated")
# relation words that are verbs, not nouns: word -> base form
VERBS = {"contains": "contain"}
_WIKIDATA_ID = re.compile(r"P\d+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@dataclass(frozen=True)
class Phrase:
    reading: Reading
    text: str  # the noun, or the verb phrase for Reading.VERB
    person: bool = False  # answers are people: "Who"
    subject_type: str = ""  # Freebase: the head's type, "person" in /people/person/...
    mediator: str = ""  # Freebase CVT: "marriage" in /people/person/spouse_s./people/marriage/...
    verb: str = ""  # a verb relation's base form ("contain" for contains)


def humanize(name: str) -> str:
    name = _CAMEL.sub(" ", name)
    return " ".join(re.sub(r"[_\-./]+", " ", name).split()).lower()


def is_person(phrase: str) -> bool:
    """By the phrase's head noun: "award nominee" and "starred actors" are people, "sister
    city" and "type of union" are not."""
    words = phrase.split(" of ")[0].split()
    head = words[-1] if words else ""
    return head in PERSON_WORDS or (head.endswith("s") and head[:-1] in PERSON_WORDS)


def _from_label(label: str) -> Phrase:
    text = humanize(label) if "_" in label or label.isidentifier() else " ".join(label.lower().split())
    words = text.split()
    if len(words) > 1 and words[0] == "is":  # is_part_of, is_a
        rest = " ".join(words[1:])
        return _from_label("instance of" if rest in ("a", "an") else rest)
    if len(words) > 1 and words[0] in PREPOSITIONS:  # in_language: the language
        return _from_label(" ".join(words[1:]))
    if text in VERBS:
        return Phrase(Reading.ATTRIBUTE, text, verb=VERBS[text])
    if len(words) > 1 and words[0] == "has":
        noun = " ".join(words[1:])
        return Phrase(Reading.ATTRIBUTE, noun, is_person(noun))
    if len(words) > 1 and words[-1] == "of":
        noun = " ".join(words[:-1])
        return Phrase(Reading.NOUN_OF, noun, is_person(noun))
    if len(words) > 1 and words[-1] in PREPOSITIONS:
        first = words[0]
        if first.endswith("s") and not first.endswith("ss"):  # works for -> does X work for
            return Phrase(Reading.VERB, text, verb=" ".join([first[:-1], *words[1:]]))
        return Phrase(Reading.VERB, text, words[-1] == "by" and first in CREATOR_VERBS)
    return Phrase(Reading.ATTRIBUTE, text, is_person(text))


def _freebase(relation: str) -> Phrase:
    paths = [p.strip("/").split("/") for p in relation.split("./")]
    first, last = paths[0], paths[-1]
    subject_type = humanize(first[1]) if len(first) >= 2 else ""
    segment = last[-1]
    if segment in VERBS:
        return Phrase(Reading.ATTRIBUTE, segment, subject_type=subject_type, verb=VERBS[segment])
    noun = humanize(re.sub(r"_s$", "", segment))
    mediator = humanize(last[-2]) if len(paths) > 1 and len(last) >= 2 else ""
    return Phrase(Reading.ATTRIBUTE, noun, is_person(noun), subject_type, mediator)


def phrase_for(relation: str, label: str | None = None) -> Phrase:
    """How to word ``relation``; ``label`` (e.g. a Wikidata property label) wins over the
    name and is read with Wikidata's convention (``father``: t is the father of h)."""
    if label:
        return _from_label(label)
    if relation.startswith("/") and relation.count("/") >= 3:
        return _freebase(relation)
    if _WIKIDATA_ID.fullmatch(relation):
        return _from_label(WIKIDATA_LABELS.get(relation, f"property {relation}"))
    text = humanize(relation)
    if text in KINSHIP:
        return Phrase(Reading.NOUN_OF, text, person=True)
    return _from_label(relation)


def _article(noun: str) -> str:
    return ("an " if noun[:1] in "aeiou" else "a ") + noun


def _plural(noun: str) -> bool:
    last = noun.split()[-1] if noun else ""
    return last.endswith("s") and not last.endswith(("ss", "us", "is"))


def template_question(relation: str, direction: str, topic: str,
                      label: str | None = None) -> str:
    """The question for ``relation`` with ``topic`` given, asking for the other side."""
    p = phrase_for(relation, label)
    wh = "Who" if p.person else "What"
    forward = direction == "forward"  # topic is the head (QuestionDirection.FORWARD)
    if p.reading == Reading.NOUN_OF:
        if p.text in KINSHIP:
            return f"Whose {p.text} is {topic}?" if forward else f"Who is the {p.text} of {topic}?"
        noun = _article(p.text)
        return f"What is {topic} {noun} of?" if forward else f"{wh} is {noun} of {topic}?"
    if p.reading == Reading.VERB:
        if p.verb:
            return f"What does {topic} {p.verb}?" if forward else f"{wh} {p.text} {topic}?"
        return f"{wh} is {topic} {p.text}?" if forward else f"What is {p.text} {topic}?"
    if p.verb:
        return f"What does {topic} {p.verb}?" if forward else f"What {p.text} {topic}?"
    noun = f"{p.text} in {_article(p.mediator)}" if p.mediator else p.text
    plural = _plural(p.text)
    if forward:
        return f"{wh} {'are' if plural and not p.mediator else 'is'} the {noun} of {topic}?"
    person_subject = is_person(p.subject_type) if p.subject_type else p.person
    asker = "Who" if person_subject else f"Which {p.subject_type}" if p.subject_type else "What"
    owner = "their" if person_subject else "its"
    if p.subject_type or not p.person:
        relation_words = f"among {owner} {noun}" if plural else f"as {owner} {noun}"
        return f"{asker} has {topic} {relation_words}?"
    return f"Whose {noun} {'include' if plural else 'is'} {topic}?"
