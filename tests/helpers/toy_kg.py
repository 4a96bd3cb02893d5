"""The toy movie KG the answering tests share (hand-made, small enough to check by eye)."""

from __future__ import annotations

from kgengine.model import Triple

T = Triple
MOVIES = [
    T("Inception", "directed_by", "Christopher Nolan"),
    T("Inception", "written_by", "Christopher Nolan"),
    T("Inception", "starred_actors", "Tom Hardy"),
    T("Inception", "release_year", "2010"),
    T("Inception", "has_genre", "Science Fiction"),
    T("Interstellar", "directed_by", "Christopher Nolan"),
    T("Interstellar", "has_genre", "Science Fiction"),
    T("Dunkirk", "directed_by", "Christopher Nolan"),
    T("Dunkirk", "has_genre", "War"),
    T("Warrior", "starred_actors", "Tom Hardy"),
    T("Warrior", "has_genre", "Drama"),
    T("The Town", "release_year", "2010"),
    T("The Town", "directed_by", "Ben Affleck"),
]
ENTITIES = {e for t in MOVIES for e in (t.head, t.tail)}
