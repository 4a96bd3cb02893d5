"""Triples as text for embedding selection and prompts (KG-RAG paper §3.5.2): the string
``(subject, relation, object)``, with ``_`` read as a space in relation names, and each entity
in the chosen surface form: its private id (BRINK §5.4), its dataset id, or its text label.

Pure: the id -> label / private id mappings are given (``SurfaceForms.from_store`` reads them
once from a store)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kgengine.model import Triple
from kgengine.store import KGStore
from kgengine.surface import Surface, SurfaceFormError, parse_surface


def relation_text(relation: str) -> str:
    """A relation name as words: ``acted_in`` -> ``acted in``."""
    return relation.replace("_", " ")


@dataclass(frozen=True)
class SurfaceForms:
    """Entity id -> the text written for it in one surface form.

    ``text`` falls back to the id for an entity without a label, and writes a relation by
    its text label where the loader had one (FB15k-237's relation2text), else as its name
    with ``_`` as a space. ``private`` has no fallback: a private-id prompt must never show a
    dataset id, so a missing private id is an error (every entity of a loaded graph has one)."""

    kind: Surface = Surface.DATASET
    labels: Mapping[str, str] = field(default_factory=dict)
    private_ids: Mapping[str, str] = field(default_factory=dict)
    relation_labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_store(cls, store: KGStore, graph: str, kind: str | Surface = Surface.DATASET) -> SurfaceForms:
        """Reads only the mapping the surface form needs (none for dataset ids)."""
        surface = parse_surface(kind)
        if surface == Surface.TEXT:
            return cls(surface, labels=store.labels(graph), relation_labels=store.relation_labels(graph))
        if surface == Surface.PRIVATE:
            return cls(surface, private_ids=store.private_ids(graph))
        return cls(surface)

    def entity(self, entity: str) -> str:
        if self.kind == Surface.TEXT:
            return self.labels.get(entity, entity)
        if self.kind == Surface.PRIVATE:
            try:
                return self.private_ids[entity]
            except KeyError:
                raise SurfaceFormError(f"entity {entity!r} has no private id in this graph") from None
        return entity

    def relation(self, relation: str) -> str:
        if self.kind == Surface.TEXT and relation in self.relation_labels:
            return self.relation_labels[relation]
        return relation_text(relation)


DATASET_IDS = SurfaceForms()


def verbalise(triple: Triple, surface: SurfaceForms = DATASET_IDS) -> str:
    """``Triple("Inception", "directed_by", "Christopher Nolan")`` ->
    ``(Inception, directed by, Christopher Nolan)``."""
    head, relation, tail = triple
    return f"({surface.entity(head)}, {surface.relation(relation)}, {surface.entity(tail)})"


def verbalise_all(triples: Iterable[Triple], surface: SurfaceForms = DATASET_IDS) -> list[str]:
    return [verbalise(t, surface) for t in triples]
