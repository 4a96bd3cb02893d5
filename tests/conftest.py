"""Shared fixtures. Real data comes from ../shared/datasets (or $KGENGINE_SHARED: see
tests/shared_data.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.stores import FAMILY_GRAPHS, load_family, write_family_store
from kgengine.oxigraph.store import OxigraphStore
from shared_data import DATASETS

pytest_plugins = ["neo4j_server", "fake_llm"]  # a real Neo4j for tests marked neo4j; llm_server (fake_llm.py)


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    if not DATASETS.is_dir():
        pytest.fail(f"real datasets not found at {DATASETS} (set KGENGINE_SHARED)")
    return DATASETS


@pytest.fixture
def oxigraph_store(tmp_path: Path) -> Iterator[OxigraphStore]:
    store = OxigraphStore(str(tmp_path / "store"))
    yield store
    store.close()


# ---- a store with Family loaded, one fixture per backend (tests/helpers/stores.py loads it) ----
@pytest.fixture(scope="session")
def family_oxigraph(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OxigraphStore]:
    """A read-mostly on-disk Oxigraph store with the bundled Family KG (all splits) loaded
    as graph 'family' and facts.txt only as graph 'family-facts'."""
    store = OxigraphStore(str(tmp_path_factory.mktemp("family") / "store"))
    load_family(store)
    yield store
    store.close()


@pytest.fixture(scope="session")
def family_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same as a closed store directory, for tests that run kgengine in other processes
    (a server, `kgengine query`); they only read it."""
    return write_family_store(tmp_path_factory.mktemp("family-dir") / "store")


@pytest.fixture(scope="session")
def family_neo4j(neo4j_server: Any, neo4j_store: Any) -> dict[str, str]:
    """The bundled Family KG in Neo4j, as ``family_oxigraph`` has it; maps 'family' /
    'family-facts' to the graph names in the shared Neo4j."""
    names = {graph: neo4j_server.graph(graph) for graph in FAMILY_GRAPHS}
    load_family(neo4j_store, names, replace=True)
    return names
