"""Toy KGs for the answering tests, written as text (small enough to check by eye), and the
parser the test modules use for their own."""

from __future__ import annotations

from kgengine.model import Triple


def triples(text: str) -> list[Triple]:
    """Triples written one a line as ``head | relation | tail`` (blank lines skipped)."""
    out = []
    for line in text.strip().splitlines():
        if line.strip():
            head, relation, tail = (part.strip() for part in line.split("|"))
            out.append(Triple(head, relation, tail))
    return out


# the movie KG of the LLM-method and method-contract tests
MOVIES = triples("""
Inception | directed_by | Christopher Nolan
Inception | written_by | Christopher Nolan
Inception | starred_actors | Tom Hardy
Inception | release_year | 2010
Inception | has_genre | Science Fiction
Interstellar | directed_by | Christopher Nolan
Interstellar | has_genre | Science Fiction
Dunkirk | directed_by | Christopher Nolan
Dunkirk | has_genre | War
Warrior | starred_actors | Tom Hardy
Warrior | has_genre | Drama
The Town | release_year | 2010
The Town | directed_by | Ben Affleck
""")
ENTITIES = {e for t in MOVIES for e in (t.head, t.tail)}
