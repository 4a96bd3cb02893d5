"""Shared fixtures. Real data comes from ../shared/datasets (or $KGENGINE_SHARED)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kgengine.loaders import read_dataset
from kgengine.oxigraph_store import OxigraphStore

REPO = Path(__file__).resolve().parent.parent
pytest_plugins = ["neo4j_server"]  # a real Neo4j for tests marked neo4j (tests/neo4j_server.py)


def _shared_dir() -> Path:
    env = os.environ.get("KGENGINE_SHARED")
    return Path(env) if env else REPO.parent / "shared"


SHARED = _shared_dir()
DATASETS = SHARED / "datasets"


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
