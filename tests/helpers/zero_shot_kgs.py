"""Small KGs for zero-shot relation linking, in four naming styles (opaque codes that share a
word, readable names, CamelCase, Freebase-style ``/a/b/c`` paths), each with questions
written by hand in several phrasings for both directions of each relation — none of them
kgengine's own BRINK templates. The expected answers are computed from the triples (every
answer is one direct triple away: the KG is complete)."""

from __future__ import annotations

from dataclasses import dataclass

from kgengine.model import Triple

from helpers.toy_kg import triples


@dataclass(frozen=True)
class ZeroShotKG:
    name: str
    triples: list[Triple]
    # relation -> (phrasings asking for the tail given the head, phrasings asking for the head)
    phrasings: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]

    def questions(self) -> list[tuple[str, str, str, frozenset[str]]]:
        """(question, topic, relation path as written, gold) for every phrasing and topic."""
        out = []
        for relation, (forward, inverse) in self.phrasings.items():
            edges = [t for t in self.triples if t.relation == relation]
            for text in forward:
                for head in sorted({t.head for t in edges}):
                    gold = frozenset(t.tail for t in edges if t.head == head)
                    out.append((text.format(e=head), head, relation, gold))
            for text in inverse:
                for tail in sorted({t.tail for t in edges}):
                    gold = frozenset(t.head for t in edges if t.tail == tail)
                    out.append((text.format(e=tail), tail, "^" + relation, gold))
        return out


# codes: a word plus a number, two of them sharing the word "causes"
CODES = ZeroShotKG("codes", triples("""
Gene1 | causes_12 | Disease1
Gene1 | causes_12 | Disease2
Gene2 | causes_12 | Disease2
Gene1 | causes_7 | Symptom1
Gene3 | causes_7 | Symptom2
Disease1 | causes_7 | Symptom1
Disease2 | part_3 | Organ1
Disease1 | part_3 | Organ2
Drug1 | treats_4 | Disease1
Drug2 | treats_4 | Disease2
Drug2 | treats_4 | Disease1
"""), {
    "causes_12": (("What does {e} causes_12?", "Which entities does {e} causes_12?",
                   "{e} causes_12 which entities?"),
                  ("What causes_12 {e}?", "Which entity causes_12 {e}?")),
    "causes_7": (("What does {e} causes_7?", "{e} causes_7 what?"),
                 ("What causes_7 {e}?", "Which entities causes_7 {e}?")),
    "treats_4": (("What does {e} treats_4?",), ("What treats_4 {e}?", "Which drug treats_4 {e}?")),
})

READABLE = ZeroShotKG("readable", triples("""
Smoking | Affects | Lungs
Smoking | Affects | Heart
Stress | Affects | Heart
Sugar | Affects | Teeth
Redness | Property_of | Apple
Sweetness | Property_of | Apple
Sweetness | Property_of | Sugar
Hardness | Property_of | Diamond
Apple | Located_in | Orchard
Diamond | Located_in | Mine
"""), {
    "Affects": (("What does {e} affect?", "Which organs are affected by {e}?", "What is affected by {e}?"),
                ("What affects {e}?", "{e} is affected by what?", "Which things affect {e}?")),
    "Property_of": (("{e} is a property of what?", "What is {e} a property of?"),
                    ("What is a property of {e}?", "Which properties does {e} have?",
                     "Name a property of {e}.")),
    "Located_in": (("Where is {e} located?", "{e} is located in which place?"),
                   ("What is located in {e}?",)),
})

CAMEL = ZeroShotKG("camel", triples("""
Dune | hasAuthor | Frank Herbert
Emma | hasAuthor | Jane Austen
Persuasion | hasAuthor | Jane Austen
Frank Herbert | bornIn | Tacoma
Jane Austen | bornIn | Steventon
Frank Herbert | birthYear | 1920
Jane Austen | birthYear | 1775
Frank Herbert | memberOf | Writers Guild
Jane Austen | memberOf | Writers Guild
Frank Herbert | worksFor | Press Democrat
"""), {
    "hasAuthor": (("Who is the author of {e}?", "What is the author of {e}?", "{e}'s author is who?"),
                  ("Which books have {e} as their author?", "What has {e} as author?")),
    "bornIn": (("Where was {e} born?", "In which town was {e} born?"),
               ("Who was born in {e}?", "Which people were born in {e}?")),
    "birthYear": (("In which year was {e} born?", "What is the birth year of {e}?"),
                  ("Who was born in the year {e}?",)),
    "memberOf": (("{e} is a member of what?", "Which group is {e} a member of?"),
                 ("Who is a member of {e}?", "Which people are members of {e}?")),
    "worksFor": (("Who does {e} work for?", "Which company does {e} work for?"),
                 ("Who works for {e}?", "Which people work for {e}?")),
})

FREEBASE = ZeroShotKG("freebase", triples("""
Alien | /film/film/genre | Horror
Alien | /film/film/genre | Science fiction
Heat | /film/film/genre | Crime
Alien | /film/film/directed_by | Ridley Scott
Gladiator | /film/film/directed_by | Ridley Scott
Heat | /film/film/directed_by | Michael Mann
Ridley Scott | /people/person/nationality | United Kingdom
Michael Mann | /people/person/nationality | United States
United States | /location/location/contains | Chicago
United Kingdom | /location/location/contains | London
"""), {
    "/film/film/genre": (("What is the genre of {e}?", "What genre is {e}?",
                          "Which genres does {e} belong to?"),
                         ("Which films have {e} as their genre?", "Which films are in the genre {e}?")),
    "/film/film/directed_by": (("Who directed {e}?", "Who is the director of {e}?",
                                "{e} was directed by whom?"),
                               ("Which films were directed by {e}?", "What did {e} direct?")),
    "/people/person/nationality": (("What is the nationality of {e}?", "What nationality does {e} have?"),
                                   ("Who has {e} as their nationality?",)),
    "/location/location/contains": (("What does {e} contain?", "Which places does {e} contain?"),
                                    ("What contains {e}?",)),
})

ZERO_SHOT_KGS = (CODES, READABLE, CAMEL, FREEBASE)
