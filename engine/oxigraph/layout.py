"""Where an Oxigraph store keeps things: the directory on disk, and the named graphs of each graph.

Data model: entity = IRI under ``terms.ENTITY_NS``, relation = predicate IRI under
``terms.RELATION_NS``; each graph variant is a named graph holding only KG facts, with a
companion graph ``<graph>/entities`` for ``rdfs:label`` and private ids, and load metadata
in ``terms.META_GRAPH`` (docs/data-model.md)."""

from __future__ import annotations

from pathlib import Path

from kgengine import terms
from kgengine.errors import StoreError

# A graph's two slots of named graphs (facts, labels): "" is the graph's own IRI (what a
# first load uses), "b" the other one that a --replace writes beside it (see load).
OTHER_SLOT = {"": "b", "b": ""}


def slot_iris(graph: str, slot: str) -> tuple[str, str]:
    """The (facts, labels) named graph IRIs of ``graph``'s slot (graph names hold no '/')."""
    if not slot:
        return terms.graph_iri(graph), terms.entities_graph_iri(graph)
    base = f"{terms.graph_iri(graph)}/{slot}"
    return base, base + "/entities"


def require_store_directory(path: Path) -> None:
    """OSError naming ``path`` unless it holds an Oxigraph store."""
    if not is_store_directory(path):
        raise OSError(f"no Oxigraph store at {path} (run `kgengine load` first)")


def is_store_directory(path: Path) -> bool:
    """Whether ``path`` holds an Oxigraph store (its RocksDB ``CURRENT`` file)."""
    return (path / "CURRENT").is_file()


def check_location(path: Path, *, create: bool) -> None:
    """Refuse what is not a store directory before RocksDB writes anything there: a file,
    a non-empty directory that holds no store, and (without ``create``) a missing store."""
    if path.is_file() or (path.exists() and not path.is_dir()):
        raise StoreError(f"{path} is a file, not a store directory")
    if is_store_directory(path):
        return
    if path.is_dir() and any(path.iterdir()):
        if create:
            raise StoreError(f"{path} is not empty and holds no kgengine store: give `--store` a new "
                             "or empty directory, or an existing store")
        raise StoreError(f"no kgengine store at {path} (it is a directory with other files)")
    if not create:
        raise StoreError(f"no kgengine store at {path} (create one with `kgengine load …`)")
