"""Verbalised triples (kgengine.rag.verbalise): the paper's "(subject, relation, object)"
form with `_` -> space, in each surface form; the mappings read from a real store."""

from __future__ import annotations

import pytest
from kgengine.model import Triple
from kgengine.oxigraph.store import OxigraphStore
from kgengine.rag.verbalise import (
    Surface,
    SurfaceFormError,
    SurfaceForms,
    parse_surface,
    verbalise,
    verbalise_all,
)

INCEPTION = Triple("Inception", "directed_by", "Christopher_Nolan")


def test_dataset_ids_and_underscores_in_relations_only() -> None:
    assert verbalise(INCEPTION) == "(Inception, directed by, Christopher_Nolan)"
    assert verbalise(Triple("/m/0abc", "/film/film/genre", "/m/0x")) == "(/m/0abc, /film/film/genre, /m/0x)"
    assert verbalise(Triple("a", "has__many_parts_", "b")) == "(a, has  many parts , b)"


def test_text_labels_fall_back_to_the_id() -> None:
    surface = SurfaceForms(Surface.TEXT, labels={"Christopher_Nolan": "Christopher Nolan"},
                           relation_labels={"release_year": "year of release"})
    assert verbalise(INCEPTION, surface) == "(Inception, directed by, Christopher Nolan)"
    released = Triple("Inception", "release_year", "2010")
    assert verbalise(released, surface) == "(Inception, year of release, 2010)"


def test_private_ids_never_fall_back_to_a_dataset_id() -> None:
    surface = SurfaceForms(Surface.PRIVATE, private_ids={"Inception": "e07", "Christopher_Nolan": "e31"})
    assert verbalise(INCEPTION, surface) == "(e07, directed by, e31)"
    with pytest.raises(SurfaceFormError, match="'Tom Hardy' has no private id"):
        verbalise(Triple("Inception", "starred_actors", "Tom Hardy"), surface)


def test_parse_surface() -> None:
    assert [parse_surface(s) for s in ("private", "dataset", "text")] == list(Surface)
    with pytest.raises(SurfaceFormError, match="use private|dataset|text"):
        parse_surface("labels")


def test_surface_forms_from_a_store(oxigraph_store: OxigraphStore) -> None:
    triples = [INCEPTION, Triple("Inception", "starred_actors", "Tom Hardy")]
    oxigraph_store.load("g", triples, dataset="tsv", labels=[("Christopher_Nolan", "Christopher Nolan")],
                        seed=3)
    private = oxigraph_store.private_ids("g")
    text = SurfaceForms.from_store(oxigraph_store, "g", "text")
    assert verbalise_all(triples, text) == ["(Inception, directed by, Christopher Nolan)",
                                            "(Inception, starred actors, Tom Hardy)"]
    hidden = verbalise_all(triples, SurfaceForms.from_store(oxigraph_store, "g", Surface.PRIVATE))
    assert hidden == [f"({private['Inception']}, directed by, {private['Christopher_Nolan']})",
                      f"({private['Inception']}, starred actors, {private['Tom Hardy']})"]
    assert len(set(private.values())) == 3 and not any("Nolan" in line for line in hidden)
    dataset = SurfaceForms.from_store(oxigraph_store, "g", "dataset")
    assert verbalise(INCEPTION, dataset) == verbalise(INCEPTION)
