"""Shared fixtures. Real data comes from ../shared/datasets (or $KGENGINE_SHARED: see
tests/shared_data.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kgengine.loaders import read_dataset
from kgengine.oxigraph.store import OxigraphStore
from shared_data import DATASETS

pytest_plugins = ["neo4j_server", "fake_llm"]  # a real Neo4j for tests marked neo4j; llm_server (fake_llm.py)


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    if not DATASETS.is_dir():
        pytest.fail(f"real datasets not found at {DATASETS} (set KGENGINE_SHARED)")
    return DATASETS


@pytest.fixture
def oxigraph_store(tmp_path: Path):
    store = OxigraphStore(str(tmp_path / "store"))
    yield store
    store.close()


@pytest.fixture(scope="session")
def family_store(tmp_path_factory: pytest.TempPathFactory):
    """A read-mostly on-disk Oxigraph store with the bundled Family KG (all splits) loaded
    as graph 'family' and facts.txt only as graph 'family-facts'."""
    store = OxigraphStore(str(tmp_path_factory.mktemp("family") / "store"))
    data = read_dataset("family")
    store.load("family", data.triples, dataset="family", splits=data.splits)
    facts = read_dataset("family", splits=["facts"])
    store.load("family-facts", facts.triples, dataset="family", splits=facts.splits)
    yield store
    store.close()
