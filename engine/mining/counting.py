"""What the search asks of a counting engine, in a module of its own: the search
(``search``) and the engines (``matrix``, ``query_engine``) both import it, and neither
imports the other at module level (the search picks an engine by name, lazily)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kgengine.mining.measures import RelationStats
from kgengine.mining.rules import Atom

FRESH = "?_fresh"  # placeholder for the fresh variable of a dangling atom in count requests
ENGINES = ("matrix", "query")


class CountingEngine(Protocol):
    """What the search asks of a counting engine (``matrix`` or ``query``)."""

    name: str

    def relation_stats(self) -> dict[str, RelationStats]: ...

    def refinement_counts(
        self, atoms: Sequence[Atom], shapes: Sequence[tuple[str, str]], min_support: int = 0
    ) -> list[dict[str, int]]:
        """Per shape (subject, object) of a new atom, FRESH marking a new variable: relation ->
        support (distinct head bindings) of ``atoms`` (head first) plus that atom; relations
        below ``min_support`` may be left out."""
        ...

    def body_size(self, atoms: Sequence[Atom], cap: int | None = None) -> int: ...

    def pca_body_size(self, atoms: Sequence[Atom], subject_side: bool, cap: int | None = None) -> int: ...

    def constant_counts(
        self, atoms: Sequence[Atom], variable: str, join: str, min_support: int = 1
    ) -> dict[str, int]: ...
