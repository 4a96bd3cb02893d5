"""Mapping between dataset identifiers and RDF IRIs (lossless, so ids round-trip)."""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

BASE = "http://kgengine.org/"
ENTITY_NS = BASE + "e/"
RELATION_NS = BASE + "r/"
GRAPH_NS = BASE + "graph/"
META_GRAPH = BASE + "meta"
VOCAB_NS = BASE + "vocab#"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"

# ids made only of these characters are used verbatim (the common case: 143, Q42, P31)
_SAFE = re.compile(r"[A-Za-z0-9_.~-]+")


def encode_id(value: str) -> str:
    """Percent-encode a dataset id into an IRI path segment (fast path for plain ids)."""
    if _SAFE.fullmatch(value):
        return value
    return quote(value, safe="")


def entity_iri(entity_id: str) -> str:
    return ENTITY_NS + encode_id(entity_id)


def relation_iri(relation: str) -> str:
    return RELATION_NS + encode_id(relation)


def graph_iri(name: str) -> str:
    return GRAPH_NS + name


def entities_graph_iri(name: str) -> str:
    """Companion graph holding labels and private ids, so the data graph stays pure facts."""
    return GRAPH_NS + name + "/entities"


def decode_iri(iri: str) -> str:
    """Dataset id or relation name from one of our IRIs; foreign IRIs come back unchanged."""
    for ns in (ENTITY_NS, RELATION_NS):
        if iri.startswith(ns):
            return unquote(iri[len(ns):])
    return iri
