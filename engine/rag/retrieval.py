"""Candidate triple retrieval (KG-RAG paper §3.5.2): every triple within N hops (1-3) of the
topic entity, breadth first, following outgoing, incoming or both kinds of edges, through the
named one-hop queries (``edges_out`` / ``edges_in`` and their hub-capped twins
``rag_edges_out_capped`` / ``rag_edges_in_capped``), so it runs on every backend.

Hub cap policy (``hub_cap``): the topic entity is always expanded in full, because its own
triples are what the question asks about. Every other entity reached is expanded along a
direction only if it has at most ``hub_cap`` triples in that direction (its out-degree when
following outgoing edges, its in-degree when following incoming ones); otherwise it is a
leaf: the triple that reached it is kept, none of its other triples are fetched. On MetaQA
this stops a walk at genres, years, languages and popular tags (``Drama`` has 4,030
incoming ``has_genre`` triples) while actors, directors, writers and movies (degree < 100)
are expanded. ``hub_cap=None`` turns the cap off (the same triples as
``store.neighbourhood``).

Order: hop by hop (all triples first met at hop 1, then hop 2, ...), sorted within a hop
by (head, relation, tail), so both backends give the same list. ``max_triples`` bounds the
result: the walk stops after the hop that reaches it, and that hop is cut in this order."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kgengine.errors import KGEngineError
from kgengine.model import Direction, Entity, Question, Triple
from kgengine.rag.base import DEFAULT_HOPS
from kgengine.store import MAX_HOPS, KGStore, walk

DEFAULT_HUB_CAP = 100  # MetaQA: 100 entities of 43k exceed it, all genres/years/languages/tags
FRONTIER_BATCH = 512  # entities per one-hop query (a VALUES / UNWIND list)


class RetrievalError(KGEngineError):
    pass


def _check(hops: int, hub_cap: int | None, max_triples: int | None) -> None:
    if not 1 <= hops <= MAX_HOPS:
        raise RetrievalError(f"hops must be between 1 and {MAX_HOPS}, got {hops}")
    if hub_cap is not None and hub_cap < 1:
        raise RetrievalError(f"hub_cap must be a positive number of triples (or None), got {hub_cap}")
    if max_triples is not None and max_triples < 1:
        raise RetrievalError(f"max_triples must be positive (or None), got {max_triples}")


@dataclass
class KHopRetriever:
    """``Retriever``: the triples within ``hops`` hops of the topic entity (see the module
    docstring for the hub cap policy and the order)."""

    store: KGStore
    graph: str
    hops: int = DEFAULT_HOPS
    direction: Direction | str = Direction.BOTH
    hub_cap: int | None = DEFAULT_HUB_CAP
    max_triples: int | None = None

    def __post_init__(self) -> None:
        _check(self.hops, self.hub_cap, self.max_triples)
        try:
            self.direction = Direction(self.direction)
        except ValueError:
            raise RetrievalError(f"direction must be out, in or both, got {self.direction!r}") from None

    def search(self, question: Question, entity: str) -> list[Triple]:
        """The candidate triples around ``entity`` (the question text plays no part)."""
        return [t for layer in self.search_by_hop(entity) for t in layer]

    def search_by_hop(self, entity: str) -> list[list[Triple]]:
        """One list per hop (the paper's output shape): the triples first met at that hop;
        the list ends at the first hop that meets nothing new."""
        by_hop: list[list[Triple]] = []
        cap = self.max_triples

        def enough(met: int) -> bool:  # the hop that reached max_triples is the last one queried
            return cap is not None and met >= cap

        for hop, triple in walk(self._expand, entity, self.hops, Direction(self.direction), FRONTIER_BATCH,
                                enough):
            if hop == len(by_hop):
                by_hop.append([])
            by_hop[hop].append(triple)
        layers: list[list[Triple]] = []
        total = 0
        for met in by_hop:
            layer = sorted(met)
            if self.max_triples is not None and total + len(layer) >= self.max_triples:
                layers.append(layer[: self.max_triples - total])
                break
            layers.append(layer)
            total += len(layer)
        return layers

    def _expand(self, frontier: Sequence[str], step: Direction, hop: int) -> Iterator[Triple]:
        """One hop of :func:`kgengine.store.walk`; entities past the topic obey the hub cap."""
        var = "h" if step == Direction.OUT else "t"
        name = "edges_out" if step == Direction.OUT else "edges_in"
        params: dict[str, Any] = {}
        if hop > 0 and self.hub_cap is not None:
            name, params = f"rag_{name}_capped", {"cap": self.hub_cap}
        for row in self.store.run(name, self.graph, **{var: [Entity(e) for e in frontier]}, **params):
            yield Triple(row["h"], row["r"], row["t"])
