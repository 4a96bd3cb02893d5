"""The one way a test store gets the bundled Family KG: all splits as graph ``family``,
facts.txt only as ``family-facts`` (the fixtures of tests/conftest.py use it on each backend)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kgengine.loaders import read_dataset
from kgengine.oxigraph.store import OxigraphStore

FAMILY_GRAPHS: dict[str, list[str] | None] = {"family": None, "family-facts": ["facts"]}  # graph -> splits


def load_family(store: Any, names: Mapping[str, str] | None = None, *, replace: bool = False) -> None:
    """Load ``family`` and ``family-facts`` into ``store`` (``names`` maps them to the graph
    names the store uses, a shared Neo4j's prefixed ones)."""
    for graph, splits in FAMILY_GRAPHS.items():
        data = read_dataset("family", splits=splits)
        store.load((names or {}).get(graph, graph), data.triples, dataset="family", splits=data.splits,
                   replace=replace)


def write_family_store(directory: Path) -> Path:
    """An Oxigraph store directory with Family loaded, closed again so that other processes
    (a server, `kgengine query`) can open it."""
    with OxigraphStore(str(directory)) as store:
        load_family(store)
    return directory
