"""Plain data types shared by loaders, stores, mining, BRINK and RAG (no I/O here)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from kgengine.errors import InvalidParameterError


class Triple(NamedTuple):
    """A KG fact as dataset identifiers: ``relation(head, tail)``."""

    head: str
    relation: str
    tail: str


@dataclass(frozen=True)
class Question:
    """What an answerer may see of a question record: its text and topic entity (no other
    field on purpose: gold answers and a BRINK record's removed triple never reach it)."""

    text: str
    topic_entity: str | None = None  # the entity id in the answered graph, when known


class Direction(StrEnum):
    """Which edges k-hop retrieval follows from the seed entity."""

    OUT = "out"
    IN = "in"
    BOTH = "both"


class Entity(str):
    """A query parameter that names an entity (dataset id), not a literal string."""

    __slots__ = ()


class Relation(str):
    """A query parameter that names a relation, not a literal string."""

    __slots__ = ()


GRAPH_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def check_graph_name(name: str) -> str:
    """Graph names end up in IRIs, Neo4j properties and file names: keep them simple."""
    if not GRAPH_NAME_RE.fullmatch(name):
        raise InvalidParameterError(
            f"invalid graph name {name!r}: use letters, digits, '_', '.', '-' "
            "(at most 128 characters, starting with a letter or digit)"
        )
    return name


@dataclass(frozen=True)
class GraphInfo:
    """What the store knows about one named graph (one dataset variant)."""

    name: str
    dataset: str
    triples: int
    status: str  # "complete" or "loading" (an interrupted load)
    source: str = ""
    splits: tuple[str, ...] = ()
    loaded_at: str = ""

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    def incomplete_warning(self) -> str:
        """What every reading command prints about a graph marked 'loading'."""
        return (f"graph {self.name!r} is incomplete (its load was interrupted or is still running): "
                f"results are those of a partial graph; reload it with `kgengine load … --graph {self.name}`")


@dataclass(frozen=True)
class GraphStats:
    """Counts and degree statistics of one graph."""

    triples: int
    entities: int
    relations: int
    per_relation: dict[str, int] = field(default_factory=dict)
    # degree (in + out, counting each triple once per endpoint) -> number of entities
    degree_histogram: dict[int, int] = field(default_factory=dict)

    def degree_summary(self) -> dict[str, float]:
        """Mean / median / max degree from the histogram (pure arithmetic)."""
        total = sum(self.degree_histogram.values())
        if total == 0:
            return {"mean": 0.0, "median": 0.0, "max": 0.0}
        mean = sum(d * n for d, n in self.degree_histogram.items()) / total
        seen, median = 0, 0
        for degree in sorted(self.degree_histogram):
            seen += self.degree_histogram[degree]
            if seen * 2 >= total:
                median = degree
                break
        return {"mean": mean, "median": float(median), "max": float(max(self.degree_histogram))}


@dataclass(frozen=True)
class QueryResult:
    """A user's query result (``KGStore.query``), the same shape on every backend: a
    boolean (SPARQL ASK), or named columns and rows of plain values (str for IRIs and
    literals, their lexical form on Oxigraph; numbers, lists and maps as Cypher returns
    them; None where unbound). CONSTRUCT / DESCRIBE give subject, predicate, object rows,
    or, when ``KGStore.user_query`` was asked for an RDF syntax, the serialised triples in
    ``document`` (bytes in that syntax)."""

    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    boolean: bool | None = None
    document: bytes | None = None
